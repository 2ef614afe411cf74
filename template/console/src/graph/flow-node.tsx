// One workflow node on the canvas: its kind and id, a target handle (except start), one source
// handle per output port (labelled), problems pinned to it, and in the inspector its run state.
import { Handle, Position, type Node, type NodeProps } from "@xyflow/react";
import type { GraphNode } from "../api";
import { KIND_INFO, portsOf, type NodeKind, type PinnedProblem } from "./kinds";

export interface FlowNodeData extends Record<string, unknown> {
  node: GraphNode;
  problems?: PinnedProblem[];
  /** Inspector: the node's latest step state, or "not_reached". */
  state?: string;
  steps?: number;
  connectable?: boolean;
}

export type FlowNode = Node<FlowNodeData, "workflow">;

const STATE_TEXT: Record<string, string> = {
  succeeded: "succeeded",
  failed: "failed",
  running: "running",
  waiting: "waiting",
  timed_out: "timed out",
  not_reached: "not reached",
};

export function WorkflowNodeView({ data, selected }: NodeProps<FlowNode>) {
  const { node, problems = [], state, steps } = data;
  const kind = node.kind as NodeKind;
  const ports = portsOf(node);
  const connectable = data.connectable !== false;
  return (
    <div className={`flow-node kind-${node.kind}${problems.length ? " has-problems" : ""}${state ? ` state-${state}` : ""}${selected ? " is-selected" : ""}`} data-testid={`node-${node.id}`}>
      {kind !== "start" ? <Handle type="target" position={Position.Left} id="in" isConnectable={connectable} className="handle-in" style={{ top: 22 }} /> : null}
      <div className="flow-node-head">
        <span className="flow-node-kind">{KIND_INFO[kind]?.label ?? node.kind}</span>
        <span className="flow-node-id">{node.id}</span>
      </div>
      {state ? (
        <div className="flow-node-state" data-state={state}>
          {STATE_TEXT[state] ?? state}
          {steps && steps > 1 ? ` ×${steps}` : ""}
        </div>
      ) : null}
      {ports.length > 0 ? (
        <ul className="flow-node-ports" aria-label="Output ports">
          {ports.map((port) => (
            <li key={port} className={`flow-port${port === node.errorPort ? " flow-port-error" : ""}`}>
              <span>{port}</span>
              <Handle type="source" position={Position.Right} id={port} isConnectable={connectable} className="handle-out" />
            </li>
          ))}
        </ul>
      ) : null}
      {/* Below the ports, so problems appearing and clearing never move a handle. */}
      {problems.length > 0 ? (
        <div className="flow-node-problems" data-testid="node-problems">
          <span aria-hidden="true">⚠ </span>
          {problems[0]!.message}
          {problems.length > 1 ? ` (+${problems.length - 1} more)` : ""}
        </div>
      ) : null}
    </div>
  );
}

export const nodeTypes = { workflow: WorkflowNodeView };
