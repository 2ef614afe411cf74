// Shadow-report statistics: Wilson intervals, precision/recall/F1, Cohen's kappa and ISO weeks
// against hand-computed values; a report over durable shadow runs with its slices; a fast
// backtest's report from its results; the CSV exports; another installation's backtest is a 404.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { reportCsv } from "../src/automation/shadow-csv";
import { reportFigures } from "../src/automation/shadow-report";
import { isoWeek } from "../src/automation/shadow-sources";
import { cohenKappa, confusionOf, outcomeFigures, wilson } from "../src/automation/statistics";
import { api, edge, newInstallation, personKey, publish, waitForRun } from "./helpers";

async function csv(path: string, key: string) {
  const response = await exports.default.fetch(new Request(`http://safest.test${path}`, { headers: { authorization: `Bearer ${key}` } }));
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    disposition: response.headers.get("content-disposition"),
    text,
    rows: text
      .trimEnd()
      .split("\r\n")
      .map((l) => l.split(",")),
  };
}

/** The figure rows of a CSV as `section|slice|outcome|metric` → [value, low, high, successes, trials]. */
function figureMap(rows: string[][]) {
  return new Map(rows.slice(1).map((r) => [r.slice(0, 4).join("|"), r.slice(4)]));
}

describe("statistics on a fixed set, as computed by hand", () => {
  // 13 pairs (proposed → decided by people):
  //   remove→remove 6, remove→keep 2, keep→keep 3, keep→remove 1, keep→label 1.
  // remove→label is a zero-count cell; "label" is decided once and never proposed.
  // Row totals (proposed): remove 8, keep 5, label 0. Column totals (people): remove 7, keep 5, label 1.
  const pairs = [
    ...Array.from({ length: 6 }, () => ({ proposed: "remove", actual: "remove" })),
    ...Array.from({ length: 2 }, () => ({ proposed: "remove", actual: "keep" })),
    ...Array.from({ length: 3 }, () => ({ proposed: "keep", actual: "keep" })),
    { proposed: "keep", actual: "remove" },
    { proposed: "keep", actual: "label" },
  ];
  const { matrix, labels, n } = confusionOf(pairs);

  it("the confusion matrix, with the zero-count cell absent", () => {
    expect(n).toBe(13);
    expect(labels).toEqual(["keep", "label", "remove"]);
    expect(matrix).toEqual({ remove: { remove: 6, keep: 2 }, keep: { keep: 3, remove: 1, label: 1 } });
  });

  it("Wilson intervals: 6 of 8, 0 of 1, none of 0", () => {
    // 6/8, z = 1.959964, z² = 3.841459: denominator 1 + z²/8 = 1.480182; centre (0.75 + z²/16) / 1.480182
    // = 0.990091 / 1.480182 = 0.668899; half z·√(0.75·0.25/8 + z²/256) / 1.480182 = 1.959964·0.196069 / 1.480182
    // = 0.259623 → [0.409275, 0.928521] (checked with a calculator).
    const p = wilson(6, 8);
    expect(p.value).toBe(0.75);
    expect(p.low).toBeCloseTo(0.409275, 5);
    expect(p.high).toBeCloseTo(0.928521, 5);
    // 0/1: the low end is 0; the high end is z²/(1 + z²) = 3.841459 / 4.841459 = 0.793451.
    const zero = wilson(0, 1);
    expect(zero).toMatchObject({ value: 0, low: 0, successes: 0, trials: 1 });
    expect(zero.high).toBeCloseTo(0.793451, 5);
    // At none or all successes the bound is exactly 0 or 1 (not 5.6e-17 from rounding).
    expect(wilson(0, 3).low).toBe(0);
    expect(wilson(4, 4).high).toBe(1);
    expect(wilson(0, 0)).toEqual({ value: null, low: null, high: null, successes: 0, trials: 0 });
    expect(() => wilson(3, 2)).toThrow(RangeError);
  });

  it("precision, recall and F1 per outcome, with the counts behind them", () => {
    const all = outcomeFigures(matrix, labels);
    const of = (outcome: string) => {
      const found = all.find((o) => o.outcome === outcome);
      if (!found) throw new Error(`no figures for ${outcome}`);
      return found;
    };
    const byOutcome = { remove: of("remove"), keep: of("keep"), label: of("label") };
    // remove: tp 6, fp 2, fn 1 → precision 6/8 = 0.75 [0.409275, 0.928521], recall 6/7 = 0.857143
    // [0.486872, 0.974320], F1 = 2·6 / (2·6 + 2 + 1) = 12/15 = 0.8.
    expect(byOutcome.remove).toMatchObject({ truePositives: 6, falsePositives: 2, falseNegatives: 1, f1: 0.8 });
    expect(byOutcome.remove.precision).toMatchObject({ value: 0.75, successes: 6, trials: 8 });
    expect(byOutcome.remove.recall.value).toBeCloseTo(0.857143, 5);
    expect(byOutcome.remove.recall.low).toBeCloseTo(0.486872, 5);
    expect(byOutcome.remove.recall.high).toBeCloseTo(0.97432, 5);
    // keep: tp 3, fp 2, fn 2 → precision 3/5 = recall 3/5 = 0.6 [0.230724, 0.882379], F1 = 6/10 = 0.6.
    expect(byOutcome.keep).toMatchObject({ truePositives: 3, falsePositives: 2, falseNegatives: 2 });
    expect(byOutcome.keep.f1).toBeCloseTo(0.6, 12);
    expect(byOutcome.keep.precision.low).toBeCloseTo(0.230724, 5);
    expect(byOutcome.keep.recall.high).toBeCloseTo(0.882379, 5);
    // label, never proposed: tp 0, fp 0, fn 1 → precision has no cases (null, no interval),
    // recall 0/1 = 0 [0, 0.793451], F1 = 0 / (0 + 0 + 1) = 0 (a real miss, not "no figure").
    expect(byOutcome.label).toMatchObject({ truePositives: 0, falsePositives: 0, falseNegatives: 1, f1: 0 });
    expect(byOutcome.label.precision).toEqual({ value: null, low: null, high: null, successes: 0, trials: 0 });
    expect(byOutcome.label.recall).toMatchObject({ value: 0, low: 0, successes: 0, trials: 1 });
  });

  it("Cohen's kappa: (po − pe) / (1 − pe) = 9/22", () => {
    // po = (6 + 3) / 13 = 9/13 = 0.692308; pe = (8·7 + 5·5 + 0·1) / 13² = 81/169 = 0.479290;
    // kappa = (117/169 − 81/169) / (88/169) = 36/88 = 9/22 = 0.409091.
    const k = cohenKappa(matrix, labels);
    expect(k.n).toBe(13);
    expect(k.observed).toBeCloseTo(9 / 13, 12);
    expect(k.expected).toBeCloseTo(81 / 169, 12);
    expect(k.kappa).toBeCloseTo(9 / 22, 12);
    // One label on both sides: chance agreement is certain, kappa is undefined (null), not 1.
    expect(cohenKappa({ keep: { keep: 4 } }, ["keep"])).toMatchObject({ kappa: null, observed: 1, expected: 1, n: 4 });
    expect(cohenKappa({}, [])).toMatchObject({ kappa: null, n: 0 });
  });

  it("ISO weeks (UTC), across year ends", () => {
    expect(isoWeek("2026-12-01T10:00:00.000Z")).toBe("2026-W49"); // Tuesday; Thursday 3 Dec is day 337 of 2026 → week 49
    expect(isoWeek("2027-01-01T09:00:00.000Z")).toBe("2026-W53"); // Friday: its Thursday is 31 Dec 2026
    expect(isoWeek("2025-12-29T00:00:00.000Z")).toBe("2026-W01"); // Monday of the week of Thursday 1 Jan 2026
    expect(isoWeek("2021-01-03T23:59:59.000Z")).toBe("2020-W53"); // Sunday
    expect(isoWeek("2024-12-30T12:00:00.000Z")).toBe("2025-W01");
  });

  it("CSV cells: text a spreadsheet would run as a formula is quoted inert; commas are quoted", () => {
    const figures = reportFigures({
      engine: "fast",
      items: [{ reportId: "r1", category: "=HYPERLINK(1)", source: "a,b", reportedAt: "2026-12-01T00:00:00.000Z", proposed: "keep", human: "keep" }],
      needsReview: 0,
      failed: 0,
      truncated: false,
    });
    const text = reportCsv(figures, "reports");
    expect(text).toBe('reportId,category,source,week,proposed,human,agreed\r\nr1,\'=HYPERLINK(1),"a,b",2026-W49,keep,keep,true\r\n');
    expect(reportCsv(figures, "figures")).toContain("\r\ncategory,'=HYPERLINK(1),,compared,1,,,,\r\n");
  });
});

