// Section "actions" (the first attempt is made inline, without the queue): the
// per-action cost from proposal to confirmed delivery in autonomous mode, against a bare signed
// webhook POST from the same Worker to the same receiver (target ≤ 5), and against the durable
// floor measured in the same run — that POST plus the two D1 batches an exactly-once delivery needs
// (the delivery written leased before it, the attempt and its outcome after; target ≤ 2). The receiver
// is a node:http server in this process on 127.0.0.1 that answers 200 at once and checks every
// signature afterwards with the standardwebhooks library. The action's figures are the times the
// Worker recorded in D1 (read back through a bench route); the bare POST is timed by the Worker's
// clock around the fetch.
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";
import { cpuPerUnit, cpuSnapshot, describeCpu, edge, finishedRun, idleCpu, log, mean, median, pool, publish, results, round, startRun, sumCpu, TARGETS, verdict } from "./lib.mjs";

const ACTIONS = 20; // autonomous runs start → action → end, one after another
const ACTION_BURST = 20; // the same runs started together
const BARE_POSTS = 200;
const BARE_GROUP = 20; // the Worker's clock has whole ms: the p50 is taken over means of 20 POSTs
const BARE_WARMUP = 10;
const IDLE_MS = 3_000; // the dev server's CPU while idle, taken out of the action phase's CPU
const RECEIVER_WAIT_MS = 30_000;
const TARGET_ACTION_OVER_BARE = 5;
const TARGET_ACTION_OVER_FLOOR = 2;

const actionGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "act", kind: "action", errorPort: "failed", config: { action_type: "bench_remove" }, inputMapping: { postId: "input.postId" } },
    { id: "applied", kind: "end", config: { terminal_code: "applied" } },
    { id: "other", kind: "end", config: { terminal_code: "not_applied" } },
  ],
  edges: [edge("start", "success", "act"), edge("act", "applied", "applied"), edge("act", "rejected", "other"), edge("act", "expired", "other"), edge("act", "failed", "other")],
};

/** A webhook receiver on 127.0.0.1: 200 with no body as soon as the request has been read. */
function startReceiver() {
  const received = [];
  const waiters = [];
  const http = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      response.writeHead(200, { "content-length": "0" });
      response.end();
      const entry = {
        path: request.url,
        receivedAt: Date.now(),
        body: Buffer.concat(chunks).toString("utf8"),
        headers: { "webhook-id": request.headers["webhook-id"], "webhook-timestamp": request.headers["webhook-timestamp"], "webhook-signature": request.headers["webhook-signature"] },
      };
      received.push(entry);
      for (const waiter of [...waiters]) {
        if (waiter.match(entry)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(entry);
        }
      }
    });
  });
  http.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    http.on("error", reject);
    http.listen(0, "127.0.0.1", () =>
      resolve({
        port: http.address().port,
        received,
        /** Resolves with the first delivery (already received or not) that `match` accepts. */
        waitFor(match, what) {
          const seen = received.find(match);
          if (seen) return Promise.resolve(seen);
          return new Promise((resolveWait, rejectWait) => {
            const timer = setTimeout(() => rejectWait(new Error(`receiver: no ${what} within ${RECEIVER_WAIT_MS} ms`)), RECEIVER_WAIT_MS);
            waiters.push({
              match,
              resolve: (entry) => {
                clearTimeout(timer);
                resolveWait(entry);
              },
            });
          });
        },
        close: () =>
          new Promise((resolveClose) => {
            http.closeAllConnections?.();
            http.close(() => resolveClose());
          }),
      }),
    );
  });
}

/** How many of the deliveries on `path` carry a valid Standard Webhooks signature for `secret`. */
function verified(receiver, path, secret) {
  const webhook = new Webhook(secret);
  const entries = receiver.received.filter((entry) => entry.path === path);
  let valid = 0;
  for (const entry of entries) {
    try {
      webhook.verify(entry.body, entry.headers);
      valid++;
    } catch {
      // Counted as invalid.
    }
  }
  return { total: entries.length, valid };
}

