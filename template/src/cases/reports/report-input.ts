// What POST /reports checks of a report before anything is sealed or written: its category, its
// snapshot's size and bounds, and that a client's Idempotency-Key is not in a form the platform
// keeps for the reports it opens itself.
import { canonicalJson } from "../../audit";
import { AppError } from "../../errors";
import { CONTEXT_LIST_LIMIT, CONTEXT_STRING_LIMIT, contextOverBounds } from "../../workflows";
import { normalizeCategory, POLICY_CATEGORIES, type PolicyCategory } from "../taxonomy";

/** A report's category as the platform stores it (DSA statement categories and ATProto reasons normalized); 422 `report.category_unknown` otherwise. */
export function reportCategory(input: string): PolicyCategory {
  const normalized = normalizeCategory(input);
  if (!normalized) {
    throw new AppError("report.category_unknown", "Unknown category; use a DSA statement category (e.g. scams_and_fraud) or an ATProto reason type.", {
      status: 422,
      details: { allowed: POLICY_CATEGORIES },
    });
  }
  return normalized;
}

/** The most a report's snapshot may hold, serialized (bytes of its canonical JSON). */
export const MAX_SNAPSHOT_BYTES = 262_144;

/**
 * Refuses a snapshot a workflow's expressions could not read whole: over MAX_SNAPSHOT_BYTES (413
 * `report.snapshot_too_large`), or with a string or list beyond what a bounded expression reads
 * (422 `report.snapshot_over_bounds`: strings ≤ 65,536 characters, lists and maps ≤ 1,000
 * entries). So a report padded past those bounds is refused at intake, and a content rule's
 * verdict never depends on whether its input was too large to evaluate.
 */
export function assertSnapshotBounded(snapshot: unknown): void {
  if (snapshot === undefined || snapshot === null) return;
  const bytes = new TextEncoder().encode(canonicalJson(snapshot)).byteLength;
  if (bytes > MAX_SNAPSHOT_BYTES) {
    throw new AppError("report.snapshot_too_large", `subject.snapshot is ${bytes} bytes as JSON; at most ${MAX_SNAPSHOT_BYTES} are accepted. Send the content itself, not padding or whole pages.`, {
      status: 413,
      details: [{ path: "$.subject.snapshot", code: "snapshot_too_large", limit: MAX_SNAPSHOT_BYTES }],
    });
  }
  const over = contextOverBounds(snapshot);
  if (over) {
    const what = over.bound === "string_length" ? `a string longer than ${CONTEXT_STRING_LIMIT} characters` : `a list or map of more than ${CONTEXT_LIST_LIMIT} entries`;
    throw new AppError("report.snapshot_over_bounds", `subject.snapshot holds ${what}, more than a workflow's rules can read; shorten it.`, {
      status: 422,
      details: [{ path: "$.subject.snapshot", code: over.bound, limit: over.limit }],
    });
  }
}

/**
 * Idempotency-Key prefixes the platform gives the reports it opens itself: a detection rule's
 * (`rule:<version>:<rule>:<event>`) and a connector's (`#connector:<id>:<remote report>`). A client's
 * report under such a key would stand in for the platform's own (its hit or its remote report
 * answered as a replay), so `POST /reports` refuses them.
 */
const RESERVED_REPORT_KEY_PREFIXES = ["rule:", "#connector:"] as const;

/** A client's Idempotency-Key for `POST /reports`: 422 `report.idempotency_key_reserved` in a form the platform keeps for its own reports. */
export function clientReportKey(key: string | undefined): string | undefined {
  const reserved = RESERVED_REPORT_KEY_PREFIXES.find((prefix) => key?.startsWith(prefix));
  if (reserved) {
    throw new AppError("report.idempotency_key_reserved", `Idempotency-Key may not start with "${reserved}": the platform names the reports its rules and connectors open so. Use a key of your own.`, {
      status: 422,
      details: [{ path: "$headers.idempotency-key", code: "reserved" }],
    });
  }
  return key;
}
