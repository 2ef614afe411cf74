// The answer form, generated from the task's response_schema (JSON Schema): enums become option
// buttons (the first one answers to keys 1-9), strings a text area, booleans a checkbox, numbers a
// number field, arrays of enums checkboxes; anything else a JSON field. The server checks the
// answer against the same schema and its 422 paths ($.field) land next to the fields.

export type FieldKind = "enum" | "boolean" | "text" | "number" | "multi" | "json";

export interface FieldSpec {
  name: string;
  label: string;
  kind: FieldKind;
  required: boolean;
  description?: string;
  options?: Array<{ value: unknown; label: string }>;
  maxLength?: number;
  integer?: boolean;
  defaultValue?: unknown;
}

type Schema = Record<string, unknown>;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

function humanize(name: string): string {
  const spaced = name
    .replace(/[_-]+/gu, " ")
    .replace(/([a-z])([A-Z])/gu, "$1 $2")
    .trim();
  return spaced.charAt(0).toUpperCase() + spaced.slice(1);
}

function optionLabel(value: unknown): string {
  return typeof value === "string" ? humanize(value) : JSON.stringify(value);
}

function optionsOf(schema: Schema): Array<{ value: unknown; label: string }> | null {
  if (Array.isArray(schema.enum)) return schema.enum.map((value) => ({ value, label: optionLabel(value) }));
  if ("const" in schema) return [{ value: schema.const, label: typeof schema.title === "string" ? schema.title : optionLabel(schema.const) }];
  const alternatives = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : null;
  if (alternatives && alternatives.length > 0 && alternatives.every((alt) => isRecord(alt) && "const" in alt)) {
    return alternatives.map((alt) => {
      const a = alt as Schema;
      return { value: a.const, label: typeof a.title === "string" ? a.title : optionLabel(a.const) };
    });
  }
  return null;
}

function fieldOf(name: string, raw: unknown, required: boolean): FieldSpec {
  const schema = isRecord(raw) ? raw : {};
  const base = {
    name,
    label: typeof schema.title === "string" ? schema.title : humanize(name),
    required,
    ...(typeof schema.description === "string" ? { description: schema.description } : {}),
    ...("default" in schema ? { defaultValue: schema.default } : {}),
  };
  const options = optionsOf(schema);
  if (options) return { ...base, kind: "enum", options };
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (type === "boolean") return { ...base, kind: "boolean" };
  if (type === "string") return { ...base, kind: "text", ...(typeof schema.maxLength === "number" ? { maxLength: schema.maxLength } : {}) };
  if (type === "number" || type === "integer") return { ...base, kind: "number", integer: type === "integer" };
  if (type === "array" && isRecord(schema.items)) {
    const itemOptions = optionsOf(schema.items);
    if (itemOptions) return { ...base, kind: "multi", options: itemOptions };
  }
  return { ...base, kind: "json" };
}

const PRIMARY_NAMES = ["outcome", "verdict", "decision", "action", "result", "label", "classification"];

/** The form's fields, the primary enum first-class; null when the schema is not an object of properties. */
export function fieldsOf(responseSchema: unknown): { fields: FieldSpec[]; primary: string | null } | null {
  if (!isRecord(responseSchema)) return null;
  const properties = isRecord(responseSchema.properties) ? responseSchema.properties : null;
  if (!properties || Object.keys(properties).length === 0) return null;
  const required = new Set(Array.isArray(responseSchema.required) ? responseSchema.required.filter((r): r is string => typeof r === "string") : []);
  const fields = Object.entries(properties).map(([name, schema]) => fieldOf(name, schema, required.has(name)));
  const enums = fields.filter((f) => f.kind === "enum");
  const primary = enums.find((f) => PRIMARY_NAMES.includes(f.name.toLowerCase()))?.name ?? enums.find((f) => f.required)?.name ?? enums[0]?.name ?? null;
  // The primary question first, then required fields, then the rest, each in schema order.
  const rank = (f: FieldSpec) => (f.name === primary ? 0 : f.required ? 1 : 2);
  return { fields: [...fields].sort((a, b) => rank(a) - rank(b)), primary };
}

export type Values = Record<string, unknown>;

export function initialValues(fields: FieldSpec[]): Values {
  const values: Values = {};
  for (const field of fields) {
    if (field.defaultValue !== undefined) values[field.name] = field.kind === "json" ? JSON.stringify(field.defaultValue, null, 2) : field.defaultValue;
    else if (field.kind === "boolean") values[field.name] = false;
    else if (field.kind === "multi") values[field.name] = [];
  }
  return values;
}

/** The response to send, and the problems found before sending. */
export function buildResponse(fields: FieldSpec[], values: Values): { response: Record<string, unknown>; problems: Record<string, string> } {
  const response: Record<string, unknown> = {};
  const problems: Record<string, string> = {};
  for (const field of fields) {
    const value = values[field.name];
    switch (field.kind) {
      case "enum":
        if (value !== undefined) response[field.name] = value;
        else if (field.required) problems[field.name] = `Choose ${field.label.toLowerCase()}.`;
        break;
      case "boolean":
        response[field.name] = value === true;
        break;
      case "text":
        if (typeof value === "string" && value.trim() !== "") response[field.name] = value;
        else if (field.required) problems[field.name] = `${field.label} is required.`;
        break;
      case "number":
        if (typeof value === "string" && value.trim() !== "") {
          const n = Number(value);
          if (!Number.isFinite(n) || (field.integer && !Number.isInteger(n))) problems[field.name] = `${field.label} must be ${field.integer ? "a whole number" : "a number"}.`;
          else response[field.name] = n;
        } else if (typeof value === "number") response[field.name] = value;
        else if (field.required) problems[field.name] = `${field.label} is required.`;
        break;
      case "multi":
        if (Array.isArray(value) && value.length > 0) response[field.name] = value;
        else if (field.required) problems[field.name] = `Choose at least one ${field.label.toLowerCase()}.`;
        break;
      case "json":
        if (typeof value === "string" && value.trim() !== "") {
          try {
            response[field.name] = JSON.parse(value);
          } catch {
            problems[field.name] = `${field.label} must be valid JSON.`;
          }
        } else if (field.required) problems[field.name] = `${field.label} is required.`;
        break;
    }
  }
  return { response, problems };
}

