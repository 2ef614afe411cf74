// Console access: users, roles, sessions, sign-in links, Cloudflare Access.
export {
  CONSOLE_ROLES,
  INSTALLATION_HEADER,
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
