// /api/v1 reports, cases, triggers, queues, tasks, appeals and data keys.
import { AppError, notFound } from "../errors";
import { routes, withStatus } from "../http/route";
import { encodeCursor, idempotencyKey } from "../http/validate";
import { confirmAppeal, fileAppeal, readAppeal, resolveAppeal } from "./appeals/appeals";
import { complaintResolutionFigures, decisionReversalFigures, listDecisionReversals } from "./appeals/complaints";
import { createGoldenItem, listGoldenItems } from "./qa/golden";
import { getQaSettings, listQaSettings, setQaSettings } from "./qa/qa";
import { reviewerFigures } from "./qa/qa-figures";
import { createQueue, getQueueRow, listQueues, queueStats } from "./queues/queues";
import { rotateDataKey } from "./reports/report-crypto";
import { intakeReport, readReport, revealReporter, reportSummary } from "./reports/reports";
import { clientReportKey } from "./reports/report-input";
import { normalizeCategory } from "./taxonomy";
import { reportTimeline } from "./reports/timeline";
import { hotOrArchived } from "./archive/case-rehydrate";
import { getCaseRow, listReportRows } from "./reports/reports-queries";
import { claimNextTask, claimTask, releaseTask } from "./queues/task-leases";
import { completeTask, getTask, listQueueTasks, TASK_STATES } from "./queues/tasks";
import { createTrigger, listTriggers, setTriggerEnabled } from "./triggers/triggers";
import { exposureStatus, getCaps, reviewerOf, setCaps } from "./wellness/wellness";
import { promoteTrigger, updateTriggerMode } from "./promotion/promotion";
import { getTriggerGate, putTriggerGate } from "./promotion/promotion-gates";
import { listTriggerDemotions } from "./promotion/promotion-sweep";
import { liftSuspension, listSanctions, notifierStanding, sanctionNotifier } from "./notices/notifiers";
import { getTrustedFlagger, listTrustedFlaggers, registerTrustedFlagger, updateTrustedFlagger } from "./notices/trusted-flaggers";
import { getRetentionSettings, setRetentionSettings } from "./retention/retention";
import { erasePersonalData, exportPersonalData } from "./retention/retention-people";
import { AUTOMATION_MODES, search, SEARCH_TYPES } from "./search/search";

const reading = ["review", "admin"] as const;
/** Opening personal data (reported content, who reported) needs a scope of its own; `read` does not open it. */
const personalData = ["personal_data:read", "admin"] as const;

