// Per-kind config rules for workflow nodes (DESIGN.md §2); paths are relative to the node.
import type { ErrorDetail } from "../errors";
import { MAX_WAIT_SECONDS, NODE_ID_PATTERN, PORT_PATTERN, type JsonValue, type WorkflowNodeV1 } from "./types";

type Problem = ErrorDetail;

const EVENT_TYPE_PATTERN = /^[A-Za-z0-9._:-]{1,100}$/u;
const CODE_PATTERN = /^[A-Za-z0-9._:-]{1,100}$/u;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function ports(value: JsonValue | undefined, path: string, problems: Problem[], options: { nonEmpty: boolean }): string[] {
  if (!Array.isArray(value) || (options.nonEmpty && value.length === 0)) {
    problems.push({ path, code: "config_invalid", message: `${path.replace("config.", "")} must be a${options.nonEmpty ? " non-empty" : "n"} array of port names.` });
    return [];
  }
  const seen = new Set<string>();
  value.forEach((port, i) => {
    if (typeof port !== "string" || !PORT_PATTERN.test(port)) problems.push({ path: `${path}[${i}]`, code: "identifier_invalid", message: "A port name must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'." });
    else if (seen.has(port)) problems.push({ path: `${path}[${i}]`, code: "port_duplicate", message: `Port ${port} is declared twice.` });
    else seen.add(port);
  });
  return [...seen];
}

function requireString(config: Record<string, unknown>, key: string, pattern: RegExp, problems: Problem[], message: string): void {
  const value = config[key];
  if (typeof value !== "string" || !pattern.test(value)) problems.push({ path: `config.${key}`, code: "config_invalid", message });
}

function optionalSeconds(config: Record<string, unknown>, key: string, problems: Problem[]): void {
  const value = config[key];
  if (value !== undefined && (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_WAIT_SECONDS)) {
    problems.push({ path: `config.${key}`, code: "config_invalid", message: `${key} must be an integer from 1 to ${MAX_WAIT_SECONDS} (one year).` });
  }
}

function conditionRules(node: WorkflowNodeV1, problems: Problem[]): void {
  const casePorts = ports(node.config.case_ports, "config.case_ports", problems, { nonEmpty: false });
  const fallback = node.config.default_port;
  if (typeof fallback !== "string" || !PORT_PATTERN.test(fallback)) {
    problems.push({ path: "config.default_port", code: "config_invalid", message: "default_port must be a port name." });
  } else if (casePorts.includes(fallback)) {
    problems.push({ path: "config.default_port", code: "port_duplicate", message: "default_port must differ from every case port." });
  }
  const cases = node.config.cases;
  if (!Array.isArray(cases)) {
    problems.push({ path: "config.cases", code: "config_invalid", message: "cases must be an array of { port, when }." });
    return;
  }
  const covered = new Set<string>();
  cases.forEach((entry, i) => {
    if (!isRecord(entry) || typeof entry.port !== "string" || typeof entry.when !== "string") {
      problems.push({ path: `config.cases[${i}]`, code: "config_invalid", message: "A case is { port, when } with a CEL expression in when." });
    } else if (!casePorts.includes(entry.port)) {
      // Only a well-formed port name is echoed back; anything else is arbitrary user text.
      const named = PORT_PATTERN.test(entry.port) ? `Case port ${entry.port}` : "The case port";
      problems.push({ path: `config.cases[${i}].port`, code: "edge_port_unknown", message: `${named} is not listed in case_ports.` });
    } else if (covered.has(entry.port)) {
      problems.push({ path: `config.cases[${i}].port`, code: "port_duplicate", message: `Port ${entry.port} has two cases.` });
    } else covered.add(entry.port);
  });
  for (const port of casePorts) {
    if (!covered.has(port)) problems.push({ path: "config.case_ports", code: "config_invalid", message: `Case port ${port} has no case.` });
  }
}