/** Server-side problems ({ path: "$.verdict", message }) by field name; "" for the whole answer. */
export function problemsByField(details: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(details)) return out;
  for (const detail of details) {
    if (!isRecord(detail)) continue;
    const path = typeof detail.path === "string" ? detail.path : "$";
    const message = typeof detail.message === "string" ? detail.message : "Not accepted.";
    const name = /^\$\.([^.[\]]+)/u.exec(path)?.[1] ?? "";
    out[name] = out[name] ? `${out[name]} ${message}` : message;
  }
  return out;
}

interface FormProps {
  fields: FieldSpec[];
  primary: string | null;
  values: Values;
  onChange: (name: string, value: unknown) => void;
  problems: Record<string, string>;
  disabled: boolean;
}

export function ResponseFields({ fields, primary, values, onChange, problems, disabled }: FormProps) {
  return (
    <>
      {fields.map((field) => {
        const id = `answer-${field.name}`;
        const error = problems[field.name];
        const describedBy = [field.description ? `${id}-help` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined;
        const help = field.description ? (
          <p className="help" id={`${id}-help`}>
            {field.description}
          </p>
        ) : null;
        const errorText = error ? (
          <p className="field-error" id={`${id}-error`}>
            {error}
          </p>
        ) : null;
        const required = field.required ? (
          <span className="required" aria-hidden="true">
            {" "}
            *
          </span>
        ) : null;
        if (field.kind === "enum" || field.kind === "multi") {
          const multi = field.kind === "multi";
          const selected = multi ? (Array.isArray(values[field.name]) ? (values[field.name] as unknown[]) : []) : [values[field.name]];
          const numbered = field.name === primary;
          return (
            <fieldset key={field.name} className={`field options${error ? " field-invalid" : ""}`} aria-describedby={describedBy} {...(multi ? {} : { role: "radiogroup", "aria-required": field.required })}>
              <legend>
                {field.label}
                {required}
                {numbered ? <span className="muted small"> (keys 1–{Math.min(field.options!.length, 9)})</span> : null}
              </legend>
              <div className="option-row">
                {field.options!.map((option, i) => {
                  const checked = selected.some((v) => JSON.stringify(v) === JSON.stringify(option.value));
                  return (
                    <label key={JSON.stringify(option.value)} className={`option${checked ? " option-checked" : ""}`}>
                      <input
                        type={multi ? "checkbox" : "radio"}
                        name={id}
                        checked={checked}
                        disabled={disabled}
                        data-testid={`option-${field.name}-${String(option.value)}`}
                        onChange={() => {
                          if (!multi) onChange(field.name, option.value);
                          else onChange(field.name, checked ? selected.filter((v) => JSON.stringify(v) !== JSON.stringify(option.value)) : [...selected, option.value]);
                        }}
                      />
                      {/* biome-ignore lint/a11y/noAriaHiddenOnFocusable: the <kbd> is not focusable (the radio beside it is); the digit is a visual hint, the shortcuts are listed in the keyboard help */}
                      {numbered && i < 9 ? <kbd aria-hidden="true">{i + 1}</kbd> : null}
                      <span>{option.label}</span>
                    </label>
                  );
                })}
              </div>
              {help}
              {errorText}
            </fieldset>
          );
        }
        if (field.kind === "boolean") {
          return (
            <div key={field.name} className={`field field-check${error ? " field-invalid" : ""}`}>
              <label>
                <input type="checkbox" id={id} checked={values[field.name] === true} disabled={disabled} aria-describedby={describedBy} onChange={(event) => onChange(field.name, event.target.checked)} />
                <span>
                  {field.label}
                  {required}
                </span>
              </label>
              {help}
              {errorText}
            </div>
          );
        }
        if (field.kind === "number") {
          return (
            <div key={field.name} className={`field${error ? " field-invalid" : ""}`}>
              <label htmlFor={id}>
                {field.label}
                {required}
              </label>
              <input
                id={id}
                type="number"
                inputMode={field.integer ? "numeric" : "decimal"}
                step={field.integer ? 1 : "any"}
                value={values[field.name] === undefined ? "" : String(values[field.name])}
                disabled={disabled}
                aria-describedby={describedBy}
                aria-invalid={error ? true : undefined}
                aria-required={field.required}
                onChange={(event) => onChange(field.name, event.target.value)}
              />
              {help}
              {errorText}
            </div>
          );
        }
        const json = field.kind === "json";
        return (
          <div key={field.name} className={`field${error ? " field-invalid" : ""}`}>
            <label htmlFor={id}>
              {field.label}
              {required}
              {json ? <span className="muted small"> (JSON)</span> : null}
            </label>
            <textarea
              id={id}
              rows={json ? 4 : 3}
              className={json ? "mono" : undefined}
              value={typeof values[field.name] === "string" ? (values[field.name] as string) : ""}
              disabled={disabled}
              maxLength={field.maxLength}
              aria-describedby={describedBy}
              aria-invalid={error ? true : undefined}
              aria-required={field.required}
              onChange={(event) => onChange(field.name, event.target.value)}
            />
            {help}
            {errorText}
          </div>
        );
      })}
    </>
  );
}
