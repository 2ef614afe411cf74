// Bad input, everywhere: every operation of the served OpenAPI document gets invalid bodies derived
// from its request schema (not an object, each required property missing, wrong types, nulls,
// empty objects, oversize strings, unknown enum values, unknown properties), invalid query values
// and malformed ids, sent with an admin key (the admin token where the operation takes it). Each
// must be answered 4xx with an `error.code`: never a 2xx (accepted) nor a 5xx (crashed). The
// operations and their schemas come from `/openapi.json`, so a new route is covered the day it lands.
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, api, newInstallation } from "./helpers";

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  enum?: unknown[];
  maxLength?: number;
  items?: Schema;
  $ref?: string;
  oneOf?: Schema[];
  anyOf?: Schema[];
  minProperties?: number;
};
type Operation = {
  operationId: string;
  security?: Array<Record<string, unknown>>;
  parameters?: Array<{ name: string; in: string; schema: Schema }>;
  requestBody?: { content: { "application/json"?: { schema: Schema } } };
};
interface Probe {
  what: string;
  method: string;
  path: string;
  body?: unknown;
}

/** Ids that no route may accept: malformed, not merely unknown. */
const MALFORMED_IDS = ["%00", "x".repeat(1_100), "..%2F..%2Fapi-keys", "'%20OR%201%3D1--"];
const UNKNOWN_ENUM = "zz_not_a_value";

let document: { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } };
let key: string;

beforeAll(async () => {
  document = (await api("/api/v1/openapi.json")).body;
  key = (await newInstallation("bad-input")).apiKey;
});

function resolve(schema: Schema): Schema {
  return schema.$ref ? resolve(document.components.schemas[schema.$ref.replace("#/components/schemas/", "")]!) : schema;
}

const typesOf = (schema: Schema): string[] | null => (schema.type === undefined ? null : Array.isArray(schema.type) ? schema.type : [schema.type]);

/** A JSON value of none of the schema's types, or undefined where the schema takes any type. */
function wrongType(schema: Schema): unknown {
  const types = typesOf(schema);
  if (!types || schema.oneOf || schema.anyOf) return undefined;
  const candidates: Array<[string[], unknown]> = [
    [["string"], 12_345],
    [["integer", "number"], "12"],
    [["boolean"], "true"],
    [["object"], ["not", "an", "object"]],
    [["array"], { not: "a list" }],
  ];
  for (const [accepts, value] of candidates) {
    const valueType = Array.isArray(value) ? "array" : typeof value === "number" ? "number" : typeof value;
    if (accepts.some((t) => types.includes(t)) && !types.includes(valueType) && !(valueType === "number" && types.includes("integer"))) return value;
  }
  return undefined;
}

/** Invalid variants of one body, each with what makes it invalid. */
function invalidBodies(raw: Schema, method: string): Array<[string, unknown]> {
  const schema = resolve(raw);
  const out: Array<[string, unknown]> = [
    ["body null", "null"],
    ["body a list", []],
    ["body a string", '"text"'],
  ];
  const properties = Object.entries(schema.properties ?? {}).map(([name, p]) => [name, resolve(p)] as const);
  const required = schema.required ?? [];
  // A replacement (PUT) names what it sets: an empty object would silently clear or keep everything.
  if (required.length > 0 || (schema.minProperties ?? 0) > 0 || method === "put") out.push(["empty object", {}]);
  // A valid-looking base: the required properties with a value of their type, so each probe has one fault.
  const base: Record<string, unknown> = {};
  for (const name of required) {
    const p = resolve(schema.properties?.[name] ?? {});
    const t = typesOf(p)?.[0];
    base[name] = p.enum ? p.enum[0] : t === "string" ? "x" : t === "integer" || t === "number" ? 1 : t === "boolean" ? true : t === "array" ? [] : t === "object" ? {} : "x";
  }
  for (const name of required.slice(0, 3)) {
    const { [name]: _missing, ...rest } = base;
    out.push([`required ${name} missing`, rest]);
  }
  for (const [name, p] of properties) {
    const types = typesOf(p);
    const wrong = wrongType(p);
    if (wrong !== undefined) out.push([`${name} of the wrong type`, { ...base, [name]: wrong }]);
    if (types && !types.includes("null") && !p.oneOf && !p.anyOf) out.push([`${name} null`, { ...base, [name]: null }]);
    if (p.maxLength !== undefined) out.push([`${name} longer than ${p.maxLength}`, { ...base, [name]: "x".repeat(p.maxLength + 1) }]);
    if (p.enum?.every((v) => typeof v === "string")) out.push([`${name} an unknown value`, { ...base, [name]: UNKNOWN_ENUM }]);
    if (p.items?.enum) out.push([`${name} holding an unknown value`, { ...base, [name]: [UNKNOWN_ENUM] }]);
    // An object property that needs something: `{}` says nothing.
    const inner = resolve(p);
    // An empty `filter` selects every row a bulk operation can reach: it must name a condition.
    if (types?.includes("object") && ((inner.required?.length ?? 0) > 0 || (inner.minProperties ?? 0) > 0 || name === "filter")) out.push([`${name} an empty object`, { ...base, [name]: {} }]);
  }
  if (schema.additionalProperties === false) out.push(["an unknown property", { ...base, zz_unknown_property: 1 }]);
  return out;
}

