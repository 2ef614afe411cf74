// The example workflows of examples/ (documented in examples/README.md) publish as they are in an
// installation that has what they name — queues, action types, endpoints, a provider and a policy,
// all by name — and do what the README says: spam triage over the reported text, harassment review
// under a policy with a person deciding (a decision not to act included), known media by hash.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, personKey, newInstallation, publish, receiverLog, until, waitForRun, waitForWait, STEP_OUTPUT } from "./helpers";

import harassmentReview from "../examples/harassment-review.json";
import knownMedia from "../examples/known-media.json";
import spamTriage from "../examples/spam-triage.json";
import triage from "../examples/triage.json";
import violentMedia from "../demo/violent-media.json";

const MARKER = "pelican-orchid-2290";
/** A PDQ hash in the known-media bank of the desk (a copy within the bank's threshold matches it). */
const KNOWN_PDQ = "d5".repeat(32);

/** An installation with everything the examples name. */
async function desk() {
  const { apiKey } = await newInstallation();
  const tag = crypto.randomUUID().slice(0, 8);
  const hook = async (path: string, body: Record<string, unknown>) => {
    const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, ...body } });
    expect(created.status).toBe(201);
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: created.body.secret }) });
    return created.body as { id: string };
  };
  const paths = { actions: `/ok/examples-${tag}/actions`, messages: `/ok/examples-${tag}/messages`, hotline: `/ok/examples-${tag}/hotline` };
  const actions = await hook(paths.actions, {});
  await hook(paths.messages, { eventTypes: ["message.send"] });
  // What the demo desk's own graph (demo/violent-media.json) hands known clips to.
  await hook(paths.hotline, { name: "hash-hotline" });
  for (const key of ["remove_content", "suspend_uploader"]) {
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: actions.id, reversible: true, requiresApproval: false } })).status).toBe(201);
  }
  expect((await api("/api/v1/queues", { key: apiKey, body: { name: "general-review", slaSeconds: 86_400 } })).status).toBe(201);
  // The child-safety desk: a strict queue, the known-media bank, and the ESP's CyberTipline registration (the peer's).
  expect((await api("/api/v1/queues", { key: apiKey, body: { name: "child-safety", slaSeconds: 14_400, priority: 90, wellness: "strict" } })).status).toBe(201);
  const bank = await api("/api/v1/hash-banks", { key: apiKey, body: { name: "known-csam", kind: "pdq", shards: 1 } });
  expect(bank.status).toBe(201);
  expect((await api(`/api/v1/hash-banks/${bank.body.id}/entries`, { key: apiKey, body: { entries: [{ hash: KNOWN_PDQ, tags: ["ncmec"] }] } })).status).toBe(200);
  const esp = `esp-examples-${tag}`;
  await env.CYBERTIPLINE_PEER.fetch("http://peer/_control/account", { method: "POST", body: JSON.stringify({ username: esp, password: "esp-examples-password" }) });
  const registration = { baseUrl: "https://cybertipline.test/ispws", username: esp, password: "esp-examples-password", reporter: { email: "liaison@product.example" }, enabled: true };
  expect((await api("/api/v1/cybertipline/settings", { method: "PUT", key: apiKey, body: registration })).status).toBe(200);
  const provider = await api("/api/v1/ai-providers", {
    key: apiKey,
    body: { name: "moderation-model", kind: "openai-compatible", baseUrl: "https://model.test/v1", model: "harassment-judge", apiKey: "sk-test-model-key", contentAllowed: true },
  });
  expect(provider.status).toBe(201);
  const policy = await api("/api/v1/policies", { key: apiKey, body: { name: "harassment-policy", text: "Harassment policy\n2.1 Insults aimed at a person are removed.\n2.2 Criticism of ideas is allowed." } });
  expect(policy.status).toBe(201);
  return { apiKey, paths, esp };
}

async function report(apiKey: string, body: Record<string, unknown>) {
  const created = await api("/api/v1/reports", { key: apiKey, body: { category: "cyber_violence", reporter: { id: "rep-1", contact: "rep-1@example.org" }, ...body } });
  expect(created.status).toBe(201);
  expect(created.body.runs).toHaveLength(1);
  return created.body as { id: string; runs: Array<{ runId: string }> };
}

