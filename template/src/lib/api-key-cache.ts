// API keys that authenticated in this isolate, for a few seconds: a key's lookup is
// a D1 round trip on every request, and intake sends many requests with one key. The cost is a
// bounded revocation lag: a key revoked through another isolate keeps working here for at most
// API_KEY_CACHE_TTL_MS; a key revoked through this isolate is refused at once (forgetApiKey).
// Entries are keyed by the key's SHA-256 (as stored), never by the key itself.

export interface CachedApiKey {
  id: string;
  installationId: string;
  scopes: readonly string[];
  /** The person a reviewer's key belongs to; null for an automation key. */
  reviewer: string | null;
}

/** The longest a key revoked elsewhere is still accepted by this isolate. */
export const API_KEY_CACHE_TTL_MS = 5_000;
const CACHE_LIMIT = 1_000;

const entries = new Map<string, { key: CachedApiKey; until: number }>();
/** Keys revoked (and installations removed) through this isolate, with when: a lookup that raced it is not remembered. */
const revoked = new Map<string, number>();
const REVOKED_KEPT_MS = 60_000;

/** The key with this hash, if it authenticated here less than API_KEY_CACHE_TTL_MS ago. */
export function cachedApiKey(keyHash: string, now = Date.now()): CachedApiKey | null {
  const entry = entries.get(keyHash);
  if (!entry) return null;
  if (entry.until <= now) {
    entries.delete(keyHash);
    return null;
  }
  return entry.key;
}

/** Remembers a key just read from D1 as valid, unless it was revoked through this isolate since its read began (`readStartedAt`). */
export function rememberApiKey(keyHash: string, key: CachedApiKey, readStartedAt: number, now = Date.now()): void {
  const revokedAt = Math.max(revoked.get(key.id) ?? 0, revoked.get(key.installationId) ?? 0);
  if (revokedAt >= readStartedAt) return;
  if (entries.size >= CACHE_LIMIT) entries.clear();
  entries.set(keyHash, { key, until: now + API_KEY_CACHE_TTL_MS });
}

/** A key revoked through this isolate: never served from the cache again. */
export function forgetApiKey(keyId: string, now = Date.now()): void {
  for (const [hash, entry] of entries) if (entry.key.id === keyId) entries.delete(hash);
  mark(keyId, now);
}

/** Every key of an installation being removed through this isolate (backup.ts): none is served from the cache again. */
export function forgetInstallationKeys(installationId: string, now = Date.now()): void {
  for (const [hash, entry] of entries) if (entry.key.installationId === installationId) entries.delete(hash);
  mark(installationId, now);
}

function mark(id: string, now: number): void {
  // Kept for a while so a lookup still in flight is not remembered; a revoked key never comes back from D1.
  for (const [old, at] of revoked) if (at < now - REVOKED_KEPT_MS) revoked.delete(old);
  revoked.set(id, now);
}
