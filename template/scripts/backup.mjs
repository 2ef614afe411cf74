// `npm run backup -- --out file.json`: exports one installation of the local server started by
// `npm start` (POST /api/v1/installation/export) to one file. The installation is the demo one
// unless SAFEST_API_KEY names another installation's admin key. Sealed data stays sealed: the
// file opens only where REPORT_MASTER_KEY and AUDIT_CHECKPOINT_KEY are the same (keep .dev.vars).
import { writeFileSync } from "node:fs";
import path from "node:path";
import { baseUrl, fail, installationKey, option } from "./local-state.mjs";

const given = option("out");
// npm runs the script in template/; a relative path is the one the user typed, from where npm ran.
const out = given ? path.resolve(process.env.INIT_CWD || process.cwd(), given) : undefined;
if (!out) fail("usage: npm run backup -- --out <file.json>");
const key = installationKey();
if (!key) fail("no installation key: set SAFEST_API_KEY, or run `npm start` once so the demo installation exists.");
let response;
try {
  response = await fetch(`${baseUrl()}/api/v1/installation/export`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
} catch (error) {
  fail(`${baseUrl()} does not answer (${error instanceof Error ? error.message : error}); start the server with \`npm start\`.`);
}
const text = await response.text();
if (response.status !== 200) fail(`export failed: HTTP ${response.status} ${text.slice(0, 300)}`);
writeFileSync(out, text, { mode: 0o600 });
const { manifest } = JSON.parse(text);
const rows = Object.values(manifest.counts).reduce((a, b) => a + b, 0);
console.log(`[safest] Backed up installation ${manifest.installationId}: ${rows} rows, ${manifest.objects} objects, ${manifest.digest} → ${out}`);
console.log("[safest] Restoring it needs the same REPORT_MASTER_KEY and AUDIT_CHECKPOINT_KEY (.dev.vars).");
