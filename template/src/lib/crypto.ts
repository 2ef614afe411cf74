// Hashing and random identifiers (Web Crypto; sha256HexSync in JavaScript (@noble/hashes), for hot
// paths where one more await per hash would let the event loop's other work in between).
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";

const encoder = new TextEncoder();

export async function sha256Hex(input: string | ArrayBuffer | Uint8Array): Promise<string> {
  const bytes = typeof input === "string" ? encoder.encode(input) : input;
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The same digest as sha256Hex, synchronously. Not node:crypto's createHash: under nodejs_compat
 * each Hash is a Transform stream, and building one cost more than the digest (it showed in every
 * authenticated request's profile, the API key being hashed on each).
 */
export function sha256HexSync(input: string | Uint8Array): string {
  return bytesToHex(sha256(typeof input === "string" ? encoder.encode(input) : input));
}

const ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** Characters of randomness in an identifier: 22 base-62 digits are 131 bits, more than a UUID's 122. */
const ID_LENGTH = 22;

/**
 * A prefixed random identifier, safe as a Workflows instance id (`[A-Za-z0-9_-]`, ≤ 100): 22
 * base-62 digits. An id is repeated in its row, in the rows that point at it and in their index
 * entries (dozens of times per lifecycle), so its 22 characters instead of a UUID's 32 hex digits
 * are about a kilobyte less of D1 per lifecycle. Identifiers are opaque: ids made before, of 32
 * hex digits, stay valid everywhere.
 */
export function newId(prefix: string, length = ID_LENGTH): string {
  const end = prefix.length + 1 + length;
  let id = `${prefix}_`;
  while (id.length < end) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length))) {
      // 248 = 4 × 62: bytes above it are dropped so every digit is equally likely.
      if (byte < 248 && id.length < end) id += ID_ALPHABET[byte % 62];
    }
  }
  return id;
}

/**
 * Digits of the id of a record a deployment holds few of but every hot row repeats: an
 * installation (in each row and most index entries) and an API key (in the reviewer name a key's
 * claims and answers carry). 10 base-62 digits are 59 bits: ids need to be unique in one
 * deployment, not unguessable (an id grants nothing; the key or session does), and a deployment
 * holds thousands of them at most, where two alike are about one chance in 10^10.
 */
export const FEW_RECORD_ID_LENGTH = 10;

/** A secret token: prefix + 32 random bytes, base64url. */
export function newSecret(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const b64 = btoa(String.fromCharCode(...bytes))
    .replace(/\+/gu, "-")
    .replace(/\//gu, "_")
    .replace(/=+$/u, "");
  return `${prefix}_${b64}`;
}

export function byteLength(text: string): number {
  return encoder.encode(text).byteLength;
}

/** Constant-time comparison of two strings of possibly different length. */
export function timingSafeEqual(a: string, b: string): boolean {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  let diff = left.length ^ right.length;
  for (let i = 0; i < Math.max(left.length, right.length); i++) diff |= (left[i] ?? 0) ^ (right[i] ?? 0);
  return diff === 0;
}
