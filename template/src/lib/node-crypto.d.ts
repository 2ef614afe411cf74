// The synchronous functions of node:crypto (nodejs_compat) the Worker calls. The project does not
// depend on @types/node; this declares only what is used: createHash (lib/crypto.ts
// sha256HexSync), createHmac and hkdfSync (audit/keys.ts, lib/person-keys.ts and friends).
declare module "node:crypto" {
  interface Hash {
    update(data: string | Uint8Array): Hash;
    digest(encoding: "hex"): string;
  }
  interface Hmac {
    update(data: string | Uint8Array): Hmac;
    digest(encoding: "hex"): string;
  }
  export function createHash(algorithm: "sha256"): Hash;
  export function createHmac(algorithm: "sha256", key: Uint8Array): Hmac;
  export function hkdfSync(digest: "sha256", ikm: string | Uint8Array, salt: string | Uint8Array, info: string | Uint8Array, keylen: number): ArrayBuffer;
}
