// The master key (REPORT_MASTER_KEY, and REPORT_MASTER_KEY_PREVIOUS during a rollover) and the
// wrapping of data keys under it: derived once per isolate by HKDF, identified by a digest of the
// secret, never leaving this module; report-crypto.ts stores and opens the data keys it wraps.
import { AppError } from "../../errors";
import { sha256Hex } from "../../lib/crypto";

const encoder = new TextEncoder();

export interface MasterKey {
  id: string;
  key: CryptoKey;
}

export function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function cryptoUnavailable(): AppError {
  return new AppError("crypto.master_key_missing", "REPORT_MASTER_KEY is not configured; personal data cannot be sealed.", { status: 503 });
}

// Master keys are derived once per isolate; secrets never leave this module.
const masters = new Map<string, Promise<MasterKey>>();

function deriveMaster(secret: string): Promise<MasterKey> {
  let derived = masters.get(secret);
  if (!derived) {
    derived = (async () => {
      if (secret.length < 32) throw new AppError("crypto.master_key_weak", "REPORT_MASTER_KEY must be at least 32 characters.", { status: 503 });
      const material = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"]);
      const key = await crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: encoder.encode("safest-tools/report-crypto"), info: encoder.encode("master-key-wrap/v1") }, material, { name: "AES-GCM", length: 256 }, false, [
        "encrypt",
        "decrypt",
      ]);
      return { id: `mk_${(await sha256Hex(`master-key-id:${secret}`)).slice(0, 16)}`, key };
    })();
    masters.set(secret, derived);
  }
  return derived;
}

export async function currentMaster(env: Env): Promise<MasterKey> {
  const secret = (env as { REPORT_MASTER_KEY?: string }).REPORT_MASTER_KEY;
  if (!secret) throw cryptoUnavailable();
  return deriveMaster(secret);
}

export async function masterById(env: Env, id: string): Promise<MasterKey> {
  const candidates = [(env as { REPORT_MASTER_KEY?: string }).REPORT_MASTER_KEY, (env as { REPORT_MASTER_KEY_PREVIOUS?: string }).REPORT_MASTER_KEY_PREVIOUS];
  for (const secret of candidates) {
    if (!secret) continue;
    const master = await deriveMaster(secret);
    if (master.id === id) return master;
  }
  throw new AppError("crypto.master_key_unknown", "A data key is wrapped by a master key that is not configured.", { status: 503 });
}

export async function wrap(master: MasterKey, raw: Uint8Array, aad: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(aad) }, master.key, raw));
  return `${toBase64(iv)}.${toBase64(sealed)}`;
}

export async function unwrap(master: MasterKey, wrapped: string, aad: string): Promise<Uint8Array> {
  const [iv, sealed] = wrapped.split(".");
  if (!iv || !sealed) throw new AppError("crypto.data_key_corrupt", "A stored data key is malformed.", { status: 500 });
  return new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: encoder.encode(aad) }, master.key, fromBase64(sealed)));
}