function probesOf(path: string, method: string, op: Operation): Probe[] {
  const params = (op.parameters ?? []).filter((p) => p.in === "path");
  const filled = path.replace(/\{(\w+)\}/gu, "unknown_id");
  const probes: Probe[] = [];
  // Operations whose body is not JSON (an image, a CSV) are tried with their query and ids only.
  const body = op.requestBody?.content["application/json"]?.schema;
  // A body route also gets a malformed id with a valid-shaped (empty) body; either fault may answer.
  for (const [index, id] of MALFORMED_IDS.entries()) {
    if (params.length === 0 || index >= 2) break;
    probes.push({ what: `malformed id ${id.slice(0, 24)}`, method, path: path.replace(/\{(\w+)\}/gu, id), ...(body ? { body: {} } : {}) });
  }
  if (body) for (const [what, value] of invalidBodies(body, method)) probes.push({ what, method, path: filled, body: value });
  for (const param of (op.parameters ?? []).filter((p) => p.in === "query")) {
    const values = param.name === "limit" ? ["0", "-1", "abc", "1.5"] : param.name === "cursor" ? ["%%%not-a-cursor"] : param.schema.enum ? [UNKNOWN_ENUM] : typesOf(param.schema)?.includes("integer") ? ["abc"] : [];
    for (const value of values) probes.push({ what: `?${param.name}=${value}`, method, path: `${filled}?${param.name}=${encodeURIComponent(value)}` });
  }
  return probes;
}

describe("bad input to every operation of /openapi.json", () => {
  it("answers each invalid body, query value and malformed id with a 4xx and an error code, never a 2xx or 5xx", async () => {
    const probes: Array<Probe & { token: string }> = [];
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const usesAdminToken = op.security?.some((s) => "adminToken" in s) ?? false;
        for (const probe of probesOf(path, method, op)) probes.push({ ...probe, token: usesAdminToken ? ADMIN_TOKEN : key });
      }
    }
    // Every kind of probe is exercised, and the sweep stays modest.
    expect(probes.length).toBeGreaterThan(300);
    expect(probes.length).toBeLessThan(2_000);
    for (const kind of ["malformed id", "missing", "wrong type", "null", "longer than", "unknown value", "empty object", "?limit=", "?cursor=", "unknown property"]) {
      expect(
        probes.some((p) => p.what.includes(kind)),
        kind,
      ).toBe(true);
    }
    const wrong: string[] = [];
    for (const probe of probes) {
      const response = await api(probe.path, { method: probe.method.toUpperCase(), key: probe.token, ...(probe.body === undefined ? {} : { body: probe.body }) });
      const code = (response.body as { error?: { code?: unknown } } | null)?.error?.code;
      if (response.status < 400 || response.status >= 500 || typeof code !== "string") {
        wrong.push(`${probe.method.toUpperCase()} ${probe.path.slice(0, 120)} (${probe.what}) → ${response.status} ${JSON.stringify(response.body).slice(0, 200)}`);
      }
    }
    expect(wrong).toEqual([]);
  }, 120_000);
});
