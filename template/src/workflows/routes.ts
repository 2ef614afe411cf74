// /api/v1/workflows, /api/v1/workflow-versions and /api/v1/workflow-graphs/validate.
import { Hono } from "hono";
import { notFound } from "../errors";
import { requireScope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { parseBody } from "../http/validate";
import { validateWorkflowGraph } from "./validation";
import { createWorkflow, publishVersion, retireVersion, serializeVersion } from "./versions";
import { getVersionRow, getWorkflowRow, listVersionRows, listWorkflowRows } from "./versions-queries";

export const workflowRoutes = new Hono<AppEnv>()
  .post("/workflows", requireScope("admin"), async (c) => {
    const body = await parseBody<{ name: string; description?: string }>(c, schemas.CreateWorkflow);
    return c.json(await createWorkflow(c.env, c.get("actor"), body), 201);
  })
  .get("/workflows", requireScope("admin", "review"), async (c) => c.json({ items: await listWorkflowRows(c.env.DB, c.get("actor").installationId) }))
  .get("/workflows/:id", requireScope("admin", "review"), async (c) => {
    const { installationId } = c.get("actor");
    const workflow = await getWorkflowRow(c.env.DB, installationId, c.req.param("id"));
    if (!workflow) throw notFound("workflow");
    const versions = await listVersionRows(c.env.DB, installationId, workflow.id);
    return c.json({ ...workflow, versions: versions.map(({ graphJson: _graph, ...version }) => version) });
  })
  .post("/workflows/:id/versions", requireScope("admin"), async (c) => {
    const body = await parseBody<{ graph: unknown }>(c, schemas.PublishVersion);
    return c.json(await publishVersion(c.env, c.get("actor"), c.req.param("id"), body.graph), 201);
  })
  .get("/workflow-versions/:id", requireScope("admin", "review"), async (c) => {
    const row = await getVersionRow(c.env.DB, c.get("actor").installationId, c.req.param("id"));
    if (!row) throw notFound("workflow_version");
    return c.json(serializeVersion(row));
  })
  .post("/workflow-versions/:id/retire", requireScope("admin"), async (c) => c.json(await retireVersion(c.env, c.get("actor"), c.req.param("id"))))
  .post("/workflow-graphs/validate", requireScope("admin", "review"), async (c) => {
    const body = await parseBody<{ graph: unknown }>(c, schemas.ValidateGraph);
    const result = validateWorkflowGraph(body.graph);
    return c.json(result.ok ? { valid: true, errors: [], forkJoins: result.graph.plan.forkJoins } : { valid: false, errors: result.errors });
  });
