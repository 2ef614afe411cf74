// The synchronous SHA-256 used on hot paths (API keys, request digests, derived ids) is the same
// digest as Web Crypto's, for text (UTF-8) and bytes of every length around SHA-256's block edges.
// Identifiers are short, uniformly random base-62 digits that Workflows accepts as instance ids.
import { describe, expect, it } from "vitest";
import { FEW_RECORD_ID_LENGTH, newId, sha256Hex, sha256HexSync } from "../src/lib/crypto";

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

describe("newId", () => {
  it("is the prefix and 22 base-62 digits (10 for records a deployment holds few of), every digit about equally likely, never repeated in 20,000", () => {
    const ids = Array.from({ length: 20_000 }, () => newId("rpt"));
    for (const id of ids) expect(id).toMatch(/^rpt_[0-9A-Za-z]{22}$/u);
    expect(new Set(ids).size).toBe(ids.length);
    // A Workflows instance id: [A-Za-z0-9_-], at most 100 characters.
    expect(newId("run")).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$/u);
    expect(newId("inst", FEW_RECORD_ID_LENGTH)).toMatch(/^inst_[0-9A-Za-z]{10}$/u);
    // 440,000 digits over 62 values: about 7,097 each; a biased draw (e.g. bytes taken modulo 62
    // without dropping those above 247, which favours the first 8 digits by 25 %) lands far outside.
    const counts = new Map<string, number>();
    for (const id of ids) for (const digit of id.slice(4)) counts.set(digit, (counts.get(digit) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = (ids.length * 22) / 62;
    for (const count of counts.values()) expect(Math.abs(count - expected) / expected).toBeLessThan(0.08);
  });
});
