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

export { decodeCursor, encodeCursor, type CursorPart } from "../lib/cursor";