const triage = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", config: { cases: [{ port: "scam", when: "report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
    { id: "remove", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } },
    { id: "keep", kind: "decision", config: { outcome: "keep", restrictions: { visibility: ["content_labelled"] }, statement: "Kept with a label." } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "route"), edge("route", "scam", "remove"), edge("route", "other", "keep"), edge("remove", "recorded", "done"), edge("keep", "recorded", "done")],
};

/** A person's decision: recorded with a reviewer's key of the installation whose admin key is `key` (one per installation). */
const people = new Map<string, Promise<string>>();
const decide = async (key: string, reportId: string, outcome: string) =>
  api("/api/v1/decisions", {
    key: await (people.get(key) ?? people.set(key, personKey(key)).get(key)!),
    body: outcome === "no_action" ? { reportId, outcome } : { reportId, outcome, restrictions: { visibility: ["content_removed"] }, statement: "Decided by a moderator." },
  });

const W47 = "2026-11-18T12:00:00.000Z"; // a Wednesday of 2026-W47
const W53 = "2027-01-01T09:00:00.000Z"; // a Friday of 2026-W53

describe("the shadow report over durable shadow runs", () => {
  it("gives agreement, kappa, per-outcome figures and slices by category, source and week, as computed by hand", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, triage);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } });
    // Proposals: remove for scams, keep otherwise. (category, source, human outcome, reported at)
    const plan: Array<[string, string, string | null, string]> = [
      ["scams_and_fraud", "notice", "remove", W47], // 1 agree
      ["scams_and_fraud", "notice", "remove", W53], // 2 agree
      ["scams_and_fraud", "trusted_flagger", "keep", W47], // 3 remove ≠ keep
      ["violence", "notice", "keep", W53], // 4 agree
      ["violence", "trusted_flagger", "remove", W47], // 5 keep ≠ remove
      ["animal_welfare", "notice", "keep", W53], // 6 agree
      ["animal_welfare", "notice", null, W53], // 7 no human decision: not compared
      ["violence", "trusted_flagger", "no_action", W53], // 8 keep ≠ no_action (never proposed)
    ];
    const runIds: string[] = [];
    const reportIds: string[] = [];
    for (const [i, [category, source, human, at]] of plan.entries()) {
      const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `s-${i}` }, category, source } });
      expect(report.status).toBe(201);
      runIds.push(report.body.runs[0].runId);
      reportIds.push(report.body.id);
      await env.DB.prepare("UPDATE reports SET created_at = ?1 WHERE id = ?2").bind(at, report.body.id).run();
      if (human) expect((await decide(apiKey, report.body.id, human)).status).toBe(201);
    }
    await Promise.all(runIds.map((id) => waitForRun(apiKey, id)));
    const { status, body } = await api(`/api/v1/workflow-versions/${version.id}/shadow-report`, { key: apiKey });
    expect(status).toBe(200);
    // Compared 7: remove→remove 2, remove→keep 1, keep→keep 2, keep→remove 1, keep→no_action 1.
    // Rows (proposed): remove 3, keep 4. Columns (people): remove 3, keep 3, no_action 1.
    expect(body).toMatchObject({
      engine: "durable",
      shadowRuns: 8,
      runsCompared: 7,
      agreements: 4,
      agreementRate: 4 / 7,
      withoutHumanDecision: 1,
      withoutProposal: 0,
      needsReview: 0,
      failed: 0,
      truncated: false,
      labels: ["keep", "no_action", "remove"],
      confusionMatrix: { remove: { remove: 2, keep: 1 }, keep: { keep: 2, remove: 1, no_action: 1 } },
    });
    // 4/7 = 0.571429 [0.250458, 0.841780].
    expect(body.agreement).toMatchObject({ successes: 4, trials: 7 });
    expect(body.agreement.low).toBeCloseTo(0.250458, 5);
    expect(body.agreement.high).toBeCloseTo(0.84178, 5);
    // po = 4/7, pe = (3·3 + 4·3 + 0·1) / 49 = 3/7 → kappa = (1/7) / (4/7) = 0.25.
    expect(body.kappa.kappa).toBeCloseTo(0.25, 12);
    const outcomes = Object.fromEntries(body.outcomes.map((o: any) => [o.outcome, o]));
    // remove: 2/3 both ways [0.207660, 0.938508], F1 = 4/6; keep: precision 2/4 [0.150039, 0.849961],
    // recall 2/3, F1 = 4/7; no_action: never proposed, recall 0/1, F1 0.
    expect(outcomes.remove).toMatchObject({ truePositives: 2, falsePositives: 1, falseNegatives: 1, precision: { successes: 2, trials: 3 }, recall: { successes: 2, trials: 3 } });
    expect(outcomes.remove.precision.low).toBeCloseTo(0.20766, 5);
    expect(outcomes.remove.f1).toBeCloseTo(2 / 3, 12);
    expect(outcomes.keep).toMatchObject({ truePositives: 2, falsePositives: 2, falseNegatives: 1, precision: { value: 0.5, successes: 2, trials: 4 }, recall: { successes: 2, trials: 3 } });
    expect(outcomes.keep.precision.high).toBeCloseTo(0.849961, 5);
    expect(outcomes.keep.f1).toBeCloseTo(4 / 7, 12);
    expect(outcomes.no_action).toMatchObject({ truePositives: 0, falsePositives: 0, falseNegatives: 1, f1: 0, precision: { value: null, trials: 0 }, recall: { value: 0, trials: 1 } });

    const slice = (dimension: string) => Object.fromEntries(body.slices[dimension].map((s: any) => [s.key, s]));
    const category = slice("category");
    expect(Object.keys(category)).toEqual(["animal_welfare", "scams_and_fraud", "violence"]);
    // animal_welfare: 1 compared (report 7 has no decision), keep→keep: agreement 1/1 [0.206549, 1]; one label
    // on both sides → kappa undefined.
    expect(category.animal_welfare).toMatchObject({ compared: 1, agreement: { value: 1, successes: 1, trials: 1, high: 1 }, kappa: { kappa: null } });
    expect(category.animal_welfare.agreement.low).toBeCloseTo(0.206549, 5);
    // scams: remove→remove 2, remove→keep 1: po 2/3, pe = (3·2 + 0·1)/9 = 2/3 → kappa 0.
    expect(category.scams_and_fraud).toMatchObject({ compared: 3, agreement: { successes: 2, trials: 3 } });
    expect(category.scams_and_fraud.kappa.kappa).toBeCloseTo(0, 12);
    // violence: keep→keep, keep→remove, keep→no_action: po 1/3, pe = 3·1/9 = 1/3 → kappa 0.
    expect(category.violence).toMatchObject({ compared: 3, agreement: { successes: 1, trials: 3 } });
    expect(category.violence.kappa.kappa).toBeCloseTo(0, 12);
    expect(category.violence.outcomes.map((o: any) => o.outcome)).toEqual(["keep", "no_action", "remove"]);

    const source = slice("source");
    // notice: reports 1, 2, 4, 6 all agree: po 1, pe = (2·2 + 2·2)/16 = 1/2 → kappa 1; 4/4 [0.510109, 1].
    expect(source.notice).toMatchObject({ compared: 4, agreement: { value: 1, successes: 4, trials: 4 }, kappa: { kappa: 1 } });
    expect(source.notice.agreement.low).toBeCloseTo(0.510109, 5);
    // trusted_flagger: reports 3, 5, 8 all disagree: po 0, pe = (1·1 + 2·1 + 0·1)/9 = 1/3 → kappa −1/2; 0/3 [0, 0.561497].
    expect(source.trusted_flagger).toMatchObject({ compared: 3, agreement: { value: 0, low: 0, successes: 0, trials: 3 } });
    expect(source.trusted_flagger.agreement.high).toBeCloseTo(0.561497, 5);
    expect(source.trusted_flagger.kappa.kappa).toBeCloseTo(-0.5, 12);

    const week = slice("week");
    expect(Object.keys(week)).toEqual(["2026-W47", "2026-W53"]);
    // W47: reports 1, 3, 5: remove→remove, remove→keep, keep→remove: po 1/3, pe = (2·2 + 1·1)/9 = 5/9 → kappa −1/2.
    expect(week["2026-W47"]).toMatchObject({ compared: 3, agreement: { successes: 1, trials: 3 } });
    expect(week["2026-W47"].kappa.kappa).toBeCloseTo(-0.5, 12);
    // W53: reports 2, 4, 6, 8: po 3/4, pe = (1·1 + 3·2 + 0·1)/16 = 7/16 → kappa (5/16)/(9/16) = 5/9; 3/4 [0.300642, 0.954413].
    expect(week["2026-W53"]).toMatchObject({ compared: 4, agreement: { successes: 3, trials: 4 } });
    expect(week["2026-W53"].kappa.kappa).toBeCloseTo(5 / 9, 12);
    expect(week["2026-W53"].agreement.low).toBeCloseTo(0.300642, 5);

    // The CSV: one row per figure, with the same numbers.
    const figures = await csv(`/api/v1/workflow-versions/${version.id}/shadow-report.csv`, apiKey);
    expect(figures.status).toBe(200);
    expect(figures.type).toMatch(/^text\/csv/u);
    expect(figures.disposition).toBe(`attachment; filename="shadow-report-${version.id}.csv"`);
    expect(figures.rows[0]).toEqual(["section", "slice", "outcome", "metric", "value", "low", "high", "successes", "trials"]);
    const map = figureMap(figures.rows);
    expect(map.get("overall|||compared")).toEqual(["7", "", "", "", ""]);
    expect(map.get("overall|||evaluated")?.[0]).toBe("8");
    expect(map.get("overall|||without_human_decision")?.[0]).toBe("1");
    expect(map.get("overall|||agreement")?.slice(3)).toEqual(["4", "7"]);
    expect(Number(map.get("overall|||agreement")?.[1])).toBeCloseTo(0.250458, 5);
    expect(Number(map.get("overall|||kappa")?.[0])).toBeCloseTo(0.25, 12);
    expect(
      map
        .get("overall||keep|precision")
        ?.slice(0, 1)
        .concat(map.get("overall||keep|precision")?.slice(3) ?? []),
    ).toEqual(["0.5", "2", "4"]);
    expect(map.get("overall||no_action|precision")).toEqual(["", "", "", "0", "0"]);
    expect(map.get("overall||no_action|f1")).toEqual(["0", "", "", "0", "1"]);
    expect(map.get("overall||keep|false_positives")?.[0]).toBe("2");
    expect(Number(map.get("source|trusted_flagger||kappa")?.[0])).toBeCloseTo(-0.5, 12);
    expect(map.get("week|2026-W47||agreement")?.slice(3)).toEqual(["1", "3"]);
    expect(map.get("category|animal_welfare||kappa")).toEqual(["", "", "", "", "1"]);

    // One row per compared report: ids and verdicts only.
    const perReport = await csv(`/api/v1/workflow-versions/${version.id}/shadow-report.csv?rows=reports`, apiKey);
    expect(perReport.status).toBe(200);
    expect(perReport.rows[0]).toEqual(["reportId", "category", "source", "week", "proposed", "human", "agreed"]);
    expect(perReport.rows).toHaveLength(8);
    const byId = new Map(perReport.rows.slice(1).map((r) => [r[0], r]));
    expect(byId.has(reportIds[6]!)).toBe(false);
    expect(byId.get(reportIds[2]!)).toEqual([reportIds[2], "scams_and_fraud", "trusted_flagger", "2026-W47", "remove", "keep", "false"]);
    expect(byId.get(reportIds[7]!)).toEqual([reportIds[7], "violence", "trusted_flagger", "2026-W53", "keep", "no_action", "false"]);
    expect(perReport.text).not.toContain("s-2");

    // A durable backtest's report counts only its own runs (here three of them: agree, disagree, no decision).
    const backtestId = `bt_${crypto.randomUUID().replaceAll("-", "")}`;
    const installationId = (await env.DB.prepare("SELECT installation_id AS id FROM workflow_runs WHERE id = ?").bind(runIds[0]).first<{ id: string }>())?.id;
    await env.DB.prepare(`INSERT INTO backtests (id, installation_id, workflow_version_id, engine, state, selection_json, total, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'durable', 'completed', '{}', 3, ?4, ?4)`)
      .bind(backtestId, installationId, version.id, new Date().toISOString())
      .run();
    await env.DB.prepare("UPDATE workflow_runs SET backtest_id = ?1 WHERE id IN (?2, ?3, ?4)").bind(backtestId, runIds[0], runIds[2], runIds[6]).run();
    const durable = figureMap((await csv(`/api/v1/backtests/${backtestId}/report.csv`, apiKey)).rows);
    expect(durable.get("overall|||evaluated")?.[0]).toBe("3");
    expect(durable.get("overall|||without_human_decision")?.[0]).toBe("1");
    expect(durable.get("overall|||agreement")?.slice(3)).toEqual(["1", "2"]);

    const bad = await api(`/api/v1/workflow-versions/${version.id}/shadow-report.csv?rows=content`, { key: apiKey });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("request.invalid_rows");
  });
});

