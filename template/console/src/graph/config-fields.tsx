// The config fields of a node, rendered from its kind's descriptor: text, number, select (from
// the installation's lookups), JSON, port lists, the cases of a condition, the review-form
// builder, and the input mapping (CEL).
import { useEffect, useId, useState, type ReactNode } from "react";
import type { GraphNode } from "../api";
import type { ConfigField, Lookup } from "../../../src/workflows/kinds/descriptor";
import { JsonText, NumberInput, Select, Text } from "./controls";
import { DEFAULT_RESPONSE_SCHEMA, fieldProblems, type PinnedProblem } from "./kinds";

export interface Lookups {
  queues: Array<{ id: string; name: string }>;
  actionTypes: Array<{ key: string; name: string }>;
  providers: Array<{ id: string; name?: string; model: string }>;
  policies: Array<{ name: string; retiredAt: string | null; latest: { id: string; version: number } | null }>;
  components: { builtIns: string[]; versions: Array<{ id: string; label: string }> };
  endpoints: Array<{ id: string; url: string }>;
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
  // biome-ignore lint/correctness/useExhaustiveDependencies: follows the options' text, not the array (a new one each render)
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

export function MappingEditor({
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
        // biome-ignore lint/suspicious/noArrayIndexKey: a case has no identity but its place; its port name is edited here, so keying by it would remount the row on every keystroke
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
export function Field(props: FieldProps) {
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
