// /api/v1 reports, cases, triggers, queues, tasks, appeals and data keys.
import { Hono } from "hono";
import { notFound } from "../errors";
import { requireScope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { decodeCursor, encodeCursor, idempotencyKey, parseBody } from "../http/validate";
import { fileAppeal, readAppeal, resolveAppeal, type AppealInput } from "./appeals";
import { createQueue, getQueueRow, listQueues, queueStats } from "./queues";
import { rotateDataKey } from "./report-crypto";
import { intakeReport, readReport, reportSummary, type ReportInput } from "./reports";
import { normalizeCategory } from "./taxonomy";
import { reportTimeline } from "./timeline";
import { getCaseRow, listReportRows } from "./reports-queries";
import { claimNextTask, claimTask, completeTask, getTask, listQueueTasks, releaseTask } from "./tasks";
import { createTrigger, listTriggers, setTriggerEnabled, type TriggerInput } from "./triggers";

export const caseRoutes = new Hono<AppEnv>()
  .post("/reports", requireScope("reports:write"), async (c) => {
    const body = await parseBody<ReportInput>(c, schemas.CreateReport);
    const result = await intakeReport(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body, idempotencyKey(c.req.header("idempotency-key")));
    if (result.replayed) c.header("Idempotent-Replayed", "true");
    return c.json({ ...result.report, runs: result.runs }, result.replayed ? 200 : 201);
  })
  .get("/reports", requireScope("review", "admin"), async (c) => {
    const limit = Math.min(Math.max(Number(c.req.query("limit") ?? 50) || 50, 1), 200);
    const after = decodeCursor(c.req.query("cursor"), ["string", "string"]);
    const rows = await listReportRows(c.env.DB, c.get("actor").installationId, {
      limit: limit + 1, ...(c.req.query("caseId") ? { caseId: c.req.query("caseId")! } : {}), ...(after ? { before: { createdAt: String(after[0]), id: String(after[1]) } } : {}),
      ...(c.req.query("subjectId") ? { subjectId: c.req.query("subjectId")! } : {}),
      ...(c.req.query("category") ? { category: normalizeCategory(c.req.query("category")!) ?? c.req.query("category")! } : {}),
    });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return c.json({ items: page.map(reportSummary), nextCursor: rows.length > limit && last ? encodeCursor([last.createdAt, last.id]) : null });
  })
  .get("/reports/:id", requireScope("review", "admin"), async (c) => c.json(await readReport(c.env, c.get("actor"), c.req.param("id"))))
  .get("/reports/:id/timeline", requireScope("review", "admin"), async (c) => c.json(await reportTimeline(c.env, c.get("actor"), c.req.param("id"))))
  .get("/cases/:id", requireScope("review", "admin"), async (c) => {
    const row = await getCaseRow(c.env.DB, c.get("actor").installationId, c.req.param("id"));
    if (!row) throw notFound("case");
    const reports = await listReportRows(c.env.DB, c.get("actor").installationId, { limit: 200, caseId: row.id });
    return c.json({ ...row, reports: reports.map(reportSummary) });
  })
  .post("/triggers", requireScope("admin"), async (c) => c.json(await createTrigger(c.env, c.get("actor"), await parseBody<TriggerInput>(c, schemas.CreateTrigger)), 201))
  .get("/triggers", requireScope("admin"), async (c) => c.json({ items: await listTriggers(c.env, c.get("actor")) }))
  .post("/triggers/:id/enable", requireScope("admin"), async (c) => c.json(await setTriggerEnabled(c.env, c.get("actor"), c.req.param("id"), true)))
  .post("/triggers/:id/disable", requireScope("admin"), async (c) => c.json(await setTriggerEnabled(c.env, c.get("actor"), c.req.param("id"), false)))
  .post("/queues", requireScope("admin"), async (c) => c.json(await createQueue(c.env, c.get("actor"), await parseBody(c, schemas.CreateQueue)), 201))
  .get("/queues", requireScope("review", "admin"), async (c) => c.json({ items: await listQueues(c.env, c.get("actor")) }))
  .get("/queues/:id", requireScope("review", "admin"), async (c) => {
    const row = await getQueueRow(c.env.DB, c.get("actor").installationId, c.req.param("id"));
    if (!row) throw notFound("queue");
    return c.json(row);
  })
  .get("/queues/:id/tasks", requireScope("review", "admin"), async (c) => c.json(await listQueueTasks(c.env, c.get("actor"), c.req.param("id"), {
    ...(c.req.query("state") ? { state: c.req.query("state")! } : {}),
    ...(c.req.query("limit") ? { limit: Number(c.req.query("limit")) || 50 } : {}),
    ...(c.req.query("cursor") ? { cursor: c.req.query("cursor")! } : {}),
  })))
  .get("/queues/:id/stats", requireScope("review", "admin"), async (c) => c.json(await queueStats(c.env, c.get("actor"), c.req.param("id"))))
  .post("/queues/:id/next", requireScope("review"), async (c) => {
    const task = await claimNextTask(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.ClaimTask));
    return task ? c.json(task) : c.json({ error: { code: "queue.empty", message: "No open task in this queue." } }, 404);
  })
  .get("/tasks/:id", requireScope("review", "admin"), async (c) => c.json(await getTask(c.env, c.get("actor"), c.req.param("id"))))
  .post("/tasks/:id/claim", requireScope("review"), async (c) => c.json(await claimTask(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.ClaimTask))))
  .post("/tasks/:id/release", requireScope("review"), async (c) => c.json(await releaseTask(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.ReleaseTask))))
  .post("/tasks/:id/complete", requireScope("review"), async (c) => c.json(await completeTask(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.CompleteTask))))
  .post("/appeals", requireScope("reports:write"), async (c) => {
    const body = await parseBody<AppealInput>(c, schemas.CreateAppeal);
    const result = await fileAppeal(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body, idempotencyKey(c.req.header("idempotency-key")));
    if (result.replayed) c.header("Idempotent-Replayed", "true");
    return c.json({ ...result.appeal, runs: result.runs }, result.replayed ? 200 : 201);
  })
  .get("/appeals/:id", requireScope("review", "admin"), async (c) => c.json(await readAppeal(c.env, c.get("actor"), c.req.param("id"))))
  .post("/appeals/:id/resolve", requireScope("review"), async (c) => c.json(await resolveAppeal(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.ResolveAppeal))))
  .post("/data-keys/rotate", requireScope("admin"), async (c) => c.json(await rotateDataKey(c.env, c.get("actor").installationId), 201));
