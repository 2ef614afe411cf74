// A read-only drawing of a workflow version (workflow pages, compare, run inspector).
import { Background, Controls, ReactFlow, ReactFlowProvider, type Edge } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useMemo } from "react";
import type { Graph } from "../api";
import { nodeTypes, type FlowNode, type FlowNodeData } from "./flow-node";
import { autoLayout, KIND_INFO, type NodeKind } from "./kinds";

export function edgeId(e: Graph["edges"][number]): string {
  return `${e.from.nodeId}:${e.from.port}->${e.to.nodeId}`;
}

export function toFlowEdges(graph: Pick<Graph, "edges">, highlight?: (e: Graph["edges"][number]) => string | undefined): Edge[] {
  return graph.edges.map((e) => ({
    id: edgeId(e),
    source: e.from.nodeId,
    sourceHandle: e.from.port,
    target: e.to.nodeId,
    targetHandle: "in",
    className: highlight?.(e),
    ariaLabel: `${e.from.nodeId} ${e.from.port} to ${e.to.nodeId}`,
  }));
}

export function GraphView({
  graph,
  extra,
  onSelect,
  selected,
  label,
  height = 420,
}: {
  graph: Graph;
  extra?: (id: string) => Partial<FlowNodeData> & { className?: string };
  onSelect?: (id: string | null) => void;
  selected?: string | null;
  label: string;
  height?: number;
}) {
  const positions = useMemo(() => autoLayout(graph), [graph]);
  const nodes: FlowNode[] = graph.nodes.map((node) => {
    const more = extra?.(node.id) ?? {};
    const { className, ...data } = more;
    return {
      id: node.id,
      type: "workflow",
      position: positions[node.id] ?? { x: 0, y: 0 },
      data: { node, connectable: false, ...data },
      selected: selected === node.id,
      draggable: false,
      connectable: false,
      ariaLabel: `${KIND_INFO[node.kind as NodeKind]?.label ?? node.kind} ${node.id}${data.state ? `, ${data.state.replace(/_/gu, " ")}` : ""}`,
      ...(className ? { className } : {}),
    };
  });
  const edges = useMemo(() => toFlowEdges(graph), [graph]);
  return (
    <section className="graph-view" style={{ height }} aria-label={label}>
      <ReactFlowProvider>
        <ReactFlow
          nodes={nodes}
          edges={edges}
          nodeTypes={nodeTypes}
          fitView
          fitViewOptions={{ padding: 0.15, maxZoom: 1 }}
          nodesDraggable={false}
          nodesConnectable={false}
          edgesFocusable={false}
          elementsSelectable={!!onSelect}
          onNodeClick={(_, node) => onSelect?.(node.id)}
          onPaneClick={() => onSelect?.(null)}
          minZoom={0.3}
          colorMode="system"
          deleteKeyCode={null}
        >
          <Background gap={20} size={1} />
          <Controls showInteractive={false} />
        </ReactFlow>
      </ReactFlowProvider>
    </section>
  );
}
