// Request bodies of media: hash banks and their entries (see schemas.ts).
import type { JSONSchema } from "json-schema-to-ts";
import { HASH_BANK_KINDS, MAX_ENTRIES_PER_CALL, MAX_TAG_LENGTH, MAX_TAGS, PDQ_MAX_THRESHOLD } from "../media";
import { name } from "./schema-fields";

const pdqHash = { type: "string", pattern: "^[0-9A-Fa-f]{64}$", description: "A PDQ hash: 64 hex digits." } as const;
const threshold = { type: "integer", minimum: 0, maximum: PDQ_MAX_THRESHOLD, description: "Largest Hamming distance that counts as a match; default 31 (PDQ's published threshold)." } as const;
const qualityFloor = { type: "integer", minimum: 0, maximum: 100, description: "Hashes of lower PDQ quality are neither stored nor matched; default 50." } as const;
const quality = { type: "integer", minimum: 0, maximum: 100, description: "The hash's PDQ quality, when known." } as const;
const tags = { type: "array", maxItems: MAX_TAGS, items: { type: "string", minLength: 1, maxLength: MAX_TAG_LENGTH }, description: "Labels the match reports (a list's name, a category)." } as const;

export const mediaSchemas = {
  CreateHashBank: {
    type: "object",
    required: ["name", "kind"],
    additionalProperties: false,
    properties: {
      name,
      kind: { enum: HASH_BANK_KINDS },
      threshold,
      qualityFloor,
      shards: { type: "integer", minimum: 1, maximum: 64, description: "Durable Object shards holding the entries, 262,144 each at most; default 8. Fixed at creation." },
    },
  },
  UpdateHashBank: { type: "object", additionalProperties: false, minProperties: 1, properties: { name, threshold, qualityFloor } },
  AddHashBankEntries: {
    type: "object",
    required: ["entries"],
    additionalProperties: false,
    properties: {
      entries: {
        type: "array",
        minItems: 1,
        maxItems: MAX_ENTRIES_PER_CALL,
        items: { type: "object", required: ["hash"], additionalProperties: false, properties: { hash: pdqHash, tags, quality } },
      },
    },
  },
  RemoveHashBankEntries: { type: "object", required: ["hashes"], additionalProperties: false, properties: { hashes: { type: "array", minItems: 1, maxItems: MAX_ENTRIES_PER_CALL, items: pdqHash } } },
  MatchHashBank: {
    type: "object",
    additionalProperties: false,
    properties: {
      hash: pdqHash,
      hashes: { type: "array", minItems: 1, maxItems: 8, items: pdqHash, description: "Up to 8 hashes matched together: an image's PDQ and its dihedral variants." },
      quality,
    },
  },
} as const satisfies Record<string, JSONSchema>;
