// The Safest Tools Worker: HTTP API, the Workflows entrypoint and the runtime capability.
import { DynamicWorkflowBinding } from "@cloudflare/dynamic-workflows";
import { consumeBacktests } from "./automation";
import { consumeDeliveries } from "./enforcement";
import { createApp } from "./http/app";

// Re-exported so that ctx.exports can hand loaded workers their wrapped WORKFLOWS binding.
export { DynamicWorkflowBinding };
export { DynamicWorkflow } from "./workflows";
// The runtime capability is the top of the dependency graph (it calls enforcement and automation),
// so it is exported from its module rather than through the workflows index.
export { WorkflowRuntimeCapability } from "./workflows/runtime-capability";
export { ComponentEgress } from "./automation";

const app = createApp();

export default {
  fetch: app.fetch,
  queue: (batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext) =>
    batch.queue.endsWith("-backtests") ? consumeBacktests(batch as Parameters<typeof consumeBacktests>[0], env, ctx) : consumeDeliveries(batch as MessageBatch<{ deliveryId?: unknown }>, env),
} satisfies ExportedHandler<Env>;
