// Section "backup": POST /installation/export and POST /installations/import of one
// installation with a 10,000-event audit trail and 100 sealed reports. The installation is
// exported, its rows removed (/bench/installation-remove), and the file restored into the same
// deployment; the restore verifies the whole chain, so its figure includes a full verification.
import { log, pool, results, round } from "./lib.mjs";

const EVENTS = 10_000;
const REPORTS = 100;

export async function sectionBackup(api, timed, adminToken) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-backup" }, key: adminToken });
  const key = installation.apiKey;
  await pool(REPORTS, 4, (index) =>
    api("/api/v1/reports", { key, body: { subject: { kind: "account", id: `acct-${index}` }, category: "scams_and_fraud", description: `bench report ${index}`, reporter: { id: `user-${index}`, contact: `user-${index}@example.org` } } }),
  );
  log(`backup: seeding the trail to ${EVENTS} events`);
  const seeded = await api("/bench/audit-seed", { body: { installationId: installation.id, upTo: EVENTS }, key: adminToken });
  if (seeded.events !== EVENTS) throw new Error(`backup: audit seed gave ${seeded.events} events`);
  const exported = await timed("/api/v1/installation/export", { method: "POST", key });
  const backup = exported.body;
  const bytes = JSON.stringify(backup).length;
  await api("/bench/installation-remove", { body: { installationId: installation.id }, key: adminToken });
  const restored = await timed("/api/v1/installations/import", { body: backup, key: adminToken });
  if (!restored.body.auditChain?.ok) throw new Error(`backup: the restored chain does not verify: ${JSON.stringify(restored.body).slice(0, 500)}`);
  const rows = Object.values(backup.manifest.counts).reduce((a, b) => a + b, 0);
  Object.assign(results, {
    backupRows: rows,
    backupAuditEvents: backup.manifest.counts.audit_events,
    backupBytes: bytes,
    backupExportMs: round(exported.serverMs),
    backupExportClientMs: round(exported.clientMs),
    backupImportMs: round(restored.serverMs),
    backupImportClientMs: round(restored.clientMs),
  });
  log(`backup: export ${round(exported.serverMs)} ms, import ${round(restored.serverMs)} ms (${rows} rows, ${bytes} bytes)`);
}

export function backupLines() {
  if (results.backupExportMs === undefined) return [];
  return [
    `backup:           export ${results.backupExportMs} ms, restore ${results.backupImportMs} ms (server time, incl. a full chain verification) for ${results.backupRows} rows (${results.backupAuditEvents} audit events), ${Math.round(results.backupBytes / 1024)} KiB; client ${results.backupExportClientMs}/${results.backupImportClientMs} ms`,
  ];
}
