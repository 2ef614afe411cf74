// Loading artifacts into sandboxed dynamic workers, and the Workflows entrypoint that forwards
// each run into the worker of its version.
import { dispatchWorkflow, wrapWorkflowBinding, type WorkflowRunner } from "@cloudflare/dynamic-workflows";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { errorCode } from "../errors";
import { loadArtifactRow, loadArtifactSource } from "./artifacts";
import { markRunFailedUnsafe } from "./runs-queries";
import { cleanIdentifier, type RuntimeProps } from "./runtime-authorize";
import type { KernelStarterEntrypoint } from "./runtime-protocol";
import type { WorkflowAuthorityMode } from "./types";

/**
 * Loads the version's artifact into a Worker Loader sandbox: no network (`globalOutbound: null`),
 * and an env of exactly two bindings — the wrapped WORKFLOWS binding and the RUNTIME capability,
 * whose props pin it to this version and artifact. The digest is verified on every call, before
 * the loader is asked; a cached worker is keyed by digest, so edited source never runs.
 * `limits` are enforced on Cloudflare only; workerd locally does not bound CPU (see ARCHITECTURE).
 */
export async function loadCompiledWorkflow(env: Env, ctx: ExecutionContext, props: RuntimeProps): Promise<WorkerStub> {
  const artifact = await loadArtifactRow(env, props.artifactId, props.workflowVersionId);
  const source = await loadArtifactSource(env, artifact);
  const name = `workflow-version:${props.workflowVersionId}:${artifact.bundleDigest.slice(7, 39)}`;
  return env.LOADER.get(name, () => ({
    compatibilityDate: artifact.compatibilityDate,
    mainModule: "workflow.js",
    modules: { "workflow.js": source },
    env: {
      WORKFLOWS: wrapWorkflowBinding({ artifactId: props.artifactId, workflowVersionId: props.workflowVersionId }),
      RUNTIME: ctx.exports.WorkflowRuntimeCapability({ props }),
    },
    globalOutbound: null,
    limits: { cpuMs: 30_000, subRequests: 50 },
  }));
}

/**
 * The class registered as the WORKFLOWS binding. It forwards `run` into the version's sandbox;
 * if the sandbox ends the run with an error, it records that on the run (host-side, trusted).
 */
export class DynamicWorkflow extends WorkflowEntrypoint<Env> {
  override async run(event: Readonly<WorkflowEvent<unknown>>, step: WorkflowStep): Promise<unknown> {
    try {
      return await dispatchWorkflow({ env: this.env, ctx: this.ctx }, event, step, async ({ env, ctx, metadata }) => {
        const props = {
          artifactId: cleanIdentifier(metadata.artifactId, "artifact_id"),
          workflowVersionId: cleanIdentifier(metadata.workflowVersionId, "workflow_version_id"),
        };
        const stub = await loadCompiledWorkflow(env, ctx, props);
        return stub.getEntrypoint("TenantWorkflow") as unknown as WorkflowRunner;
      });
    } catch (error) {
      const code = errorCode(error);
      // Safe to repeat: the update only touches a run that is not yet terminal or in repair.
      await step.do("host:run-failed", async () => {
        await markRunFailedUnsafe(this.env, event.instanceId, code);
        return code;
      });
      throw error;
    }
  }
}

/** Creates the Workflows instance of a run through its version's sandbox; returns the instance id. */
export async function startDynamicWorkflow(env: Env, ctx: ExecutionContext, input: { artifactId: string; workflowVersionId: string; instanceId: string; runId: string; authorityMode: WorkflowAuthorityMode }): Promise<string> {
  const props: RuntimeProps = {
    artifactId: cleanIdentifier(input.artifactId, "artifact_id"),
    workflowVersionId: cleanIdentifier(input.workflowVersionId, "workflow_version_id"),
  };
  const stub = await loadCompiledWorkflow(env, ctx, props);
  const starter = stub.getEntrypoint<KernelStarterEntrypoint>();
  const result = await starter.start({
    instanceId: cleanIdentifier(input.instanceId, "instance_id"),
    runId: cleanIdentifier(input.runId, "run_id"),
    authorityMode: input.authorityMode,
  });
  return result.id;
}
