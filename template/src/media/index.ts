// Media: perceptual and exact hashes of images (PDQ, SHA-256), and the hash banks they are matched
// against (configuration in D1, entries in PdqIndexShard Durable Objects).
export { hashImage, MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, type MediaHashes } from "./hashing";
export { DIHEDRAL_VARIANTS, hammingHex, type DihedralVariant } from "./pdq";
export { HASH_BANK_KINDS, MAX_ENTRIES_PER_CALL, MAX_TAG_LENGTH, MAX_TAGS, matchHashBank, PDQ_DEFAULT_THRESHOLD, PDQ_MAX_THRESHOLD, type BankMatch } from "./hash-banks";
export { PdqIndexShard } from "./pdq-index-shard";
export { HASH_EXCHANGE_KINDS, sweepHashExchanges } from "./exchanges";
