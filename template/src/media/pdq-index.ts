// An in-memory multi-index over 256-bit PDQ hashes (Norouzi, Punjani and Fleet, "Fast Search in
// Hamming Space with Multi-Index Hashing", CVPR 2012). The hash is cut into 16 chunks of 16 bits,
// each with a table from chunk value to the entries holding it. Pigeonhole: if two hashes are
// within distance t, some chunk differs in at most ⌊t/16⌋ bits (were every chunk ≥ ⌊t/16⌋+1 apart,
// the total would be ≥ 16·(⌊t/16⌋+1) > t). So probing, in each chunk table, every value within
// ⌊t/16⌋ bits of the query's chunk finds every entry within t: no false negatives. At PDQ's
// threshold 31 that is 1 + 16 = 17 probes per chunk, 272 in all, each a short list.
//
// Entries are slots 0..size-1. The tables are compact (offsets + slot lists per chunk); slots
// added since the last build sit in a tail that is scanned linearly, and the tables are rebuilt
// once that tail passes TAIL_LIMIT, so adding stays cheap and a match never scans much. A bulk
// load (a shard reading its table, an import's batch) adds with `deferBuild` and builds once at
// its end: rebuilding every TAIL_LIMIT entries would make loading quadratic (a cold shard of
// 250,000 entries took tens of seconds that way; one build takes a fraction of a second).
const CHUNKS = 16;
const TAIL_LIMIT = 4096;

/** Popcount of a 32-bit word. */
function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

/** A hash as 8 big-endian 32-bit words (hex digits 0-7 are word 0). */
export function wordsOf(hex: string, into: Uint32Array = new Uint32Array(8), at = 0): Uint32Array {
  for (let w = 0; w < 8; w += 1) into[at + w] = Number.parseInt(hex.slice(w * 8, w * 8 + 8), 16) >>> 0;
  return into;
}

export function hexOf(words: Uint32Array, at = 0): string {
  let hex = "";
  for (let w = 0; w < 8; w += 1) hex += words[at + w]!.toString(16).padStart(8, "0");
  return hex;
}

const chunkOf = (words: Uint32Array, at: number, chunk: number) => {
  const word = words[at + (chunk >> 1)]!;
  return chunk & 1 ? word & 0xffff : word >>> 16;
};

/** Every 16-bit value within `radius` bits of `value` (radius ≤ 3: at most 697 values). */
function neighbours(value: number, radius: number): number[] {
  const out = [value];
  if (radius >= 1) for (let a = 0; a < 16; a += 1) out.push(value ^ (1 << a));
  if (radius >= 2) for (let a = 0; a < 16; a += 1) for (let b = a + 1; b < 16; b += 1) out.push(value ^ (1 << a) ^ (1 << b));
  if (radius >= 3) for (let a = 0; a < 16; a += 1) for (let b = a + 1; b < 16; b += 1) for (let c = b + 1; c < 16; c += 1) out.push(value ^ (1 << a) ^ (1 << b) ^ (1 << c));
  return out;
}

export interface IndexMatch {
  slot: number;
  distance: number;
}

export class PdqMultiIndex {
  private words = new Uint32Array(8 * 1024);
  private live = new Uint8Array(1024);
  private seen = new Uint32Array(1024);
  private stamp = 0;
  private indexed = 0;
  private offsets: Uint32Array[] = [];
  private lists: Uint32Array[] = [];
  size = 0;

  /**
   * Appends a hash; returns its slot. With `deferBuild` the tables are not rebuilt however long the
   * tail grows: the caller calls settle() (or build()) when its batch is in.
   */
  add(hex: string, deferBuild = false): number {
    if (this.size === this.live.length) this.grow(this.size * 2);
    const slot = this.size;
    wordsOf(hex, this.words, slot * 8);
    this.live[slot] = 1;
    this.size += 1;
    if (!deferBuild) this.settle();
    return slot;
  }

  /** Rebuilds the tables when the unindexed tail has passed TAIL_LIMIT. */
  settle(): void {
    if (this.size - this.indexed > TAIL_LIMIT) this.build();
  }

  /** Slots not yet in the chunk tables (scanned linearly by every match). */
  get tail(): number {
    return this.size - this.indexed;
  }

  /** Marks a slot deleted: it is never returned again (its slot is not reused). */
  remove(slot: number): void {
    this.live[slot] = 0;
  }

  hashAt(slot: number): string {
    return hexOf(this.words, slot * 8);
  }

  private grow(capacity: number): void {
    const words = new Uint32Array(capacity * 8);
    words.set(this.words);
    this.words = words;
    const live = new Uint8Array(capacity);
    live.set(this.live);
    this.live = live;
    this.seen = new Uint32Array(capacity);
    this.stamp = 0;
  }

  /** Rebuilds the chunk tables over every slot (counting sort per chunk: O(16·size)). */
  build(): void {
    const n = this.size;
    this.offsets = [];
    this.lists = [];
    for (let c = 0; c < CHUNKS; c += 1) {
      const offsets = new Uint32Array(65537);
      for (let s = 0; s < n; s += 1) {
        const v = chunkOf(this.words, s * 8, c) + 1;
        offsets[v] = offsets[v]! + 1;
      }
      for (let v = 0; v < 65536; v += 1) offsets[v + 1] = offsets[v + 1]! + offsets[v]!;
      const fill = offsets.slice(0, 65536);
      const list = new Uint32Array(n);
      for (let s = 0; s < n; s += 1) {
        const v = chunkOf(this.words, s * 8, c);
        list[fill[v]!] = s;
        fill[v] = fill[v]! + 1;
      }
      this.offsets.push(offsets);
      this.lists.push(list);
    }
    this.indexed = n;
  }

  /** Distance from the query to a slot, or more than `limit` (stops counting once past it). */
  private distance(query: Uint32Array, slot: number, limit: number): number {
    const at = slot * 8;
    let d = 0;
    for (let w = 0; w < 8; w += 1) {
      d += popcount((query[w]! ^ this.words[at + w]!) >>> 0);
      if (d > limit) return d;
    }
    return d;
  }

  /** Every live slot within `threshold` bits of the hash (0 ≤ threshold ≤ 63), nearest first. */
  match(hex: string, threshold: number): IndexMatch[] {
    const query = wordsOf(hex);
    const out: IndexMatch[] = [];
    this.stamp += 1;
    if (this.stamp === 0xffffffff) {
      this.seen.fill(0);
      this.stamp = 1;
    }
    const radius = Math.floor(threshold / CHUNKS);
    const check = (slot: number) => {
      if (this.seen[slot] === this.stamp) return;
      this.seen[slot] = this.stamp;
      if (!this.live[slot]) return;
      const distance = this.distance(query, slot, threshold);
      if (distance <= threshold) out.push({ slot, distance });
    };
    if (this.indexed > 0) {
      for (let c = 0; c < CHUNKS; c += 1) {
        const offsets = this.offsets[c]!;
        const list = this.lists[c]!;
        for (const value of neighbours(chunkOf(query, 0, c), radius)) {
          for (let i = offsets[value]!, end = offsets[value + 1]!; i < end; i += 1) check(list[i]!);
        }
      }
    }
    for (let slot = this.indexed; slot < this.size; slot += 1) check(slot);
    return out.sort((a, b) => a.distance - b.distance || a.slot - b.slot);
  }
}
