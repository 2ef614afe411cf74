// Retention and erasure, the enforcement side: the sealed payloads of finished
// webhook deliveries made for given runs (message.send with its recipient and body, handoffs with
// their evidence, action.execute) and their resends are replaced by a sealed tombstone. Pending
// deliveries are left alone (their run is still being acted on). A settled delivery's payload may
// have moved to its archive object in R2 (delivery-archive.ts): the tombstone replaces it there.
// Called by cases/retention/retention-erase.ts.
import { sealPersonalData } from "../cases";
import { eraseArchivedPayload } from "./delivery-archive";

/** What an erased delivery's payload opens to. */
export const ERASED_PAYLOAD = { erased: true } as const;
const ERASED_DIGEST = "erased";
/**
 * `payload_digest` of a moved delivery whose erasure committed before its object got the
 * tombstone: the mark, written in the erasure's own batch, that the object still has to be
 * erased (eraseDeliveriesMovedMeanwhile right after the batch, else the schedule).
 */
export const ERASING_DIGEST = "erasing";

/** The finished, not yet erased deliveries of these runs and their resends (one level). */
export async function erasableDeliveriesUnsafe(db: D1Database, installationId: string, runIds: string[], reportIds: string[] = []): Promise<string[]> {
  if (runIds.length === 0 && reportIds.length === 0) return [];
  // message and handoff sources are `<stepId>:…`, and a step id starts with `<runId>:`; an action's source is its proposal.
  const { results } = await db
    .prepare(`
    SELECT d.id FROM json_each(?2) r CROSS JOIN webhook_deliveries d
      ON d.source_type IN ('message', 'handoff') AND d.source_id > r.value || ':' AND d.source_id < r.value || ';'
    WHERE d.installation_id = ?1 AND d.state <> 'pending' AND d.payload_digest <> '${ERASED_DIGEST}'
    UNION
    SELECT d.id FROM json_each(?2) r CROSS JOIN action_proposals p ON p.run_id = r.value CROSS JOIN webhook_deliveries d ON d.source_type = 'action' AND d.source_id = p.id
    WHERE p.installation_id = ?1 AND d.installation_id = ?1 AND d.state <> 'pending' AND d.payload_digest <> '${ERASED_DIGEST}'
    UNION
    -- Messages the host sent about a report outside any run: a notifier's receipt and outcome (Art. 16),
    -- the affected user's statement and a complaint's outcome (Art. 17, 20).
    SELECT d.id FROM json_each(?3) j CROSS JOIN messages m ON m.installation_id = ?1 AND m.report_id = j.value CROSS JOIN webhook_deliveries d ON d.id = m.delivery_id
    WHERE d.installation_id = ?1 AND d.state <> 'pending' AND d.payload_digest <> '${ERASED_DIGEST}'
    UNION
    SELECT d.id FROM json_each(?3) j CROSS JOIN redress_messages rm ON rm.installation_id = ?1 AND rm.report_id = j.value CROSS JOIN json_each(rm.delivery_ids_json) x
      CROSS JOIN webhook_deliveries d ON d.id = x.value
    WHERE d.installation_id = ?1 AND d.state <> 'pending' AND d.payload_digest <> '${ERASED_DIGEST}'`)
    .bind(installationId, JSON.stringify(runIds), JSON.stringify(reportIds))
    .all<{ id: string }>();
  const ids = results.map((r) => r.id);
  if (ids.length === 0) return ids;
  const { results: resends } = await db
    .prepare(`
    SELECT d.id FROM json_each(?2) o CROSS JOIN webhook_deliveries d ON d.source_type = 'resend' AND d.source_id > o.value || ':' AND d.source_id < o.value || ';'
    WHERE d.installation_id = ?1 AND d.state <> 'pending' AND d.payload_digest <> '${ERASED_DIGEST}'`)
    .bind(installationId, JSON.stringify(ids))
    .all<{ id: string }>();
  return [...ids, ...resends.map((r) => r.id)];
}

/**
 * The statements that erase these deliveries' payloads: a payload in D1 is sealed anew as the
 * tombstone (the column is NOT NULL), its digest `erased`. A payload in the delivery's archive
 * object (delivery-archive.ts) is replaced there by the tombstone first, here, before the caller's
 * batch; the row of a moved delivery then only gets its digest `erased`. An object a killed move
 * left beside a hot row gets the tombstone too. A delivery that moved between this read and the
 * caller's batch keeps its digest: the caller then calls eraseDeliveriesMovedMeanwhile.
 */
