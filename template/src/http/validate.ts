// Request bodies: parsed once, checked against the JSON Schema that the OpenAPI document also shows.
import { Validator, type Schema } from "@cfworker/json-schema";
import type { Context } from "hono";
import { AppError } from "../errors";

const validators = new WeakMap<object, Validator>();

/** Parses the JSON body; an empty body counts as `{}`. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AppError("request.invalid_json", "The request body is not valid JSON.", { status: 400 });
  }
}

/** Validates against `schema`; 400 `request.invalid` lists each failing path. */
export function validateBody<T>(schema: object, body: unknown): T {
  let validator = validators.get(schema);
  if (!validator) {
    validator = new Validator(schema as Schema, "2020-12", false);
    validators.set(schema, validator);
  }
  const result = validator.validate(body);
  if (!result.valid) {
    const details = result.errors
      .filter((error) => error.keyword !== "properties" && error.keyword !== "$ref")
      .slice(0, 20)
      .map((error) => ({ path: error.instanceLocation.replace(/^#/u, "$").replace(/\//gu, "."), code: error.keyword, message: error.error }));
    throw new AppError("request.invalid", "The request body does not match the expected shape.", { status: 400, details });
  }
  return body as T;
}

export async function parseBody<T>(c: Context, schema: object): Promise<T> {
  return validateBody<T>(schema, await readJson(c));
}

/** The Idempotency-Key header, checked: 1-200 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'. */
export function idempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (!/^[A-Za-z0-9._:-]{1,200}$/u.test(header)) {
    throw new AppError("request.invalid_idempotency_key", "Idempotency-Key must be 1-200 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.", { status: 400 });
  }
  return header;
}

export type CursorPart = "string" | "integer";

/** An opaque page cursor: the sort key of the last row, as base64url JSON. */
export function encodeCursor(parts: Array<string | number>): string {
  const bytes = new TextEncoder().encode(JSON.stringify(parts));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/gu, "-").replace(/\//gu, "_").replace(/=+$/u, "");
}

/** Reads a cursor made by `encodeCursor` with parts of the given shape; anything else is a 400. */
export function decodeCursor(value: string | undefined, shape: CursorPart[]): Array<string | number> | null {
  if (!value) return null;
  try {
    const text = new TextDecoder().decode(Uint8Array.from(atob(value.replace(/-/gu, "+").replace(/_/gu, "/")), (c) => c.charCodeAt(0)));
    const parts = JSON.parse(text) as unknown;
    if (Array.isArray(parts) && parts.length === shape.length
      && parts.every((part, i) => (shape[i] === "integer" ? Number.isInteger(part) : typeof part === "string"))) {
      return parts as Array<string | number>;
    }
  } catch {
    // fall through to the typed error
  }
  throw new AppError("request.invalid_cursor", "The cursor is not valid.", { status: 400 });
}
