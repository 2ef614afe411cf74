// Reads of a run's child rows from either tier: D1 while the run is hot, its R2 archive object
// (run-archive.ts writes it) once archived. Every reader of steps, waits and repairs asks here.
import { AppError } from "../errors";
import { type Cell, readArchiveObject, type RunArchiveObject, runArchiveKey } from "./run-archive";
import { listRunRepairs, listStepRows, listWaitRows, type RunRow } from "./runs-queries";

type StepRow = Awaited<ReturnType<typeof listStepRows>>[number];
type WaitRow = Awaited<ReturnType<typeof listWaitRows>>[number];
type RepairRow = Awaited<ReturnType<typeof listRunRepairs>>[number];

export interface RunChildren {
  steps: StepRow[];
  waits: WaitRow[];
  repairs: RepairRow[];
}

/** The archive object of an archived run, checked against the digest its run row recorded. */
export async function readRunArchive(env: Env, run: Pick<RunRow, "id" | "installationId" | "archiveDigest">): Promise<RunArchiveObject> {
  const key = runArchiveKey(run.installationId, run.id);
  const found = await readArchiveObject(env.WORKFLOW_ARTIFACTS, key, run.archiveDigest ?? null);
  if (!found) throw new AppError("run_archive.missing", `The run's archive object ${key} is missing from R2.`, { status: 500, details: { key } });
  return found.object;
}

const str = (v: Cell | undefined): string => String(v);
const strOrNull = (v: Cell | undefined): string | null => (v === null || v === undefined ? null : String(v));

/** The same shapes the hot queries answer (runs-queries.ts), from an archive's verbatim rows. */
function childrenFromArchive(archive: RunArchiveObject, sealedErased: boolean): RunChildren {
  const outputs = new Map(archive.tables.workflow_step_outputs.map((row) => [str(row.step_run_id), row]));
  const steps: StepRow[] = archive.tables.workflow_step_runs.map((s) => {
    const o = outputs.get(str(s.id));
    return {
      id: str(s.id),
      nodeId: str(s.node_id),
      kind: str(s.node_type),
      branchKey: str(s.branch_key),
      state: str(s.state),
      attempt: Number(s.attempt),
      outputDigest: strOrNull(s.output_digest),
      errorCode: strOrNull(s.error_code),
      outputJson: o ? strOrNull(o.inline_json) : null,
      sealedJson: o && !sealedErased ? strOrNull(o.sealed_json) : null,
      startedAt: strOrNull(s.started_at),
      waitingAt: strOrNull(s.waiting_at),
      finishedAt: strOrNull(s.finished_at),
      updatedAt: str(s.updated_at),
    };
  });
  const waits: WaitRow[] = archive.tables.workflow_waits.map((w) => ({
    id: str(w.id),
    stepRunId: str(w.step_run_id),
    waitType: str(w.wait_type),
    eventType: str(w.event_type),
    state: str(w.state),
    deadlineAt: str(w.deadline_at),
    createdAt: str(w.created_at),
    satisfiedAt: strOrNull(w.satisfied_at),
  }));
  const repairs: RepairRow[] = archive.tables.workflow_run_repairs.map((r) => ({
    id: str(r.id),
    seq: Number(r.seq),
    action: str(r.action),
    nodeId: strOrNull(r.node_id),
    branchKey: strOrNull(r.branch_key),
    port: strOrNull(r.port),
    fromVersionId: str(r.from_version_id),
    toVersionId: str(r.to_version_id),
    previousState: str(r.previous_state),
    previousErrorCode: strOrNull(r.previous_error_code),
    instanceId: str(r.instance_id),
    reason: str(r.reason),
    operationId: strOrNull(r.operation_id),
    createdAt: str(r.created_at),
    actor: JSON.parse(str(r.actor_json)) as unknown,
  }));
  return { steps, waits, repairs };
}

/** A run's steps (with outputs), waits and repairs, from D1 or from its archive: every reader asks here. */
export async function runChildren(env: Env, run: RunRow): Promise<RunChildren> {
  if (run.archivedAt) return childrenFromArchive(await readRunArchive(env, run), run.archiveSealedErasedAt !== null && run.archiveSealedErasedAt !== undefined);
  const [steps, waits, repairs] = await Promise.all([listStepRows(env.DB, run.id), listWaitRows(env.DB, run.id), listRunRepairs(env.DB, run.installationId, run.id)]);
  return { steps, waits, repairs };
}