const ms = (from, to) => Date.parse(to) - Date.parse(from);

/** The parts of one action, from the times the Worker recorded (see the report for what each holds). */
function actionParts(row, receivedAt) {
  if (row.proposalState !== "applied" || row.deliveryState !== "delivered" || row.attempts !== 1 || row.attemptStatus !== 200) {
    throw new Error(`run ${row.runId}: proposal ${row.proposalState}, delivery ${row.deliveryState} after ${row.attempts} attempt(s), status ${row.attemptStatus}`);
  }
  return {
    appliedMs: ms(row.proposalCreatedAt, row.proposalUpdatedAt),
    prepareMs: ms(row.stepStartedAt, row.proposalCreatedAt),
    queueHopMs: ms(row.proposalCreatedAt, row.attemptStartedAt),
    attemptMs: row.attemptMs,
    wakeMs: ms(row.proposalUpdatedAt, row.stepFinishedAt),
    nodeMs: ms(row.stepStartedAt, row.stepFinishedAt),
    receivedMs: receivedAt === undefined ? null : receivedAt - Date.parse(row.proposalCreatedAt),
    // The receiver answered (its clock, the same machine's) → the Worker had the answer and recorded the proposal applied: how long the
    // answer waited for the Worker's thread, busy with the run's own bookkeeping (the step parked, the wait) meanwhile.
    answeredToAppliedMs: receivedAt === undefined ? null : Date.parse(row.proposalUpdatedAt) - receivedAt,
  };
}

function summarize(parts) {
  const keys = Object.keys(parts[0]);
  return Object.fromEntries(keys.map((key) => [key, round(median(parts.map((part) => part[key]).filter((value) => value !== null)), 1)]));
}

async function timings(api, adminToken, runIds) {
  const { rows } = await api("/bench/action-timings", { body: { runIds }, key: adminToken });
  if (rows.length !== runIds.length) throw new Error(`action timings: ${rows.length} rows for ${runIds.length} runs`);
  return rows;
}

