// Section "report intake": throughput of POST /api/v1/reports (personal data sealed, one trigger
// that never matches), then where the time goes: one report at a time, the HTTP floor, each part
// of intake in the Worker without HTTP, and the price of one D1 round trip (with CPU by process).
import { createHash, randomBytes } from "node:crypto";
import { cpus } from "node:os";
import { cpuPerUnit, cpuSnapshot, describeCpu, latency, log, mean, atLeast, percentile, pool, results, round, server as devServer, TARGETS } from "./lib.mjs";

const INTAKE_WARMUP = 100;
const INTAKE_REPORTS = 2_000;
const INTAKE_CONCURRENCY = 16;
const INTAKE_SERIAL = 200; // profile: reports sent one at a time
const INTAKE_PROFILE_ROUNDS = 200; // profile: each part of intake, in the Worker, without HTTP
const HTTP_FLOOR_REQUESTS = 1_000; // profile: GET / (no D1, no auth) at INTAKE_CONCURRENCY
const D1_ROUND_TRIPS = 2_000; // profile: sequential SELECT 1 through the D1 binding

/** Intake throughput over the HTTP floor of the same Worker (it replaces an absolute reports/s target, which measured the machine as much as the code). */
const TARGET_INTAKE_OVER_FLOOR = 0.4;

const INTAKE_CATEGORIES = ["scams_and_fraud", "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH", "app.bsky.moderation.defs#reasonSpam", "cyber_violence", "protection_of_minors"];

/**
 * A report as a product sends it: reporter id and contact, a free-text description, the subject's
 * URL, owner and snapshot, and evidence. Everything personal is sealed by the platform. One in four
 * reports is about a subject already reported (its case gains a report).
 */
function reportBody(tag, index) {
  const subject = index % 4 === 3 ? index - 3 : index;
  return {
    subject: {
      kind: index % 5 === 4 ? "account" : "content",
      id: `${tag}-subject-${subject}`,
      url: `https://social.example/@seller${subject % 97}/posts/${100_000 + subject}`,
      ownerId: `acct-${subject % 97}`,
      snapshot: {
        text: `Limited offer!!! Double your crypto in 24h, DM me or visit https://scam.example/${subject} — only ${(subject % 50) + 3} spots left. `.repeat(3),
        media: [{ kind: "image", url: `https://cdn.social.example/media/${subject}.jpg`, alt: "screenshot of a wallet balance" }],
        postedAt: "2026-04-30T08:15:00.000Z",
        language: "en",
      },
    },
    category: INTAKE_CATEGORIES[index % INTAKE_CATEGORIES.length],
    source: index % 10 === 0 ? "trusted_flagger" : "notice",
    reporter: { id: `user-${4_000 + (index % 1_000)}`, contact: `reporter.${index % 1_000}@example.org` },
    description:
      `This account keeps sending me links to a fake investment site. I lost money after following the instructions; ` +
      `the same text is posted under several names. Report ${index}: please remove it before more people fall for it. `.repeat(2),
    evidence: [
      { kind: "screenshot", url: `https://uploads.example.org/evidence/${index}.png`, sha256: createHash("sha256").update(`evidence-${index}`).digest("hex") },
      { kind: "text", text: `Message received on 2026-04-29: "send 0.1 BTC to bc1q${index.toString(16).padStart(8, "0")} and get 0.2 back"` },
    ],
  };
}

