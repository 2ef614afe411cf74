// Who is acting: the Actor every service receives, the API scopes and what each console role
// holds. No HTTP here: http/auth.ts resolves a request to an Actor; services only read it.
import type { ConsoleRole, ConsoleUser } from "../console";

export const SCOPES = ["admin", "reports:write", "review", "read", "personal_data:read", "events:write"] as const;
export type Scope = (typeof SCOPES)[number];

/** What each console role may do; `read` opens every GET route of the installation. */
export const ROLE_SCOPES: Record<ConsoleRole, Scope[]> = {
  admin: ["admin", "review", "reports:write", "read", "personal_data:read", "events:write"],
  moderator: ["review", "read", "personal_data:read"],
  viewer: ["read"],
};

export interface Actor {
  installationId: string;
  scopes: Scope[];
  /** How the actor appears in audit events. */
  audit: { type: "system" | "api_key" | "admin" | "user"; id: string };
  /** A console user (session or Cloudflare Access); absent for API keys. */
  user?: ConsoleUser;
  /** A reviewer's API key: the person it belongs to (recorded when the key was made). Absent for automation keys. */
  reviewer?: string;
  sessionId?: string;
}

/**
 * Who holds a lease, answers a task or is counted against an exposure cap: a console user by their
 * email; an API key as `api_key:<id>`, or `api_key:<id>/<name>` when its client names the reviewer.
 * The name is a label inside the key's own space, so no key can act as a console user or as another
 * key's reviewer by sending their name.
 */
export function reviewerIdentity(actor: Actor, label?: string): string {
  if (actor.user) return actor.user.email;
  // A reviewer's key names its person itself; a name its client sends does not change that.
  const name = actor.reviewer ?? label;
  return `${actor.audit.type}:${actor.audit.id}${name ? `/${name}` : ""}`;
}

/**
 * Whether a person acts: a console user, or a reviewer's API key (a key made for one named person).
 * Anything else (an automation key, the admin token, the system) is automation: its answers and
 * complaint outcomes are decisions by automated means (DSA Art. 17(3)(c), 20(6)).
 */
export function actsAsPerson(actor: Pick<Actor, "user" | "reviewer">): boolean {
  return actor.user !== undefined || actor.reviewer !== undefined;
}

/** What the API shows of a reviewer identity: the name a key's client gave (else the key's id), or the console user's email. */
export function reviewerLabel(identity: string): string;
export function reviewerLabel(identity: string | null): string | null;
export function reviewerLabel(identity: string | null): string | null {
  if (identity === null) return null;
  const match = /^(?:api_key|admin|system):([^/]+)(?:\/([\s\S]*))?$/u.exec(identity);
  return match ? (match[2] ?? match[1]!) : identity;
}

/**
 * SQL: the reviewer identity in `column` is the actor's own (the same console user, or the same
 * API key under any name its client gave). `param` binds `reviewerIdentity(actor)` without a name.
 */
export const ownIdentitySql = (column: string, param: string) => `(${column} = ${param} OR substr(${column}, 1, length(${param}) + 1) = ${param} || '/')`;

/** Whether the actor may see a queue: console users can be limited to some queues. */
export function canSeeQueue(actor: Actor, queueId: string | null): boolean {
  return !actor.user?.queueIds || (queueId !== null && actor.user.queueIds.includes(queueId));
}

/** For a console user limited to some queues: those queues as a JSON array, to bind for `runInQueuesSql`; null when not limited. */
export function queueLimitOf(actor: Actor): string | null {
  return actor.user?.queueIds ? JSON.stringify(actor.user.queueIds) : null;
}

/**
 * SQL: a queue-limited console user may see the run `run` (an alias of workflow_runs): a task of
 * the run, of its report or of its appeal is in the queues bound at `param` (`queueLimitOf`).
 * Always true when `param` is NULL. The same rule as a report's: what a user's queues hold.
 */
export const runInQueuesSql = (run: string, param: string) =>
  `(${param} IS NULL OR EXISTS (SELECT 1 FROM human_tasks qt WHERE qt.installation_id = ${run}.installation_id
    AND (qt.run_id = ${run}.id OR qt.report_id = ${run}.report_id OR qt.appeal_id = ${run}.appeal_id) AND qt.queue_id IN (SELECT value FROM json_each(${param}))))`;

/** Whether the actor may open personal data (reported content, task contexts): `personal_data:read`, or `admin`. */
export function canReadPersonalData(actor: Actor): boolean {
  return actor.scopes.includes("personal_data:read") || actor.scopes.includes("admin");
}
