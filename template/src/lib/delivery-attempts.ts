// A webhook delivery's attempts, in either of the two forms they are stored in. A delivery's first
// attempt written since migration 0071 is kept on the delivery's own row (webhook_deliveries.first_*:
// most deliveries are delivered at their first attempt, so that attempt costs no row and no statement
// of its own); every later attempt, and a first attempt written before, is a webhook_attempts row.
// Every reader takes both through the SQL below, so no reader can tell them apart.
//
// What leaves D1 (a delivery's archive object, a case's archive object, a backup) still carries
// attempts as webhook_attempts rows, with the columns that table has, and delivery rows without the
// first attempt's columns: those formats do not change with where D1 keeps an attempt. Here, below
// both domains, because the case archive may not import the enforcement domain (its index reaches
// the cases index).

/** The first attempt's columns on the delivery row (migration 0071). */
export const FIRST_ATTEMPT_COLUMN_NAMES = ["first_status_code", "first_error", "first_duration_ms", "first_started_at", "first_via"] as const;

/** The delivery row's columns as an archive or a backup carries them (every column but the first attempt's). */
export const DELIVERY_ROW_COLUMN_NAMES = [
  "id",
  "installation_id",
  "endpoint_id",
  "event_type",
  "source_type",
  "source_id",
  "payload_sealed",
  "payload_digest",
  "state",
  "attempts",
  "next_attempt_at",
  "last_status",
  "last_error",
  "created_at",
  "updated_at",
  "delivered_at",
] as const;

/** `DELIVERY_ROW_COLUMN_NAMES` as a select list, each prefixed with `alias.` when given. */
export function deliveryRowColumns(alias?: string): string {
  return DELIVERY_ROW_COLUMN_NAMES.map((name) => (alias ? `${alias}.${name}` : name)).join(", ");
}

/**
 * The id of the webhook_attempts row a first attempt kept on its delivery row stands for: derived
 * from the delivery (its attempt 1), so every read of it, and every archive or backup built from
 * it, names it alike. Real attempt rows have `att_` ids, so it never meets one.
 */
export const firstAttemptIdSql = (d = "d") => `${d}.id || ':1'`;
export const firstAttemptId = (deliveryId: string) => `${deliveryId}:1`;

/**
 * The webhook_attempts rows (either form) of the deliveries a WHERE clause over `d`
 * (webhook_deliveries) selects, ordered by `order` (over the result's columns). Columns and
 * their order as `SELECT *` of webhook_attempts answers them.
 */
export function attemptRowsSql(where: string, order = "delivery_id, attempt"): string {
  return `SELECT * FROM (
    SELECT ${firstAttemptIdSql()} AS id, d.id AS delivery_id, 1 AS attempt, d.first_status_code AS status_code, d.first_error AS error,
      d.first_duration_ms AS duration_ms, d.first_started_at AS started_at, d.first_via AS via
    FROM webhook_deliveries d WHERE (${where}) AND d.first_started_at IS NOT NULL
    UNION ALL
    SELECT a.id, a.delivery_id, a.attempt, a.status_code, a.error, a.duration_ms, a.started_at, a.via
    FROM webhook_deliveries d CROSS JOIN webhook_attempts a ON a.delivery_id = d.id WHERE (${where})
  ) ORDER BY ${order}`;
}

type Cell = string | number | null;

/**
 * A backup's or archive's delivery rows read with `SELECT *` in the form they have always had:
 * each row without the first attempt's columns, and that attempt (where a row holds one) as a
 * webhook_attempts row ahead of the table's own rows. Answers the new attempt rows' list.
 */
export function firstAttemptsAsRows(deliveries: Record<string, Cell>[], attempts: Record<string, Cell>[]): Record<string, Cell>[] {
  const first: Record<string, Cell>[] = [];
  for (const row of deliveries) {
    if (row.first_started_at !== null && row.first_started_at !== undefined) {
      first.push({
        id: firstAttemptId(String(row.id)),
        delivery_id: row.id ?? null,
        attempt: 1,
        status_code: row.first_status_code ?? null,
        error: row.first_error ?? null,
        duration_ms: row.first_duration_ms ?? null,
        started_at: row.first_started_at,
        via: row.first_via ?? null,
      });
    }
    for (const name of FIRST_ATTEMPT_COLUMN_NAMES) delete row[name];
  }
  return [...first, ...attempts];
}
