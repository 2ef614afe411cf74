// The migrations upgrade a database that holds data, not only an empty one: every file applies in
// order, each in its own transaction, with foreign keys enforced as D1 enforces them. The tests in
// workerd migrate an empty database, where a table rebuild (copy, DROP, rename) of a table another
// table refers to passes; on a real database the DROP's implicit DELETE breaks that reference and
// the migration fails with `FOREIGN KEY constraint failed`.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";

const dir = fileURLToPath(new URL("../migrations", import.meta.url));
const files = readdirSync(dir)
  .filter((name) => name.endsWith(".sql"))
  .sort();

function database() {
  const db = new DatabaseSync(":memory:");
  db.exec("PRAGMA foreign_keys = ON");
  return db;
}

/** Applies one migration file as D1 does: the whole file in one transaction, foreign keys checked at its commit. */
function apply(db, name) {
  db.exec("BEGIN");
  try {
    db.exec(readFileSync(join(dir, name), "utf8"));
    db.exec("COMMIT");
  } catch (error) {
    db.exec("ROLLBACK");
    throw new Error(`${name}: ${error.message}`);
  }
}

/** What a database that ever sent a webhook holds: an endpoint, a delivery and an attempt at it. */
function seedDeliveries(db) {
  const at = "2026-01-01T00:00:00.000Z";
  db.prepare("INSERT INTO installations (id, name, created_at, updated_at) VALUES ('inst_1', 'One', ?, ?)").run(at, at);
  db.prepare(
    `INSERT INTO webhook_endpoints (id, installation_id, url, secret_sealed, state, created_at, updated_at)
     VALUES ('wh_1', 'inst_1', 'https://hooks.example/in', 'sealed', 'enabled', ?, ?)`,
  ).run(at, at);
  db.prepare(
    `INSERT INTO webhook_deliveries (id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, created_at, updated_at, delivered_at)
     VALUES ('del_1', 'inst_1', 'wh_1', 'action.execute', 'action', 'prop_1', 'sealed', 'sha256:00', 'delivered', 1, ?, ?, ?)`,
  ).run(at, at, at);
  db.prepare("INSERT INTO webhook_attempts (id, delivery_id, attempt, status_code, duration_ms, started_at) VALUES ('att_1', 'del_1', 1, 200, 12, ?)").run(at);
}