export async function sectionIntake(api, timed, adminToken, key, installationId, versionId) {
  delete TARGETS.intakeReportsPerSecond; // replaced by the ratio to the floor
  TARGETS.intakeOverFloor ??= TARGET_INTAKE_OVER_FLOOR;
  log("intake: queue, a trigger that never matches, a reports:write key");
  await api("/api/v1/queues", { body: { name: "bench-intake", slaSeconds: 3_600, priority: 5 }, key });
  // Evaluated for every report (CEL over the report summary) but never true for these bodies.
  const when = "report.category == 'self_harm' && report.evidenceCount > 40";
  await api("/api/v1/triggers", { body: { event: "report.created", when, workflowVersionId: versionId, authorityMode: "autonomous" }, key });
  const { apiKey: intakeKey } = await api("/api/v1/api-keys", { body: { name: "bench-intake", scopes: ["reports:write"] }, key });
  const tag = randomBytes(4).toString("hex");
  let sent = 0;
  const post = async () => {
    const index = sent++;
    const result = await timed("/api/v1/reports", { body: reportBody(tag, index), key: intakeKey, headers: { "idempotency-key": `bench-${tag}-${index}` } });
    if (result.status !== 201) throw new Error(`report ${index}: status ${result.status} (expected 201, a new report)`);
    if (!Array.isArray(result.body.runs) || result.body.runs.length !== 0) throw new Error(`report ${index}: the trigger reported ${JSON.stringify(result.body.runs)}`);
    return result;
  };
  log(`intake: warm-up, ${INTAKE_WARMUP} reports (not counted)`);
  await pool(INTAKE_WARMUP, INTAKE_CONCURRENCY, post);
  log(`intake: ${INTAKE_REPORTS} reports, ${INTAKE_CONCURRENCY} in flight`);
  const server = [];
  const clientSide = [];
  let sample = null;
  const cpuBefore = cpuSnapshot(devServer.port);
  const began = performance.now();
  await pool(INTAKE_REPORTS, INTAKE_CONCURRENCY, async () => {
    const result = await post();
    server.push(result.serverMs);
    clientSide.push(result.clientMs);
    sample ??= result.body;
  });
  const wallS = (performance.now() - began) / 1000;
  const cpu = cpuPerUnit(cpuBefore, cpuSnapshot(devServer.port), INTAKE_REPORTS);
  // The sealed personal data opens again for a reviewer (the installation key has `review`).
  const read = await api(`/api/v1/reports/${sample.id}`, { key });
  if (!String(read.description ?? "").includes("fake investment site")) throw new Error(`report ${sample.id}: personal data did not round-trip`);
  Object.assign(results, {
    intakeReports: INTAKE_REPORTS,
    intakeConcurrency: INTAKE_CONCURRENCY,
    intakeRequestBytes: Buffer.byteLength(JSON.stringify(reportBody(tag, 1))),
    intakeWallS: round(wallS, 3),
    intakeReportsPerSecond: round(INTAKE_REPORTS / wallS, 1),
    intakeServerMsP50: percentile(server, 0.5),
    intakeServerMsP95: percentile(server, 0.95),
    intakeServerMsMean: round(mean(server)),
    intakeClientMsP50: round(percentile(clientSide, 0.5)),
    intakeClientMsP95: round(percentile(clientSide, 0.95)),
    intakeCpuMsPerReport: cpu.perUnit,
    intakeBusiestThreadPercent: cpu.busiestThreadPercent,
    intakeOtherProcessesCpuMsPerReport: cpu.otherMs,
    intakeOtherProcessesPercent: cpu.otherPercent,
    intakeMachineBusyPercent: cpu.machineBusyPercent,
  });
  log(`intake: ${results.intakeReportsPerSecond} reports/s (${INTAKE_REPORTS} in ${results.intakeWallS} s), server p50 ${results.intakeServerMsP50} ms, p95 ${results.intakeServerMsP95} ms`);

  // Where the time goes. (1) One report at a time: latency without queueing.
  log(`intake profile: ${INTAKE_SERIAL} reports one at a time`);
  const serial = [];
  for (let index = 0; index < INTAKE_SERIAL; index++) serial.push(await post());
  // (2) The local HTTP path alone: the platform's GET / (no auth, no D1) via /bench/floor, as many in flight.
  log(`intake profile: ${HTTP_FLOOR_REQUESTS} × GET /bench/floor, ${INTAKE_CONCURRENCY} in flight`);
  const floorBefore = cpuSnapshot(devServer.port);
  const floorBegan = performance.now();
  await pool(HTTP_FLOOR_REQUESTS, INTAKE_CONCURRENCY, () => timed("/bench/floor"));
  const floorS = (performance.now() - floorBegan) / 1000;
  const floorCpu = cpuPerUnit(floorBefore, cpuSnapshot(devServer.port), HTTP_FLOOR_REQUESTS);
  // (3) Each part of intakeReport in the Worker, sequentially, without HTTP, auth or Hono.
  log(`intake profile: the parts of intake in the Worker, ${INTAKE_PROFILE_ROUNDS} rounds each`);
  const parts = await api("/bench/intake-profile", { body: { installationId, rounds: INTAKE_PROFILE_ROUNDS, tag, report: reportBody(tag, 1) }, key: adminToken });
  // (4) One D1 round trip, and the CPU it costs each process (wrangler dev's devtools relay included).
  log(`intake profile: ${D1_ROUND_TRIPS} D1 round trips`);
  const d1Before = cpuSnapshot(devServer.port);
  const d1 = await api("/bench/d1-round-trips", { body: { count: D1_ROUND_TRIPS }, key: adminToken });
  const d1Cpu = cpuPerUnit(d1Before, cpuSnapshot(devServer.port), D1_ROUND_TRIPS);
  Object.assign(results, {
    intakeSerialServerMsP50: latency(serial, "serverMs").p50,
    intakeSerialClientMsP50: latency(serial, "clientMs").p50,
    intakeSerialReportsPerSecond: round(1000 / mean(serial.map((sample_) => sample_.clientMs)), 1),
    httpFloorRequestsPerSecond: round(HTTP_FLOOR_REQUESTS / floorS, 1),
    intakeOverFloor: round(results.intakeReportsPerSecond / (HTTP_FLOOR_REQUESTS / floorS), 2),
    httpFloorCpuMsPerRequest: floorCpu.perUnit,
    intakePartsMs: {
      d1RoundTrip: round(parts.d1PingMs, 3),
      parseAndValidateCpu: round(parts.validateCpuMs, 3),
      requestDigestCpu: round(parts.digestCpuMs, 3),
      aesGcmCpu: round(parts.aesCpuMs, 3),
      sealWithKeyLookup: round(parts.sealMs, 3),
      // The same seal for two people (reporter and owner), as intake seals: both new this month (a
      // key made for each, one R2 put apiece in parallel), and both known (the isolate's cache).
      sealNewPeople: round(parts.sealNewPeopleMs, 3),
      sealKnownPeople: round(parts.sealKnownPeopleMs, 3),
      triggersQueryAndCel: round(parts.triggersMs, 3),
      intakeReportInWorker: round(parts.intakeMs, 3),
      // intakeReport is the seal (data key cached) + one D1 batch (writes, read-back, triggers) +
      // the triggers' CEL. What is left once the seal and the CEL (triggersQueryAndCel less its
      // one query) are taken out: mostly the batch, one round trip with the write statements.
      writeBatchEstimate: round(parts.intakeMs - parts.sealMs - Math.max(0, parts.triggersMs - parts.d1PingMs), 3),
    },
    intakeSealedPlaintextBytes: parts.plaintextBytes,
    d1RoundTripMs: round(d1.msPerRoundTrip, 3),
    d1RoundTripCpuMs: d1Cpu.perUnit,
  });
}

