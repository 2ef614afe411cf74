// PDQ, Meta's perceptual photo hash, written from its published description (the ThreatExchange
// `pdq/` hashing document): luminance → two passes of a Jarosz tent filter (running-sum box filters
// along rows then columns) → 64×64 decimation → the 16×16 low-frequency block of a 2-D DCT → one
// bit per coefficient, set when it is above the block's median. Quality is the count of significant
// gradients of the 64×64 image, 0-100. Arithmetic is float32 step by step, as in the reference,
// so hashes land on its bits rather than a few away.
const f = Math.fround;

/** Below this many pixels on a side there is nothing to hash: the hash is all zeros with quality 0. */
export const PDQ_MIN_DIMENSION = 5;

export interface PdqHash {
  /** 64 hex digits, in the reference's order (its 16-bit words from the last to the first). */
  hash: string;
  quality: number;
}

/** The eight images a photo can become by rotating and flipping it, and their hashes. */
export const DIHEDRAL_VARIANTS = ["original", "rotate90", "rotate180", "rotate270", "flipX", "flipY", "flipPlus1", "flipMinus1"] as const;
export type DihedralVariant = (typeof DIHEDRAL_VARIANTS)[number];

const LUMA_R = f(0.299);
const LUMA_G = f(0.587);
const LUMA_B = f(0.114);

/**
 * Luminance of 8-bit RGBA (alpha ignored, as the reference reads RGB), one float32 per pixel.
 * `inPlace` writes it over the RGBA it comes from (pixel p's four bytes become its float, after
 * they are read), so hashing needs no second buffer of the image's size.
 */
export function lumaFromRgba(rgba: Uint8Array | Uint8ClampedArray, width: number, height: number, options: { inPlace?: boolean } = {}): Float32Array {
  const pixels = width * height;
  const luma = options.inPlace && rgba.byteOffset % 4 === 0 ? new Float32Array(rgba.buffer, rgba.byteOffset, pixels) : new Float32Array(pixels);
  for (let p = 0, q = 0; p < pixels; p += 1, q += 4) {
    const r = rgba[q]!;
    const g = rgba[q + 1]!;
    const b = rgba[q + 2]!;
    luma[p] = f(f(f(LUMA_R * r) + f(LUMA_G * g)) + f(LUMA_B * b));
  }
  return luma;
}

/** The window of each box pass: half of one output cell, rounded up (two passes cover a whole cell). */
function windowSize(oldDimension: number, newDimension: number): number {
  return Math.floor((oldDimension + 2 * newDimension - 1) / (2 * newDimension));
}

/**
 * One running-sum box filter along each row, in place. The window is centred (its left half one
 * shorter for even sizes) and shrinks at both ends, where the mean is over the pixels inside.
 */
function boxAlongRows(buffer: Float32Array, rows: number, cols: number, window: number, scratch: Float32Array): void {
  const half = (window + 2) >> 1;
  for (let r = 0; r < rows; r += 1) {
    const base = r * cols;
    scratch.set(buffer.subarray(base, base + cols));
    let sum = 0;
    let count = 0;
    let ri = 0;
    let li = 0;
    let oi = base;
    for (let i = 0; i < half - 1; i += 1) {
      sum = f(sum + scratch[ri++]!);
      count += 1;
    }
    for (let i = 0; i < window - half + 1; i += 1) {
      sum = f(sum + scratch[ri++]!);
      count += 1;
      buffer[oi++] = sum / count;
    }
    for (let i = 0; i < cols - window; i += 1) {
      sum = f(f(sum + scratch[ri++]!) - scratch[li++]!);
      buffer[oi++] = sum / count;
    }
    for (let i = 0; i < half - 1; i += 1) {
      sum = f(sum - scratch[li++]!);
      count -= 1;
      buffer[oi++] = sum / count;
    }
  }
}

/**
 * The same filter along each column, in place, sweeping rows so memory is read in order: one
 * running sum per column, and a ring of the last `window` input rows for the subtractions.
 */
