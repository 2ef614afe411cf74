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
  sessionId?: string;
}

/** Whether the actor may see a queue: console users can be limited to some queues. */
export function canSeeQueue(actor: Actor, queueId: string | null): boolean {
  return !actor.user?.queueIds || (queueId !== null && actor.user.queueIds.includes(queueId));
}

/** Whether the actor may open personal data (reported content, task contexts): `personal_data:read`, or `admin`. */
export function canReadPersonalData(actor: Actor): boolean {
  return actor.scopes.includes("personal_data:read") || actor.scopes.includes("admin");
}