export const caseRoutes = routes()
  .op(
    {
      method: "get",
      path: "/search",
      summary:
        "Search reports, cases, decisions or accounts (?type=, default report), newest first with a cursor. q matches every word of a report's description, or exactly a reporter's id or contact (an account: its id), through keyed hashes: nothing is decrypted; a search with q needs personal_data:read and is audited. Filters: category, state (case), queue, from/to (ISO), decision (outcome), automation",
      auth: reading,
      ok: 200,
      errors: [403],
      query: { limit: { default: 50, max: 200 }, cursor: ["string", "string"], enums: { type: SEARCH_TYPES, automation: AUTOMATION_MODES }, strings: ["q", "category", "state", "queue", "from", "to", "decision"] },
    },
    async (c, { query }) => {
      const category = query.category === undefined ? undefined : (normalizeCategory(query.category) ?? query.category);
      return search(c.env, c.get("actor"), { ...query, type: query.type ?? "report", ...(category ? { category } : {}) });
    },
  )
  .op(
    {
      method: "post",
      path: "/reports",
      summary: "Take in a report: personal data sealed, grouped into a case per subject, triggers fired",
      auth: ["reports:write"],
      body: "CreateReport",
      ok: 201,
      errors: [403, 409, 422],
      headers: ["Idempotency-Key"],
      rateLimit: "INTAKE_RATE_LIMIT",
    },
    async (c, { body }) => {
      const result = await intakeReport(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body, clientReportKey(idempotencyKey(c.req.header("idempotency-key"))));
      if (result.replayed) c.header("Idempotent-Replayed", "true");
      return withStatus({ ...result.report, runs: result.runs }, result.replayed ? 200 : 201);
    },
  )
  .op(
    {
      method: "get",
      path: "/reports",
      summary: "List report summaries (no personal data), newest first",
      auth: reading,
      ok: 200,
      query: { limit: { default: 50, max: 200 }, cursor: ["string", "string"], strings: ["caseId", "subjectId", "category"] },
    },
    async (c, { query }) => {
      const rows = await listReportRows(c.env.DB, c.get("actor").installationId, {
        limit: query.limit + 1,
        ...(query.caseId ? { caseId: query.caseId } : {}),
        ...(query.cursor ? { before: { createdAt: String(query.cursor[0]), id: String(query.cursor[1]) } } : {}),
        ...(query.subjectId ? { subjectId: query.subjectId } : {}),
        ...(query.category ? { category: normalizeCategory(query.category) ?? query.category } : {}),
      });
      const page = rows.slice(0, query.limit);
      const last = page.at(-1);
      return { items: page.map(reportSummary), nextCursor: rows.length > query.limit && last ? encodeCursor([last.createdAt, last.id]) : null };
    },
  )
  .op({ method: "get", path: "/reports/:id", summary: "Read a report with its content opened (not the reporter; the access is audited)", auth: personalData, ok: 200, errors: [404] }, async (c) =>
    readReport(c.env, c.get("actor"), c.req.param("id")),
  )
  .op({ method: "post", path: "/reports/:id/reveal-reporter", summary: "Reveal who reported and how to reach them, with a reason (audited)", auth: personalData, body: "RevealReporter", ok: 200, errors: [404] }, async (c, { body }) =>
    revealReporter(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "get", path: "/reports/:id/timeline", summary: "Everything that followed a report: runs, tasks, decisions, actions, messages, appeals, handoffs", auth: reading, ok: 200, errors: [404] }, async (c) =>
    reportTimeline(c.env, c.get("actor"), c.req.param("id")),
  )
  .op({ method: "get", path: "/cases/:id", summary: "Read a case (one subject) with its reports", auth: reading, ok: 200, errors: [404] }, async (c) => {
    const installationId = c.get("actor").installationId;
    const row = await hotOrArchived(c.env, installationId, "case", c.req.param("id"), () => getCaseRow(c.env.DB, installationId, c.req.param("id")));
    if (!row) throw notFound("case");
    const reports = await listReportRows(c.env.DB, c.get("actor").installationId, { limit: 200, caseId: row.id });
    return { ...row, reports: reports.map(reportSummary) };
  })
  .op(
    { method: "post", path: "/triggers", summary: "Map report or appeal events to a workflow version with a CEL condition and an authority mode", auth: ["admin"], body: "CreateTrigger", ok: 201, errors: [404, 409, 422] },
    async (c, { body }) => createTrigger(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/triggers", summary: "List triggers", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listTriggers(c.env, c.get("actor")) }))
  .op({ method: "post", path: "/triggers/:id/enable", summary: "Enable a trigger", auth: ["admin"], ok: 200, errors: [404] }, async (c) => setTriggerEnabled(c.env, c.get("actor"), c.req.param("id"), true))
  .op({ method: "post", path: "/triggers/:id/disable", summary: "Disable a trigger", auth: ["admin"], ok: 200, errors: [404] }, async (c) => setTriggerEnabled(c.env, c.get("actor"), c.req.param("id"), false))
  .op(
    { method: "patch", path: "/triggers/:id", summary: "Lower a trigger's authority mode (a demotion needs no gate); raising it goes through promote", auth: ["admin"], body: "UpdateTrigger", ok: 200, errors: [404, 409] },
    async (c, { body }) => updateTriggerMode(c.env, c.get("actor"), c.req.param("id"), body.authorityMode),
  )
  .op(
    {
      method: "post",
      path: "/triggers/:id/promote",
      summary: "Promote to the next mode if its gate is met (409 promotion.gate_not_met with each requirement's figures otherwise); the evidence and its digest are audited",
      auth: ["admin"],
      body: "PromoteTrigger",
      ok: 200,
      errors: [404, 409],
    },
    async (c, { body }) => promoteTrigger(c.env, c.get("actor"), c.req.param("id"), body.to),
  )
  .op({ method: "get", path: "/triggers/:id/gate", summary: "The trigger's promotion and demotion gate (set or default) and the figures against it for the next mode", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    getTriggerGate(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    { method: "put", path: "/triggers/:id/gate", summary: "Set the trigger's gate: compared runs, agreement and precision lower bounds, the overturn limit", auth: ["admin"], body: "TriggerGate", ok: 200, errors: [404] },
    async (c, { body }) => putTriggerGate(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "get", path: "/triggers/:id/demotions", summary: "The trigger's automatic demotions, newest first, with their figures and digest", auth: ["admin"], ok: 200, errors: [404] }, async (c) => ({
    items: await listTriggerDemotions(c.env, c.get("actor").installationId, c.req.param("id")),
  }))
  .op({ method: "post", path: "/queues", summary: "Create a review queue with an SLA and a priority", auth: ["admin"], body: "CreateQueue", ok: 201, errors: [409] }, async (c, { body }) => createQueue(c.env, c.get("actor"), body))
  .op({ method: "get", path: "/queues", summary: "List queues with open, claimed, SLA-breached counts and the oldest due date", auth: reading, ok: 200 }, async (c) => ({ items: await listQueues(c.env, c.get("actor")) }))
  .op({ method: "get", path: "/queues/:id", summary: "Read a queue", auth: reading, ok: 200, errors: [404] }, async (c) => {
    const row = await getQueueRow(c.env.DB, c.get("actor").installationId, c.req.param("id"));
    if (!row) throw notFound("queue");
    return row;
  })
  .op(
    {
      method: "get",
      path: "/queues/:id/tasks",
      summary: "Tasks in SLA order (due date, priority, id) with a cursor; ?state=open|claimed|completed|expired|cancelled",
      auth: reading,
      ok: 200,
      errors: [404],
      query: { limit: { default: 50, max: 200 }, enums: { state: TASK_STATES }, strings: ["cursor"] },
    },
    async (c, { query }) => listQueueTasks(c.env, c.get("actor"), c.req.param("id"), query),
  )
  .op({ method: "get", path: "/queues/:id/stats", summary: "Open, claimed, SLA breaches, time to complete p50/p90", auth: reading, ok: 200, errors: [404] }, async (c) => queueStats(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/queues/:id/next",
      summary: "Claim the first open task of the queue, passing over categories whose daily exposure cap the reviewer reached (`wellness.skipped`); 404 queue.empty when none, 409 wellness.exposure_cap_reached when only capped work is left",
      auth: ["review"],
      body: "ClaimTask",
      ok: 200,
      errors: [404, 409],
    },
    async (c, { body }) => {
      const task = await claimNextTask(c.env, c.get("actor"), c.req.param("id"), body);
      if (!task) throw new AppError("queue.empty", "No open task in this queue.", { status: 404 });
      return task;
    },
  )
  .op({ method: "get", path: "/wellness/caps", summary: "The daily exposure caps: the installation default, per category, and the cap each category ends up with", auth: ["admin"], ok: 200 }, async (c) => getCaps(c.env, c.get("actor")))
  .op({ method: "put", path: "/wellness/caps", summary: "Replace the daily exposure caps (minutes of claimed tasks per reviewer per UTC day; null is no cap)", auth: ["admin"], body: "SetExposureCaps", ok: 200 }, async (c, { body }) => {
    await setCaps(c.env, c.get("actor"), body);
    return getCaps(c.env, c.get("actor"));
  })
  .op(
    {
      method: "get",
      path: "/wellness/exposure",
      summary: "Your exposure today per category against its cap, and when the day resets (an API key names the reviewer with ?reviewer=)",
      auth: reading,
      ok: 200,
      query: { strings: ["reviewer"] },
    },
    async (c, { query }) => exposureStatus(c.env.DB, c.get("actor").installationId, reviewerOf(c.get("actor"), query.reviewer)),
  )
  .op({ method: "get", path: "/tasks/:id", summary: "Read a task", auth: reading, ok: 200, errors: [404] }, async (c) => getTask(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/tasks/:id/claim",
      summary: "Take or renew the task's exclusive lease; another holder's live lease is a 409 (the QA task of your own answer a 403)",
      auth: ["review"],
      body: "ClaimTask",
      ok: 200,
      errors: [403, 404, 409],
    },
    async (c, { body }) => claimTask(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "post", path: "/tasks/:id/release", summary: "Give the lease back", auth: ["review"], body: "ReleaseTask", ok: 200, errors: [404, 409] }, async (c, { body }) => releaseTask(c.env, c.get("actor"), c.req.param("id"), body))
  .op(
    {
      method: "post",
      path: "/tasks/:id/complete",
      summary: "Answer the task; the response is checked against its schema (422 lists failing paths) and the run resumes",
      auth: ["review"],
      body: "CompleteTask",
      ok: 200,
      errors: [404, 409, 422],
    },
    async (c, { body }) => completeTask(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    {
      method: "post",
      path: "/appeals",
      summary: "Appeal a report's handling or a decision (appellantRole: notifier or affected); starts the appeal workflow(s) of appeal.created triggers",
      auth: ["reports:write"],
      body: "CreateAppeal",
      ok: 201,
      errors: [404, 409, 422],
      headers: ["Idempotency-Key"],
    },
    async (c, { body }) => {
      const result = await fileAppeal(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body, idempotencyKey(c.req.header("idempotency-key")));
      if (result.replayed) c.header("Idempotent-Replayed", "true");
      return withStatus({ ...result.appeal, runs: result.runs }, result.replayed ? 200 : 201);
    },
  )
  .op(
    { method: "get", path: "/appeals/:id", summary: "Read an appeal; the appellant's id, contact and reason only for personal_data:read or admin (access audited), else null with personalDataSealed", auth: reading, ok: 200, errors: [404] },
    async (c) => readAppeal(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "post",
      path: "/appeals/:id/resolve",
      summary: "Record the outcome (upheld or overturned) as a person: a console user or a reviewer's key. Automation (any other key) only proposes it, where redress settings allow (automatedComplaints), else 403 appeal.person_required",
      auth: ["review"],
      body: "ResolveAppeal",
      ok: 200,
      errors: [403, 404, 409, 422],
    },
    async (c, { body }) => resolveAppeal(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    {
      method: "post",
      path: "/appeals/:id/confirm",
      summary: "A person (console user or reviewer's key) confirms the outcome automation proposed; the appeal is decided and the appellant told",
      auth: ["review"],
      ok: 200,
      errors: [403, 404, 409],
    },
    async (c) => confirmAppeal(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "get",
      path: "/decision-reversals",
      summary: "Decisions an appeal overturned, newest first, with their statement's Transparency Database uuid (null until it has one)",
      auth: ["admin", "review"],
      ok: 200,
      query: { limit: { default: 50, max: 200 } },
    },
    async (c, { query }) => ({ items: await listDecisionReversals(c.env.DB, c.get("actor").installationId, query.limit) }),
  )
  .op(
    {
      method: "get",
      path: "/complaints/figures",
      summary: "Complaints decided in [from, to): by outcome, how many by automation (an API key resolved them), and the decisions reversed",
      auth: ["admin"],
      ok: 200,
      errors: [422],
      query: { strings: ["from", "to"] },
    },
    async (c, { query }) => {
      const period = complaintPeriod(query.from, query.to);
      const installationId = c.get("actor").installationId;
      return { ...period, complaints: await complaintResolutionFigures(c.env.DB, installationId, period), reversals: await decisionReversalFigures(c.env.DB, installationId, period) };
    },
  )
  .op({ method: "get", path: "/queues/:id/qa-settings", summary: "A queue's QA sampling: the share of completed tasks sent to its QA queue for a blind second review", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    getQaSettings(c.env, c.get("actor"), c.req.param("id")),
  )
  .op({ method: "put", path: "/queues/:id/qa-settings", summary: "Set a queue's QA sampling rate, QA queue and compared field (audited)", auth: ["admin"], body: "SetQaSettings", ok: 200, errors: [404, 422] }, async (c, { body }) =>
    setQaSettings(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "get", path: "/qa/settings", summary: "Every queue's QA sampling settings", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listQaSettings(c.env, c.get("actor")) }))
  .op(
    { method: "post", path: "/qa/golden-items", summary: "Write a golden item (a task with a known answer), mixed into a queue as an ordinary task", auth: ["admin"], body: "CreateGoldenItem", ok: 201, errors: [404, 409, 422] },
    async (c, { body }) => withStatus(await createGoldenItem(c.env, c.get("actor"), body), 201),
  )
  .op(
    { method: "get", path: "/qa/golden-items", summary: "Golden items with their answers and results (?queueId=); admin only, never opened by `read`", auth: ["admin"], readOpens: false, ok: 200, query: { strings: ["queueId"] } },
    async (c, { query }) => ({
      items: await listGoldenItems(c.env, c.get("actor"), query.queueId ? { queueId: query.queueId } : {}),
    }),
  )
  .op(
    {
      method: "get",
      path: "/qa/reviewers",
      summary: "Per reviewer and per category: agreement with QA and golden accuracy (Wilson 95%), kappa between reviewers, median time per task (?since=, default 30 days)",
      auth: ["admin"],
      ok: 200,
      errors: [400],
      query: { strings: ["since"] },
    },
    async (c, { query }) => reviewerFigures(c.env, c.get("actor"), query.since ? { since: query.since } : {}),
  )
  .op({ method: "post", path: "/data-keys/rotate", summary: "Start a new data key version for sealing personal data; older versions still open old data", auth: ["admin"], ok: 201 }, async (c) =>
    rotateDataKey(c.env, c.get("actor").installationId),
  )
  // Trusted flaggers (DSA Art. 22) and notifier misuse (Art. 23): cases/notices/trusted-flaggers.ts, cases/notices/notifiers.ts.
  .op({ method: "post", path: "/trusted-flaggers", summary: "Register a reporter as a trusted flagger for an area (categories) and period", auth: ["admin"], body: "CreateTrustedFlagger", ok: 201, errors: [409, 422] }, async (c, { body }) =>
    withStatus(await registerTrustedFlagger(c.env, c.get("actor"), body), 201),
  )
  .op(
    { method: "get", path: "/trusted-flaggers", summary: "Trusted flaggers with the precision of their notices (?from=&to= by notice time; Wilson 95%)", auth: ["admin"], ok: 200, errors: [400], query: { strings: ["from", "to"] } },
    async (c, { query }) => listTrustedFlaggers(c.env, c.get("actor"), query),
  )
  .op({ method: "get", path: "/trusted-flaggers/:id", summary: "A trusted flagger and the precision of their notices (?from=&to=)", auth: ["admin"], ok: 200, errors: [400, 404], query: { strings: ["from", "to"] } }, async (c, { query }) =>
    getTrustedFlagger(c.env, c.get("actor"), c.req.param("id"), query),
  )
  .op({ method: "patch", path: "/trusted-flaggers/:id", summary: "Change a trusted flagger's name, area or period (audited)", auth: ["admin"], body: "UpdateTrustedFlagger", ok: 200, errors: [404, 409, 422] }, async (c, { body }) =>
    updateTrustedFlagger(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "post", path: "/notifiers/lookup", summary: "A notifier's notices, warnings and suspensions, by reporter id (reasons opened, audited)", auth: ["admin"], body: "NotifierLookup", ok: 200 }, async (c, { body }) =>
    notifierStanding(c.env, c.get("actor"), body),
  )
  .op({ method: "post", path: "/notifiers/warnings", summary: "Warn a notifier who sent manifestly unfounded notices (DSA Art. 23(2)); the notifier is told", auth: ["admin"], body: "WarnNotifier", ok: 201 }, async (c, { body }) =>
    withStatus(await sanctionNotifier(c.env, c.get("actor"), "warning", body), 201),
  )
  .op(
    { method: "post", path: "/notifiers/suspensions", summary: "Suspend the processing of a warned notifier's notices until a time; their notices are refused (403)", auth: ["admin"], body: "SuspendNotifier", ok: 201, errors: [409, 422] },
    async (c, { body }) => withStatus(await sanctionNotifier(c.env, c.get("actor"), "suspension", body), 201),
  )
  .op(
    {
      method: "get",
      path: "/notifier-sanctions",
      summary: "Warnings and suspensions, newest first (no reasons, no notifier)",
      auth: ["admin"],
      ok: 200,
      query: { limit: { default: 50, max: 200 }, enums: { kind: ["warning", "suspension"] } },
    },
    async (c, { query }) => listSanctions(c.env, c.get("actor"), { limit: query.limit, ...(query.kind ? { kind: query.kind } : {}) }),
  )
  .op({ method: "post", path: "/notifier-sanctions/:id/lift", summary: "End a suspension early (audited)", auth: ["admin"], body: "LiftSuspension", ok: 200, errors: [404, 409] }, async (c, { body }) =>
    liftSuspension(c.env, c.get("actor"), c.req.param("id"), body),
  )
  // Retention of closed cases' personal data, and a named person's data on request.
  .op({ method: "get", path: "/retention", summary: "How long the personal data of closed cases is kept (days; default 365)", auth: ["admin"], ok: 200 }, async (c) => getRetentionSettings(c.env.DB, c.get("actor").installationId))
  .op({ method: "put", path: "/retention", summary: "Set how long the personal data of closed cases is kept (184 to 3650 days; audited)", auth: ["admin"], body: "RetentionSettings", ok: 200, errors: [422] }, async (c, { body }) =>
    setRetentionSettings(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "post",
      path: "/personal-data/export",
      summary: "Export a named person's data (as reporter, subject owner, appellant), opened; audited with counts only",
      auth: ["admin"],
      body: "PersonalDataRequest",
      ok: 200,
      errors: [422, 503],
    },
    async (c, { body }) => exportPersonalData(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "post",
      path: "/personal-data/erase",
      summary: "Erase a named person's data in closed cases as retention does (cases still handled are held back and listed), then destroy their keys once nothing of theirs is held; audited with counts only",
      auth: ["admin"],
      body: "PersonalDataRequest",
      ok: 200,
      errors: [422, 503],
    },
    async (c, { body }) => erasePersonalData(c.env, c.get("actor"), body),
  );

/** `from` and `to` as ISO times (a date alone is its midnight UTC); 422 `complaints.period_invalid` otherwise. */
function complaintPeriod(from: string | undefined, to: string | undefined): { from: string; to: string } {
  const parse = (value: string | undefined) => (value && /^\d{4}-\d{2}-\d{2}/u.test(value) && !Number.isNaN(Date.parse(value)) ? new Date(value).toISOString() : null);
  const period = { from: parse(from), to: parse(to) };
  if (!period.from || !period.to || period.from >= period.to) {
    throw new AppError("complaints.period_invalid", "Give from and to as ISO dates or times, from before to (e.g. ?from=2026-01-01&to=2026-07-01).", { status: 422 });
  }
  return { from: period.from, to: period.to };
}
