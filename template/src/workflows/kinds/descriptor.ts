// The shape of a node kind's descriptor: pure data and pure functions, importing nothing of the
// host, so the console's palette and config panel use the very same definitions as the server.
// How a kind executes on the host is its executor (kinds/executors.ts), kept apart.
import type { JsonObject, JsonValue, WorkflowNodeV1 } from "../types";

/**
 * How the kernel drives a node (its only per-kind knowledge):
 * - `step`: one `executeNode` step;
 * - `delay`: `executeNode({ prepare })`, `sleepUntil`, then `executeNode`;
 * - `wait`: `prepareWait`, `waitForEvent`, `completeWait`;
 * - `action`: `prepareAction`, then waits closed by `completeAction` until a port is known.
 * In `shadow`, an effect kind (one with `shadow`) runs as a plain `step` that the host simulates.
 */
export type KernelProtocol = "step" | "delay" | "wait" | "action";

export type KindGroup = "Flow" | "Automation" | "People" | "Effects";

/** Lists the console fills a select from. */
export type Lookup = "queues" | "actionTypes" | "providers" | "policies" | "builtIns" | "componentVersions" | "endpoints";

/** One field of the config panel. Widgets with their own editors: `cases`, `response_schema`. */
export interface ConfigField {
  key: string;
  label: string;
  input: "text" | "multiline" | "code" | "number" | "json" | "port_list" | "select" | "cases" | "response_schema";
  help?: string;
  /** For `select`: fixed options, or a lookup list of the installation. */
  options?: ReadonlyArray<{ value: string; label: string }>;
  lookup?: Lookup;
  /** Choosing a value clears these keys (one of two alternatives). */
  excludes?: readonly string[];
  /** The value names one of the node's ports: renaming it renames its edges. */
  isPort?: boolean;
  /** Shown only when another key has this value. */
  showIf?: { key: string; equals: string };
  testId?: string;
}

/** Something a config names that must exist in the installation when the version is published. */
export interface ConfigReference {
  path: string;
  type: "queue" | "action_type" | "ai_provider" | "policy_version" | "component_version" | "webhook_endpoint" | "workflow_version";
  value: string;
}

export interface Problem {
  /** Relative to the node: `config.cases[0].port`, `inputMapping.timestamp`. */
  path: string;
  code: string;
  message: string;
}

export interface KindDescriptor {
  label: string;
  group: KindGroup;
  description: string;
  protocol: KernelProtocol;
  /** Output ports: fixed, or derived from the config (condition, ai_proposal). */
  ports: readonly string[] | ((config: JsonObject) => string[]);
  /** Whether a node of this kind can fail, and so may declare an error port. */
  canFail: boolean;
  /**
   * An effect leaves the system. In `shadow` it is simulated: it leaves by `shadow.port`, with
   * `shadow.extra(config)` in its output (what a simulated decision would have decided).
   */
  shadow?: { port: string; extra?: (config: JsonObject) => Record<string, JsonValue> };
  /**
   * Whether its expressions may read `content` (the report's snapshot, description, subject URL and
   * owner, evidence; an appeal's reason) and the sealed outputs of earlier nodes that read it.
   * Kinds without it are refused at publish when they try (`content_not_readable_here`).
   * `openOutput`: the output fields (dotted paths) of a node that read content which stay open to
   * every later node (verdicts: matched, count, resultCode, confidence…); the rest is sealed.
   * `"all"` when its output derives nothing from the content (a person's answer, ids).
   * `purpose`: recorded with the `report.content_read` audit event.
   */
  content?: { openOutput: readonly string[] | "all"; purpose: string };
  /** Whether its host executor evaluates expressions, so its context is worth prefetching. */
  readsContext: boolean;
  /** The input mapping's title and help in the config panel; null when the kind has none. */
  mapping: { label: string; help: string } | null;
  fields: readonly ConfigField[];
  /** A new node's config in the editor: as little as possible to be valid. */
  defaults: { config?: JsonObject; inputMapping?: Record<string, string> };
  /** CEL expressions in the config (besides inputMapping), with their paths. */
  expressions?: (config: JsonObject) => Array<{ path: string; text: unknown }>;
  /** Checks of `config` that need nothing but the node (structure is validation.ts's job). */
  validate?: (node: WorkflowNodeV1) => Problem[];
  /**
   * The human_task node (by id, from the config) that every path from the start to a node of this
   * kind must pass: a person answers before it runs (checked at publish; the host checks the
   * answer itself when it runs).
   */
  confirmedBy?: (config: JsonObject) => string | undefined;
  /** Names in the config that must exist in the installation (checked at publish). */
  references?: (config: JsonObject) => ConfigReference[];
}
