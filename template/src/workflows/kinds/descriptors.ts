// The node kinds of the graph format (docs/graph-format.md), one descriptor each: ports, labels,
// config fields and their checks, what the kernel does with it, how shadow mode simulates it, and
// what it names in the installation. Pure: the console imports this file as it is.
// Adding a kind: its descriptor here, its executor in executors.ts, and a test.
import { INCIDENT_TYPES } from "../../lib/cybertipline-vocabulary";
import { decisionConfigProblems } from "../../lib/dsa-vocabulary";
import { NODE_ID_PATTERN, type JsonObject, type JsonValue } from "../types";
import { CODE_PATTERN, EVENT_TYPE_PATTERN, conditionCases, conditionRules, isRecord, optionalSeconds, portList, requireString, responsePatternProblems, stringList } from "./checks";
import type { ConfigReference, KindDescriptor, Problem } from "./descriptor";

const ref = (config: JsonObject, key: string, type: ConfigReference["type"]): ConfigReference[] => (typeof config[key] === "string" && config[key] !== "" ? [{ path: `config.${key}`, type, value: config[key] as string }] : []);

const POLICY_REFERENCE = /^[A-Za-z0-9._:-]{1,200}$/u;
const LABEL = /^[A-Za-z0-9_.:-]{1,100}$/u;

/** `label_ports`: a model's own labels (safe, unsafe, a category such as S10) → result ports. */
function labelPortProblems(config: JsonObject): Problem[] {
  const labels = config.label_ports;
  if (labels === undefined) return [];
  if (!isRecord(labels)) return [{ path: "config.label_ports", code: "config_invalid", message: 'label_ports must be an object of label → result port, e.g. { "safe": "no_violation", "unsafe": "violation" }.' }];
  const ports = stringList(config.result_ports);
  return Object.entries(labels).flatMap(([label, port]): Problem[] => {
    if (!LABEL.test(label)) return [{ path: "config.label_ports", code: "config_invalid", message: "A label must be 1-100 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'." }];
    if (typeof port !== "string" || !ports.includes(port)) return [{ path: `config.label_ports.${label}`, code: "config_invalid", message: `Label ${label} must map to one of the node's result_ports.` }];
    return [];
  });
}

const DEFAULT_RESPONSE_SCHEMA: JsonObject = {
  type: "object",
  required: ["outcome"],
  additionalProperties: false,
  properties: { outcome: { enum: ["remove", "keep", "escalate"] }, note: { type: "string", maxLength: 2000 } },
};

const timeoutField = (help: string) => ({ key: "timeout_seconds", label: "Timeout (seconds)", input: "number", help }) as const;

