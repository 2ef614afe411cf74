// The comparison of two versions of a workflow: nodes added, removed and changed (kind, config,
// input mapping, error port, timeouts) and edges added and removed, with both graphs side by side.
import { get, type Graph, type GraphNode, type WorkflowVersion } from "../../api";
import { KIND_INFO, type NodeKind } from "../../graph/kinds";
import { GraphView } from "../../graph/view";
import { useResource } from "../../hooks";
import { Link, useSearchParam } from "../../router";
import { ErrorNote, Loading, PageTitle, shortId } from "../../ui";

function nodeDiff(a: GraphNode, b: GraphNode): string[] {
  const changes: string[] = [];
  if (a.kind !== b.kind) changes.push(`kind ${a.kind} → ${b.kind}`);
  const keys = new Set([...Object.keys(a.config ?? {}), ...Object.keys(b.config ?? {})]);
  for (const key of keys) {
    const x = JSON.stringify(a.config?.[key]);
    const y = JSON.stringify(b.config?.[key]);
    if (x !== y) changes.push(`config.${key}: ${x ?? "—"} → ${y ?? "—"}`);
  }
  const mapKeys = new Set([...Object.keys(a.inputMapping ?? {}), ...Object.keys(b.inputMapping ?? {})]);
  for (const key of mapKeys) if (a.inputMapping?.[key] !== b.inputMapping?.[key]) changes.push(`inputMapping.${key}: ${a.inputMapping?.[key] ?? "—"} → ${b.inputMapping?.[key] ?? "—"}`);
  if (a.errorPort !== b.errorPort) changes.push(`errorPort: ${a.errorPort ?? "—"} → ${b.errorPort ?? "—"}`);
  if (JSON.stringify(a.timeoutPolicy) !== JSON.stringify(b.timeoutPolicy)) changes.push(`timeoutPolicy: ${JSON.stringify(a.timeoutPolicy ?? null)} → ${JSON.stringify(b.timeoutPolicy ?? null)}`);
  return changes;
}

export function diffGraphs(a: Graph, b: Graph) {
  const before = new Map(a.nodes.map((n) => [n.id, n]));
  const after = new Map(b.nodes.map((n) => [n.id, n]));
  const added = b.nodes.filter((n) => !before.has(n.id));
  const removed = a.nodes.filter((n) => !after.has(n.id));
  const changed = b.nodes
    .filter((n) => before.has(n.id))
    .map((n) => ({ id: n.id, changes: nodeDiff(before.get(n.id)!, n) }))
    .filter((c) => c.changes.length > 0);
  const key = (e: Graph["edges"][number]) => `${e.from.nodeId}.${e.from.port} → ${e.to.nodeId}`;
  const edgesBefore = new Set(a.edges.map(key));
  const edgesAfter = new Set(b.edges.map(key));
  return {
    added,
    removed,
    changed,
    edgesAdded: [...edgesAfter].filter((e) => !edgesBefore.has(e)),
    edgesRemoved: [...edgesBefore].filter((e) => !edgesAfter.has(e)),
  };
}

export function ComparePage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const a = useSearchParam("a");
  const b = useSearchParam("b");
  const left = useResource(a ? (signal) => get<WorkflowVersion>(`/workflow-versions/${encodeURIComponent(a)}`, signal) : null, [a]);
  const right = useResource(b ? (signal) => get<WorkflowVersion>(`/workflow-versions/${encodeURIComponent(b)}`, signal) : null, [b]);
  if (!a || !b)
    return (
      <section>
        <PageTitle>Compare versions</PageTitle>
        <p>
          Choose two versions on the <Link to={`/workflows/${encodeURIComponent(id)}`}>workflow page</Link>.
        </p>
      </section>
    );
  if (left.error || right.error)
    return (
      <section>
        <PageTitle>Compare versions</PageTitle>
        <ErrorNote error={left.error ?? right.error} />
      </section>
    );
  if (!left.data || !right.data) return <Loading />;
  const diff = diffGraphs(left.data.graph, right.data.graph);
  const addedIds = new Set(diff.added.map((n) => n.id));
  const changedIds = new Set(diff.changed.map((n) => n.id));
  const removedIds = new Set(diff.removed.map((n) => n.id));
  const label = (n: GraphNode) => `${n.id} (${KIND_INFO[n.kind as NodeKind]?.label ?? n.kind})`;
  const same = !diff.added.length && !diff.removed.length && !diff.changed.length && !diff.edgesAdded.length && !diff.edgesRemoved.length;
  return (
    <section data-ready="true">
      <PageTitle subtitle={<Link to={`/workflows/${encodeURIComponent(id)}`}>{left.data.workflowName}</Link>}>{`Compare v${left.data.version} and v${right.data.version}`}</PageTitle>
      {same ? (
        <p className="note note-info">The two versions have the same graph.</p>
      ) : (
        <div className="diff">
          {diff.added.length ? (
            <>
              <h2 className="h3">Nodes added in v{right.data.version}</h2>
              <ul>
                {diff.added.map((n) => (
                  <li key={n.id} className="diff-add">
                    + {label(n)}
                  </li>
                ))}
              </ul>
            </>
          ) : null}
          {diff.removed.length ? (
            <>
              <h2 className="h3">Nodes removed</h2>
              <ul>
                {diff.removed.map((n) => (
                  <li key={n.id} className="diff-remove">
                    − {label(n)}
                  </li>
                ))}
              </ul>
            </>
          ) : null}
          {diff.changed.length ? (
            <>
              <h2 className="h3">Nodes changed</h2>
              <ul>
                {diff.changed.map((c) => (
                  <li key={c.id} className="diff-change">
                    <strong>{c.id}</strong>
                    <ul>
                      {c.changes.map((ch) => (
                        <li key={ch}>
                          <code>{ch}</code>
                        </li>
                      ))}
                    </ul>
                  </li>
                ))}
              </ul>
            </>
          ) : null}
          {diff.edgesAdded.length || diff.edgesRemoved.length ? (
            <>
              <h2 className="h3">Edges</h2>
              <ul>
                {diff.edgesAdded.map((e) => (
                  <li key={`+${e}`} className="diff-add">
                    + {e}
                  </li>
                ))}
                {diff.edgesRemoved.map((e) => (
                  <li key={`-${e}`} className="diff-remove">
                    − {e}
                  </li>
                ))}
              </ul>
            </>
          ) : null}
        </div>
      )}
      <p className="help">In the drawings: added nodes have a green border, changed ones amber, removed ones a dashed red border.</p>
      <div className="compare-grid">
        <div>
          <h2 className="h3">
            v{left.data.version} <span className="muted small">{shortId(left.data.id)}</span>
          </h2>
          <GraphView graph={left.data.graph} height={360} label={`Version ${left.data.version}`} extra={(nid) => (removedIds.has(nid) ? { className: "diff-node-removed" } : changedIds.has(nid) ? { className: "diff-node-changed" } : {})} />
        </div>
        <div>
          <h2 className="h3">
            v{right.data.version} <span className="muted small">{shortId(right.data.id)}</span>
          </h2>
          <GraphView graph={right.data.graph} height={360} label={`Version ${right.data.version}`} extra={(nid) => (addedIds.has(nid) ? { className: "diff-node-added" } : changedIds.has(nid) ? { className: "diff-node-changed" } : {})} />
        </div>
      </div>
    </section>
  );
}
