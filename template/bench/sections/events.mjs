// Section "events": product event intake (POST /api/v1/events) — batches of 100 events against 20
// deployed rules (5 of them read sliding-window counters), none of which match, so every event is
// an unhit one: counted, evaluated and dropped. Figures: events per second; that rate over the
// same Worker's bare POST floor (POST /bench/floor-post: the same 100-event body read, then the
// platform's GET /, no auth, no D1); the D1 bytes an unhit event leaves (sampling off); and what
// the counters cost per event: time (against the same batches with 20 rules and no counter), rows
// and bytes in the counter shards (Durable Object SQLite storage).
import { randomBytes } from "node:crypto";
import { atLeast, log, mean, percentile, pool, results, round, verdict } from "./lib.mjs";

const BATCH = 100;
const WARMUP_BATCHES = 5;
const BATCHES = 60;
const CONCURRENCY = 4;
const FLOOR_REQUESTS = 600;
const FLOOR_CONCURRENCY = 16;
/** Events evaluated per second over bare POSTs per second of the same Worker (a batch of 100, 20 rules). */
const TARGET_EVENTS_OVER_FLOOR = 0.5;
/** D1 bytes an event that hits no rule leaves behind, sampling off. */
const TARGET_STORED_BYTES_PER_UNHIT_EVENT = 16;

const COUNTER_RULES = [
  "count('post.created', entity.account, '10m') > 100000",
  "count('post.created', entity.ip, '1h') > 100000",
  "count('message.sent', entity.account, '1m') > 100000",
  "distinct('ip', entity.account, '24h') > 100000",
  "distinct('device', entity.account, '7d') > 100000",
];

/** Conditions over the event alone (its type, data and entities), never true for the bench's events. */
const PLAIN_RULES = [
  "event.type == 'account.deleted'",
  "event.data.length > 100000",
  "has(event.data.links) && size(event.data.links) > 50",
  "event.data.text.contains('limited offer!!!')",
  "event.data.lang == 'xx' && event.type == 'post.created'",
  "has(entity.url) && entity.url.startsWith('https://scam.example/')",
  "event.data.score > 2.0",
  "event.type == 'post.created' && event.data.length < 0",
  "size(event.data.text) > 5000",
  "entity.account == 'acct-banned'",
  "event.data.mentions > 1000",
  "event.type.startsWith('admin.')",
  "has(event.data.attachments) && event.data.attachments > 100",
  "event.data.lang in ['zz', 'yy'] && event.data.length > 10",
  "entity.device == 'device-known-bad'",
];

function rulesOf(withCounters) {
  const plain = withCounters ? PLAIN_RULES : [...PLAIN_RULES, ...PLAIN_RULES.slice(0, COUNTER_RULES.length).map((when) => `${when} && event.id == 'never'`)];
  const whens = withCounters ? [...COUNTER_RULES, ...plain] : plain;
  return whens.map((when, index) => ({ id: `r${index}`, when, outcome: { label: { entity: "account", value: `bench-${index}` } } }));
}

function batchOf(tag, batch, base) {
  return Array.from({ length: BATCH }, (_, i) => {
    const n = batch * BATCH + i;
    return {
      id: `${tag}-${n}`,
      type: n % 5 === 0 ? "message.sent" : "post.created",
      occurredAt: new Date(base + n * 50).toISOString(),
      entities: { account: `acct-${n % 1_000}`, ip: `10.0.${(n >> 8) % 256}.${n % 256}`, device: `device-${n % 3_000}` },
      data: { text: `Post number ${n}: a few words about the weather and a link.`, length: 48 + (n % 100), lang: "en", score: (n % 100) / 100, mentions: n % 4 },
    };
  });
}

async function deploy(api, key, rules) {
  const set = await api("/api/v1/rule-sets", { body: { name: `bench-${randomBytes(4).toString("hex")}` }, key });
  const version = await api(`/api/v1/rule-sets/${set.id}/versions`, { body: { rules }, key });
  // The bench measures evaluation, not promotion: its rule set waives the gate for autonomous.
  await api(`/api/v1/rule-sets/${set.id}/gate`, { method: "PUT", body: { minComparedHits: 0, minAgreementLow: 0 }, key });
  await api(`/api/v1/rule-sets/${set.id}/deployment`, { method: "PUT", body: { versionId: version.id, authorityMode: "autonomous" }, key });
}

/** Sends BATCHES batches (after a warm-up), CONCURRENCY in flight; every event must be evaluated and hit nothing. */
async function run(timed, key, tag) {
  const base = Date.now() - 3_600_000;
  let next = 0;
  const send = async () => {
    const batch = next++;
    const result = await timed("/api/v1/events", { body: { events: batchOf(tag, batch, base) }, key });
    if (result.status !== 202) throw new Error(`events batch ${batch}: status ${result.status}`);
    if (result.body.hits !== 0 || result.body.accepted !== BATCH || result.body.duplicates !== 0) throw new Error(`events batch ${batch}: ${JSON.stringify({ ...result.body, results: undefined })}`);
    const failed = result.body.results.find((r) => r.ruleErrors);
    if (failed) throw new Error(`events batch ${batch}: a rule failed to evaluate ${JSON.stringify(failed.ruleErrors)}`);
    return result;
  };
  await pool(WARMUP_BATCHES, CONCURRENCY, send);
  const server = [];
  const began = performance.now();
  await pool(BATCHES, CONCURRENCY, async () => server.push((await send()).serverMs));
  const wallS = (performance.now() - began) / 1000;
  return { eventsPerSecond: (BATCHES * BATCH) / wallS, serverMsPerBatch: server, wallS, events: (WARMUP_BATCHES + BATCHES) * BATCH };
}

