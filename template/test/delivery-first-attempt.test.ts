// A delivery's first attempt kept on its own row (migration 0071; lib/delivery-attempts.ts): the
// attempt that settles most deliveries is recorded by the delivery's update alone, with no
// webhook_attempts row and no statement of its own; later attempts are rows as before. Every
// reader — the attempts list of a delivery's detail, its archive object, a backup and its restore —
// answers exactly as for attempts kept as rows, for a delivery delivered at once and one retried.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Actor } from "../src/auth";
import { decideProposal, DELIVERY_SOURCES } from "../src/enforcement/actions";
import { commitDeliveryArchives, deliveryArchiveKey, writeDeliveryArchives } from "../src/enforcement/delivery-archive";
import { attemptDelivery, DELIVERY_COLUMNS, deliveryStatement, sendClaimedAttempt, type AttemptEndpoint, type DeliveryRow } from "../src/enforcement/webhooks";
import { installationDeleteStatements } from "../src/installations/backup";
import { attemptRowsSql, DELIVERY_ROW_COLUMN_NAMES, FIRST_ATTEMPT_COLUMN_NAMES } from "../src/lib/delivery-attempts";
import { ADMIN_TOKEN, api, newInstallation, publish, removePostGraph, startRun, until, waitForRun, deliverMessage } from "./helpers";
import { watchedEnv } from "./d1-watch";

type Attempt = { attempt: number; statusCode: number | null; error: string | null; durationMs: number; startedAt: string; via: string };

/** The test's env whose D1 binding records what it sends: one entry per round trip, the SQL of each statement in it (a batch's in order). */
function recordingEnv() {
  const trips: string[][] = [];
  return { env: watchedEnv(({ sqls }) => void trips.push(sqls)), trips };
}

/** An installation with an endpoint on `path` whose secret the receiver knows (message.send and action.execute). */
async function setup(path: string) {
  const { id: installationId, apiKey } = await newInstallation("first-attempt");
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: new URL(`https://x${path}`).pathname, secret: hook.body.secret }) });
  return { installationId, apiKey, endpointId: hook.body.id as string };
}

/**
 * An assisted run's proposal approved with `withEnv`: its delivery is committed leased to this
 * host, and its first attempt (the work decideProposal hands to `defer`) is `attempt`, run by the caller.
 */
async function approvedAction(path: string, withEnv: typeof env = env) {
  const { installationId, apiKey, endpointId } = await setup(path);
  const type = await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId, reversible: true, requiresApproval: true } });
  expect(type.status).toBe(201);
  const version = await publish(apiKey, removePostGraph);
  const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p1" } });
  const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: { runId: string }) => p.runId === run.id), "a proposal");
  const actor: Actor = { installationId, scopes: ["admin"], audit: { type: "admin", id: "test" } };
  let deferred: (() => Promise<unknown>) | null = null;
  await decideProposal(withEnv, actor, proposal.id as string, { approve: true, approver: "mod" }, (start) => {
    deferred = start;
  });
  expect(deferred).not.toBeNull();
  const attempt = deferred as unknown as () => Promise<unknown>;
  return { installationId, apiKey, endpointId, run, proposal: proposal as { id: string }, attempt };
}

/** The audit events of the given targets, by action and count. */
const eventsOf = (installationId: string, ...targets: string[]) =>
  env.DB.prepare(`SELECT action, COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND target_id IN (SELECT value FROM json_each(?2)) GROUP BY action ORDER BY action`)
    .bind(installationId, JSON.stringify(targets))
    .all<{ action: string; n: number }>()
    .then((r) => r.results);

const deliver = (installationId: string, endpointId: string) => deliverMessage(installationId, endpointId, { text: "hello" });

