// The dashboard and the admin pages in a real browser. One server for the file; each test works
// in an installation of its own (POST /installations) with the data it makes, so it runs alone and
// in any order. What is tried: reports and tasks sent through the API, the hours rolled up (POST
// /metrics/rollup, as the schedule would), then /dashboard shows exactly those figures with the
// queue's name, its charts have text alternatives, switching the range works, axe-core finds no
// serious or critical violation, and the review page does not load the dashboard's chunk; the runs
// list shows the workflow's name and version; the storage page reads D1 by table and sets the hot
// window; the rules page tests, publishes and deploys a rule set in shadow and the gate refuses
// autonomous.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { axeViolations, buildConsole, ownInstallation, reuseOrStartServer, serverAndBrowser, signedInPage, TEST_CONCURRENCY, until } from "./harness.mjs";

let server;
let browser;
const TAG = Math.random().toString(36).slice(2, 7);
const QUEUE = `dashboard_${TAG}`;
const WORKFLOW = `dashboard review ${TAG}`;
const ADMIN = { email: "admin@example.org", name: "Ada Admin", role: "admin" };

const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

before(
  async () => {
    buildConsole();
    ({ server, browser } = await serverAndBrowser(() => reuseOrStartServer({ label: "dashboard" })));
  },
  { timeout: 180_000 },
);

after(async () => {
  await browser?.close().catch(() => undefined);
  await server?.stop();
});

/**
 * A desk in the installation: the queue, a published review workflow (start → human_task → end)
 * with a trigger for every report, and `reports` reports sent, each waiting as a task in the queue.
 */
