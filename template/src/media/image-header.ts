// The format and pixel size of an image, read from its first bytes before anything is decoded, so
// an oversized picture is refused without allocating its pixels.
export const IMAGE_FORMATS = ["jpeg", "png", "webp"] as const;
export type ImageFormat = (typeof IMAGE_FORMATS)[number];

/** Media types accepted for each format (`image/jpg` is a common misspelling of `image/jpeg`). */
export const MEDIA_TYPES: Record<string, ImageFormat> = { "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/pjpeg": "jpeg", "image/png": "png", "image/webp": "webp" };

export interface ImageHeader {
  format: ImageFormat;
  width: number;
  height: number;
  /** A PNG's IHDR bit depth (1-16) and colour type (0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA). */
  png?: { depth: number; colourType: number };
}

/** The format the bytes are, by their signature; null when none of the supported ones. */
export function sniffFormat(bytes: Uint8Array): ImageFormat | null {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "jpeg";
  if (bytes.length >= 8 && bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47) return "png";
  if (bytes.length >= 12 && ascii(bytes, 0, 4) === "RIFF" && ascii(bytes, 8, 4) === "WEBP") return "webp";
  return null;
}

function ascii(bytes: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(at, at + length));
}

const u16be = (b: Uint8Array, at: number) => (b[at]! << 8) | b[at + 1]!;
const u16le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
const u24le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16);
const u32be = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;

/** A JPEG's frame size: the first start-of-frame marker (SOF0-SOF15 less DHT, JPG and DAC). */
function jpegSize(b: Uint8Array): { width: number; height: number } | null {
  let at = 2;
  while (at + 9 < b.length) {
    if (b[at] !== 0xff) return null;
    const marker = b[at + 1]!;
    if (marker === 0xff) {
      at += 1;
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    const length = u16be(b, at + 2);
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) return { height: u16be(b, at + 5), width: u16be(b, at + 7) };
    if (length < 2) return null;
    at += 2 + length;
  }
  return null;
}

/** A WebP's canvas: VP8X (extended), VP8L (lossless) or VP8 (lossy) as the first chunk says. */
function webpSize(b: Uint8Array): { width: number; height: number } | null {
  if (b.length < 30) return null;
  const chunk = ascii(b, 12, 4);
  if (chunk === "VP8X") return { width: u24le(b, 24) + 1, height: u24le(b, 27) + 1 };
  if (chunk === "VP8L" && b[20] === 0x2f) {
    const bits = b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24);
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === "VP8 " && b[23] === 0x9d && b[24] === 0x01 && b[25] === 0x2a) return { width: u16le(b, 26) & 0x3fff, height: u16le(b, 28) & 0x3fff };
  return null;
}

/** The header of a JPEG, PNG or WebP; null when the bytes are none of them or their header is cut. */
export function readImageHeader(bytes: Uint8Array): ImageHeader | null {
  const format = sniffFormat(bytes);
  if (format === null) return null;
  const size = format === "jpeg" ? jpegSize(bytes) : format === "png" ? (bytes.length >= 24 && ascii(bytes, 12, 4) === "IHDR" ? { width: u32be(bytes, 16), height: u32be(bytes, 20) } : null) : webpSize(bytes);
  if (!size || size.width <= 0 || size.height <= 0) return null;
  return format === "png" && bytes.length >= 26 ? { format, ...size, png: { depth: bytes[24]!, colourType: bytes[25]! } } : { format, ...size };
}
