// Section "search": GET /api/v1/search over one installation's reports — BENCH_SEARCH_REPORTS
// (1,000,000 unless set) seeded in bulk SQL by /bench/search-seed with their keyed search terms
// (bench/search.ts: six words of a 5,000-word vocabulary each, the common word "spam" in one report
// of five, one of 10,000 reporters) — as the console's search box asks it: by a reporter's id (a
// sealed identifier: ~100 reports each), by one word (~1,200), by two words of one report (~200
// both), and by a rare word with the common one. Server time (Server-Timing app;dur) of each
// sample; `searchP95Ms` is the p95 over all of them, with each kind's p50/p95 beside it. The seed
// stops early when the bench's time budget runs short (`searchReports` says the size measured).
import { latency, log, remaining, results } from "./lib.mjs";

const REPORTS = Number(process.env.BENCH_SEARCH_REPORTS ?? 1_000_000);
const CHUNK = 50_000;
const VOCABULARY = 5_000;
const REPORTERS = 10_000;
const SAMPLES_PER_KIND = 25;
const WARM_UP = 3;
const DAY_MS = 86_400_000;
/** The seed stops early when less than this is left of the bench's budget: the queries are measured at the size reached (printed). */
const MEASURE_RESERVE_MS = 150_000;

const wordsOf = (i) => Array.from({ length: 6 }, (_, j) => `w${(i * 13 + j * 977) % VOCABULARY}`);

export async function sectionSearch(api, timed, adminToken) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-search" }, key: adminToken });
  const key = installation.apiKey;
  const template = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "search-template" }, category: "violence", description: "template" }, key });
  const baseMs = Date.now() - 365 * DAY_MS;
  const spacingMs = Math.max(1, Math.floor((365 * DAY_MS) / REPORTS));
  log(`search: seeding ${REPORTS} reports with their search terms`);
  let seedMs = 0;
  let terms = 0;
  let seeded = 0;
  for (let from = 0; from < REPORTS; from += CHUNK) {
    if (remaining() < MEASURE_RESERVE_MS) {
      log(`search: stopping the seed at ${from} reports (the bench's time budget); measuring at that size`);
      break;
    }
    const count = Math.min(CHUNK, REPORTS - from);
    const chunk = await api("/bench/search-seed", { body: { templateId: template.id, from, count, baseMs, spacingMs }, key: adminToken });
    if (chunk.reports !== count) throw new Error(`search seed ${from}: ${chunk.reports} reports, expected ${count}`);
    seedMs += chunk.seedMs;
    terms += chunk.terms;
    seeded = from + count;
    if ((from / CHUNK) % 5 === 4) log(`search: ${from + count} reports seeded (${Math.round(seedMs / 1000)} s in D1)`);
  }
  const pick = (k) => (k * 7919 + 17) % seeded;
  const kinds = {
    reporterId: (k) => ({ q: `reporter-${pick(k) % Math.min(REPORTERS, seeded)}`, expect: (n) => n > 0 }),
    oneWord: (k) => ({ q: wordsOf(pick(k))[k % 6], expect: (n) => n > 0 }),
    twoWords: (k) => {
      const words = wordsOf(pick(k));
      return { q: `${words[0]} ${words[3]}`, expect: (n) => n > 0 };
    },
    withCommonWord: (k) => ({ q: `spam ${wordsOf(pick(k) - (pick(k) % 5))[1]}`, expect: (n) => n > 0 }),
  };
  const samples = [];
  const byKind = {};
  for (const [kind, make] of Object.entries(kinds)) {
    const mine = [];
    for (let k = 0; k < WARM_UP + SAMPLES_PER_KIND; k++) {
      const { q, expect } = make(k);
      const result = await timed(`/api/v1/search?${new URLSearchParams({ q, limit: "50" })}`, { key });
      if (!expect(result.body.items.length)) throw new Error(`search ${kind} "${q}": no results`);
      if (k >= WARM_UP) mine.push(result);
    }
    samples.push(...mine);
    byKind[kind] = latency(mine, "serverMs");
  }
  const all = latency(samples, "serverMs");
  Object.assign(results, {
    searchReports: seeded,
    searchReportsTarget: REPORTS,
    searchTerms: terms,
    searchSeedMs: seedMs,
    searchSamples: samples.length,
    searchP50Ms: all.p50,
    searchP95Ms: all.p95,
    searchClientP95Ms: latency(samples, "clientMs").p95,
    searchByKindMs: byKind,
  });
  log(`search: ${seeded} reports (${terms} terms): p50 ${all.p50} ms, p95 ${all.p95} ms; by kind ${JSON.stringify(byKind)}`);
}

export function searchLines() {
  if (results.searchP95Ms === undefined) return [];
  return [
    `search:           GET /search?q= over ${results.searchReports} reports${results.searchReports < results.searchReportsTarget ? ` (of ${results.searchReportsTarget} asked: the seed stopped at the bench's time budget)` : ""} (${results.searchTerms} keyed terms): p95 ${results.searchP95Ms} ms (p50 ${results.searchP50Ms}; server time, ${results.searchSamples} samples; target < 300 ms)`,
    `search by kind (ms): ${Object.entries(results.searchByKindMs)
      .map(([kind, { p50, p95 }]) => `${kind} p50 ${p50} p95 ${p95}`)
      .join(", ")}`,
  ];
}
