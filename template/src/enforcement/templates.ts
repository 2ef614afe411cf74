// Message and statement templates: `{{name}}` placeholders filled from a node's evaluated inputMapping.
import { AppError } from "../errors";

const MAX_MESSAGE_CHARS = 10_000;

/** `{{name}}` placeholders filled from the node's evaluated inputMapping; a missing one is an error. */
export function renderTemplate(template: string, values: Record<string, unknown>, nodeId: string): string {
  const text = template.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/gu, (_match, name: string) => {
    if (!(name in values) || values[name] === null || values[name] === undefined) {
      throw new AppError("message.variable_missing", `Template variable ${name} of ${nodeId} has no value in inputMapping.`);
    }
    const value = values[name];
    return typeof value === "string" ? value : JSON.stringify(value);
  });
  if (text.length > MAX_MESSAGE_CHARS) throw new AppError("message.too_long", `The message of ${nodeId} exceeds ${MAX_MESSAGE_CHARS} characters.`);
  return text;
}
