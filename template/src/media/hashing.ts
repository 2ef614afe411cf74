// Hashes of an image's bytes: SHA-256 of the exact file and PDQ of its pixels (with the hashes of
// its seven rotations and flips). Nothing is stored: the bytes are read, hashed and dropped.
import { AppError } from "../errors";
import { decodeImage } from "./decode";
import { MEDIA_TYPES, readImageHeader, sniffFormat, type ImageFormat } from "./image-header";
import { type DihedralVariant, lumaFromRgba, PDQ_MIN_DIMENSION, pdqDihedralFromLuma } from "./pdq";

/** Largest image file hashed (the body limit of POST /media/hashes). */
export const MAX_IMAGE_BYTES = 8 * 1_048_576;
/**
 * Largest picture hashed, in pixels (2²³: a 3840×2160 frame fits). Decoding holds 8 bytes a
 * pixel (the decoder's RGBA and its copy, over which the luminance is written), so this
 * keeps one hash well inside a Worker's 128 MB; downscale larger pictures first (PDQ is made to
 * survive resizing).
 */
export const MAX_IMAGE_PIXELS = 8_388_608;

export interface MediaHashes {
  sha256: string;
  format: ImageFormat;
  width: number;
  height: number;
  pdq: { hash: string; quality: number; dihedral: Record<Exclude<DihedralVariant, "original">, string> };
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
 * when the bytes are not the declared format, media.too_many_pixels past MAX_IMAGE_PIXELS,
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
  if (header.width < PDQ_MIN_DIMENSION || header.height < PDQ_MIN_DIMENSION) throw new AppError("media.too_small", `PDQ needs at least ${PDQ_MIN_DIMENSION} pixels on each side.`, { status: 422 });
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
