// The visual workflow editor: a palette of the 15 node kinds, ports as handles, a config panel per
// kind, the server's validator run as you type (problems pinned to their node and field through the
// error path $.nodes[i]…), drafts kept in this browser, and publish.
import { applyNodeChanges, Background, Controls, MiniMap, ReactFlow, ReactFlowProvider, useReactFlow, type Connection, type EdgeChange, type NodeChange } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent } from "react";
import { api, ApiError, get, post, type Graph, type GraphNode, type ValidationProblem, type Workflow, type WorkflowVersion } from "../api";
import { ConfigPanel, type Lookups } from "../graph/config-panel";
import { nodeTypes, type FlowNode } from "../graph/flow-node";
import { autoLayout, cleanGraph, editorSemantics, KIND_INFO, newGraph, newNode, NODE_KINDS, pinProblems, portsOf, uniqueId, type NodeKind } from "../graph/kinds";
import { edgeId, toFlowEdges } from "../graph/view";
import { useDebounced, useResource } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { ErrorNote, Loading, PageTitle, useToast } from "../ui";
import { type Draft, draftKey, type Positions, positionsKey, readJson, writeJson } from "./editor/drafts";
import { EMPTY_LOOKUPS, loadLookups } from "./editor/lookups";
import { Palette } from "./editor/palette";

