// Console access: users, roles, sessions, sign-in links, Cloudflare Access.
export {
  CONSOLE_ROLES,
  checkCsrf,
  createSession,
  sessionCookie,
  sessionFromCookie,
  userFromAccessJwt,
  type ConsoleRole,
  type ConsoleUser,
  type RequestView,
  type SessionInfo,
} from "./sessions";
