// /api/v1 rule sets (versions, deployments), product events, labels.
import { routes, withStatus } from "../http/route";
import { getLabelerSettings, putLabelerSettings, queryLabels } from "./atproto";
import { backtestOnReports, backtestRuleSetVersion } from "./backtest";
import { intakeEvents, testRules } from "./events";
import { listLabels, putLabelByPerson } from "./labels";
import { createRuleSet, deployRuleSet, getRuleSet, getRuleSetGate, getRuleSetVersion, putRuleSetGate, listRuleHits, listRuleSets, publishRuleSetVersion, putEventSettings, type Rule } from "./rule-sets";
import { AppError } from "../errors";

export const detectionRoutes = routes()
  .op({ method: "post", path: "/rule-sets", summary: "Create a rule set (rules over the product's event stream)", auth: ["admin"], body: "CreateRuleSet", ok: 201, errors: [409] }, async (c, { body }) =>
    createRuleSet(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/rule-sets", summary: "List rule sets with their deployments", auth: ["admin", "review"], ok: 200 }, async (c) => listRuleSets(c.env, c.get("actor")))
  .op({ method: "get", path: "/rule-sets/:id", summary: "Read a rule set, its deployment and its versions", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getRuleSet(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/rule-sets/:id/versions",
      summary: "Publish an immutable version of a rule set: every rule's when compiled, its outcome checked",
      auth: ["admin"],
      body: "PublishRuleSetVersion",
      ok: 201,
      errors: [404, 409, 422],
    },
    async (c, { body }) => publishRuleSetVersion(c.env, c.get("actor"), c.req.param("id"), body as { rules: Rule[]; expressionSemantics?: "cel" | "json-numbers-1" }),
  )
  .op(
    {
      method: "get",
      path: "/rule-sets/:id/hits",
      summary: "A rule set's hits, newest first, with hit counts per version, rule, mode and whether applied since a time (default 24 h): its hit rate and shadow record",
      auth: ["admin", "review"],
      query: { limit: { default: 50, max: 500 }, strings: ["since"] },
      ok: 200,
      errors: [404],
    },
    async (c, { query }) => listRuleHits(c.env, c.get("actor"), c.req.param("id"), { limit: query.limit, ...(query.since ? { since: query.since } : {}) }),
  )
  .op(
    {
      method: "get",
      path: "/rule-sets/:id/gate",
      summary: "A rule set's promotion gate and, for a version (default: the deployed one), per rule its hits, hit rate and shadow agreement with people's later labels, and whether it may be deployed autonomous",
      auth: ["admin", "review"],
      query: { strings: ["versionId"] },
      ok: 200,
      errors: [404],
    },
    async (c, { query }) => getRuleSetGate(c.env, c.get("actor"), c.req.param("id"), query.versionId),
  )
  .op(
    { method: "put", path: "/rule-sets/:id/gate", summary: "Set a rule set's promotion gate for autonomous (comparisons, agreement's lower bound); audited", auth: ["admin"], body: "RuleSetGate", ok: 200, errors: [404] },
    async (c, { body }) => putRuleSetGate(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "get", path: "/rule-set-versions/:id", summary: "Read a published rule set version", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getRuleSetVersion(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "put",
      path: "/rule-sets/:id/deployment",
      summary: "Deploy a version of the rule set in an authority mode (off, shadow, assisted, autonomous); autonomous passes the rule set's gate over the version's shadow agreement (409 promotion.gate_not_met)",
      auth: ["admin"],
      body: "DeployRuleSet",
      ok: 200,
      errors: [404, 409],
    },
    async (c, { body }) => deployRuleSet(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    {
      method: "post",
      path: "/events",
      summary: "Take in up to 1,000 product events: counted, evaluated against the deployed rule sets, not stored (idempotent per event id)",
      auth: ["events:write"],
      body: "IngestEvents",
      ok: 202,
      errors: [413, 503],
    },
    async (c, { body }) => withStatus(await intakeEvents(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body.events), 202),
  )
  .op(
    {
      method: "post",
      path: "/rule-set-versions/:id/backtests",
      summary:
        "Replay a rule set version over a time range (up to 2,000 events), as in shadow: hits per rule, nothing applied. source samples (default): the sampled events (their read is audited); reports: the stored reports, each a report.created event",
      auth: ["admin"],
      body: "BacktestRuleSetVersion",
      ok: 200,
      errors: [404, 409],
    },
    async (c, { body }) => {
      const { source, ...range } = body;
      return source === "reports" ? backtestOnReports(c.env, c.get("actor"), c.req.param("id"), range) : backtestRuleSetVersion(c.env, c.get("actor"), c.req.param("id"), range);
    },
  )
  .op(
    {
      method: "post",
      path: "/rule-sets/test",
      routerPath: "/rule-sets/:segment",
      summary: "Test rules (published or not) against pasted events with no side effect: the hits and the counter values each event reads",
      auth: ["admin"],
      body: "TestRules",
      ok: 200,
      errors: [422],
    },
    async (c, { body }) => testRules(c.env, c.get("actor"), body as { rules: Rule[]; events: unknown[]; expressionSemantics?: "cel" | "json-numbers-1" }),
  )
  .op({ method: "put", path: "/event-settings", summary: "Set the share of events kept as a sealed sample for backtests (0: none, the default)", auth: ["admin"], body: "PutEventSettings", ok: 200 }, async (c, { body }) =>
    putEventSettings(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/labels", summary: "The labels an entity carries now, with their source and expiry", auth: ["admin", "review"], query: { strings: ["entity", "value"] }, ok: 200, errors: [400] }, async (c, { query }) => {
    if (!query.entity || !query.value) throw new AppError("label.entity_invalid", "Name the entity: ?entity=<kind>&value=<id>, e.g. ?entity=account&value=a1.", { status: 400 });
    return listLabels(c.env, c.get("actor"), { entity: query.entity, value: query.value });
  })
  .op(
    {
      method: "get",
      path: "/xrpc/com.atproto.label.queryLabels",
      summary: "The ATProto label view (com.atproto.label.queryLabels): the installation's public labels whose subject matches a uriPatterns (repeat the parameter; a full URI or a prefix ending in *), signed when the labeler has a key",
      auth: ["admin", "review", "read"],
      query: { limit: { default: 50, max: 250 }, cursor: /^\d{1,18}$/u, strings: ["uriPatterns", "sources"] },
      ok: 200,
      errors: [400, 409],
    },
    async (c, { query }) =>
      queryLabels(c.env, c.get("actor"), {
        uriPatterns: (c.req.queries("uriPatterns") ?? []).filter((pattern) => pattern !== ""),
        sources: (c.req.queries("sources") ?? []).filter((source) => source !== ""),
        limit: query.limit,
        cursor: query.cursor,
      }),
  )
  .op({ method: "get", path: "/labeler", summary: "The installation as an ATProto labeler: its DID, which labels are public, its signing key's did:key", auth: ["admin"], ok: 200 }, async (c) => getLabelerSettings(c.env, c.get("actor")))
  .op(
    {
      method: "put",
      path: "/labeler",
      summary: "Make the installation an ATProto labeler: its DID, the entity kinds (never personal ones) and, optionally, label values that are public, and its signing key (generate, keep, remove)",
      auth: ["admin"],
      body: "PutLabeler",
      ok: 200,
      errors: [422],
    },
    async (c, { body }) => putLabelerSettings(c.env, c.get("actor"), body),
  )
  .op({ method: "post", path: "/labels", summary: "Label an entity, or negate a label (a person's label stands against rules until it expires)", auth: ["admin", "review"], body: "PutLabel", ok: 201, errors: [422] }, async (c, { body }) =>
    putLabelByPerson(c.env, c.get("actor"), body),
  );
