// Event intake: a batch of product events is checked, counted (counters.ts), run against every
// deployed rule set version, and dropped. What persists: the hits (rule_hits), what the hits do
// (labels, reports, runs; outcomes.ts), the counters, and a sealed sample when the installation
// asked for one (event_settings.sample_rate; off by default). An event retried with the same id
// counts once (the counter shards key their rows by the event) and its hits are the same rows.
import type { Actor } from "../auth";
import { sealPersonalData } from "../cases";
import { sha256HexSync } from "../lib/crypto";
import { entityKey } from "../lib/person-keys";
import { type CounterOp, type CounterResult, counterShard, eventHash, shardOf } from "./counters";
import { labelsOfEntities } from "./labels";
import { applyHits, type Hit } from "./outcomes";
import { loadDeployed } from "./deployed-versions";
import { checkRules, type LoadedVersion, type Rule, RULE_SEMANTICS_DEFAULT } from "./rule-sets";
import { compileRule, contextOverBounds, counterLookupKey, type CounterSpec, ENTITY_KIND, evaluateRule } from "./rules-language";
import { AppError, errorCode } from "../errors";
import type { ExpressionSemantics, JsonObject, JsonValue } from "../workflows";

export const MAX_EVENTS_PER_BATCH = 1_000;
const MAX_ENTITIES = 32;
const FUTURE_SKEW_MS = 5 * 60_000;
/**
 * How late an event may arrive. A counter reads the window ending at the event's own time, so a
 * back-dated event would be judged against a past that later events have already moved past (and
 * could be sent late on purpose to slip under a rule); older events are refused.
 */
const MAX_EVENT_AGE_MS = 24 * 3600_000;
const EVENT_TYPE = /^[A-Za-z0-9_.:-]{1,100}$/u;

export interface ProductEvent {
  id: string;
  type: string;
  occurredAt: string;
  entities: Record<string, string>;
  data: JsonObject;
  /** occurredAt in ms. */
  at: number;
}

export interface EventResult {
  id: string | null;
  status: "evaluated" | "duplicate" | "rejected";
  hits?: Array<{ ruleSetId: string; versionId: string; ruleId: string; outcome: string; authorityMode: string; applied: boolean }>;
  /** Rules that could not be evaluated on this event (their code), e.g. a missing entity. */
  ruleErrors?: Array<{ ruleSetId: string; ruleId: string; code: string }>;
  error?: { code: string; message: string };
}

function rejected(id: unknown, code: string, message: string): EventResult {
  return { id: typeof id === "string" ? id : null, status: "rejected", error: { code, message } };
}

/** The event as intake takes it, or the reason it is refused (the rest of the batch goes on). */
function checkEvent(raw: unknown, now: number): ProductEvent | EventResult {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return rejected(null, "event.invalid", "An event is an object with id, type, occurredAt, entities and data.");
  const event = raw as Record<string, unknown>;
  if (typeof event.id !== "string" || event.id.length === 0 || event.id.length > 128) return rejected(event.id, "event.id_invalid", "id is the event's own id, 1 to 128 characters; a retry sends the same id.");
  if (typeof event.type !== "string" || !EVENT_TYPE.test(event.type)) return rejected(event.id, "event.type_invalid", "type is 1 to 100 letters, digits and _ . : -, e.g. post.created.");
  const at = typeof event.occurredAt === "string" ? Date.parse(event.occurredAt) : Number.NaN;
  if (!Number.isFinite(at)) return rejected(event.id, "event.occurred_at_invalid", "occurredAt is an ISO 8601 time, e.g. 2026-01-01T12:00:00Z.");
  if (at > now + FUTURE_SKEW_MS) return rejected(event.id, "event.occurred_at_future", "occurredAt is more than 5 minutes ahead of the platform's clock; send the time the event happened.");
  if (at < now - MAX_EVENT_AGE_MS) return rejected(event.id, "event.occurred_at_stale", "occurredAt is more than 24 hours before the platform's clock; events are sent as they happen (rules judge them against the counters of their time).");
  const entities: Record<string, string> = {};
  if (event.entities !== undefined) {
    if (typeof event.entities !== "object" || event.entities === null || Array.isArray(event.entities)) return rejected(event.id, "event.entities_invalid", 'entities is an object of entity kind → id, e.g. {"account": "a1"}.');
    const pairs = Object.entries(event.entities as Record<string, unknown>);
    if (pairs.length > MAX_ENTITIES) return rejected(event.id, "event.entities_invalid", `An event names at most ${MAX_ENTITIES} entities.`);
    for (const [kind, value] of pairs) {
      if (!ENTITY_KIND.test(kind)) return rejected(event.id, "event.entities_invalid", "Entity kinds are lowercase letters, digits and _ (up to 32), e.g. account, ip, device.");
      if (typeof value !== "string" || value.length === 0 || value.length > 512) return rejected(event.id, "event.entities_invalid", "An entity's id is a string of 1 to 512 characters.");
      entities[kind] = value;
    }
  }
  if (event.data !== undefined && (typeof event.data !== "object" || event.data === null || Array.isArray(event.data))) return rejected(event.id, "event.data_invalid", "data is an object.");
  if (event.data !== undefined && nestedDeeperThan(event.data, MAX_DATA_DEPTH)) return rejected(event.id, "event.data_invalid", `data nests at most ${MAX_DATA_DEPTH} objects or arrays deep.`);
  return { id: event.id, type: event.type, occurredAt: new Date(at).toISOString(), entities, data: (event.data ?? {}) as JsonObject, at };
}

