// /api/v1/workflows, /api/v1/workflow-versions and /api/v1/workflow-graphs/validate.
import { notFound } from "../errors";
import { routes } from "../http/route";
import { validateWorkflowGraph } from "./validation";
import { createWorkflow, publishVersion, retireVersion, serializeVersion } from "./versions";
import { getVersionRow, getWorkflowRow, listVersionRows, listWorkflowRows } from "./versions-queries";

export const workflowRoutes = routes()
  .op({ method: "post", path: "/workflows", summary: "Create a workflow", auth: ["admin"], body: "CreateWorkflow", ok: 201, errors: [409] }, async (c, { body }) => createWorkflow(c.env, c.get("actor"), body))
  .op({ method: "get", path: "/workflows", summary: "List workflows", auth: ["admin", "review"], ok: 200 }, async (c) => ({ items: await listWorkflowRows(c.env.DB, c.get("actor").installationId) }))
  .op({ method: "get", path: "/workflows/:id", summary: "Read a workflow with its versions", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => {
    const { installationId } = c.get("actor");
    const workflow = await getWorkflowRow(c.env.DB, installationId, c.req.param("id"));
    if (!workflow) throw notFound("workflow");
    const versions = await listVersionRows(c.env.DB, installationId, workflow.id);
    return { ...workflow, versions: versions.map(({ graphJson: _graph, ...version }) => version) };
  })
  .op(
    { method: "post", path: "/workflows/:id/versions", summary: "Publish a version: validate, compile and store its artifact (422 lists every graph problem)", auth: ["admin"], body: "PublishVersion", ok: 201, errors: [404, 422] },
    async (c, { body }) => publishVersion(c.env, c.get("actor"), c.req.param("id"), body.graph, body.steps ? { steps: body.steps } : {}),
  )
  .op({ method: "get", path: "/workflow-versions/:id", summary: "Read a version with its graph and artifact digest", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => {
    const row = await getVersionRow(c.env.DB, c.get("actor").installationId, c.req.param("id"));
    if (!row) throw notFound("workflow_version");
    return serializeVersion(row);
  })
  .op({ method: "post", path: "/workflow-versions/:id/retire", summary: "Retire a version: no new runs start on it", auth: ["admin"], ok: 200, errors: [404] }, async (c) => retireVersion(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "post", path: "/workflow-graphs/validate", summary: "Check a graph without publishing it", auth: ["admin", "review"], body: "ValidateGraph", ok: 200 }, async (_c, { body }) => {
    const result = validateWorkflowGraph(body.graph, { fresh: true });
    return result.ok ? { valid: true as const, errors: [], forkJoins: result.graph.plan.forkJoins } : { valid: false as const, errors: result.errors };
  });
