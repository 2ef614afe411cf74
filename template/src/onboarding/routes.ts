// /api/v1/onboarding: the first-run checklist of the caller's installation.
import { routes } from "../http/route";
import { onboardingChecklist } from "./checklist";

export const onboardingRoutes = routes().op(
  { method: "get", path: "/onboarding", summary: "The first-run checklist: connect a product, publish a workflow, send a report, review it, see the action arrive (each from real state)", auth: ["admin"], ok: 200 },
  async (c) => onboardingChecklist(c.env.DB, c.get("actor").installationId),
);