/** How deep an event's data may nest: far past what a product's event needs, far short of a depth at which a recursive reader (serializing a sample, evaluating a rule, a backtest reading it back) runs out of stack. */
const MAX_DATA_DEPTH = 32;

/** Whether `value` nests objects or arrays more than `limit` deep (walked without recursion). */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== "object" || item === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}

export interface CounterPlan {
  specs: CounterSpec[];
  /** The longest window per counter key class (`c:<type>:<kind>` / `d:<member>:<kind>`): how long its rows stay. */
  keep: Map<string, number>;
}

/** Every counter the versions' rules read, once, with how long each key's rows must stay. */
export function counterPlan(versions: Array<Pick<LoadedVersion, "rules">>): CounterPlan {
  const specs = new Map<string, CounterSpec>();
  const keep = new Map<string, number>();
  for (const version of versions)
    for (const rule of version.rules)
      for (const spec of rule.counters) {
        const first = spec.fn === "count" ? spec.type : spec.member;
        specs.set(`${spec.fn}\u0000${first}\u0000${spec.kind}\u0000${spec.window}`, spec);
        const cls = `${spec.fn === "count" ? "c" : "d"}:${first}:${spec.kind}`;
        keep.set(cls, Math.max(keep.get(cls) ?? 0, spec.windowMs));
      }
  return { specs: [...specs.values()], keep };
}

/**
 * The counter ops of one event: each counter the plan names whose entity the event has, read at
 * the event's time and, where the event is what it counts, counted first (once per key).
 */
export function eventOps(event: ProductEvent, plan: CounterPlan, keyOf: (kind: string, value: string) => string): Array<{ op: CounterOp; entity: string; lookup: string }> {
  const out: Array<{ op: CounterOp; entity: string; lookup: string }> = [];
  const hash = eventHash(event.id);
  const recorded = new Set<string>();
  for (const spec of plan.specs) {
    const value = event.entities[spec.kind];
    if (value === undefined) continue;
    const entity = keyOf(spec.kind, value);
    const first = spec.fn === "count" ? spec.type : spec.member;
    const prefix = spec.fn === "count" ? "c" : "d";
    // Opaque and short (it is stored in every counter row and both of its indexes): 96 bits of
    // a hash of what it counts and of whom.
    const key = `${prefix}${sha256HexSync(`${first}\u0000${entity}`).slice(0, 24)}`;
    const keepMs = plan.keep.get(`${prefix}:${first}:${spec.kind}`)!;
    const memberValue = spec.fn === "distinct" ? event.entities[spec.member] : undefined;
    const wouldRecord = spec.fn === "count" ? event.type === spec.type : memberValue !== undefined;
    const record = wouldRecord && !recorded.has(key);
    if (record) recorded.add(key);
    const member = record && memberValue !== undefined ? { member: keyOf(first, memberValue).slice(4, 20) } : {};
    out.push({ op: { key, event: hash, at: event.at, windowMs: spec.windowMs, keepMs, distinct: spec.fn === "distinct", record, ...member }, entity, lookup: counterLookupKey(spec, first, value) });
  }
  return out;
}

/**
 * Counts and reads every counter the deployed rules name, for every event: one Durable Object call
 * per shard touched, in parallel. Answers each event's counter values and whether it was counted
 * before (a retry).
 */
