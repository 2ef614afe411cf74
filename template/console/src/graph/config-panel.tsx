// The config panel of the selected node: the kind's config fields (from its descriptor), the input
// mapping (CEL), error handling, connections (a keyboard way to draw edges), and the validator's
// problems next to their fields.
import { useEffect, useId, useState, type ReactNode } from "react";
import type { Graph, GraphNode } from "../api";
import type { ConfigField, KindDescriptor, Lookup } from "../../../src/workflows/kinds/descriptor";
import { DEFAULT_RESPONSE_SCHEMA, fieldProblems, KIND_INFO, portsOf, type NodeKind, type PinnedProblem } from "./kinds";

export interface Lookups {
  queues: Array<{ id: string; name: string }>;
  actionTypes: Array<{ key: string; name: string }>;
  providers: Array<{ id: string; name?: string; model: string }>;
  policies: Array<{ name: string; retiredAt: string | null; latest: { id: string; version: number } | null }>;
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
      {help ? (
        <p className="help" id={`${id}-h`}>
          {help}
        </p>
      ) : null}
      {error ? (
        <p className="field-error" id={`${id}-e`} data-testid="field-error">
          {error}
        </p>
      ) : null}
    </div>
  );
}

/** A text field that keeps its own text while typing and reports each change. */
function Text({
  label,
  value,
  onChange,
  error,
  help,
  mono,
  multiline,
  readOnly,
  placeholder,
  testId,
}: {
  label: ReactNode;
  value: string;
  onChange: (v: string) => void;
  error?: string;
  help?: ReactNode;
  mono?: boolean;
  multiline?: boolean;
  readOnly: boolean;
  placeholder?: string;
  testId?: string;
}) {
  return (
    <Row label={label} help={help} error={error}>
      {(ctl) =>
        multiline ? (
          <textarea {...ctl} className={mono ? "mono" : undefined} rows={4} value={value} readOnly={readOnly} placeholder={placeholder} data-testid={testId} onChange={(e) => onChange(e.target.value)} />
        ) : (
          <input
            {...ctl}
            className={mono ? "mono" : undefined}
            value={value}
            readOnly={readOnly}
            placeholder={placeholder}
            data-testid={testId}
            spellCheck={mono ? false : undefined}
            autoComplete="off"
            onChange={(e) => onChange(e.target.value)}
          />
        )
      }
    </Row>
  );
}

function NumberInput({ label, value, onChange, error, help, readOnly }: { label: ReactNode; value: unknown; onChange: (v: number | undefined) => void; error?: string; help?: ReactNode; readOnly: boolean }) {
  const [text, setText] = useState(value === undefined ? "" : String(value));
  useEffect(() => setText(value === undefined ? "" : String(value)), [value]);
  return (
    <Row label={label} help={help} error={error}>
      {(ctl) => (
        <input
          {...ctl}
          type="number"
          inputMode="numeric"
          value={text}
          readOnly={readOnly}
          onChange={(e) => {
            setText(e.target.value);
            onChange(e.target.value.trim() === "" ? undefined : Number(e.target.value));
          }}
        />
      )}
    </Row>
  );
}

