// Built-in components a team can use on day one, computed by the host: the subject's history, and
// keyword, pattern, domain and hash banks (exact hashes inline, PDQ through the installation's banks). Matching is linear in the input (no regular
// expressions over user text), so no input can make it backtrack.
import { errorCode } from "../errors";
import { matchHashBank } from "../media";
import type { AuthorizedRun, JsonObject, JsonValue } from "../workflows";
import { ComponentExecutionError } from "./components";

export const BUILTIN_COMPONENTS = ["subject_history", "keyword_bank", "domain_list", "hash_bank"] as const;
export type BuiltinComponent = (typeof BUILTIN_COMPONENTS)[number];

const MAX_TEXT = 200_000;
const MAX_BANK = 5_000;

function strings(value: JsonValue | undefined, what: string): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) throw new ComponentExecutionError("component.config_invalid", false, `${what} must be a list of strings.`);
  if (value.length > MAX_BANK) throw new ComponentExecutionError("component.config_invalid", false, `${what} may hold at most ${MAX_BANK} entries.`);
  return value as string[];
}

function textOf(input: JsonObject): string {
  const text = typeof input.text === "string" ? input.text : Array.isArray(input.texts) ? input.texts.filter((t) => typeof t === "string").join("\n") : "";
  return text.slice(0, MAX_TEXT).toLowerCase();
}

/**
 * Glob match (`*` any run of characters, `?` one character) by the classic two-pointer walk with a
 * single backtrack point: O(text × pattern) at worst, never exponential.
 */
