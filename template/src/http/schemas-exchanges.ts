// Request bodies of hash exchanges: following one, contributing a confirmed match (see schemas.ts).
import type { JSONSchema } from "json-schema-to-ts";
import { HASH_EXCHANGE_KINDS, MAX_TAG_LENGTH, MAX_TAGS } from "../media";

const field = { type: "string", minLength: 1, maxLength: 2000 } as const;

export const exchangeSchemas = {
  FollowHashExchange: {
    type: "object",
    required: ["kind", "credentials"],
    additionalProperties: false,
    properties: {
      kind: { enum: HASH_EXCHANGE_KINDS },
      baseUrl: { type: "string", minLength: 1, maxLength: 500, description: "The exchange's API base; default its production URL. https only; checked by the egress rules." },
      credentials: {
        type: "object",
        maxProperties: 5,
        additionalProperties: field,
        description: "threatexchange: { accessToken } (app id|secret); ncmec: { username, password }; stopncii: { subscriptionKey, fetchFunctionKey, feedbackFunctionKey? }. Sealed at rest, never returned.",
      },
      filters: { type: "object", maxProperties: 5, additionalProperties: { type: "string", minLength: 1, maxLength: 200 }, description: "threatexchange: { privacyGroup } (required)." },
      intervalMinutes: { type: "integer", minimum: 1, maximum: 1440, description: "Minutes between pulls once the exchange has no further page; default 15." },
      contribute: { type: "boolean", description: "Opt in to sending confirmed matches back (POST …/exchange/contribute); default false." },
    },
  },
  ContributeHashExchange: {
    type: "object",
    required: ["hash", "quality"],
    additionalProperties: false,
    properties: {
      hash: { type: "string", pattern: "^[0-9A-Fa-f]{64}$", description: "The confirmed media's PDQ hash: 64 hex digits." },
      quality: { type: "integer", minimum: 0, maximum: 100, description: "Its PDQ quality (the bank's floor applies)." },
      tags: { type: "array", maxItems: MAX_TAGS, items: { type: "string", minLength: 1, maxLength: MAX_TAG_LENGTH }, description: "Labels sent with it; default the matched entry's tags." },
    },
  },
} as const satisfies Record<string, JSONSchema>;
