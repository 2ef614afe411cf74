// JSON Schemas of request bodies: used for validation and published in the OpenAPI document.
import type { Schema } from "@cfworker/json-schema";
import { AUTHORITY_MODES } from "../workflows/types";
import { SCOPES } from "./auth";

const name = { type: "string", minLength: 1, maxLength: 200 } as const;
const identifier = { type: "string", pattern: "^[A-Za-z0-9._:-]{1,200}$" } as const;

export const schemas = {
  CreateInstallation: { type: "object", required: ["name"], additionalProperties: false, properties: { name } },
  CreateApiKey: {
    type: "object", required: ["name", "scopes"], additionalProperties: false,
    properties: { name, scopes: { type: "array", minItems: 1, uniqueItems: true, items: { enum: [...SCOPES] } } },
  },
  CreateWorkflow: {
    type: "object", required: ["name"], additionalProperties: false,
    properties: { name, description: { type: "string", maxLength: 2000 } },
  },
  PublishVersion: {
    type: "object", required: ["graph"], additionalProperties: false,
    properties: { graph: { type: "object", description: "A workflow graph, schemaVersion 1 (see docs/graph-format.md)." } },
  },
  ValidateGraph: {
    type: "object", required: ["graph"], additionalProperties: false,
    properties: { graph: { description: "A workflow graph to check without publishing it." } },
  },
  CreateRun: {
    type: "object", required: ["workflowVersionId", "authorityMode"], additionalProperties: false,
    properties: {
      workflowVersionId: identifier,
      authorityMode: { enum: [...AUTHORITY_MODES] },
      input: { type: "object" },
      reportId: identifier,
    },
  },
  SendEvent: {
    type: "object", required: ["type"], additionalProperties: false,
    properties: { type: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" }, payload: { type: "object" } },
  },
} satisfies Record<string, Schema>;