describe("migrations", () => {
  it("apply in order to an empty database with foreign keys on", () => {
    const db = database();
    for (const name of files) apply(db, name);
    assert.deepEqual(db.prepare("PRAGMA foreign_key_check").all(), []);
  });

  it("apply from 0048 on to a database holding a webhook delivery and its attempt, and keep both", () => {
    const db = database();
    const first = files.findIndex((name) => name.startsWith("0048_"));
    assert.ok(first > 0, "migration 0048 is in migrations/");
    for (const name of files.slice(0, first)) apply(db, name);
    seedDeliveries(db);
    for (const name of files.slice(first)) apply(db, name);
    assert.deepEqual(db.prepare("PRAGMA foreign_key_check").all(), []);
    const delivery = db.prepare("SELECT id, source_type AS sourceType, state FROM webhook_deliveries").all();
    assert.deepEqual(
      delivery.map((row) => ({ ...row })),
      [{ id: "del_1", sourceType: "action", state: "delivered" }],
    );
    const attempts = db.prepare("SELECT id, delivery_id AS deliveryId FROM webhook_attempts").all();
    assert.deepEqual(
      attempts.map((row) => ({ ...row })),
      [{ id: "att_1", deliveryId: "del_1" }],
    );
    // What 0048 adds is there: the labeler's settings, a label's subject and its index, a hit's entity, a rule set's gate.
    const columns = (table) =>
      db
        .prepare(`PRAGMA table_info(${table})`)
        .all()
        .map((row) => row.name);
    assert.ok(columns("labeler_settings").includes("signing_key_sealed"));
    assert.ok(columns("entity_labels").includes("subject"));
    assert.ok(columns("rule_hits").includes("entity_key"));
    assert.ok(columns("rule_sets").includes("gate_json"));
    const indexes = db
      .prepare("PRAGMA index_list(entity_labels)")
      .all()
      .map((row) => row.name);
    assert.ok(indexes.includes("entity_labels_subject"));
  });
  it("apply from 0068 on to a database holding workflow tasks that QA, golden and exposure rows point at, and keep them all", () => {
    const db = database();
    const first = files.findIndex((name) => name.startsWith("0068_"));
    assert.ok(first > 0, "migration 0068 is in migrations/");
    for (const name of files.slice(0, first)) apply(db, name);
    const at = "2026-01-01T00:00:00.000Z";
    db.prepare("INSERT INTO installations (id, name, created_at, updated_at) VALUES ('inst_1', 'One', ?, ?)").run(at, at);
    db.prepare("INSERT INTO queues (id, installation_id, name, sla_seconds, created_at, updated_at) VALUES ('q_1', 'inst_1', 'review', 3600, ?, ?)").run(at, at);
    db.prepare("INSERT INTO workflows (id, installation_id, name, created_at, updated_at) VALUES ('wf_1', 'inst_1', 'flow', ?, ?)").run(at, at);
    db.prepare("INSERT INTO workflow_artifacts (id, installation_id, compatibility_date, bundle_digest, inline_source_text, size_bytes, status, created_at) VALUES ('art_1', 'inst_1', '2026-01-01', 'sha256:00', 'x', 1, 'ready', ?)").run(at);
    db.prepare("INSERT INTO workflow_versions (id, installation_id, workflow_id, version, graph_json, graph_digest, artifact_id, created_at) VALUES ('wv_1', 'inst_1', 'wf_1', 1, '{}', 'sha256:00', 'art_1', ?)").run(at);
    db.prepare("INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, created_at, updated_at) VALUES ('run_1', 'inst_1', 'wv_1', 'autonomous', 'waiting', ?, ?)").run(at, at);
    db.prepare("INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, state, updated_at) VALUES ('run_1:review:main:1', 'run_1', 'review', 'human_task', 'waiting', ?)").run(at);
    const task = (id, runId, stepRunId, origin) =>
      db
        .prepare(
          `INSERT INTO human_tasks (id, installation_id, run_id, step_run_id, task_type, state, queue_id, context_json, context_digest, response_schema_json, due_at, created_at, updated_at, origin)
           VALUES (?, 'inst_1', ?, ?, 'review', 'completed', 'q_1', '{}', '', '{}', ?, ?, ?, ?)`,
        )
        .run(id, runId, stepRunId, at, at, at, origin);
    // A workflow task as the release before wrote it (its step stored), a QA copy and a golden copy.
    task("run_1:review:main:1:task", "run_1", "run_1:review:main:1", "workflow");
    task("qa_1:task", null, null, "qa");
    task("run_1:review:main:2:task", "run_1", null, "golden");
    db.prepare(
      `INSERT INTO qa_reviews (qa_task_id, installation_id, original_task_id, queue_id, compare_field, original_reviewer, original_label, original_completed_at, created_at)
       VALUES ('qa_1:task', 'inst_1', 'run_1:review:main:1:task', 'q_1', 'outcome', 'rita', 'keep', ?, ?)`,
    ).run(at, at);
    db.prepare(
      `INSERT INTO golden_items (id, installation_id, queue_id, task_id, source_task_id, compare_field, answer_json, answer_label, created_by, created_at)
       VALUES ('gold_1', 'inst_1', 'q_1', 'run_1:review:main:2:task', 'run_1:review:main:1:task', 'outcome', '{}', 'keep', 'lead', ?)`,
    ).run(at);
    db.prepare(
      `INSERT INTO review_exposure (id, installation_id, task_id, reviewer, category, started_at, lease_expires_at, created_at)
       VALUES ('exp_1', 'inst_1', 'run_1:review:main:1:task', 'rita', 'violence', ?, ?, ?)`,
    ).run(at, at, at);
    for (const name of files.slice(first)) apply(db, name);
    assert.deepEqual(db.prepare("PRAGMA foreign_key_check").all(), []);
    const rows = (sql) =>
      db
        .prepare(sql)
        .all()
        .map((row) => ({ ...row }));
    assert.deepEqual(rows("SELECT id, step_run_id AS stepRunId, origin FROM human_tasks ORDER BY id"), [
      { id: "qa_1:task", stepRunId: null, origin: "qa" },
      { id: "run_1:review:main:1:task", stepRunId: "run_1:review:main:1", origin: "workflow" },
      { id: "run_1:review:main:2:task", stepRunId: null, origin: "golden" },
    ]);
    assert.deepEqual(rows("SELECT qa_task_id AS qa, original_task_id AS original FROM qa_reviews"), [{ qa: "qa_1:task", original: "run_1:review:main:1:task" }]);
    assert.deepEqual(rows("SELECT task_id AS task, source_task_id AS source FROM golden_items"), [{ task: "run_1:review:main:2:task", source: "run_1:review:main:1:task" }]);
    assert.deepEqual(rows("SELECT task_id AS task FROM review_exposure"), [{ task: "run_1:review:main:1:task" }]);
    // The references name the rebuilt table, and no table of the old name is left.
    const schema = rows("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL");
    assert.deepEqual(
      schema.filter((row) => /before_0068/u.test(row.sql) || /before_0068/u.test(row.name)),
      [],
    );
    for (const table of ["qa_reviews", "golden_items", "review_exposure"]) {
      assert.ok(
        db
          .prepare(`PRAGMA foreign_key_list(${table})`)
          .all()
          .some((row) => row.table === "human_tasks"),
        table,
      );
    }
    // A workflow task now may name its step by its id alone; one that names it neither way is refused.
    db.prepare("INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, state, updated_at) VALUES ('run_1:again:main:1', 'run_1', 'again', 'human_task', 'waiting', ?)").run(at);
    task("run_1:again:main:1:task", "run_1", null, "workflow");
    assert.throws(() => task("run_1:other", "run_1", null, "workflow"), /CHECK constraint failed/u);
    // The step row of the task that names its step by its id is deleted freely; the one of the earlier form is still held.
    db.prepare("DELETE FROM workflow_step_runs WHERE id = 'run_1:again:main:1'").run();
    assert.throws(() => db.prepare("DELETE FROM workflow_step_runs WHERE id = 'run_1:review:main:1'").run(), /FOREIGN KEY constraint failed/u);
  });
});
