// The config panel of the selected node: the kind's config fields (from its descriptor), the input
// mapping (CEL), error handling, connections (a keyboard way to draw edges), and the validator's
// problems next to their fields.
import { useEffect, useState } from "react";
import type { Graph, GraphNode } from "../api";
import type { KindDescriptor } from "../../../src/workflows/kinds/descriptor";
import { Field, type Lookups, MappingEditor } from "./config-fields";
import { NumberInput, Row, Select, Text } from "./controls";
import { fieldProblems, KIND_INFO, type NodeKind, type PinnedProblem, portsOf } from "./kinds";

export type { Lookups } from "./config-fields";

interface PanelProps {
  node: GraphNode;
  nodes: GraphNode[];
  edges: Graph["edges"];
  problems: PinnedProblem[] | undefined;
  lookups: Lookups;
  readOnly: boolean;
  onChange: (node: GraphNode) => void;
  onRename: (from: string, to: string) => string | null;
  onConnect: (port: string, target: string | null) => void;
  onRenamePort: (from: string, to: string) => void;
  onDelete: () => void;
}

export function ConfigPanel(props: PanelProps) {
  const { node, nodes, edges, problems, lookups, readOnly, onChange } = props;
  const descriptor = KIND_INFO[node.kind as NodeKind] as KindDescriptor | undefined;
  const config = node.config ?? {};
  const setConfig = (patch: Record<string, unknown>) => {
    const next = { ...config, ...patch };
    for (const [k, v] of Object.entries(patch)) if (v === undefined || v === "") delete next[k];
    onChange({ ...node, config: next });
  };
  const err = (field: string) => fieldProblems(problems, field);
  const [idText, setIdText] = useState(node.id);
  const [idError, setIdError] = useState<string | null>(null);
  useEffect(() => {
    setIdText(node.id);
    setIdError(null);
  }, [node.id]);
  const ports = portsOf(node);
  const others = nodes.filter((n) => n.id !== node.id && n.kind !== "start");
  const structural = (problems ?? []).filter((p) => !/^(config|inputMapping|id|errorPort|timeoutPolicy|edge:)/u.test(p.field));

  return (
    <div className="config-panel" data-testid="config-panel">
      <h2 className="h3">{descriptor?.label ?? node.kind}</h2>
      <p className="help">{descriptor?.description}</p>
      <Row label="Node id" error={idError ?? err("id")} help="Used in CEL as steps.<id>; renaming keeps its edges.">
        {(ctl) => (
          <input
            {...ctl}
            className="mono"
            value={idText}
            readOnly={readOnly}
            autoComplete="off"
            onChange={(e) => setIdText(e.target.value)}
            onBlur={() => {
              if (idText !== node.id) setIdError(props.onRename(node.id, idText));
            }}
            onKeyDown={(e) => {
              if (e.key === "Enter") (e.target as HTMLInputElement).blur();
            }}
          />
        )}
      </Row>

      {descriptor?.fields.map((field) => (
        <Field key={field.key} field={field} config={config} setConfig={setConfig} err={err} lookups={lookups} readOnly={readOnly} onRenamePort={props.onRenamePort} />
      ))}

      {descriptor?.mapping ? <MappingEditor node={node} problems={problems} readOnly={readOnly} label={descriptor.mapping.label} help={descriptor.mapping.help} onChange={(mapping) => onChange({ ...node, inputMapping: mapping })} /> : null}

      {descriptor?.canFail ? (
        <fieldset className="subfieldset">
          <legend>Failures</legend>
          <Text
            label="Error port"
            mono
            readOnly={readOnly}
            value={node.errorPort ?? ""}
            error={err("errorPort")}
            help="Taken when the node fails after its retries; leave empty to stop the run for repair."
            onChange={(v) => {
              if (node.errorPort) props.onRenamePort(node.errorPort, v);
              onChange({ ...node, ...(v ? { errorPort: v } : { errorPort: undefined }) });
            }}
          />
          <NumberInput
            label="Timeout per attempt (seconds)"
            readOnly={readOnly}
            value={node.timeoutPolicy?.timeout_seconds}
            error={err("timeoutPolicy.timeout_seconds")}
            onChange={(v) => onChange({ ...node, timeoutPolicy: { ...node.timeoutPolicy, timeout_seconds: v } })}
          />
          <NumberInput label="Retries" readOnly={readOnly} value={node.timeoutPolicy?.retries} error={err("timeoutPolicy.retries")} onChange={(v) => onChange({ ...node, timeoutPolicy: { ...node.timeoutPolicy, retries: v } })} />
        </fieldset>
      ) : null}

      {ports.length > 0 ? (
        <fieldset className="subfieldset">
          <legend>Connections</legend>
          <p className="help">Drag from a port's handle to a node, or choose here.</p>
          {ports.map((port) => {
            const targets = edges.filter((e) => e.from.nodeId === node.id && e.from.port === port).map((e) => e.to.nodeId);
            return (
              <Select
                key={port}
                label={
                  <>
                    Port <code>{port}</code> goes to{targets.length > 1 ? ` (fork: ${targets.join(", ")})` : ""}
                  </>
                }
                readOnly={readOnly}
                value={targets[0] ?? ""}
                options={others.map((n) => ({ value: n.id, label: `${n.id} (${KIND_INFO[n.kind as NodeKind]?.label ?? n.kind})` }))}
                testId={`connect-${port}`}
                error={fieldProblems(problems, `edge:${port}`)}
                onChange={(v) => props.onConnect(port, v || null)}
              />
            );
          })}
        </fieldset>
      ) : null}

      {structural.length > 0 ? (
        <div className="note note-warn" role="note">
          <p>
            <strong>To fix before publishing</strong>
          </p>
          <ul>
            {structural.map((p, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: the validator's problems, a read-only list redrawn whole on each load, never reordered; its items have no id and may repeat
              <li key={i}>{p.message}</li>
            ))}
          </ul>
        </div>
      ) : null}
      {!readOnly ? (
        <button type="button" className="btn btn-danger" onClick={props.onDelete}>
          Delete node
        </button>
      ) : null}
    </div>
  );
}
