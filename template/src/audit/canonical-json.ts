// Canonical JSON (RFC 8785, JCS) for digests and the audit trail.
import canonicalize from "canonicalize";

/** Canonical JSON text of a value; `undefined` members are dropped, as JSON does. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new Error("canonical_json_unrepresentable");
  return text;
}
