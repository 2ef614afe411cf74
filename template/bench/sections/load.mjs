// Section "load": does background work starve request handling? A steady mixed load
// in an installation of its own — reports at a fixed rate (open loop: one every 200 ms whatever the
// previous did), each starting a run that puts a task in a queue; two reviewers claiming and
// answering those tasks; every "remove" answer an autonomous action to a flaky receiver (a
// node:http server on 127.0.0.1 that fails the first attempt of one webhook in three, so the queue
// carries retries) — and the p99 round trip of intake under it, over the p50 of one intake on the
// idle server (same installation, same body, one at a time with pauses between). An intake that
// matches the trigger starts its run in the request (the run's instance is created before the
// answer), so a second pair of figures uses probes: reports of another category, which start no
// run, sent twice a second during the load and one at a time on the idle server.
import { createServer } from "node:http";
import { log, percentile, results, reviewedDesk, round, sleep, TARGETS, verdict } from "./lib.mjs";

const IDLE_SAMPLES = 30;
const IDLE_PAUSE_MS = 250; // between idle intakes: the run each one starts settles before the next
const LOAD_SECONDS = 30;
const REPORTS_PER_SECOND = 5;
const PROBES_PER_SECOND = 2;
const REVIEWERS = 2;
const REVIEW_IDLE_MS = 200; // a reviewer with nothing to claim looks again after this
const DRAIN_MS = 20_000; // after the load: how long the tail of runs and deliveries may take
const TARGET = 10;

const reportBody = (tag, index, category = "scams_and_fraud") => ({
  subject: { kind: "content", id: `${tag}-post-${index}`, url: `https://social.example/p/${tag}-${index}`, snapshot: { text: `Double your crypto in 24h! ${index}`.repeat(4) } },
  category,
  reporter: { id: `user-${index % 500}`, contact: `reporter.${index % 500}@example.org` },
  description: `This post is a scam; I lost money. Report ${index}.`.repeat(3),
  evidence: [{ kind: "text", text: `DM received: send 0.1 BTC, get 0.2 back (${index})` }],
});

/** A receiver that fails (500) the first attempt of every third webhook-id, then accepts it. */
function startFlakyReceiver() {
  const seen = new Map();
  const accepted = new Map();
  let requests = 0;
  const http = createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      requests++;
      const id = String(request.headers["webhook-id"] ?? "");
      const attempt = (seen.get(id) ?? 0) + 1;
      seen.set(id, attempt);
      const fail = attempt === 1 && seen.size % 3 === 0;
      if (!fail) accepted.set(id, (accepted.get(id) ?? 0) + 1);
      response.writeHead(fail ? 500 : 200, { "content-length": "0" });
      response.end();
    });
  });
  http.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    http.on("error", reject);
    http.listen(0, "127.0.0.1", () =>
      resolve({
        port: http.address().port,
        stats: () => ({ requests, webhookIds: seen.size, acceptedOnce: [...accepted.values()].filter((n) => n === 1).length, acceptedTwice: [...accepted.values()].filter((n) => n > 1).length }),
        close: () =>
          new Promise((resolveClose) => {
            http.closeAllConnections?.();
            http.close(() => resolveClose());
          }),
      }),
    );
  });
}

