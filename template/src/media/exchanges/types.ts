// The one interface every hash exchange speaks to the sync (sync.ts): fetch a page of updates from
// a cursor, and optionally contribute a confirmed hash back. Each implementation speaks its
// exchange's documented wire format (threatexchange.ts, ncmec.ts, stopncii.ts); the cursor is the
// implementation's own JSON, persisted by the sync only after the page it came with is applied.

/** THE list of exchanges a bank can follow (the schema and the migration's CHECK say the same). */
export const HASH_EXCHANGE_KINDS = ["threatexchange", "ncmec", "stopncii"] as const;
export type HashExchangeKind = (typeof HASH_EXCHANGE_KINDS)[number];

/** An entry the exchange has (again or for the first time): its id there, its PDQ hash, its labels. */
export interface ExchangeUpsert {
  id: string;
  hash: string;
  tags: string[];
  /** What the exchange's feedback on this entry names, when not its id (ThreatExchange: a descriptor id). */
  ref?: string;
}

/** An entry the exchange withdrew: by id, with its hash when the exchange says it. */
export interface ExchangeDelete {
  id: string;
  hash?: string;
}

export interface ExchangePage {
  upserts: ExchangeUpsert[];
  deletes: ExchangeDelete[];
  /** Entries of other signal types (MD5, video hashes) or malformed hashes, left out. */
  skipped: number;
  /** Where the next page starts; persisted once this page is applied. */
  nextCursor: unknown;
  /** No page follows for now: the next sync starts from nextCursor after the follow's interval. */
  done: boolean;
}

export interface ExchangeContext {
  /** The exchange's base URL as the follow stores it (checked by the egress rules). */
  baseUrl: string;
  credentials: Record<string, string>;
  filters: Record<string, string>;
  env: Env;
  /** The sync's clock (seconds since the epoch). */
  now: number;
}

export interface ContributionInput {
  /** The hash sent (contributeEntryHash: the matched entry's; otherwise the confirmed media's). */
  hash: string;
  tags: string[];
  /** The exchange's entries that put the matched hash in the bank (none when it was added by hand). */
  entries: { id: string; ref: string | null }[];
  /** Bits between the confirmed media's hash and the matched entry's. */
  distance: number;
}

export interface HashExchange {
  kind: HashExchangeKind;
  /** Where the exchange's production API lives, when a follow names no base URL. */
  defaultBaseUrl: string;
  /** Entries a page is asked for (or, where the request names none, the exchange's own page size); a page of more than twice it is refused. */
  pageSize: number;
  /** Credential fields, each required unless listed in optionalCredentials. */
  credentials: readonly string[];
  optionalCredentials?: readonly string[];
  /** Filter fields the exchange understands; those listed in requiredFilters must be given. */
  filters: readonly string[];
  requiredFilters?: readonly string[];
  /** One page of updates from `cursor` (null: from the beginning). Throws an AppError on an HTTP failure (http.ts). */
  fetchPage(ctx: ExchangeContext, cursor: unknown): Promise<ExchangePage>;
  /** Sends a confirmed hash back, when the exchange takes it; absent where it does not (`contributionRefusal` says why). */
  contribute?(ctx: ExchangeContext, input: ContributionInput): Promise<{ reference: string | null }>;
  contributionRefusal?: string;
  /** Whether a contribution is about the exchange's own entry (feedback on it) rather than a new hash. */
  contributeEntryHash?: boolean;
}

/** A PDQ hash as banks store it: 64 lowercase hex digits, or null. */
export function pdqHashOf(value: unknown): string | null {
  return typeof value === "string" && /^[0-9a-fA-F]{64}$/u.test(value) ? value.toLowerCase() : null;
}

/** Tags as banks store them: non-empty, at most 100 characters, at most 20, no duplicates. */
export function tagsOf(values: Iterable<unknown>): string[] {
  const out = new Set<string>();
  for (const value of values) {
    if (typeof value !== "string") continue;
    const tag = value.trim().slice(0, 100);
    if (tag) out.add(tag);
    if (out.size === 20) break;
  }
  return [...out].sort();
}
