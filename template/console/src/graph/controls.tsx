// The form controls of the config panel: a labelled row that ties its help and error to the
// control (aria-describedby, aria-invalid), and the text, number, select and JSON inputs on it.
import { useEffect, useId, useState, type ReactNode } from "react";

export type Ctl = { id: string; "aria-describedby"?: string; "aria-invalid"?: boolean };

export function Row({ label, help, error, children }: { label: ReactNode; help?: ReactNode; error?: string; children: (ctl: Ctl) => ReactNode }) {
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
export function Text({
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

export function NumberInput({ label, value, onChange, error, help, readOnly }: { label: ReactNode; value: unknown; onChange: (v: number | undefined) => void; error?: string; help?: ReactNode; readOnly: boolean }) {
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

export function Select({
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
export function JsonText({ label, value, onChange, error, help, readOnly, testId }: { label: ReactNode; value: unknown; onChange: (v: unknown) => void; error?: string; help?: ReactNode; readOnly: boolean; testId?: string }) {
  const [text, setText] = useState(() => JSON.stringify(value ?? null, null, 2));
  const [parseError, setParseError] = useState<string | undefined>();
  // biome-ignore lint/correctness/useExhaustiveDependencies: follows the value's JSON, not its identity (a new object each render); the text is left out so typing never resets it
  useEffect(() => {
    try {
      if (JSON.stringify(JSON.parse(text)) === JSON.stringify(value ?? null)) return;
    } catch {
      // The person is typing; keep their text.
      return;
    }
    setText(JSON.stringify(value ?? null, null, 2));
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
