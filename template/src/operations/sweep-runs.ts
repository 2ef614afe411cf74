// What each sweep did, kept for the metrics: one sweep_runs row per sweep per scheduled run (name,
// when, outcome, counts, ms), kept SWEEP_RUNS_RETENTION_DAYS. The hourly rollups read this table.
export const SWEEP_RUNS_RETENTION_DAYS = 14;

export interface RecordedSweep {
  name: string;
  ok: boolean;
  ms: number;
  summary?: Record<string, number>;
  error?: string;
}

/** Records one scheduled run's sweeps in one batch, and drops a bounded slice of rows past retention. */
export async function recordSweepRuns(env: Env, ranAt: Date, sweeps: readonly RecordedSweep[]): Promise<void> {
  const at = ranAt.toISOString();
  const cutoff = new Date(ranAt.getTime() - SWEEP_RUNS_RETENTION_DAYS * 86_400_000).toISOString();
  await env.DB.batch([
    ...sweeps.map((sweep) =>
      env.DB.prepare(`INSERT INTO sweep_runs (name, ran_at, ok, counts_json, error, ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`).bind(
        sweep.name,
        at,
        sweep.ok ? 1 : 0,
        JSON.stringify(sweep.summary ?? {}),
        sweep.error ?? null,
        Math.round(sweep.ms),
      ),
    ),
    env.DB.prepare(`DELETE FROM sweep_runs WHERE id IN (SELECT id FROM sweep_runs WHERE ran_at < ?1 ORDER BY ran_at LIMIT 500)`).bind(cutoff),
  ]);
}
