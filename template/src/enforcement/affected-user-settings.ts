// The installation's redress settings (DSA Art. 17, 20, 21): whether affected users get a statement
// after every restricting decision (on by default), the out-of-court dispute settlement bodies the
// statements name, and where complaints are filed.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { assertEgressAllowed } from "../lib/egress";

export interface SettlementBody {
  name: string;
  url: string;
  languages?: string[];
}

export interface RedressSettings {
  statementsEnabled: boolean;
  settlementBodies: SettlementBody[];
  complaintUrl: string | null;
  /**
   * Whether automation (an API key that is not a reviewer's) may propose a complaint's outcome;
   * a person confirms it before the appellant is told (DSA Art. 20(6)). Off by default.
   */
  automatedComplaints: boolean;
  updatedAt: string | null;
}

/** An installation that set nothing: statements on, no bodies named (the text then points to Art. 21 bodies in general). */
const DEFAULTS: RedressSettings = { statementsEnabled: true, settlementBodies: [], complaintUrl: null, automatedComplaints: false, updatedAt: null };

/** The settings of an installation, or the defaults. */
export async function readRedressSettings(db: D1Database, installationId: string): Promise<RedressSettings> {
  const row = await db
    .prepare(`SELECT statements_enabled AS statementsEnabled, settlement_bodies_json AS bodies, complaint_url AS complaintUrl, automated_complaints AS automatedComplaints, updated_at AS updatedAt
      FROM redress_settings WHERE installation_id = ?1`)
    .bind(installationId)
    .first<{ statementsEnabled: number; bodies: string; complaintUrl: string | null; automatedComplaints: number; updatedAt: string }>();
  if (!row) return { ...DEFAULTS };
  return {
    statementsEnabled: row.statementsEnabled === 1,
    settlementBodies: JSON.parse(row.bodies) as SettlementBody[],
    complaintUrl: row.complaintUrl,
    automatedComplaints: row.automatedComplaints === 1,
    updatedAt: row.updatedAt,
  };
}

export async function getRedressSettings(env: Env, actor: Actor) {
  return readRedressSettings(env.DB, actor.installationId);
}

/** Replaces the settings (fields left out keep their value); audited with the new values (no personal data). */
export async function putRedressSettings(env: Env, actor: Actor, input: { statementsEnabled?: boolean; settlementBodies?: SettlementBody[]; complaintUrl?: string | null; automatedComplaints?: boolean }) {
  // Links users are sent to follow the same rule as every URL the platform is configured with.
  const urls: Array<[string, string]> = [
    ...(input.settlementBodies ?? []).map((body, index) => [`settlementBodies[${index}].url`, body.url] as [string, string]),
    ...(input.complaintUrl ? [["complaintUrl", input.complaintUrl] as [string, string]] : []),
  ];
  for (const [field, url] of urls) assertEgressAllowed(url, env, "redress.url_not_allowed", { field });
  const current = await readRedressSettings(env.DB, actor.installationId);
  const next = {
    statementsEnabled: input.statementsEnabled ?? current.statementsEnabled,
    settlementBodies: input.settlementBodies ?? current.settlementBodies,
    complaintUrl: input.complaintUrl === undefined ? current.complaintUrl : input.complaintUrl,
    automatedComplaints: input.automatedComplaints ?? current.automatedComplaints,
  };
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO redress_settings (installation_id, statements_enabled, settlement_bodies_json, complaint_url, automated_complaints, updated_at) VALUES (?1, ?2, ?3, ?4, ?6, ?5)
      ON CONFLICT(installation_id) DO UPDATE SET statements_enabled = excluded.statements_enabled, settlement_bodies_json = excluded.settlement_bodies_json,
        complaint_url = excluded.complaint_url, automated_complaints = excluded.automated_complaints, updated_at = excluded.updated_at
    `).bind(actor.installationId, next.statementsEnabled ? 1 : 0, JSON.stringify(next.settlementBodies), next.complaintUrl, at, next.automatedComplaints ? 1 : 0),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `redress_settings:${actor.installationId}:updated:${at}:${crypto.randomUUID()}`,
      action: "redress_settings.updated",
      actor: actor.audit,
      target: { type: "redress_settings", id: actor.installationId },
      details: { statementsEnabled: next.statementsEnabled, settlementBodies: next.settlementBodies.map((b) => b.name), complaintUrl: next.complaintUrl, automatedComplaints: next.automatedComplaints },
      at,
    }),
  ]);
  return readRedressSettings(env.DB, actor.installationId);
}