async function readCounters(
  env: Env,
  installationId: string,
  events: ProductEvent[],
  plan: CounterPlan,
  keyOf: (kind: string, value: string) => string,
  options: { readOnly?: boolean } = {},
): Promise<{ values: Map<string, number>[]; duplicate: boolean[] }> {
  const values = events.map(() => new Map<string, number>());
  const duplicate = events.map(() => false);
  if (plan.specs.length === 0) return { values, duplicate };
  const shards = new Map<number, { ops: CounterOp[]; targets: Array<{ event: number; lookup: string }> }>();
  events.forEach((event, index) => {
    for (const { op: planned, entity, lookup } of eventOps(event, plan, keyOf)) {
      // Read-only (a test): nothing is counted; a count of the event's own type reads one more, as if it had been.
      const op = options.readOnly ? { ...planned, record: false } : planned;
      if (options.readOnly && planned.record && !planned.distinct) values[index]!.set(`+${lookup}`, 1);
      const shard = shardOf(entity);
      let entry = shards.get(shard);
      if (!entry) {
        entry = { ops: [], targets: [] };
        shards.set(shard, entry);
      }
      entry.ops.push(op);
      entry.targets.push({ event: index, lookup });
    }
  });
  await Promise.all(
    [...shards].map(async ([shard, entry]) => {
      let results: CounterResult[];
      try {
        results = await counterShard(env, installationId, shard).apply(entry.ops);
      } catch (error) {
        throw new AppError("event.counters_unavailable", "The counters could not be reached; retry the batch (events already counted count once).", { status: 503, retryable: true, details: { code: errorCode(error) } });
      }
      results.forEach((result, i) => {
        const target = entry.targets[i]!;
        values[target.event]!.set(target.lookup, result.value + (values[target.event]!.get(`+${target.lookup}`) ?? 0));
        if (entry.ops[i]!.record && result.duplicate) duplicate[target.event] = true;
      });
    }),
  );
  return { values, duplicate };
}

/** Runs every rule of the versions on one event with its counter values: its hits and the rules that failed on it. */
export function evaluateEvent(
  event: ProductEvent,
  versions: LoadedVersion[],
  counters: Map<string, number>,
  labelsOf: (kind: string, value: string) => string[],
): { hits: Array<{ version: LoadedVersion; rule: LoadedVersion["rules"][number] }>; ruleErrors: NonNullable<EventResult["ruleErrors"]> } {
  const context = {
    event: { id: event.id, type: event.type, occurredAt: event.occurredAt, data: event.data },
    entity: event.entities,
    labels: Object.fromEntries(Object.entries(event.entities).map(([kind, value]) => [kind, labelsOf(kind, value)])) as JsonValue,
  };
  const hits: Array<{ version: LoadedVersion; rule: LoadedVersion["rules"][number] }> = [];
  const ruleErrors: NonNullable<EventResult["ruleErrors"]> = [];
  let overBounds: boolean | undefined;
  for (const version of versions) {
    for (const rule of version.rules) {
      let matched: JsonValue;
      try {
        if (rule.bounded && overBounds === undefined) overBounds = contextOverBounds(context) !== null;
        if (rule.bounded && overBounds) throw new AppError("expression.input_too_large", "The event has a list or string over the bounds this rule needs.");
        matched = evaluateRule(rule.when, context, counters, version.semantics);
      } catch (error) {
        ruleErrors.push({ ruleSetId: version.ruleSetId, ruleId: rule.id, code: errorCode(error) });
        continue;
      }
      if (matched === true) hits.push({ version, rule });
    }
  }
  return { hits, ruleErrors };
}

/**
 * Takes a batch of events (up to 1,000): each is checked on its own (a bad one is `rejected` in
 * its result, the others go on), counted, and evaluated against every deployed rule set; the
 * hits' outcomes follow their rule set's authority mode (outcomes.ts). Idempotent per event id.
 */
