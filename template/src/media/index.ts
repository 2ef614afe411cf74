// Media: perceptual and exact hashes of images (PDQ, SHA-256), and the hash banks they are matched against.
export { hashImage, MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, type MediaHashes } from "./hashing";
export { DIHEDRAL_VARIANTS, hammingHex, type DihedralVariant } from "./pdq";
