// Console access: users, roles, sessions, sign-in links, Cloudflare Access.
export { signinRoutes } from "./routes";