const DEFINITIONS = {
  start: {
    label: "Start",
    group: "Flow",
    description: "Where every run begins (exactly one).",
    protocol: "step",
    ports: ["success"],
    canFail: false,
    readsContext: false,
    mapping: null,
    fields: [],
    defaults: {},
  },
  end: {
    label: "End",
    group: "Flow",
    description: "Finishes the run with a terminal code; its input mapping is the result.",
    protocol: "step",
    ports: [],
    canFail: false,
    readsContext: true,
    mapping: { label: "Run result", help: "The run's result: each field a CEL expression." },
    fields: [{ key: "terminal_code", label: "Terminal code", input: "text", help: "e.g. resolved, removed; default complete." }],
    defaults: { config: { terminal_code: "complete" } },
    validate: (node) => (node.config.terminal_code === undefined ? [] : requireString(node.config, "terminal_code", CODE_PATTERN, "terminal_code must be a short code of A-Z, a-z, 0-9, '.', '_', ':' or '-'.")),
  },
  condition: {
    label: "Condition",
    group: "Flow",
    description: "Routes by CEL cases; exactly one case or the default port.",
    protocol: "step",
    canFail: true,
    readsContext: true,
    ports: (config) => [...stringList(config.case_ports), ...(typeof config.default_port === "string" ? [config.default_port] : [])],
    mapping: { label: "Node input", help: "Evaluated first; cases can read node_input." },
    fields: [
      { key: "cases", label: "Cases", input: "cases", help: "The first case whose CEL is true picks its port; more than one true is an error. Variables: input, report, steps, event, run, node_input." },
      { key: "default_port", label: "Default port", input: "code", isPort: true },
    ],
    defaults: { config: { cases: [{ port: "yes", when: "report.category == 'scams_and_fraud'" }], case_ports: ["yes"], default_port: "no" } },
    expressions: (config) => (Array.isArray(config.cases) ? config.cases.map((entry, i) => ({ path: `config.cases[${i}].when`, text: isRecord(entry) ? entry.when : undefined })) : []),
    validate: (node) => conditionRules(node.config),
  },
  join: {
    label: "Join",
    group: "Flow",
    description: "Where the branches of a fork meet again.",
    protocol: "step",
    ports: ["success"],
    canFail: false,
    readsContext: false,
    mapping: null,
    fields: [],
    defaults: {},
  },
  delay: {
    label: "Delay",
    group: "Flow",
    description: "Waits a number of seconds.",
    protocol: "delay",
    ports: ["completed"],
    canFail: true,
    readsContext: false,
    mapping: { label: "Input mapping", help: "Each field is a CEL expression." },
    fields: [{ key: "seconds", label: "Seconds", input: "number", help: "1 second to one year." }],
    defaults: { config: { seconds: 3600 } },
    validate: (node) => {
      const seconds = node.config.seconds;
      return Number.isInteger(seconds) && (seconds as number) >= 1 ? optionalSeconds(node.config, "seconds") : [{ path: "config.seconds", code: "config_invalid", message: "seconds must be an integer from 1 to 31536000 (one year)." }];
    },
  },
  delay_until: {
    label: "Delay until",
    group: "Flow",
    description: "Waits until a time computed by CEL.",
    protocol: "delay",
    ports: ["completed"],
    canFail: true,
    readsContext: true,
    mapping: { label: "Inputs", help: "timestamp: a CEL expression giving an ISO time." },
    fields: [],
    defaults: { inputMapping: { timestamp: "input.at" } },
    validate: (node) =>
      !node.inputMapping || typeof node.inputMapping.timestamp !== "string"
        ? [{ path: "inputMapping.timestamp", code: "delay_timestamp_required", message: "delay_until needs inputMapping.timestamp, a CEL expression giving an ISO time." }]
        : [],
  },
  enrichment: {
    label: "Enrichment",
    group: "Automation",
    description: "Runs a component (built-in bank or your own sandboxed code).",
    protocol: "step",
    ports: ["success"],
    canFail: true,
    content: { openOutput: ["port", "component", "componentVersionId", "latencyMs", "matched", "count", "resultCode", "confidence", "data.matched", "data.count", "data.resultCode", "data.confidence"], purpose: "enrichment" },
    readsContext: true,
    mapping: { label: "Component input", help: "What the component receives (text, urls…)." },
    fields: [
      { key: "component", label: "Built-in component", input: "select", lookup: "builtIns", excludes: ["component_version_id"] },
      { key: "component_version_id", label: "…or a component version", input: "select", lookup: "componentVersions", excludes: ["component"] },
    ],
    defaults: { config: { component: "subject_history" } },
    validate: (node) =>
      typeof node.config.component_version_id !== "string" && typeof node.config.component !== "string"
        ? [{ path: "config.component_version_id", code: "config_invalid", message: "enrichment needs config.component_version_id or the name of a built-in component in config.component." }]
        : [],
    references: (config) => ref(config, "component_version_id", "component_version"),
  },
  ai_proposal: {
    label: "AI proposal",
    group: "Automation",
    description: "Asks a model to choose one of its result ports, with a rationale.",
    protocol: "step",
    canFail: true,
    content: { openOutput: ["port", "resultCode", "confidence", "provider", "policy", "usage", "latencyMs"], purpose: "ai_proposal" },
    readsContext: true,
    ports: (config) => stringList(config.result_ports),
    mapping: { label: "Model input", help: "What the model sees, besides its instructions." },
    fields: [
      { key: "provider_id", label: "AI provider", input: "select", lookup: "providers" },
      { key: "policy_version_id", label: "Policy", input: "select", lookup: "policies", help: "A policy (its newest version when the node runs) or one pinned version; its text leads the prompt." },
      { key: "instructions", label: "Instructions", input: "multiline" },
      { key: "result_ports", label: "Result ports", input: "port_list", help: "Comma-separated, by precedence; the model must choose one." },
      { key: "label_ports", label: "Label ports", input: "json", help: 'For models answering in their own labels (Llama Guard): { "safe": "no_violation", "unsafe": "violation", "S10": "hate" }.' },
    ],
    defaults: { config: { provider_id: "", instructions: "Decide whether the reported content breaks the policy.", result_ports: ["violation", "no_violation"] } },
    validate: (node) => {
      const problems: Problem[] = [];
      portList(node.config.result_ports, "config.result_ports", problems, { nonEmpty: true });
      if (typeof node.config.provider_id !== "string" && typeof node.config.component_version_id !== "string") {
        problems.push({ path: "config.provider_id", code: "config_invalid", message: "ai_proposal needs config.provider_id (or a component_version_id)." });
      }
      if (node.config.policy_version_id !== undefined && (typeof node.config.policy_version_id !== "string" || !POLICY_REFERENCE.test(node.config.policy_version_id))) {
        problems.push({ path: "config.policy_version_id", code: "config_invalid", message: "policy_version_id must be a policy version id or a policy's name." });
      }
      problems.push(...labelPortProblems(node.config));
      return problems;
    },
    references: (config) => [...ref(config, "provider_id", "ai_provider"), ...ref(config, "policy_version_id", "policy_version"), ...ref(config, "component_version_id", "component_version")],
  },
  human_task: {
    label: "Human task",
    group: "People",
    description: "Puts a task in a review queue and waits for the answer.",
    protocol: "wait",
    ports: ["completed", "timeout"],
    canFail: true,
    content: { openOutput: "all", purpose: "human_review" },
    readsContext: true,
    shadow: { port: "completed" },
    mapping: { label: "What the reviewer sees", help: "Each field is a CEL expression; the task shows its value." },
    fields: [
      { key: "queue_id", label: "Queue", input: "select", lookup: "queues", help: "Queues are created under Settings → Queues.", testId: "queue-select" },
      { key: "response_schema", label: "Response schema (JSON Schema)", input: "response_schema", help: "The answer is checked against it; enums become buttons, strings text areas, booleans checkboxes.", testId: "response-schema" },
      timeoutField("The timeout port is taken after this; default one day."),
      { key: "priority", label: "Priority", input: "number" },
      { key: "task_type", label: "Task type", input: "text" },
    ],
    defaults: { config: { response_schema: DEFAULT_RESPONSE_SCHEMA, timeout_seconds: 86_400 } },
    validate: (node) => [
      ...optionalSeconds(node.config, "timeout_seconds"),
      ...(node.config.response_schema !== undefined && !isRecord(node.config.response_schema) ? [{ path: "config.response_schema", code: "config_invalid", message: "response_schema must be a JSON Schema object." }] : []),
      ...responsePatternProblems(node.config.response_schema),
      ...(node.config.queue_id !== undefined ? requireString(node.config, "queue_id", NODE_ID_PATTERN, "queue_id must be an identifier.") : []),
    ],
    references: (config) => ref(config, "queue_id", "queue"),
  },
  wait_for_event: {
    label: "Wait for event",
    group: "People",
    description: "Waits for an event sent to the run.",
    protocol: "wait",
    ports: ["received", "timeout"],
    canFail: true,
    readsContext: false,
    mapping: { label: "Input mapping", help: "Each field is a CEL expression." },
    fields: [{ key: "event_type", label: "Event type", input: "code" }, timeoutField("The timeout port is taken after this; default one day.")],
    defaults: { config: { event_type: "external.update", timeout_seconds: 86_400 } },
    validate: (node) => [...requireString(node.config, "event_type", EVENT_TYPE_PATTERN, "event_type must be 1-100 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'."), ...optionalSeconds(node.config, "timeout_seconds")],
  },
  send_message: {
    label: "Send message",
    group: "Effects",
    description: "Sends a templated message to the reporter, the owner or an address.",
    protocol: "step",
    ports: ["sent"],
    canFail: true,
    readsContext: true,
    shadow: { port: "sent" },
    mapping: { label: "Template variables", help: "Available as {{name}} in the template." },
    fields: [
      { key: "template", label: "Template", input: "multiline", help: "{{name}} is replaced by the input mapping's value." },
      { key: "recipient", label: "Recipient", input: "text", help: "reporter, subject_owner or an address." },
    ],
    defaults: { config: { template: "Thank you for your report. We have reviewed it.", recipient: "reporter" } },
    validate: (node) => [
      ...(typeof node.config.template !== "string" && typeof node.config.template_id !== "string" ? [{ path: "config.template", code: "config_invalid", message: "send_message needs config.template (or template_id)." }] : []),
      ...(typeof node.config.recipient !== "string" ? [{ path: "config.recipient", code: "config_invalid", message: "send_message needs config.recipient (reporter, subject_owner or an address)." }] : []),
    ],
  },
  decision: {
    label: "Decision",
    group: "Effects",
    description: "Records a decision: a restriction with its DSA statement of reasons, or a decision not to act (no restrictions, no statement).",
    protocol: "step",
    ports: ["recorded"],
    canFail: true,
    readsContext: true,
    shadow: { port: "recorded", extra: (config): Record<string, JsonValue> => (typeof config.outcome === "string" ? { outcome: config.outcome } : {}) },
    mapping: { label: "Statement variables", help: "Available as {{name}} in the statement." },
    fields: [
      { key: "outcome", label: "Outcome", input: "text" },
      { key: "statement", label: "Statement (facts relied on)", input: "multiline" },
      { key: "restrictions", label: "Restrictions", input: "json", help: "{ visibility: [content_removed…], account: suspended|terminated, monetary, provision }; none (or {}) records a decision not to act, e.g. outcome no_action." },
      {
        key: "ground",
        label: "Ground",
        input: "select",
        options: [
          { value: "incompatible_content", label: "Incompatible with terms" },
          { value: "illegal_content", label: "Illegal content" },
        ],
      },
      { key: "legal_ground", label: "Legal ground", input: "text", showIf: { key: "ground", equals: "illegal_content" } },
      { key: "contractual_ground", label: "Clause of the terms relied on (incompatible content)", input: "text" },
    ],
    defaults: { config: { outcome: "content_removed", statement: "The content breaks the policy on {{category}}.", restrictions: { visibility: ["content_removed"] } } },
    validate: (node) => decisionConfigProblems(node.config).map((p) => ({ ...p, code: "config_invalid" })),
  },
  handoff: {
    label: "Handoff",
    group: "Effects",
    description: "Hands the case to another queue or an external recipient.",
    protocol: "step",
    ports: ["handed_off"],
    canFail: true,
    content: { openOutput: "all", purpose: "handoff_evidence" },
    readsContext: true,
    shadow: { port: "handed_off" },
    mapping: { label: "Input mapping", help: "Each field is a CEL expression." },
    fields: [
      { key: "queue_id", label: "Queue", input: "select", lookup: "queues", excludes: ["endpoint_id"] },
      { key: "endpoint_id", label: "…or an external endpoint", input: "select", lookup: "endpoints", excludes: ["queue_id"] },
    ],
    defaults: { config: { queue_id: "" } },
    validate: (node) => [
      ...(typeof node.config.queue_id !== "string" && typeof node.config.endpoint_id !== "string" && typeof node.config.recipient !== "string"
        ? [{ path: "config.queue_id", code: "config_invalid", message: "handoff needs config.queue_id (another queue) or config.endpoint_id (an external recipient)." }]
        : []),
      ...["include_content", "include_reporter"]
        .filter((key) => node.config[key] !== undefined && typeof node.config[key] !== "boolean")
        .map((key) => ({ path: `config.${key}`, code: "config_invalid", message: `${key} must be true or false (whether the external evidence bundle carries it).` })),
    ],
    references: (config) => [...ref(config, "queue_id", "queue"), ...ref(config, "endpoint_id", "webhook_endpoint")],
  },
  ncmec_report: {
    label: "CyberTipline report",
    group: "Effects",
    description:
      "Reports the run's report and its files (with their SHA-256 and PDQ hashes) to NCMEC's CyberTipline, once a person confirmed it in the review task named here; the files and the report are sealed and the case held for one year.",
    protocol: "step",
    ports: ["reported"],
    canFail: true,
    readsContext: false,
    shadow: { port: "reported" },
    mapping: null,
    fields: [
      { key: "confirmation_node", label: "Confirming review task", input: "text", help: "The id of the human_task node whose answer confirms the report; every path to this node must pass it." },
      { key: "confirm_outcome", label: "Confirming outcome", input: "text", help: "The task's outcome that confirms the report; default report." },
      { key: "incident_type", label: "Incident type", input: "select", options: INCIDENT_TYPES.map((value) => ({ value, label: value })) },
    ],
    defaults: { config: { confirmation_node: "", confirm_outcome: "report" } },
    validate: (node) => [
      ...requireString(node.config, "confirmation_node", NODE_ID_PATTERN, "ncmec_report needs config.confirmation_node, the id of the human_task node where a person confirms the report."),
      ...(node.config.confirm_outcome !== undefined ? requireString(node.config, "confirm_outcome", CODE_PATTERN, "confirm_outcome must be an outcome code such as report.") : []),
      ...(node.config.incident_type !== undefined && !(INCIDENT_TYPES as readonly unknown[]).includes(node.config.incident_type)
        ? [{ path: "config.incident_type", code: "config_invalid", message: `incident_type must be one of NCMEC's incident types: ${INCIDENT_TYPES.join("; ")}.` }]
        : []),
    ],
    confirmedBy: (config) => (typeof config.confirmation_node === "string" ? config.confirmation_node : undefined),
  },
  start_linked_workflow: {
    label: "Linked workflow",
    group: "Effects",
    description: "Starts a run of another workflow version.",
    protocol: "step",
    ports: ["started"],
    canFail: true,
    readsContext: true,
    shadow: { port: "started" },
    mapping: { label: "Child input", help: "The linked run's input." },
    fields: [{ key: "workflow_version_id", label: "Workflow version id", input: "code" }],
    defaults: { config: { workflow_version_id: "" } },
    validate: (node) => requireString(node.config, "workflow_version_id", NODE_ID_PATTERN, "start_linked_workflow needs config.workflow_version_id."),
    references: (config) => ref(config, "workflow_version_id", "workflow_version"),
  },
  action: {
    label: "Action",
    group: "Effects",
    description: "Proposes an enforcement action (approval, delivery, confirmation).",
    protocol: "action",
    ports: ["applied", "rejected", "expired"],
    canFail: true,
    readsContext: true,
    shadow: { port: "applied" },
    mapping: { label: "Action parameters", help: "Sent with the action; each a CEL expression." },
    fields: [
      { key: "action_type", label: "Action type", input: "select", lookup: "actionTypes", help: "Action types are created under Settings." },
      { key: "approval_timeout_seconds", label: "Approval timeout (seconds)", input: "number" },
    ],
    defaults: { config: { action_type: "", approval_timeout_seconds: 86_400 } },
    validate: (node) => [...requireString(node.config, "action_type", CODE_PATTERN, "action needs config.action_type, the key of an action type."), ...optionalSeconds(node.config, "approval_timeout_seconds")],
    references: (config) => ref(config, "action_type", "action_type"),
  },
} as const satisfies Record<string, KindDescriptor>;

