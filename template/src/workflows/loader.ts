// Loading artifacts into sandboxed dynamic workers, and the Workflows entrypoint that forwards
// each run into the worker of its version.
import { dispatchWorkflow, wrapWorkflowBinding, type WorkflowRunner } from "@cloudflare/dynamic-workflows";
import { WorkerEntrypoint, WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { errorCode } from "../errors";
import { loadArtifactRow, loadArtifactSource } from "./artifacts";
import { markRunFailedUnsafe } from "./runs-queries";
import { cleanIdentifier, denied, type RuntimeProps } from "./runtime-authorize";
import type { KernelStarterEntrypoint } from "./runtime-protocol";
import type { WorkflowAuthorityMode } from "./types";
import { stablePlanSql } from "../lib/stable-plan";

/** The run a sandbox's create names (?1 run, ?2 the binding's version): its instance, state, authority and artifact; planned once (lib/stable-plan.ts). */
export const INSTANCE_CHECK_SQL = stablePlanSql(`SELECT r.id, COALESCE(r.instance_id, r.id) AS instanceId, r.state, r.authority_mode AS authorityMode, v.artifact_id AS artifactId
  FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id WHERE r.id = ?1 AND r.workflow_version_id = ?2`);

/**
 * The sandbox's WORKFLOWS binding: a host entrypoint pinned to one version and artifact that can
 * do one thing, create the Workflows instance of a run of that version the host is dispatching
 * (not started yet, same authority mode, instance id the one the host recorded for it). No `get`, no `createBatch`: a
 * sandbox cannot reach any other instance of the deployment (status, terminate, sendEvent).
 * Kernels of every protocol call only `create({ id, params: { runId, authorityMode } })`.
 */
export class SandboxWorkflowBinding extends WorkerEntrypoint<Env, RuntimeProps> {
  async create(options: { id?: unknown; params?: { runId?: unknown; authorityMode?: unknown } }): Promise<{ id: string }> {
    const instanceId = cleanIdentifier(options?.id, "instance_id");
    const runId = cleanIdentifier(options?.params?.runId, "run_id");
    const authorityMode = options?.params?.authorityMode;
    const run = await this.env.DB.prepare(INSTANCE_CHECK_SQL).bind(runId, this.ctx.props.workflowVersionId).first<{ id: string; instanceId: string; state: string; authorityMode: string; artifactId: string }>();
    if (!run || run.artifactId !== this.ctx.props.artifactId) throw denied("runtime.capability_denied");
    // The instance the host recorded for the run (its id, or a repair's `<run id>-r<n>`), while it dispatches it.
    if (instanceId !== run.instanceId || authorityMode !== run.authorityMode || !["created", "dispatch_pending"].includes(run.state)) throw denied("runtime.instance_denied");
    const instance = await wrapWorkflowBinding({ artifactId: this.ctx.props.artifactId, workflowVersionId: this.ctx.props.workflowVersionId }).create({ id: instanceId, params: { runId, authorityMode: run.authorityMode } });
    return { id: await instance.id };
  }
}

/**
 * Loads the version's artifact into a Worker Loader sandbox: no network (`globalOutbound: null`),
 * and an env of exactly two bindings — WORKFLOWS (`SandboxWorkflowBinding`: create its own run's
 * instance, nothing else) and the RUNTIME capability, both pinned by props to this version and artifact. The digest is verified on every call, before
 * the loader is asked; a cached worker is keyed by digest, so edited source never runs.
 * `limits` are enforced on Cloudflare only; workerd locally does not bound CPU (see ARCHITECTURE).
 */
export async function loadCompiledWorkflow(env: Env, ctx: ExecutionContext, props: RuntimeProps, live?: { installationId: string }): Promise<WorkerStub> {
  const artifact = await loadArtifactRow(env, props.artifactId, props.workflowVersionId, live);
  const source = await loadArtifactSource(env, artifact);
  const name = `workflow-version:${props.workflowVersionId}:${artifact.bundleDigest.slice(7, 39)}`;
  return env.LOADER.get(name, () => ({
    compatibilityDate: artifact.compatibilityDate,
    mainModule: "workflow.js",
    modules: { "workflow.js": source },
    env: {
      WORKFLOWS: ctx.exports.SandboxWorkflowBinding({ props }),
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

/**
 * Creates the Workflows instance of a run through its version's sandbox; returns the instance id.
 * `live`: the caller read in this request that the version is that installation's and live
 * (loadArtifactRow may then serve the artifact's row from the isolate).
 */
export async function startDynamicWorkflow(
  env: Env,
  ctx: ExecutionContext,
  input: { artifactId: string; workflowVersionId: string; instanceId: string; runId: string; authorityMode: WorkflowAuthorityMode; live?: { installationId: string } },
): Promise<string> {
  const props: RuntimeProps = {
    artifactId: cleanIdentifier(input.artifactId, "artifact_id"),
    workflowVersionId: cleanIdentifier(input.workflowVersionId, "workflow_version_id"),
  };
  const stub = await loadCompiledWorkflow(env, ctx, props, input.live);
  const starter = stub.getEntrypoint<KernelStarterEntrypoint>();
  const result = await starter.start({
    instanceId: cleanIdentifier(input.instanceId, "instance_id"),
    runId: cleanIdentifier(input.runId, "run_id"),
    authorityMode: input.authorityMode,
  });
  return result.id;
}
