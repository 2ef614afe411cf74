// The columns of a backup that name people or hold what they answered, sealed in the exported
// document and opened again on restore: console users' emails and names, reviewers' names and
// identities, task responses (and the run events and step outputs that carry them), appeal and
// approval reasons. Archived runs' R2 objects travel as they are. An installation admin's key can take a
// backup without reading them; a restore needs the same REPORT_MASTER_KEY, as sealed data does.
// AES-256-GCM under a key derived with HKDF from REPORT_MASTER_KEY (info `backup-columns/v1`),
// the installation, table and column as additional data, so a value cannot be moved elsewhere.
import { hkdfSync } from "node:crypto";
import { AppError } from "../errors";
import type { Row } from "./backup";

/** Per table, the columns sealed in an export. */
export const SEALED_BACKUP_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  console_users: ["email", "name"],
  api_keys: ["reviewer"],
  human_tasks: ["response_json", "claimed_by", "completed_by"],
  qa_reviews: ["original_reviewer", "qa_reviewer"],
  golden_items: ["completed_by", "created_by"],
  handoffs: ["completed_by"],
  appeals: ["decided_by", "proposed_by", "confirmed_by", "outcome_reason"],
  action_proposals: ["decided_by", "decision_reason"],
  review_exposure: ["reviewer"],
  // What a run recorded of a review: the task's completion event and the step's output carry the
  // reviewer's name and the response.
  workflow_events: ["payload_json"],
  workflow_step_outputs: ["inline_json"],
  exposure_caps: ["updated_by"],
};

const PREFIX = "sealed-column:v1:";
const SALT = new TextEncoder().encode("safest-tools/backup-columns");

async function columnKey(env: Env): Promise<CryptoKey> {
  const secret = (env as { REPORT_MASTER_KEY?: string }).REPORT_MASTER_KEY;
  if (!secret || secret.length < 32) throw new AppError("crypto.master_key_missing", "REPORT_MASTER_KEY (32 characters or more) is needed to seal and open a backup's personal columns.", { status: 503 });
  const raw = new Uint8Array(hkdfSync("sha256", secret, SALT, "backup-columns/v1", 32));
  return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
}

const additionalData = (installationId: string, table: string, column: string) => new TextEncoder().encode(`${installationId}\u0000${table}\u0000${column}`);

function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** Seals the personal columns of an export's rows in place (a value is kept with its JSON type: strings and numbers as text). */
export async function sealBackupColumns(env: Env, installationId: string, tables: Record<string, Row[]>): Promise<void> {
  const key = await columnKey(env);
  for (const [table, columns] of Object.entries(SEALED_BACKUP_COLUMNS)) {
    for (const row of tables[table] ?? []) {
      for (const column of columns) {
        const value = row[column];
        if (value === null || value === undefined) continue;
        const iv = crypto.getRandomValues(new Uint8Array(12));
        const plain = new TextEncoder().encode(JSON.stringify(value));
        const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: additionalData(installationId, table, column) }, key, plain));
        const out = new Uint8Array(iv.length + sealed.length);
        out.set(iv);
        out.set(sealed, iv.length);
        row[column] = `${PREFIX}${toBase64(out)}`;
      }
    }
  }
}

/**
 * Opens the sealed columns of a backup's rows in place before they are written. A sealed value
 * that does not open (another REPORT_MASTER_KEY, an edited file) is a 422
 * `installation_import.sealed_column_unreadable`; a plain value is refused too, since an export
 * never holds one.
 */
export async function openBackupColumns(env: Env, installationId: string, tables: Record<string, Row[]>): Promise<void> {
  const key = await columnKey(env);
  for (const [table, columns] of Object.entries(SEALED_BACKUP_COLUMNS)) {
    for (const row of tables[table] ?? []) {
      for (const column of columns) {
        const value = row[column];
        if (value === null || value === undefined) continue;
        const unreadable = () =>
          new AppError("installation_import.sealed_column_unreadable", `${table}.${column} is not a value this deployment sealed (is REPORT_MASTER_KEY the exporting deployment's?).`, { status: 422, details: [{ table, column }] });
        if (typeof value !== "string" || !value.startsWith(PREFIX)) throw unreadable();
        try {
          const bytes = fromBase64(value.slice(PREFIX.length));
          const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: bytes.slice(0, 12), additionalData: additionalData(installationId, table, column) }, key, bytes.slice(12));
          row[column] = JSON.parse(new TextDecoder().decode(plain)) as string | number;
        } catch {
          throw unreadable();
        }
      }
    }
  }
}
