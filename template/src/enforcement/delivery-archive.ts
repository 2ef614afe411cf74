// A webhook delivery in two tiers. Hot: its row in webhook_deliveries with the sealed payload (and
// its first attempt, since migration 0071), and its other attempts in webhook_attempts. Once it
// has been settled (delivered or dead) for an hour (at once with a 0-day window:
// lib/storage-tiers.ts), the sealed payload (still sealed, never opened here) and the attempts (as
// webhook_attempts rows, whichever form D1 kept them in: lib/delivery-attempts.ts) move into ONE
// R2 object in WORKFLOW_ARTIFACTS under a key derived from ids only; the row stays in D1 with
// everything lists, filters, metrics, the outbox and the case archive read (state, endpoint, event
// type, source, timestamps, status, attempt count, payload digest) and `payload_sealed = ''`, the
// mark of a moved delivery. Every read of a
// delivery's payload or attempts asks this module, which knows both tiers.
//
// A delivery has an object of its own rather than a place in its run's archive: a delivery settles
// on its own clock (an alert, a resend or a redress message has no run), and its reads (detail,
// resend, erasure) know the installation and the delivery id, never the run.
//
// Moving a slice is two steps, each safe to repeat and to be killed after:
//   1. build each delivery's object from its D1 rows and put it (the same rows give the same bytes;
//      R2 checks the body against its SHA-256 on the way in);
//   2. ONE D1 batch marks the rows moved (clearing a first attempt kept on the row), each only if its
//      payload, digest, settle time and number of attempts are still the ones written, and deletes
//      the attempt rows of marked rows.
// A pass killed between 1 and 2 leaves objects and rows: the next pass writes the same bytes again
// and commits. Nothing leaves D1 unless its object was written.
import { canonicalJson } from "../audit";
import { AppError, errorCode } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { attemptRowsSql, FIRST_ATTEMPT_COLUMN_NAMES } from "../lib/delivery-attempts";
import { deliveryPayloadMinutesSql } from "../lib/storage-tiers";

export const DELIVERY_ARCHIVE_FORMAT = "safest-tools.delivery-archive";
export const DELIVERY_ARCHIVE_SCHEMA_VERSION = 1;
/** `payload_sealed` of a delivery whose payload and attempts are in its archive object. */
export const MOVED_PAYLOAD = "";
/** Delivery objects an export reads side by side. */
const READS_AT_ONCE = 16;
/** Deliveries moved per sweep slice (one R2 put each, five D1 statements a slice). */
export const DELIVERY_ARCHIVE_BATCH = 50;

/** `archive/v1/<installationId>/deliveries/<deliveryId>.json`: derived from ids, so a lookup needs no D1 row. */
export function deliveryArchiveKey(installationId: string, deliveryId: string): string {
  return `archive/v${DELIVERY_ARCHIVE_SCHEMA_VERSION}/${installationId}/deliveries/${deliveryId}.json`;
}

type Cell = string | number | null;
type Row = Record<string, Cell>;

export interface DeliveryArchiveBody {
  format: typeof DELIVERY_ARCHIVE_FORMAT;
  schemaVersion: number;
  installationId: string;
  deliveryId: string;
  /** The payload as sealed at rest (or erasure's sealed tombstone). */
  payloadSealed: string;
  /** The delivery's attempts as webhook_attempts rows, every column of that table, by attempt (a first attempt kept on the delivery row included). */
  attempts: Row[];
}

/** The object as stored: the body and `digest` = `sha256:` of the body's canonical JSON. */
export interface DeliveryArchiveObject extends DeliveryArchiveBody {
  digest: string;
}

async function objectText(body: DeliveryArchiveBody): Promise<string> {
  return canonicalJson({ ...body, digest: `sha256:${await sha256Hex(canonicalJson(body))}` });
}

/** Puts an object's text; R2 refuses a body that does not match the SHA-256 sent with it. */
async function putObject(env: Env, key: string, text: string): Promise<void> {
  await env.WORKFLOW_ARTIFACTS.put(key, text, { sha256: await sha256Hex(text), httpMetadata: { contentType: "application/json" }, customMetadata: { schemaVersion: String(DELIVERY_ARCHIVE_SCHEMA_VERSION) } });
}

