// `npm run restore -- --in file.json`: restores a backup made by `npm run backup` into the local
// server started by `npm start` (POST /api/v1/installations/import with the admin token). The
// server's state folder must not have that installation yet (a fresh SAFEST_STATE_DIR, or after
// removing the old one); the restore verifies the audit chain and keeps nothing if it fails.
import { readFileSync } from "node:fs";
import path from "node:path";
import { adminToken, baseUrl, fail, option } from "./local-state.mjs";

const given = option("in");
// npm runs the script in template/; a relative path is the one the user typed, from where npm ran.
const file = given ? path.resolve(process.env.INIT_CWD || process.cwd(), given) : undefined;
if (!file) fail("usage: npm run restore -- --in <file.json>");
const token = adminToken();
if (!token) fail("no admin token: set ADMIN_TOKEN or keep the .dev.vars that `npm start` wrote.");
let document;
try {
  document = readFileSync(file);
} catch (error) {
  fail(`cannot read ${file} (${error instanceof Error ? error.message : error}).`);
}
let response;
try {
  response = await fetch(`${baseUrl()}/api/v1/installations/import`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: document,
  });
} catch (error) {
  fail(`${baseUrl()} does not answer (${error instanceof Error ? error.message : error}); start the server with \`npm start\`.`);
}
const body = await response.json().catch(() => null);
if (response.status !== 201) fail(`restore failed: HTTP ${response.status} ${body?.error?.code ?? ""} ${body?.error?.message ?? ""}`);
console.log(`[safest] Restored installation ${body.installationId}: audit chain verified (${body.auditChain.events} events), ${body.objects} objects.`);
