// Installations (tenants) and API keys.
export { installationRoutes } from "./routes";
export { createApiKey, createInstallation, listInstallations } from "./service";
