// Audit trail: canonical JSON and event statements.
export { canonicalJson } from "./canonical-json";
export { auditStatement, RUNTIME_ACTOR, type AuditEventInput } from "./events";
export { sealAuditChain, sealAuditChainAfterWrite, sweepAuditChains, verifyAuditChain } from "./chain";
