// The boundary lint (dependency-cruiser) and the table-ownership check fail on small fake source
// trees that break them, pass on the same trees done right, and pass on the real src/.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
// The package exports only its API (src/main/index.mjs); its CLI sits beside it.
const depcruiseBin = fileURLToPath(new URL("../../bin/dependency-cruise.mjs", import.meta.resolve("dependency-cruiser")));
const config = join(root, ".dependency-cruiser.cjs");
const tableCheck = join(root, "scripts", "check-table-owners.mjs");
const migrations = join(root, "migrations");

const trees = [];
after(() => {
  for (const dir of trees) rmSync(dir, { recursive: true, force: true });
});

/** A fake project: `files` maps paths under src/ to their text. */
function tree(files) {
  const dir = mkdtempSync(join(tmpdir(), "boundaries-"));
  trees.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, "src", path)), { recursive: true });
    writeFileSync(join(dir, "src", path), text);
  }
  return dir;
}

function run(command, args, cwd) {
  const result = spawnSync(process.execPath, [command, ...args], { cwd, encoding: "utf8" });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const lint = (cwd) => run(depcruiseBin, ["src", "--config", config], cwd);
const tables = (cwd) => run(tableCheck, ["--src", join(cwd, "src"), "--migrations", migrations], cwd);

const workflows = {
  "workflows/index.ts": `export { createRun } from "./runs";\n`,
  "workflows/runs.ts": `export function createRun(): string { return "run"; }\n`,
};

describe("import boundaries", () => {
  it("fail on a deep import into another domain", () => {
    const result = lint(tree({ ...workflows, "cases/x.ts": `import { createRun } from "../workflows/runs";\nexport const x = createRun();\n` }));
    assert.equal(result.status, 1, result.output);
    assert.match(result.output, /cross-domain-via-index: src\/cases\/x\.ts → src\/workflows\/runs\.ts/u);
  });

  it("pass when the same import goes through the domain's index", () => {
    const result = lint(tree({ ...workflows, "cases/x.ts": `import { createRun } from "../workflows";\nexport const x = createRun();\n` }));
    assert.equal(result.status, 0, result.output);
  });

  it("fail on an import cycle between domains", () => {
    const result = lint(
      tree({
        "workflows/index.ts": `export { start } from "./runs";\n`,
        "workflows/runs.ts": `import { queueName } from "../cases";\nexport const start = () => queueName;\n`,
        "cases/index.ts": `export { queueName } from "./queues";\n`,
        "cases/queues.ts": `import { start } from "../workflows";\nexport const queueName = "q";\nexport const again = () => start();\n`,
      }),
    );
    assert.equal(result.status, 1, result.output);
    assert.match(result.output, /no-cycles: /u);
  });

  it("fail when a service imports http/", () => {
    const result = lint(
      tree({
        "http/auth.ts": `export const SCOPES = ["read"];\n`,
        "cases/x.ts": `import { SCOPES } from "../http/auth";\nexport const x = SCOPES;\n`,
      }),
    );
    assert.equal(result.status, 1, result.output);
    assert.match(result.output, /http-only-from-routes: src\/cases\/x\.ts → src\/http\/auth\.ts/u);
  });

  it("pass on the real src/", () => {
    const result = lint(root);
    assert.equal(result.status, 0, result.output);
  });
});

describe("table owners", () => {
  const update = `export const close = (db: D1Database) => db.prepare(\`\n  UPDATE human_tasks SET state = 'cancelled' WHERE run_id = ?1\`);\n`;

  it("fail on a write to human_tasks from enforcement/", () => {
    const result = tables(tree({ "enforcement/effects.ts": update }));
    assert.equal(result.status, 1, result.output);
    assert.match(result.output, /src\/enforcement\/effects\.ts:2: writes human_tasks, owned by cases\//u);
  });

  it("pass on the same write in cases/", () => {
    const result = tables(tree({ "cases/task-records.ts": update }));
    assert.equal(result.status, 0, result.output);
  });

  it("pass on the real src/", () => {
    const result = run(tableCheck, [], root);
    assert.equal(result.status, 0, result.output);
  });
});
