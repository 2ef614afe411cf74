// Reviewer QA's pure parts: which completed tasks are sampled for a second review (a keyed hash of
// the task id, so the choice is deterministic and cannot be steered by whoever picks task ids), and
// what two answers are compared on.
import { createHmac, hkdfSync } from "node:crypto";
import { canonicalJson } from "../../audit";
import { AppError } from "../../errors";
import { sha256Hex } from "../../lib/crypto";

const SALT = "safest-tools/reviewer-qa";
const keys = new Map<string, Uint8Array>();

/**
 * The sampling key: HKDF-SHA-256 of the REPORT_MASTER_KEY Worker secret (the one secret every
 * installation has), info `qa-sampling/v1`. Rotating that secret changes which tasks are sampled
 * from then on; what was sampled before stays recorded.
 */
export function qaSamplingKey(env: Env): Uint8Array {
  const secret = (env as { REPORT_MASTER_KEY?: string }).REPORT_MASTER_KEY;
  if (!secret || secret.length < 32) throw new AppError("qa.sampling_key_missing", "REPORT_MASTER_KEY (32 characters or more) is needed to sample tasks for QA.", { status: 503 });
  let key = keys.get(secret);
  if (!key) {
    key = new Uint8Array(hkdfSync("sha256", secret, SALT, "qa-sampling/v1", 32));
    keys.set(secret, key);
  }
  return key;
}

/** The first 32 bits of HMAC-SHA-256(key, taskId), as an unsigned integer. */
export function samplingHash(key: Uint8Array, taskId: string): number {
  return Number.parseInt(createHmac("sha256", key).update(taskId).digest("hex").slice(0, 8), 16);
}

/** Whether a task is sampled at `rate` (0..1): its hash is below rate·2^32. */
export function isSampled(key: Uint8Array, taskId: string, rate: number): boolean {
  return samplingHash(key, taskId) < Math.floor(rate * 2 ** 32);
}

/** The response field answers are compared on when a queue's QA settings name none. */
export const DEFAULT_COMPARE_FIELD = "outcome";

/**
 * What two answers are compared on: the string (or boolean, or number) value of the queue's compare
 * field (`outcome` by default, the field appeal and review schemas use) as `value:<v>`; a response
 * without it is compared whole, as `response:sha256:<hex>` of its canonical JSON (only a digest is
 * kept, never free text). Two answers agree when their labels are equal.
 */
export async function answerLabel(response: unknown, field: string = DEFAULT_COMPARE_FIELD): Promise<string> {
  const value = response !== null && typeof response === "object" && !Array.isArray(response) ? (response as Record<string, unknown>)[field] : undefined;
  if (typeof value === "string" || typeof value === "boolean" || typeof value === "number") return `value:${String(value).slice(0, 200)}`;
  return `response:sha256:${await sha256Hex(canonicalJson(response ?? null))}`;
}

/** A label as the figures show it: the compared value itself, or `response <digest prefix>`. */
export function labelName(label: string): string {
  return label.startsWith("value:") ? label.slice("value:".length) : `response ${label.slice("response:sha256:".length, "response:sha256:".length + 12)}`;
}