export async function intakeEvents(env: Env, ctx: ExecutionContext, actor: Actor, rawEvents: unknown[]): Promise<{ accepted: number; rejected: number; duplicates: number; hits: number; results: EventResult[] }> {
  if (rawEvents.length > MAX_EVENTS_PER_BATCH) throw new AppError("event.batch_too_large", `A batch holds at most ${MAX_EVENTS_PER_BATCH} events; split it.`, { status: 413 });
  const now = Date.now();
  const installationId = actor.installationId;
  const results: EventResult[] = [];
  const events: ProductEvent[] = [];
  const slots: number[] = [];
  const seen = new Set<string>();
  for (const raw of rawEvents) {
    const checked = checkEvent(raw, now);
    if ("status" in checked) results.push(checked);
    else if (seen.has(checked.id)) results.push({ id: checked.id, status: "duplicate" });
    else {
      seen.add(checked.id);
      slots.push(results.length);
      results.push({ id: checked.id, status: "evaluated" });
      events.push(checked);
    }
  }
  const deployed = await loadDeployed(env, installationId);
  const keys = new Map<string, string>();
  const keyOf = (kind: string, value: string) => {
    const name = `${kind}\u0000${value}`;
    let key = keys.get(name);
    if (!key) {
      key = entityKey(installationId, kind, value, env);
      keys.set(name, key);
    }
    return key;
  };
  const { values, duplicate } = await readCounters(env, installationId, events, counterPlan(deployed.versions), keyOf);
  const atIso = new Date(now).toISOString();
  const labels = deployed.versions.some((version) => version.readsLabels)
    ? await labelsOfEntities(
        env.DB,
        installationId,
        events.flatMap((event) => Object.entries(event.entities).map(([kind, value]) => keyOf(kind, value))),
        atIso,
      )
    : new Map<string, string[]>();
  const hits: Hit[] = [];
  events.forEach((event, index) => {
    const result = results[slots[index]!]!;
    if (duplicate[index]) result.status = "duplicate";
    const evaluated = evaluateEvent(event, deployed.versions, values[index]!, (kind, value) => labels.get(keyOf(kind, value)) ?? []);
    if (evaluated.ruleErrors.length > 0) result.ruleErrors = evaluated.ruleErrors;
    for (const { version, rule } of evaluated.hits) hits.push({ event, version, rule, resultIndex: slots[index]! });
  });
  const sampled = deployed.sampleRate > 0 ? events.filter(() => Math.random() < deployed.sampleRate) : [];
  const samples = await Promise.all(
    sampled.map(async (event) => {
      const { sealed, dataKeyId } = await sealPersonalData(env, installationId, `event_sample:${event.id}`, { id: event.id, type: event.type, occurredAt: event.occurredAt, entities: event.entities, data: event.data });
      return env.DB.prepare(`INSERT OR IGNORE INTO event_samples (installation_id, event_id, event_type, occurred_at, sealed, data_key_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`).bind(
        installationId,
        event.id,
        event.type,
        event.occurredAt,
        sealed,
        dataKeyId,
      );
    }),
  );
  const applied = await applyHits(env, ctx, actor, { hits, keyOf, at: atIso, extra: samples });
  for (const [i, hit] of hits.entries()) {
    const result = results[hit.resultIndex]!;
    result.hits = result.hits ?? [];
    result.hits.push({ ruleSetId: hit.version.ruleSetId, versionId: hit.version.versionId, ruleId: hit.rule.id, outcome: Object.keys(hit.rule.outcome)[0]!, authorityMode: hit.version.authorityMode, applied: applied[i]! });
  }
  const count = (status: EventResult["status"]) => results.filter((result) => result.status === status).length;
  return { accepted: count("evaluated") + count("duplicate"), rejected: count("rejected"), duplicates: count("duplicate"), hits: hits.length, results };
}

/**
 * Tests rules that need not be published against pasted events, with no side effect: the rules
 * are checked as at publish, each event as at intake, counters are read as they stand (nothing is
 * counted; a count of the event's own type reads one more, as if it were) and labels as they are.
 * Answers, per event, the rules that would hit and the counter values they read.
 */
export async function testRules(env: Env, actor: Actor, input: { rules: Rule[]; events: unknown[]; expressionSemantics?: ExpressionSemantics }) {
  const semantics = input.expressionSemantics ?? RULE_SEMANTICS_DEFAULT;
  await checkRules(env, actor.installationId, input.rules, semantics);
  const rules = input.rules.map((rule) => ({ ...rule, ...compileRule(rule.when, semantics) }));
  const version: LoadedVersion = { ruleSetId: "test", versionId: "test", authorityMode: "shadow", semantics, rules, readsLabels: rules.some((rule) => /\blabels\b/u.test(rule.when)) };
  const now = Date.now();
  const checked = input.events.map((raw) => checkEvent(raw, now));
  const events = checked.filter((event): event is ProductEvent => !("status" in event));
  const keyOf = (kind: string, value: string) => entityKey(actor.installationId, kind, value, env);
  const plan = counterPlan([version]);
  const { values } = await readCounters(env, actor.installationId, events, plan, keyOf, { readOnly: true });
  const labels = version.readsLabels
    ? await labelsOfEntities(
        env.DB,
        actor.installationId,
        events.flatMap((event) => Object.entries(event.entities).map(([kind, value]) => keyOf(kind, value))),
        new Date(now).toISOString(),
      )
    : new Map<string, string[]>();
  let next = 0;
  return {
    results: checked.map((event) => {
      if ("status" in event) return event;
      const counters = values[next++]!;
      const evaluated = evaluateEvent(event, [version], counters, (kind, value) => labels.get(keyOf(kind, value)) ?? []);
      return {
        id: event.id,
        status: "evaluated" as const,
        hits: evaluated.hits.map(({ rule }) => ({ ruleId: rule.id, outcome: rule.outcome })),
        ruleErrors: evaluated.ruleErrors.map(({ ruleId, code }) => ({ ruleId, code })),
        counters: plan.specs.flatMap((spec) => {
          const value = event.entities[spec.kind];
          const first = spec.fn === "count" ? spec.type : spec.member;
          const read = value === undefined ? undefined : counters.get(counterLookupKey(spec, first, value));
          return read === undefined ? [] : [{ call: `${spec.fn}('${first}', entity.${spec.kind}, '${spec.window}')`, value: read }];
        }),
      };
    }),
  };
}
