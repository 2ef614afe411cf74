// The template gallery: each example workflow of GET /workflow-templates with a
// picture of its graph (a static SVG drawn here from the JSON: no React Flow, so the page stays
// light), when to use it, what it names and whether this installation has it, and "Use this",
// which publishes it as a new workflow and opens it in the editor. Its own chunk.
import { useState, type FormEvent } from "react";
import { ApiError, server, type ApiResponse, type Graph } from "../api";
import { autoLayout, KIND_INFO, type NodeKind } from "../graph/kinds";
import { useResource } from "../hooks";
import { Link, useNavigate } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { ErrorNote, Loading, PageTitle } from "../ui";

type Template = ApiResponse<"get", "/workflow-templates">["items"][number];
type ReferenceType = Template["references"][number]["type"];

/** Where each kind of reference is created in the console. */
const CREATE_IN: Record<ReferenceType, { label: string; to: string }> = {
  queue: { label: "queue", to: "/settings/queues" },
  action_type: { label: "action type", to: "/settings/action-types" },
  ai_provider: { label: "AI provider", to: "/settings/ai-providers" },
  policy_version: { label: "policy", to: "/settings/policies" },
  webhook_endpoint: { label: "webhook endpoint", to: "/settings/webhooks" },
  component_version: { label: "component version", to: "/workflows" },
  workflow_version: { label: "workflow version", to: "/workflows" },
};

// Node boxes in the layout's coordinates (autoLayout places columns 280 apart, rows 150 apart).
const BOX = { w: 200, h: 64 };
const GROUP_TONE: Record<string, string> = { Flow: "var(--muted)", Automation: "var(--info)", People: "var(--warn)", Effects: "var(--bad)" };

