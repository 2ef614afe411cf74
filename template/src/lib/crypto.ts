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

/** A prefixed random identifier, safe as a Workflows instance id (`[A-Za-z0-9_-]`, ≤ 100). */
export function newId(prefix: string): string {
  return `${prefix}_${crypto.randomUUID().replace(/-/gu, "")}`;
}

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
