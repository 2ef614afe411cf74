// Section "audit verify": GET /audit/verify on a trail of 10,000 and of 100,000 events. The
// default (incremental) check starts from the last checkpoint a verification reached, so after one
// full pass its cost follows the events written since, not the trail's length: the ratio of the
// two medians is the figure (target ≤ 1.5). The full check (?mode=full, as the schedule does it in
// slices; over the API in pages of 20,000 events, each with a cursor) is timed once at each size for scale. Events are seeded in bulk by /bench/audit-seed
// (chained and MAC'd as the platform writes them), never by 100,000 API calls.
import { latency, log, results, round, TARGETS, verdict } from "./lib.mjs";

const SIZES = [10_000, 100_000];
const SAMPLES = 15;
const WRITES_BETWEEN = 2; // audited writes before each sample: the incremental check has new events to cover

const keyFor = (size) => (size % 1000 === 0 ? `${size / 1000}k` : String(size));

export async function sectionAuditVerify(api, timed, adminToken) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-audit" }, key: adminToken });
  const key = installation.apiKey;
  const figures = {};
  let writes = 0;
  for (const size of SIZES) {
    log(`audit: seeding the trail to ${size} events`);
    const seeded = await api("/bench/audit-seed", { body: { installationId: installation.id, upTo: size }, key: adminToken });
    if (seeded.events !== size) throw new Error(`audit seed: ${seeded.events} events, expected ${size}`);
    // A full check answers at most 20,000 events a request and a cursor to go on from: the pages summed.
    const full = { serverMs: 0, pages: 0, body: null };
    for (let cursor = null; ; ) {
      const page = await timed(`/api/v1/audit/verify?mode=full${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { key });
      full.serverMs += page.serverMs;
      full.pages += 1;
      full.body = page.body;
      if (page.body.ok === false || !page.body.nextCursor) break;
      cursor = page.body.nextCursor;
    }
    if (!full.body.ok || full.body.events !== size) throw new Error(`audit: full verify at ${size}: ${JSON.stringify(full.body)}`);
    const samples = [];
    for (let index = 0; index < SAMPLES; index++) {
      for (let write = 0; write < WRITES_BETWEEN; write++) await api("/api/v1/workflows", { body: { name: `audit-${size}-${writes++}` }, key });
      const sample = await timed("/api/v1/audit/verify", { key });
      if (!sample.body.ok || !sample.body.anchored) throw new Error(`audit: incremental verify at ${size}: ${JSON.stringify(sample.body)}`);
      samples.push({ ...sample, checked: sample.body.events - sample.body.checkedFrom + 1 });
    }
    figures[size] = { full: full.serverMs, incremental: latency(samples, "serverMs"), client: latency(samples, "clientMs"), checked: latency(samples, "checked"), events: samples.at(-1).body.events, seedMs: seeded.seedMs };
    log(`audit: ${size} events: full ${round(full.serverMs)} ms, incremental p50 ${figures[size].incremental.p50} ms`);
  }
  const [small, large] = SIZES.map((size) => figures[size]);
  Object.assign(results, {
    auditVerifySamples: SAMPLES,
    auditVerifyWritesBetween: WRITES_BETWEEN,
    [`auditVerify${keyFor(SIZES[0])}`]: small.incremental.p50,
    [`auditVerify${keyFor(SIZES[1])}`]: large.incremental.p50,
    [`auditVerify${keyFor(SIZES[1])}Over${keyFor(SIZES[0])}`]: round(large.incremental.p50 / small.incremental.p50),
    [`auditVerify${keyFor(SIZES[0])}P95`]: small.incremental.p95,
    [`auditVerify${keyFor(SIZES[1])}P95`]: large.incremental.p95,
    [`auditVerifyFull${keyFor(SIZES[0])}Ms`]: round(small.full),
    [`auditVerifyFull${keyFor(SIZES[1])}Ms`]: round(large.full),
    auditVerifyEventsCheckedP50: large.checked.p50,
    auditSeed100kMs: large.seedMs,
  });
}

export function auditLines() {
  if (results.auditVerify100kOver10k === undefined) return [];
  return [
    `audit verify:     incremental p50 ${results.auditVerify10k} ms at 10,000 events, ${results.auditVerify100k} ms at 100,000: ×${results.auditVerify100kOver10k} (target ≤ ${TARGETS.auditVerify100kOver10k}) ${verdict(results.auditVerify100kOver10k, TARGETS.auditVerify100kOver10k)}  (server time, ${results.auditVerifySamples} samples each after ${results.auditVerifyWritesBetween} writes; p95 ${results.auditVerify10kP95}/${results.auditVerify100kP95} ms; ~${results.auditVerifyEventsCheckedP50} events checked per call; full check ${results.auditVerifyFull10kMs} ms / ${results.auditVerifyFull100kMs} ms)`,
  ];
}
