// Pixels of JPEG, PNG and WebP images, by Squoosh's codecs compiled to WebAssembly (@jsquash/*:
// MozJPEG's decoder, which is libjpeg-turbo's; libwebp; the Rust png crate). The modules are
// imported as compiled WebAssembly, which workerd allows (no code generation from strings), and
// instantiated once per isolate. EXIF orientation is ignored, as PDQ's reference does: a rotated
// copy is matched through the hash's dihedral variants instead.
import decodeJpegWasm, { init as initJpeg } from "@jsquash/jpeg/decode";
import JPEG_DECODER from "@jsquash/jpeg/codec/dec/mozjpeg_dec.wasm";
import { decode as decodePngWasm, init as initPng } from "@jsquash/png/decode";
// @ts-expect-error The package types this file as the instance's exports; imported as a module (wrangler and workerd do), it is a compiled WebAssembly.Module.
import PNG_DECODER_MODULE from "@jsquash/png/codec/pkg/squoosh_png_bg.wasm";
import decodeWebpWasm, { init as initWebp } from "@jsquash/webp/decode";
import WEBP_DECODER from "@jsquash/webp/codec/dec/webp_dec.wasm";
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

const PNG_DECODER = PNG_DECODER_MODULE as WebAssembly.Module;

let ready: Promise<unknown> | null = null;

/** Instantiates the three decoders once per isolate (a failed start is retried by the next call). */
function decoders(): Promise<unknown> {
  ready ??= Promise.all([initJpeg(JPEG_DECODER), initPng(PNG_DECODER), initWebp(WEBP_DECODER)]).catch((error: unknown) => {
    ready = null;
    throw error;
  });
  return ready;
}

/** Decodes the image; throws when the bytes are not a valid image of that format. */
export async function decodeImage(format: ImageFormat, bytes: Uint8Array): Promise<DecodedImage> {
  await decoders();
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const image = format === "jpeg" ? await decodeJpegWasm(buffer) : format === "png" ? await decodePngWasm(buffer) : await decodeWebpWasm(buffer);
  return { data: image.data, width: image.width, height: image.height };
}