function Select({
  label,
  value,
  options,
  onChange,
  error,
  help,
  readOnly,
  allowCustom,
  testId,
}: {
  label: ReactNode;
  value: string;
  options: Array<{ value: string; label: string }>;
  onChange: (v: string) => void;
  error?: string;
  help?: ReactNode;
  readOnly: boolean;
  allowCustom?: boolean;
  testId?: string;
}) {
  const known = options.some((o) => o.value === value);
  return (
    <Row label={label} help={help} error={error}>
      {(ctl) => (
        <select {...ctl} value={known || value === "" ? value : "__custom"} disabled={readOnly} data-testid={testId} onChange={(e) => onChange(e.target.value === "__custom" ? value : e.target.value)}>
          <option value="">— choose —</option>
          {options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
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
      {(ctl) => (
        <textarea
          {...ctl}
          className="mono"
          rows={8}
          value={text}
          readOnly={readOnly}
          spellCheck={false}
          data-testid={testId}
          onChange={(e) => {
            setText(e.target.value);
            try {
              const parsed = JSON.parse(e.target.value);
              setParseError(undefined);
              onChange(parsed);
            } catch {
              setParseError("Not valid JSON yet; the graph keeps the last valid value.");
            }
          }}
        />
      )}
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
      <Text
        label="Outcome options"
        readOnly={readOnly}
        value={text}
        testId="outcome-options"
        help={
          <>
            Comma-separated; reviewers choose one (keys 1–9). Field name: <code>{fieldName}</code>.
          </>
        }
        onChange={(v) => {
          setText(v);
          const list = v
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean);
          if (list.length > 0) onChange(build(fieldName, [...new Set(list)], hasNote));
        }}
      />
      <div className="field field-check">
        <label>
          <input type="checkbox" checked={hasNote} disabled={readOnly} onChange={(e) => onChange(build(fieldName, options.length ? options : ["remove", "keep"], e.target.checked))} /> <span>Ask for a note</span>
        </label>
      </div>
    </fieldset>
  );
}

function MappingEditor({
  node,
  onChange,
  problems,
  readOnly,
  label,
  help,
}: {
  node: GraphNode;
  onChange: (mapping: Record<string, string>) => void;
  problems: PinnedProblem[] | undefined;
  readOnly: boolean;
  label: string;
  help: ReactNode;
}) {
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
          <Text
            label={<code>{key}</code>}
            mono
            readOnly={readOnly}
            value={expression}
            error={fieldProblems(problems, `inputMapping.${key}`)}
            testId={`mapping-${key}`}
            onChange={(v) => set(entries.map(([k, e], j) => (j === i ? [k, v] : [k, e])))}
          />
          {!readOnly ? (
            <button type="button" className="btn btn-small btn-quiet" onClick={() => set(entries.filter((_, j) => j !== i))} aria-label={`Remove ${key}`}>
              Remove
            </button>
          ) : null}
        </div>
      ))}
      {fieldProblems(problems, "inputMapping") && !entries.some(([k]) => fieldProblems(problems, `inputMapping.${k}`)) ? <p className="field-error">{fieldProblems(problems, "inputMapping")}</p> : null}
      {!readOnly ? (
        <div className="inline-form">
          <label htmlFor={keyId} className="sr-only">
            New field name
          </label>
          <input id={keyId} placeholder="name" value={newKey} onChange={(e) => setNewKey(e.target.value)} className="mono" autoComplete="off" />
          <button
            type="button"
            className="btn btn-small"
            disabled={!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/u.test(newKey) || entries.some(([k]) => k === newKey)}
            onClick={() => {
              set([...entries, [newKey, "report.category"]]);
              setNewKey("");
            }}
          >
            Add field
          </button>
        </div>
      ) : null}
    </fieldset>
  );
}

/** The options of a lookup list, from what the installation has. */
function lookupOptions(lookups: Lookups, lookup: Lookup): Array<{ value: string; label: string }> {
  switch (lookup) {
    case "queues":
      return lookups.queues.map((q) => ({ value: q.name, label: q.name }));
    case "actionTypes":
      return lookups.actionTypes.map((a) => ({ value: a.key, label: `${a.name} (${a.key})` }));
    case "providers":
      return lookups.providers.map((p) => ({ value: p.id, label: `${p.name ?? p.id} (${p.model})` }));
    case "policies":
      return lookups.policies
        .filter((p) => !p.retiredAt && p.latest)
        .flatMap((p) => [
          { value: p.name, label: `${p.name} (newest version)` },
          { value: p.latest!.id, label: `${p.name} v${p.latest!.version} (pinned)` },
        ]);
    case "builtIns":
      return lookups.components.builtIns.map((b) => ({ value: b, label: b.replace(/_/gu, " ") }));
    case "componentVersions":
      return lookups.components.versions.map((v) => ({ value: v.id, label: v.label }));
    case "endpoints":
      return lookups.endpoints.map((e) => ({ value: e.id, label: e.url }));
  }
}

interface FieldProps {
  field: ConfigField;
  config: Record<string, unknown>;
  setConfig: (patch: Record<string, unknown>) => void;
  err: (field: string) => string | undefined;
  lookups: Lookups;
  readOnly: boolean;
  onRenamePort: (from: string, to: string) => void;
}