function boxAlongCols(buffer: Float32Array, rows: number, cols: number, window: number): void {
  const half = (window + 2) >> 1;
  const sums = new Float32Array(cols);
  const ring = new Float32Array(window * cols);
  let count = 0;
  let ri = 0;
  let li = 0;
  let oi = 0;
  const add = () => {
    const at = ri * cols;
    const slot = (ri % window) * cols;
    for (let j = 0; j < cols; j += 1) {
      const value = buffer[at + j]!;
      sums[j] = sums[j]! + value;
      ring[slot + j] = value;
    }
    ri += 1;
  };
  const write = () => {
    const at = oi * cols;
    for (let j = 0; j < cols; j += 1) buffer[at + j] = sums[j]! / count;
    oi += 1;
  };
  for (let i = 0; i < half - 1; i += 1) {
    add();
    count += 1;
  }
  for (let i = 0; i < window - half + 1; i += 1) {
    add();
    count += 1;
    write();
  }
  for (let i = 0; i < rows - window; i += 1) {
    // Row ri and row li share a ring slot (ri - li = window): read the old value before it is replaced.
    const at = ri * cols;
    const slot = (li % window) * cols;
    for (let j = 0; j < cols; j += 1) {
      const value = buffer[at + j]!;
      sums[j] = f(sums[j]! + value) - ring[slot + j]!;
      ring[slot + j] = value;
    }
    ri += 1;
    li += 1;
    write();
  }
  for (let i = 0; i < half - 1; i += 1) {
    const slot = (li % window) * cols;
    for (let j = 0; j < cols; j += 1) sums[j] = sums[j]! - ring[slot + j]!;
    li += 1;
    count -= 1;
    write();
  }
}

/** Tent-filtered 64×64 samples of the luminance, taken at cell centres. Overwrites `luma`. */
export function downsample64(luma: Float32Array, rows: number, cols: number): Float32Array {
  if (rows === 64 && cols === 64) return Float32Array.from(luma);
  const alongRows = windowSize(cols, 64);
  const alongCols = windowSize(rows, 64);
  const scratch = new Float32Array(cols);
  for (let pass = 0; pass < 2; pass += 1) {
    boxAlongRows(luma, rows, cols, alongRows, scratch);
    boxAlongCols(luma, rows, cols, alongCols);
  }
  const out = new Float32Array(64 * 64);
  for (let i = 0; i < 64; i += 1) {
    const inRow = Math.trunc(((i + 0.5) * rows) / 64);
    for (let j = 0; j < 64; j += 1) out[i * 64 + j] = luma[inRow * cols + Math.trunc(((j + 0.5) * cols) / 64)]!;
  }
  return out;
}

/** Sum of significant gradients (steps over 1% of full scale, in whole percent), scaled to 0-100. */
export function qualityOf(block: Float32Array): number {
  let sum = 0;
  const step = (u: number, v: number) => Math.abs(Math.trunc(f(f(f(u - v) * 100) / 255)));
  for (let i = 0; i < 63; i += 1) for (let j = 0; j < 64; j += 1) sum += step(block[i * 64 + j]!, block[(i + 1) * 64 + j]!);
  for (let i = 0; i < 64; i += 1) for (let j = 0; j < 63; j += 1) sum += step(block[i * 64 + j]!, block[i * 64 + j + 1]!);
  return Math.min(100, Math.trunc(sum / 90));
}

/** Rows 1-16 of the 64-point DCT-II basis (the DC row is left out), scaled by √(2/64). */
const DCT = (() => {
  const scale = f(Math.sqrt(2 / 64));
  const matrix = new Float32Array(16 * 64);
  for (let i = 0; i < 16; i += 1) for (let j = 0; j < 64; j += 1) matrix[i * 64 + j] = scale * Math.cos((Math.PI / 2 / 64) * (i + 1) * (2 * j + 1));
  return matrix;
})();

/** The 16×16 low-frequency coefficients D·A·Dᵀ of a 64×64 block. */
export function dct16(block: Float32Array): Float32Array {
  const t = new Float32Array(16 * 64);
  for (let i = 0; i < 16; i += 1) {
    for (let j = 0; j < 64; j += 1) {
      let sum = 0;
      for (let k = 0; k < 64; k += 1) sum = f(sum + f(DCT[i * 64 + k]! * block[k * 64 + j]!));
      t[i * 64 + j] = sum;
    }
  }
  const out = new Float32Array(256);
  for (let i = 0; i < 16; i += 1) {
    for (let j = 0; j < 16; j += 1) {
      let sum = 0;
      for (let k = 0; k < 64; k += 1) sum = f(sum + f(t[i * 64 + k]! * DCT[j * 64 + k]!));
      out[i * 16 + j] = sum;
    }
  }
  return out;
}

