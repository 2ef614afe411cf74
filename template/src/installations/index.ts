// Installations (tenants) and API keys.
export { createApiKey, createInstallation, listInstallations } from "./service";
