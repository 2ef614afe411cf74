// /api/v1 components, AI providers, shadow reports and backtests.
import { Hono } from "hono";
import { requireScope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { parseBody } from "../http/validate";
import { createProvider, getProvider, listProviders } from "./ai";
import { BUILTIN_COMPONENTS } from "./builtins";
import { createComponent, listComponents, publishComponentVersion } from "./components";
import { getBacktest, shadowReport, startBacktest } from "./evaluation";

export const automationRoutes = new Hono<AppEnv>()
  .post("/components", requireScope("admin"), async (c) => c.json(await createComponent(c.env, c.get("actor"), await parseBody(c, schemas.CreateComponent)), 201))
  .get("/components", requireScope("admin", "review"), async (c) => c.json({ builtIns: BUILTIN_COMPONENTS, items: await listComponents(c.env, c.get("actor")) }))
  .post("/components/:id/versions", requireScope("admin"), async (c) =>
    c.json(await publishComponentVersion(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.PublishComponentVersion)), 201))
  .post("/ai-providers", requireScope("admin"), async (c) => c.json(await createProvider(c.env, c.get("actor"), await parseBody(c, schemas.CreateAiProvider)), 201))
  .get("/ai-providers", requireScope("admin"), async (c) => c.json({ items: await listProviders(c.env, c.get("actor")) }))
  .get("/ai-providers/:id", requireScope("admin"), async (c) => c.json(await getProvider(c.env, c.get("actor"), c.req.param("id"))))
  .get("/workflow-versions/:id/shadow-report", requireScope("admin", "review"), async (c) => c.json(await shadowReport(c.env, c.get("actor"), c.req.param("id"))))
  .post("/workflow-versions/:id/backtests", requireScope("admin"), async (c) =>
    c.json(await startBacktest(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.StartBacktest)), 202))
  .get("/backtests/:id", requireScope("admin", "review"), async (c) => c.json(await getBacktest(c.env, c.get("actor"), c.req.param("id"))));
