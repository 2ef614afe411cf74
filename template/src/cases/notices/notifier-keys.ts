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

/**
 * The notifier hash of a reporter id in an installation, under the current REPORT_MASTER_KEY
 * (`current`), and under REPORT_MASTER_KEY_PREVIOUS while one is set (`all`, for matching rows
 * written before a rotation). The same id in another installation has an unrelated hash.
 */
export function notifierHashes(env: Env, installationId: string, reporterId: string): { current: string; all: string[] } {
  const secrets = env as { REPORT_MASTER_KEY?: string; REPORT_MASTER_KEY_PREVIOUS?: string };
  if (!secrets.REPORT_MASTER_KEY || secrets.REPORT_MASTER_KEY.length < 32) {
    throw new AppError("notifier.key_missing", "REPORT_MASTER_KEY (32 characters or more) is needed to recognise notifiers.", { status: 503 });
  }
  const hash = (secret: string) => createHmac("sha256", keyOf(secret, installationId)).update(reporterId).digest("hex");
  const current = hash(secrets.REPORT_MASTER_KEY);
  const previous = secrets.REPORT_MASTER_KEY_PREVIOUS && secrets.REPORT_MASTER_KEY_PREVIOUS.length >= 32 ? hash(secrets.REPORT_MASTER_KEY_PREVIOUS) : null;
  return { current, all: previous && previous !== current ? [current, previous] : [current] };
}
