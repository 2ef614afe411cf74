// Audit trail: canonical JSON and event statements.
export { canonicalJson } from "./canonical-json";
export { auditEachTargetStatement, auditStatement, combineAuditStatements, mergeAuditStatements, RUNTIME_ACTOR, type AuditEventInput } from "./events";
export { sealAuditChain, sealAuditChainAfterWrite } from "./chain";
export { verifyAuditChain } from "./chain-verify";
export { lastFullVerification, sweepAuditChains } from "./chain-sweep";
export { DEFAULT_AUDIT_HOT_DAYS, sweepAuditSegments } from "./segment-sweep";
export { deleteAuditSegments, indexSegmentObjectTargets, segmentKey } from "./segments";
export { assertAuditKeyConfigured } from "./keys";
