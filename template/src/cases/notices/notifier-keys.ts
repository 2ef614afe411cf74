// Notifiers are known by a keyed hash of their reporter id (the id itself is sealed with each
// report): HMAC-SHA-256 under a key derived with HKDF from REPORT_MASTER_KEY, per installation.
import { createHmac, hkdfSync } from "node:crypto";
import { AppError } from "../../errors";

const SALT = "safest-tools/notifiers";
const keys = new Map<string, Uint8Array>();

function keyOf(secret: string, installationId: string): Uint8Array {
  const cacheKey = `${installationId}\n${secret}`;
  let key = keys.get(cacheKey);
  if (!key) {
    key = new Uint8Array(hkdfSync("sha256", secret, SALT, `notifier-id/v1:${installationId}`, 32));
    keys.set(cacheKey, key);
  }
  return key;
}

/** Hex digits of a notifier hash as written (128 bits: notifiers of one installation kept apart). */
const HASH_DIGITS = 32;

/**
 * The notifier hash of a reporter id in an installation, under the current REPORT_MASTER_KEY
 * (`current`), and under REPORT_MASTER_KEY_PREVIOUS while one is set (`all`, for matching rows
 * written before a rotation). The same id in another installation has an unrelated hash.
 * A hash is the HMAC's first 32 hex digits: it is repeated in every notice's row and index entry,
 * and rows written before hold all 64, which `all` names too.
 */
export function notifierHashes(env: Env, installationId: string, reporterId: string): { current: string; all: string[] } {
  const secrets = env as { REPORT_MASTER_KEY?: string; REPORT_MASTER_KEY_PREVIOUS?: string };
  if (!secrets.REPORT_MASTER_KEY || secrets.REPORT_MASTER_KEY.length < 32) {
    throw new AppError("notifier.key_missing", "REPORT_MASTER_KEY (32 characters or more) is needed to recognise notifiers.", { status: 503 });
  }
  const hash = (secret: string) => createHmac("sha256", keyOf(secret, installationId)).update(reporterId).digest("hex");
  const full = hash(secrets.REPORT_MASTER_KEY);
  const previous = secrets.REPORT_MASTER_KEY_PREVIOUS && secrets.REPORT_MASTER_KEY_PREVIOUS.length >= 32 ? hash(secrets.REPORT_MASTER_KEY_PREVIOUS) : null;
  const forms = (digest: string) => [digest.slice(0, HASH_DIGITS), digest];
  return { current: full.slice(0, HASH_DIGITS), all: [...new Set([...forms(full), ...(previous ? forms(previous) : [])])] };
}
