// The Safest Tools Worker: HTTP API, the schedule, the Workflows entrypoint and the runtime capability.
import { DynamicWorkflowBinding } from "@cloudflare/dynamic-workflows";
import { assertAuditKeyConfigured } from "./audit";
import { consumeDeliveries } from "./enforcement";
import { createApp } from "./http/app";
import { runSchedule } from "./schedule";
// Bulk repairs terminate through run-end.ts (which calls enforcement), so, like the capability,
// the consumer comes from its module rather than the workflows index.
import { consumeRunOperations } from "./workflows/run-operations";
// Fast backtests walk graphs with the node executors (which call enforcement and automation).
import { consumeBacktestQueue } from "./automation/backtest-queue";

// Re-exported so that ctx.exports can hand loaded workers their wrapped WORKFLOWS binding.
export { DynamicWorkflowBinding };
export { DynamicWorkflow, SandboxWorkflowBinding } from "./workflows";
// The runtime capability is the top of the dependency graph (it calls enforcement and automation),
// so it is exported from its module rather than through the workflows index.
export { WorkflowRuntimeCapability } from "./workflows/runtime-capability";
export { ComponentEgress } from "./automation";
export { EntityCounters } from "./detection";
export { PdqIndexShard } from "./media";

const app = createApp();

export default {
  fetch: app.fetch,
  queue: (batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext) =>
    // "-fast-backtests" also ends with "-backtests": both go to the backtest consumer, which routes by message.
    batch.queue.endsWith("-backtests")
      ? consumeBacktestQueue(batch, env, ctx)
      : batch.queue.endsWith("-run-operations")
        ? consumeRunOperations(batch as MessageBatch<{ operationId?: unknown; dispatchRunId?: unknown; installationId?: unknown; archiveCaseId?: unknown; archiveRunId?: unknown; at?: unknown }>, env, ctx)
        : consumeDeliveries(batch as MessageBatch<{ deliveryId?: unknown }>, env),
  // Every minute (triggers.crons); locally driven by scripts/local-cron.mjs. A run where a sweep
  // failed throws after all sweeps ran, so the platform records the invocation as failed.
  async scheduled(controller: ScheduledController, env: Env, ctx?: ExecutionContext) {
    assertAuditKeyConfigured(env);
    const run = await runSchedule(env, controller, undefined, ctx);
    if (!run.ok)
      throw new Error(
        `schedule.sweep_failed: ${run.sweeps
          .filter((s) => !s.ok)
          .map((s) => s.name)
          .join(", ")}`,
      );
  },
} satisfies ExportedHandler<Env>;