export async function sectionEvents(api, timed, adminToken) {
  TARGETS_SET();
  log("events: two installations (20 rules with 5 counters; 20 rules without), an events:write key each");
  const [withCounters, withoutCounters] = await Promise.all(["bench-events", "bench-events-plain"].map((name) => api("/api/v1/installations", { body: { name }, key: adminToken })));
  await deploy(api, withCounters.apiKey, rulesOf(true));
  await deploy(api, withoutCounters.apiKey, rulesOf(false));
  const keyOf = async (installation) => (await api("/api/v1/api-keys", { body: { name: "bench-events", scopes: ["events:write"] }, key: installation.apiKey })).apiKey;
  const [countersKey, plainKey] = await Promise.all([keyOf(withCounters), keyOf(withoutCounters)]);
  const tag = randomBytes(4).toString("hex");

  log(`events: ${BATCHES} batches of ${BATCH} (after ${WARMUP_BATCHES} warm-up), 20 rules without counters, ${CONCURRENCY} in flight`);
  const plain = await run(timed, plainKey, `${tag}-p`);
  const storedBefore = await api("/bench/events-storage", { body: { installationId: withCounters.id }, key: adminToken });
  log(`events: ${BATCHES} batches of ${BATCH}, 20 rules of which 5 read counters, ${CONCURRENCY} in flight`);
  const counted = await run(timed, countersKey, `${tag}-c`);
  const storedAfter = await api("/bench/events-storage", { body: { installationId: withCounters.id }, key: adminToken });

  log(`events: the bare POST floor, ${FLOOR_REQUESTS} × POST /bench/floor-post with a ${BATCH}-event body, ${FLOOR_CONCURRENCY} in flight`);
  const body = { events: batchOf(`${tag}-f`, 0, Date.now()) };
  const floorBegan = performance.now();
  await pool(FLOOR_REQUESTS, FLOOR_CONCURRENCY, () => timed("/bench/floor-post", { body }));
  const floorPerSecond = FLOOR_REQUESTS / ((performance.now() - floorBegan) / 1000);

  const perEvent = (run_) => mean(run_.serverMsPerBatch) / BATCH;
  Object.assign(results, {
    eventsBatch: BATCH,
    eventsRules: 20,
    eventsCounterRules: COUNTER_RULES.length,
    eventsConcurrency: CONCURRENCY,
    eventsPerSecond: round(counted.eventsPerSecond, 1),
    eventsPerSecondWithoutCounters: round(plain.eventsPerSecond, 1),
    eventsBatchServerMsP50: round(percentile(counted.serverMsPerBatch, 0.5)),
    eventsBatchServerMsP95: round(percentile(counted.serverMsPerBatch, 0.95)),
    eventsBarePostsPerSecond: round(floorPerSecond, 1),
    eventsOverFloor: round(counted.eventsPerSecond / floorPerSecond, 2),
    storedBytesPerUnhitEvent: round((storedAfter.d1Bytes - storedBefore.d1Bytes) / counted.events, 2),
    d1RowsPerUnhitEvent: round((storedAfter.d1Rows - storedBefore.d1Rows) / counted.events, 3),
    counterMsPerEvent: round(perEvent(counted) - perEvent(plain), 3),
    counterRowsPerEvent: round((storedAfter.counterRows - storedBefore.counterRows) / counted.events, 2),
    counterBytesPerEvent: round((storedAfter.counterBytes - storedBefore.counterBytes) / counted.events, 1),
    counterShards: storedAfter.shardsUsed,
  });
  log(
    `events: ${results.eventsPerSecond} events/s (${results.eventsOverFloor} of the bare POST floor), ${results.storedBytesPerUnhitEvent} D1 bytes per unhit event, counters ${results.counterMsPerEvent} ms and ${results.counterBytesPerEvent} B per event`,
  );
}

function TARGETS_SET() {
  results.targets.eventsOverFloor ??= TARGET_EVENTS_OVER_FLOOR;
  results.targets.storedBytesPerUnhitEvent ??= TARGET_STORED_BYTES_PER_UNHIT_EVENT;
}

export function eventLines() {
  if (results.eventsPerSecond === undefined) return [];
  return [
    `event intake:     ${results.eventsPerSecond} events/s, ${results.eventsOverFloor} of the bare POST floor (${results.eventsBarePostsPerSecond} POST/s; target ≥ ${TARGET_EVENTS_OVER_FLOOR}) ${atLeast(results.eventsOverFloor, TARGET_EVENTS_OVER_FLOOR)}  (batches of ${results.eventsBatch}, ${results.eventsRules} rules of which ${results.eventsCounterRules} read counters, none hit, ${results.eventsConcurrency} in flight; batch server p50 ${results.eventsBatchServerMsP50} ms, p95 ${results.eventsBatchServerMsP95} ms)`,
    `event storage:    ${results.storedBytesPerUnhitEvent} D1 bytes per unhit event (target ≤ ${TARGET_STORED_BYTES_PER_UNHIT_EVENT}, sampling off) ${verdict(results.storedBytesPerUnhitEvent, TARGET_STORED_BYTES_PER_UNHIT_EVENT)}; ${results.d1RowsPerUnhitEvent} D1 rows per event`,
    `event counters:   ${results.counterMsPerEvent} ms server time per event (vs ${results.eventsPerSecondWithoutCounters} events/s with 20 rules and no counter), ${results.counterRowsPerEvent} rows and ${results.counterBytesPerEvent} B of Durable Object storage per event, ${results.counterShards} counter shards hold them (a batch calls each shard it touches once)`,
  ];
}
