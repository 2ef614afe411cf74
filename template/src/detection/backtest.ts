// Backtest of a rule set version over the sampled events (event_samples): the samples in a time
// range are opened (one audited read), replayed in the order they happened against the version as
// if it were deployed in shadow, with counters kept in memory for the replay alone, and nothing is
// written but the audit event. The counters see only the sample: at a sample rate r a count reads
// about r of what intake's counters would; rules without counters see each sampled event as intake did.
// `labels` reads no labels in a replay (an entity's labels then are not known).
// A version is also backtested retroactively on the stored reports (backtestOnReports), through
// the same replay.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { openPersonalDataOr } from "../cases";
import { AppError } from "../errors";
import { entityKey } from "../lib/person-keys";
import type { CounterOp } from "./counters";
import { counterPlan, evaluateEvent, eventOps, type ProductEvent } from "./events";
import { loadVersionInShadow } from "./deployed-versions";
import type { LoadedVersion } from "./rule-sets";

export const MAX_BACKTEST_EVENTS = 2_000;
const EXAMPLES_PER_RULE = 10;

/** The counters of a replay: per key, the counted events (time, member), with the shards' semantics. */
class MemoryCounters {
  private readonly rows = new Map<string, Map<string, { at: number; member?: string }>>();

  apply(op: CounterOp): number {
    let rows = this.rows.get(op.key);
    if (!rows) {
      rows = new Map();
      this.rows.set(op.key, rows);
    }
    if (op.record && !rows.has(op.event)) rows.set(op.event, { at: op.at, ...(op.member === undefined ? {} : { member: op.member }) });
    const from = op.at - op.windowMs;
    const inWindow = [...rows.values()].filter((row) => row.at > from && row.at <= op.at);
    return op.distinct ? new Set(inWindow.map((row) => row.member)).size : inWindow.length;
  }
}

export async function backtestRuleSetVersion(env: Env, actor: Actor, versionId: string, input: { from?: string; to?: string; limit?: number }) {
  const version = await loadVersionInShadow(env, actor.installationId, versionId);
  const from = input.from ?? new Date(Date.now() - 7 * 86_400_000).toISOString();
  const to = input.to ?? new Date().toISOString();
  if (Number.isNaN(Date.parse(from)) || Number.isNaN(Date.parse(to))) throw new AppError("rule_backtest.range_invalid", "from and to are ISO 8601 times, e.g. 2026-01-01T00:00:00Z.", { status: 400 });
  const limit = Math.min(input.limit ?? MAX_BACKTEST_EVENTS, MAX_BACKTEST_EVENTS);
  const { results } = await env.DB.prepare(`SELECT event_id AS eventId, sealed FROM event_samples WHERE installation_id = ?1 AND occurred_at >= ?2 AND occurred_at < ?3 ORDER BY occurred_at, event_id LIMIT ?4`)
    .bind(actor.installationId, new Date(from).toISOString(), new Date(to).toISOString(), limit)
    .all<{ eventId: string; sealed: string }>();
  const at = new Date().toISOString();
  // Sampled events hold personal data (entities, data): opening them is recorded first.
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `rule_backtest:${versionId}:${at}:${crypto.randomUUID()}`,
    action: "event_samples.read",
    actor: actor.audit,
    target: { type: "rule_set_version", id: versionId },
    details: { purpose: "backtest", from, to, events: results.length },
    at,
  }).run();
  const events: ProductEvent[] = [];
  let erased = 0;
  for (const row of results) {
    // A sample whose period key was destroyed (retention, erasure) is gone: counted, not replayed.
    const opened = await openPersonalDataOr<Omit<ProductEvent, "at"> | null>(env, actor.installationId, `event_sample:${row.eventId}`, row.sealed, null);
    if (opened === null) erased += 1;
    else events.push({ ...opened, at: Date.parse(opened.occurredAt) });
  }
  return { versionId, source: "samples" as const, from, to, events: events.length, erased, truncated: results.length === limit, rules: replay(env, actor.installationId, version, events) };
}

/**
 * Replays events, in the order given, against a version as if deployed in shadow, with counters
 * kept in memory for the replay alone: the hits (and errors) per rule, with example event ids.
 */