export async function eraseDeliveriesStatements(env: Env, installationId: string, deliveryIds: string[]): Promise<D1PreparedStatement[]> {
  const statements = await Promise.all(
    deliveryIds.map(async (id) => {
      const { sealed } = await sealPersonalData(env, installationId, `webhook_delivery:${id}`, { type: "erased", data: ERASED_PAYLOAD });
      const inObject = await eraseArchivedPayload(env, installationId, id, sealed);
      return [
        env.DB.prepare(`UPDATE webhook_deliveries SET payload_sealed = ?3, payload_digest = '${ERASED_DIGEST}' WHERE installation_id = ?1 AND id = ?2 AND state <> 'pending' AND payload_sealed <> ''`).bind(installationId, id, sealed),
        ...(inObject ? [env.DB.prepare(`UPDATE webhook_deliveries SET payload_digest = '${ERASED_DIGEST}' WHERE installation_id = ?1 AND id = ?2 AND state <> 'pending' AND payload_sealed = ''`).bind(installationId, id)] : []),
        // Moved after the read above (its object not yet erased): marked in this same batch, so
        // the erasure of its object is never forgotten, whatever happens after the batch.
        env.DB.prepare(`UPDATE webhook_deliveries SET payload_digest = '${ERASING_DIGEST}' WHERE installation_id = ?1 AND id = ?2 AND state <> 'pending' AND payload_sealed = '' AND payload_digest <> '${ERASED_DIGEST}'`).bind(
          installationId,
          id,
        ),
      ];
    }),
  );
  return statements.flat();
}

/**
 * After the erasure's batch: the deliveries among `deliveryIds` that the delivery archive moved
 * between eraseDeliveriesStatements and the batch (the batch's update of a hot row then did not
 * hold) get the tombstone in their object now, and their digest `erased`. Answers how many.
 */
export async function eraseDeliveriesMovedMeanwhile(env: Env, installationId: string, deliveryIds: string[]): Promise<number> {
  if (deliveryIds.length === 0) return 0;
  const { results } = await env.DB.prepare(`SELECT d.id FROM json_each(?2) j CROSS JOIN webhook_deliveries d ON d.id = j.value
      WHERE d.installation_id = ?1 AND d.state <> 'pending' AND d.payload_sealed = '' AND d.payload_digest <> '${ERASED_DIGEST}'`)
    .bind(installationId, JSON.stringify(deliveryIds))
    .all<{ id: string }>();
  for (const { id } of results) await finishDeliveryErasure(env, installationId, id);
  return results.length;
}

/**
 * A moved delivery's object gets the tombstone and its row the digest `erased` (a row without an
 * object — nothing of its payload left in R2 — gets the digest too).
 */
export async function finishDeliveryErasure(env: Env, installationId: string, id: string): Promise<void> {
  const { sealed } = await sealPersonalData(env, installationId, `webhook_delivery:${id}`, { type: "erased", data: ERASED_PAYLOAD });
  await eraseArchivedPayload(env, installationId, id, sealed);
  await env.DB.prepare(`UPDATE webhook_deliveries SET payload_digest = '${ERASED_DIGEST}' WHERE installation_id = ?1 AND id = ?2 AND payload_sealed = ''`).bind(installationId, id).run();
}

/** Deliveries whose erasure the schedule finishes per run. */
const ERASING_BATCH = 50;

/**
 * The schedule's pass over moved deliveries an erasure marked `erasing` and did not finish (the
 * step after its batch failed or was cut short): each object gets the tombstone. Bounded; `more`
 * while a slice was full.
 */
export async function sweepErasingDeliveries(env: Env, limit = ERASING_BATCH): Promise<{ erased: number; more: number }> {
  const { results } = await env.DB.prepare(`SELECT id, installation_id AS installationId FROM webhook_deliveries WHERE payload_digest = '${ERASING_DIGEST}' LIMIT ?1`).bind(limit).all<{ id: string; installationId: string }>();
  for (const row of results) await finishDeliveryErasure(env, row.installationId, row.id);
  return { erased: results.length, more: results.length === limit ? 1 : 0 };
}
