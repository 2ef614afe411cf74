// Repair: a run in `repair_required` (or `failed`) continues, keeping its id and history, in a new
// Workflows instance (`<run id>-r<n>`). The new instance walks the graph from the start; every step
// the host finished answers from its record (runtime-capability), so nothing recorded runs again
// and no effect repeats. What the repair changes is only the failed node:
//   retry    its step row is reset (attempt + 1) and it runs again (e.g. after a provider was fixed);
//   route    a person's decision: the chosen port is recorded as the node's output (`decidedBy`);
//   migrate  the run moves to another version of the same workflow and the node runs again there,
//            refused unless every recorded node is the same there (kind, ports, config digest)
//            and the failed node exists with the same kind and ports.
// Each repair is one batch: the run row (new instance id, state dispatch_pending), the step, the
// repair's history row and its audit event (who and why); then the old instance is stopped and
// the new one dispatched.
import { auditStatement, canonicalJson } from "../audit";
import type { Actor } from "../auth";
import { closeStepTaskStatement } from "../cases";
import { AppError, conflict, notFound } from "../errors";
import { newId, sha256Hex } from "../lib/crypto";
import { signalRun, stopInstance } from "./instances";
import { kindOf, nodePorts } from "./kinds/descriptors";
import { branchAllowed } from "./run-plan";
import { dispatchRun } from "./run-dispatch";
import { serializeRun } from "./runs";
import { getRunRow, listStepRows, type RunRow } from "./runs-queries";
import { outputRecord } from "./runtime-records";
import type { ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import { parseWorkflowGraph } from "./validation";
import { getVersionRow } from "./versions-queries";
import { hotOrArchived } from "../cases";

export const REPAIR_ACTIONS = ["retry", "route", "migrate"] as const;
export type RepairAction = (typeof REPAIR_ACTIONS)[number];
export const REPAIRABLE_STATES = ["repair_required", "failed"] as const;

export interface RepairRequest {
  action: RepairAction;
  /** route: the port of the failed node to take. */
  port?: string;
  /** migrate: the version of the same workflow to continue on. */
  workflowVersionId?: string;
  /** Why (recorded in the audit event and the run's repair history). */
  reason: string;
  /** The bulk operation this repair belongs to, if any. */
  operationId?: string;
}

type StepRow = Awaited<ReturnType<typeof listStepRows>>[number];

function graphOf(json: string): ParsedWorkflowGraph {
  return parseWorkflowGraph(JSON.parse(json));
}

const basePorts = (node: WorkflowNodeV1) => nodePorts({ kind: node.kind, config: node.config }).sort();
const sameList = (a: string[], b: string[]) => a.length === b.length && a.every((value, index) => value === b[index]);
const configDigest = async (node: WorkflowNodeV1) => `sha256:${await sha256Hex(canonicalJson(node.config ?? {}))}`;

/** The steps the repair resumes at: failed without an output (no error port took them), or, for a host-failed run, the unfinished step of its current node. */
function failedSteps(run: RunRow, steps: StepRow[]): StepRow[] {
  const failed = steps.filter((step) => step.state === "failed" && step.outputJson === null);
  if (failed.length > 0 || run.state !== "failed") return failed;
  return steps.filter((step) => step.nodeId === run.currentNodeId && (step.state === "running" || step.state === "waiting"));
}

/** Why `target` cannot take over the run's recorded steps and failed nodes; null when it can. */
async function migrationProblem(from: ParsedWorkflowGraph, to: ParsedWorkflowGraph, steps: StepRow[], failed: StepRow[]): Promise<{ nodeId: string; problem: string } | null> {
  const byId = (graph: ParsedWorkflowGraph, id: string) => graph.nodes.find((node) => node.id === id);
  for (const step of failed) {
    const before = byId(from, step.nodeId);
    const after = byId(to, step.nodeId);
    if (!after) return { nodeId: step.nodeId, problem: "node_missing" };
    if (!before || before.kind !== after.kind) return { nodeId: step.nodeId, problem: "kind_differs" };
    if (!sameList(basePorts(before), basePorts(after))) return { nodeId: step.nodeId, problem: "ports_differ" };
    if (!branchAllowed(to, after, step.branchKey === "main" ? "" : step.branchKey)) return { nodeId: step.nodeId, problem: "branch_differs" };
  }
  const failedIds = new Set(failed.map((step) => step.id));
  for (const step of steps) {
    if (failedIds.has(step.id)) continue;
    const before = byId(from, step.nodeId);
    const after = byId(to, step.nodeId);
    if (!after) return { nodeId: step.nodeId, problem: "node_missing" };
    if (!before || before.kind !== after.kind) return { nodeId: step.nodeId, problem: "kind_differs" };
    if (!sameList(basePorts(before), basePorts(after))) return { nodeId: step.nodeId, problem: "ports_differ" };
    if ((await configDigest(before)) !== (await configDigest(after))) return { nodeId: step.nodeId, problem: "config_differs" };
    const port = step.outputJson ? (JSON.parse(step.outputJson) as { port?: unknown }).port : null;
    if (typeof port === "string" && !nodePorts(after).includes(port)) return { nodeId: step.nodeId, problem: "ports_differ" };
    if (!branchAllowed(to, after, step.branchKey === "main" ? "" : step.branchKey)) return { nodeId: step.nodeId, problem: "branch_differs" };
  }
  return null;
}

function cleanReason(reason: unknown): string {
  if (typeof reason !== "string" || reason.trim().length === 0 || reason.length > 1_000) {
    throw new AppError("run.repair_reason_required", "Say why the run is repaired: `reason`, 1 to 1000 characters.", { status: 422 });
  }
  return reason.trim();
}

/**
 * Repairs a run (see the module comment). Returns the run as it is after dispatch, with the repair.
 * A run whose repair was recorded but whose dispatch failed (503) is `dispatch_pending`: repeating
 * the request finishes that dispatch; so does the schedule's dispatch sweep.
 */
export async function repairRun(env: Env, ctx: ExecutionContext, actor: Actor, runId: string, request: RepairRequest) {
  const reason = cleanReason(request.reason);
  // A named version is looked up first: another installation's is a 404 whatever the run's state.
  const named = typeof request.workflowVersionId === "string" ? await getVersionRow(env.DB, actor.installationId, request.workflowVersionId) : null;
  if (typeof request.workflowVersionId === "string" && !named) throw notFound("workflow_version");
  const run = await hotOrArchived(env, actor.installationId, "run", runId, () => getRunRow(env.DB, actor.installationId, runId));
  if (!run) throw notFound("run");
  if (run.state === "dispatch_pending" && run.repairCount > 0) {
    await dispatchRun(env, ctx, run);
    await resignalWaits(env, run.id);
    return { run: serializeRun((await getRunRow(env.DB, actor.installationId, run.id))!), repair: null, replayed: true };
  }
  if (!(REPAIRABLE_STATES as readonly string[]).includes(run.state)) {
    throw conflict("run.not_repairable", `The run is ${run.state}; only runs in repair_required or failed can be repaired.`);
  }
  // A failed run past its installation's hot window has its steps in the archive (run-archive.ts),
  // which is read-only: it is not brought back into D1 to resume. Start a new run instead.
  if (run.archivedAt) throw conflict("run.archived", "The run ended before the installation's hot window and its history is archived; it cannot be repaired. Start a new run.");
  const steps = await listStepRows(env.DB, run.id);
  const failed = failedSteps(run, steps);
  if (failed.length === 0) throw conflict("run.repair_node_unknown", "The run has no failed step to repair from; terminate it instead.");
  if (run.state === "failed") {
    const closed = await env.DB.prepare(`SELECT COUNT(*) AS n FROM workflow_waits WHERE run_id = ?1 AND state = 'cancelled'`).bind(run.id).first<{ n: number }>();
    if ((closed?.n ?? 0) > 0) throw conflict("run.repair_waits_closed", "The run's waits were cancelled when it failed; it cannot resume. Start a new run.");
  }
  const version = await getVersionRow(env.DB, actor.installationId, run.workflowVersionId);
  if (!version) throw notFound("workflow_version");
  const graph = graphOf(version.graphJson);
  let targetVersionId = run.workflowVersionId;
  let targetArtifactId = run.artifactId;
  let routed: { step: StepRow; node: WorkflowNodeV1; port: string } | null = null;

  if (request.action === "route") {
    if (failed.length !== 1) throw conflict("run.repair_route_ambiguous", "More than one node failed; retry or migrate the run instead.");
    const step = failed[0]!;
    const node = graph.nodes.find((candidate) => candidate.id === step.nodeId);
    if (!node) throw conflict("run.repair_node_unknown", `Node ${step.nodeId} is not in the run's version.`);
    const ports = nodePorts(node);
    if (typeof request.port !== "string" || !ports.includes(request.port)) {
      throw new AppError("run.repair_port_unknown", `Node ${node.id} has no port ${String(request.port)}; choose one of: ${ports.join(", ")}.`, { status: 422, details: { ports } });
    }
    routed = { step, node, port: request.port };
  } else if (request.action === "migrate") {
    if (typeof request.workflowVersionId !== "string") throw new AppError("run.repair_version_required", "A migrate names the workflowVersionId to continue on.", { status: 422 });
    const target = named;
    if (!target) throw notFound("workflow_version");
    if (target.workflowId !== version.workflowId) throw conflict("run.migrate_other_workflow", "A run migrates only to another version of its own workflow.");
    if (target.id === version.id) throw conflict("run.migrate_same_version", "The run is already on this version; use retry.");
    if (target.retiredAt) throw conflict("workflow_version.retired", "The target version is retired; pick a live version.");
    const problem = await migrationProblem(graph, graphOf(target.graphJson), steps, failed);
    if (problem) {
      const says: Record<string, string> = {
        node_missing: "does not exist in the target version",
        kind_differs: "is of another kind in the target version",
        ports_differ: "has other ports in the target version",
        config_differs: "was recorded under a config the target version changed (its config digest differs)",
        branch_differs: "runs on another branch in the target version",
      };
      throw conflict("run.migrate_incompatible", `Node ${problem.nodeId} ${says[problem.problem]}; the run cannot continue there.`, problem);
    }
    targetVersionId = target.id;
    targetArtifactId = target.artifactId;
  } else if (request.action !== "retry") {
    throw new AppError("run.repair_action_unknown", "action is one of: retry, route, migrate.", { status: 422 });
  }

  const seq = run.repairCount + 1;
  const instanceId = `${run.id}-r${seq}`;
  const at = new Date().toISOString();
  const repairId = newId("rpr");
  // Only while the run is still where this repair found it: a concurrent repair (or a bulk
  // message delivered twice) updates nothing and writes nothing else.
  const guardRun = (first: number) => `EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?${first} AND instance_id = ?${first + 1})`;
  const statements: D1PreparedStatement[] = [
    env.DB.prepare(`UPDATE workflow_runs SET state = 'dispatch_pending', instance_id = ?3, repair_count = ?4, workflow_version_id = ?5,
        output_json = NULL, error_code = NULL, error_summary = NULL, error_details_json = NULL, finished_at = NULL, updated_at = ?6, revision = revision + 1
      WHERE id = ?1 AND installation_id = ?2 AND state = ?7 AND repair_count = ?8`).bind(run.id, actor.installationId, instanceId, seq, targetVersionId, at, run.state, run.repairCount),
  ];
  if (routed) {
    const output = { port: routed.port, decidedBy: actor.audit, reason, repaired: true };
    const record = await outputRecord(output);
    statements.push(
      // The routed output goes in the step row (workflows/step-output.ts). A step repaired from has
      // no output in either form (failedSteps), so there is no earlier one to replace.
      env.DB.prepare(`UPDATE workflow_step_runs SET state = 'succeeded', output_digest = ?2, error_code = NULL, error_message = NULL, error_details_json = NULL,
          finished_at = ?3, updated_at = ?3, output_json = ?6, output_sealed = NULL, output_size = ?7 WHERE id = ?1 AND ${guardRun(4)}`).bind(routed.step.id, record.digest, at, run.id, instanceId, record.json, record.sizeBytes),
    );
    if (kindOf(routed.node.kind)?.protocol === "wait") {
      // A person decided for the wait: it closes, and its task with it.
      statements.push(env.DB.prepare(`UPDATE workflow_waits SET state = 'satisfied', satisfied_at = ?2 WHERE step_run_id = ?1 AND state = 'waiting' AND ${guardRun(3)}`).bind(routed.step.id, at, run.id, instanceId));
      if (routed.node.kind === "human_task") statements.push(closeStepTaskStatement(env.DB, { runId: run.id, stepId: routed.step.id, timedOut: false, at }));
    }
  } else {
    // An action's proposal is one per step (enforcement): a failed action is routed, not run again.
    const action = failed.find((step) => step.kind === "action");
    if (action) throw conflict("run.repair_action_not_rerunnable", `Node ${action.nodeId} is an action, whose proposal cannot be made twice; route it to a port instead.`);
    for (const step of failed) {
      statements.push(
        env.DB.prepare(`UPDATE workflow_step_runs SET state = 'running', attempt = attempt + 1, error_code = NULL, error_message = NULL, error_details_json = NULL,
            finished_at = NULL, updated_at = ?2 WHERE id = ?1 AND ${guardRun(3)}`).bind(step.id, at, run.id, instanceId),
      );
    }
  }
  const nodeId = routed?.node.id ?? failed[0]!.nodeId;
  const branchKey = routed?.step.branchKey ?? failed[0]!.branchKey;
  statements.push(
    env.DB.prepare(`INSERT INTO workflow_run_repairs (id, installation_id, run_id, seq, action, node_id, branch_key, port, from_version_id, to_version_id,
        previous_state, previous_error_code, instance_id, reason, actor_json, operation_id, created_at)
      SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17 WHERE ${guardRun(18)}`).bind(
      repairId,
      actor.installationId,
      run.id,
      seq,
      request.action,
      nodeId,
      branchKey,
      routed?.port ?? null,
      run.workflowVersionId,
      targetVersionId,
      run.state,
      run.errorCode,
      instanceId,
      reason,
      JSON.stringify(actor.audit),
      request.operationId ?? null,
      at,
      run.id,
      instanceId,
    ),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `run:${run.id}:repaired:${seq}`,
        action: "workflow.run_repaired",
        actor: actor.audit,
        target: { type: "workflow_run", id: run.id },
        details: {
          repairId,
          action: request.action,
          reason,
          nodeId,
          nodes: failed.map((step) => step.nodeId),
          ...(routed ? { port: routed.port } : {}),
          fromVersionId: run.workflowVersionId,
          toVersionId: targetVersionId,
          previousState: run.state,
          previousErrorCode: run.errorCode,
          instanceId,
          previousInstanceId: run.instanceId,
          ...(request.operationId ? { operationId: request.operationId } : {}),
        },
        at,
      },
      { table: "workflow_runs", id: run.id, where: { instance_id: instanceId } },
    ),
  );
  // The old instance has errored or ended; stopping it first makes sure it cannot call on.
  await stopInstance(env, run.instanceId);
  const [update] = await env.DB.batch(statements);
  if ((update!.meta.changes ?? 0) === 0) throw conflict("run.repair_conflict", "The run changed while it was being repaired; read it again.");
  await dispatchRun(env, ctx, { ...run, state: "dispatch_pending", instanceId, repairCount: seq, workflowVersionId: targetVersionId, artifactId: targetArtifactId });
  await resignalWaits(env, run.id);
  return {
    run: serializeRun((await getRunRow(env.DB, actor.installationId, run.id))!),
    repair: { id: repairId, seq, action: request.action, nodeId, port: routed?.port ?? null, fromVersionId: run.workflowVersionId, toVersionId: targetVersionId, instanceId, reason, createdAt: at },
    replayed: false,
  };
}

/**
 * Waits still waiting whose event was recorded while the run was in repair (its signal went to
 * the old instance): the new instance gets the signal again; completeWait verifies the event.
 */
async function resignalWaits(env: Env, runId: string): Promise<void> {
  const { results } = await env.DB.prepare(`SELECT w.signal_type AS signalType,
      (SELECT e.id FROM workflow_events e WHERE e.wait_id = w.id ORDER BY e.created_at LIMIT 1) AS eventId
    FROM workflow_waits w WHERE w.run_id = ?1 AND w.state = 'waiting'`)
    .bind(runId)
    .all<{ signalType: string; eventId: string | null }>();
  for (const row of results) if (row.eventId) await signalRun(env, runId, { type: row.signalType, payload: { eventId: row.eventId } });
}