function replay(env: Env, installationId: string, version: LoadedVersion, events: ProductEvent[]) {
  const plan = counterPlan([version]);
  const counters = new MemoryCounters();
  const perRule = new Map(version.rules.map((rule) => [rule.id, { ruleId: rule.id, hits: 0, errors: 0, exampleEventIds: [] as string[] }]));
  for (const event of events) {
    const values = new Map<string, number>();
    for (const { op, lookup } of eventOps(event, plan, (kind, value) => entityKey(installationId, kind, value, env))) values.set(lookup, counters.apply(op));
    const evaluated = evaluateEvent(event, [version], values, () => []);
    for (const { rule } of evaluated.hits) {
      const figures = perRule.get(rule.id)!;
      figures.hits += 1;
      if (figures.exampleEventIds.length < EXAMPLES_PER_RULE) figures.exampleEventIds.push(event.id);
    }
    for (const error of evaluated.ruleErrors) perRule.get(error.ruleId)!.errors += 1;
  }
  return [...perRule.values()];
}

/**
 * The version over the installation's stored reports of a time range (up to MAX_BACKTEST_EVENTS,
 * oldest first), each replayed as a `report.created` event: its subject as the entity of its kind
 * (`entity.account`, `entity.content`…), and as data its category, source, evidence count and its
 * case's report count, so a rule can count reports (`count('report.created', entity.account,
 * '24h')`) as it counts product events. Only what reports hold in the clear is read: no sealed
 * personal data is opened. Reports still in D1 (a closed case moved to the case archive is not
 * replayed). Nothing is written but the audit event.
 */
export async function backtestOnReports(env: Env, actor: Actor, versionId: string, input: { from?: string; to?: string; limit?: number }) {
  const version = await loadVersionInShadow(env, actor.installationId, versionId);
  const { from, to, limit } = range(input);
  const { results } = await env.DB.prepare(`
      SELECT r.id, r.subject_kind AS subjectKind, r.subject_id AS subjectId, r.category, r.source, r.evidence_count AS evidenceCount, c.report_count AS caseReportCount, r.created_at AS createdAt
      FROM reports r JOIN cases c ON c.id = r.case_id
      WHERE r.installation_id = ?1 AND r.created_at >= ?2 AND r.created_at < ?3 ORDER BY r.created_at, r.id LIMIT ?4`)
    .bind(actor.installationId, from, to, limit)
    .all<{ id: string; subjectKind: string; subjectId: string; category: string; source: string; evidenceCount: number; caseReportCount: number; createdAt: string }>();
  const at = new Date().toISOString();
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `rule_backtest:${versionId}:reports:${at}:${crypto.randomUUID()}`,
    action: "rule_set_version.backtested",
    actor: actor.audit,
    target: { type: "rule_set_version", id: versionId },
    details: { source: "reports", from, to, events: results.length },
    at,
  }).run();
  const events: ProductEvent[] = results.map((row) => ({
    id: `report:${row.id}`,
    type: "report.created",
    occurredAt: row.createdAt,
    entities: { [row.subjectKind]: row.subjectId },
    data: { reportId: row.id, category: row.category, source: row.source, evidenceCount: row.evidenceCount, caseReportCount: row.caseReportCount },
    at: Date.parse(row.createdAt),
  }));
  return { versionId, source: "reports" as const, from, to, events: events.length, erased: 0, truncated: results.length === limit, rules: replay(env, actor.installationId, version, events) };
}

function range(input: { from?: string; to?: string; limit?: number }) {
  const from = input.from ?? new Date(Date.now() - 7 * 86_400_000).toISOString();
  const to = input.to ?? new Date().toISOString();
  if (Number.isNaN(Date.parse(from)) || Number.isNaN(Date.parse(to))) throw new AppError("rule_backtest.range_invalid", "from and to are ISO 8601 times, e.g. 2026-01-01T00:00:00Z.", { status: 400 });
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString(), limit: Math.min(input.limit ?? MAX_BACKTEST_EVENTS, MAX_BACKTEST_EVENTS) };
}
