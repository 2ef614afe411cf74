// Hashes of an image's bytes: SHA-256 of the exact file and PDQ of its pixels (with the hashes of
// its seven rotations and flips). Nothing is stored: the bytes are read, hashed and dropped.
import { AppError } from "../errors";
import { decodeImage } from "./decode";
import { type ImageFormat, type ImageHeader, MEDIA_TYPES, readImageHeader, sniffFormat } from "./image-header";
import { type DihedralVariant, lumaFromRgba, PDQ_MIN_DIMENSION, pdqDihedralFromLuma } from "./pdq";

/** Largest image file hashed (the body limit of POST /media/hashes). */
export const MAX_IMAGE_BYTES = 8 * 1_048_576;
/**
 * Largest picture hashed, in pixels (2²², 4 MP: a 2560×1440 frame fits); downscale larger pictures
 * first (PDQ is made to survive resizing, and downsamples to 64×64 anyway).
 */
export const MAX_IMAGE_PIXELS = 4_194_304;
/**
 * Most bytes decoding one image may hold at once (48 MiB), estimated from its header before
 * anything is decoded (decodedBytes), so one hash stays well inside a Worker's 128 MB whatever the
 * picture's sample format: a 16-bit RGBA PNG holds 8 bytes a sample-pixel twice over.
 */
export const MAX_DECODED_BYTES = 48 * 1_048_576;

/**
 * The bytes decoding an image of this header holds at its peak. JPEG and WebP: the WebAssembly
 * decoder's RGBA and its copy out of the module's memory (8 bytes a pixel). PNG: the inflated
 * scanlines and their unfiltered samples (each width × channels × bytes per sample a pixel), a
 * palette's expansion to RGBA, and the RGBA the hasher reads (4 bytes a pixel).
 */
export function decodedBytes(header: ImageHeader): number {
  const pixels = header.width * header.height;
  if (header.format !== "png" || !header.png) return pixels * 8;
  const { depth, colourType } = header.png;
  const channels = colourType === 2 ? 3 : colourType === 4 ? 2 : colourType === 6 ? 4 : 1;
  const samples = pixels * channels * (depth === 16 ? 2 : 1);
  return 2 * samples + (colourType === 3 ? pixels * 4 : 0) + pixels * 4;
}

export interface MediaHashes {
  sha256: string;
  format: ImageFormat;
  width: number;
  height: number;
  pdq: { hash: string; quality: number; dihedral: Record<Exclude<DihedralVariant, "original">, string> };
}

/**
 * Whether a PNG's image data (its IDAT chunks, one zlib stream) inflates to no more than its header
 * implies: `height` rows of a filter byte and `width` × channels × depth bits, plus at most 14
 * bytes a row for Adam7 interlacing's seven passes. The PNG decoder keeps inflating whatever the
 * stream holds, so a small file of highly compressed zeros (a decompression bomb) would otherwise
 * fill memory before any size check; this inflates it once, streaming, counting, and stops at the
 * bound without keeping the output.
 */
export async function pngInflatesWithin(bytes: Uint8Array, header: ImageHeader): Promise<boolean> {
  const { depth, colourType } = header.png ?? { depth: 8, colourType: 6 };
  const channels = colourType === 2 ? 3 : colourType === 4 ? 2 : colourType === 6 ? 4 : 1;
  const limit = header.height * (1 + Math.ceil((header.width * channels * depth) / 8)) + 14 * header.height + 64;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const idat: Uint8Array[] = [];
  for (let at = 8; at + 8 <= bytes.length; ) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...bytes.subarray(at + 4, at + 8));
    if (type === "IDAT") idat.push(bytes.subarray(at + 8, Math.min(bytes.length, at + 8 + length)));
    if (type === "IEND") break;
    at += 12 + length;
  }
  const reader = new Blob(idat).stream().pipeThrough(new DecompressionStream("deflate")).getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return true;
      total += value.byteLength;
      if (total > limit) {
        await reader.cancel();
        return false;
      }
    }
  } catch {
    // A stream the inflater refuses is left for the decoder to refuse as undecodable.
    return true;
  }
}