function Editor({ workflow, base, canEdit, canValidate }: { workflow: Workflow; base: WorkflowVersion | null; canEdit: boolean; canValidate: boolean }) {
  const navigate = useNavigate();
  const toast = useToast();
  const flow = useReactFlow();
  const restored = useRef<Draft | null>(base ? null : readJson<Draft>(draftKey(workflow.id)));
  const initial = useMemo(() => {
    if (restored.current) return restored.current;
    const graph = base?.graph ?? newGraph();
    const saved = readJson<Positions>(positionsKey(workflow.id)) ?? {};
    const layout = autoLayout(graph);
    return { nodes: graph.nodes, edges: graph.edges, positions: Object.fromEntries(graph.nodes.map((n) => [n.id, saved[n.id] ?? layout[n.id]!])), basedOn: base?.id ?? null, savedAt: "" };
  }, [base, workflow.id]);

  const [rfNodes, setRfNodes] = useState<FlowNode[]>(() => initial.nodes.map((node) => ({ id: node.id, type: "workflow", position: initial.positions[node.id] ?? { x: 0, y: 0 }, data: { node } })));
  const [edges, setEdges] = useState<Graph["edges"]>(initial.edges);
  const [selected, setSelected] = useState<string | null>(null);
  const [fitAtStart] = useState(() => initial.nodes.length > 0);
  const [dirty, setDirty] = useState(!!restored.current);
  const [lookups, setLookups] = useState<Lookups>(EMPTY_LOOKUPS);
  const [validation, setValidation] = useState<{ graph: Graph; valid: boolean; problems: ValidationProblem[] } | null>(null);
  const [validating, setValidating] = useState(false);
  const [validateError, setValidateError] = useState<unknown>(null);
  const [publishing, setPublishing] = useState(false);
  const [publishError, setPublishError] = useState<unknown>(null);

  useEffect(() => {
    const controller = new AbortController();
    loadLookups(controller.signal).then(setLookups, () => undefined);
    return () => controller.abort();
  }, []);

  const graphNodes = rfNodes.map((n) => n.data.node);
  // A new version keeps the semantics of the version it is based on; a new workflow gets the current one.
  const semantics = editorSemantics(base);
  const graph: Graph = useMemo(
    () =>
      cleanGraph(
        rfNodes.map((n) => n.data.node),
        edges,
        semantics,
      ),
    [rfNodes, edges, semantics],
  );
  const graphJson = JSON.stringify(graph);
  const debounced = useDebounced(graphJson, 300);

  // The server's validator, as you type (debounced); the answer is pinned to the graph it checked.
  useEffect(() => {
    if (!canValidate) return;
    const checked = JSON.parse(debounced) as Graph;
    const controller = new AbortController();
    setValidating(true);
    api<{ valid: boolean; errors: ValidationProblem[] }>("/workflow-graphs/validate", { method: "POST", body: { graph: checked }, signal: controller.signal }).then(
      (result) => {
        if (controller.signal.aborted) return;
        setValidation({ graph: checked, valid: result.valid, problems: result.errors });
        setValidateError(null);
        setValidating(false);
      },
      (error: unknown) => {
        if (controller.signal.aborted) return;
        setValidateError(error);
        setValidating(false);
      },
    );
    return () => controller.abort();
  }, [debounced, canValidate]);

  // Keep the draft in this browser: leaving the page loses nothing.
  useEffect(() => {
    if (!dirty || !canEdit) return;
    const positions = Object.fromEntries(rfNodes.map((n) => [n.id, n.position]));
    writeJson(draftKey(workflow.id), { nodes: rfNodes.map((n) => n.data.node), edges, positions, basedOn: initial.basedOn, savedAt: new Date().toISOString() } satisfies Draft);
  }, [rfNodes, edges, dirty, canEdit, workflow.id, initial.basedOn]);

  const pinned = useMemo(() => {
    if (!validation) return { byNode: {}, global: [], edgeProblems: {} } as ReturnType<typeof pinProblems>;
    const result = pinProblems(validation.graph, validation.problems);
    // Problems in a node's own fields first (CEL, config), then structural ones (unconnected ports…).
    for (const list of Object.values(result.byNode)) list.sort((a, b) => Number(!/^(config|inputMapping)/u.test(a.field)) - Number(!/^(config|inputMapping)/u.test(b.field)));
    return result;
  }, [validation]);

  const change = (fn: () => void) => {
    fn();
    setDirty(true);
  };

  const updateNode = (id: string, node: GraphNode) =>
    change(() => {
      setRfNodes((list) => list.map((n) => (n.id === id ? { ...n, data: { ...n.data, node } } : n)));
      // Ports that no longer exist lose their edges.
      const ports = new Set(portsOf(node));
      setEdges((list) => list.filter((e) => e.from.nodeId !== id || ports.has(e.from.port)));
    });

  const addNode = (kind: NodeKind, at?: { x: number; y: number }) => {
    if (!canEdit) return;
    const taken = new Set(rfNodes.map((n) => n.id));
    if (kind === "start" && rfNodes.some((n) => n.data.node.kind === "start")) {
      toast("A graph has exactly one start node.", "bad");
      return;
    }
    const id = uniqueId(kind, taken);
    const anchor = rfNodes.find((n) => n.id === selected) ?? rfNodes[rfNodes.length - 1];
    const position = at ?? (anchor ? { x: anchor.position.x + 280, y: anchor.position.y + (rfNodes.length % 3) * 40 } : { x: 40, y: 80 });
    change(() => setRfNodes((list) => [...list.map((n) => ({ ...n, selected: false })), { id, type: "workflow", position, data: { node: newNode(kind, id) }, selected: true }]));
    setSelected(id);
    // Keep every node in view (zooming out when the graph outgrows the canvas, never in past 100%).
    window.setTimeout(() => void flow.fitView({ padding: 0.2, maxZoom: 1, duration: 0 }), 60);
  };

  const onNodesChange = useCallback((changes: NodeChange<FlowNode>[]) => {
    const meaningful = changes.some((c) => c.type === "position" || c.type === "remove");
    setRfNodes((list) => applyNodeChanges(changes, list));
    for (const c of changes) {
      if (c.type === "select" && c.selected) setSelected(c.id);
      if (c.type === "remove") {
        setEdges((list) => list.filter((e) => e.from.nodeId !== c.id && e.to.nodeId !== c.id));
        setSelected((s) => (s === c.id ? null : s));
      }
    }
    if (meaningful) setDirty(true);
  }, []);

  const onEdgesChange = useCallback((changes: EdgeChange[]) => {
    const removed = new Set(changes.filter((c) => c.type === "remove").map((c) => c.id));
    if (removed.size === 0) return;
    setEdges((list) => list.filter((e) => !removed.has(edgeId(e))));
    setDirty(true);
  }, []);

  const onConnect = useCallback((c: Connection) => {
    if (!c.source || !c.target || !c.sourceHandle || c.source === c.target) return;
    const edge = { from: { nodeId: c.source, port: c.sourceHandle }, to: { nodeId: c.target } };
    setEdges((list) => (list.some((e) => edgeId(e) === edgeId(edge)) ? list : [...list, edge]));
    setDirty(true);
  }, []);

  const connectPort = (nodeId: string, port: string, target: string | null) =>
    change(() =>
      setEdges((list) => {
        const rest = list.filter((e) => !(e.from.nodeId === nodeId && e.from.port === port));
        return target ? [...rest, { from: { nodeId, port }, to: { nodeId: target } }] : rest;
      }),
    );

  const renamePort = (nodeId: string, from: string, to: string) => setEdges((list) => list.map((e) => (e.from.nodeId === nodeId && e.from.port === from ? { ...e, from: { nodeId, port: to } } : e)));

  const renameNode = (from: string, to: string): string | null => {
    if (!/^[A-Za-z0-9._:-]{1,100}$/u.test(to) || to === "__proto__") return "A node id is 1-100 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.";
    if (rfNodes.some((n) => n.id === to)) return `${to} is already used.`;
    change(() => {
      setRfNodes((list) => list.map((n) => (n.id === from ? { ...n, id: to, data: { ...n.data, node: { ...n.data.node, id: to } } } : n)));
      setEdges((list) => list.map((e) => ({ from: e.from.nodeId === from ? { ...e.from, nodeId: to } : e.from, to: e.to.nodeId === from ? { nodeId: to } : e.to })));
    });
    setSelected(to);
    return null;
  };

  const deleteNode = (id: string) =>
    change(() => {
      setRfNodes((list) => list.filter((n) => n.id !== id));
      setEdges((list) => list.filter((e) => e.from.nodeId !== id && e.to.nodeId !== id));
      setSelected(null);
    });

  const publish = async () => {
    setPublishing(true);
    setPublishError(null);
    try {
      const version = await post<WorkflowVersion>(`/workflows/${encodeURIComponent(workflow.id)}/versions`, { graph });
      writeJson(positionsKey(workflow.id), Object.fromEntries(rfNodes.map((n) => [n.id, n.position])));
      writeJson(draftKey(workflow.id), null);
      setDirty(false);
      toast(`Published ${workflow.name} version ${version.version}.`);
      navigate(`/workflows/${encodeURIComponent(workflow.id)}?published=${encodeURIComponent(version.id)}`);
    } catch (error) {
      if (error instanceof ApiError && error.code === "workflow_graph.invalid" && Array.isArray(error.details)) {
        setValidation({ graph, valid: false, problems: error.details as ValidationProblem[] });
      }
      setPublishError(error);
    } finally {
      setPublishing(false);
    }
  };

  const discard = () => {
    writeJson(draftKey(workflow.id), null);
    setDirty(false);
    window.location.reload();
  };

  const onDrop = (event: DragEvent) => {
    const kind = event.dataTransfer.getData("application/x-safest-kind") as NodeKind;
    if (!kind || !(NODE_KINDS as readonly string[]).includes(kind)) return;
    event.preventDefault();
    addNode(kind, flow.screenToFlowPosition({ x: event.clientX, y: event.clientY }));
  };

  const displayNodes: FlowNode[] = rfNodes.map((n) => {
    const problems = pinned.byNode[n.id];
    return {
      ...n,
      selected: n.id === selected,
      data: { ...n.data, problems, connectable: canEdit },
      ariaLabel: `${KIND_INFO[n.data.node.kind as NodeKind]?.label ?? n.data.node.kind} ${n.id}${problems?.length ? `, ${problems.length} problem${problems.length === 1 ? "" : "s"}` : ""}`,
    };
  });
  const flowEdges = toFlowEdges({ edges });
  const selectedNode = rfNodes.find((n) => n.id === selected)?.data.node ?? null;
  const problemCount = validation?.problems.length ?? 0;
  const upToDate = validation !== null && JSON.stringify(validation.graph) === graphJson;

  return (
    <div className="editor">
      <div className="editor-bar">
        <div className="editor-status" role="status" aria-live="polite" data-testid="validation-status">
          {!canValidate
            ? "Checking needs a moderator or admin role."
            : validateError
              ? "The validator could not be reached."
              : !validation || validating || !upToDate
                ? "Checking…"
                : validation.valid
                  ? "Valid: ready to publish."
                  : `${problemCount} problem${problemCount === 1 ? "" : "s"} to fix before publishing.`}
        </div>
        <span className="muted small" data-testid="expression-semantics" title="What numeric operators mean in this graph's expressions (docs/graph-format.md)">
          Expressions: {semantics}
        </span>
        {restored.current && dirty ? <span className="muted small">Restored your unpublished draft.</span> : null}
        {canEdit && dirty ? (
          <button type="button" className="btn btn-quiet btn-small" onClick={discard}>
            Discard draft
          </button>
        ) : null}
        {canEdit ? (
          <button type="button" className="btn btn-primary" data-testid="publish" disabled={publishing || graph.nodes.length === 0} onClick={() => void publish()}>
            {publishing ? "Publishing…" : "Publish version"}
          </button>
        ) : null}
      </div>
      <ErrorNote error={publishError} />
      <div className="editor-grid">
        {canEdit ? <Palette onAdd={(k) => addNode(k)} disabled={!canEdit} /> : null}
        <section
          className="canvas"
          aria-label="Workflow canvas"
          onDragOver={(e) => {
            e.preventDefault();
            e.dataTransfer.dropEffect = "copy";
          }}
          onDrop={onDrop}
        >
          {rfNodes.length === 0 ? (
            <p className="canvas-hint">
              Add a <strong>Start</strong> node from the palette, then connect ports by dragging from a port's handle to the next node.
            </p>
          ) : null}
          <ReactFlow
            nodes={displayNodes}
            edges={flowEdges}
            nodeTypes={nodeTypes}
            onNodesChange={onNodesChange}
            onEdgesChange={onEdgesChange}
            onConnect={onConnect}
            onPaneClick={() => setSelected(null)}
            nodesDraggable={canEdit}
            nodesConnectable={canEdit}
            deleteKeyCode={canEdit ? ["Delete", "Backspace"] : null}
            fitView={fitAtStart}
            fitViewOptions={{ padding: 0.2, maxZoom: 1 }}
            minZoom={0.3}
            colorMode="system"
            defaultEdgeOptions={{ interactionWidth: 16 }}
          >
            <Background gap={20} size={1} />
            <Controls showInteractive={false} />
            <MiniMap pannable zoomable ariaLabel="Overview of the workflow" />
          </ReactFlow>
        </section>
        <aside className="inspector-panel" aria-label="Node configuration">
          {selectedNode ? (
            <ConfigPanel
              key={selectedNode.id}
              node={selectedNode}
              nodes={graphNodes}
              edges={edges}
              problems={pinned.byNode[selectedNode.id]}
              lookups={lookups}
              readOnly={!canEdit}
              onChange={(node) => updateNode(selectedNode.id, node)}
              onRename={renameNode}
              onConnect={(port, target) => connectPort(selectedNode.id, port, target)}
              onRenamePort={(from, to) => renamePort(selectedNode.id, from, to)}
              onDelete={() => deleteNode(selectedNode.id)}
            />
          ) : (
            <div>
              <h2 className="h3">Problems</h2>
              {validation && validation.problems.length === 0 ? <p>None. The graph is valid.</p> : null}
              <ul className="problem-list">
                {Object.entries(pinned.byNode).map(([id, list]) => (
                  <li key={id}>
                    <button type="button" className="link-button" onClick={() => setSelected(id)}>
                      {id}
                    </button>
                    : {list.map((p) => p.message).join(" ")}
                  </li>
                ))}
                {pinned.global.map((p, i) => (
                  // biome-ignore lint/suspicious/noArrayIndexKey: the validator's problems, a read-only list redrawn whole on each load, never reordered; its items have no id and may repeat
                  <li key={`g${i}`}>{p.message}</li>
                ))}
              </ul>
              <p className="help">Select a node to configure it. Delete removes the selected node or edge.</p>
            </div>
          )}
        </aside>
      </div>
    </div>
  );
}