/** The stored object of a moved delivery, checked (format, names, digest); null when there is none. */
async function findDeliveryArchive(env: Env, installationId: string, deliveryId: string): Promise<DeliveryArchiveObject | null> {
  const key = deliveryArchiveKey(installationId, deliveryId);
  const stored = await env.WORKFLOW_ARTIFACTS.get(key);
  if (!stored) return null;
  let object: DeliveryArchiveObject;
  try {
    object = JSON.parse(await stored.text()) as DeliveryArchiveObject;
  } catch {
    throw new AppError("webhook_delivery.archive_corrupt", `The delivery archive object ${key} is not JSON.`, { status: 500, details: { key } });
  }
  const holds =
    typeof object === "object" &&
    object !== null &&
    object.format === DELIVERY_ARCHIVE_FORMAT &&
    object.installationId === installationId &&
    object.deliveryId === deliveryId &&
    typeof object.payloadSealed === "string" &&
    Array.isArray(object.attempts);
  const { digest, ...body } = holds ? object : ({} as DeliveryArchiveObject);
  if (!holds || digest !== `sha256:${await sha256Hex(canonicalJson(body))}`) {
    throw new AppError("webhook_delivery.archive_corrupt", `The delivery archive object ${key} does not match its digest or is not this delivery's.`, { status: 500, details: { key } });
  }
  return object;
}

/** The object of a delivery whose row says it moved; its absence is an error (the row points at it). */
export async function readDeliveryArchive(env: Env, installationId: string, deliveryId: string): Promise<DeliveryArchiveObject> {
  const object = await findDeliveryArchive(env, installationId, deliveryId);
  if (!object) {
    const key = deliveryArchiveKey(installationId, deliveryId);
    throw new AppError("webhook_delivery.archive_missing", `The delivery's archive object ${key} is missing from R2.`, { status: 500, details: { key } });
  }
  return object;
}

// ---- reads: both tiers ------------------------------------------------------------------------

/** Whether a row's `payload_sealed` says its payload and attempts are in the archive object. */
export const isMoved = (payloadSealed: string) => payloadSealed === MOVED_PAYLOAD;

/** A delivery's sealed payload, from its row or from its archive object. */
export async function deliveryPayloadSealed(env: Env, delivery: { id: string; installationId: string; payloadSealed: string }): Promise<string> {
  return isMoved(delivery.payloadSealed) ? (await readDeliveryArchive(env, delivery.installationId, delivery.id)).payloadSealed : delivery.payloadSealed;
}

/** One attempt as the delivery detail lists it. */
export interface AttemptView {
  attempt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  startedAt: string;
  via: string;
}

/** A delivery's attempts, oldest first, from D1 or from its archive object (the same shape either way). */
export async function deliveryAttempts(env: Env, delivery: { id: string; installationId: string; moved: boolean }): Promise<AttemptView[]> {
  if (!delivery.moved) {
    const { results } = await env.DB.prepare(`SELECT attempt, status_code AS statusCode, error, duration_ms AS durationMs, started_at AS startedAt, via
      FROM (${attemptRowsSql("d.id = ?1", "attempt")})`)
      .bind(delivery.id)
      .all<AttemptView>();
    return results;
  }
  const object = await readDeliveryArchive(env, delivery.installationId, delivery.id);
  return object.attempts.map((row) => ({
    attempt: Number(row.attempt),
    statusCode: row.status_code === null || row.status_code === undefined ? null : Number(row.status_code),
    error: row.error === null || row.error === undefined ? null : String(row.error),
    durationMs: Number(row.duration_ms),
    startedAt: String(row.started_at),
    via: String(row.via),
  }));
}

// ---- the move ---------------------------------------------------------------------------------

/**
 * The sweep's selection (?1 now, ?2 limit, ?3 one installation or NULL): settled deliveries whose
 * payload is still in D1, settled more than DELIVERY_PAYLOAD_HOT_MINUTES ago (at once with a 0-day
 * window), oldest first. It walks webhook_deliveries_settled_hot, which holds only those, so its
 * work is the backlog and the last hour, never the table.
 */
export const MOVABLE_DELIVERIES_SQL = `
  SELECT d.id, d.installation_id AS installationId FROM webhook_deliveries d INDEXED BY webhook_deliveries_settled_hot
    LEFT JOIN storage_settings st ON st.installation_id = d.installation_id
  WHERE d.state IN ('delivered', 'dead') AND d.payload_sealed <> '' AND d.updated_at <= ?1
    AND d.updated_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?1, '-' || ${deliveryPayloadMinutesSql("st.hot_days")} || ' minutes')
    AND (?3 IS NULL OR d.installation_id = ?3)
  ORDER BY d.updated_at LIMIT ?2`;

interface Candidate {
  id: string;
  installationId: string;
  payloadSealed: string;
  payloadDigest: string;
  updatedAt: string;
}

/** What a commit checks a written object against: the row as it was read and its number of attempts (either form). */
export interface WrittenDelivery {
  id: string;
  installationId: string;
  payloadSealed: string;
  payloadDigest: string;
  updatedAt: string;
  attemptRows: number;
}

