// Keyed hashes of people's ids: a named person's sealed rows are found by an index of these
// (reports.reporter_key, subject_owner_key, appeals.appellant_key), and reviewers appear in audit
// details by a pseudonymous id instead of their email or name. HMAC-SHA-256 under keys derived
// with HKDF from the REPORT_MASTER_KEY Worker secret; synchronous (node:crypto), so a value is
// computed where its statement is built.
import { env as workerEnv } from "cloudflare:workers";
import { createHmac, hkdfSync } from "node:crypto";
import { AppError } from "../errors";

const SALT = "safest-tools/person-keys";
/** The index's version: a row indexed under another one (e.g. after a master key change) is indexed again. */
export const PERSON_KEYS_VERSION = 1;
const keys = new Map<string, Uint8Array>();

function key(info: string, env: { REPORT_MASTER_KEY?: string }): Uint8Array {
  const secret = env.REPORT_MASTER_KEY;
  if (!secret || secret.length < 32) throw new AppError("crypto.master_key_missing", "REPORT_MASTER_KEY (32 characters or more) is needed to index people's ids.", { status: 503 });
  const name = `${info}:${secret}`;
  let derived = keys.get(name);
  if (!derived) {
    derived = new Uint8Array(hkdfSync("sha256", secret, SALT, info, 32));
    keys.set(name, derived);
  }
  return derived;
}

/**
 * The index key of a person's id in an installation (the same for a reporter, a subject owner and
 * an appellant, so one id finds all of a person's rows), or null for no id.
 */
export function personKey(installationId: string, id: string | null | undefined, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): string | null {
  if (typeof id !== "string" || id.length === 0) return null;
  return `pk1_${createHmac("sha256", key("person-index/v1", env)).update(`${installationId}\u0000${id}`).digest("hex")}`;
}

/**
 * The 16-byte key under which an archived case's subject is found (cases/archive: archived_subjects
 * and the subject's ref object in R2): keyed, so a guessable subject id (a handle) cannot be
 * confirmed from the key, and gone with the master key.
 */
export function subjectArchiveKey(installationId: string, kind: string, id: string, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): Uint8Array {
  const hex = createHmac("sha256", key("case-archive-subject/v1", env)).update(`${installationId}\u0000${kind}\u0000${id}`).digest("hex");
  return Uint8Array.from({ length: 16 }, (_, i) => Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16));
}

/**
 * How a reviewer (a console user's email, or the name an API key's tool gives) appears in audit
 * details: `rvw_` and 20 hex digits of a keyed hash, the same for the same reviewer in every event
 * of an installation, so the trail still shows who did what without holding the email or name.
 */
export function reviewerAuditId(installationId: string, who: string | null | undefined, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): string | null {
  if (typeof who !== "string" || who.length === 0) return null;
  return `rvw_${createHmac("sha256", key("audit-reviewer/v1", env)).update(`${installationId}\u0000${who}`).digest("hex").slice(0, 20)}`;
}

/** The fields a search term is computed for: a description's words, a reporter's id and contact. */
export type SearchField = "word" | "reporter_id" | "reporter_contact";

/**
 * A search term (cases/search): 20 hex digits of a keyed hash of the installation, the field and
 * the normalized value, so equal values of one field in one installation give the same term and
 * nothing else can be read from it; gone with the master key, like every key here.
 */
export function searchTerm(installationId: string, field: SearchField, value: string, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): string {
  return createHmac("sha256", key("search-term/v1", env)).update(`${installationId}\u0000${field}\u0000${value}`).digest("hex").slice(0, 20);
}

/**
 * How an entity of the event stream (an account, an IP, a device…) is named where detection keeps
 * state about it (counters, labels): `ek1_` and 32 hex digits of a keyed hash of installation, kind
 * and value, so neither D1 nor a counter shard holds the id or address, and a reader who knows
 * the entity computes the same key.
 */
export function entityKey(installationId: string, kind: string, value: string, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): string {
  return `ek1_${createHmac("sha256", key("detection-entity/v1", env)).update(`${installationId}\u0000${kind}\u0000${value}`).digest("hex").slice(0, 32)}`;
}

/**
 * How a task's response appears in audit details and handoffs: `hmac-sha256:` and the keyed hash of
 * the installation, the task and the response. Keyed (and bound to the task), so a reviewer who can
 * read the audit trail cannot recover a short answer by hashing the few possible ones, nor tell two
 * tasks' answers equal: a QA review stays blind. Whoever holds the master key can still prove which
 * response was recorded.
 */
export function taskResponseDigest(installationId: string, taskId: string, responseJson: string, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): string {
  return `hmac-sha256:${createHmac("sha256", key("task-response/v1", env)).update(`${installationId}\u0000${taskId}\u0000${responseJson}`).digest("hex")}`;
}

/**
 * The keyed hash of a signal that ties accounts together (an IP, a device id, an email, a payment
 * fingerprint; cases/reports/signals.ts): 32 hex digits, per installation and kind, so accounts
 * sharing a signal are found without the signal being stored.
 */
export function signalKey(installationId: string, kind: string, value: string, env: { REPORT_MASTER_KEY?: string } = workerEnv as { REPORT_MASTER_KEY?: string }): string {
  return createHmac("sha256", key("account-signal/v1", env)).update(`${installationId}\u0000${kind}\u0000${value}`).digest("hex").slice(0, 32);
}