export async function sectionLoad(api, timed, adminToken, base) {
  TARGETS.intakeP99UnderLoadOverIdleP50 ??= TARGET;
  const receiver = await startFlakyReceiver();
  try {
    log("load: a queue, a flaky receiver, an action type, report → task → (remove) action, a trigger for every report");
    const { queue, intakeKey, reviewKey } = await reviewedDesk(api, adminToken, { name: "load", receiverUrl: `http://127.0.0.1:${receiver.port}/load`, maxAttempts: 8 });
    const tag = Math.random().toString(16).slice(2, 10);
    let sent = 0;
    const post = async () => {
      const index = sent++;
      const result = await timed("/api/v1/reports", { body: reportBody(tag, index), key: intakeKey, headers: { "idempotency-key": `load-${tag}-${index}` } });
      if (result.status !== 201 || result.body.runs?.length !== 1) throw new Error(`load report ${index}: status ${result.status}, runs ${JSON.stringify(result.body.runs)}`);
      return result;
    };
    const probe = async () => {
      const index = sent++;
      const result = await timed("/api/v1/reports", { body: reportBody(tag, index, "cyber_violence"), key: intakeKey, headers: { "idempotency-key": `load-${tag}-${index}` } });
      if (result.status !== 201 || result.body.runs?.length !== 0) throw new Error(`load probe ${index}: status ${result.status}, runs ${JSON.stringify(result.body.runs)}`);
      return result;
    };

    log(`load: idle — ${IDLE_SAMPLES} intakes one at a time, ${IDLE_PAUSE_MS} ms apart (after 5 not counted)`);
    for (let index = 0; index < 5; index++) await post();
    await sleep(1_000);
    const idle = [];
    const idleProbes = [];
    for (let index = 0; index < IDLE_SAMPLES; index++) {
      idle.push((await post()).clientMs);
      await sleep(IDLE_PAUSE_MS);
      idleProbes.push((await probe()).clientMs);
      await sleep(IDLE_PAUSE_MS);
    }

    log(`load: ${LOAD_SECONDS} s of ${REPORTS_PER_SECOND} reports/s, ${REVIEWERS} reviewers, actions to a flaky receiver`);
    const underLoad = [];
    const probesUnderLoad = [];
    const reviewMs = [];
    let answered = 0;
    let stop = false;
    const reviewer = async (name) => {
      while (!stop) {
        const began = performance.now();
        const claim = await fetch(`${base}/api/v1/queues/${queue.id}/next`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${reviewKey}` },
          body: JSON.stringify({ reviewer: name }),
        });
        const claimed = await claim.json();
        if (claim.status === 404) {
          await sleep(REVIEW_IDLE_MS);
          continue;
        }
        if (!claim.ok) throw new Error(`reviewer ${name}: claim ${claim.status} ${JSON.stringify(claimed).slice(0, 300)}`);
        const answer = answered % 5 === 4 ? "keep" : "remove";
        const done = await fetch(`${base}/api/v1/tasks/${claimed.id}/complete`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${reviewKey}` },
          body: JSON.stringify({ reviewer: name, response: { verdict: answer } }),
        });
        await done.text();
        if (!done.ok) throw new Error(`reviewer ${name}: complete ${done.status}`);
        answered++;
        reviewMs.push(performance.now() - began);
      }
    };
    const reviewers = Array.from({ length: REVIEWERS }, (_, index) => reviewer(`load-mod-${index}`));
    const inFlight = [];
    const began = performance.now();
    const probes = (async () => {
      for (let index = 0; index < LOAD_SECONDS * PROBES_PER_SECOND; index++) {
        const wait = began + ((index + 0.5) * 1000) / PROBES_PER_SECOND - performance.now();
        if (wait > 0) await sleep(wait);
        inFlight.push(probe().then((result) => probesUnderLoad.push(result.clientMs)));
      }
    })();
    const total = LOAD_SECONDS * REPORTS_PER_SECOND;
    for (let index = 0; index < total; index++) {
      const due = began + (index * 1000) / REPORTS_PER_SECOND;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(post().then((result) => underLoad.push(result.clientMs)));
    }
    await probes;
    await Promise.all(inFlight);
    const loadS = (performance.now() - began) / 1000;
    // Let the reviewers finish what is left, then stop them.
    const drainUntil = Date.now() + DRAIN_MS;
    while (Date.now() < drainUntil) {
      const { items } = await api(`/api/v1/queues/${queue.id}/tasks?limit=1`, { key: reviewKey });
      if (items.length === 0) break;
      await sleep(250);
    }
    stop = true;
    await Promise.all(reviewers);
    const idleP50 = percentile(idle, 0.5);
    const loadP99 = percentile(underLoad, 0.99);
    Object.assign(results, {
      loadSeconds: round(loadS, 1),
      loadReports: underLoad.length,
      loadTasksAnswered: answered,
      loadIntakeIdleMsP50: round(idleP50),
      loadIntakeMsP50: round(percentile(underLoad, 0.5)),
      loadIntakeMsP95: round(percentile(underLoad, 0.95)),
      loadIntakeMsP99: round(loadP99),
      loadIntakeMsMax: round(Math.max(...underLoad)),
      loadReviewerRoundTripMsP50: round(percentile(reviewMs, 0.5)),
      loadReviewerRoundTripMsP99: round(percentile(reviewMs, 0.99)),
      loadReceiver: receiver.stats(),
      loadProbeIdleMsP50: round(percentile(idleProbes, 0.5)),
      loadProbeMsP50: round(percentile(probesUnderLoad, 0.5)),
      loadProbeMsP99: round(percentile(probesUnderLoad, 0.99)),
      intakeNoRunP99UnderLoadOverIdleP50: round(percentile(probesUnderLoad, 0.99) / percentile(idleProbes, 0.5), 1),
      intakeP99UnderLoadOverIdleP50: idleP50 > 0 ? round(loadP99 / idleP50, 1) : null,
    });
    log(`load: intake p99 ${results.loadIntakeMsP99} ms under load, idle p50 ${results.loadIntakeIdleMsP50} ms → ${results.intakeP99UnderLoadOverIdleP50}`);
  } finally {
    await receiver.close();
  }
}

export function loadLines() {
  if (results.intakeP99UnderLoadOverIdleP50 === undefined) return [];
  const r = results.loadReceiver;
  return [
    `under load:       intake p99 ${results.loadIntakeMsP99} ms / idle p50 ${results.loadIntakeIdleMsP50} ms = ${results.intakeP99UnderLoadOverIdleP50} (target ≤ ${TARGET}) ${verdict(results.intakeP99UnderLoadOverIdleP50, TARGET)}  (${results.loadReports} reports at ${REPORTS_PER_SECOND}/s over ${results.loadSeconds} s, ${REVIEWERS} reviewers answered ${results.loadTasksAnswered} tasks, actions to a receiver failing 1 in 3 first attempts)`,
    `load latency:     intake round trip p50 ${results.loadIntakeMsP50} ms, p95 ${results.loadIntakeMsP95} ms, max ${results.loadIntakeMsMax} ms; a reviewer's claim + answer p50 ${results.loadReviewerRoundTripMsP50} ms, p99 ${results.loadReviewerRoundTripMsP99} ms; receiver: ${r.requests} requests for ${r.webhookIds} webhook ids, accepted once ${r.acceptedOnce}, more than once ${r.acceptedTwice}`,
    `load, no run:     probe intakes (no trigger match, ${PROBES_PER_SECOND}/s during the load): p99 ${results.loadProbeMsP99} ms (p50 ${results.loadProbeMsP50}) / idle p50 ${results.loadProbeIdleMsP50} ms = ${results.intakeNoRunP99UnderLoadOverIdleP50}`,
  ];
}