/** The format a content-type names (parameters ignored); 415 when it is not one we decode. */
export function formatOfContentType(contentType: string | undefined): ImageFormat {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  const format = MEDIA_TYPES[type];
  if (!format) throw new AppError("media.unsupported_type", "Send the image with content-type image/jpeg, image/png or image/webp.", { status: 415, details: { supported: ["image/jpeg", "image/png", "image/webp"] } });
  return format;
}

const hex = (buffer: ArrayBuffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");

/**
 * SHA-256 and PDQ of an image. 413 media.too_large past MAX_IMAGE_BYTES; 422 media.type_mismatch
 * when the bytes are not the declared format, media.too_many_pixels past MAX_IMAGE_PIXELS
 * or MAX_DECODED_BYTES,
 * media.too_small under 5 pixels a side, media.undecodable when the decoder refuses them.
 */
export async function hashImage(contentType: string | undefined, bytes: Uint8Array): Promise<MediaHashes> {
  const declared = formatOfContentType(contentType);
  if (bytes.byteLength > MAX_IMAGE_BYTES) throw new AppError("media.too_large", `An image may be at most ${MAX_IMAGE_BYTES} bytes; downscale or re-encode it first.`, { status: 413 });
  const sniffed = sniffFormat(bytes);
  if (sniffed !== null && sniffed !== declared) throw new AppError("media.type_mismatch", `The body is ${sniffed}, not the ${declared} its content-type says; send the right content-type.`, { status: 422 });
  const header = readImageHeader(bytes);
  if (!header) throw new AppError("media.undecodable", `The body is not a readable ${declared} image.`, { status: 422 });
  if (header.width * header.height > MAX_IMAGE_PIXELS) {
    throw new AppError("media.too_many_pixels", `An image may have at most ${MAX_IMAGE_PIXELS} pixels (this one has ${header.width}×${header.height}); downscale it first.`, { status: 422 });
  }
  if (decodedBytes(header) > MAX_DECODED_BYTES) {
    throw new AppError(
      "media.too_many_pixels",
      `Decoding this image would hold ${decodedBytes(header)} bytes, more than the ${MAX_DECODED_BYTES} allowed (${header.width}×${header.height}${header.png ? `, ${header.png.depth}-bit samples` : ""}); downscale it or reduce it to 8-bit samples first.`,
      { status: 422 },
    );
  }
  if (header.width < PDQ_MIN_DIMENSION || header.height < PDQ_MIN_DIMENSION) throw new AppError("media.too_small", `PDQ needs at least ${PDQ_MIN_DIMENSION} pixels on each side.`, { status: 422 });
  if (declared === "png" && !(await pngInflatesWithin(bytes, header))) {
    throw new AppError("media.too_many_pixels", `This PNG's image data inflates past the ${header.width}×${header.height} its header declares; send a well-formed image.`, { status: 422 });
  }
  const digest = crypto.subtle.digest("SHA-256", bytes);
  let image: Awaited<ReturnType<typeof decodeImage>>;
  try {
    image = await decodeImage(declared, bytes);
  } catch {
    throw new AppError("media.undecodable", `The body is not a decodable ${declared} image.`, { status: 422 });
  }
  // The header and the decoder must agree, or the pixel limit above could be walked around.
  if (image.width * image.height > MAX_IMAGE_PIXELS || image.data.length < image.width * image.height * 4) throw new AppError("media.undecodable", `The body is not a consistent ${declared} image.`, { status: 422 });
  const luma = lumaFromRgba(image.data, image.width, image.height, { inPlace: true });
  const { quality, hashes } = pdqDihedralFromLuma(luma, image.width, image.height);
  const { original, ...dihedral } = hashes;
  return { sha256: hex(await digest), format: declared, width: image.width, height: image.height, pdq: { hash: original, quality, dihedral } };
}