/** The cases of a condition: a port and a CEL expression each. */
function CasesEditor({ field, config, setConfig, err, readOnly, onRenamePort }: FieldProps) {
  const cases = Array.isArray(config.cases) ? (config.cases as Array<{ port?: string; when?: string }>) : [];
  const save = (next: Array<{ port?: string; when?: string }>) => setConfig({ cases: next, case_ports: next.map((x) => x.port ?? "") });
  return (
    <fieldset className="subfieldset">
      <legend>{field.label}</legend>
      {field.help ? <p className="help">{field.help}</p> : null}
      {cases.map((c, i) => (
        <div key={i} className="case-row">
          <Text
            label={`Port ${i + 1}`}
            mono
            readOnly={readOnly}
            value={String(c.port ?? "")}
            error={err(`config.cases[${i}].port`)}
            onChange={(v) => {
              if (c.port) onRenamePort(c.port, v);
              save(cases.map((x, j) => (j === i ? { ...x, port: v } : x)));
            }}
          />
          <Text
            label={`When (CEL) ${i + 1}`}
            mono
            readOnly={readOnly}
            value={String(c.when ?? "")}
            error={err(`config.cases[${i}].when`)}
            testId={`case-when-${i}`}
            onChange={(v) => setConfig({ cases: cases.map((x, j) => (j === i ? { ...x, when: v } : x)) })}
          />
          {!readOnly ? (
            <button type="button" className="btn btn-small btn-quiet" onClick={() => save(cases.filter((_, j) => j !== i))}>
              Remove case
            </button>
          ) : null}
        </div>
      ))}
      {err("config.cases") ? <p className="field-error">{err("config.cases")}</p> : null}
      {err("config.case_ports") ? <p className="field-error">{err("config.case_ports")}</p> : null}
      {!readOnly ? (
        <button
          type="button"
          className="btn btn-small"
          onClick={() => {
            const taken = new Set(cases.map((c) => c.port));
            let n = cases.length + 1;
            while (taken.has(`case_${n}`)) n++;
            save([...cases, { port: `case_${n}`, when: "true" }]);
          }}
        >
          Add case
        </button>
      ) : null}
    </fieldset>
  );
}

/** One config field, rendered from the kind's descriptor. */
function Field(props: FieldProps) {
  const { field, config, setConfig, err, lookups, readOnly } = props;
  const key = field.key;
  const error = err(`config.${key}`);
  const common = { label: field.label, readOnly, error, ...(field.help ? { help: field.help } : {}), ...(field.testId ? { testId: field.testId } : {}) };
  if (field.showIf && config[field.showIf.key] !== field.showIf.equals) return null;
  const setText = (v: string) => {
    if (field.isPort && typeof config[key] === "string") props.onRenamePort(config[key] as string, v);
    setConfig({ [key]: v });
  };
  switch (field.input) {
    case "cases":
      return <CasesEditor {...props} />;
    case "response_schema": {
      const schema = config[key] ?? DEFAULT_RESPONSE_SCHEMA;
      return (
        <>
          <SchemaBuilder schema={schema} readOnly={readOnly} onChange={(next) => setConfig({ [key]: next })} />
          <JsonText {...common} value={schema} onChange={(v) => setConfig({ [key]: v })} />
        </>
      );
    }
    case "json":
      return <JsonText {...common} value={config[key] ?? {}} onChange={(v) => setConfig({ [key]: v })} />;
    case "number": {
      const { testId: _unused, ...numberProps } = common;
      return <NumberInput {...numberProps} value={config[key]} onChange={(v) => setConfig({ [key]: v })} />;
    }
    case "port_list":
      return (
        <Text
          {...common}
          mono
          value={Array.isArray(config[key]) ? (config[key] as string[]).join(", ") : ""}
          onChange={(v) =>
            setConfig({
              [key]: v
                .split(",")
                .map((s) => s.trim())
                .filter(Boolean),
            })
          }
        />
      );
    case "select": {
      const options = field.options ? [...field.options] : field.lookup ? lookupOptions(lookups, field.lookup) : [];
      // Nothing to choose from yet (no providers, say): the id can still be typed.
      if (options.length === 0 && field.lookup) return <Text {...common} label={`${field.label} (id)`} mono value={String(config[key] ?? "")} onChange={setText} />;
      const clears = Object.fromEntries((field.excludes ?? []).map((other) => [other, undefined]));
      return <Select {...common} value={String(config[key] ?? "")} options={options} onChange={(v) => setConfig({ [key]: v || undefined, ...(v ? clears : {}) })} />;
    }
    default:
      return <Text {...common} mono={field.input === "code"} multiline={field.input === "multiline"} value={String(config[key] ?? "")} onChange={setText} />;
  }
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