/**
 * The coefficients of the rotated or flipped image, from the original's: mirroring a 64-point
 * axis multiplies the odd-numbered basis rows (0-based even) by -1, and a quarter turn transposes.
 */
function dihedral(coefficients: Float32Array, variant: DihedralVariant): Float32Array {
  const out = new Float32Array(256);
  for (let i = 0; i < 16; i += 1) {
    for (let j = 0; j < 16; j += 1) {
      const a = coefficients[i * 16 + j]!;
      const negate = (row: boolean, col: boolean) => (row && (i & 1) === 0) !== (col && (j & 1) === 0);
      switch (variant) {
        case "original":
          out[i * 16 + j] = a;
          break;
        case "rotate90":
          out[j * 16 + i] = negate(false, true) ? -a : a;
          break;
        case "rotate180":
          out[i * 16 + j] = negate(true, true) ? -a : a;
          break;
        case "rotate270":
          out[j * 16 + i] = negate(true, false) ? -a : a;
          break;
        case "flipX":
          out[i * 16 + j] = negate(true, false) ? -a : a;
          break;
        case "flipY":
          out[i * 16 + j] = negate(false, true) ? -a : a;
          break;
        case "flipPlus1":
          out[j * 16 + i] = a;
          break;
        case "flipMinus1":
          out[j * 16 + i] = negate(true, true) ? -a : a;
          break;
      }
    }
  }
  return out;
}

/** One bit per coefficient above the median (the 128th smallest), as 64 hex digits. */
export function bitsOf(coefficients: Float32Array): string {
  const median = Float32Array.from(coefficients).sort()[127]!;
  const words = new Uint16Array(16);
  for (let k = 0; k < 256; k += 1) if (coefficients[k]! > median) words[k >> 4] = words[k >> 4]! | (1 << (k & 15));
  let hex = "";
  for (let w = 15; w >= 0; w -= 1) hex += words[w]!.toString(16).padStart(4, "0");
  return hex;
}

const EMPTY_HASH = "0".repeat(64);

/** The hash and quality of an image given as its luminance (consumed: the buffer is filtered in place). */
export function pdqFromLuma(luma: Float32Array, width: number, height: number): PdqHash {
  if (width < PDQ_MIN_DIMENSION || height < PDQ_MIN_DIMENSION) return { hash: EMPTY_HASH, quality: 0 };
  const block = downsample64(luma, height, width);
  return { hash: bitsOf(dct16(block)), quality: qualityOf(block) };
}

/** The hash of each rotation and flip of the image, and its quality (the same for all eight). */
export function pdqDihedralFromLuma(luma: Float32Array, width: number, height: number): { quality: number; hashes: Record<DihedralVariant, string> } {
  if (width < PDQ_MIN_DIMENSION || height < PDQ_MIN_DIMENSION) {
    return { quality: 0, hashes: Object.fromEntries(DIHEDRAL_VARIANTS.map((v) => [v, EMPTY_HASH])) as Record<DihedralVariant, string> };
  }
  const block = downsample64(luma, height, width);
  const coefficients = dct16(block);
  const hashes = Object.fromEntries(DIHEDRAL_VARIANTS.map((variant) => [variant, bitsOf(dihedral(coefficients, variant))])) as Record<DihedralVariant, string>;
  return { quality: qualityOf(block), hashes };
}

/** Hamming distance between two hashes given as 64 hex digits. */
export function hammingHex(a: string, b: string): number {
  let distance = 0;
  for (let i = 0; i < 64; i += 8) {
    let x = (Number.parseInt(a.slice(i, i + 8), 16) ^ Number.parseInt(b.slice(i, i + 8), 16)) >>> 0;
    x -= (x >>> 1) & 0x55555555;
    x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
    distance += (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
  }
  return distance;
}
