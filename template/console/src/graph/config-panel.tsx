// The config panel of the selected node: a form per kind, the input mapping (CEL), error handling,
// connections (a keyboard way to draw edges), and the validator's problems next to their fields.
import { useEffect, useId, useState, type ReactNode } from "react";
import type { Graph, GraphNode } from "../api";
import { DEFAULT_RESPONSE_SCHEMA, fieldProblems, KIND_INFO, portsOf, type NodeKind, type PinnedProblem } from "./kinds";

export interface Lookups {
  queues: Array<{ id: string; name: string }>;
  actionTypes: Array<{ key: string; name: string }>;
  providers: Array<{ id: string; name?: string; model: string }>;
  components: { builtIns: string[]; versions: Array<{ id: string; label: string }> };
  endpoints: Array<{ id: string; url: string }>;
}

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

type Ctl = { id: string; "aria-describedby"?: string; "aria-invalid"?: boolean };

function Row({ label, help, error, children }: { label: ReactNode; help?: ReactNode; error?: string; children: (ctl: Ctl) => ReactNode }) {
  const id = useId();
  const describedBy = [help ? `${id}-h` : "", error ? `${id}-e` : ""].filter(Boolean).join(" ");
  return (
    <div className={`field${error ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, ...(describedBy ? { "aria-describedby": describedBy } : {}), ...(error ? { "aria-invalid": true } : {}) })}
      {help ? <p className="help" id={`${id}-h`}>{help}</p> : null}
      {error ? <p className="field-error" id={`${id}-e`} data-testid="field-error">{error}</p> : null}
    </div>
  );
}

/** A text field that keeps its own text while typing and reports each change. */
function Text({ label, value, onChange, error, help, mono, multiline, readOnly, placeholder, testId }: {
  label: ReactNode; value: string; onChange: (v: string) => void; error?: string; help?: ReactNode; mono?: boolean; multiline?: boolean; readOnly: boolean; placeholder?: string; testId?: string;
}) {
  return (
    <Row label={label} help={help} error={error}>
      {(ctl) => multiline
        ? <textarea {...ctl} className={mono ? "mono" : undefined} rows={4} value={value} readOnly={readOnly} placeholder={placeholder} data-testid={testId} onChange={(e) => onChange(e.target.value)} />
        : <input {...ctl} className={mono ? "mono" : undefined} value={value} readOnly={readOnly} placeholder={placeholder} data-testid={testId} spellCheck={mono ? false : undefined} autoComplete="off" onChange={(e) => onChange(e.target.value)} />}
    </Row>
  );
}

function NumberInput({ label, value, onChange, error, help, readOnly }: { label: ReactNode; value: unknown; onChange: (v: number | undefined) => void; error?: string; help?: ReactNode; readOnly: boolean }) {
  const [text, setText] = useState(value === undefined ? "" : String(value));
  useEffect(() => setText(value === undefined ? "" : String(value)), [value]);
  return (
    <Row label={label} help={help} error={error}>
      {(ctl) => <input {...ctl} type="number" inputMode="numeric" value={text} readOnly={readOnly} onChange={(e) => {
        setText(e.target.value);
        onChange(e.target.value.trim() === "" ? undefined : Number(e.target.value));
      }} />}
    </Row>
  );
}

function Select({ label, value, options, onChange, error, help, readOnly, allowCustom, testId }: {
  label: ReactNode; value: string; options: Array<{ value: string; label: string }>; onChange: (v: string) => void; error?: string; help?: ReactNode; readOnly: boolean; allowCustom?: boolean; testId?: string;
}) {
  const known = options.some((o) => o.value === value);
  return (
    <Row label={label} help={help} error={error}>
      {(ctl) => (
        <select {...ctl} value={known || value === "" ? value : "__custom"} disabled={readOnly} data-testid={testId} onChange={(e) => onChange(e.target.value === "__custom" ? value : e.target.value)}>
          <option value="">— choose —</option>
          {options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>)}
          {!known && value !== "" ? <option value="__custom">{value} (not found)</option> : null}
          {allowCustom === false ? null : null}
        </select>
      )}
    </Row>
  );
}

/** A JSON value edited as text; only valid JSON reaches the graph. */
function JsonText({ label, value, onChange, error, help, readOnly, testId }: { label: ReactNode; value: unknown; onChange: (v: unknown) => void; error?: string; help?: ReactNode; readOnly: boolean; testId?: string }) {
  const [text, setText] = useState(() => JSON.stringify(value ?? null, null, 2));
  const [parseError, setParseError] = useState<string | undefined>();
  useEffect(() => {
    try {
      if (JSON.stringify(JSON.parse(text)) === JSON.stringify(value ?? null)) return;
    } catch {
      // The person is typing; keep their text.
      return;
    }
    setText(JSON.stringify(value ?? null, null, 2));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [JSON.stringify(value ?? null)]);
  return (
    <Row label={label} help={help} error={parseError ?? error}>
      {(ctl) => <textarea {...ctl} className="mono" rows={8} value={text} readOnly={readOnly} spellCheck={false} data-testid={testId} onChange={(e) => {
        setText(e.target.value);
        try {
          const parsed = JSON.parse(e.target.value);
          setParseError(undefined);
          onChange(parsed);
        } catch {
          setParseError("Not valid JSON yet; the graph keeps the last valid value.");
        }
      }} />}
    </Row>
  );
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The quick builder for the usual review form: one outcome with options, and an optional note. */
function SchemaBuilder({ schema, onChange, readOnly }: { schema: unknown; onChange: (schema: unknown) => void; readOnly: boolean }) {
  const properties = isRecord(schema) && isRecord(schema.properties) ? schema.properties : {};
  const enumEntry = Object.entries(properties).find(([, v]) => isRecord(v) && Array.isArray(v.enum));
  const fieldName = enumEntry?.[0] ?? "outcome";
  const options = enumEntry && isRecord(enumEntry[1]) && Array.isArray(enumEntry[1].enum) ? (enumEntry[1].enum as unknown[]).map(String) : [];
  const hasNote = isRecord(properties.note);
  const [text, setText] = useState(options.join(", "));
  useEffect(() => setText(options.join(", ")), [options.join(",")]);
  const build = (name: string, list: string[], note: boolean) => ({
    type: "object",
    required: [name],
    additionalProperties: false,
    properties: { [name]: { enum: list }, ...(note ? { note: { type: "string", maxLength: 2000 } } : {}) },
  });
  return (
    <fieldset className="subfieldset">
      <legend>Review form</legend>
      <Text label="Outcome options" readOnly={readOnly} value={text} testId="outcome-options"
        help={<>Comma-separated; reviewers choose one (keys 1–9). Field name: <code>{fieldName}</code>.</>}
        onChange={(v) => {
          setText(v);
          const list = v.split(",").map((s) => s.trim()).filter(Boolean);
          if (list.length > 0) onChange(build(fieldName, [...new Set(list)], hasNote));
        }} />
      <div className="field field-check">
        <label><input type="checkbox" checked={hasNote} disabled={readOnly} onChange={(e) => onChange(build(fieldName, options.length ? options : ["remove", "keep"], e.target.checked))} /> <span>Ask for a note</span></label>
      </div>
    </fieldset>
  );
}

function MappingEditor({ node, onChange, problems, readOnly, label, help }: { node: GraphNode; onChange: (mapping: Record<string, string>) => void; problems: PinnedProblem[] | undefined; readOnly: boolean; label: string; help: ReactNode }) {
  const entries = Object.entries(node.inputMapping ?? {});
  const [newKey, setNewKey] = useState("");
  const set = (list: Array<[string, string]>) => onChange(Object.fromEntries(list));
  const keyId = useId();
  return (
    <fieldset className="subfieldset">
      <legend>{label}</legend>
      <p className="help">{help}</p>
      {entries.map(([key, expression], i) => (
        <div key={key} className="mapping-row">
          <Text label={<code>{key}</code>} mono readOnly={readOnly} value={expression} error={fieldProblems(problems, `inputMapping.${key}`)} testId={`mapping-${key}`}
            onChange={(v) => set(entries.map(([k, e], j) => (j === i ? [k, v] : [k, e])))} />
          {!readOnly ? <button type="button" className="btn btn-small btn-quiet" onClick={() => set(entries.filter((_, j) => j !== i))} aria-label={`Remove ${key}`}>Remove</button> : null}
        </div>
      ))}
      {fieldProblems(problems, "inputMapping") && !entries.some(([k]) => fieldProblems(problems, `inputMapping.${k}`)) ? <p className="field-error">{fieldProblems(problems, "inputMapping")}</p> : null}
      {!readOnly ? (
        <div className="inline-form">
          <label htmlFor={keyId} className="sr-only">New field name</label>
          <input id={keyId} placeholder="name" value={newKey} onChange={(e) => setNewKey(e.target.value)} className="mono" autoComplete="off" />
          <button type="button" className="btn btn-small" disabled={!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/u.test(newKey) || entries.some(([k]) => k === newKey)}
            onClick={() => { set([...entries, [newKey, "report.category"]]); setNewKey(""); }}>Add field</button>
        </div>
      ) : null}
    </fieldset>
  );
}

const MAPPING_LABELS: Partial<Record<NodeKind, [string, string]>> = {
  human_task: ["What the reviewer sees", "Each field is a CEL expression; the task shows its value."],
  end: ["Run result", "The run's result: each field a CEL expression."],
  action: ["Action parameters", "Sent with the action; each a CEL expression."],
  send_message: ["Template variables", "Available as {{name}} in the template."],
  decision: ["Statement variables", "Available as {{name}} in the statement."],
  start_linked_workflow: ["Child input", "The linked run's input."],
  enrichment: ["Component input", "What the component receives (text, urls…)."],
  ai_proposal: ["Model input", "What the model sees, besides its instructions."],
  delay_until: ["Inputs", "timestamp: a CEL expression giving an ISO time."],
  condition: ["Node input", "Evaluated first; cases can read node_input."],
};

export function ConfigPanel(props: PanelProps) {
  const { node, nodes, edges, problems, lookups, readOnly, onChange } = props;
  const kind = node.kind as NodeKind;
  const config = node.config ?? {};
  const setConfig = (patch: Record<string, unknown>) => {
    const next = { ...config, ...patch };
    for (const [k, v] of Object.entries(patch)) if (v === undefined || v === "") delete next[k];
    onChange({ ...node, config: next });
  };
  const err = (field: string) => fieldProblems(problems, field);
  const [idText, setIdText] = useState(node.id);
  const [idError, setIdError] = useState<string | null>(null);
  useEffect(() => { setIdText(node.id); setIdError(null); }, [node.id]);
  const ports = portsOf(node);
  const others = nodes.filter((n) => n.id !== node.id && n.kind !== "start");
  const structural = (problems ?? []).filter((p) => !/^(config|inputMapping|id|errorPort|timeoutPolicy|edge:)/u.test(p.field));

  return (
    <div className="config-panel" data-testid="config-panel">
      <h2 className="h3">{KIND_INFO[kind]?.label ?? node.kind}</h2>
      <p className="help">{KIND_INFO[kind]?.description}</p>
      <Row label="Node id" error={idError ?? err("id")} help="Used in CEL as steps.<id>; renaming keeps its edges.">
        {(ctl) => <input {...ctl} className="mono" value={idText} readOnly={readOnly} autoComplete="off" onChange={(e) => setIdText(e.target.value)}
          onBlur={() => { if (idText !== node.id) setIdError(props.onRename(node.id, idText)); }}
          onKeyDown={(e) => { if (e.key === "Enter") (e.target as HTMLInputElement).blur(); }} />}
      </Row>

      {kind === "end" ? <Text label="Terminal code" readOnly={readOnly} value={String(config.terminal_code ?? "")} error={err("config.terminal_code")} onChange={(v) => setConfig({ terminal_code: v })} help="e.g. resolved, removed; default complete." /> : null}

      {kind === "condition" ? (
        <fieldset className="subfieldset">
          <legend>Cases</legend>
          <p className="help">The first case whose CEL is true picks its port; more than one true is an error. Variables: input, report, steps, event, run, node_input.</p>
          {(Array.isArray(config.cases) ? (config.cases as Array<{ port?: string; when?: string }>) : []).map((c, i, all) => (
            <div key={i} className="case-row">
              <Text label={`Port ${i + 1}`} mono readOnly={readOnly} value={String(c.port ?? "")} error={err(`config.cases[${i}].port`)} onChange={(v) => {
                const cases = all.map((x, j) => (j === i ? { ...x, port: v } : x));
                if (c.port) props.onRenamePort(c.port, v);
                setConfig({ cases, case_ports: cases.map((x) => x.port ?? "") });
              }} />
              <Text label={`When (CEL) ${i + 1}`} mono readOnly={readOnly} value={String(c.when ?? "")} error={err(`config.cases[${i}].when`)} testId={`case-when-${i}`} onChange={(v) => {
                setConfig({ cases: all.map((x, j) => (j === i ? { ...x, when: v } : x)) });
              }} />
              {!readOnly ? <button type="button" className="btn btn-small btn-quiet" onClick={() => {
                const cases = all.filter((_, j) => j !== i);
                setConfig({ cases, case_ports: cases.map((x) => x.port ?? "") });
              }}>Remove case</button> : null}
            </div>
          ))}
          {err("config.cases") ? <p className="field-error">{err("config.cases")}</p> : null}
          {err("config.case_ports") ? <p className="field-error">{err("config.case_ports")}</p> : null}
          {!readOnly ? <button type="button" className="btn btn-small" onClick={() => {
            const cases = [...(Array.isArray(config.cases) ? (config.cases as Array<{ port?: string; when?: string }>) : [])];
            const taken = new Set(cases.map((c) => c.port));
            let n = cases.length + 1;
            while (taken.has(`case_${n}`)) n++;
            cases.push({ port: `case_${n}`, when: "true" });
            setConfig({ cases, case_ports: cases.map((x) => x.port ?? "") });
          }}>Add case</button> : null}
          <Text label="Default port" mono readOnly={readOnly} value={String(config.default_port ?? "")} error={err("config.default_port")} onChange={(v) => {
            if (typeof config.default_port === "string") props.onRenamePort(config.default_port, v);
            setConfig({ default_port: v });
          }} />
        </fieldset>
      ) : null}

      {kind === "delay" ? <NumberInput label="Seconds" readOnly={readOnly} value={config.seconds} error={err("config.seconds")} onChange={(v) => setConfig({ seconds: v })} help="1 second to one year." /> : null}

      {kind === "enrichment" ? (
        <>
          <Select label="Built-in component" readOnly={readOnly} value={String(config.component ?? "")} options={lookups.components.builtIns.map((b) => ({ value: b, label: b.replace(/_/gu, " ") }))}
            error={err("config.component")} onChange={(v) => setConfig({ component: v || undefined, ...(v ? { component_version_id: undefined } : {}) })} />
          <Select label="…or a component version" readOnly={readOnly} value={String(config.component_version_id ?? "")} options={lookups.components.versions.map((v) => ({ value: v.id, label: v.label }))}
            error={err("config.component_version_id")} onChange={(v) => setConfig({ component_version_id: v || undefined, ...(v ? { component: undefined } : {}) })} />
        </>
      ) : null}

      {kind === "ai_proposal" ? (
        <>
          {lookups.providers.length > 0 ? (
            <Select label="AI provider" readOnly={readOnly} value={String(config.provider_id ?? "")} options={lookups.providers.map((p) => ({ value: p.id, label: `${p.name ?? p.id} (${p.model})` }))} error={err("config.provider_id")} onChange={(v) => setConfig({ provider_id: v })} />
          ) : <Text label="AI provider id" mono readOnly={readOnly} value={String(config.provider_id ?? "")} error={err("config.provider_id")} onChange={(v) => setConfig({ provider_id: v })} />}
          <Text label="Instructions" multiline readOnly={readOnly} value={String(config.instructions ?? "")} error={err("config.instructions")} onChange={(v) => setConfig({ instructions: v })} />
          <Text label="Result ports" mono readOnly={readOnly} value={Array.isArray(config.result_ports) ? (config.result_ports as string[]).join(", ") : ""} error={err("config.result_ports")}
            help="Comma-separated; the model must choose one." onChange={(v) => setConfig({ result_ports: v.split(",").map((s) => s.trim()).filter(Boolean) })} />
        </>
      ) : null}

      {kind === "human_task" ? (
        <>
          <Select label="Queue" testId="queue-select" readOnly={readOnly} value={String(config.queue_id ?? "")} options={lookups.queues.map((q) => ({ value: q.name, label: q.name }))}
            error={err("config.queue_id")} help="Queues are created under Settings → Queues." onChange={(v) => setConfig({ queue_id: v || undefined })} />
          <SchemaBuilder schema={config.response_schema ?? DEFAULT_RESPONSE_SCHEMA} readOnly={readOnly} onChange={(schema) => setConfig({ response_schema: schema })} />
          <JsonText label="Response schema (JSON Schema)" readOnly={readOnly} value={config.response_schema ?? DEFAULT_RESPONSE_SCHEMA} error={err("config.response_schema")} testId="response-schema"
            help="The answer is checked against it; enums become buttons, strings text areas, booleans checkboxes." onChange={(v) => setConfig({ response_schema: v })} />
          <NumberInput label="Timeout (seconds)" readOnly={readOnly} value={config.timeout_seconds} error={err("config.timeout_seconds")} onChange={(v) => setConfig({ timeout_seconds: v })} help="The timeout port is taken after this; default one day." />
          <NumberInput label="Priority" readOnly={readOnly} value={config.priority} error={err("config.priority")} onChange={(v) => setConfig({ priority: v })} />
          <Text label="Task type" readOnly={readOnly} value={String(config.task_type ?? "")} error={err("config.task_type")} onChange={(v) => setConfig({ task_type: v })} />
        </>
      ) : null}

      {kind === "wait_for_event" ? (
        <>
          <Text label="Event type" mono readOnly={readOnly} value={String(config.event_type ?? "")} error={err("config.event_type")} onChange={(v) => setConfig({ event_type: v })} />
          <NumberInput label="Timeout (seconds)" readOnly={readOnly} value={config.timeout_seconds} error={err("config.timeout_seconds")} onChange={(v) => setConfig({ timeout_seconds: v })} />
        </>
      ) : null}

      {kind === "send_message" ? (
        <>
          <Text label="Template" multiline readOnly={readOnly} value={String(config.template ?? "")} error={err("config.template")} onChange={(v) => setConfig({ template: v })} help="{{name}} is replaced by the input mapping's value." />
          <Text label="Recipient" readOnly={readOnly} value={String(config.recipient ?? "")} error={err("config.recipient")} onChange={(v) => setConfig({ recipient: v })} help="reporter, subject_owner or an address." />
        </>
      ) : null}

      {kind === "decision" ? (
        <>
          <Text label="Outcome" readOnly={readOnly} value={String(config.outcome ?? "")} error={err("config.outcome")} onChange={(v) => setConfig({ outcome: v })} />
          <Text label="Statement (facts relied on)" multiline readOnly={readOnly} value={String(config.statement ?? "")} error={err("config.statement")} onChange={(v) => setConfig({ statement: v })} />
          <JsonText label="Restrictions" readOnly={readOnly} value={config.restrictions ?? {}} error={err("config.restrictions")} onChange={(v) => setConfig({ restrictions: v })}
            help="{ visibility: [content_removed…], account: suspended|terminated, monetary, provision }" />
          <Select label="Ground" readOnly={readOnly} value={String(config.ground ?? "")} options={[{ value: "incompatible_content", label: "Incompatible with terms" }, { value: "illegal_content", label: "Illegal content" }]} error={err("config.ground")} onChange={(v) => setConfig({ ground: v || undefined })} />
          {config.ground === "illegal_content" ? <Text label="Legal ground" readOnly={readOnly} value={String(config.legal_ground ?? "")} error={err("config.legal_ground")} onChange={(v) => setConfig({ legal_ground: v })} /> : null}
        </>
      ) : null}

      {kind === "handoff" ? (
        <>
          <Select label="Queue" readOnly={readOnly} value={String(config.queue_id ?? "")} options={lookups.queues.map((q) => ({ value: q.name, label: q.name }))} error={err("config.queue_id")} onChange={(v) => setConfig({ queue_id: v || undefined, ...(v ? { endpoint_id: undefined } : {}) })} />
          <Select label="…or an external endpoint" readOnly={readOnly} value={String(config.endpoint_id ?? "")} options={lookups.endpoints.map((e) => ({ value: e.id, label: e.url }))} error={err("config.endpoint_id")} onChange={(v) => setConfig({ endpoint_id: v || undefined, ...(v ? { queue_id: undefined } : {}) })} />
        </>
      ) : null}

      {kind === "start_linked_workflow" ? <Text label="Workflow version id" mono readOnly={readOnly} value={String(config.workflow_version_id ?? "")} error={err("config.workflow_version_id")} onChange={(v) => setConfig({ workflow_version_id: v })} /> : null}

      {kind === "action" ? (
        <>
          <Select label="Action type" readOnly={readOnly} value={String(config.action_type ?? "")} options={lookups.actionTypes.map((a) => ({ value: a.key, label: `${a.name} (${a.key})` }))} error={err("config.action_type")} help="Action types are created under Settings." onChange={(v) => setConfig({ action_type: v })} />
          <NumberInput label="Approval timeout (seconds)" readOnly={readOnly} value={config.approval_timeout_seconds} error={err("config.approval_timeout_seconds")} onChange={(v) => setConfig({ approval_timeout_seconds: v })} />
        </>
      ) : null}

      {kind !== "start" && kind !== "join" ? (
        <MappingEditor node={node} problems={problems} readOnly={readOnly} label={MAPPING_LABELS[kind]?.[0] ?? "Input mapping"} help={MAPPING_LABELS[kind]?.[1] ?? "Each field is a CEL expression."}
          onChange={(mapping) => onChange({ ...node, inputMapping: mapping })} />
      ) : null}

      {kind !== "start" && kind !== "end" && kind !== "join" ? (
        <fieldset className="subfieldset">
          <legend>Failures</legend>
          <Text label="Error port" mono readOnly={readOnly} value={node.errorPort ?? ""} error={err("errorPort")} help="Taken when the node fails after its retries; leave empty to stop the run for repair."
            onChange={(v) => { if (node.errorPort) props.onRenamePort(node.errorPort, v); onChange({ ...node, ...(v ? { errorPort: v } : { errorPort: undefined }) }); }} />
          <NumberInput label="Timeout per attempt (seconds)" readOnly={readOnly} value={node.timeoutPolicy?.timeout_seconds} error={err("timeoutPolicy.timeout_seconds")}
            onChange={(v) => onChange({ ...node, timeoutPolicy: { ...node.timeoutPolicy, timeout_seconds: v } })} />
          <NumberInput label="Retries" readOnly={readOnly} value={node.timeoutPolicy?.retries} error={err("timeoutPolicy.retries")}
            onChange={(v) => onChange({ ...node, timeoutPolicy: { ...node.timeoutPolicy, retries: v } })} />
        </fieldset>
      ) : null}

      {ports.length > 0 ? (
        <fieldset className="subfieldset">
          <legend>Connections</legend>
          <p className="help">Drag from a port's handle to a node, or choose here.</p>
          {ports.map((port) => {
            const targets = edges.filter((e) => e.from.nodeId === node.id && e.from.port === port).map((e) => e.to.nodeId);
            return (
              <Select key={port} label={<>Port <code>{port}</code> goes to{targets.length > 1 ? ` (fork: ${targets.join(", ")})` : ""}</>} readOnly={readOnly} value={targets[0] ?? ""}
                options={others.map((n) => ({ value: n.id, label: `${n.id} (${KIND_INFO[n.kind as NodeKind]?.label ?? n.kind})` }))} testId={`connect-${port}`}
                error={fieldProblems(problems, `edge:${port}`)} onChange={(v) => props.onConnect(port, v || null)} />
            );
          })}
        </fieldset>
      ) : null}

      {structural.length > 0 ? (
        <div className="note note-warn" role="note">
          <p><strong>To fix before publishing</strong></p>
          <ul>{structural.map((p, i) => <li key={i}>{p.message}</li>)}</ul>
        </div>
      ) : null}
      {!readOnly ? <button type="button" className="btn btn-danger" onClick={props.onDelete}>Delete node</button> : null}
    </div>
  );
}
