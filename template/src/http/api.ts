// Every operation of /api/v1, once: the routers app.ts mounts, openapi.ts describes, and whose
// contract the console's client is typed from (`import type { ApiContract }`, types only).
import { accountRoutes } from "../accounts/routes";
import { auditRoutes } from "../audit/routes";
import { automationRoutes } from "../automation/routes";
import { preservationRoutes } from "../cases/preservation-routes";
import { caseRoutes } from "../cases/routes";
import { connectorRoutes } from "../connectors/routes";
import { detectionRoutes } from "../detection/routes";
import { sessionRoutes } from "../console/routes";
import { cybertiplineRoutes } from "../enforcement/cybertipline-routes";
import { enforcementRoutes } from "../enforcement/routes";
import { transparencyDbRoutes } from "../enforcement/transparency-db-routes";
import { installationRoutes } from "../installations/routes";
import { operationsRoutes } from "../operations/routes";
import { exchangeRoutes } from "../media/exchange-routes";
import { mediaRoutes } from "../media/routes";
import { metricRoutes } from "../metrics/routes";
import { runRoutes } from "../workflows/runs-routes";
import { storageRoutes } from "../workflows/storage-routes";
import { workflowRoutes } from "../workflows/routes";
import { workflowTemplateRoutes } from "../workflows/template-routes";
import { onboardingRoutes } from "../onboarding/routes";
import type { ContractOf } from "./route";

export const apiRoutes = [
  installationRoutes,
  workflowRoutes,
  runRoutes,
  storageRoutes,
  caseRoutes,
  enforcementRoutes,
  transparencyDbRoutes,
  auditRoutes,
  automationRoutes,
  sessionRoutes,
  operationsRoutes,
  metricRoutes,
  workflowTemplateRoutes,
  onboardingRoutes,
  connectorRoutes,
  accountRoutes,
  detectionRoutes,
  mediaRoutes,
  exchangeRoutes,
  preservationRoutes,
  cybertiplineRoutes,
] as const;

type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/** `"<method> <path>"` → `{ body, query, response }` for every operation. */
export type ApiContract = Intersection<ContractOf<(typeof apiRoutes)[number]>>;