describe("a fast backtest's report", () => {
  it("compares completed results with people's decisions, counts needs-review and failed apart, and stays in its installation", async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const version = await publish(apiKey, triage);
    const at = new Date().toISOString();
    // (state, proposed outcome, human outcome)
    const plan: Array<["completed" | "needs_review" | "failed", string | null, string | null]> = [
      ["completed", "remove", "remove"],
      ["completed", "remove", "keep"],
      ["completed", "keep", "keep"],
      ["needs_review", null, "remove"],
      ["failed", null, "keep"],
      ["completed", "remove", null],
      ["completed", null, "keep"],
    ];
    const reportIds: string[] = [];
    for (const [i, [, , human]] of plan.entries()) {
      const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `f-${i}` }, category: "violence" } });
      reportIds.push(report.body.id);
      if (human) expect((await decide(apiKey, report.body.id, human)).status).toBe(201);
    }
    const backtestId = `bt_${crypto.randomUUID().replaceAll("-", "")}`;
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO backtests (id, installation_id, workflow_version_id, engine, state, selection_json, total, processed, created_at, updated_at, finished_at)
        VALUES (?1, ?2, ?3, 'fast', 'completed', '{}', ?4, ?4, ?5, ?5, ?5)`).bind(backtestId, installationId, version.id, plan.length, at),
      ...plan.map(([state, outcome], i) =>
        env.DB.prepare(`INSERT INTO backtest_results (backtest_id, report_id, installation_id, state, outcome, terminal_code, stopped_at, error_code, evaluated_at)
          VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7, ?8)`).bind(backtestId, reportIds[i], installationId, state, outcome, state === "needs_review" ? "review" : null, state === "failed" ? "component.failed" : null, at),
      ),
    ]);
    const { status, body } = await api(`/api/v1/backtests/${backtestId}`, { key: apiKey });
    expect(status).toBe(200);
    // Compared 3: remove→remove, remove→keep, keep→keep. po 2/3; rows remove 2, keep 1; columns remove 1, keep 2;
    // pe = (2·1 + 1·2)/9 = 4/9 → kappa (6/9 − 4/9)/(5/9) = 0.4. 2/3 [0.207660, 0.938508].
    expect(body.report).toMatchObject({
      engine: "fast",
      backtestId,
      shadowRuns: 5,
      runsCompared: 3,
      agreements: 2,
      withoutHumanDecision: 1,
      withoutProposal: 1,
      needsReview: 1,
      failed: 1,
      confusionMatrix: { remove: { remove: 1, keep: 1 }, keep: { keep: 1 } },
      agreement: { successes: 2, trials: 3 },
    });
    expect(body.report.kappa.kappa).toBeCloseTo(0.4, 12);
    expect(body.report.agreement.high).toBeCloseTo(0.938508, 5);
    const remove = body.report.outcomes.find((o: any) => o.outcome === "remove");
    // remove: tp 1, fp 1, fn 0 → precision 1/2, recall 1/1, F1 2/3.
    expect(remove).toMatchObject({ truePositives: 1, falsePositives: 1, falseNegatives: 0, precision: { value: 0.5 }, recall: { value: 1 } });
    expect(remove.f1).toBeCloseTo(2 / 3, 12);

    const figures = await csv(`/api/v1/backtests/${backtestId}/report.csv`, apiKey);
    expect(figures.status).toBe(200);
    expect(figures.type).toMatch(/^text\/csv/u);
    const map = figureMap(figures.rows);
    expect(map.get("overall|||needs_review")?.[0]).toBe("1");
    expect(map.get("overall|||failed")?.[0]).toBe("1");
    expect(map.get("overall|||evaluated")?.[0]).toBe("7");
    expect(map.get("overall||remove|recall")?.slice(3)).toEqual(["1", "1"]);
    const perReport = await csv(`/api/v1/backtests/${backtestId}/report.csv?rows=reports`, apiKey);
    expect(
      perReport.rows
        .slice(1)
        .map((r) => r[0])
        .sort(),
    ).toEqual([reportIds[0], reportIds[1], reportIds[2]].sort());

    // Another installation sees none of it: the backtest, its report and its CSV are 404s.
    const other = await newInstallation("other");
    expect((await api(`/api/v1/backtests/${backtestId}`, { key: other.apiKey })).status).toBe(404);
    const foreign = await api(`/api/v1/backtests/${backtestId}/report.csv`, { key: other.apiKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("backtest.not_found");
    const foreignVersion = await api(`/api/v1/workflow-versions/${version.id}/shadow-report.csv`, { key: other.apiKey });
    expect(foreignVersion.status).toBe(404);
    expect(foreignVersion.body.error.code).toBe("workflow_version.not_found");
    expect((await api(`/api/v1/backtests/bt_missing/report.csv?rows=reports`, { key: apiKey })).status).toBe(404);
  });
});
