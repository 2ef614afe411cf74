// Pixels of JPEG, PNG and WebP images. JPEG and WebP by Squoosh's codecs compiled to WebAssembly
// (@jsquash/jpeg: MozJPEG's decoder, which is libjpeg-turbo's; @jsquash/webp: libwebp), imported
// as compiled modules, which workerd allows (no code generation from strings) and instantiated
// once per isolate; PNG by fast-png (pure JavaScript; PNG is lossless, so any correct decoder gives
// the same pixels). EXIF orientation is ignored, as PDQ's reference does: a rotated copy is
// matched through the hash's dihedral variants instead.
import decodeJpegWasm, { init as initJpeg } from "@jsquash/jpeg/decode";
import JPEG_DECODER from "@jsquash/jpeg/codec/dec/mozjpeg_dec.wasm";
import decodeWebpWasm, { init as initWebp } from "@jsquash/webp/decode";
import WEBP_DECODER from "@jsquash/webp/codec/dec/webp_dec.wasm";
import { convertIndexedToRgb, decode as decodePngJs } from "fast-png";
import type { ImageFormat } from "./image-header";

export interface DecodedImage {
  /** 8-bit RGBA, row-major. */
  data: Uint8ClampedArray;
  width: number;
  height: number;
}

// The Emscripten glue builds an ImageData; workerd has none, so a plain holder stands in.
if (typeof (globalThis as { ImageData?: unknown }).ImageData === "undefined") {
  (globalThis as { ImageData?: unknown }).ImageData = class ImageData {
    constructor(
      readonly data: Uint8ClampedArray,
      readonly width: number,
      readonly height: number,
    ) {}
  };
}

let ready: Promise<unknown> | null = null;

/**
 * Instantiates the two WebAssembly decoders once per isolate (a failed start is retried by the
 * next call). The glue puts a stand-in `self.location` on the global while it starts; it is taken
 * away again so no other code (URL resolution in libraries) sees a location that is not one.
 */
function decoders(): Promise<unknown> {
  ready ??= (async () => {
    const had = Object.getOwnPropertyDescriptor(globalThis, "location");
    try {
      await Promise.all([initJpeg(JPEG_DECODER), initWebp(WEBP_DECODER)]);
    } finally {
      if (!had) delete (globalThis as { location?: unknown }).location;
    }
  })().catch((error: unknown) => {
    ready = null;
    throw error;
  });
  return ready;
}

/** 8-bit RGBA of a PNG of any colour type and bit depth (16-bit samples keep their high byte). */
function decodePng(bytes: Uint8Array): DecodedImage {
  const png = decodePngJs(bytes);
  const { width, height } = png;
  const pixels = width * height;
  let samples: Uint8Array | Uint8ClampedArray | Uint16Array = png.data;
  let channels = png.channels;
  let depth: number = png.depth;
  if (png.palette) {
    samples = convertIndexedToRgb(png);
    channels = samples.length / pixels;
    depth = 8;
  } else if (depth < 8) {
    // Grey samples of 1, 2 or 4 bits, packed into whole bytes per row, scaled to 0-255.
    const unpacked = new Uint8Array(pixels * channels);
    const rowBytes = Math.ceil((width * channels * depth) / 8);
    const scale = 255 / ((1 << depth) - 1);
    for (let y = 0; y < height; y += 1) {
      for (let i = 0; i < width * channels; i += 1) {
        const bit = i * depth;
        const byte = samples[y * rowBytes + (bit >> 3)]!;
        unpacked[y * width * channels + i] = Math.round(((byte >> (8 - depth - (bit & 7))) & ((1 << depth) - 1)) * scale);
      }
    }
    samples = unpacked;
    depth = 8;
  }
  const shift = depth === 16 ? 8 : 0;
  const rgba = new Uint8ClampedArray(pixels * 4);
  for (let p = 0; p < pixels; p += 1) {
    const at = p * channels;
    const grey = channels < 3;
    const r = samples[at]! >> shift;
    rgba[p * 4] = r;
    rgba[p * 4 + 1] = grey ? r : samples[at + 1]! >> shift;
    rgba[p * 4 + 2] = grey ? r : samples[at + 2]! >> shift;
    rgba[p * 4 + 3] = 255;
  }
  return { data: rgba, width, height };
}

/** Decodes the image; throws when the bytes are not a valid image of that format. */
export async function decodeImage(format: ImageFormat, bytes: Uint8Array): Promise<DecodedImage> {
  if (format === "png") return decodePng(bytes);
  await decoders();
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const image = format === "jpeg" ? await decodeJpegWasm(buffer) : await decodeWebpWasm(buffer);
  return { data: image.data, width: image.width, height: image.height };
}