export type WorkflowNodeKind = keyof typeof DEFINITIONS;
export const KINDS: Readonly<Record<WorkflowNodeKind, KindDescriptor>> = DEFINITIONS;
export const NODE_KINDS = Object.keys(KINDS) as WorkflowNodeKind[];

export function kindOf(kind: string): KindDescriptor | undefined {
  return Object.hasOwn(KINDS, kind) ? KINDS[kind as WorkflowNodeKind] : undefined;
}

/** Output ports of a node, its declared error port included. */
export function nodePorts(node: { kind: string; config?: JsonObject; errorPort?: string }): string[] {
  const descriptor = kindOf(node.kind);
  const declared = descriptor?.ports;
  const ports = !declared ? [] : typeof declared === "function" ? declared(node.config ?? {}) : [...declared];
  if (node.errorPort && !ports.includes(node.errorPort)) ports.push(node.errorPort);
  return ports;
}

/** Every CEL expression of a node with its path: the input mapping, then the kind's own. */
export function nodeExpressions(node: { kind: string; config: JsonObject; inputMapping?: Record<string, string> }): Array<{ path: string; text: unknown }> {
  const mapped = Object.entries(node.inputMapping ?? {}).map(([key, text]) => ({ path: `inputMapping.${key}`, text }));
  return [...mapped, ...(kindOf(node.kind)?.expressions?.(node.config) ?? [])];
}

/** Output of an effect node in shadow mode (nothing leaves the system); null for other kinds. */
export function shadowSimulation(node: { kind: string; config: JsonObject }): Record<string, JsonValue> | null {
  const shadow = kindOf(node.kind)?.shadow;
  if (!shadow) return null;
  return { port: shadow.port, status: "simulated", simulated: true, effectSuppressed: true, simulationCode: `shadow_${node.kind}_suppressed`, ...(shadow.extra?.(node.config) ?? {}) };
}

export { conditionCases, DEFAULT_RESPONSE_SCHEMA };
