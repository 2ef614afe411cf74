// Opaque page cursors (base64url JSON of the last row's sort key), shared by every paged list.
import { AppError } from "../errors";

export type CursorPart = "string" | "integer";

/** An opaque page cursor: the sort key of the last row, as base64url JSON. */
export function encodeCursor(parts: Array<string | number>): string {
  const bytes = new TextEncoder().encode(JSON.stringify(parts));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/gu, "-")
    .replace(/\//gu, "_")
    .replace(/=+$/u, "");
}

/** Reads a cursor made by `encodeCursor` with parts of the given shape; anything else is a 400. */
export function decodeCursor(value: string | undefined, shape: CursorPart[]): Array<string | number> | null {
  if (!value) return null;
  try {
    const text = new TextDecoder().decode(Uint8Array.from(atob(value.replace(/-/gu, "+").replace(/_/gu, "/")), (c) => c.charCodeAt(0)));
    const parts = JSON.parse(text) as unknown;
    if (Array.isArray(parts) && parts.length === shape.length && parts.every((part, i) => (shape[i] === "integer" ? Number.isInteger(part) : typeof part === "string"))) {
      return parts as Array<string | number>;
    }
  } catch {
    // fall through to the typed error
  }
  throw new AppError("request.invalid_cursor", "The cursor is not valid.", { status: 400 });
}
