// Automation: components (sandboxed and built-in), AI proposals, shadow evaluation, backtests.
export { ComponentEgress, ComponentExecutionError, executeComponentVersion } from "./components";
export { BUILTIN_COMPONENTS, executeBuiltin } from "./builtins";
export { executeAgentProposal } from "./ai";
export { consumeBacktests } from "./evaluation";
