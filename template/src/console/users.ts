// Console users of an installation: role, queue access, wellness preferences.
import { auditStatement } from "../audit";
import { AppError, conflict, notFound } from "../errors";
import type { Actor } from "../auth";
import { newId } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";
import { toUser, USER_COLUMNS, type ConsoleRole } from "./sessions";

export async function listUsers(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${USER_COLUMNS} FROM console_users u WHERE u.installation_id = ?1 ORDER BY u.email`).bind(actor.installationId).all<Parameters<typeof toUser>[0]>();
  return results.map((row) => ({ ...toUser(row), disabled: row.disabledAt !== null }));
}

async function checkQueues(env: Env, actor: Actor, queueIds: string[] | null | undefined): Promise<void> {
  if (!queueIds?.length) return;
  const { results } = await env.DB.prepare(`SELECT id FROM queues WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2))`).bind(actor.installationId, JSON.stringify(queueIds)).all<{ id: string }>();
  // A queue of another installation is not found, like one that does not exist.
  if (results.length !== new Set(queueIds).size) throw notFound("queue");
}

/** Adds a user; `accessSignIn` (default true) binds the email's Cloudflare Access sign-in to this installation. */
export async function createUser(env: Env, actor: Actor, input: { email: string; name?: string; role: ConsoleRole; queueIds?: string[] | null; accessSignIn?: boolean }) {
  await checkQueues(env, actor, input.queueIds);
  const id = newId("usr");
  const at = new Date().toISOString();
  const email = input.email.toLowerCase();
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO console_users (id, installation_id, email, name, role, queue_ids_json, access_sign_in, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8, ?7, ?7)`).bind(
        id,
        actor.installationId,
        email,
        input.name ?? email,
        input.role,
        input.queueIds?.length ? JSON.stringify(input.queueIds) : null,
        at,
        input.accessSignIn === false ? 0 : 1,
      ),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `console_user:${id}:created`,
        action: "console_user.created",
        actor: actor.audit,
        target: { type: "console_user", id },
        details: { role: input.role, queueIds: input.queueIds ?? null, accessSignIn: input.accessSignIn !== false },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("console_user.email_taken", "A console user with this email already exists.");
    throw error;
  }
  return (await listUsers(env, actor)).find((user) => user.id === id)!;
}

export async function updateUser(env: Env, actor: Actor, id: string, input: { role?: ConsoleRole; queueIds?: string[] | null; disabled?: boolean; name?: string; accessSignIn?: boolean }) {
  const existing = (await listUsers(env, actor)).find((user) => user.id === id);
  if (!existing) throw notFound("console_user");
  if (input.queueIds !== undefined) await checkQueues(env, actor, input.queueIds);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE console_users SET role = COALESCE(?3, role), name = COALESCE(?4, name),
        queue_ids_json = CASE WHEN ?5 = 1 THEN ?6 ELSE queue_ids_json END,
        disabled_at = CASE WHEN ?7 IS NULL THEN disabled_at WHEN ?7 = 1 THEN COALESCE(disabled_at, ?8) ELSE NULL END,
        access_sign_in = COALESCE(?9, access_sign_in), updated_at = ?8
      WHERE installation_id = ?1 AND id = ?2`).bind(
      actor.installationId,
      id,
      input.role ?? null,
      input.name ?? null,
      input.queueIds === undefined ? 0 : 1,
      input.queueIds?.length ? JSON.stringify(input.queueIds) : null,
      input.disabled === undefined ? null : input.disabled ? 1 : 0,
      at,
      input.accessSignIn === undefined ? null : input.accessSignIn ? 1 : 0,
    ),
    ...(input.disabled ? [env.DB.prepare(`UPDATE console_sessions SET revoked_at = ?2 WHERE user_id = ?1 AND revoked_at IS NULL`).bind(id, at)] : []),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `console_user:${id}:updated:${at}`,
      action: "console_user.updated",
      actor: actor.audit,
      target: { type: "console_user", id },
      // A name is personal data: the trail says it changed, not to what (it outlives erasure).
      details: { ...withoutName(input), ...(input.name !== undefined ? { nameChanged: true } : {}) },
      at,
    }),
  ]);
  return (await listUsers(env, actor)).find((user) => user.id === id)!;
}

export async function setPreferences(env: Env, actor: Actor, preferences: { blurMedia: boolean }) {
  if (!actor.user) throw new AppError("auth.console_user_required", "Preferences belong to console users.", { status: 403 });
  await env.DB.prepare(`UPDATE console_users SET preferences_json = ?2, updated_at = ?3 WHERE id = ?1`)
    .bind(actor.user.id, JSON.stringify({ blurMedia: preferences.blurMedia }), new Date().toISOString())
    .run();
  return { ...actor.user.preferences, ...preferences };
}

function withoutName<T extends { name?: string }>(input: T): Omit<T, "name"> {
  const { name: _name, ...rest } = input;
  return rest;
}
