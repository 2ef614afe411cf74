// Action types: what an action node may do to the team's product, through which endpoint, whether
// it needs approval and how far it may act alone (autonomy, promoted through its gate).
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { conflict, notFound } from "../errors";
import { newId } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";
import { getEndpointRow } from "./webhook-endpoints";

export interface ActionTypeRow {
  id: string;
  key: string;
  name: string;
  description: string | null;
  requiresApproval: number;
  reversible: number;
  endpointId: string;
  /** 'assisted': every action of the type waits for approval, even in an autonomous run (action-type-promotion.ts). */
  autonomy: "assisted" | "autonomous";
  createdAt: string;
}

export const TYPE_COLUMNS = `id, key, name, description, requires_approval AS requiresApproval, reversible, endpoint_id AS endpointId, autonomy, created_at AS createdAt`;

function serializeType(row: ActionTypeRow) {
  return { ...row, requiresApproval: row.requiresApproval === 1, reversible: row.reversible === 1 };
}

export async function createActionType(env: Env, actor: Actor, input: { key: string; name: string; description?: string; requiresApproval?: boolean; reversible?: boolean; endpointId: string; autonomy?: "assisted" | "autonomous" }) {
  if (!(await getEndpointRow(env.DB, actor.installationId, input.endpointId))) throw notFound("webhook_endpoint");
  const id = newId("act");
  const at = new Date().toISOString();
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO action_types (id, installation_id, key, name, description, requires_approval, reversible, endpoint_id, autonomy, created_at, updated_at)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?10, ?9, ?9)`).bind(
        id,
        actor.installationId,
        input.key,
        input.name,
        input.description ?? null,
        input.requiresApproval ? 1 : 0,
        input.reversible ? 1 : 0,
        input.endpointId,
        at,
        input.autonomy ?? "autonomous",
      ),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `action_type:${id}:created`,
        action: "action_type.created",
        actor: actor.audit,
        target: { type: "action_type", id },
        details: { key: input.key, name: input.name, requiresApproval: input.requiresApproval ?? false, endpointId: input.endpointId, autonomy: input.autonomy ?? "autonomous" },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("action_type.key_taken", "An action type with this key already exists.");
    throw error;
  }
  return serializeType((await env.DB.prepare(`SELECT ${TYPE_COLUMNS} FROM action_types WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<ActionTypeRow>())!);
}

export async function listActionTypes(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${TYPE_COLUMNS} FROM action_types WHERE installation_id = ?1 ORDER BY key`).bind(actor.installationId).all<ActionTypeRow>();
  return results.map(serializeType);
}
