// Workflows domain: graphs, expressions, artifacts, the sandbox runtime, runs.
// WorkflowRuntimeCapability is not exported here: it calls enforcement and automation, which
// import this index, so src/index.ts takes it from runtime-capability.ts directly.
export { DynamicWorkflow, loadCompiledWorkflow, SandboxWorkflowBinding, startDynamicWorkflow } from "./loader";
export { parseWorkflowGraph, validateWorkflowGraph, GraphValidationError } from "./validation";
export { compileWorkflowArtifact } from "./artifacts";
export { contentReadStatement, loadWorkflowExecutionContext, nodeReadsContent } from "./execution-context";
export { analyseContent } from "./content-access";
export { sealLegacyStepOutputs } from "./runtime-records";
export { eraseArchivedSealedOutputsStatement, eraseSealedOutputsStatements, sealedOutputsOfUnsafe } from "./erasure";
export { runOutputJson } from "./run-input";
export type { NodeCall } from "./kinds/executors";
export { categoryLiteralProblems } from "./category-literals";
export { compileExpression, evaluateInputMapping, evaluateWorkflowExpression, expressionDialect, type ExpressionContext, type ExpressionDialect } from "./expressions";
export { DEFAULT_EXPRESSION_SEMANTICS, EXPRESSION_SEMANTICS, type ExpressionSemantics, semanticsOf } from "./expression-semantics";
export { redispatchPendingRuns } from "./run-dispatch";
export { modeUnderTriggers } from "./run-authority";
export { createRun, signalRunEvent, versionJsonSql, type CreateRunInput, type ReadVersion } from "./runs";
export { sweepExpiredWaits, sweepStalledRuns } from "./sweeps";
export { isRunArchiveKeyOf, queueRunArchive, runArchiveKey, runArchiveTextHolds, sweepRunArchive } from "./run-archive";
export { signalRun } from "./instances";
export { getVersionGraph } from "./runtime-authorize";
export { firstEventOfWaitUnsafe, runEventStatement, waitOfStepJsonSql, waitOfStepUnsafe } from "./runs-queries";
export { getVersionRow } from "./versions-queries";
export { createWorkflow, publishVersion } from "./versions";
export type { AuthorizedRun } from "./runtime-authorize";
export type { ActionProgress, WaitResult } from "./runtime-protocol";
export {
  AUTHORITY_MODES,
  RUN_STATES,
  TERMINAL_RUN_STATES,
  type JsonObject,
  type JsonValue,
  type WorkflowAuthorityMode,
  type WorkflowNodeV1,
} from "./types";
export { getStorageSettings } from "./storage";
export { CONTEXT_LIST_LIMIT, CONTEXT_STRING_LIMIT, contextOverBounds } from "./expression-cost";
export { outputRowsSql, STEP_OUTPUT, STEP_OUTPUT_COLUMN_NAMES, stepOutputSql, stepRowColumns, withoutOutputColumns } from "./step-output";
