// The audit trail's keys: derived with HKDF from the AUDIT_CHECKPOINT_KEY Worker secret (and
// AUDIT_CHECKPOINT_KEY_PREVIOUS while a new one is rolled in), each named by a key id derived from
// it, so a MAC made under an older key still verifies after a rotation. Synchronous (node:crypto
// under nodejs_compat), because an event's MAC is computed where its statement is built.
import { env as workerEnv } from "cloudflare:workers";
import { createHmac, hkdfSync } from "node:crypto";
import { AppError } from "../errors";
import { timingSafeEqual } from "../lib/crypto";

export interface AuditKey {
  id: string;
  mac(text: string): string;
}

export interface AuditKeys {
  /** The key new MACs are made with; null when AUDIT_CHECKPOINT_KEY is not configured. */
  current: AuditKey | null;
  byId: ReadonlyMap<string, AuditKey>;
}

const SALT = "safest-tools/audit";
const MIN_SECRET_LENGTH = 32;
const cache = new Map<string, AuditKey>();

function deriveKey(secret: string): AuditKey {
  const cached = cache.get(secret);
  if (cached) return cached;
  const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const macKey = new Uint8Array(hkdfSync("sha256", secret, SALT, "audit-mac/v1", 32));
  const key: AuditKey = {
    id: `ak_${hex(hkdfSync("sha256", secret, SALT, "audit-key-id/v1", 8))}`,
    mac: (text) => createHmac("sha256", macKey).update(text).digest("hex"),
  };
  cache.set(secret, key);
  return key;
}

type KeyEnv = { AUDIT_CHECKPOINT_KEY?: string; AUDIT_CHECKPOINT_KEY_PREVIOUS?: string };

/** The configured keys (a secret shorter than 32 characters is ignored, as if absent). */
export function auditKeys(env: KeyEnv = workerEnv as KeyEnv): AuditKeys {
  const usable = (secret: string | undefined) => (typeof secret === "string" && secret.length >= MIN_SECRET_LENGTH ? deriveKey(secret) : null);
  const current = usable(env.AUDIT_CHECKPOINT_KEY);
  const previous = usable(env.AUDIT_CHECKPOINT_KEY_PREVIOUS);
  const byId = new Map<string, AuditKey>();
  for (const key of [previous, current]) if (key) byId.set(key.id, key);
  return { current, byId };
}

/** `<keyId>:<hex>` under the current key, or null without one. */
export function signText(keys: AuditKeys, text: string): { keyId: string; mac: string } | null {
  return keys.current ? { keyId: keys.current.id, mac: keys.current.mac(text) } : null;
}

/** Whether `mac` is the MAC of `text` under the key named `keyId` (unknown key ids never verify). */
export function macVerifies(keys: AuditKeys, keyId: string, text: string, mac: string): boolean {
  const key = keys.byId.get(keyId);
  return key !== undefined && timingSafeEqual(key.mac(text), mac);
}

/**
 * A deployment without AUDIT_CHECKPOINT_KEY (or with one shorter than 32 characters) would keep an
 * unkeyed chain that verifies whatever was rewritten: it serves nothing (503
 * `deployment.audit_key_missing`) and runs no schedule. Local runs have one: `npm start` generates
 * it into .dev.vars, and the tests set one.
 */
export function assertAuditKeyConfigured(env: KeyEnv): void {
  if (auditKeys(env).current) return;
  throw new AppError("deployment.audit_key_missing", "This deployment has no AUDIT_CHECKPOINT_KEY of 32 characters or more, so its audit trail could not be verified; set the secret (wrangler secret put AUDIT_CHECKPOINT_KEY) and retry.", {
    status: 503,
  });
}