async function deskWithReports(api, reports) {
  const queue = await api("/queues", { body: { name: QUEUE, slaSeconds: 3600 } });
  assert.equal(queue.status, 201, JSON.stringify(queue.body));
  const workflow = await api("/workflows", { body: { name: WORKFLOW } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  const graph = {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: QUEUE, response_schema: { type: "object", properties: { outcome: { enum: ["remove", "keep"] } } }, timeout_seconds: 3600 } },
      { id: "end", kind: "end" },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "end"), edge("review", "timeout", "end")],
  };
  const version = await api(`/workflows/${workflow.body.id}/versions`, { body: { graph } });
  assert.equal(version.status, 201, JSON.stringify(version.body));
  const trigger = await api("/triggers", { body: { event: "report.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } });
  assert.equal(trigger.status, 201, JSON.stringify(trigger.body));
  for (let i = 0; i < reports; i++) {
    const report = await api("/reports", { body: { subject: { kind: "content", id: `post-${i}-${TAG}` }, category: "scams_and_fraud", source: "notice" } });
    assert.equal(report.status, 201, JSON.stringify(report.body));
  }
  await until(async () => {
    const tasks = await api(`/queues/${queue.body.id}/tasks?limit=50`);
    return { value: tasks.body.items?.length === reports, seen: tasks.body };
  }, "the tasks of the reports");
}

describe("the dashboard and admin pages", { concurrency: TEST_CONCURRENCY }, () => {
  test("after 3 reports and a rollup the dashboard shows 3 reports in and 3 waiting by the queue's name, charts with text, the 30-day range; the review page does not load its chunk; axe passes", { timeout: 90_000 }, async (t) => {
    const REPORTS = 3;
    const installation = await ownInstallation(server, `dashboard-${TAG}`);
    await deskWithReports(installation.api, REPORTS);
    const rolled = await installation.api("/metrics/rollup", { body: {} });
    assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
    const scripts = new Set();
    const page = await signedInPage(t, browser, await installation.signinUrl(ADMIN), {
      onOpen: (opened) =>
        opened.on("response", (response) => {
          const url = new URL(response.url());
          if (url.pathname.endsWith(".js")) scripts.add(url.pathname);
        }),
    });
    assert.deepEqual(
      [...scripts].filter((name) => /dashboard/u.test(name)),
      [],
      "the review page does not load the dashboard's chunk",
    );

    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Dashboard", exact: true }).click();
    await page.waitForURL(/\/dashboard$/u);
    await page.locator("section[data-ready]").waitFor();
    await page.getByRole("heading", { level: 1, name: "Dashboard" }).waitFor();
    assert.ok(
      [...scripts].some((name) => /dashboard/u.test(name)),
      "the dashboard loads as its own chunk",
    );

    const reports = Number((await page.getByTestId("stat-reports").locator("strong").innerText()).replace(/\D/gu, ""));
    assert.equal(reports, REPORTS, "reports in: the installation's own, no more");
    const row = page.getByTestId("queue-health").getByRole("row").filter({ hasText: QUEUE });
    await row.waitFor();
    assert.equal(await row.locator("td").first().innerText(), String(REPORTS), "waiting tasks in the queue, by its name");
    const charts = page.locator("figure.chart svg[role=img]");
    assert.ok((await charts.count()) >= 4, "the charts are drawn");
    assert.match(await charts.first().getAttribute("aria-label"), /Reports per hour\. Reports: \d+ in total/u);
    const runsTable = page.getByTestId("runs-by-version");
    await runsTable
      .getByRole("row")
      .filter({ hasText: `${WORKFLOW} v1` })
      .waitFor();

    const violations = await axeViolations(page);
    assert.deepEqual(violations, [], `dashboard: axe found serious or critical violations:\n${JSON.stringify(violations, null, 2)}`);

    await page.getByRole("button", { name: "Last 30 days" }).click();
    await page.waitForURL(/range=30d/u);
    await until(async () => ({ value: (await page.getByRole("button", { name: "Last 30 days" }).getAttribute("aria-pressed")) === "true" && (await page.getByText("Reports per day").count()) > 0 }), "the 30-day view", 15_000);
    assert.deepEqual(await axeViolations(page), [], "dashboard (30 days): no serious or critical axe violations");
  });

  test("the runs list shows a run's workflow by name and version", { timeout: 60_000 }, async (t) => {
    const installation = await ownInstallation(server, `dashboard-runs-${TAG}`);
    await deskWithReports(installation.api, 1);
    const page = await signedInPage(t, browser, await installation.signinUrl(ADMIN));
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Runs", exact: true }).click();
    await page.locator("section[data-ready]").waitFor();
    const row = page.getByRole("row").filter({ hasText: WORKFLOW }).first();
    await row.waitFor();
    assert.match(await row.innerText(), /\bv1\b/u);
    assert.deepEqual(await axeViolations(page), [], "runs page: no serious or critical axe violations");
  });

  test("storage: an admin reads D1 by table, the archive and the projection, sees the default hot window of 7 days and sets it to 30", { timeout: 60_000 }, async (t) => {
    const installation = await ownInstallation(server, `dashboard-storage-${TAG}`);
    const api = installation.api;
    const page = await signedInPage(t, browser, await installation.signinUrl(ADMIN));
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Storage", exact: true }).click();
    await page.waitForURL(/\/storage$/u);
    await page.getByRole("heading", { level: 1, name: "Storage" }).waitFor();
    const figures = page.getByTestId("storage-figures");
    await figures.getByText("7 days (default)").waitFor();
    const projection = page.getByTestId("storage-projection");
    assert.match(await projection.locator("svg[role=img]").getAttribute("aria-label"), /^D1 holds .+ of 10\.00 GB/u);
    const table = page.getByRole("table", { name: "D1 by table (this installation)" });
    await table.getByRole("row").filter({ hasText: "workflow_runs" }).waitFor();
    assert.deepEqual(await axeViolations(page), [], "storage page: no serious or critical axe violations");

    await page.getByLabel("Days a closed case stays in D1").fill("30");
    await page.getByRole("button", { name: "Save" }).click();
    await figures.getByText("30 days", { exact: true }).waitFor();
    const settings = await api("/storage/settings");
    assert.equal(settings.body.hotDays, 30);
  });

  test("rules: an admin creates a rule set, tests a rule against a pasted event, publishes and deploys it in shadow, sees its hit rate and shadow agreement, and the gate refuses autonomous", { timeout: 150_000 }, async (t) => {
    const installation = await ownInstallation(server, `dashboard-rules-${TAG}`);
    const api = installation.api;
    const page = await signedInPage(t, browser, await installation.signinUrl(ADMIN));
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Rules", exact: true }).click();
    await page.waitForURL(/\/rules$/u);
    await page.getByRole("heading", { level: 1, name: "Rules" }).waitFor();
    await page.getByLabel("New rule set").fill(`velocity ${TAG}`);
    await page.getByRole("button", { name: "Create", exact: true }).click();
    const editor = page.getByTestId("rule-set-editor");
    await editor.getByRole("heading", { level: 2, name: `velocity ${TAG}` }).waitFor();
    await page.getByLabel(/^Rules \(JSON/u).fill(JSON.stringify([{ id: "any-post", when: "event.type == 'post.created' && count('post.created', entity.account, '10m') >= 1", outcome: { label: { entity: "account", value: "poster" } } }]));
    await page.getByRole("button", { name: "Test", exact: true }).click();
    const results = page.getByTestId("rule-test-results");
    await results.getByRole("row").filter({ hasText: "any-post" }).waitFor();
    assert.match(await results.innerText(), /count\('post\.created', entity\.account, '10m'\) = 1/u);
    assert.deepEqual(await axeViolations(page), [], "rules page: no serious or critical axe violations");
    await page.getByRole("button", { name: "Publish a version" }).click();
    await editor.getByText("Latest version: 1.").waitFor();
    await page.getByLabel("Mode", { exact: true }).selectOption("shadow");
    await page.getByRole("button", { name: "Deploy the latest version" }).click();
    await editor.getByText("Deployed: version 1 in shadow.").waitFor();
    // Its hit rate and shadow agreement: two posts hit in shadow; a person agrees on one account and negates the other.
    const figures = editor.getByTestId("rule-figures");
    await figures.getByRole("row").filter({ hasText: "any-post" }).waitFor();
    const accounts = [`acct-a-${TAG}`, `acct-b-${TAG}`];
    const events = accounts.map((account, i) => ({ id: `ev-${i}-${TAG}`, type: "post.created", occurredAt: new Date().toISOString(), entities: { account }, data: {} }));
    const sent = await api("/events", { body: { events } });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    assert.equal(sent.body.hits, 2);
    assert.equal((await api("/labels", { body: { entity: "account", value: accounts[0], label: "poster" } })).status, 201);
    assert.equal((await api("/labels", { body: { entity: "account", value: accounts[1], label: "poster", negate: true } })).status, 201);
    await editor.getByRole("button", { name: "Refresh the figures" }).click();
    const row = figures.getByRole("row").filter({ hasText: "any-post" });
    await row.getByText("1 of 2: 50%", { exact: false }).waitFor();
    assert.deepEqual((await row.getByRole("cell").allInnerTexts()).slice(0, 5), ["any-post", "2", "2", "2", "2"]);
    await editor
      .getByTestId("rule-gate")
      .getByText(/Autonomous needs: 100 comparisons/u)
      .waitFor();
    // Deploying it autonomous is refused by the gate, and the console says why.
    await page.getByLabel("Mode", { exact: true }).selectOption("autonomous");
    await page.getByRole("button", { name: "Deploy the latest version" }).click();
    await editor.getByText(/does not meet its gate for autonomous/u).waitFor();
    assert.deepEqual(await axeViolations(page), [], "rules page with its figures: no serious or critical axe violations");
  });
});
