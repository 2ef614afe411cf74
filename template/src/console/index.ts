// Console access: users, roles, sessions, sign-in links, Cloudflare Access.
export { sessionRoutes, signinRoutes } from "./routes";
