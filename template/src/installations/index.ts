// Installations (tenants) and API keys.
export { createApiKey, createInstallation, keyUsedStatement, listInstallations } from "./service";