export function EditorPage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const from = useSearchParam("from");
  const canEdit = useCan("admin");
  const canValidate = useCan("review");
  const { user } = useSession();
  const workflow = useResource((signal) => get<Workflow>(`/workflows/${encodeURIComponent(id)}`, signal), [id]);
  // Whether a draft was waiting when the page opened (the editor writes one as soon as you change something).
  const [draftAtOpen] = useState(() => readJson<Draft>(draftKey(id)) !== null);
  const baseId = from ?? (draftAtOpen ? null : (workflow.data?.versions?.[0]?.id ?? null));
  const base = useResource(baseId ? (signal) => get<WorkflowVersion>(`/workflow-versions/${encodeURIComponent(baseId)}`, signal) : null, [baseId]);
  if (workflow.error)
    return (
      <section>
        <PageTitle>Workflow editor</PageTitle>
        <ErrorNote error={workflow.error} retry={workflow.reload} />
      </section>
    );
  if (!workflow.data || (baseId && !base.data && !base.error)) return <Loading label="Opening the editor…" />;
  return (
    <section className="editor-page" data-ready="true">
      <PageTitle
        subtitle={
          <>
            <Link to={`/workflows/${encodeURIComponent(id)}`}>{workflow.data.name}</Link>
            {base.data ? ` · editing from version ${base.data.version}` : " · new version"}
          </>
        }
      >
        {`Edit ${workflow.data.name}`}
      </PageTitle>
      {!canEdit ? <p className="note note-info">{cannotReason(user.role, "admin")} The graph is shown read-only.</p> : null}
      {from && canEdit && draftAtOpen ? (
        <p className="note note-warn">
          You have an unpublished draft of this workflow; editing from this version replaces it once you change something. <Link to={`/workflows/${encodeURIComponent(id)}/edit`}>Open the draft instead</Link>
        </p>
      ) : null}
      <ErrorNote error={base.error} />
      <ReactFlowProvider>
        <Editor key={baseId ?? "draft"} workflow={workflow.data} base={base.data ?? null} canEdit={canEdit} canValidate={canValidate} />
      </ReactFlowProvider>
    </section>
  );
}
