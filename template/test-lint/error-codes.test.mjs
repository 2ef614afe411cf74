// The error-code check: a code in another style, or one missing from docs/error-codes.md, fails;
// the real src/ passes against the real list.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { LIST_PATH, problems, thrownCodes } from "../scripts/check-error-codes.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const dirs = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function src(files) {
  const dir = mkdtempSync(join(tmpdir(), "codes-"));
  dirs.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe("error codes", () => {
  it("finds thrown codes with their domain, including notFound and dynamic suffixes", () => {
    const codes = thrownCodes(
      src({
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the string is source text for the checker, and its template literal is what is checked
        "cases/a.ts": 'throw new AppError("queue.name_taken", "x"); throw notFound("queue"); throw denied(`runtime.invalid_${name}`);',
      }),
    );
    assert.deepEqual([...codes.keys()].sort(), ["queue.name_taken", "queue.not_found", "runtime.invalid_<name>"]);
    assert.deepEqual([...codes.get("queue.name_taken")], ["cases"]);
  });

  it("fails on a code in another style and on a code missing from the list", () => {
    const codes = thrownCodes(src({ "enforcement/b.ts": 'throw new AppError("delivery_failed", "x"); throw conflict("action.taken", "y");' }));
    const found = problems(codes, "- `something.else`");
    assert.equal(found.length, 2);
    assert.match(
      found.find((p) => p.startsWith("delivery_failed")),
      /style/u,
    );
    assert.match(
      found.find((p) => p.startsWith("action.taken")),
      /not listed/u,
    );
    assert.deepEqual(
      problems(codes, "- `delivery_failed`\n- `action.taken`").filter((p) => p.includes("not listed")),
      [],
    );
  });

  it("passes on the real src/ against docs/error-codes.md", () => {
    const listed = readFileSync(LIST_PATH, "utf8");
    assert.deepEqual(problems(thrownCodes(join(root, "src")), listed), []);
  });
});
