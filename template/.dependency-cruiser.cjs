// Import boundaries of src/ (run by `npm run lint:boundaries`, part of `npm test`).
//
// A domain is a folder directly under src/ other than lib/ and http/ (audit, auth, automation,
// cases, connectors, console, enforcement, installations, workflows; demo, the peers of `npm start`). Rules:
//   - across domains, import only the other domain's index.ts;
//   - lib/ and errors.ts are shared: importable from anywhere, and they import no domain or http/;
//   - http/ (and Hono) only from route files (*/routes.ts, workflows/runs-routes.ts), http/ itself
//     and src/index.ts; http/ imports domain indexes, and http/app.ts and http/api.ts the route files;
//   - no import cycles (runtime imports; `import type` is erased and cannot cycle).
//
// KNOWN_VIOLATIONS: tolerated exceptions, each with the fix that removes it. There are none; keep
// it that way (the mechanism stays for a change that must land in two steps).
const KNOWN_VIOLATIONS = [];

const DOMAIN = "src/(?!lib/|http/)[^/]+/";
const ROUTE_FILE = "^src/[^/]+/(routes|[a-z-]+-routes)\\.ts$";
const allowlisted = (from) => KNOWN_VIOLATIONS.filter(([f]) => f === from).map(([, to]) => to);
const fromPaths = [...new Set(KNOWN_VIOLATIONS.map(([from]) => from))];

/** Emits the rule once for files without known violations, and once per listed file with its exceptions. */
function withAllowlist(rule) {
  return [
    { ...rule, from: { ...rule.from, pathNot: [...(rule.from.pathNot ?? []), ...fromPaths] } },
    ...fromPaths.map((from) => ({
      ...rule,
      from: { ...rule.from, path: rule.from.path.map((path) => `(?=${from})${path.replace(/^\^/u, "^")}`) },
      to: { ...rule.to, pathNot: [...(rule.to.pathNot ?? []), ...allowlisted(from)] },
    })),
  ];
}

module.exports = {
  forbidden: [
    ...withAllowlist({
      name: "cross-domain-via-index",
      comment:
        "Another domain is imported through its index.ts only; and the host walker (workflows/walker.ts), which runs the node executors (they call enforcement and automation), so it cannot be in the workflows index without a cycle.",
      severity: "error",
      from: { path: [`^src/((?!lib/|http/)[^/]+)/`], pathNot: ["^src/connectors/mastodon-intake\\.ts$", "^src/detection/outcomes\\.ts$", "^src/installations/backup-restore\\.ts$"] },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/$1/", "^src/[^/]+/index\\.ts$", "^src/workflows/walker\\.ts$"] },
    }),
    {
      name: "connector-intake-via-index",
      comment:
        "A connector's intake (connectors/mastodon-intake.ts) takes reports in through cases/reports/reports.ts, which fires triggers (they start runs) and so cannot be in the cases index without a cycle, and ends the runs of a report Mastodon resolved through workflows/run-end.ts, which reaches enforcement and so cannot be in the workflows index; otherwise indexes only.",
      severity: "error",
      from: { path: "^src/connectors/mastodon-intake\\.ts$" },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/connectors/", "^src/[^/]+/index\\.ts$", "^src/cases/reports/reports\\.ts$", "^src/workflows/run-end\\.ts$"] },
    },
    {
      name: "restore-erasures-via-index",
      comment:
        "A restore (installations/backup-restore.ts) applies again the erasures made since the backup through cases/retention/erasure-reapply.ts, which erases as retention does (it reaches enforcement and workflows, which import the cases index) and so cannot be in the cases index without a cycle; otherwise indexes only.",
      severity: "error",
      from: { path: "^src/installations/backup-restore\\.ts$" },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/installations/", "^src/[^/]+/index\\.ts$", "^src/cases/retention/erasure-reapply\\.ts$"] },
    },
    {
      name: "detection-outcomes-via-index",
      comment:
        "A rule's report outcome (detection/outcomes.ts) opens reports through cases/reports/reports.ts, which fires triggers (they start runs) and so cannot be in the cases index without a cycle; otherwise indexes only.",
      severity: "error",
      from: { path: "^src/detection/outcomes\\.ts$" },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/detection/", "^src/[^/]+/index\\.ts$", "^src/cases/reports/reports\\.ts$"] },
    },
    ...withAllowlist({
      name: "http-and-entry-via-index",
      comment: "http/ and src/index.ts import domain indexes (http/app.ts also the route files).",
      severity: "error",
      from: { path: ["^src/(http/|index\\.ts$)"], pathNot: ["^src/http/(app|api)\\.ts$", "^src/index\\.ts$"] },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/[^/]+/index\\.ts$"] },
    }),
    {
      name: "app-imports-indexes-and-routes",
      comment: "http/app.ts and http/api.ts (the list of routers) import domain indexes and route files.",
      severity: "error",
      from: { path: "^src/http/(app|api)\\.ts$" },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/[^/]+/index\\.ts$", ROUTE_FILE] },
    },
    {
      name: "entry-imports-indexes",
      comment:
        "The Worker entry imports domain indexes, the runtime capability class, the bulk run operations consumer and the backtest consumer (all at the top of the graph: they call enforcement).",
      severity: "error",
      from: { path: "^src/index\\.ts$" },
      to: { path: `^${DOMAIN}`, pathNot: ["^src/[^/]+/index\\.ts$", "^src/workflows/runtime-capability\\.ts$", "^src/workflows/run-operations\\.ts$", "^src/automation/backtest-queue\\.ts$"] },
    },
    ...withAllowlist({
      name: "http-only-from-routes",
      comment: "Services import nothing from http/: only route files, http/ itself and src/index.ts do.",
      severity: "error",
      from: { path: ["^src/"], pathNot: ["^src/http/", "^src/index\\.ts$", ROUTE_FILE] },
      to: { path: "^src/http/" },
    }),
    {
      name: "hono-only-in-http-layer",
      comment: "Hono is the HTTP layer: only route files and http/ import it.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/http/", ROUTE_FILE] },
      to: { path: "(^|/)node_modules/hono/" },
    },
    {
      name: "shared-is-shared",
      comment: "lib/ and errors.ts import no domain and no http/.",
      severity: "error",
      from: { path: "^src/(lib/|errors\\.ts$)" },
      to: { path: "^src/", pathNot: ["^src/lib/", "^src/errors\\.ts$"] },
    },
    {
      name: "demo-is-a-peer",
      comment: "src/demo plays the peers of `npm start` (a model, a product): it imports no domain, only lib/, errors.ts and http/types.",
      severity: "error",
      from: { path: "^src/demo/" },
      to: { path: "^src/", pathNot: ["^src/demo/", "^src/lib/", "^src/errors\\.ts$", "^src/http/types\\.ts$"] },
    },
    {
      name: "demo-mounted-by-app-only",
      comment: "Only http/app.ts mounts the demo routes; no domain depends on the demo peers.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/demo/", "^src/http/app\\.ts$"] },
      to: { path: "^src/demo/" },
    },
    {
      name: "no-cycles",
      comment: "No import cycles (runtime imports; see options below).",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true, viaOnly: { dependencyTypesNot: ["type-only"] } },
    },
  ],
  options: {
    // Type-only imports count for the boundary rules; the cycle rule ignores them (they are erased).
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: ["^src/workflows/kernel/kernel-source\\.generated\\.ts$", "\\.d\\.ts$"] },
    enhancedResolveOptions: { extensions: [".ts", ".js", ".json"] },
  },
};
