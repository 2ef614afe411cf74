// Audit trail: canonical JSON and event statements.
export { canonicalJson } from "./canonical-json";
export { auditStatement, RUNTIME_ACTOR, type AuditEventInput } from "./events";
export { lastFullVerification, sealAuditChain, sealAuditChainAfterWrite, sweepAuditChains, verifyAuditChain } from "./chain";
