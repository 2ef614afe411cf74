// Workflows domain: graphs, expressions, artifacts, the sandbox runtime, runs.
export { DynamicWorkflow, loadCompiledWorkflow, startDynamicWorkflow } from "./loader";
export { WorkflowRuntimeCapability } from "./runtime-capability";
export { parseWorkflowGraph, validateWorkflowGraph, GraphValidationError } from "./validation";
export { compileWorkflowArtifact } from "./artifacts";