describe("examples", () => {
  it("every example (and the demo desk's own graph) publishes as it is", async () => {
    const { apiKey } = await desk();
    for (const graph of [triage, spamTriage, harassmentReview, knownMedia, violentMedia]) expect((await publish(apiKey, graph)).id).toMatch(/^wfv_/u);
  });

  it("spam-triage: the keyword bank reads the post; spam is decided and removed, the rest left alone", async () => {
    const { apiKey, paths } = await desk();
    const version = await publish(apiKey, spamTriage);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const spam = await report(apiKey, { category: "scams_and_fraud", subject: { kind: "content", id: "p-spam", snapshot: { text: `Claim your prize: wire the fee ${MARKER}` } } });
    const clean = await report(apiKey, { category: "scams_and_fraud", subject: { kind: "content", id: "p-clean", snapshot: { text: `My garden in May ${MARKER}` } } });
    expect((await waitForRun(apiKey, spam.runs[0]!.runId)).output.terminalCode).toBe("spam_removed");
    expect((await waitForRun(apiKey, clean.runs[0]!.runId)).output.terminalCode).toBe("not_spam");
    const delivered = await until(async () => (await receiverLog(paths.actions)).filter((l) => l.verified && l.type === "action.execute"), "the removal");
    expect(JSON.stringify(delivered)).toContain("p-spam");
    expect(JSON.stringify(delivered)).not.toContain("p-clean");
  });

  it("harassment-review: the model reads the post under the policy, a person decides (also not to act), the reporter is told", async () => {
    const { apiKey, paths } = await desk();
    const version = await publish(apiKey, harassmentReview);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "assisted" } });
    const abusive = await report(apiKey, { subject: { kind: "content", id: "p-abuse", snapshot: { text: `You are an idiot ${MARKER}` } }, description: "They keep insulting me" });
    const critical = await report(apiKey, { subject: { kind: "content", id: "p-critic", snapshot: { text: `This plan is a bad idea ${MARKER}` } } });
    const outcomes: Record<string, string> = {};
    for (const [created, answer] of [
      [abusive, "remove"],
      [critical, "no_action"],
    ] as const) {
      const runId = created.runs[0]!.runId;
      await waitForWait(apiKey, runId);
      const detail = await api(`/api/v1/runs/${runId}`, { key: apiKey });
      const assess = detail.body.steps.find((s: { nodeId: string }) => s.nodeId === "assess");
      // The proposal's verdict and the policy behind it are open; the rationale (it quotes the post) is sealed.
      expect(assess.output).toMatchObject({ resultCode: answer === "remove" ? "harassment" : "not_harassment", policy: { name: "harassment-policy", version: 1, digest: expect.stringMatching(/^sha256:/u) } });
      expect(assess.output.rationale).toBeUndefined();
      expect(assess.sealed).toBe(true);
      // The prompt (kept, sealed, for audit) holds the policy and the post, never who reported.
      const sealed = (await api(`/api/v1/runs/${runId}/content`, { key: apiKey })).body.items.find((i: { nodeId: string }) => i.nodeId === "assess");
      expect(JSON.stringify(sealed.output.prompt)).toContain("Harassment policy");
      expect(JSON.stringify(sealed.output.prompt)).toContain(MARKER);
      expect(JSON.stringify(sealed.output.prompt)).not.toContain("rep-1");
      const task = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(runId).first<{ id: string }>())!;
      const opened = await api(`/api/v1/tasks/${task.id}`, { key: apiKey });
      expect(opened.body.context).toMatchObject({ post: expect.stringContaining(MARKER), proposal: answer === "remove" ? "harassment" : "not_harassment", rationale: expect.stringContaining(MARKER) });
      // A person answers: a reviewer's key (an automation key's answer would make the decision automated).
      const moderator = await personKey(apiKey, "mod");
      expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: moderator, body: {} })).status).toBe(200);
      expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: moderator, body: { response: { outcome: answer } } })).status).toBe(200);
      outcomes[answer] = (await waitForRun(apiKey, runId)).output.terminalCode;
    }
    expect(outcomes).toEqual({ remove: "harassment_removed", no_action: "no_action" });
    const decisions = await env.DB.prepare("SELECT outcome, automated_decision AS automated FROM decisions WHERE report_id IN (?1, ?2) ORDER BY outcome").bind(abusive.id, critical.id).all();
    expect(decisions.results).toEqual([
      { outcome: "content_removed", automated: "not_automated" },
      { outcome: "no_action", automated: "not_automated" },
    ]);
    const messages = await until(async () => {
      const log = (await receiverLog(paths.messages)).filter((l) => l.verified && l.type === "message.send" && l.data.runId);
      return log.length >= 2 && log;
    }, "two messages to the reporter");
    expect(messages.map((m) => m.data.recipient.contact)).toEqual(["rep-1@example.org", "rep-1@example.org"]);
    const { results } = await env.DB.prepare(`SELECT ${STEP_OUTPUT.json} AS json FROM workflow_step_runs s ${STEP_OUTPUT.join}`).all<{ json: string | null }>();
    expect(JSON.stringify(results)).not.toContain(MARKER);
  });

  it("known-media: a PDQ match goes to the strict child-safety queue; a person's confirmation reports it to the CyberTipline, then the uploader is suspended and the decision recorded", async () => {
    const { apiKey, paths, esp } = await desk();
    const version = await publish(apiKey, knownMedia);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const sha256 = async (text: string) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))].map((b) => b.toString(16).padStart(2, "0")).join("");
    // A near copy of the known hash (3 bits flipped), as a re-encoded upload would hash.
    const nearCopy = `${"d5".repeat(31)}d2`;
    const known = await report(apiKey, {
      category: "protection_of_minors",
      subject: { kind: "content", id: "p-media", ownerId: "uploader-7", snapshot: { text: `an upload ${MARKER}` } },
      evidence: [{ kind: "image", url: "https://media.test/files/upload-7.jpg", sha256: await sha256("media:upload-7.jpg"), pdq: nearCopy, pdqQuality: 100 }],
    });
    const unknown = await report(apiKey, { category: "protection_of_minors", subject: { kind: "content", id: "p-other" }, evidence: [{ kind: "image", pdq: "2a".repeat(32), pdqQuality: 100 }] });
    expect((await waitForRun(apiKey, unknown.runs[0]!.runId)).output.terminalCode).toBe("no_known_media");

    const runId = known.runs[0]!.runId;
    await waitForWait(apiKey, runId);
    const task = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(runId).first<{ id: string }>())!;
    const moderator = await personKey(apiKey, "mod");
    const opened = await api(`/api/v1/tasks/${task.id}`, { key: moderator });
    // The strict queue's wellness: blurred and greyscale whatever the reviewer's preference, the shortest cap (none set: an hour).
    expect(opened.body.display).toEqual({ profile: "strict", blurMedia: true, greyscale: true, locked: true, exposureCapMinutes: 60 });
    expect(opened.body.context.matches[0]).toMatchObject({ distance: 3, tags: ["ncmec"] });
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: moderator, body: {} })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: moderator, body: { response: { outcome: "report" } } })).status).toBe(200);
    const finished = await waitForRun(apiKey, runId);
    expect(finished.output.terminalCode).toBe("reported_and_removed");

    const tipline = finished.steps.find((s: { nodeId: string }) => s.nodeId === "cybertipline");
    expect(tipline.output).toMatchObject({ port: "reported", ncmecReportId: expect.any(String) });
    const reports = (await (await env.CYBERTIPLINE_PEER.fetch(`http://peer/_control/reports?username=${esp}`)).json()) as any[];
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ reportId: tipline.output.ncmecReportId, finished: true });
    // The file's SHA-256 is the preserved bytes'; the evidence's PDQ is the product's claim and is not
    // sent (only a PDQ computed from the preserved bytes is, and these bytes are not an image).
    expect(reports[0].files[0].details).toContain(await sha256("media:upload-7.jpg"));
    expect(reports[0].files[0].details).not.toContain(nearCopy);
    const suspended = await until(async () => (await receiverLog(paths.actions)).find((l) => l.verified && l.type === "action.execute"), "the suspension");
    expect(JSON.stringify(suspended.data)).toContain("p-media");
    const decision = await env.DB.prepare("SELECT outcome, automated_decision AS automated FROM decisions WHERE report_id = ?1").bind(known.id).first();
    expect(decision).toEqual({ outcome: "csam_removed", automated: "not_automated" });
    const holds = await api(`/api/v1/cases/${(await api(`/api/v1/reports/${known.id}`, { key: apiKey })).body.caseId}/preservation-holds`, { key: apiKey });
    expect(holds.body.items).toEqual([expect.objectContaining({ active: true })]);
  });
});
