// A label change as a Standard Webhook (`label.applied`, `label.negated`, `label.expired`) to every
// enabled endpoint of the installation that subscribes to it, through the outbox every delivery
// goes through (enforcement/webhooks.ts: sealed payload, signed, retried, dead-lettered).
//
// The delivery rows are written in the same batch as the change itself. A rule's label is an
// upsert that may change nothing (the label was already live, or a person's label stands), so its
// delivery is guarded: written only if, by then in the batch, the entity carries the value from a
// rule created at this very write (a refresh keeps its first created_at, so a repeat hit or a
// retried event sends nothing). An expiry is seen by the sweep that deletes expired labels
// (sweepExpiredLabels), so `label.expired` arrives up to a sweep interval after readers stopped
// seeing the label.
//
// The payload names the entity by its kind and keyed hash (`entity.key`, the same for every change
// of that entity) and, where the change came with it (applied, negated), by its id: an expiry is
// found by the sweep, which holds only the key.
//
// The rows are source_type 'alert' (platform notices, as account notices are; their dead letters
// raise no delivery_dead alert) with source_id `label:<change>:<endpoint>`, which keeps them apart
// from every other notice under UNIQUE (source_type, source_id).
import { deliveryStatement, enqueueDeliveries, subscribedEndpointsStatement, type LABEL_EVENT_TYPES, type NewDelivery } from "../enforcement";
import { sha256HexSync } from "../lib/crypto";
import type { RowGuard } from "../lib/d1";

export type LabelChange = "applied" | "negated" | "expired";
type LabelEventType = (typeof LABEL_EVENT_TYPES)[number];

export interface LabelChangeInput {
  installationId: string;
  change: LabelChange;
  entityKind: string;
  entityKey: string;
  /** The entity's id, when the change came with it (never for an expiry). */
  entityId?: string;
  label: string;
  /** `rule:<version>/<rule>` or `person:<type>:<id>`. */
  source: string;
  createdAt: string;
  expiresAt: string | null;
  /** What makes this change one delivery per endpoint (a repeat of the same change is the same row). */
  changeKey: string;
  at: string;
}

/** The ids of the enabled endpoints subscribed to a label change. */
export async function labelEndpoints(db: D1Database, installationId: string, change: LabelChange): Promise<string[]> {
  const { results } = await subscribedEndpointsStatement(db, installationId, `label.${change}` satisfies LabelEventType).all<{ id: string }>();
  return results.map((row) => row.id);
}

/** The delivery rows of one change, one per endpoint, for the caller's batch (after the change's own statement). */
export async function labelChangeDeliveries(env: Env, endpointIds: readonly string[], input: LabelChangeInput, onlyIf?: RowGuard): Promise<NewDelivery[]> {
  const changeId = sha256HexSync(`${input.installationId}\u0000${input.change}\u0000${input.changeKey}`).slice(0, 32);
  const data = {
    change: input.change,
    entity: { kind: input.entityKind, key: input.entityKey, ...(input.entityId === undefined ? {} : { id: input.entityId }) },
    label: input.label,
    source: input.source,
    createdAt: input.createdAt,
    expiresAt: input.expiresAt,
  };
  return Promise.all(
    endpointIds.map((endpointId) =>
      deliveryStatement(env, { installationId: input.installationId, endpointId, eventType: `label.${input.change}`, sourceType: "alert", sourceId: `label:${changeId}:${endpointId}`, data, at: input.at }, onlyIf),
    ),
  );
}

/** Queues the deliveries whose rows the batch wrote (`results` are the batch's, `at` each delivery's index in it). */
export async function enqueueWritten(env: Env, deliveries: ReadonlyArray<{ id: string; index: number }>, results: ReadonlyArray<D1Result>): Promise<void> {
  const written = deliveries.filter(({ index }) => (results[index]?.meta.changes ?? 0) > 0).map(({ id }) => id);
  // A failed enqueue is not lost: the outbox sweep re-queues pending deliveries.
  await enqueueDeliveries(env, written).catch(() => undefined);
}
