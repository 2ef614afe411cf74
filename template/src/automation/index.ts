// Automation: components (sandboxed and built-in), AI providers, policies and proposals, shadow
// evaluation, backtests.
export { ComponentEgress, ComponentExecutionError, executeComponentVersion } from "./components";
export { BUILTIN_COMPONENTS, executeBuiltin } from "./builtins";
export { AI_OUTPUT_FORMATS, AI_PROVIDER_KINDS } from "./ai";
export { executeAgentProposal } from "./ai-proposal";
export { executeAiProposal, executeEnrichment } from "./nodes";
export { sweepLostBacktestChunks } from "./backtest-chunks";
export { shadowReport } from "./shadow-report";
export { cohenKappa, confusionOf, wilson, type Kappa, type Proportion } from "./statistics";
