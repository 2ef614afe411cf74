// /api/v1/workflow-templates: the example workflows (examples/catalog.json) as a gallery, and "use".
import { routes } from "../http/route";
import { listTemplates, useTemplate } from "./templates";

export const workflowTemplateRoutes = routes()
  .op({ method: "get", path: "/workflow-templates", summary: "The template gallery: each example workflow with its graph, when to use it, and whether this installation has what it names", auth: ["admin", "review"], ok: 200 }, async (c) =>
    listTemplates(c.env.DB, c.get("actor").installationId),
  )
  .op(
    {
      method: "post",
      path: "/workflow-templates/use",
      summary: "Publish a template as a new workflow (422 lists what it names that is missing; 409 when the name is taken)",
      auth: ["admin"],
      body: "UseWorkflowTemplate",
      ok: 201,
      errors: [404, 409, 422],
    },
    async (c, { body }) => useTemplate(c.env, c.get("actor"), body.template, body.name === undefined ? {} : { name: body.name }),
  );
