// Who is signed in, and what their role lets them do. The API enforces the same rules (403
// auth.scope_missing); the console hides or disables what a role cannot do.
import { createContext, useContext } from "react";
import type { ConsoleUser, Role } from "./api";

export interface SessionValue {
  user: ConsoleUser;
  setUser: (user: ConsoleUser) => void;
  signOut: () => Promise<void>;
}

export const SessionContext = createContext<SessionValue | null>(null);

export function useSession(): SessionValue {
  const value = useContext(SessionContext);
  if (!value) throw new Error("useSession outside a signed-in console");
  return value;
}

export type Capability = "review" | "admin";

export function roleCan(role: Role, capability: Capability): boolean {
  if (capability === "admin") return role === "admin";
  return role === "admin" || role === "moderator";
}

export function useCan(capability: Capability): boolean {
  return roleCan(useSession().user.role, capability);
}

export const ROLE_LABELS: Record<Role, string> = { admin: "Admin", moderator: "Moderator", viewer: "Viewer" };

export function cannotReason(role: Role, capability: Capability): string {
  return capability === "admin" ? `Only admins can do this; you are signed in as a ${ROLE_LABELS[role].toLowerCase()}.` : `Viewers can read but not review; you are signed in as a ${ROLE_LABELS[role].toLowerCase()}.`;
}
