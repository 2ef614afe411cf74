// Enforcement: webhooks, actions and approvals, messages, decisions, handoffs.
export { consumeDeliveries } from "./consumer";
export { completeWorkflowAction, prepareWorkflowAction } from "./actions";
export { handoffWorkflowReport, recordWorkflowDecision, sendWorkflowMessage, type EffectResult } from "./effects";
export { enqueueDeliveries } from "./webhooks";
