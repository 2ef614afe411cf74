// The two synchronous functions of node:crypto (nodejs_compat) the audit trail uses. The project
// does not depend on @types/node; this declares only what src/audit/keys.ts calls.
declare module "node:crypto" {
  interface Hmac {
    update(data: string | Uint8Array): Hmac;
    digest(encoding: "hex"): string;
  }
  export function createHmac(algorithm: "sha256", key: Uint8Array): Hmac;
  export function hkdfSync(digest: "sha256", ikm: string | Uint8Array, salt: string | Uint8Array, info: string | Uint8Array, keylen: number): ArrayBuffer;
}
