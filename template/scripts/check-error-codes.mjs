// Error codes: one naming style (`area.snake_case`), listed per domain in docs/error-codes.md.
// Scans src/ for the codes it throws (AppError, ExpressionError, ComponentExecutionError,
// denied, conflict, notFound, NonRetryableError) and fails when one breaks the style or is not in
// the list; `--write` regenerates the list (keeping nothing by hand). Run by `npm run lint`.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** docs/ beside the template in this repository, or inside a scaffolded project. */
export const LIST_PATH = [join(root, "docs", "error-codes.md"), join(root, "..", "docs", "error-codes.md")].find((path) => existsSync(path)) ?? join(root, "..", "docs", "error-codes.md");
const STYLE = /^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/u;
const THROWN = /(?:new (?:AppError|ExpressionError|ComponentExecutionError|NonRetryableError)|\bdenied|\bconflict)\(\s*["`]([a-z][a-z0-9_.]*(?:\$\{[a-z]+\})?)["`]/gu;
const NOT_FOUND = /\bnotFound\(\s*"([a-z_]+)"\s*\)/gu;

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return files(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".generated.ts") ? [path] : [];
  });
}

/** Every code thrown in `srcDir`, with the domain (folder) that throws it. */
export function thrownCodes(srcDir) {
  const codes = new Map();
  for (const file of files(srcDir)) {
    const text = readFileSync(file, "utf8");
    const domain = relative(srcDir, file).split("/").length > 1 ? relative(srcDir, file).split("/")[0] : "platform";
    const add = (code) => {
      if (!codes.has(code)) codes.set(code, new Set());
      codes.get(code).add(domain);
    };
    for (const match of text.matchAll(THROWN)) add(match[1].replace(/\$\{[a-z]+\}$/u, "<name>"));
    for (const match of text.matchAll(NOT_FOUND)) add(`${match[1]}.not_found`);
  }
  return codes;
}

export function problems(codes, listed) {
  const found = [];
  for (const code of codes.keys()) {
    if (!STYLE.test(code.replace("<name>", "x"))) found.push(`${code}: not in the style area.snake_case`);
    else if (!listed.includes(`\`${code}\``)) found.push(`${code}: not listed in docs/error-codes.md (npm run lint:codes -- --write)`);
  }
  return found;
}

function render(codes) {
  const byDomain = new Map();
  for (const [code, domains] of codes) for (const domain of domains) byDomain.set(domain, [...(byDomain.get(domain) ?? []), code]);
  const lines = [
    "# Error codes",
    "",
    'Every error the API returns is `{ "error": { "code", "message", "details"? } }`; run and step',
    "errors carry the same codes. A code is `area.snake_case` and stable: match on it, never on the",
    "message. This list is generated from the source by `npm run lint:codes -- --write` (in",
    "`template/`), and `npm test` fails when a thrown code is missing here or breaks the style.",
    "Graph validation problems (`details[].code` of `workflow_graph.invalid`) are listed in",
    "graph-format.md.",
    "",
  ];
  for (const domain of [...byDomain.keys()].sort()) {
    lines.push(
      `## ${domain}`,
      "",
      ...byDomain
        .get(domain)
        .sort()
        .map((code) => `- \`${code}\``),
      "",
    );
  }
  return lines.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const codes = thrownCodes(join(root, "src"));
  const docPath = LIST_PATH;
  if (process.argv.includes("--write")) {
    writeFileSync(docPath, render(codes));
    console.log(`Wrote ${codes.size} codes to docs/error-codes.md`);
  } else {
    let listed = "";
    try {
      listed = readFileSync(docPath, "utf8");
    } catch {
      // no list yet: every code is a problem
    }
    const found = problems(codes, listed);
    if (found.length > 0) {
      console.error(`Error codes: ${found.length} problem(s)\n${found.map((p) => `  ${p}`).join("\n")}`);
      process.exit(1);
    }
    console.log(`Error codes: ${codes.size} codes, one style, all listed`);
  }
}
