// The synchronous SHA-256 used on hot paths (API keys, request digests, derived ids) is the same
// digest as Web Crypto's, for text (UTF-8) and bytes of every length around SHA-256's block edges.
import { describe, expect, it } from "vitest";
import { sha256Hex, sha256HexSync } from "../src/lib/crypto";

describe("sha256HexSync", () => {
  it("equals Web Crypto's SHA-256 for text and bytes of lengths 0-200 and 100,000", async () => {
    const text = "héllo, 世界 🙂 ";
    for (const length of [...Array.from({ length: 201 }, (_, i) => i), 100_000]) {
      const bytes = new Uint8Array(length).map((_, i) => (i * 31 + length) & 255);
      expect(sha256HexSync(bytes)).toBe(await sha256Hex(bytes));
      const string = text.repeat(Math.ceil(length / text.length)).slice(0, length);
      expect(sha256HexSync(string)).toBe(await sha256Hex(string));
    }
    expect(sha256HexSync("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});
