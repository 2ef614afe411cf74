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

/**
 * Every 16-bit mask of at most 3 set bits, by their count: the first PROBES[r] of them turn a chunk
 * value into every value within r bits of it (1, 17, 137, 697 values for r = 0..3).
 */
const MASKS = (() => {
  const masks: number[] = [0];
  for (let a = 0; a < 16; a += 1) masks.push(1 << a);
  for (let a = 0; a < 16; a += 1) for (let b = a + 1; b < 16; b += 1) masks.push((1 << a) | (1 << b));
  for (let a = 0; a < 16; a += 1) for (let b = a + 1; b < 16; b += 1) for (let c = b + 1; c < 16; c += 1) masks.push((1 << a) | (1 << b) | (1 << c));
  return Uint16Array.from(masks);
})();
const PROBES = [1, 17, 137, 697];

export interface IndexMatch {
  slot: number;
  distance: number;
}

export class PdqMultiIndex {
  private words = new Uint32Array(8 * 1024);
  private live = new Uint8Array(1024);
  private seen = new Uint32Array(1024);
  private stamp = 0;
  /** The query's words (reused: a match allocates nothing per candidate). */
  private readonly query = new Uint32Array(8);
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

  /**
   * Every live slot within `threshold` bits of the hash (0 ≤ threshold ≤ 63), nearest first. A
   * candidate costs one read of its 32 bytes (a random access into `words`, the price of a match):
   * most differ from the query in more than `threshold` bits within their first two words and are
   * dropped there; a slot is marked `seen` (against being reported once per chunk it shares) only
   * once it is within the threshold, so a candidate touches no other array.
   */
  match(hex: string, threshold: number): IndexMatch[] {
    const query = wordsOf(hex, this.query);
    const [q0, q1, q2, q3, q4, q5, q6, q7] = query as unknown as number[];
    const words = this.words;
    const out: IndexMatch[] = [];
    this.stamp += 1;
    if (this.stamp === 0xffffffff) {
      this.seen.fill(0);
      this.stamp = 1;
    }
    const stamp = this.stamp;
    const within = (slot: number): void => {
      const at = slot * 8;
      let d = popcount((q0! ^ words[at]!) >>> 0) + popcount((q1! ^ words[at + 1]!) >>> 0);
      if (d > threshold) return;
      d += popcount((q2! ^ words[at + 2]!) >>> 0) + popcount((q3! ^ words[at + 3]!) >>> 0);
      if (d > threshold) return;
      d += popcount((q4! ^ words[at + 4]!) >>> 0) + popcount((q5! ^ words[at + 5]!) >>> 0) + popcount((q6! ^ words[at + 6]!) >>> 0) + popcount((q7! ^ words[at + 7]!) >>> 0);
      if (d > threshold || this.seen[slot] === stamp || !this.live[slot]) return;
      this.seen[slot] = stamp;
      out.push({ slot, distance: d });
    };
    const probes = PROBES[Math.min(3, Math.floor(threshold / CHUNKS))]!;
    if (this.indexed > 0) {
      for (let c = 0; c < CHUNKS; c += 1) {
        const offsets = this.offsets[c]!;
        const list = this.lists[c]!;
        const value = chunkOf(query, 0, c);
        for (let p = 0; p < probes; p += 1) {
          const probe = value ^ MASKS[p]!;
          for (let i = offsets[probe]!, end = offsets[probe + 1]!; i < end; i += 1) within(list[i]!);
        }
      }
    }
    for (let slot = this.indexed; slot < this.size; slot += 1) within(slot);
    return out.sort((a, b) => a.distance - b.distance || a.slot - b.slot);
  }
}
