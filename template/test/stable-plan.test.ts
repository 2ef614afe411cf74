// Statements planned once (lib/stable-plan.ts): the rewrite touches only parameters compared on the
// right of a comparison, and D1 plans each rewritten statement of intake exactly as the statement
// as written (same indexes, same order), so only the re-planning goes.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { auditEventsSql } from "../src/audit/events";
import { assumedSender } from "../src/cases/notices/notifiers";
import { caseUpsertSql } from "../src/cases/reports/reports";
import { subscribedEndpointIdsSql } from "../src/enforcement/webhook-endpoints";
import { stablePlanSql } from "../src/lib/stable-plan";
import { CLAIM_FIRST_SQL } from "../src/cases/queues/task-leases";
import { CLAIM_EXPOSURE_SQL } from "../src/cases/wellness/wellness";
import { ARTIFACT_ROW_SQL } from "../src/workflows/artifacts";
import { INSTANCE_CHECK_SQL } from "../src/workflows/loader";
import { runQuery } from "../src/workflows/runtime-authorize";

/** The statement as written: every `+?N` the rewrite made back to `?N`. */
const asWritten = (sql: string) => sql.replace(/\+\?(\d+)/gu, "?$1");

async function plan(sql: string, binds: unknown[]): Promise<string[]> {
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...binds)
    .all<{ detail: string }>();
  return results.map((row) => row.detail);
}

describe("statements planned once", () => {
  it("rewrites the parameters compared on the right and the limits, and leaves selected values and function arguments alone", () => {
    expect(stablePlanSql("SELECT ?1, x FROM t WHERE a = ?2 AND b <= ?3 AND c<>?4 AND d IS ?5 AND e IS NOT ?6 AND f > ?7 AND ?9 = '[]' LIMIT ?8 OFFSET ?10")).toBe(
      "SELECT ?1, x FROM t WHERE a = +?2 AND b <= +?3 AND c<>+?4 AND d IS +?5 AND e IS NOT +?6 AND f > +?7 AND ?9 = '[]' LIMIT +?8 OFFSET +?10",
    );
    expect(stablePlanSql("SELECT value FROM json_each(?2) WHERE typeof(?10) = 'text' AND k == ?11")).toBe("SELECT value FROM json_each(?2) WHERE typeof(?10) = 'text' AND k == +?11");
    // ?12 is not ?1 followed by a 2, and a statement already rewritten stays as it is.
    expect(stablePlanSql("WHERE id = ?12")).toBe("WHERE id = +?12");
    expect(stablePlanSql(stablePlanSql("WHERE id = ?1"))).toBe("WHERE id = +?1");
  });

  it("the case's upsert under an assumed sender (its receipt endpoints read in the same condition) is planned as written", async () => {
    const sender = assumedSender(env, "inst", { source: "notice", reporterId: "user-1", category: "scams_and_fraud", at: "2026-01-01T00:00:00.000Z" }, 18);
    const condition = `${sender.condition.sql} AND ${subscribedEndpointIdsSql(`?${18 + sender.condition.binds.length}`, "'message.send'")} IS ?${19 + sender.condition.binds.length}`;
    const caseParam = 18 + sender.condition.binds.length + 2;
    const sql = caseUpsertSql(caseParam, condition);
    expect(sql).toContain("installation_id = +?2");
    const binds = [null, "inst", "content", "post-1", null, null, null, null, null, null, "key-1", null, "2026-01-01T00:00:00.000Z", null, null, null, null, ...sender.condition.binds, "inst", null, "case_1", "subject-key"];
    const rewritten = await plan(sql, binds);
    expect(rewritten).toEqual(await plan(asWritten(sql), binds));
    expect(rewritten.filter((detail) => /^SCAN (cases|reports|archived_subjects|triggers|notifier_sanctions|trusted_flaggers|webhook_endpoints)\b/u.test(detail))).toEqual([]);
  });

  it("the batch's audit events, guarded on the report and the message, are planned as written", async () => {
    const sql = auditEventsSql("AND CASE e.ord WHEN 0 THEN EXISTS (SELECT 1 FROM reports WHERE reports.id = ?3) WHEN 1 THEN EXISTS (SELECT 1 FROM messages WHERE messages.id = ?4 AND messages.installation_id = ?5) ELSE 1 END");
    expect(sql).toContain("installation_id = +?1");
    const binds = ["inst", JSON.stringify([["ae_1", null, "report.received", "api_key", "k", "report", "rpt_1", "{}", "2026-01-01T00:00:00.000Z", null]]), "rpt_1", "msg_1", "inst"];
    const rewritten = await plan(sql, binds);
    expect(rewritten).toEqual(await plan(asWritten(sql), binds));
    expect(rewritten.some((detail) => detail.includes("SCAN audit_events"))).toBe(false);
  });

  it("a reviewer's claim, its exposure row, a run's artifact read and the sandbox's instance check are planned as written", async () => {
    const cases: Array<[string, unknown[]]> = [
      [CLAIM_FIRST_SQL, ["inst", JSON.stringify(["tsk_1", "tsk_2"]), "reviewer", "2026-01-01T00:00:00.000Z", "2026-01-01T00:10:00.000Z", "user:u1", "reviewer"]],
      [CLAIM_EXPOSURE_SQL, ["inst", JSON.stringify([["tsk_1", "exp_1"]]), "reviewer", "2026-01-01T00:00:00.000Z"]],
      [ARTIFACT_ROW_SQL, ["art_1", "ver_1", "inst"]],
      [INSTANCE_CHECK_SQL, ["run_1", "ver_1"]],
    ];
    for (const [sql, binds] of cases) {
      expect(sql).toContain("+?");
      const rewritten = await plan(sql, binds);
      expect(rewritten).toEqual(await plan(asWritten(sql), binds));
      expect(rewritten.filter((detail) => /^SCAN (human_tasks|workflow_artifacts|workflow_versions|workflow_runs)\b/u.test(detail))).toEqual([]);
    }
  });

  it("the runtime's run read, bare and with every fold a step reads (exits, its own step, its wait and event, the group's outputs), is planned as written", async () => {
    const folded = runQuery("run_1", {
      exitsOf: ["review", "verdict"],
      step: { nodeId: "verdict", branchKey: "" },
      wait: { stepId: "stp_1", eventId: "evt_1" },
      group: { nodeIds: ["a", "b"], sealed: true },
    });
    for (const { sql, binds } of [runQuery("run_1"), folded]) {
      expect(sql).toContain("r.id = +?1");
      const rewritten = await plan(sql, binds);
      expect(rewritten).toEqual(await plan(asWritten(sql), binds));
      expect(rewritten.filter((detail) => /^SCAN (workflow_runs|workflow_versions|workflow_step_runs|workflow_waits|workflow_events)\b/u.test(detail))).toEqual([]);
    }
    // Each fold's subquery is in the statement, so the plans compared cover them.
    expect(folded.sql).toContain("FROM workflow_waits");
    expect(folded.sql).toContain("FROM workflow_events e");
  });
});
