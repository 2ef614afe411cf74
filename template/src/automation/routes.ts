// /api/v1 components, AI providers, policies, shadow reports and backtests.
import { routes, withStatus } from "../http/route";
import { createProvider, getProvider, listProviders, updateProvider } from "./ai";
import { BUILTIN_COMPONENTS } from "./builtins";
import { createComponent, listComponents, publishComponentVersion } from "./components";
import { cancelBacktest, getBacktest, listBacktestResults, startBacktest } from "./evaluation";
import { backtestReportCsv, CSV_ROW_KINDS, shadowReportCsv } from "./shadow-csv";
import { shadowReport } from "./shadow-report";
import { addPolicyVersion, createPolicy, getPolicy, getPolicyVersion, listPolicies, retirePolicy } from "./policies";

export const automationRoutes = routes()
  .op({ method: "post", path: "/components", summary: "Create a component", auth: ["admin"], body: "CreateComponent", ok: 201, errors: [409] }, async (c, { body }) => createComponent(c.env, c.get("actor"), body))
  .op({ method: "get", path: "/components", summary: "List components with their versions, and the built-in components", auth: ["admin", "review"], ok: 200 }, async (c) => ({
    builtIns: BUILTIN_COMPONENTS,
    items: await listComponents(c.env, c.get("actor")),
  }))
  .op(
    {
      method: "post",
      path: "/components/:id/versions",
      summary: "Publish an immutable component version: source, allowed hosts, subrequest budget; returns its digest",
      auth: ["admin"],
      body: "PublishComponentVersion",
      ok: 201,
      errors: [404, 413],
    },
    async (c, { body }) => publishComponentVersion(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    { method: "post", path: "/ai-providers", summary: "Register an AI provider (Workers AI or OpenAI-compatible); the key is sealed and never returned", auth: ["admin"], body: "CreateAiProvider", ok: 201, errors: [422] },
    async (c, { body }) => createProvider(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/ai-providers", summary: "List AI providers", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listProviders(c.env, c.get("actor")) }))
  .op({ method: "get", path: "/ai-providers/:id", summary: "Read an AI provider", auth: ["admin"], ok: 200, errors: [404] }, async (c) => getProvider(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "patch", path: "/ai-providers/:id", summary: "Allow or forbid an AI provider to receive reported content (audited)", auth: ["admin"], body: "UpdateAiProvider", ok: 200, errors: [404] }, async (c, { body }) =>
    updateProvider(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "post", path: "/policies", summary: "Create a policy (with its version 1 when text is given)", auth: ["admin"], body: "CreatePolicy", ok: 201, errors: [409, 413, 422] }, async (c, { body }) =>
    createPolicy(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/policies", summary: "List policies with their newest version", auth: ["admin", "review"], ok: 200 }, async (c) => ({ items: await listPolicies(c.env, c.get("actor")) }))
  .op({ method: "get", path: "/policies/:id", summary: "Read a policy: its versions and its newest text", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getPolicy(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/policies/:id/versions",
      summary: "Publish an immutable policy version; returns its number and digest (the newest version again, with 200, when the text is unchanged)",
      auth: ["admin"],
      body: "PublishPolicyVersion",
      ok: 201,
      errors: [404, 409, 413, 422],
    },
    async (c, { body }) => {
      const { version, created } = await addPolicyVersion(c.env, c.get("actor"), c.req.param("id"), body);
      return withStatus(version, created ? 201 : 200);
    },
  )
  .op({ method: "post", path: "/policies/:id/retire", summary: "Retire a policy: no new versions, references or runs under it", auth: ["admin"], ok: 200, errors: [404] }, async (c) => retirePolicy(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "get", path: "/policy-versions/:id", summary: "Read a policy version with its text and digest", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getPolicyVersion(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "get",
      path: "/workflow-versions/:id/shadow-report",
      summary: "Shadow runs of this version against people's decisions: agreement and Cohen's kappa, per-outcome precision, recall and F1 with 95% Wilson intervals, confusion matrix, slices by category, source and week",
      auth: ["admin", "review"],
      ok: 200,
      errors: [404],
    },
    async (c) => shadowReport(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "get",
      path: "/workflow-versions/:id/shadow-report.csv",
      summary: "The shadow report as CSV: one row per figure (section, slice, outcome, metric, value, low, high, successes, trials), or with rows=reports one row per compared report (ids, no content)",
      auth: ["admin", "review"],
      query: { enums: { rows: CSV_ROW_KINDS } },
      ok: 200,
      errors: [404],
      produces: "text/csv",
    },
    async (c, { query }) => shadowReportCsv(c.env, c.get("actor"), c.req.param("id"), query.rows ?? "figures"),
  )
  .op(
    {
      method: "post",
      path: "/workflow-versions/:id/backtests",
      summary: "Evaluate this version in shadow over past reports (ids or time range; engine fast by default, or durable)",
      auth: ["admin"],
      body: "StartBacktest",
      ok: 202,
      errors: [404, 409, 422],
    },
    async (c, { body }) => startBacktest(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "get", path: "/backtests/:id", summary: "A backtest's progress and, when finished, its shadow report", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getBacktest(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "post", path: "/backtests/:id/cancel", summary: "Stop a running backtest (what was evaluated is kept)", auth: ["admin"], ok: 200, errors: [404, 409] }, async (c) => cancelBacktest(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "get",
      path: "/backtests/:id/results",
      summary: "A fast backtest's result per report: state, proposed outcome, where it stopped (ids only, never content)",
      auth: ["admin", "review"],
      ok: 200,
      errors: [404, 409, 422],
      query: { limit: { default: 100, max: 1000 }, cursor: /^[A-Za-z0-9._:-]{1,200}$/u, enums: { state: ["completed", "needs_review", "failed"] } },
    },
    async (c, { query }) => listBacktestResults(c.env, c.get("actor"), c.req.param("id"), { limit: query.limit, ...(query.cursor ? { cursor: query.cursor } : {}), ...(query.state ? { state: query.state } : {}) }),
  )
  .op(
    {
      method: "get",
      path: "/backtests/:id/report.csv",
      summary: "A backtest's shadow report so far as CSV (as the version's shadow-report.csv; rows=reports for one row per compared report)",
      auth: ["admin", "review"],
      query: { enums: { rows: CSV_ROW_KINDS } },
      ok: 200,
      errors: [404],
      produces: "text/csv",
    },
    async (c, { query }) => backtestReportCsv(c.env, c.get("actor"), c.req.param("id"), query.rows ?? "figures"),
  );
