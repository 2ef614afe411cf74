// Automation: components (sandboxed and built-in), AI proposals, shadow evaluation, backtests.
export { ComponentEgress, ComponentExecutionError, executeComponentVersion } from "./components";
export { BUILTIN_COMPONENTS, executeBuiltin } from "./builtins";
export { AI_PROVIDER_KINDS, executeAgentProposal } from "./ai";
export { executeAiProposal, executeEnrichment } from "./nodes";
export { consumeBacktests } from "./evaluation";