export async function sectionActions(api, adminToken, key) {
  TARGETS.actionOverBareWebhook ??= TARGET_ACTION_OVER_BARE;
  TARGETS.actionOverDurableFloor ??= TARGET_ACTION_OVER_FLOOR;
  const receiver = await startReceiver();
  try {
    const base = `http://127.0.0.1:${receiver.port}`;
    log(`actions: receiver on ${base}; a webhook endpoint, an action type, a start → action → end graph`);
    const hook = await api("/api/v1/webhook-endpoints", { body: { url: `${base}/action`, description: "bench receiver", retryBaseSeconds: 1, maxAttempts: 5 }, key });
    await api("/api/v1/action-types", { body: { key: "bench_remove", name: "Bench: remove post", endpointId: hook.id, reversible: true, requiresApproval: false }, key });
    const version = await publish(api, key, actionGraph, "bench-action");
    const deliveredFor = (runId) => receiver.waitFor((entry) => entry.path === "/action" && JSON.parse(entry.body)?.data?.runId === runId, `delivery for ${runId}`);
    const runAction = async (index) => {
      const runId = await startRun(api, key, version.id, { input: { postId: `post-${index}` } });
      await deliveredFor(runId); // no polling while the delivery is on its way
      const run = await finishedRun(api, key, runId, { intervalMs: 25 });
      if (run.output?.terminalCode !== "applied") throw new Error(`run ${runId} ended ${JSON.stringify(run.output)}`);
      return runId;
    };
    log("actions: warm-up (not counted)");
    await runAction(-1);

    log(`actions: the dev server's CPU while idle (${IDLE_MS} ms), then ${ACTIONS} autonomous actions, one after another`);
    const idle = await idleCpu(IDLE_MS);
    const sequential = [];
    const cpuBefore = cpuSnapshot();
    for (let index = 0; index < ACTIONS; index++) sequential.push(await runAction(index));
    const actionCpu = cpuPerUnit(cpuBefore, cpuSnapshot(), ACTIONS, idle);
    const receivedAt = (runId) => receiver.received.find((entry) => entry.path === "/action" && JSON.parse(entry.body)?.data?.runId === runId)?.receivedAt;
    const sequentialParts = (await timings(api, adminToken, sequential)).map((row) => actionParts(row, receivedAt(row.runId)));

    log(`actions: ${ACTION_BURST} autonomous actions started together`);
    const burst = [];
    await pool(ACTION_BURST, ACTION_BURST, async (index) => burst.push(await runAction(1_000 + index)));
    const burstRows = await timings(api, adminToken, burst);
    const burstParts = burstRows.map((row) => actionParts(row, receivedAt(row.runId)));
    const burstSpanMs = Math.max(...burstRows.map((row) => Date.parse(row.proposalUpdatedAt))) - Math.min(...burstRows.map((row) => Date.parse(row.proposalCreatedAt)));

    log(`actions: ${BARE_POSTS} bare signed webhook POSTs from the Worker (after ${BARE_WARMUP} not counted)`);
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    await api("/bench/webhook-bare", { body: { url: `${base}/bare`, secret, count: BARE_WARMUP }, key: adminToken });
    const bareBefore = cpuSnapshot();
    const bare = await api("/bench/webhook-bare", { body: { url: `${base}/bare`, secret, count: BARE_POSTS }, key: adminToken });
    const bareCpu = cpuPerUnit(bareBefore, cpuSnapshot(), BARE_POSTS, idle);
    if (bare.non2xx > 0) throw new Error(`bare webhooks: ${bare.non2xx} answers were not 2xx`);

    log(`actions: ${BARE_POSTS} durable-floor deliveries (a D1 batch, the signed POST, a D1 batch), after ${BARE_WARMUP} not counted`);
    await api("/bench/webhook-durable-floor", { body: { url: `${base}/floor`, secret, count: BARE_WARMUP, endpointId: hook.id }, key: adminToken });
    const floor = await api("/bench/webhook-durable-floor", { body: { url: `${base}/floor`, secret, count: BARE_POSTS, endpointId: hook.id }, key: adminToken });
    if (floor.non2xx > 0) throw new Error(`durable floor: ${floor.non2xx} answers were not 2xx`);

    const actionSignatures = verified(receiver, "/action", hook.secret);
    const bareSignatures = verified(receiver, "/bare", secret);
    if (actionSignatures.valid !== actionSignatures.total || bareSignatures.valid !== bareSignatures.total) {
      throw new Error(`receiver: signatures valid ${actionSignatures.valid}/${actionSignatures.total} (actions), ${bareSignatures.valid}/${bareSignatures.total} (bare)`);
    }
    const action = summarize(sequentialParts);
    const groupMeans = (values) => Array.from({ length: Math.ceil(values.length / BARE_GROUP) }, (_, group) => mean(values.slice(group * BARE_GROUP, (group + 1) * BARE_GROUP)));
    const bareMs = median(groupMeans(bare.signAndFetchMs));
    const floorMs = median(groupMeans(floor.floorMs));
    Object.assign(results, {
      actions: ACTIONS,
      actionAppliedMs: action.appliedMs,
      actionAppliedMsSamples: sequentialParts.map((part) => part.appliedMs),
      actionParts: action,
      actionBurst: ACTION_BURST,
      actionBurstParts: summarize(burstParts),
      actionBurstSpanMs: burstSpanMs,
      actionBurstPerSecond: round((1000 * ACTION_BURST) / burstSpanMs, 1),
      actionCpuMsPerAction: actionCpu.perUnit,
      actionCpuMsPerActionTotal: sumCpu(actionCpu.perUnit),
      bareWebhookPosts: BARE_POSTS,
      bareWebhookMs: round(bareMs, 3),
      bareWebhookMeanMs: round(bare.totalMs / BARE_POSTS, 3),
      bareWebhookFetchMs: round(median(groupMeans(bare.fetchMs)), 3),
      bareWebhookCpuMsPerPost: bareCpu.perUnit,
      bareWebhookCpuMsPerPostTotal: sumCpu(bareCpu.perUnit),
      actionOverBareWebhook: bareMs > 0 ? round(action.appliedMs / bareMs, 1) : null,
      durableFloorMs: round(floorMs, 3),
      durableFloorMeanMs: round(mean(floor.floorMs), 3),
      actionOverDurableFloor: floorMs > 0 ? round(action.appliedMs / floorMs, 1) : null,
      actionCpuOverBareWebhookCpu: sumCpu(bareCpu.perUnit) > 0 ? round(sumCpu(actionCpu.perUnit) / sumCpu(bareCpu.perUnit), 1) : null,
      actionSignaturesValid: `${actionSignatures.valid}/${actionSignatures.total}`,
      bareSignaturesValid: `${bareSignatures.valid}/${bareSignatures.total}`,
    });
  } finally {
    await receiver.close();
  }
}

