// /api/v1/runs: create (Idempotency-Key), list, read with steps and waits, send event, terminate.
import { queueLimitOf } from "../auth";
import { routes, withStatus } from "../http/route";
import { encodeCursor, idempotencyKey } from "../http/validate";
import { assertManualRunAllowed } from "./run-authority";
import { createRun, getRunContent, getRunDetail, sendRunEvent, serializeRun } from "./runs";
import { terminateRun } from "./run-end";
import { repairRun } from "./repair";
import { createRunOperation, getRunOperation } from "./run-operations";
import { listRunRows } from "./runs-queries";
import type { JsonObject } from "./types";
import { RUN_STATES } from "./types";

export const runRoutes = routes()
  .op(
    {
      method: "post",
      path: "/runs",
      summary: "Start a run; Idempotency-Key makes a retry return the first run (the prefixes trigger:, backtest: and linked: are the platform's); a version a trigger starts runs at most in that trigger's mode",
      auth: ["admin"],
      body: "CreateRun",
      ok: 201,
      errors: [403, 404, 409, 413, 422, 503],
      headers: ["Idempotency-Key"],
    },
    async (c, { body }) => {
      const key = idempotencyKey(c.req.header("idempotency-key"));
      await assertManualRunAllowed(c.env.DB, c.get("actor"), { workflowVersionId: body.workflowVersionId, authorityMode: body.authorityMode, ...(key ? { idempotencyKey: key } : {}) });
      const { run, replayed } = await createRun(c.env, c.executionCtx as ExecutionContext, c.get("actor"), {
        workflowVersionId: body.workflowVersionId,
        authorityMode: body.authorityMode,
        input: (body.input ?? {}) as JsonObject,
        ...(body.reportId ? { reportId: body.reportId } : {}),
        ...(key ? { idempotencyKey: key } : {}),
      });
      if (replayed) c.header("Idempotent-Replayed", "true");
      return withStatus(serializeRun(run), replayed ? 200 : 201);
    },
  )
  .op(
    {
      method: "get",
      path: "/runs",
      summary: "List runs, newest first, with a cursor",
      auth: ["admin", "review"],
      ok: 200,
      query: { limit: { default: 50, max: 200 }, cursor: ["string", "string"], enums: { state: RUN_STATES }, strings: ["workflowVersionId"] },
    },
    async (c, { query }) => {
      const rows = await listRunRows(c.env.DB, c.get("actor").installationId, {
        limit: query.limit + 1,
        queues: queueLimitOf(c.get("actor")),
        ...(query.cursor ? { before: { createdAt: String(query.cursor[0]), id: String(query.cursor[1]) } } : {}),
        ...(query.state ? { state: query.state } : {}),
        ...(query.workflowVersionId ? { workflowVersionId: query.workflowVersionId } : {}),
      });
      const page = rows.slice(0, query.limit);
      const last = page.at(-1);
      return { items: page.map(serializeRun), nextCursor: rows.length > query.limit && last ? encodeCursor([last.createdAt, last.id]) : null };
    },
  )
  .op({ method: "get", path: "/runs/:id", summary: "Read a run with its steps and waits", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getRunDetail(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "get", path: "/runs/:id/content", summary: "Open the sealed outputs of the run's steps that read content (the access is audited)", auth: ["personal_data:read", "admin"], ok: 200, errors: [404] }, async (c) =>
    getRunContent(c.env, c.get("actor"), c.req.param("id")),
  )
  .op({ method: "post", path: "/runs/:id/events", summary: "Send an event to the run's waits for that type (recorded before it is sent)", auth: ["admin"], body: "SendEvent", ok: 202, errors: [404, 409, 413] }, async (c, { body }) =>
    sendRunEvent(c.env, c.get("actor"), c.req.param("id"), { type: body.type, payload: (body.payload ?? {}) as JsonObject }),
  )
  .op({ method: "post", path: "/runs/:id/terminate", summary: "Terminate a run", auth: ["admin"], ok: 200, errors: [404, 409] }, async (c) => terminateRun(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/runs/:id/repair",
      summary: "Repair a run in repair_required or failed: retry the failed node, route it to a port, or migrate to another version; it continues in a new instance",
      auth: ["admin"],
      body: "RepairRun",
      ok: 200,
      errors: [404, 409, 422, 503],
    },
    async (c, { body }) =>
      repairRun(c.env, c.executionCtx as ExecutionContext, c.get("actor"), c.req.param("id"), {
        action: body.action,
        reason: body.reason,
        ...(body.port ? { port: body.port } : {}),
        ...(body.workflowVersionId ? { workflowVersionId: body.workflowVersionId } : {}),
      }),
  )
  .op(
    {
      method: "post",
      path: "/run-operations",
      summary: "Terminate, retry or migrate the runs matching a filter, in the background; dryRun answers the count and a sample",
      auth: ["admin"],
      body: "CreateRunOperation",
      ok: 202,
      errors: [404, 409, 422],
      headers: ["Idempotency-Key"],
    },
    async (c, { body }) => {
      const key = idempotencyKey(c.req.header("idempotency-key"));
      const result = await createRunOperation(
        c.env,
        c.get("actor"),
        {
          action: body.action,
          filter: { ...(body.filter ?? {}) },
          reason: body.reason,
          ...(body.workflowVersionId ? { workflowVersionId: body.workflowVersionId } : {}),
          ...(body.dryRun ? { dryRun: true } : {}),
        },
        key,
      );
      if (result.dryRun) return withStatus(result, 200);
      if (result.replayed) c.header("Idempotent-Replayed", "true");
      return withStatus(result.operation, result.replayed ? 200 : 202);
    },
  )
  .op({ method: "get", path: "/run-operations/:id", summary: "A bulk run operation and its progress", auth: ["admin", "read"], ok: 200, errors: [404] }, async (c) => getRunOperation(c.env, c.get("actor"), c.req.param("id")));
