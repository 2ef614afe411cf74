// `npm run backup` / `npm run restore` through the real `wrangler dev` (scripts/start.mjs): the demo
// installation of one state folder is backed up to a file, restored into a server on a fresh state
// folder with the same REPORT_MASTER_KEY and AUDIT_CHECKPOINT_KEY, and there its audit chain
// verifies and its sealed report opens.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { api as apiFor, startServer, templateDir } from "./harness.mjs";

const DESCRIPTION = "A description that is sealed at rest";

function npmScript(script, args, env) {
  const result = spawnSync(process.execPath, [`scripts/${script}.mjs`, ...args], { cwd: templateDir, env: { ...process.env, ...env }, encoding: "utf8", timeout: 120_000 });
  assert.equal(result.status, 0, `${script}: ${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

test("a backup of one state folder restores into a fresh one: the chain verifies, sealed data opens", { timeout: 240_000 }, async () => {
  const secrets = { reportMasterKey: randomBytes(32).toString("base64url"), auditCheckpointKey: randomBytes(32).toString("base64url") };
  const folder = mkdtempSync(path.join(tmpdir(), "safest-backup-file-"));
  const file = path.join(folder, "backup.json");
  let source;
  let target;
  try {
    source = await startServer({ label: "backup-source", secrets });
    const a = apiFor(source.baseUrl, source.apiKey);
    const report = await a("/api/v1/reports", { body: { subject: { kind: "account", id: "acct-backup" }, category: "scams_and_fraud", description: DESCRIPTION } });
    assert.equal(report.status, 201, JSON.stringify(report.body));
    const out = npmScript("backup", ["--out", file], { PORT: String(source.port), SAFEST_STATE_DIR: source.stateDir, SAFEST_API_KEY: "" });
    assert.match(out, /Backed up installation/u);
    const backup = JSON.parse(readFileSync(file, "utf8"));
    assert.equal(backup.manifest.installationId, source.installationId);
    assert.ok(!readFileSync(file, "utf8").includes(DESCRIPTION), "the description travels sealed");
    const sourceKey = source.apiKey;
    await source.stop();
    source = null;

    target = await startServer({ label: "backup-target", secrets });
    const restored = npmScript("restore", ["--in", file], { PORT: String(target.port), ADMIN_TOKEN: target.adminToken });
    assert.match(restored, /audit chain verified/u);
    // The restored installation's keys are its own (stored hashed): the source's demo key works here.
    const key = apiFor(target.baseUrl, sourceKey);
    const verify = await key("/api/v1/audit/verify?mode=full");
    assert.equal(verify.status, 200, JSON.stringify(verify.body));
    assert.equal(verify.body.ok, true, JSON.stringify(verify.body));
    const read = await key(`/api/v1/reports/${report.body.id}`);
    assert.equal(read.status, 200, JSON.stringify(read.body));
    assert.ok(JSON.stringify(read.body).includes(DESCRIPTION));
  } finally {
    await source?.stop();
    await target?.stop();
    rmSync(folder, { recursive: true, force: true });
  }
});