/** Where D1 keeps a delivery's attempts: the first on its row (or not), the number of webhook_attempts rows. */
async function storedForm(id: string) {
  const row = await env.DB.prepare("SELECT first_started_at AS firstStartedAt, first_status_code AS firstStatus, first_via AS firstVia FROM webhook_deliveries WHERE id = ?1").bind(id).first<Record<string, unknown>>();
  const rows = await env.DB.prepare("SELECT attempt FROM webhook_attempts WHERE delivery_id = ?1 ORDER BY attempt").bind(id).all<{ attempt: number }>();
  return { onRow: row?.firstStartedAt !== null && row?.firstStartedAt !== undefined, firstStatus: row?.firstStatus ?? null, firstVia: row?.firstVia ?? null, attemptRows: rows.results.map((r) => r.attempt) };
}

/** Rewrites a delivery's first attempt kept on its row as the webhook_attempts row it stands for: the form every delivery had before migration 0071. */
async function asAttemptRow(id: string): Promise<void> {
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO webhook_attempts (id, delivery_id, attempt, status_code, error, duration_ms, started_at, via)
      SELECT id || ':1', id, 1, first_status_code, first_error, first_duration_ms, first_started_at, first_via FROM webhook_deliveries WHERE id = ?1 AND first_started_at IS NOT NULL`).bind(id),
    env.DB.prepare(`UPDATE webhook_deliveries SET ${FIRST_ATTEMPT_COLUMN_NAMES.map((c) => `${c} = NULL`).join(", ")} WHERE id = ?1`).bind(id),
  ]);
}

const detail = async (apiKey: string, id: string) => {
  const answer = await api(`/api/v1/webhook-deliveries/${id}`, { key: apiKey });
  expect(answer.status).toBe(200);
  return answer.body as { state: string; attempts: number; lastStatus: number | null; history: Attempt[] };
};

describe("a delivery's first attempt on its row", () => {
  it("the delivery row's columns and the first attempt's cover webhook_deliveries exactly", async () => {
    const { results } = await env.DB.prepare("SELECT name FROM pragma_table_info('webhook_deliveries')").all<{ name: string }>();
    expect(results.map((r) => r.name).sort()).toEqual([...DELIVERY_ROW_COLUMN_NAMES, ...FIRST_ATTEMPT_COLUMN_NAMES].sort());
  });

  it("an approved action's first attempt, delivered, is recorded by its delivery's update, which moves its proposal too: two statements, no webhook_attempts row; the run woken after one read", async () => {
    const recording = recordingEnv();
    const { installationId, apiKey, endpointId, run, proposal, attempt } = await approvedAction("/ok/first-attempt-statements", recording.env);
    const from = recording.trips.length;
    await attempt();
    const sent = recording.trips.slice(from);
    const [batch, ...others] = sent.filter((trip) => trip.some((sql) => sql.includes("UPDATE webhook_deliveries SET attempts")));
    expect(others).toEqual([]);
    // The delivery's update (with the attempt; it moves the proposal too: migration 0071's trigger)
    // and the audit events (webhook_delivery.delivered and action.applied, one statement): no
    // webhook_attempts insert, no update of the proposal of its own.
    expect(batch!.filter((sql) => sql.includes("webhook_attempts") || sql.includes("action_proposals SET"))).toEqual([]);
    expect(batch).toHaveLength(2);
    expect(sent.flat().filter((sql) => sql.includes("webhook_attempts"))).toEqual([]);
    // Then the run is woken: one read of the proposal with its run's instance (the signal's target), nothing else.
    // (Opening the endpoint's secret for the first time in this isolate reads its data key: not counted here.)
    const own = sent.filter((trip) => !trip.some((sql) => sql.includes("FROM data_keys")));
    expect(own).toHaveLength(2);
    expect(own[1]).toHaveLength(1);
    expect(own[1]![0]).toContain("FROM action_proposals p");

    const done = await waitForRun(apiKey, run.id);
    expect(done.output.terminalCode).toBe("applied");
    const [delivery] = (await api("/api/v1/webhook-deliveries", { key: apiKey })).body.items;
    expect(await storedForm(delivery.id)).toEqual({ onRow: true, firstStatus: 200, firstVia: "inline", attemptRows: [] });
    const shown = await detail(apiKey, delivery.id);
    expect(shown).toMatchObject({ state: "delivered", attempts: 1, lastStatus: 200 });
    expect(shown.history).toEqual([{ attempt: 1, statusCode: 200, error: null, durationMs: expect.any(Number), startedAt: expect.any(String), via: "inline" }]);
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body).toMatchObject({ state: "applied", deliveryId: delivery.id });
    // One event per state change, as before; a replay of the attempt's record (the same claimed
    // attempt recorded again) writes nothing: the update holds only at attempts = 0.
    const events = () => eventsOf(installationId, delivery.id, proposal.id);
    const expected = [
      { action: "action.applied", n: 1 },
      { action: "action.approved", n: 1 },
      { action: "action.proposed", n: 1 },
      { action: "webhook_delivery.delivered", n: 1 },
    ];
    expect(await events()).toEqual(expected);
    const before = await env.DB.prepare("SELECT * FROM webhook_deliveries WHERE id = ?1").bind(delivery.id).first();
    const claimed = await env.DB.prepare(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ?1`).bind(delivery.id).first<DeliveryRow>();
    const endpoint = await env.DB.prepare("SELECT id, url, secret_sealed AS secretSealed, retry_base_seconds AS retryBaseSeconds, max_attempts AS maxAttempts, state FROM webhook_endpoints WHERE id = ?1")
      .bind(endpointId)
      .first<AttemptEndpoint>();
    await sendClaimedAttempt(env, { delivery: { ...claimed!, state: "pending", attempts: 0 }, endpoint, refused: null }, DELIVERY_SOURCES.finisher, "queue");
    expect(await env.DB.prepare("SELECT * FROM webhook_deliveries WHERE id = ?1").bind(delivery.id).first()).toEqual(before);
    expect(await storedForm(delivery.id)).toEqual({ onRow: true, firstStatus: 200, firstVia: "inline", attemptRows: [] });
    expect((await detail(apiKey, delivery.id)).history).toEqual(shown.history);
    expect(await events()).toEqual(expected);
  });

  it("the attempts of a delivery delivered at once and of one retried read alike in either form: detail, archive object, backup and restore", async () => {
    const once = await setup("/ok/first-attempt-forms");
    const retried = await setup("/flaky/first-attempt-forms?failures=1");
    const onceId = await deliver(once.installationId, once.endpointId);
    const retriedId = await deliver(retried.installationId, retried.endpointId);
    // Where D1 keeps them: attempt 1 on the row either way, attempt 2 as a row.
    expect(await storedForm(onceId)).toEqual({ onRow: true, firstStatus: 200, firstVia: "queue", attemptRows: [] });
    expect(await storedForm(retriedId)).toEqual({ onRow: true, firstStatus: 500, firstVia: "queue", attemptRows: [2] });
    const cases = [
      { ...once, id: onceId, statuses: [200] },
      { ...retried, id: retriedId, statuses: [500, 200] },
    ];
    for (const c of cases) {
      const shown = await detail(c.apiKey, c.id);
      expect(shown).toMatchObject({ state: "delivered", attempts: c.statuses.length, lastStatus: 200 });
      expect(shown.history.map((a) => [a.attempt, a.statusCode, a.error, a.via])).toEqual(c.statuses.map((status, i) => [i + 1, status, status === 200 ? null : "http_500", "queue"]));
      const rows = (await env.DB.prepare(attemptRowsSql("d.id = ?1", "attempt")).bind(c.id).all()).results;
      expect(rows.map((r) => Object.keys(r))).toEqual(c.statuses.map(() => ["id", "delivery_id", "attempt", "status_code", "error", "duration_ms", "started_at", "via"]));
      expect(rows[0]).toMatchObject({ id: `${c.id}:1`, delivery_id: c.id, attempt: 1, status_code: c.statuses[0] });

      // The archive object built from the row form is byte for byte the one built from attempt rows.
      const [fromRow] = (await writeDeliveryArchives(env, [c.id])).written;
      const objectFromRow = await (await env.WORKFLOW_ARTIFACTS.get(deliveryArchiveKey(c.installationId, c.id)))!.text();
      await asAttemptRow(c.id);
      expect(await storedForm(c.id)).toEqual({ onRow: false, firstStatus: null, firstVia: null, attemptRows: c.statuses.map((_, i) => i + 1) });
      expect(await detail(c.apiKey, c.id)).toEqual(shown);
      const [fromRows] = (await writeDeliveryArchives(env, [c.id])).written;
      expect(await (await env.WORKFLOW_ARTIFACTS.get(deliveryArchiveKey(c.installationId, c.id)))!.text()).toBe(objectFromRow);
      expect(fromRows).toEqual(fromRow);
      expect(JSON.parse(objectFromRow).attempts).toEqual(rows);
    }

    // A backup carries the row form as attempt rows and rows without the first attempt's columns,
    // exactly as the attempt-row form; restored, the delivery reads as before.
    const [c] = cases;
    const twin = await deliver(c!.installationId, c!.endpointId);
    const twinShown = await detail(c!.apiKey, twin);
    const twinRows = (await env.DB.prepare(attemptRowsSql("d.id = ?1", "attempt")).bind(twin).all()).results;
    const exported = await api("/api/v1/installation/export", { key: c!.apiKey, method: "POST" });
    expect(exported.status).toBe(200);
    const tables = exported.body.tables as Record<string, Record<string, unknown>[]>;
    expect(tables.webhook_deliveries!.every((row) => FIRST_ATTEMPT_COLUMN_NAMES.every((name) => !(name in row)))).toBe(true);
    expect(tables.webhook_attempts!.filter((a) => a.delivery_id === twin)).toEqual(twinRows);
    expect(tables.webhook_attempts!.filter((a) => a.delivery_id === c!.id).map((a) => a.id)).toEqual([`${c!.id}:1`]);
    expect(exported.body.manifest.counts.webhook_attempts).toBe(tables.webhook_attempts!.length);
    await env.DB.batch(installationDeleteStatements(env.DB, c!.installationId));
    await env.AUDIT_ANCHORS.delete(`audit/${c!.installationId}/head.json`);
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: exported.body });
    expect(restored.status).toBe(201);
    expect(await detail(c!.apiKey, twin)).toEqual(twinShown);
    expect(await storedForm(twin)).toEqual({ onRow: false, firstStatus: null, firstVia: null, attemptRows: [1] });
    expect((await env.DB.prepare(attemptRowsSql("d.id = ?1", "attempt")).bind(twin).all()).results).toEqual(twinRows);

    // Moved to R2, a first attempt on its row goes into the object and leaves the row; the detail reads the same.
    const third = await deliver(c!.installationId, c!.endpointId);
    const thirdShown = await detail(c!.apiKey, third);
    expect((await storedForm(third)).onRow).toBe(true);
    const written = await writeDeliveryArchives(env, [third]);
    expect(await commitDeliveryArchives(env, written.written)).toBe(1);
    expect(await storedForm(third)).toEqual({ onRow: false, firstStatus: null, firstVia: null, attemptRows: [] });
    expect(await detail(c!.apiKey, third)).toEqual(thirdShown);
  });

  it("a delivery's end moves its action's proposal in its own update: delivered → applied (a proposal cancelled in flight too), dead → failed, each with its one event", async () => {
    const delivered = await approvedAction("/ok/first-attempt-cancelled-in-flight");
    // Cancelled while its request is in flight (the node left): the endpoint confirmed it, so the record says applied.
    await env.DB.prepare("UPDATE action_proposals SET state = 'cancelled' WHERE id = ?1").bind(delivered.proposal.id).run();
    await delivered.attempt();
    const proposal = await api(`/api/v1/action-proposals/${delivered.proposal.id}`, { key: delivered.apiKey });
    const [row] = (await api("/api/v1/webhook-deliveries", { key: delivered.apiKey })).body.items;
    expect(row).toMatchObject({ state: "delivered", sourceId: delivered.proposal.id });
    expect(proposal.body).toMatchObject({ state: "applied", deliveryId: row.id });
    const settledAt = await env.DB.prepare("SELECT p.updated_at AS p, d.updated_at AS d FROM action_proposals p JOIN webhook_deliveries d ON d.id = p.delivery_id WHERE p.id = ?1")
      .bind(delivered.proposal.id)
      .first<{ p: string; d: string }>();
    expect(settledAt!.p).toBe(settledAt!.d);
    expect((await eventsOf(delivered.installationId, delivered.proposal.id)).filter((e) => e.action === "action.applied")).toEqual([{ action: "action.applied", n: 1 }]);

    // 410 Gone: dead at its first attempt.
    const dead = await approvedAction("/gone/first-attempt-dead");
    await dead.attempt();
    const [deadRow] = (await api("/api/v1/webhook-deliveries", { key: dead.apiKey })).body.items;
    expect(deadRow).toMatchObject({ state: "dead", attempts: 1, lastStatus: 410 });
    expect((await api(`/api/v1/action-proposals/${dead.proposal.id}`, { key: dead.apiKey })).body.state).toBe("failed");
    expect(await eventsOf(dead.installationId, dead.proposal.id, deadRow.id)).toEqual([
      { action: "action.approved", n: 1 },
      { action: "action.failed", n: 1 },
      { action: "action.proposed", n: 1 },
      { action: "webhook_delivery.dead", n: 1 },
    ]);
    expect((await waitForRun(dead.apiKey, dead.run.id)).output.terminalCode).toBe("failed");
  });

  it("a rate-limited first attempt kept on the row still does not count against the endpoint's attempts", async () => {
    const { installationId, endpointId } = await setup("/down/first-attempt-deferred");
    const delivery = await deliveryStatement(env, { installationId, endpointId, eventType: "message.send", sourceType: "message", sourceId: `msg-${crypto.randomUUID()}`, data: { text: "hello" }, at: new Date().toISOString() });
    await env.DB.batch([delivery.statement]);
    // Four attempts made: the first deferred by a rate limit (on the row), three refused (rows); the endpoint allows five.
    const at = new Date(Date.now() - 60_000).toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE webhook_deliveries SET attempts = 4, last_status = 503, last_error = 'http_503', next_attempt_at = ?2,
        first_status_code = 429, first_error = 'rate_limited', first_duration_ms = 5, first_started_at = ?2, first_via = 'queue' WHERE id = ?1`).bind(delivery.id, at),
      ...[2, 3, 4].map((n) =>
        env.DB.prepare(`INSERT INTO webhook_attempts (id, delivery_id, attempt, status_code, error, duration_ms, started_at, via) VALUES (?1, ?2, ?3, 503, 'http_503', 5, ?4, 'queue')`).bind(
          `att_deferred_${n}_${delivery.id}`,
          delivery.id,
          n,
          at,
        ),
      ),
    ]);
    // The fifth attempt fails too, but only four counted: the delivery is retried, not dead.
    expect(await attemptDelivery(env, delivery.id, async () => [])).toMatchObject({ kind: "retry" });
    expect(await env.DB.prepare("SELECT state, attempts FROM webhook_deliveries WHERE id = ?1").bind(delivery.id).first()).toEqual({ state: "pending", attempts: 5 });
  });

  it("the attempts' SQL of either form seeks a delivery by its key and its attempt rows by their unique index, for one delivery and for a list", async () => {
    for (const [where, binds] of [
      ["d.id = ?1", ["msg_x"]],
      ["d.id IN (SELECT value FROM json_each(?1))", ['["msg_x","msg_y"]']],
    ] as const) {
      const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${attemptRowsSql(where)}`)
        .bind(...binds)
        .all<{ detail: string }>();
      const details = results.map((r) => r.detail);
      expect(details.filter((d) => /^SCAN (d|a)\b(?! USING)/u.test(d))).toEqual([]);
      expect(details.some((d) => /SEARCH a USING (COVERING )?INDEX sqlite_autoindex_webhook_attempts_\d+ \(delivery_id=\?\)/u.test(d))).toBe(true);
    }
  });
});
