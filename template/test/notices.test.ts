// Notices and notifiers (DSA Art. 16, 22, 23): the notifier is told of receipt and decision with the
// redress available; registered trusted flaggers' notices become trusted_flagger, come first in
// /next and have their precision tracked; a warned notifier can be suspended and their notices are
// then refused; another installation sees none of it.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { wilson } from "../src/automation/statistics";
import { complaintDeadline } from "../src/enforcement/notifier-messages";
import { notifierHashes } from "../src/cases/notices/notifier-keys";
import { api, personKey, edge, newInstallation, publish, receiverLog, until, waitForRun } from "./helpers";

/** An installation whose product receives message.send at a path of its own. */
async function desk() {
  const installation = await newInstallation("notices");
  const path = `/ok/notices-${crypto.randomUUID()}`;
  const hook = await api("/api/v1/webhook-endpoints", { key: installation.apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
  const messages = (kind: string) => receiverLog(path).then((log) => log.filter((l) => l.verified && l.type === "message.send" && l.data.kind === kind));
  return { ...installation, key: installation.apiKey, messages };
}

const notice = (subject: string, reporter: { id?: string; contact?: string } | undefined, extra: Record<string, unknown> = {}) => ({
  subject: { kind: "content", id: subject },
  category: "scams_and_fraud",
  description: "a fake shop",
  ...(reporter ? { reporter } : {}),
  ...extra,
});

async function report(key: string, body: unknown, headers: Record<string, string> = {}) {
  const created = await api("/api/v1/reports", { key, body, headers });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body as { id: string; source: string };
}

describe("notifiers are told (Art. 16)", () => {
  it("confirms receipt of a notice and tells the decision with the redress available; recorded and audited without the contact", async () => {
    const d = await desk();
    const noticed = await report(d.key, notice("shop-1", { id: "nina", contact: "nina@example.org" }));
    // No notifier to tell: a voluntary report, and a notice without a reporter.
    await report(d.key, notice("shop-2", { id: "bot", contact: "bot@example.org" }, { source: "voluntary" }));
    await report(d.key, notice("shop-3", undefined));

    const [receipt] = await until(async () => ((await d.messages("notice_receipt")).length > 0 ? d.messages("notice_receipt") : null), "the receipt");
    expect(receipt!.data).toMatchObject({ reportId: noticed.id, templateKey: "dsa.notice_receipt.v1", recipient: { kind: "reporter", id: "nina", contact: "nina@example.org" }, facts: { reportId: noticed.id, trustedFlagger: false } });
    expect(receipt!.data.body).toContain(noticed.id);

    // Recorded by a person (a reviewer's key): not automated.
    const removed = await api("/api/v1/decisions", { key: await personKey(d.key), body: { reportId: noticed.id, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "The shop sells goods it never ships." } });
    expect(removed.status).toBe(201);
    const [outcome] = await until(async () => ((await d.messages("notice_decision")).length > 0 ? d.messages("notice_decision") : null), "the decision message");
    expect(outcome!.data).toMatchObject({
      reportId: noticed.id,
      decisionId: removed.body.id,
      recipient: { contact: "nina@example.org" },
      facts: {
        restricts: true,
        restrictions: { visibility: ["content_removed"] },
        automatedDecision: "not_automated",
        redress: { internalComplaint: { available: true, until: complaintDeadline(removed.body.decidedAt), reference: removed.body.id }, outOfCourtDisputeSettlement: { available: true }, judicialRedress: { available: true } },
      },
    });
    expect(outcome!.data.body).toMatch(/complain .* until \d{4}-\d{2}-\d{2}/u);
    // Six calendar months, to the day.
    expect(complaintDeadline("2026-08-31T10:00:00.000Z")).toBe("2027-02-28T10:00:00.000Z");
    expect(complaintDeadline("2026-01-15T00:00:00.000Z")).toBe("2026-07-15T00:00:00.000Z");

    // A decision not to act on the same notice is told as well.
    expect((await api("/api/v1/decisions", { key: d.key, body: { reportId: noticed.id, outcome: "no_action" } })).status).toBe(201);
    const both = await until(async () => ((await d.messages("notice_decision")).length >= 2 ? d.messages("notice_decision") : null), "the second decision message");
    expect(both.map((m) => m.data.facts.restricts).sort()).toEqual([false, true]);

    const rows = await env.DB.prepare("SELECT kind, report_id AS reportId, decision_id AS decisionId, recipient_kind AS recipientKind, delivery_id AS deliveryId FROM messages WHERE installation_id = ?1 ORDER BY created_at")
      .bind(d.id)
      .all<any>();
    expect(rows.results.map((r) => [r.kind, r.reportId, r.recipientKind])).toEqual([
      ["notice_receipt", noticed.id, "reporter"],
      ["notice_decision", noticed.id, "reporter"],
      ["notice_decision", noticed.id, "reporter"],
    ]);
    expect(rows.results.every((r) => typeof r.deliveryId === "string")).toBe(true);
    // The report's timeline shows what the notifier was told.
    const timeline = await api(`/api/v1/reports/${noticed.id}/timeline`, { key: d.key });
    expect(timeline.body.items.filter((i: any) => i.kind === "message").map((i: any) => i.summary)).toEqual(["message to reporter (notice receipt)", "message to reporter (notice decision)", "message to reporter (notice decision)"]);
    const audit = await env.DB.prepare("SELECT action, details_json AS details FROM audit_events WHERE installation_id = ?1 AND action LIKE 'notifier.%'").bind(d.id).all<{ action: string; details: string }>();
    expect(audit.results.map((a) => a.action)).toEqual(["notifier.message_queued", "notifier.message_queued", "notifier.message_queued"]);
    const stored =
      JSON.stringify((await env.DB.prepare("SELECT * FROM audit_events WHERE installation_id = ?1").bind(d.id).all()).results) +
      JSON.stringify(rows.results) +
      JSON.stringify((await env.DB.prepare("SELECT * FROM webhook_deliveries WHERE installation_id = ?1").bind(d.id).all()).results);
    for (const secret of ["nina@example.org", "never ships", "a fake shop"]) expect(stored).not.toContain(secret);
  });

  it("tells the notifier a decision a workflow took, after the step's batch (automated means named)", async () => {
    const d = await desk();
    const version = await publish(d.key, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "decide", kind: "decision", config: { outcome: "removed_scam", statement: "A fraudulent shop.", restrictions: { visibility: ["content_removed"] } } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    expect((await api("/api/v1/triggers", { key: d.key, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const created = await api("/api/v1/reports", { key: d.key, body: notice("shop-7", { id: "wanda", contact: "wanda@example.org" }) });
    expect(created.status).toBe(201);
    const run = await waitForRun(d.key, created.body.runs[0].runId);
    expect(run.state).toBe("succeeded");
    const step = run.steps.find((s: any) => s.nodeId === "decide");
    const [told] = await until(async () => ((await d.messages("notice_decision")).length ? d.messages("notice_decision") : null), "the decision message");
    expect(told!.data).toMatchObject({ reportId: created.body.id, decisionId: step.output.decisionId, recipient: { contact: "wanda@example.org" }, facts: { restricts: true, automatedDecision: "fully" } });
    expect(told!.data.body).toContain("automated means");
    expect(step.output.deliveryIds).toHaveLength(1);
  });

  it("records a notice whose notifier cannot be told (no message endpoint) as unsent", async () => {
    const { apiKey: key, id } = await newInstallation("notices-unsent");
    const noticed = await report(key, notice("shop-9", { contact: "omar@example.org" }));
    const events = await env.DB.prepare("SELECT action, target_id AS target, details_json AS details FROM audit_events WHERE installation_id = ?1 AND action LIKE 'notifier.%'").bind(id).all<any>();
    expect(events.results).toEqual([{ action: "notifier.message_unsent", target: `${noticed.id}:notice_receipt`, details: expect.stringContaining('"reason":"no_message_endpoint"') }]);
    const row = await env.DB.prepare("SELECT kind, delivery_id AS deliveryId FROM messages WHERE id = ?1").bind(`${noticed.id}:notice_receipt`).first();
    expect(row).toEqual({ kind: "notice_receipt", deliveryId: null });
  });
});

const reviewGraph = (queue: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queue, timeout_seconds: 3600 } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
});

async function tasksOf(key: string, queueId: string, count: number): Promise<any[]> {
  return until(async () => {
    const { body } = await api(`/api/v1/queues/${queueId}/tasks?limit=100`, { key });
    return (body.items?.length ?? 0) >= count ? body.items : null;
  }, `${count} tasks`);
}

describe("trusted flaggers (Art. 22)", () => {
  it("makes a registered flagger's notice in their area trusted_flagger, hands its task out before older ones, and says SOURCE_TRUSTED_FLAGGER", async () => {
    const d = await desk();
    const queue = await api("/api/v1/queues", { key: d.key, body: { name: "scams", slaSeconds: 3600 } });
    const version = await publish(d.key, reviewGraph(queue.body.id));
    expect((await api("/api/v1/triggers", { key: d.key, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const flagger = await api("/api/v1/trusted-flaggers", { key: d.key, body: { name: "Consumer hotline", reporter: { id: "hotline-7" }, categories: ["scams_and_fraud", "STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS"] } });
    expect(flagger.status).toBe(201);
    expect(flagger.body).toMatchObject({ name: "Consumer hotline", categories: ["scams_and_fraud", "unsafe_and_prohibited_products"], active: true, activeUntil: null });
    expect(JSON.stringify(flagger.body)).not.toContain("hotline-7");
    expect((await api("/api/v1/trusted-flaggers", { key: d.key, body: { name: "Again", reporter: { id: "hotline-7" }, categories: ["violence"] } })).body.error.code).toBe("trusted_flagger.exists");

    const older = [await report(d.key, notice("old-1", { id: "someone" })), await report(d.key, notice("old-2", { id: "someone-else" }))];
    await tasksOf(d.key, queue.body.id, 2);
    const trusted = await report(d.key, notice("new-1", { id: "hotline-7", contact: "desk@hotline.example" }));
    expect(trusted.source).toBe("trusted_flagger");
    // Outside the flagger's area, a notice is an ordinary one.
    const outside = await report(d.key, notice("new-2", { id: "hotline-7" }, { category: "violence" }));
    expect(outside.source).toBe("notice");
    const tasks = await tasksOf(d.key, queue.body.id, 4);
    // The listing stays in SLA order: the trusted flagger's task is not first there...
    expect(tasks[0].reportId).toBe(older[0]!.id);
    // ...but /next hands it out first, then the rest in due order.
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const next = await api(`/api/v1/queues/${queue.body.id}/next`, { key: d.key, body: { reviewer: `r${i}` } });
      expect(next.status, JSON.stringify(next.body)).toBe(200);
      order.push(next.body.reportId);
    }
    expect(order).toEqual([trusted.id, older[0]!.id, older[1]!.id]);

    const [receipt] = await until(async () => {
      const found = (await d.messages("notice_receipt")).filter((m) => m.data.reportId === trusted.id);
      return found.length ? found : null;
    }, "the flagger's receipt");
    expect(receipt!.data.facts.trustedFlagger).toBe(true);

    const decision = await api("/api/v1/decisions", { key: d.key, body: { reportId: trusted.id, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Counterfeit goods." } });
    expect(decision.status).toBe(201);
    const sor = await api(`/api/v1/decisions/${decision.body.id}/statement-of-reasons`, { key: d.key });
    expect(sor.status).toBe(200);
    expect(sor.body.source_type).toBe("SOURCE_TRUSTED_FLAGGER");
    const plain = await api("/api/v1/decisions", { key: d.key, body: { reportId: older[0]!.id, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Fake shop." } });
    expect((await api(`/api/v1/decisions/${plain.body.id}/statement-of-reasons`, { key: d.key })).body.source_type).toBe("SOURCE_ARTICLE_16");

    // Ending the flagger's period: their next notice is an ordinary one.
    const ended = await api(`/api/v1/trusted-flaggers/${flagger.body.id}`, { method: "PATCH", key: d.key, body: { activeUntil: new Date().toISOString() } });
    expect(ended.status).toBe(200);
    expect(ended.body.active).toBe(false);
    expect((await report(d.key, notice("new-3", { id: "hotline-7" }))).source).toBe("notice");
    const audit = await env.DB.prepare("SELECT action FROM audit_events WHERE installation_id = ?1 AND action LIKE 'trusted_flagger.%' ORDER BY seq").bind(d.id).all<{ action: string }>();
    expect(audit.results.map((a) => a.action)).toEqual(["trusted_flagger.registered", "trusted_flagger.updated"]);
  });

  it("tracks each flagger's precision: the share of their decided notices whose latest decision restricted, with its Wilson interval", async () => {
    const { apiKey: key } = await newInstallation("precision");
    const one = await api("/api/v1/trusted-flaggers", { key, body: { name: "One", reporter: { id: "flagger-one" }, categories: ["scams_and_fraud"] } });
    const two = await api("/api/v1/trusted-flaggers", { key, body: { name: "Two", reporter: { id: "flagger-two" }, categories: ["scams_and_fraud"] } });
    const ones = [];
    for (let i = 0; i < 5; i++) ones.push(await report(key, notice(`p-${i}`, { id: "flagger-one" })));
    const twos = [await report(key, notice("q-0", { id: "flagger-two" }))];
    expect([...ones, ...twos].every((r) => r.source === "trusted_flagger")).toBe(true);
    const decide = async (reportId: string, restricts: boolean) => {
      const body = restricts ? { reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Removed." } : { reportId, outcome: "no_action" };
      expect((await api("/api/v1/decisions", { key, body })).status).toBe(201);
    };
    // One: p-0 restricted; p-1 not acted on, then restricted after all (the latest counts); p-2 and
    // p-3 not acted on; p-4 undecided. Decided 4, restricted 2. Two: q-0 restricted.
    await decide(ones[0]!.id, true);
    await decide(ones[1]!.id, false);
    await decide(ones[1]!.id, true);
    await decide(ones[2]!.id, false);
    await decide(ones[3]!.id, false);
    await decide(twos[0]!.id, true);
    const figures = await api(`/api/v1/trusted-flaggers/${one.body.id}`, { key });
    expect(figures.status).toBe(200);
    expect(figures.body.notices).toEqual({ received: 5, decided: 4, restricted: 2, notActedOn: 2 });
    expect(figures.body.precision).toEqual(wilson(2, 4));
    expect(figures.body.precision.low).toBeCloseTo(0.150039, 5);
    const list = await api("/api/v1/trusted-flaggers", { key });
    const byName = Object.fromEntries(list.body.items.map((f: any) => [f.name, f]));
    expect(byName.Two.notices).toEqual({ received: 1, decided: 1, restricted: 1, notActedOn: 0 });
    expect(byName.Two.precision).toEqual(wilson(1, 1));
    expect(two.body.precision).toEqual(wilson(0, 0));
    // A window after every notice holds none: no figure, not 0.
    const later = await api(`/api/v1/trusted-flaggers/${one.body.id}?from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`, { key });
    expect(later.body.notices.received).toBe(0);
    expect(later.body.precision.value).toBeNull();
    expect((await api(`/api/v1/trusted-flaggers/${one.body.id}?from=yesterday`, { key })).status).toBe(400);
  });
});

describe("notice misuse (Art. 23)", () => {
  it("warns first, then suspends for a period: the notifier's notices are refused (403, audited) until it ends or is lifted", async () => {
    const d = await desk();
    const spammer = { id: "spammer-3", contact: "spam@example.org" };
    const before = await report(d.key, notice("spam-0", spammer), { "idempotency-key": "spam-0" });
    const until1d = new Date(Date.now() + 86_400_000).toISOString();
    const early = await api("/api/v1/notifiers/suspensions", { key: d.key, body: { reporter: { id: spammer.id }, reason: "flood", until: until1d } });
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe("notifier.warning_required");

    const warning = await api("/api/v1/notifiers/warnings", { key: d.key, body: { reporter: { id: spammer.id }, reason: "Forty notices about the same harmless page." } });
    expect(warning.status).toBe(201);
    expect(warning.body).toMatchObject({ kind: "warning", notified: true, active: false });
    const [warned] = await until(async () => ((await d.messages("notifier_warning")).length ? d.messages("notifier_warning") : null), "the warning");
    expect(warned!.data.recipient.contact).toBe("spam@example.org");
    // Still accepted after a warning.
    await report(d.key, notice("spam-1", spammer));

    expect((await api("/api/v1/notifiers/suspensions", { key: d.key, body: { reporter: { id: spammer.id }, reason: "flood", until: new Date(Date.now() - 1000).toISOString() } })).body.error.code).toBe("notifier.suspension_period_invalid");
    const suspension = await api("/api/v1/notifiers/suspensions", { key: d.key, body: { reporter: { id: spammer.id }, reason: "Kept flooding after the warning.", until: until1d } });
    expect(suspension.status).toBe(201);
    expect(suspension.body).toMatchObject({ kind: "suspension", warningId: warning.body.id, endsAt: until1d, active: true });
    expect((await api("/api/v1/notifiers/suspensions", { key: d.key, body: { reporter: { id: spammer.id }, reason: "again", until: until1d } })).body.error.code).toBe("notifier.already_suspended");

    const refused = await api("/api/v1/reports", { key: d.key, body: notice("spam-2", spammer) });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: "report.notifier_suspended", details: { suspendedUntil: until1d, sanctionId: suspension.body.id } });
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM reports WHERE installation_id = ?1 AND subject_id = 'spam-2'").bind(d.id).first<{ n: number }>())!.n).toBe(0);
    // Calling the notice voluntary does not get round the suspension.
    const relabelled = await api("/api/v1/reports", { key: d.key, body: { ...notice("spam-3", spammer), source: "voluntary" } });
    expect(relabelled.status).toBe(403);
    expect(relabelled.body.error.code).toBe("report.notifier_suspended");
    // The replay of a notice recorded before the suspension still answers; others' notices are taken.
    const replay = await api("/api/v1/reports", { key: d.key, body: notice("spam-0", spammer), headers: { "idempotency-key": "spam-0" } });
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(before.id);
    await report(d.key, notice("spam-2", { id: "someone-honest" }));

    const standing = await api("/api/v1/notifiers/lookup", { key: d.key, body: { reporter: { id: spammer.id } } });
    expect(standing.status).toBe(200);
    expect(standing.body).toMatchObject({ suspended: true, trustedFlagger: null, notices: { received: 2, decided: 0 } });
    expect(standing.body.warnings.map((w: any) => w.reason)).toEqual(["Forty notices about the same harmless page."]);
    const listed = await api("/api/v1/notifier-sanctions", { key: d.key });
    expect(listed.body.items.map((s: any) => s.kind)).toEqual(["suspension", "warning"]);
    expect(JSON.stringify(listed.body)).not.toContain("Forty notices");

    const lifted = await api(`/api/v1/notifier-sanctions/${suspension.body.id}/lift`, { key: d.key, body: { reason: "Appeal upheld." } });
    expect(lifted.status).toBe(200);
    expect(lifted.body.active).toBe(false);
    expect((await api(`/api/v1/notifier-sanctions/${suspension.body.id}/lift`, { key: d.key, body: { reason: "twice" } })).status).toBe(409);
    await report(d.key, notice("spam-3", spammer));

    const audit = await env.DB.prepare("SELECT action, target_type AS targetType, details_json AS details FROM audit_events WHERE installation_id = ?1 AND (action LIKE 'notifier.%' OR action = 'report.refused') ORDER BY seq")
      .bind(d.id)
      .all<any>();
    const actions = audit.results.map((a) => a.action).filter((a) => a !== "notifier.message_queued");
    // Two refusals: the notice, and the same notifier calling its next report voluntary.
    expect(actions).toEqual(["notifier.warned", "notifier.suspended", "report.refused", "report.refused", "notifier.standing_viewed", "notifier.suspension_lifted"]);
    expect(audit.results.find((a) => a.action === "report.refused")).toMatchObject({ targetType: "notifier_sanction" });
    const text = JSON.stringify(audit.results);
    for (const secret of ["spammer-3", "spam@example.org", "Forty notices", "Kept flooding", "Appeal upheld"]) expect(text).not.toContain(secret);
  });
});

describe("tenancy", () => {
  it("answers another installation's flaggers and sanctions with 404; a reporter registered or suspended in one installation is nothing in another", async () => {
    const a = await newInstallation("notices-a");
    const b = await newInstallation("notices-b");
    const flagger = await api("/api/v1/trusted-flaggers", { key: a.apiKey, body: { name: "A's flagger", reporter: { id: "shared-reporter" }, categories: ["scams_and_fraud"] } });
    expect(flagger.status).toBe(201);
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { name: "taken over" }],
    ] as const) {
      const response = await api(`/api/v1/trusted-flaggers/${flagger.body.id}`, { method, key: b.apiKey, body });
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe("trusted_flagger.not_found");
    }
    expect((await api("/api/v1/trusted-flaggers", { key: b.apiKey })).body.items).toEqual([]);
    expect((await api(`/api/v1/trusted-flaggers/${flagger.body.id}`, { key: a.apiKey })).body.name).toBe("A's flagger");

    await api("/api/v1/notifiers/warnings", { key: a.apiKey, body: { reporter: { id: "shared-reporter" }, reason: "unfounded" } });
    const suspension = await api("/api/v1/notifiers/suspensions", { key: a.apiKey, body: { reporter: { id: "shared-reporter" }, reason: "unfounded", until: new Date(Date.now() + 3_600_000).toISOString() } });
    expect(suspension.status).toBe(201);
    const lift = await api(`/api/v1/notifier-sanctions/${suspension.body.id}/lift`, { key: b.apiKey, body: { reason: "not mine" } });
    expect(lift.status).toBe(404);
    expect(lift.body.error.code).toBe("notifier_sanction.not_found");

    // In B the same reporter is neither A's trusted flagger nor suspended.
    expect((await report(b.apiKey, notice("b-1", { id: "shared-reporter" }))).source).toBe("notice");
    expect((await api("/api/v1/notifiers/lookup", { key: b.apiKey, body: { reporter: { id: "shared-reporter" } } })).body).toMatchObject({ suspended: false, trustedFlagger: null, warnings: [], notices: { received: 1 } });
    expect((await api("/api/v1/reports", { key: a.apiKey, body: notice("a-1", { id: "shared-reporter" }) })).status).toBe(403);
    const hashes = await env.DB.prepare("SELECT installation_id AS inst, notifier_hash AS hash FROM notifier_notices WHERE installation_id IN (?1, ?2)").bind(a.id, b.id).all<{ inst: string; hash: string }>();
    const stored = await env.DB.prepare("SELECT notifier_hash AS hash FROM trusted_flaggers WHERE id = ?1").bind(flagger.body.id).first<{ hash: string }>();
    expect(hashes.results.find((h) => h.inst === b.id)!.hash).not.toBe(stored!.hash);
    expect(stored!.hash).toMatch(/^[0-9a-f]{32}$/u);
  });

  it("a notifier's rows written with the whole 64-digit hash (before hashes were cut to 32) still count: their notices and suspension hold, and the flagger is not registered twice", async () => {
    const installation = await newInstallation("notices-legacy-hash");
    const reporter = { id: "long-hash-reporter" };
    const [short, full] = notifierHashes(env, installation.id, reporter.id).all;
    expect(short).toMatch(/^[0-9a-f]{32}$/u);
    expect(full).toMatch(/^[0-9a-f]{64}$/u);
    expect(full!.startsWith(short!)).toBe(true);
    expect((await report(installation.apiKey, notice("legacy-1", reporter))).source).toBe("notice");
    const warning = await api("/api/v1/notifiers/warnings", { key: installation.apiKey, body: { reporter, reason: "Unfounded notices." } });
    expect(warning.status).toBe(201);
    // As rows written before: the whole hash. The warning written so is still the one a suspension needs.
    const asBefore = (table: string) => env.DB.prepare(`UPDATE ${table} SET notifier_hash = ?2 WHERE installation_id = ?1`).bind(installation.id, full);
    await env.DB.batch([asBefore("notifier_notices"), asBefore("notifier_sanctions")]);
    const suspension = await api("/api/v1/notifiers/suspensions", { key: installation.apiKey, body: { reporter, reason: "unfounded", until: new Date(Date.now() + 3_600_000).toISOString() } });
    expect(suspension.status).toBe(201);
    expect(suspension.body.warningId).toBe(warning.body.id);
    await asBefore("notifier_sanctions").run();
    // A flagger registered with the whole hash is the same reporter: registering them again is refused.
    const flagger = await api("/api/v1/trusted-flaggers", { key: installation.apiKey, body: { name: "Long Hash Org", reporter, categories: ["scams_and_fraud"] } });
    expect(flagger.status).toBe(201);
    await env.DB.prepare("UPDATE trusted_flaggers SET notifier_hash = ?2 WHERE id = ?1").bind(flagger.body.id, full).run();
    const again = await api("/api/v1/trusted-flaggers", { key: installation.apiKey, body: { name: "Long Hash Org 2", reporter, categories: ["scams_and_fraud"] } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("trusted_flagger.exists");
    const refused = await api("/api/v1/reports", { key: installation.apiKey, body: notice("legacy-2", reporter) });
    expect(refused.status).toBe(403);
    expect((await api("/api/v1/notifiers/lookup", { key: installation.apiKey, body: { reporter } })).body).toMatchObject({ suspended: true, notices: { received: 1 } });
  });
});