/**
 * Step 1 for a set of deliveries: reads their rows and attempts (one batch, one snapshot) and puts
 * one object each. A delivery no longer settled, or already moved, is left out; one whose put
 * fails is left out and counted, for a later pass.
 */
export async function writeDeliveryArchives(env: Env, ids: string[]): Promise<{ written: WrittenDelivery[]; failed: number }> {
  if (ids.length === 0) return { written: [], failed: 0 };
  const list = JSON.stringify(ids);
  const [rows, attempts] = await env.DB.batch<Row>([
    env.DB.prepare(`SELECT d.id, d.installation_id AS installationId, d.payload_sealed AS payloadSealed, d.payload_digest AS payloadDigest, d.updated_at AS updatedAt
      FROM json_each(?1) j CROSS JOIN webhook_deliveries d ON d.id = j.value WHERE d.state IN ('delivered', 'dead') AND d.payload_sealed <> ''`).bind(list),
    env.DB.prepare(attemptRowsSql("d.id IN (SELECT value FROM json_each(?1))")).bind(list),
  ]);
  const byDelivery = new Map<string, Row[]>();
  for (const row of attempts!.results) {
    const key = String(row.delivery_id);
    const own = byDelivery.get(key);
    if (own) own.push(row);
    else byDelivery.set(key, [row]);
  }
  let failed = 0;
  const written = await Promise.all(
    (rows!.results as unknown as Candidate[]).map(async (row): Promise<WrittenDelivery | null> => {
      const own = byDelivery.get(row.id) ?? [];
      const body: DeliveryArchiveBody = { format: DELIVERY_ARCHIVE_FORMAT, schemaVersion: DELIVERY_ARCHIVE_SCHEMA_VERSION, installationId: row.installationId, deliveryId: row.id, payloadSealed: row.payloadSealed, attempts: own };
      try {
        await putObject(env, deliveryArchiveKey(row.installationId, row.id), await objectText(body));
        return { ...row, attemptRows: own.length };
      } catch (error) {
        failed += 1;
        console.error(JSON.stringify({ event: "webhook_delivery.archive_failed", deliveryId: row.id, installationId: row.installationId, code: error instanceof AppError ? error.code : "r2.put_failed" }));
        return null;
      }
    }),
  );
  return { written: written.filter((w): w is WrittenDelivery => w !== null), failed };
}

/**
 * Step 2: ONE batch marks the written deliveries moved (`payload_sealed = ''`, and a first attempt
 * kept on the row cleared: it is in the object), each only if it is still settled with the
 * payload, digest, settle time and number of attempts (either form) its object was
 * built from (an erasure or anything else that changed it in between keeps it hot, for the next
 * pass), and deletes the attempt rows of the deliveries that are marked. Answers how many moved now.
 */
export async function commitDeliveryArchives(env: Env, written: WrittenDelivery[]): Promise<number> {
  if (written.length === 0) return 0;
  const db = env.DB;
  const tuples = JSON.stringify(written.map((w) => [w.id, w.installationId, w.payloadSealed, w.payloadDigest, w.updatedAt, w.attemptRows]));
  const [marked] = await db.batch([
    db
      .prepare(`UPDATE webhook_deliveries AS d SET payload_sealed = '', ${FIRST_ATTEMPT_COLUMN_NAMES.map((name) => `${name} = NULL`).join(", ")} FROM json_each(?1) j
        WHERE d.id = j.value ->> 0 AND d.installation_id = j.value ->> 1 AND d.state IN ('delivered', 'dead')
          AND d.payload_sealed = j.value ->> 2 AND d.payload_digest = j.value ->> 3 AND d.updated_at = j.value ->> 4
          AND (SELECT COUNT(*) FROM webhook_attempts a WHERE a.delivery_id = d.id) + (d.first_started_at IS NOT NULL) = j.value ->> 5`)
      .bind(tuples),
    // A settled delivery gets no further attempts, so a moved one's rows are all in its object.
    db
      .prepare(`DELETE FROM webhook_attempts WHERE delivery_id IN (
        SELECT d.id FROM json_each(?1) j CROSS JOIN webhook_deliveries d ON d.id = j.value ->> 0 WHERE d.payload_sealed = '')`)
      .bind(tuples),
  ]);
  return marked?.meta.changes ?? 0;
}

/**
 * The delivery archive sweep (on the schedule; bounded, idempotent): settled deliveries past their
 * hour, oldest first, at most DELIVERY_ARCHIVE_BATCH a slice. `more` is 1 while the selection was
 * full, so the schedule runs further slices while the backlog lasts.
 */
