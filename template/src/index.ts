// The Safest Tools Worker: HTTP API, the Workflows entrypoint and the runtime capability.
import { DynamicWorkflowBinding } from "@cloudflare/dynamic-workflows";
import { consumeDeliveries } from "./enforcement";
import { createApp } from "./http/app";

// Re-exported so that ctx.exports can hand loaded workers their wrapped WORKFLOWS binding.
export { DynamicWorkflowBinding };
export { DynamicWorkflow, WorkflowRuntimeCapability } from "./workflows";

const app = createApp();

export default {
  fetch: app.fetch,
  queue: (batch: MessageBatch<unknown>, env: Env) => consumeDeliveries(batch as MessageBatch<{ deliveryId?: unknown }>, env),
} satisfies ExportedHandler<Env>;