export function globMatch(text: string, pattern: string): boolean {
  let t = 0;
  let p = 0;
  let star = -1;
  let mark = 0;
  while (t < text.length) {
    if (p < pattern.length && (pattern[p] === "?" || pattern[p] === text[t])) {
      t += 1;
      p += 1;
    } else if (p < pattern.length && pattern[p] === "*") {
      star = p;
      mark = t;
      p += 1;
    } else if (star !== -1) {
      p = star + 1;
      mark += 1;
      t = mark;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === "*") p += 1;
  return p === pattern.length;
}

/** Keywords match as substrings; patterns are globs matched against each word-ish token and the whole text. */
function keywordBank(config: JsonObject, input: JsonObject): JsonObject {
  const text = textOf(input);
  const keywords = config.keywords === undefined ? [] : strings(config.keywords, "config.keywords");
  const patterns = config.patterns === undefined ? [] : strings(config.patterns, "config.patterns");
  const hits = keywords.filter((keyword) => keyword !== "" && text.includes(keyword.toLowerCase()));
  const tokens = text.split(/[\s,.;:!?()[\]{}"'<>]+/u).filter(Boolean);
  const patternHits = patterns.filter((pattern) => {
    const lowered = pattern.toLowerCase();
    return tokens.some((token) => globMatch(token, lowered)) || globMatch(text, lowered);
  });
  return { matched: hits.length + patternHits.length > 0, keywords: hits, patterns: patternHits, count: hits.length + patternHits.length };
}

function hostOf(candidate: string): string | null {
  try {
    return new URL(candidate.includes("://") ? candidate : `https://${candidate}`).hostname.toLowerCase();
  } catch {
    return null;
  }
}

/** Hosts of `input.urls` (and URLs found in `input.text`) against a domain list, subdomains included. */
function domainList(config: JsonObject, input: JsonObject): JsonObject {
  const domains = strings(config.domains, "config.domains").map((d) => d.toLowerCase().replace(/^\*\./u, ""));
  const candidates = Array.isArray(input.urls) ? input.urls.filter((u): u is string => typeof u === "string") : [];
  if (typeof input.text === "string") {
    for (const word of input.text.slice(0, MAX_TEXT).split(/\s+/u)) if (/^https?:\/\//iu.test(word)) candidates.push(word);
  }
  const hosts = [
    ...new Set(
      candidates
        .slice(0, 1_000)
        .map(hostOf)
        .filter((h): h is string => h !== null),
    ),
  ];
  const matches = hosts.filter((host) => domains.some((domain) => host === domain || host.endsWith(`.${domain}`)));
  return { matched: matches.length > 0, matches, checked: hosts.length };
}

const PDQ_HEX = /^[0-9a-f]{64}$/u;

/**
 * Exact SHA-256 (or any hex digest) matches of `input.hashes` / `input.sha256` against
 * `config.hashes`, and PDQ matches of `input.pdq` (an image's hash, or it and its dihedral
 * variants, at most 8; `input.pdq_quality` its quality) and of the items of `input.evidence` that
 * carry `pdq` (a report's evidence: map `content.evidence`) against the installation's banks named
 * by `config.bank_id` / `config.bank_ids`, each with its own threshold and quality floor. A PDQ
 * match lists the entry (a reference, not its hash: the output is read by reviewers), its distance,
 * its tags and which evidence item matched; an evidence item's match is `untrusted: true`, since
 * its hash and quality are what the reporter sent, not computed here from the bytes. An image
 * without a quality is under any floor above 0.
 */
async function hashBank(env: Env, run: AuthorizedRun, config: JsonObject, input: JsonObject): Promise<JsonObject> {
  const bankIds = [...(typeof config.bank_id === "string" ? [config.bank_id] : []), ...(config.bank_ids === undefined ? [] : strings(config.bank_ids, "config.bank_ids"))];
  const bank = new Set((config.hashes === undefined && bankIds.length > 0 ? [] : strings(config.hashes, "config.hashes")).map((h) => h.toLowerCase()));
  const given = [...(Array.isArray(input.hashes) ? input.hashes : []), ...(typeof input.sha256 === "string" ? [input.sha256] : [])].filter((h): h is string => typeof h === "string").map((h) => h.toLowerCase());
  const matches = given.filter((hash) => bank.has(hash));
  if (bankIds.length === 0) return { matched: matches.length > 0, matches };
  if (bankIds.length > 20) throw new ComponentExecutionError("component.config_invalid", false, "config.bank_ids may name at most 20 banks.");
  const pdq = (Array.isArray(input.pdq) ? input.pdq : typeof input.pdq === "string" ? [input.pdq] : []).filter((h): h is string => typeof h === "string").map((h) => h.toLowerCase());
  if (pdq.length > 8 || pdq.some((h) => !PDQ_HEX.test(h))) throw new ComponentExecutionError("component.input_invalid", false, "input.pdq must be a PDQ hash (64 hex digits) or a list of at most 8 (an image's and its dihedral variants).");
  // One image from input.pdq (with input.pdq_quality), and each item of input.evidence (a report's
  // evidence, mapped from content.evidence) that carries a pdq hash, at most 20.
  const images: { hashes: string[]; quality?: number; evidence?: number }[] = pdq.length > 0 ? [{ hashes: pdq, ...(typeof input.pdq_quality === "number" ? { quality: input.pdq_quality } : {}) }] : [];
  (Array.isArray(input.evidence) ? input.evidence : []).forEach((item, position) => {
    if (!item || typeof item !== "object" || Array.isArray(item) || typeof item.pdq !== "string" || !PDQ_HEX.test(item.pdq.toLowerCase())) return;
    images.push({ hashes: [item.pdq.toLowerCase()], evidence: position, ...(typeof item.pdqQuality === "number" ? { quality: item.pdqQuality } : {}) });
  });
  if (images.length > 21) throw new ComponentExecutionError("component.input_invalid", false, "At most 20 evidence items with a pdq hash are matched per node.");
  const pdqMatches: JsonObject[] = [];
  let belowQualityFloor = false;
  for (const image of images) {
    for (const bankId of bankIds) {
      try {
        const result = await matchHashBank(env, run.installationId, bankId, { hashes: image.hashes, ...(image.quality === undefined ? {} : { quality: image.quality }) });
        belowQualityFloor ||= result.belowQualityFloor;
        for (const m of result.matches)
          pdqMatches.push({ bankId, bankName: result.bank.name, entry: m.entry, distance: m.distance, tags: m.tags, variant: m.query, ...(image.evidence === undefined ? {} : { evidence: image.evidence, untrusted: true }) });
      } catch (error) {
        if (errorCode(error) === "hash_bank.not_found") throw new ComponentExecutionError("component.config_invalid", false, "config.bank_id names no hash bank of this installation.");
        throw error;
      }
    }
  }
  pdqMatches.sort((a, b) => (a.distance as number) - (b.distance as number));
  return { matched: matches.length + pdqMatches.length > 0, matches, pdq: { matched: pdqMatches.length > 0, matches: pdqMatches, belowQualityFloor } };
}

/** Reports and decisions about the run's subject (or `input.subject`), from the host's own records. */
async function subjectHistory(env: Env, run: AuthorizedRun, input: JsonObject): Promise<JsonObject> {
  let subject = input.subject && typeof input.subject === "object" && !Array.isArray(input.subject) ? (input.subject as { kind?: unknown; id?: unknown }) : null;
  if (!subject && run.reportId) {
    subject = await env.DB.prepare(`SELECT subject_kind AS kind, subject_id AS id FROM reports WHERE installation_id = ?1 AND id = ?2`).bind(run.installationId, run.reportId).first<{ kind: string; id: string }>();
  }
  if (!subject || typeof subject.kind !== "string" || typeof subject.id !== "string") {
    throw new ComponentExecutionError("component.input_invalid", false, "subject_history needs a run with a report, or input.subject { kind, id }.");
  }
  const [reports, decisions] = await env.DB.batch<Record<string, JsonValue>>([
    // A subject's reports are its case's (intake files every report in the one case of its subject):
    // the case by its subject, then its reports by case.
    env.DB.prepare(`SELECT category, COUNT(*) AS count, MIN(created_at) AS first, MAX(created_at) AS last FROM reports
      WHERE case_id = (SELECT id FROM cases WHERE installation_id = ?1 AND subject_kind = ?2 AND subject_id = ?3) AND installation_id = ?1
      GROUP BY category ORDER BY count DESC`).bind(run.installationId, subject.kind, subject.id),
    env.DB.prepare(`SELECT outcome, policy_category AS category, decided_at AS decidedAt FROM decisions
      WHERE installation_id = ?1 AND subject_kind = ?2 AND subject_id = ?3 ORDER BY decided_at DESC LIMIT 20`).bind(run.installationId, subject.kind, subject.id),
  ]);
  const byCategory = reports!.results;
  return {
    subject: { kind: subject.kind, id: subject.id },
    reportCount: byCategory.reduce((sum, row) => sum + Number(row.count), 0),
    reportsByCategory: byCategory,
    decisionCount: decisions!.results.length,
    decisions: decisions!.results,
  };
}

export async function executeBuiltin(env: Env, name: string, input: { run: AuthorizedRun; config: JsonObject; input: JsonObject }): Promise<JsonObject> {
  switch (name as BuiltinComponent) {
    case "keyword_bank":
      return keywordBank(input.config, input.input);
    case "domain_list":
      return domainList(input.config, input.input);
    case "hash_bank":
      return hashBank(env, input.run, input.config, input.input);
    case "subject_history":
      return subjectHistory(env, input.run, input.input);
    default:
      throw new ComponentExecutionError("component.unknown", false, `There is no built-in component named ${name}.`);
  }
}
