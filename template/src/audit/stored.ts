// The stored form of an audit event (migration 0036). Two forms live in audit_events side by side:
//
// - v1 (every event written before 0036): a random UUID `id`, the `idempotency_key` text, and
//   `prev_hash`, `hash` ("sha256:<hex>") and `entry_mac` ("<keyId>:<hex>") as the text they are.
// - v2, lean (every event written since): no idempotency key text (`idempotency_key` is NULL); the
//   id is a digest of the installation and the idempotency key (so the id is what makes a repeated
//   write do nothing, and nothing is stored twice); no `prev_hash` (the link is the previous
//   event's hash, which the walk over the chain holds anyway); `hash` as base64url instead of hex,
//   and `entry_mac` as the key id's 8 bytes and the MAC's 32 in one base64url text; `created_at` as the integer of milliseconds since the epoch when the
//   time is an ISO 8601 text that converts back to exactly itself (as every time the platform writes).
//
// Everything outside this file sees one shape (AuditRow): hashes as "sha256:<hex>" and MACs as
// "<keyId>:<hex>", whichever form the row is stored in. The hash and the MAC of a v2 event are
// computed over a v2 text (chain.ts eventHash, events.ts entryMacText), which commits to the id and
// so to the idempotency key; a v1 event keeps its v1 texts, so events written before still verify.
import { sha256HexSync } from "../lib/crypto";

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64_INDEX = new Map([...B64].map((char, index) => [char, index]));
/** 32 bytes as base64url without padding. */
const B64_32 = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/u;
const HEX_32 = /^[0-9a-f]{64}$/u;

/** Lowercase hex as base64url without padding (hex of whole bytes). */
export function hexToBase64url(hex: string): string {
  let out = "";
  for (let i = 0; i < hex.length; i += 6) {
    const chunk = hex.slice(i, i + 6);
    const bits = Number.parseInt(chunk.padEnd(6, "0"), 16);
    const chars = Math.ceil((chunk.length * 4) / 6);
    for (let c = 0; c < chars; c++) out += B64[(bits >> (18 - 6 * c)) & 63];
  }
  return out;
}

/** base64url without padding back to lowercase hex (whole bytes only). */
export function base64urlToHex(text: string): string {
  let hex = "";
  for (let i = 0; i < text.length; i += 4) {
    const chunk = text.slice(i, i + 4);
    let bits = 0;
    for (let c = 0; c < 4; c++) bits = (bits << 6) | (c < chunk.length ? B64_INDEX.get(chunk[c]!)! : 0);
    const bytes = chunk.length === 4 ? 3 : chunk.length - 1;
    hex += bits
      .toString(16)
      .padStart(6, "0")
      .slice(0, bytes * 2);
  }
  return hex;
}

/**
 * The id of a v2 event: the first 16 bytes of SHA-256 over the installation and the idempotency
 * key, base64url (22 characters). Unique per installation and key, so the unique index on `id`
 * is the one that makes a repeated write do nothing.
 */
export function auditEventId(installationId: string, idempotencyKey: string): string {
  return hexToBase64url(sha256HexSync(`audit-event-id/v2\n${installationId}\n${idempotencyKey}`).slice(0, 32));
}

/** A hash as stored in a v2 row: "sha256:<hex>" → 43 base64url characters (anything else as it is). */
export function storeHash(hash: string): string {
  return hash.startsWith("sha256:") && HEX_32.test(hash.slice(7)) ? hexToBase64url(hash.slice(7)) : hash;
}

/** A stored hash as the chain uses it ("sha256:<hex>"): a v2 value is converted, a v1 value is returned as it is. */
export function readHash(stored: string | null): string | null {
  return stored !== null && B64_32.test(stored) ? `sha256:${base64urlToHex(stored)}` : stored;
}

/** A key id as keys.ts derives it: "ak_" and 8 bytes in hex. */
const KEY_ID = /^ak_[0-9a-f]{16}$/u;
/** 40 bytes (a key id's 8 and a MAC's 32) as base64url without padding. */
const B64_40 = /^[A-Za-z0-9_-]{53}[AQgw]$/u;

/**
 * An entry MAC as stored in a v2 row: the key id's 8 bytes and the MAC's 32 as one base64url text
 * (54 characters, for "<keyId>:<hex>"'s 84); a key id of another form as "<keyId>:<base64url>".
 */
export function storeMac(keyId: string, macHex: string): string {
  if (!HEX_32.test(macHex)) return `${keyId}:${macHex}`;
  return KEY_ID.test(keyId) ? hexToBase64url(`${keyId.slice(3)}${macHex}`) : `${keyId}:${hexToBase64url(macHex)}`;
}

/** A stored entry MAC as "<keyId>:<hex>" (a v1 value is returned as it is). */
export function readMac(stored: string | null): string | null {
  if (stored === null) return null;
  if (B64_40.test(stored)) {
    const hex = base64urlToHex(stored);
    return `ak_${hex.slice(0, 16)}:${hex.slice(16)}`;
  }
  const separator = stored.indexOf(":");
  const mac = stored.slice(separator + 1);
  return separator > 0 && B64_32.test(mac) ? `${stored.slice(0, separator)}:${base64urlToHex(mac)}` : stored;
}

/**
 * A v2 row's `created_at` as stored: the milliseconds since the epoch when `at` is the ISO 8601
 * text of exactly that instant (`Date.toISOString()`), else `at` itself (read back unchanged).
 */
export function storeCreatedAt(at: string): string | number {
  const ms = Date.parse(at);
  return Number.isSafeInteger(ms) && ms >= 0 && new Date(ms).toISOString() === at ? ms : at;
}

/**
 * SQL for a `created_at` column read as the ISO 8601 text every query and every hash uses: an
 * integer (or a real, as a restored backup binds numbers) of milliseconds becomes
 * "YYYY-MM-DDTHH:MM:SS.mmmZ", exactly as `Date.toISOString()` writes it; a text is left as it is.
 */
export function createdAtText(column: string): string {
  const ms = `CAST(${column} AS INTEGER)`;
  return `(CASE WHEN typeof(${column}) IN ('integer', 'real') THEN strftime('%Y-%m-%dT%H:%M:%S', ${ms} / 1000, 'unixepoch') || printf('.%03dZ', ${ms} % 1000) ELSE ${column} END)`;
}
