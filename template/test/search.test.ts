// Search: q finds reports by every word of their description and, exactly, by their reporter's id
// or contact, through keyed terms, with none of them in plaintext in D1 (the raw rows are read);
// cases, decisions and accounts by the same matches and filters; cursors; searches that touch
// personal data are audited without the query; another installation's records never appear.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { buildCaseArchive, SCOPE_SQL, TABLES } from "../src/cases/archive/case-scope";
import { DRIVER_SQL, STATEMENTS } from "../src/cases/search/search";
import { compactTerm, eraseReportTermsStatement, hexTerm, listTermsOnReports, parseTermsColumn, termTime, termTimeSql } from "../src/cases/search/search-terms";
import { sweepUnlistedTerms, termKeysOfReports } from "../src/cases/search/terms-listing";
import { type ErasureCounts, eraseReports } from "../src/cases/retention/retention-erase";
import { api, newInstallation, personKey } from "./helpers";

const REPORTER_ID = `reporter-${crypto.randomUUID()}`;
const CONTACT = `Alice.${crypto.randomUUID().slice(0, 8)}@Example.org`;

async function fileReport(apiKey: string, input: { subjectId: string; owner?: string; description?: string; reporter?: Record<string, string>; category?: string }) {
  const response = await api("/api/v1/reports", {
    key: apiKey,
    body: {
      subject: { kind: "content", id: input.subjectId, ...(input.owner ? { ownerId: input.owner } : {}) },
      category: input.category ?? "scams_and_fraud",
      ...(input.description ? { description: input.description } : {}),
      ...(input.reporter ? { reporter: input.reporter } : {}),
    },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body as { id: string; caseId: string };
}

const termRows = async (installationId: string, id: string) =>
  (await env.DB.prepare(`SELECT term FROM search_terms WHERE installation_id = ?1 AND record_id = ?2 ORDER BY term`).bind(installationId, id).all<{ term: string }>()).results.map((r) => r.term);
const listed = async (id: string) => (await env.DB.prepare(`SELECT search_terms AS terms FROM reports WHERE id = ?1`).bind(id).first<{ terms: string | null }>())?.terms ?? null;
/** The terms a report's list names, sorted (either form of the list). */
const listedTerms = async (id: string) => parseTermsColumn(await listed(id))?.sort() ?? null;
const auditOf = (installationId: string, id: string, at: string) => (n: ErasureCounts) => ({
  installationId,
  idempotencyKey: `test:${id}`,
  action: "retention.personal_data_erased",
  actor: { type: "system" as const, id: "retention" },
  target: { type: "installation", id: installationId },
  details: { ...n },
  at,
});
const search = (apiKey: string, query: Record<string, string>) => api(`/api/v1/search?${new URLSearchParams(query)}`, { key: apiKey });
const ids = (body: any) => body.items.map((item: any) => item.id);

describe("search", () => {
  it("finds reports by a sealed identifier and by description words, with no identifier or word in plaintext at rest", async () => {
    const { id: installationId, apiKey } = await newInstallation("search");
    const target = await fileReport(apiKey, { subjectId: "post-1", description: "Quixotrel flumbergast: send one coin, get two back!", reporter: { id: REPORTER_ID, contact: CONTACT } });
    const other = await fileReport(apiKey, { subjectId: "post-2", description: "A flumbergast of kittens.", reporter: { id: "someone-else" } });

    const byId = await search(apiKey, { q: REPORTER_ID });
    expect(byId.status).toBe(200);
    expect(ids(byId.body)).toEqual([target.id]);
    expect(byId.body.items[0]).toMatchObject({ type: "report", id: target.id, category: "scams_and_fraud", caseId: target.caseId });
    // A contact matches whatever its case.
    expect(ids((await search(apiKey, { q: CONTACT.toLowerCase() })).body)).toEqual([target.id]);
    // Every word must be in the description.
    expect(ids((await search(apiKey, { q: "FLUMBERGAST quixotrel" })).body)).toEqual([target.id]);
    expect(ids((await search(apiKey, { q: "flumbergast" })).body).sort()).toEqual([target.id, other.id].sort());
    expect(ids((await search(apiKey, { q: "flumbergast banana" })).body)).toEqual([]);

    // At rest: neither the identifier, the contact nor a word of the description, in any row of the report or the index.
    const rows = await env.DB.batch([
      env.DB.prepare(`SELECT * FROM reports WHERE id = ?1`).bind(target.id),
      env.DB.prepare(`SELECT * FROM search_terms WHERE record_id = ?1`).bind(target.id),
      env.DB.prepare(`SELECT * FROM audit_events WHERE installation_id = ?1`).bind(installationId),
    ]);
    expect(rows[1]!.results.length).toBeGreaterThan(5);
    const atRest = JSON.stringify(rows.map((r) => r.results)).toLowerCase();
    for (const plaintext of [REPORTER_ID, CONTACT.toLowerCase(), "quixotrel", "flumbergast"]) expect(atRest).not.toContain(plaintext);

    // Each search with q is on the record: who, which fields, how many results.
    const audited = await api("/api/v1/audit-events?action=search.personal_data_searched&limit=50", { key: apiKey });
    const searches = (audited.body.items ?? []).filter((event: any) => event.action === "search.personal_data_searched");
    expect(searches.length).toBeGreaterThanOrEqual(5);
    expect(searches[0].details).toMatchObject({ type: "report", fields: ["description", "reporter.id", "reporter.contact"] });
  });

  it("searches cases, decisions and accounts, with filters and cursors", async () => {
    const { apiKey } = await newInstallation("search-types");
    const owner = `owner-${crypto.randomUUID()}`;
    const first = await fileReport(apiKey, { subjectId: "post-a", owner, description: "Phishing link to a fake bank." });
    const second = await fileReport(apiKey, { subjectId: "post-b", owner, description: "Another phishing link.", category: "illegal_or_harmful_speech" });
    // A person's decision (a reviewer's key): not_automated.
    const decided = await api("/api/v1/decisions", { key: await personKey(apiKey), body: { reportId: first.id, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Phishing." } });
    expect(decided.status).toBe(201);

    const cases = await search(apiKey, { q: "phishing", type: "case" });
    expect(ids(cases.body).sort()).toEqual([first.caseId, second.caseId].sort());
    expect(cases.body.items[0]).toMatchObject({ type: "case", state: "open" });
    const decisions = await search(apiKey, { q: "phishing", type: "decision", decision: "removed", automation: "not_automated" });
    expect(ids(decisions.body)).toEqual([decided.body.id]);
    expect(ids((await search(apiKey, { type: "decision", decision: "no_action" })).body)).toEqual([]);
    expect(ids((await search(apiKey, { q: "phishing", category: "scams_and_fraud" })).body)).toEqual([first.id]);
    expect(ids((await search(apiKey, { q: "phishing", decision: "removed" })).body)).toEqual([first.id]);
    expect(ids((await search(apiKey, { q: "phishing", from: "2999-01-01" })).body)).toEqual([]);
    const accounts = await search(apiKey, { q: owner, type: "account" });
    expect(accounts.body.items).toEqual([expect.objectContaining({ type: "account", id: owner, reportCount: 2 })]);

    // Pages newest first, each report once.
    const page1 = await search(apiKey, { q: "phishing", limit: "1" });
    expect(ids(page1.body)).toEqual([second.id]);
    expect(page1.body.nextCursor).toEqual(expect.any(String));
    const page2 = await search(apiKey, { q: "phishing", limit: "1", cursor: page1.body.nextCursor });
    expect(ids(page2.body)).toEqual([first.id]);
    expect(page2.body.nextCursor).toBeNull();

    // Without personal_data:read, q is refused; filters alone are not.
    const reviewer = await api("/api/v1/api-keys", { key: apiKey, body: { name: "reviewer", scopes: ["review"] } });
    const refused = await search(reviewer.body.apiKey, { q: "phishing" });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("search.personal_data_scope");
    expect((await search(reviewer.body.apiKey, { category: "scams_and_fraud" })).status).toBe(200);
  });

  it("never shows another installation's records", async () => {
    const a = await newInstallation("search-a");
    const b = await newInstallation("search-b");
    const owner = `owner-${crypto.randomUUID()}`;
    const mine = await fileReport(a.apiKey, { subjectId: "shared-post", owner, description: "Shared words here.", reporter: { id: REPORTER_ID } });
    const theirs = await fileReport(b.apiKey, { subjectId: "shared-post", owner, description: "Shared words here.", reporter: { id: REPORTER_ID } });
    for (const q of [REPORTER_ID, "shared words"]) {
      expect(ids((await search(a.apiKey, { q })).body)).toEqual([mine.id]);
      expect(ids((await search(b.apiKey, { q })).body)).toEqual([theirs.id]);
    }
    expect(ids((await search(b.apiKey, { q: owner, type: "account" })).body)).toEqual([owner]);
    const everything = await search(b.apiKey, { type: "report" });
    expect(ids(everything.body)).toEqual([theirs.id]);
    expect(JSON.stringify(everything.body)).not.toContain(mine.id);
  });

  it("a report whose personal data is erased is never a match, even where its term rows were left behind (an older worker's erasure that could not read a compact list)", async () => {
    const { apiKey } = await newInstallation("search-erased-left");
    const words = `lingering ${crypto.randomUUID().slice(0, 8)}`;
    const reporter = `left-${crypto.randomUUID()}`;
    const kept = await fileReport(apiKey, { subjectId: "left-a", description: `Kept ${words}.`, reporter: { id: reporter } });
    const erased = await fileReport(apiKey, { subjectId: "left-b", description: `Erased ${words}.`, reporter: { id: reporter } });
    for (const q of [reporter, words]) expect(ids((await search(apiKey, { q })).body).sort()).toEqual([kept.id, erased.id].sort());
    // What the earlier release's erasure did with a list it could not parse: marked erased, rows kept.
    await env.DB.prepare(`UPDATE reports SET personal_data_erased_at = ?2, search_terms = NULL WHERE id = ?1`).bind(erased.id, new Date().toISOString()).run();
    for (const q of [reporter, words]) {
      expect(ids((await search(apiKey, { q })).body)).toEqual([kept.id]);
      expect(ids((await search(apiKey, { q, type: "case" })).body)).toEqual([kept.caseId]);
    }
  });

  it("a report lists its own terms: erasure removes each of its term rows by a seek of the key (no record index; a common term's statistics do not turn it into a walk) and leaves another report's", async () => {
    const { id: installationId, apiKey } = await newInstallation("search-erase");
    const erased = await fileReport(apiKey, { subjectId: "post-e1", description: "Wobblequartz trades stolen cards", reporter: { id: `r-${crypto.randomUUID()}` } });
    const kept = await fileReport(apiKey, { subjectId: "post-e2", description: "Wobblequartz is a fine word" });
    const bare = await fileReport(apiKey, { subjectId: "post-e3" });
    const erasedTerms = await termRows(installationId, erased.id);
    expect(erasedTerms.length).toBe(5); // four words and the reporter's id
    expect(await listedTerms(erased.id)).toEqual(erasedTerms);
    expect(await listedTerms(kept.id)).toEqual(await termRows(installationId, kept.id));
    expect(await listed(bare.id)).toBe("");

    // The table has no second B-tree. With statistics saying one term is common (as ANALYZE or
    // PRAGMA optimize would write them), the erasure still seeks each row by its whole key.
    const indexes = await env.DB.prepare(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'search_terms'`).all<{ name: string }>();
    expect(indexes.results.map((r) => r.name).filter((name) => !name.startsWith("sqlite_autoindex"))).toEqual([]);
    const common = erasedTerms[0]!;
    await env.DB.prepare(`INSERT INTO search_terms (installation_id, term, created_at, record_id) SELECT ?1, ?2, '2020-01-01T00:00:00.' || value, 'rpt_filler_' || value FROM generate_series(1, 400)`)
      .bind(installationId, common)
      .run()
      .catch(async () => {
        // generate_series is an extension; a recursive CTE does the same.
        await env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
          INSERT INTO search_terms (installation_id, term, created_at, record_id) SELECT ?1, ?2, '2020-01-01T00:00:00.' || i, 'rpt_filler_' || i FROM n`)
          .bind(installationId, common)
          .run();
      });
    await env.DB.prepare("ANALYZE search_terms").run();
    const keys = await termKeysOfReports(env, installationId, [erased.id]);
    expect(keys.map((k) => k[0]).sort()).toEqual(erasedTerms);
    const statement = eraseReportTermsStatement(env.DB, installationId, keys) as unknown as { statement: string; params: unknown[] };
    const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN ${statement.statement}`)
      .bind(...statement.params)
      .all<{ detail: string }>();
    // A seek of the key down to the report's created_at at least (the planner may leave the record
    // id to a check of the few rows found there), never a walk of the common term's rows.
    const details = plan.results.map((r) => r.detail);
    expect(details.some((d) => d.startsWith("SEARCH search_terms USING PRIMARY KEY (installation_id=? AND term=? AND created_at=?"))).toBe(true);
    expect(details.some((d) => /SCAN search_terms/u.test(d))).toBe(false);

    const at = new Date().toISOString();
    const counts = await eraseReports(env, installationId, { reportIds: [erased.id], at, audit: auditOf(installationId, erased.id, at) });
    expect(counts.reports).toBe(1);
    expect(await termRows(installationId, erased.id)).toEqual([]);
    expect(await listed(erased.id)).toBeNull();
    expect((await termRows(installationId, kept.id)).length).toBeGreaterThan(0);
    expect(await env.DB.prepare(`SELECT COUNT(*) AS n FROM search_terms WHERE installation_id = ?1 AND term = ?2`).bind(installationId, common).first("n")).toBe(400 + ((await termRows(installationId, kept.id)).includes(common) ? 1 : 0));
    expect(ids((await search(apiKey, { q: "wobblequartz" })).body)).toEqual([kept.id]);
  });

  it("a report an older worker wrote without its list is listed by the schedule from its opened data, and erased completely even before that", async () => {
    const { id: installationId, apiKey } = await newInstallation("search-unlisted");
    const swept = await fileReport(apiKey, { subjectId: "post-u1", description: "Zarquon oranges for sale", reporter: { id: `r-${crypto.randomUUID()}` } });
    const direct = await fileReport(apiKey, { subjectId: "post-u2", description: "Zarquon lemons for sale" });
    // As a worker older than the list writes them: term rows, no list.
    await env.DB.prepare(`UPDATE reports SET search_terms = NULL WHERE id IN (?1, ?2)`).bind(swept.id, direct.id).run();
    const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN SELECT id FROM reports WHERE search_terms IS NULL AND personal_data_erased_at IS NULL ORDER BY created_at LIMIT 200`).all<{ detail: string }>();
    expect(plan.results.map((r) => r.detail).join(" ")).toContain("reports_terms_unlisted");

    // Erasure lists what it meets, then deletes every row.
    const at = new Date().toISOString();
    await eraseReports(env, installationId, { reportIds: [direct.id], at, audit: auditOf(installationId, direct.id, at) });
    expect(await termRows(installationId, direct.id)).toEqual([]);

    // The schedule's pass lists the other from its opened personal data: the list names exactly its rows.
    let summary: { listed: number; more: number };
    do summary = await sweepUnlistedTerms(env);
    while (summary.more === 1);
    expect(await listedTerms(swept.id)).toEqual(await termRows(installationId, swept.id));
    expect((await termRows(installationId, swept.id)).length).toBe(5);
  });

  it("rows in the previous form (hex terms at the report's ISO time, a JSON list) are found beside compact ones, page alike, are listed and archived in their form, and erasure removes them", async () => {
    const { id: installationId, apiKey } = await newInstallation("search-forms");
    const reporter = `r-${crypto.randomUUID()}`;
    const old = await fileReport(apiKey, { subjectId: "post-f1", description: "Glimmerfax crates for sale", reporter: { id: reporter } });
    const fresh = await fileReport(apiKey, { subjectId: "post-f2", description: "Glimmerfax crates again" });
    const createdAt = async (id: string) => (await env.DB.prepare(`SELECT created_at AS at FROM reports WHERE id = ?1`).bind(id).first<{ at: string }>())!.at;

    // Intake writes the compact form: 14-character terms at 7 base-62 digits of the time, the list their concatenation.
    const freshRows = (await env.DB.prepare(`SELECT term, created_at AS at FROM search_terms WHERE installation_id = ?1 AND record_id = ?2`).bind(installationId, fresh.id).all<{ term: string; at: string }>()).results;
    expect(freshRows.length).toBe(3);
    for (const row of freshRows) {
      expect(row.term).toMatch(/^[A-Za-z0-9_-]{14}$/u);
      expect(row.at).toBe(termTime(await createdAt(fresh.id)));
    }
    expect(await listed(fresh.id)).toHaveLength(3 * 14);

    // The old report's rows as the previous release wrote them (its very statement), and its list.
    const hexes = (await termRows(installationId, old.id)).map(hexTerm);
    expect(hexes.length).toBe(5);
    expect(hexes.map(compactTerm).sort()).toEqual(await termRows(installationId, old.id));
    await env.DB.batch([
      env.DB.prepare(`DELETE FROM search_terms WHERE installation_id = ?1 AND record_id = ?2`).bind(installationId, old.id),
      env.DB.prepare(`INSERT OR IGNORE INTO search_terms (installation_id, term, created_at, record_id)
        SELECT ?1, t.value, ?2, ?3 FROM json_each(?4) t WHERE EXISTS (SELECT 1 FROM reports WHERE id = ?3 AND installation_id = ?1)`).bind(installationId, await createdAt(old.id), old.id, JSON.stringify(hexes)),
      env.DB.prepare(`UPDATE reports SET search_terms = ?2 WHERE id = ?1`).bind(old.id, JSON.stringify(hexes)),
    ]);
    expect(await termRows(installationId, old.id)).toEqual([...hexes].sort());

    // Search: the same answers, order and pages as when both were compact.
    expect(ids((await search(apiKey, { q: "glimmerfax" })).body)).toEqual([fresh.id, old.id]);
    expect(ids((await search(apiKey, { q: "crates glimmerfax" })).body)).toEqual([fresh.id, old.id]);
    expect(ids((await search(apiKey, { q: "glimmerfax sale" })).body)).toEqual([old.id]);
    expect(ids((await search(apiKey, { q: "again crates" })).body)).toEqual([fresh.id]);
    expect(ids((await search(apiKey, { q: reporter })).body)).toEqual([old.id]);
    expect(ids((await search(apiKey, { q: "glimmerfax", type: "case" })).body)).toEqual([fresh.caseId, old.caseId]);
    const page1 = await search(apiKey, { q: "glimmerfax crates", limit: "1" });
    expect(ids(page1.body)).toEqual([fresh.id]);
    const page2 = await search(apiKey, { q: "glimmerfax crates", limit: "1", cursor: page1.body.nextCursor });
    expect(ids(page2.body)).toEqual([old.id]);
    expect(page2.body.nextCursor).toBeNull();

    // Unlisted, the old report is listed by the schedule in its rows' form (the JSON array), the new one compact.
    await env.DB.prepare(`UPDATE reports SET search_terms = NULL WHERE id IN (?1, ?2)`).bind(old.id, fresh.id).run();
    let summary: { listed: number; more: number };
    do summary = await sweepUnlistedTerms(env);
    while (summary.more === 1);
    expect(JSON.parse((await listed(old.id))!).sort()).toEqual([...hexes].sort());
    expect(await listed(fresh.id)).not.toMatch(/^\[/u);
    expect(await listedTerms(fresh.id)).toEqual(await termRows(installationId, fresh.id));

    // The case archive reads each report's rows by key in its list's form (and by the primary key only).
    const oldCase = await buildCaseArchive(env.DB, installationId, old.caseId);
    expect(oldCase!.body.tables.search_terms.map((r) => r.term).sort()).toEqual([...hexes].sort());
    expect(oldCase!.body.tables.search_terms.every((r) => r.created_at === oldCase!.body.tables.reports[0]!.created_at)).toBe(true);
    const freshCase = await buildCaseArchive(env.DB, installationId, fresh.caseId);
    expect(freshCase!.body.tables.search_terms.map((r) => r.term).sort()).toEqual(await termRows(installationId, fresh.id));
    const select = TABLES.find((t) => t.name === "search_terms")!.select;
    const plan = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${SCOPE_SQL} ${select}`).bind(old.caseId, installationId).all<{ detail: string }>()).results.map((r) => r.detail);
    // One seek per form down to the report's created_at at least (as erasure's), never a walk of the installation's rows.
    const termSteps = plan.filter((d) => /search_terms/u.test(d));
    expect(termSteps).toHaveLength(2);
    for (const step of termSteps) expect(step.startsWith("SEARCH search_terms USING PRIMARY KEY (installation_id=? AND term=? AND created_at=?")).toBe(true);

    // Search seeks both forms of a term by the key: the driving term by (installation, term), each other word by the whole key.
    const words = JSON.stringify(["glimmerfax", "crates"].map(() => ["00000000000000000001", compactTerm("00000000000000000001")]));
    const binds = [installationId, words, 2, "[]", null, null, null, null, null, null, null, null, null, 51, "00000000000000000001", compactTerm("00000000000000000001")];
    const searchPlan = (
      await env.DB.prepare(`EXPLAIN QUERY PLAN ${STATEMENTS.report.matched}`)
        .bind(...binds)
        .all<{ detail: string }>()
    ).results.map((r) => r.detail);
    expect(searchPlan).toContain("SEARCH a USING PRIMARY KEY (installation_id=? AND term=?)");
    expect(searchPlan).toContain("SEARCH b USING PRIMARY KEY (installation_id=? AND term=? AND created_at=? AND record_id=?)");
    expect(searchPlan.some((d) => /SCAN (search_terms|a|b)\b/u.test(d))).toBe(false);
    const driverPlan = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${DRIVER_SQL}`).bind(installationId, words).all<{ detail: string }>()).results.map((r) => r.detail);
    expect(driverPlan).toContain("SEARCH s USING PRIMARY KEY (installation_id=? AND term=?)");

    // Erasure removes both forms' rows; nothing is found any more.
    const at = new Date().toISOString();
    await eraseReports(env, installationId, { reportIds: [old.id, fresh.id], at, audit: auditOf(installationId, old.id, at) });
    expect(await termRows(installationId, old.id)).toEqual([]);
    expect(await termRows(installationId, fresh.id)).toEqual([]);
    expect(ids((await search(apiKey, { q: "glimmerfax" })).body)).toEqual([]);
    expect(ids((await search(apiKey, { q: reporter })).body)).toEqual([]);
  });

  it("the compact time of a term row is the same computed in SQL as in the Worker, and sorts as the times do", async () => {
    const times = ["1970-01-01T00:00:00.000Z", "2001-09-09T01:46:39.999Z", "2026-12-02T17:57:55.938Z", "2026-12-02T17:57:55.939Z", "2080-12-31T23:59:59.999Z"];
    for (const time of times) {
      expect(
        await env.DB.prepare(`SELECT ${termTimeSql("?1")} AS t`)
          .bind(time)
          .first("t"),
      ).toBe(termTime(time));
      expect(termTime(time)).toHaveLength(7);
    }
    const compact = times.map((t) => termTime(t)!);
    expect([...compact].sort()).toEqual(compact);
    expect(hexTerm(compactTerm("00ff10ab9c8d7e6f5a41"))).toBe("00ff10ab9c8d7e6f5a41");
    expect(compactTerm("ffffffffffffffffffff")).toBe("_____________w");
  });

  it("rows of a backup or case archive keep a list that names exactly their term rows; any other list is made again from those rows", () => {
    const reports: Record<string, unknown>[] = [
      { id: "rpt_a" },
      { id: "rpt_b", search_terms: "not json" },
      { id: "rpt_c", search_terms: JSON.stringify(["ffff"]) },
      { id: "rpt_d", search_terms: null, personal_data_erased_at: "2026-01-01T00:00:00.000Z" },
      { id: "rpt_e", search_terms: JSON.stringify(["eeee", "dddd"]) },
    ];
    listTermsOnReports(reports, [
      { record_id: "rpt_a", term: "bbbb" },
      { record_id: "rpt_a", term: "aaaa" },
      { record_id: "rpt_c", term: "cccc" },
      { record_id: "rpt_e", term: "dddd" },
      { record_id: "rpt_e", term: "eeee" },
    ]);
    // A list naming exactly its rows stays as written (a case reads back as it was archived).
    expect(reports.map((r) => r.search_terms)).toEqual([JSON.stringify(["aaaa", "bbbb"]), "[]", JSON.stringify(["cccc"]), null, JSON.stringify(["eeee", "dddd"])]);

    // Compact rows: a compact list naming them stays; a list in the other form, or naming others, is made again compact.
    const [a, b, c] = ["00000000000000000001", "00000000000000000002", "00000000000000000003"].map(compactTerm) as [string, string, string];
    const compact: Record<string, unknown>[] = [
      { id: "rpt_f", search_terms: `${b}${a}` },
      { id: "rpt_g", search_terms: JSON.stringify(["00000000000000000003"]) },
      { id: "rpt_h", search_terms: a },
      { id: "rpt_i", search_terms: "" },
    ];
    listTermsOnReports(compact, [
      { record_id: "rpt_f", term: a },
      { record_id: "rpt_f", term: b },
      { record_id: "rpt_g", term: c },
      { record_id: "rpt_h", term: c },
    ]);
    expect(compact.map((r) => r.search_terms)).toEqual([`${b}${a}`, c, c, ""]);
  });
});
