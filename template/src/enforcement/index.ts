// Enforcement: webhooks, actions and approvals, messages, decisions, handoffs, redress messages (DSA Art. 17, 20).
export { consumeDeliveries } from "./consumer";
export { actionTypeJsonSql, completeWorkflowAction, foldedActionType, prepareWorkflowAction, type ActionTypeRead } from "./action-runtime";
export { proposalJsonSql, type ProposalRow } from "./actions";
export { proposalIdOf } from "./proposal-ids";
export { cancelStepProposalStatements, RUN_END_PROPOSALS_SQL, runEndProposalStatements, type ProposalCancelReason } from "./proposal-cancellation";
export { completeHandoffStatements, handoffWorkflowReport, recordWorkflowDecision, sendWorkflowMessage, type EffectCall, type EffectResult } from "./effects";
export { ACCOUNT_EVENT_TYPES, ALERT_EVENT_TYPES, LABEL_EVENT_TYPES, WEBHOOK_EVENT_TYPES, deliveryStatement, enqueueDeliveries, sweepPendingDeliveries, type NewDelivery } from "./webhooks";
export { getEndpointRow, subscribedEndpointIdsSql, subscribedEndpointsStatement, type EndpointRow } from "./webhook-endpoints";
export { ACTION_TYPE_AUTONOMY, agreementRequirements, decidedProposals, precisionRequirements, type ActionTypeAutonomy, type DecidedProposals, type GateRequirement } from "./proposal-figures";
export { sendComplaintOutcome, sweepComplaintOutcomes } from "./affected-user-outcome";
export { readRedressSettings, type RedressSettings, type SettlementBody } from "./affected-user-settings";
export { COMPLAINT_MONTHS, NOTICE_SOURCES, NOTIFIER_MESSAGE_KINDS, complaintDeadline, noticeReceiptStatements, notifierSanctionStatements, type NotifierMessages } from "./notifier-messages";
export { ERASED_PAYLOAD, erasableDeliveriesUnsafe, eraseDeliveriesMovedMeanwhile, eraseDeliveriesStatements, sweepErasingDeliveries } from "./erasure";
export { settleMovedDeliveries, sweepDeliveryArchive } from "./delivery-archive";
export { connectorEndpointEventsStatement, connectorEndpointStatements, disableConnectorEndpointStatement } from "./connector-endpoints";
export { TDB_PRESET_NAMES, TDB_PRESETS, TDB_STATES } from "./transparency-db";
export { sweepTransparencyDb } from "./transparency-db-submit";
export { CYBERTIPLINE_PRESET_NAMES, DEFAULT_CONFIRM_OUTCOME, INCIDENT_TYPES, reportToCyberTipline, sweepCyberTipline } from "./cybertipline";