/** A static drawing of a graph: nodes as labelled boxes, edges as curves named by their port. */
export function GraphPicture({ graph, title }: { graph: Graph; title: string }) {
  const positions = autoLayout(graph);
  const xs = Object.values(positions).map((p) => p.x);
  const ys = Object.values(positions).map((p) => p.y);
  const width = Math.max(...xs, 0) + BOX.w + 40;
  const height = Math.max(...ys, 0) + BOX.h + 40;
  const label = (kind: string) => KIND_INFO[kind as NodeKind]?.label ?? kind;
  const summary = `${title}: ${graph.nodes.length} nodes (${graph.nodes.map((n) => `${label(n.kind)} ${n.id}`).join(", ")}).`;
  return (
    <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={summary} style={{ width: "100%", maxHeight: "16rem", display: "block", background: "var(--bg)", borderRadius: "var(--radius)" }} data-testid="graph-picture">
      <defs>
        <marker id="gallery-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L10,5 L0,10 z" style={{ fill: "var(--muted)" }} />
        </marker>
      </defs>
      {graph.edges.map((e) => {
        const from = positions[e.from.nodeId];
        const to = positions[e.to.nodeId];
        if (!from || !to) return null;
        const x1 = from.x + BOX.w;
        const y1 = from.y + BOX.h / 2;
        const x2 = to.x;
        const y2 = to.y + BOX.h / 2;
        const bend = Math.max(40, Math.abs(x2 - x1) / 2);
        return (
          <g key={`${e.from.nodeId}:${e.from.port}->${e.to.nodeId}`}>
            <path d={`M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`} fill="none" style={{ stroke: "var(--muted)" }} strokeWidth={2} markerEnd="url(#gallery-arrow)" />
            {/* Named by its port next to the node it enters: edges leaving one node part there. */}
            {e.from.port !== "success" ? (
              <text x={x2 - 10} y={y2 - 8} fontSize={14} textAnchor="end" style={{ fill: "var(--muted)" }}>
                {e.from.port.replace(/_/gu, " ")}
              </text>
            ) : null}
          </g>
        );
      })}
      {graph.nodes.map((node) => {
        const p = positions[node.id] ?? { x: 0, y: 0 };
        const group = KIND_INFO[node.kind as NodeKind]?.group ?? "Flow";
        return (
          <g key={node.id}>
            <rect x={p.x} y={p.y} width={BOX.w} height={BOX.h} rx={8} style={{ fill: "var(--surface)", stroke: GROUP_TONE[group] ?? "var(--border)" }} strokeWidth={3} />
            <text x={p.x + 12} y={p.y + 26} fontSize={17} fontWeight={600} style={{ fill: "var(--text)" }}>
              {label(node.kind)}
            </text>
            <text x={p.x + 12} y={p.y + 48} fontSize={15} style={{ fill: "var(--muted)", fontFamily: "var(--mono)" }}>
              {node.id.length > 22 ? `${node.id.slice(0, 21)}…` : node.id}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

function MissingList({ details }: { details: Array<{ path: string; type?: ReferenceType | null; name?: string | null; message: string }> }) {
  return (
    <ul className="plain-list" data-testid="missing-references">
      {details.map((d) => {
        const where = d.type ? CREATE_IN[d.type] : undefined;
        return (
          <li key={d.path}>
            {d.type && d.name ? (
              <>
                No {where?.label ?? d.type} <code>{d.name}</code> yet.{" "}
              </>
            ) : (
              <>{d.message} </>
            )}
            {where ? <Link to={where.to}>Create it under {where.to.startsWith("/settings") ? "Settings" : "Workflows"}</Link> : null}
          </li>
        );
      })}
    </ul>
  );
}

function TemplateCard({ template, canAdmin }: { template: Template; canAdmin: boolean }) {
  const navigate = useNavigate();
  const [name, setName] = useState(template.title);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const headingId = `template-${template.id}`;
  const use = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const used = await server.post("/workflow-templates/use", { template: template.id, ...(name.trim() && name.trim() !== template.title ? { name: name.trim() } : {}) });
      navigate(`/workflows/${encodeURIComponent(used.workflow.id)}/edit?from=${encodeURIComponent(used.version.id)}`);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  const missing =
    error instanceof ApiError && error.code === "workflow_template.references_missing" && Array.isArray(error.details) ? (error.details as Array<{ path: string; type?: ReferenceType | null; name?: string | null; message: string }>) : null;
  return (
    <li className="card" data-testid="template" data-template={template.id}>
      <h2 id={headingId} className="h3">
        {template.title}
      </h2>
      <GraphPicture graph={template.graph as Graph} title={`Graph of ${template.title}`} />
      <p>{template.whenToUse}</p>
      <h3 className="h3">What it names</h3>
      {template.references.length === 0 ? (
        <p className="muted">Nothing: it publishes as it is.</p>
      ) : (
        <ul className="plain-list">
          {template.references.map((r) => (
            <li key={r.path}>
              {r.exists ? <span className="badge tone-ok">exists</span> : <span className="badge tone-warn">missing</span>} {CREATE_IN[r.type].label} <code>{r.name}</code>
              {!r.exists && canAdmin ? (
                <>
                  {" "}
                  · <Link to={CREATE_IN[r.type].to}>create it</Link>
                </>
              ) : null}
            </li>
          ))}
        </ul>
      )}
      {template.needs.length > 0 ? <p className="help">{template.needs.join(" ")}</p> : null}
      <p className="muted small">
        <code>{template.file}</code> · {template.nodeCount} nodes
      </p>
      {canAdmin ? (
        <form onSubmit={(e) => void use(e)} className="inline-form" aria-label={`Use ${template.title}`}>
          <div className="field">
            <label htmlFor={`${headingId}-name`}>Name of the new workflow</label>
            <input id={`${headingId}-name`} value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} autoComplete="off" />
          </div>
          {missing ? (
            <div className="note note-warn" role="alert">
              <p>{(error as ApiError).message}</p>
              <MissingList details={missing} />
            </div>
          ) : (
            <ErrorNote error={error} />
          )}
          <button type="submit" className="btn btn-primary" disabled={busy || name.trim() === ""} data-testid="use-template">
            {busy ? "Publishing…" : "Use this"}
          </button>
        </form>
      ) : null}
    </li>
  );
}

export function GalleryPage() {
  const canAdmin = useCan("admin");
  const { user } = useSession();
  const templates = useResource((signal) => server.get("/workflow-templates", { signal }), []);
  return (
    <section data-ready={templates.data ? "true" : undefined}>
      <PageTitle
        subtitle={
          <>
            Example workflows to start from. “Use this” publishes one as a new workflow of yours and opens it in the editor; every template is also a file under <code>examples/</code> of your project.
          </>
        }
      >
        Workflow templates
      </PageTitle>
      {!canAdmin ? (
        <p className="note note-info">{cannotReason(user.role, "admin")}</p>
      ) : (
        <p>
          <Link to="/getting-started">Getting started: the first-run checklist</Link>
        </p>
      )}
      <ErrorNote error={templates.error} retry={templates.reload} />
      {templates.loading && !templates.data ? <Loading /> : null}
      {templates.data ? (
        <ul className="cards dashboard-grid" style={{ padding: 0 }} aria-label="Templates">
          {templates.data.items.map((t) => (
            <TemplateCard key={t.id} template={t} canAdmin={canAdmin} />
          ))}
        </ul>
      ) : null}
    </section>
  );
}
