// /api/v1/runs: create (Idempotency-Key), list, read with steps and waits, send event, terminate.
import { Hono } from "hono";
import { AppError } from "../errors";
import { requireScope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { decodeCursor, encodeCursor, idempotencyKey, parseBody } from "../http/validate";
import { createRun, getRunDetail, sendRunEvent, serializeRun, terminateRun } from "./runs";
import { listRunRows } from "./runs-queries";
import type { JsonObject, WorkflowAuthorityMode } from "./types";
import { RUN_STATES } from "./types";

export const runRoutes = new Hono<AppEnv>()
  .post("/runs", requireScope("admin"), async (c) => {
    const body = await parseBody<{ workflowVersionId: string; authorityMode: WorkflowAuthorityMode; input?: JsonObject; reportId?: string }>(c, schemas.CreateRun);
    const key = idempotencyKey(c.req.header("idempotency-key"));
    const { run, replayed } = await createRun(c.env, c.executionCtx as ExecutionContext, c.get("actor"), {
      workflowVersionId: body.workflowVersionId,
      authorityMode: body.authorityMode,
      input: body.input ?? {},
      ...(body.reportId ? { reportId: body.reportId } : {}),
      ...(key ? { idempotencyKey: key } : {}),
    });
    if (replayed) c.header("Idempotent-Replayed", "true");
    return c.json(serializeRun(run), replayed ? 200 : 201);
  })
  .get("/runs", requireScope("admin", "review"), async (c) => {
    const limit = Math.min(Math.max(Number(c.req.query("limit") ?? 50) || 50, 1), 200);
    const state = c.req.query("state");
    if (state !== undefined && !(RUN_STATES as readonly string[]).includes(state)) throw new AppError("request.invalid_state", "Unknown run state filter.", { status: 400 });
    const after = decodeCursor(c.req.query("cursor"), ["string", "string"]);
    const rows = await listRunRows(c.env.DB, c.get("actor").installationId, {
      limit: limit + 1,
      ...(after ? { before: { createdAt: String(after[0]), id: String(after[1]) } } : {}),
      ...(state ? { state } : {}),
      ...(c.req.query("workflowVersionId") ? { workflowVersionId: c.req.query("workflowVersionId")! } : {}),
    });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const nextCursor = rows.length > limit && last ? encodeCursor([last.createdAt, last.id]) : null;
    return c.json({ items: page.map(serializeRun), nextCursor });
  })
  .get("/runs/:id", requireScope("admin", "review"), async (c) => c.json(await getRunDetail(c.env, c.get("actor"), c.req.param("id"))))
  .post("/runs/:id/events", requireScope("admin"), async (c) => {
    const body = await parseBody<{ type: string; payload?: JsonObject }>(c, schemas.SendEvent);
    return c.json(await sendRunEvent(c.env, c.get("actor"), c.req.param("id"), { type: body.type, payload: body.payload ?? {} }), 202);
  })
  .post("/runs/:id/terminate", requireScope("admin"), async (c) => c.json(await terminateRun(c.env, c.get("actor"), c.req.param("id"))));
