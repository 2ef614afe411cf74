// ATProto label signing (the atproto label spec, version 1): the label without `sig`, with `ver`,
// encoded as DAG-CBOR (a map whose keys sort by their byte length, then bytewise; shortest-form
// lengths and integers; no floats), then signed with the labeler's secp256k1 key: ECDSA over the
// SHA-256 of those bytes, low-S, as the 64-byte compact r‖s. The public key is published as a
// did:key (multicodec secp256k1-pub 0xe7, compressed point, base58btc), which is what a labeler's
// DID document names as its #atproto_label verification method.
import { secp256k1 } from "@noble/curves/secp256k1.js";

export interface UnsignedLabel {
  ver: 1;
  src: string;
  uri: string;
  val: string;
  neg?: true;
  cts: string;
  exp?: string;
}

const encoder = new TextEncoder();

function head(major: number, length: number): number[] {
  const type = major << 5;
  if (length < 24) return [type | length];
  if (length < 0x100) return [type | 24, length];
  if (length < 0x10000) return [type | 25, length >> 8, length & 0xff];
  return [type | 26, (length >>> 24) & 0xff, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff];
}

function encodeValue(value: string | number | boolean): number[] {
  if (typeof value === "boolean") return [value ? 0xf5 : 0xf4];
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error("dag_cbor_unsupported_number");
    return head(0, value);
  }
  const bytes = encoder.encode(value);
  return [...head(3, bytes.length), ...bytes];
}

/** The DAG-CBOR bytes of a flat map of strings, non-negative integers and booleans (a label without sig). */
export function dagCborMap(map: Readonly<Record<string, string | number | boolean | undefined>>): Uint8Array {
  const entries = Object.entries(map)
    .filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined)
    .map(([key, value]) => ({ key: encoder.encode(key), value }));
  entries.sort((a, b) => a.key.length - b.key.length || compareBytes(a.key, b.key));
  const out = head(5, entries.length);
  for (const { key, value } of entries) out.push(...head(3, key.length), ...key, ...encodeValue(value));
  return Uint8Array.from(out);
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i += 1) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The label's signature: secp256k1 ECDSA over sha256(DAG-CBOR), low-S, 64 bytes compact. */
export function signLabel(label: UnsignedLabel, secretKey: Uint8Array): Uint8Array {
  return secp256k1.sign(dagCborMap({ ...label }), secretKey, { prehash: true, lowS: true });
}

/** A new secp256k1 secret key (32 bytes). */
export function newLabelerKey(): Uint8Array {
  return secp256k1.utils.randomSecretKey();
}

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

function base58btc(bytes: Uint8Array): string {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  let out = "";
  while (value > 0n) {
    out = BASE58[Number(value % 58n)]! + out;
    value /= 58n;
  }
  for (const byte of bytes) {
    if (byte !== 0) break;
    out = `1${out}`;
  }
  return out;
}

/** The did:key of a secret key's public half (multicodec secp256k1-pub, compressed point). */
export function didKeyOf(secretKey: Uint8Array): string {
  const publicKey = secp256k1.getPublicKey(secretKey, true);
  return `did:key:z${base58btc(Uint8Array.from([0xe7, 0x01, ...publicKey]))}`;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}
