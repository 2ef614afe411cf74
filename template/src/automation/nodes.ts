// What the enrichment and ai_proposal nodes do when the runtime executes them. Their input is the
// node's mapped input only; a non-retryable failure goes to the node's error port.
import { evaluateInputMapping, loadWorkflowExecutionContext, type NodeCall } from "../workflows";
import { executeAgentProposal } from "./ai-proposal";
import { BUILTIN_COMPONENTS, executeBuiltin } from "./builtins";
import { ComponentExecutionError, executeComponentVersion } from "./components";

async function mappedInput(call: NodeCall) {
  return evaluateInputMapping(call.node.inputMapping, await loadWorkflowExecutionContext(call.env, call), call.node.id);
}

export async function executeEnrichment(call: NodeCall): Promise<Record<string, unknown>> {
  const { env, ctx, run, node } = call;
  const input = await mappedInput(call);
  if (typeof node.config.component_version_id === "string") {
    const result = await executeComponentVersion(env, ctx, {
      installationId: run.installationId,
      componentVersionId: node.config.component_version_id,
      input,
      context: { nodeId: node.id, authorityMode: run.authorityMode },
    });
    return { port: "success", ...result };
  }
  const name = String(node.config.component);
  if (!(BUILTIN_COMPONENTS as readonly string[]).includes(name)) throw new ComponentExecutionError("component.unknown", false, `There is no built-in component named ${name}.`);
  const started = Date.now();
  const data = await executeBuiltin(env, name, { run, config: node.config, input });
  return { port: "success", component: name, data, latencyMs: Date.now() - started };
}

export async function executeAiProposal(call: NodeCall): Promise<Record<string, unknown>> {
  const { env, ctx, run, node } = call;
  const resultPorts = Array.isArray(node.config.result_ports) ? node.config.result_ports.filter((p): p is string => typeof p === "string") : [];
  if (typeof node.config.component_version_id === "string") {
    const result = await executeComponentVersion(env, ctx, {
      installationId: run.installationId,
      componentVersionId: node.config.component_version_id,
      input: await mappedInput(call),
      context: { nodeId: node.id, resultPorts },
    });
    const data = result.data && typeof result.data === "object" && !Array.isArray(result.data) ? result.data : {};
    const code = [data.result_code, data.outcome, data.classification].find((v): v is string => typeof v === "string");
    if (!code || !resultPorts.includes(code)) throw new ComponentExecutionError("ai.result_port_invalid", false, "The component proposed a result that is not one of the node's result ports.");
    return { port: code, resultCode: code, ...result };
  }
  const labelPorts = node.config.label_ports;
  return executeAgentProposal(env, {
    installationId: run.installationId,
    providerId: String(node.config.provider_id),
    ...(typeof node.config.policy_version_id === "string" ? { policyReference: node.config.policy_version_id } : {}),
    instructions: String(node.config.instructions ?? ""),
    resultPorts,
    ...(labelPorts && typeof labelPorts === "object" && !Array.isArray(labelPorts) ? { labelPorts: Object.fromEntries(Object.entries(labelPorts).filter((e): e is [string, string] => typeof e[1] === "string")) } : {}),
    readsContent: call.readsContent === true,
    input: () => mappedInput(call),
  });
}
