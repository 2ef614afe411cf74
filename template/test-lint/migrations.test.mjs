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
});
