// node:crypto's createHash (nodejs_compat), which lib/crypto.ts's sha256HexSync calls; merged with
// the declarations of src/audit/node-crypto.d.ts (the project does not depend on @types/node).
declare module "node:crypto" {
  interface Hash {
    update(data: string | Uint8Array): Hash;
    digest(encoding: "hex"): string;
  }
  export function createHash(algorithm: "sha256"): Hash;
}