export function actionLines() {
  if (results.actionAppliedMs === undefined) return [];
  const p = results.actionParts;
  const b = results.actionBurstParts;
  const consumer = results.deliveriesConsumer;
  return [
    `action applied:   ${results.actionAppliedMs} ms from proposal to confirmed delivery  (p50 of ${results.actions} autonomous runs start → action → end, one after another; action_proposals.created_at → updated_at when applied; samples ${results.actionAppliedMsSamples.join(", ")})`,
    `action parts:     p50 ms: node start → proposal ${p.prepareMs}; proposal → its first delivery attempt starts ${p.queueHopMs} (made inline by the host that recorded the proposal; the queue${consumer ? ` — max_batch_timeout ${consumer.max_batch_timeout} s, batches of ${consumer.max_batch_size} —` : ""} carries only retries); attempt ${p.attemptMs} (open secret and payload, sign, POST, answer); applied → run resumed and node finished ${p.wakeMs}; whole action node ${p.nodeMs}; proposal → webhook at the receiver ${p.receivedMs}; receiver answered → proposal applied ${p.answeredToAppliedMs}`,
    `bare webhook:     ${results.bareWebhookMs} ms  (p50 of means of ${BARE_GROUP} signed POSTs from the Worker to the same receiver — ${results.bareWebhookPosts} in all, one after another, sign + fetch + body; mean ${results.bareWebhookMeanMs} ms; fetch alone ${results.bareWebhookFetchMs} ms)`,
    `durable floor:    ${results.durableFloorMs} ms  (p50 of means of ${BARE_GROUP}: a D1 batch writing the delivery leased, the same signed POST, a D1 batch recording the attempt and marking it delivered — what an exactly-once delivery cannot do without; mean ${results.durableFloorMeanMs} ms)`,
    `action / floor:   ${results.actionOverDurableFloor}  (target ≤ ${TARGET_ACTION_OVER_FLOOR}) ${verdict(results.actionOverDurableFloor, TARGET_ACTION_OVER_FLOOR)}  (actionOverDurableFloor; p50 / p50, measured in the same run)`,
    `action / bare:    ${results.actionOverBareWebhook}  (target ≤ ${TARGET_ACTION_OVER_BARE}) ${verdict(results.actionOverBareWebhook, TARGET_ACTION_OVER_BARE)}  (p50 / p50); CPU: ${results.actionCpuMsPerActionTotal} ms per action, its whole run and the bench's API calls (${describeCpu(results.actionCpuMsPerAction)}) vs ${results.bareWebhookCpuMsPerPostTotal} ms per bare POST (${describeCpu(results.bareWebhookCpuMsPerPost)}), ratio ${results.actionCpuOverBareWebhookCpu}; idle CPU taken out`,
    `action burst:     ${results.actionBurst} started together: proposal → applied p50 ${b.appliedMs} ms (queue hop ${b.queueHopMs} ms, attempt ${b.attemptMs} ms, wake ${b.wakeMs} ms), ${results.actionBurstPerSecond} actions/s over ${results.actionBurstSpanMs} ms; signatures valid at the receiver: actions ${results.actionSignaturesValid}, bare ${results.bareSignaturesValid}`,
  ];
}
