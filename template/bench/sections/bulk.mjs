// Section "bulk": POST /api/v1/bulk-actions over BULK_SUBJECTS subjects (1,000) in autonomous mode,
// each one's action a run of the action type's carrier workflow delivered to a local receiver.
// Timed from the request to every subject's run started (the bulk action `completed`), and to every
// action delivered (the receiver got one action.execute per subject, none twice).
// `bulkSubjectsPerSecond` is subjects whose run started per second; the platform paces them at
// BULK_RUNS_PER_SECOND (src/accounts/bulk-actions.ts), so that is its ceiling.
import { startReceiver } from "./capacity.mjs";
import { log, poll, results, round } from "./lib.mjs";

const BULK_SUBJECTS = Number(process.env.BENCH_BULK_SUBJECTS ?? 1_000);

export async function sectionBulk(api, adminToken) {
  const receiver = await startReceiver();
  try {
    const installation = await api("/api/v1/installations", { body: { name: "bench-bulk" }, key: adminToken });
    const key = installation.apiKey;
    const endpoint = await api("/api/v1/webhook-endpoints", { body: { url: `http://127.0.0.1:${receiver.port}/bulk`, retryBaseSeconds: 1, maxAttempts: 5 }, key });
    await api("/api/v1/action-types", { body: { key: "remove_post", name: "Remove", endpointId: endpoint.id }, key });
    await api("/api/v1/strike-policy", { method: "PUT", body: { categories: {}, expiryDays: 30, authorityMode: "autonomous", ladder: [] }, key });
    const subjects = Array.from({ length: BULK_SUBJECTS }, (_, i) => ({ kind: "content", id: `bulk-${i}` }));
    const dry = await api("/api/v1/bulk-actions", { body: { subjects, actionType: "remove_post", reason: "Spam wave", decision: { policyCategory: "scams_and_fraud" }, dryRun: true }, key });
    if (dry.subjects !== BULK_SUBJECTS) throw new Error(`bulk dry run: ${JSON.stringify(dry)}`);
    const began = performance.now();
    const created = await api("/api/v1/bulk-actions", { body: { subjects, actionType: "remove_post", reason: "Spam wave", decision: { policyCategory: "scams_and_fraud" } }, key });
    await poll("bulk: every run started", async () => (await api(`/api/v1/bulk-actions/${created.id}`, { key })).state === "completed", { intervalMs: 200, timeoutMs: 300_000 });
    const startedS = (performance.now() - began) / 1000;
    const delivered = () =>
      new Set(
        receiver.received
          .map((r) => JSON.parse(r.body))
          .filter((b) => b.type === "action.execute")
          .map((b) => b.data.params.subject.id),
      );
    await poll("bulk: every action delivered", async () => delivered().size >= BULK_SUBJECTS, { intervalMs: 300, timeoutMs: 300_000 });
    const deliveredS = (performance.now() - began) / 1000;
    const executes = receiver.received.map((r) => JSON.parse(r.body)).filter((b) => b.type === "action.execute");
    Object.assign(results, {
      bulkSubjects: BULK_SUBJECTS,
      bulkSubjectsPerSecond: round(BULK_SUBJECTS / startedS, 1),
      bulkDeliveredPerSecond: round(BULK_SUBJECTS / deliveredS, 1),
      bulkDuplicateDeliveries: executes.length - new Set(executes.map((b) => b.data.params.subject.id)).size,
    });
    log(`bulk: ${BULK_SUBJECTS} subjects: runs started at ${results.bulkSubjectsPerSecond}/s, delivered at ${results.bulkDeliveredPerSecond}/s, ${results.bulkDuplicateDeliveries} delivered twice`);
  } finally {
    await receiver.close();
  }
}

export function bulkLines() {
  if (results.bulkSubjectsPerSecond === undefined) return [];
  return [
    `bulk actions:     ${results.bulkSubjects} subjects, autonomous: runs started at ${results.bulkSubjectsPerSecond} subjects/s (paced at 50/s), actions delivered at ${results.bulkDeliveredPerSecond}/s; ${results.bulkDuplicateDeliveries} delivered twice`,
  ];
}