export function intakeLines() {
  const lines = [];
  if (results.intakeReportsPerSecond !== undefined)
    lines.push(
      `report intake:    ${results.intakeReportsPerSecond} reports/s${results.intakeOverFloor === undefined ? "" : `, ${results.intakeOverFloor} of the HTTP floor (target ≥ ${TARGET_INTAKE_OVER_FLOOR}) ${atLeast(results.intakeOverFloor, TARGET_INTAKE_OVER_FLOOR)}`}  (${results.intakeReports} reports of ${results.intakeRequestBytes} B, personal data sealed, one non-matching trigger, ${results.intakeConcurrency} in flight, ${results.intakeWallS} s)`,
      `intake latency:   server p50 ${results.intakeServerMsP50} ms, p95 ${results.intakeServerMsP95} ms (Server-Timing, under load); client round trip p50 ${results.intakeClientMsP50} ms, p95 ${results.intakeClientMsP95} ms`,
      `intake CPU:       ms per report by process: ${describeCpu(results.intakeCpuMsPerReport)}; other processes on the machine ${results.intakeOtherProcessesCpuMsPerReport} ms (${results.intakeOtherProcessesPercent}% of its ${cpus().length} cores); machine ${results.intakeMachineBusyPercent}% busy; busiest thread, % of one core: ${Object.entries(
        results.intakeBusiestThreadPercent ?? {},
      )
        .map(([role, percent]) => `${role} ${percent}`)
        .join(", ")}`,
    );
  if (results.intakePartsMs !== undefined)
    lines.push(
      `intake, serial:   ${results.intakeSerialReportsPerSecond} reports/s one at a time (server p50 ${results.intakeSerialServerMsP50} ms, client p50 ${results.intakeSerialClientMsP50} ms)`,
      `HTTP floor:       ${results.httpFloorRequestsPerSecond} requests/s for the platform's GET / via /bench/floor (no auth, no D1), ${results.intakeConcurrency} in flight; CPU ms per request: ${describeCpu(results.httpFloorCpuMsPerRequest)}`,
      `intake parts:     ms per call in the Worker: ${Object.entries(results.intakePartsMs)
        .map(([part, ms]) => `${part} ${ms}`)
        .join(", ")} (sealed plaintext ${results.intakeSealedPlaintextBytes} B)`,
      `D1 round trip:    ${results.d1RoundTripMs} ms (SELECT 1 × ${D1_ROUND_TRIPS}, one after another); CPU ms per round trip: ${describeCpu(results.d1RoundTripCpuMs)}`,
    );
  return lines;
}
