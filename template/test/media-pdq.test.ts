// PDQ in the Worker against Meta's published reference hashes: the images and expected.json come
// from shared/pdq_vectors through the PDQ_VECTORS binding; without that folder these tests skip.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { hammingHex } from "../src/media";
import { newInstallation } from "./helpers";

interface Expected {
  files: Record<string, { content_type: string; role: string; sha256: string; pdq: { hash: string; quality: number } | null; same_picture_as?: { hash: string; quality: number } }>;
  dihedral_of_bridge_original: Record<string, string>;
}

const present = (await env.PDQ_VECTORS.fetch("http://vectors/")).ok;
if (!present) console.warn("media-pdq: shared/pdq_vectors is absent (set PDQ_VECTORS_DIR); the PDQ reference-vector tests are skipped.");
const expected: Expected | null = present ? await (await env.PDQ_VECTORS.fetch("http://vectors/expected.json")).json() : null;
const image = async (name: string) => new Uint8Array(await (await env.PDQ_VECTORS.fetch(`http://vectors/${name}`)).arrayBuffer());

async function hash(key: string, body: Uint8Array, contentType: string) {
  const response = await exports.default.fetch(new Request("http://safest.test/api/v1/media/hashes", { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": contentType }, body }));
  return { status: response.status, body: (await response.json()) as any };
}

describe.skipIf(!present)("PDQ reference vectors", () => {
  let key: string;
  const hashes = new Map<string, { hash: string; quality: number; dihedral: Record<string, string> }>();
  beforeAll(async () => {
    key = (await newInstallation("pdq")).apiKey;
    for (const [name, file] of Object.entries(expected!.files)) {
      const { status, body } = await hash(key, await image(name), file.content_type);
      expect(status, name).toBe(200);
      expect(body.sha256, name).toBe(file.sha256);
      hashes.set(name, body.pdq);
    }
  }, 120_000);

  // Meta's rule for a port (pdq/README.md): hashes of quality >= 80 within 10 bits of the C++
  // reference. Measured here: 0 bits for 20 of the 25 files, 2 bits for the rest of quality >= 80
  // (the WebP copy has no published hash of its own and is compared with the JPEG it was made from).
  // Below quality 80 PDQ hashes are unstable by design (q0003 lands 12 bits away), so only the
  // quality is checked there. Qualities must match exactly: the gradient count is integer
  // arithmetic on the same 64×64 block.
  it("hashes each reference image within 10 bits of Meta's C++ output at quality >= 80, with its quality", () => {
    for (const [name, file] of Object.entries(expected!.files)) {
      const reference = file.pdq ?? file.same_picture_as!;
      const ours = hashes.get(name)!;
      expect(ours.quality, name).toBe(reference.quality);
      if (reference.quality >= 80) expect(hammingHex(ours.hash, reference.hash), name).toBeLessThanOrEqual(10);
    }
  });

  it("gives the rotations and flips of the original the hashes Meta's Java hasher published for them (within 10 bits)", () => {
    const published = expected!.dihedral_of_bridge_original;
    const ours = hashes.get("dih/bridge-1-original.jpg")!;
    const names: Record<string, string> = { rotate90: "rot90", rotate180: "rot180", rotate270: "rot270", flipX: "flipx", flipY: "flipy", flipPlus1: "flipp", flipMinus1: "flipm" };
    for (const [variant, key] of Object.entries(names)) expect(hammingHex(ours.dihedral[variant]!, published[key]!), variant).toBeLessThanOrEqual(10);
  });

  // 31 is PDQ's published match threshold (pdq/README.md, python-threatexchange's
  // PDQ_CONFIDENT_MATCH_THRESHOLD).
  it("matches modified copies of the bridge (re-encoded, resized, blurred, rotated, flipped) within 31 bits, through the dihedral variants for the turned ones", () => {
    const original = hashes.get("dih/bridge-1-original.jpg")!;
    const variants = [original.hash, ...Object.values(original.dihedral)];
    const copies = Object.entries(expected!.files).filter(([, file]) => file.role === "bridge-mod" || file.role === "dihedral" || file.role === "bridge-copy-webp");
    expect(copies.length).toBeGreaterThanOrEqual(12);
    for (const [name] of copies) {
      const nearest = Math.min(...variants.map((variant) => hammingHex(variant, hashes.get(name)!.hash)));
      expect(nearest, name).toBeLessThanOrEqual(31);
    }
    // A turned photo's own hash is far from the original's (that is why the variants exist)...
    expect(hammingHex(original.hash, hashes.get("dih/bridge-2-rotate-90.jpg")!.hash)).toBeGreaterThan(31);
    // ...and each turned file lands on the variant of its own name.
    expect(hammingHex(original.dihedral.rotate90!, hashes.get("dih/bridge-2-rotate-90.jpg")!.hash)).toBeLessThanOrEqual(10);
    expect(hammingHex(original.dihedral.rotate180!, hashes.get("dih/bridge-3-rotate-180.jpg")!.hash)).toBeLessThanOrEqual(10);
    expect(hammingHex(original.dihedral.flipX!, hashes.get("dih/bridge-5-flipx.jpg")!.hash)).toBeLessThanOrEqual(10);
  });

  it("does not match unrelated images to the bridge or to one another (quality >= 50), under any rotation or flip", () => {
    const unrelated = Object.entries(expected!.files).filter(([name, file]) => file.role === "unrelated" && hashes.get(name)!.quality >= 50);
    expect(unrelated.length).toBeGreaterThanOrEqual(8);
    const bridge = hashes.get("dih/bridge-1-original.jpg")!;
    for (const [name] of unrelated) {
      const ours = hashes.get(name)!;
      for (const variant of [bridge.hash, ...Object.values(bridge.dihedral)]) expect(hammingHex(variant, ours.hash), name).toBeGreaterThan(31);
      for (const [other] of unrelated) if (other !== name) expect(hammingHex(ours.hash, hashes.get(other)!.hash), `${name} vs ${other}`).toBeGreaterThan(31);
    }
  });
});

describe("POST /media/hashes refuses what it cannot hash, with a code", () => {
  let key: string;
  beforeAll(async () => {
    key = (await newInstallation("pdq-errors")).apiKey;
  });
  const png = (width: number, height: number) => {
    const bytes = new Uint8Array(33);
    bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
    new DataView(bytes.buffer).setUint32(16, width);
    new DataView(bytes.buffer).setUint32(20, height);
    bytes.set([8, 6, 0, 0, 0], 24);
    return bytes;
  };

  it("answers 422 media.undecodable for bytes that are no image, and for a PNG cut after its header", async () => {
    expect(await hash(key, new TextEncoder().encode("not an image at all"), "image/png")).toMatchObject({ status: 422, body: { error: { code: "media.undecodable" } } });
    expect(await hash(key, png(64, 64), "image/png")).toMatchObject({ status: 422, body: { error: { code: "media.undecodable" } } });
  });

  it("answers 422 media.too_many_pixels from the header alone, 422 media.too_small under 5 pixels a side", async () => {
    expect(await hash(key, png(5000, 5000), "image/png")).toMatchObject({ status: 422, body: { error: { code: "media.too_many_pixels" } } });
    expect(await hash(key, png(4, 400), "image/png")).toMatchObject({ status: 422, body: { error: { code: "media.too_small" } } });
  });

  it("answers 415 for a type it does not decode, 422 when the bytes are another format than declared, 413 past 8 MiB", async () => {
    expect(await hash(key, png(64, 64), "image/gif")).toMatchObject({ status: 415, body: { error: { code: "media.unsupported_type" } } });
    expect(await hash(key, png(64, 64), "image/jpeg")).toMatchObject({ status: 422, body: { error: { code: "media.type_mismatch" } } });
    expect(await hash(key, new Uint8Array(8 * 1_048_576 + 1), "image/jpeg")).toMatchObject({ status: 413, body: { error: { code: "media.too_large" } } });
  });

  it("needs a key: 401 without one", async () => {
    const response = await exports.default.fetch(new Request("http://safest.test/api/v1/media/hashes", { method: "POST", headers: { "content-type": "image/png" }, body: png(64, 64) }));
    expect(response.status).toBe(401);
  });
});
