// Section "treport": GET /api/v1/transparency-report over a year of one installation's rows —
// 100,000 reports, one decision each (100,000 decisions) and 5,000 complaints — seeded in bulk SQL
// by /bench/treport-seed (never replayed through the API). Timed (server time, p50/p95), its
// figures checked against the counts the seed makes by construction, and the query plan of every
// statement the report runs: each must use the indexes it names, no scan of a table.
import { latency, log, results } from "./lib.mjs";

const DECISIONS = 100_000;
const CHUNK = 25_000;
const SAMPLES = 10;
const WARM_UP = 2;
const DAY_MS = 86_400_000;

const planText = (plan) => plan.map((row) => `${row.parent === 0 ? "" : "  "}${row.detail}`).join("\n");

function planProblems(name, indexes, plan) {
  const text = plan.map((row) => row.detail).join("\n");
  const problems = indexes.filter((index) => !text.includes(index)).map((index) => `${name}: does not use ${index}`);
  if (/\bSCAN (reports|decisions|appeals|qa_reviews|human_tasks|workflow_runs|decision_reversals|notifier_sanctions)\b(?! USING)/u.test(text)) problems.push(`${name}: scans a table`);
  return problems;
}

/** What the seed makes, counted by construction (bench/treport.ts's rules). */
function expected(count) {
  const figures = { notices: 0, actionsAll: 0, accountSuspended: 0, complaints: 0, decided: 0, overturned: 0 };
  for (let i = 0; i < count; i++) {
    const source = ["voluntary", "trusted_flagger", "notice", "notice", "other_notification"][i % 5];
    if (source === "notice" || source === "trusted_flagger") figures.notices += 1;
    if (i % 6 !== 2) figures.actionsAll += 1;
    if (i % 6 === 1) figures.accountSuspended += 1;
    if (i % 20 === 0) {
      figures.complaints += 1;
      if (i % 60 !== 0) figures.decided += 1;
      if (i % 60 === 40) figures.overturned += 1;
    }
  }
  return figures;
}

export async function sectionTransparencyReport(api, timed, adminToken) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-treport" }, key: adminToken });
  const key = installation.apiKey;
  const template = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "treport-template" }, category: "violence", source: "voluntary" }, key });
  // A year of rows, up to two days ago (complaints are decided two days after their decision).
  const baseMs = Date.now() - 368 * DAY_MS;
  const spacingMs = Math.floor((365 * DAY_MS) / DECISIONS);
  log(`treport: seeding ${DECISIONS} reports and decisions`);
  let seedMs = 0;
  for (let from = 0; from < DECISIONS; from += CHUNK) {
    const count = Math.min(CHUNK, DECISIONS - from);
    const seeded = await api("/bench/treport-seed", { body: { templateId: template.id, from, count, baseMs, spacingMs }, key: adminToken });
    if (seeded.decisions !== count || seeded.reports !== count) throw new Error(`treport seed ${from}: ${seeded.reports} reports, ${seeded.decisions} decisions, expected ${count}`);
    seedMs += seeded.seedMs;
  }
  const period = { from: new Date(baseMs).toISOString().slice(0, 10), to: new Date().toISOString().slice(0, 10) };

  const { plans } = await api("/bench/treport-plans", { body: { installationId: installation.id, from: `${period.from}T00:00:00.000Z`, to: new Date(Date.parse(period.to) + DAY_MS).toISOString() }, key: adminToken });
  const problems = Object.entries(plans).flatMap(([name, { indexes, plan }]) => planProblems(name, indexes, plan));
  results.treportPlans = Object.fromEntries(Object.entries(plans).map(([name, { plan }]) => [name, planText(plan)]));
  results.treportUsesIndexes = problems.length === 0;
  results.treportQueryMs = Object.fromEntries(Object.entries(plans).map(([name, { ms }]) => [name, ms]));
  log(`treport: each statement alone (ms): ${JSON.stringify(results.treportQueryMs)}`);
  log(
    `treport: plans\n${Object.entries(results.treportPlans)
      .map(([name, text]) => `  ${name}: ${text.replace(/\n/gu, " | ")}`)
      .join("\n")}`,
  );
  if (problems.length > 0) throw new Error(`treport plans: ${problems.join("; ")}`);

  const want = expected(DECISIONS);
  const path = `/api/v1/transparency-report?from=${period.from}&to=${period.to}`;
  const check = (result) => {
    if (result.status !== 200) throw new Error(`treport: ${result.status} ${JSON.stringify(result.body).slice(0, 300)}`);
    const s = result.body.sections;
    const actions = s.notices.actions.actions + s.notices.actionsOnOtherNotifications.actions + s.ownInitiative.actions.actions;
    const got = {
      notices: s.notices.received.total,
      actionsAll: actions,
      accountSuspended: s.suspensions.accountRestrictions.suspended,
      complaints: s.complaints.received.total,
      decided: s.complaints.decided.total,
      overturned: s.complaints.decided.overturned,
    };
    // The template report is the one row the seed did not make (voluntary, undecided).
    for (const [name, value] of Object.entries(want)) if (got[name] !== value) throw new Error(`treport: ${name} ${got[name]}, expected ${value}`);
    return result;
  };
  for (let i = 0; i < WARM_UP; i++) check(await timed(path, { key }));
  const samples = [];
  let bytes = 0;
  for (let i = 0; i < SAMPLES; i++) {
    const sample = check(await timed(path, { key }));
    bytes = JSON.stringify(sample.body).length;
    samples.push(sample);
  }
  const server = latency(samples, "serverMs");
  const csv = await timed(`/api/v1/transparency-report.csv?from=${period.from}&to=${period.to}`, { key });
  Object.assign(results, {
    treportDecisions: DECISIONS,
    treportSeedMs: seedMs,
    treportSamples: SAMPLES,
    treportP50Ms: server.p50,
    treportP95Ms: server.p95,
    treportClientP95Ms: latency(samples, "clientMs").p95,
    treportBytes: bytes,
    treportCsvMs: csv.serverMs,
  });
  log(`treport: ${DECISIONS} decisions over a year: p50 ${server.p50} ms, p95 ${server.p95} ms (${Math.round(bytes / 1024)} KiB); CSV ${csv.serverMs} ms`);
}

export function treportLines() {
  if (results.treportP95Ms === undefined) return [];
  return [
    `transparency:     GET /transparency-report over a year of ${results.treportDecisions} decisions (and as many reports, ${results.treportDecisions / 20} complaints): p95 ${results.treportP95Ms} ms (p50 ${results.treportP50Ms}; CSV ${results.treportCsvMs} ms)  (server time, ${results.treportSamples} samples; figures equal the seed's counts)`,
    `transparency statements alone (ms): ${Object.entries(results.treportQueryMs)
      .map(([name, ms]) => `${name} ${ms}`)
      .join(", ")}`,
    `transparency plans: ${results.treportUsesIndexes ? "every statement uses its index, no table scan" : "PROBLEM"}: ${Object.entries(results.treportPlans)
      .map(([name, text]) => `${name}: ${text.replace(/\n/gu, " | ")}`)
      .join("; ")}`,
  ];
}