/** Kind-specific checks of `config`; structural checks (ports, edges) live in validation.ts. */
export function validateNodeConfig(node: WorkflowNodeV1): Problem[] {
  const problems: Problem[] = [];
  const config = node.config;
  switch (node.kind) {
    case "end":
      if (config.terminal_code !== undefined) requireString(config, "terminal_code", CODE_PATTERN, problems, "terminal_code must be a short code of A-Z, a-z, 0-9, '.', '_', ':' or '-'.");
      break;
    case "condition":
      conditionRules(node, problems);
      break;
    case "delay": {
      const seconds = config.seconds;
      if (!Number.isInteger(seconds) || (seconds as number) < 1 || (seconds as number) > MAX_WAIT_SECONDS) {
        problems.push({ path: "config.seconds", code: "config_invalid", message: `seconds must be an integer from 1 to ${MAX_WAIT_SECONDS} (one year).` });
      }
      break;
    }
    case "delay_until":
      if (!node.inputMapping || typeof node.inputMapping.timestamp !== "string") {
        problems.push({ path: "inputMapping.timestamp", code: "delay_timestamp_required", message: "delay_until needs inputMapping.timestamp, a CEL expression giving an ISO time." });
      }
      break;
    case "enrichment":
      if (typeof config.component_version_id !== "string" && typeof config.component !== "string") {
        problems.push({ path: "config.component_version_id", code: "config_invalid", message: "enrichment needs config.component_version_id or the name of a built-in component in config.component." });
      }
      break;
    case "ai_proposal":
      ports(config.result_ports, "config.result_ports", problems, { nonEmpty: true });
      if (typeof config.provider_id !== "string" && typeof config.component_version_id !== "string") {
        problems.push({ path: "config.provider_id", code: "config_invalid", message: "ai_proposal needs config.provider_id (or a component_version_id)." });
      }
      break;
    case "human_task":
      optionalSeconds(config, "timeout_seconds", problems);
      if (config.response_schema !== undefined && !isRecord(config.response_schema)) {
        problems.push({ path: "config.response_schema", code: "config_invalid", message: "response_schema must be a JSON Schema object." });
      }
      if (config.queue_id !== undefined) requireString(config, "queue_id", NODE_ID_PATTERN, problems, "queue_id must be an identifier.");
      break;
    case "wait_for_event":
      requireString(config, "event_type", EVENT_TYPE_PATTERN, problems, "event_type must be 1-100 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.");
      optionalSeconds(config, "timeout_seconds", problems);
      break;
    case "send_message":
      if (typeof config.template !== "string" && typeof config.template_id !== "string") {
        problems.push({ path: "config.template", code: "config_invalid", message: "send_message needs config.template (or template_id)." });
      }
      if (typeof config.recipient !== "string") problems.push({ path: "config.recipient", code: "config_invalid", message: "send_message needs config.recipient (reporter, subject_owner or an address)." });
      break;
    case "handoff":
      if (typeof config.queue_id !== "string" && typeof config.endpoint_id !== "string" && typeof config.recipient !== "string") {
        problems.push({ path: "config.queue_id", code: "config_invalid", message: "handoff needs config.queue_id (another queue) or config.endpoint_id (an external recipient)." });
      }
      break;
    case "decision":
      if (typeof config.outcome !== "string" || config.outcome === "") {
        problems.push({ path: "config.outcome", code: "config_invalid", message: "decision needs config.outcome." });
      }
      if (!isRecord(config.restrictions)) {
        problems.push({ path: "config.restrictions", code: "config_invalid", message: "decision needs config.restrictions: { visibility?, account?, monetary?, provision? } (at least one)." });
      }
      if (typeof config.statement !== "string" && typeof config.explanation !== "string") {
        problems.push({ path: "config.statement", code: "config_invalid", message: "decision needs config.statement, the facts and circumstances relied on." });
      }
      break;
    case "start_linked_workflow":
      requireString(config, "workflow_version_id", NODE_ID_PATTERN, problems, "start_linked_workflow needs config.workflow_version_id.");
      break;
    case "action":
      requireString(config, "action_type", CODE_PATTERN, problems, "action needs config.action_type, the key of an action type.");
      optionalSeconds(config, "approval_timeout_seconds", problems);
      break;
    default:
      break;
  }
  return problems;
}