export async function sweepDeliveryArchive(env: Env, now: Date = new Date(), options: { limit?: number; installationId?: string } = {}) {
  const limit = options.limit ?? DELIVERY_ARCHIVE_BATCH;
  const { results } = await env.DB.prepare(MOVABLE_DELIVERIES_SQL)
    .bind(now.toISOString(), limit, options.installationId ?? null)
    .all<{ id: string; installationId: string }>();
  if (results.length === 0) return { moved: 0, skipped: 0, failed: 0, more: 0 };
  const { written, failed } = await writeDeliveryArchives(
    env,
    results.map((r) => r.id),
  );
  const moved = await commitDeliveryArchives(env, written);
  return { moved, skipped: results.length - failed - moved, failed, more: results.length === limit ? 1 : 0 };
}

// ---- erasure and backup -----------------------------------------------------------------------

/**
 * Erasure of a delivery whose payload may be in R2: its archive object, if there is one (the
 * delivery moved, or a move was killed before its commit), is written again with `tombstone` in
 * place of the payload, so the erased ciphertext is gone from R2. Answers whether there was one.
 */
export async function eraseArchivedPayload(env: Env, installationId: string, deliveryId: string, tombstone: string): Promise<boolean> {
  let object: DeliveryArchiveObject | null;
  try {
    object = await findDeliveryArchive(env, installationId, deliveryId);
  } catch (error) {
    if (errorCode(error) !== "webhook_delivery.archive_corrupt") throw error;
    // A damaged object (truncated, edited, not this delivery's) must not stop an erasure: it is
    // replaced by the tombstone alone; the attempts it held are lost, and that is logged.
    console.error(JSON.stringify({ event: "delivery_archive.corrupt_replaced", installationId, deliveryId }));
    const body: DeliveryArchiveBody = { format: DELIVERY_ARCHIVE_FORMAT, schemaVersion: DELIVERY_ARCHIVE_SCHEMA_VERSION, installationId, deliveryId, payloadSealed: tombstone, attempts: [] };
    await putObject(env, deliveryArchiveKey(installationId, deliveryId), await objectText(body));
    return true;
  }
  if (!object) return false;
  const { digest: _digest, ...body } = object;
  await putObject(env, deliveryArchiveKey(installationId, deliveryId), await objectText({ ...body, payloadSealed: tombstone }));
  return true;
}

/**
 * A backup carries deliveries hot: a moved delivery's row gets its sealed payload back and its
 * attempts go in with the other attempt rows, so a restore needs no delivery objects (the restored
 * installation's sweep moves them again). A delivery the export read hot but that moved before its
 * attempts were read takes them from its object too. Answers how many deliveries were filled in.
 */
export async function settleMovedDeliveries(env: Env, installationId: string, tables: Record<string, Row[]>): Promise<number> {
  const deliveries = tables.webhook_deliveries ?? [];
  const moved = new Set(deliveries.filter((row) => row.payload_sealed === MOVED_PAYLOAD).map((row) => String(row.id)));
  const settledHot = deliveries.filter((row) => row.payload_sealed !== MOVED_PAYLOAD && row.state !== "pending").map((row) => String(row.id));
  for (let i = 0; i < settledHot.length; i += 500) {
    const { results } = await env.DB.prepare(`SELECT d.id FROM json_each(?2) j CROSS JOIN webhook_deliveries d ON d.id = j.value WHERE d.installation_id = ?1 AND d.payload_sealed = ''`)
      .bind(installationId, JSON.stringify(settledHot.slice(i, i + 500)))
      .all<{ id: string }>();
    for (const row of results) moved.add(row.id);
  }
  if (moved.size === 0) return 0;
  const attempts: Row[] = (tables.webhook_attempts ?? []).filter((row) => !moved.has(String(row.delivery_id)));
  const movedRows = deliveries.filter((row) => moved.has(String(row.id)));
  // The objects are read READS_AT_ONCE at a time: an export after the first hour holds nearly every delivery moved.
  for (let i = 0; i < movedRows.length; i += READS_AT_ONCE) {
    const slice = movedRows.slice(i, i + READS_AT_ONCE);
    const objects = await Promise.all(slice.map((row) => readDeliveryArchive(env, installationId, String(row.id))));
    slice.forEach((row, j) => {
      if (row.payload_sealed === MOVED_PAYLOAD) row.payload_sealed = objects[j]!.payloadSealed;
      attempts.push(...objects[j]!.attempts);
    });
  }
  tables.webhook_attempts = attempts;
  return moved.size;
}
