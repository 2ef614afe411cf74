// The first hour in a real browser. One server for the file; each test works in a fresh
// installation of its own (POST /installations) and sets up through the API what the steps before
// it would have left, so it runs alone and in any order. What is tried: the admin's first page
// carries the first-run checklist, every step "to do"; the template gallery draws each example's
// graph; "Use this" on a template that names a missing action type says what to create and where;
// once it exists, it publishes and opens the editor. Each checklist step flips from real state: a
// product endpoint (a local HTTP server standing in for the product), the published workflow, a
// test report sent from the checklist, its review task answered, the approved action delivered. An
// appeal becomes a task whose answer records its outcome. axe-core finds no serious or critical
// issue on the new pages. The screenshots of docs/tutorial.md are taken here on every run; `npm run screenshots` (TUTORIAL_SCREENSHOTS=1)
// writes them into docs/images/tutorial/, other runs into a temporary folder, so a test run leaves the
// checkout as it was (the pictures hold random ids and would change on every run).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { axeViolations, buildConsole, ownInstallation, reuseOrStartServer, serverAndBrowser, signedInPage, templateDir, TEST_CONCURRENCY, until } from "./harness.mjs";

// docs/ beside template/ in the Safest Tools repository; inside a project made with npm create, its own docs/.
const DOCS_SHOTS = path.join([path.join(templateDir, "docs"), path.join(templateDir, "..", "docs")].find((dir) => existsSync(dir)) ?? path.join(templateDir, "docs"), "images", "tutorial");
const SHOTS = process.env.TUTORIAL_SCREENSHOTS === "1" ? DOCS_SHOTS : mkdtempSync(path.join(tmpdir(), "safest-tutorial-shots-"));
const TAG = Math.random().toString(36).slice(2, 7);
const QUEUE = "general-review";

let server;
let browser;
const ADMIN = { email: `tutorial-${TAG}@example.org`, name: "Tutorial admin", role: "admin" };
const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

async function shot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
}

async function expectNoSeriousViolations(page, what) {
  const violations = await axeViolations(page);
  assert.deepEqual(violations, [], `${what}: ${JSON.stringify(violations, null, 2)}`);
}

async function stepDone(page, id) {
  return (await page.locator(`[data-step="${id}"]`).getAttribute("data-done")) === "true";
}

/**
 * A fresh installation of the test's own (the demo installation npm start makes must not tick any
 * step, nor another test's), its admin signed in to the console in a browser context of its own.
 */
async function freshDesk(t, name) {
  const installation = await ownInstallation(server, `${name} ${TAG}`);
  const page = await signedInPage(t, browser, await installation.signinUrl(ADMIN), { viewport: { width: 1280, height: 860 } });
  return { installation, admin: installation.api, page };
}

/** A stand-in for the product on loopback: answers 2xx to every delivery and keeps what it received. Closed when the test ends. */
async function standInProduct(t) {
  const received = [];
  const product = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      let type = null;
      try {
        type = JSON.parse(body).type ?? null;
      } catch {
        // Not JSON: counted, without a type.
      }
      received.push({ path: request.url, type });
      response.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise((resolve) => product.listen(0, "127.0.0.1", resolve));
  t.after(
    () =>
      new Promise((resolve) => {
        product.closeAllConnections?.();
        product.close(resolve);
      }),
  );
  return { url: `http://127.0.0.1:${product.address().port}/actions`, received };
}

/** Step 1 of the checklist, through the API: a webhook endpoint at the product and the remove_content action type it carries. */
async function connectProduct(admin, product) {
  const endpoint = await admin("/webhook-endpoints", { body: { url: product.url, retryBaseSeconds: 1, maxAttempts: 5 } });
  assert.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
  const actionType = await admin("/action-types", { body: { key: "remove_content", name: "Remove the post", endpointId: endpoint.body.id, reversible: true } });
  assert.equal(actionType.status, 201, JSON.stringify(actionType.body));
}

before(
  async () => {
    buildConsole();
    ({ server, browser } = await serverAndBrowser(() => reuseOrStartServer({ label: "gallery" })));
  },
  { timeout: 180_000 },
);

after(async () => {
  await browser?.close().catch(() => undefined);
  await server?.stop();
});

describe("the first hour", { concurrency: TEST_CONCURRENCY }, () => {
  test("a fresh installation's admin sees the checklist with every step to do; it passes axe", { timeout: 90_000 }, async (t) => {
    const { page } = await freshDesk(t, "Tutorial desk");
    const panel = page.getByTestId("onboarding-panel");
    await panel.waitFor({ timeout: 15_000 });
    await panel.getByText("Getting started: 0 of 5 done").waitFor();
    for (const id of ["connect_product", "publish_workflow", "send_report", "review_report", "see_action"]) assert.equal(await stepDone(page, id), false, `${id} is to do`);
    await expectNoSeriousViolations(page, "review home with the checklist");
    await shot(page, "01-getting-started");
  });

  test("the gallery draws every template; Use this on spam triage without remove_content names it and publishes nothing; once it exists, Use this publishes and opens the editor", { timeout: 120_000 }, async (t) => {
    const { admin, page } = await freshDesk(t, "Gallery desk");
    const product = await standInProduct(t);
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Templates", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Workflow templates" }).waitFor();
    const templates = await admin("/workflow-templates");
    assert.equal(templates.status, 200, JSON.stringify(templates.body));
    const cards = page.getByTestId("template");
    await until(async () => ({ value: (await cards.count()) === templates.body.items.length, seen: await cards.count() }), "a card per template");
    assert.ok(templates.body.items.length >= 4);
    for (const template of templates.body.items) {
      const card = page.locator(`[data-template="${template.id}"]`);
      await card.getByRole("heading", { name: template.title }).waitFor();
      await card.getByText(template.whenToUse).waitFor();
      // The picture has a box per node and a text alternative naming them.
      const picture = card.getByTestId("graph-picture");
      assert.equal(await picture.locator("rect").count(), template.graph.nodes.length, `${template.id}: a box per node`);
      assert.match(await picture.getAttribute("aria-label"), new RegExp(`${template.graph.nodes.length} nodes`, "u"));
    }
    await expectNoSeriousViolations(page, "template gallery");
    await shot(page, "02-templates");

    // Spam triage names an action type this installation does not have yet.
    const spam = page.locator('[data-template="spam-triage"]');
    await spam.getByText("missing", { exact: true }).waitFor();
    await spam.getByTestId("use-template").click();
    const missing = spam.getByTestId("missing-references");
    await missing.waitFor();
    await missing.getByText("remove_content").waitFor();
    assert.equal(await missing.getByRole("link", { name: /Create it/u }).getAttribute("href"), "/settings/action-types");
    assert.deepEqual((await admin("/workflows")).body.items, [], "nothing was published");
    await expectNoSeriousViolations(page, "a template with a missing reference");
    await spam.scrollIntoViewIfNeeded();
    await shot(page, "03-missing-reference");

    // 1. Connect your product: an endpoint at the stand-in product and the action type it carries.
    await connectProduct(admin, product);

    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Workflow templates" }).waitFor();
    await spam.getByText("exists", { exact: true }).waitFor();
    await spam.getByTestId("use-template").click();
    await page.waitForURL(/\/workflows\/[^/]+\/edit\?from=/u, { timeout: 20_000 });
    await page.getByRole("heading", { level: 1, name: "Edit Spam triage" }).waitFor();
    await until(
      async () => {
        const status = await page.getByTestId("validation-status").textContent();
        return { value: /^Valid/u.test(status ?? ""), seen: status };
      },
      "the editor's validator to accept the template",
      20_000,
    );
    const workflows = await admin("/workflows");
    assert.deepEqual(
      workflows.body.items.map((w) => w.name),
      ["Spam triage"],
    );
    await shot(page, "04-editor");
  });

  test("each checklist step flips from real state: product connected, workflow published, a test report sent from the checklist, its task answered, the approved action arriving at the product", { timeout: 150_000 }, async (t) => {
    const { admin, page } = await freshDesk(t, "Checklist desk");
    const product = await standInProduct(t);
    const received = product.received;
    // 1 and 2 as the gallery test does them: the product connected, spam triage published from its template.
    await connectProduct(admin, product);
    const used = await admin("/workflow-templates/use", { body: { template: "spam-triage" } });
    assert.equal(used.status, 201, JSON.stringify(used.body));
    // Spam triage in assisted mode (its removals wait for a person), and a review of every report.
    assert.equal((await admin("/triggers", { body: { event: "report.created", workflowVersionId: used.body.version.id, authorityMode: "assisted" } })).status, 201);
    const queue = await admin("/queues", { body: { name: QUEUE, slaSeconds: 3600 } });
    assert.equal(queue.status, 201, JSON.stringify(queue.body));
    const review = await admin("/workflows", { body: { name: "Review every report" } });
    const version = await admin(`/workflows/${review.body.id}/versions`, {
      body: {
        graph: {
          schemaVersion: 1,
          nodes: [
            { id: "start", kind: "start" },
            { id: "review", kind: "human_task", config: { queue_id: QUEUE, timeout_seconds: 86_400, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["remove", "keep"] } } } } },
            { id: "end", kind: "end" },
          ],
          edges: [edge("start", "success", "review"), edge("review", "completed", "end"), edge("review", "timeout", "end")],
        },
      },
    });
    assert.equal(version.status, 201, JSON.stringify(version.body));
    assert.equal((await admin("/triggers", { body: { event: "report.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } })).status, 201);

    await page.goto(`${server.baseUrl}/getting-started`);
    await page.getByRole("heading", { level: 1, name: "Getting started" }).waitFor();
    await page.getByTestId("onboarding-steps").waitFor();
    assert.equal(await stepDone(page, "connect_product"), true);
    assert.equal(await stepDone(page, "publish_workflow"), true);
    assert.equal(await stepDone(page, "send_report"), false);
    await expectNoSeriousViolations(page, "getting started page");

    // 3. Send a test report from the checklist.
    await page.getByTestId("send-test-report").click();
    await until(async () => ({ value: await stepDone(page, "send_report"), seen: await page.getByTestId("onboarding-progress").textContent() }), "the report step checked off");
    const reports = await admin("/reports");
    assert.equal(reports.body.items.length, 1, JSON.stringify(reports.body));
    await until(
      async () => {
        const waiting = (await page.getByText("A task is waiting in a queue.").count()) > 0;
        if (!waiting) await page.getByRole("button", { name: "Check again" }).click();
        return { value: waiting, seen: await page.getByTestId("onboarding-steps").textContent() };
      },
      "the review task to be announced",
      30_000,
      1000,
    );
    await shot(page, "05-checklist-report-sent");

    // 4. Review it: Next task, answer with the keyboard.
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Review", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
    await page.getByRole("button", { name: `Next task in ${QUEUE}` }).click();
    await page.waitForURL(/\/tasks\/[^/]+$/u);
    await page.getByTestId("submit-answer").waitFor();
    await page.keyboard.press("1");
    await until(async () => ({ value: (await page.getByText(/^(Opening the report|Loading the timeline)/u).count()) === 0, seen: "loading" }), "the task's report and timeline");
    await shot(page, "06-review");
    await page.keyboard.press("Control+Enter");
    await page.getByTestId("task-completed").waitFor({ timeout: 15_000 });

    // 5. The spam removal waits for approval; approved, it is delivered to the product.
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Approvals", exact: true }).click();
    const card = page.getByTestId("proposal").filter({ hasText: "remove_content" });
    await card.waitFor({ timeout: 20_000 });
    await shot(page, "07-approval");
    await card.getByTestId("approve").click();
    await until(async () => ({ value: received.some((r) => r.type === "action.execute"), seen: received }), "the action delivered to the product", 30_000);

    await page.goto(`${server.baseUrl}/getting-started`);
    await page.getByTestId("onboarding-steps").waitFor();
    await until(
      async () => {
        const progress = await page.getByTestId("onboarding-progress").textContent();
        if (!/Every step is done/u.test(progress ?? "")) await page.getByRole("button", { name: "Check again" }).click();
        return { value: /Every step is done/u.test(progress ?? ""), seen: progress };
      },
      "every step checked off",
      30_000,
      1000,
    );
    for (const id of ["connect_product", "publish_workflow", "send_report", "review_report", "see_action"]) assert.equal(await stepDone(page, id), true, `${id} is done`);
    const checklist = await admin("/onboarding");
    assert.equal(checklist.body.allDone, true, JSON.stringify(checklist.body));
    await shot(page, "08-all-done");

    // Done: the review home no longer carries the checklist.
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Review", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
    await page.waitForLoadState("networkidle");
    assert.equal(await page.getByTestId("onboarding-panel").count(), 0, "no checklist once every step is done");
  });

  test("an appeal of a report becomes a task in the appeals queue; answered overturned from the keyboard, the appeal records that outcome", { timeout: 90_000 }, async (t) => {
    const { admin, page } = await freshDesk(t, "Appeals desk");
    const queue = await admin("/queues", { body: { name: "appeals", slaSeconds: 86_400 } });
    assert.equal(queue.status, 201, JSON.stringify(queue.body));
    const workflow = await admin("/workflows", { body: { name: "Appeal review" } });
    const version = await admin(`/workflows/${workflow.body.id}/versions`, {
      body: {
        graph: {
          schemaVersion: 1,
          nodes: [
            { id: "start", kind: "start" },
            { id: "second_look", kind: "human_task", config: { queue_id: "appeals", timeout_seconds: 604_800, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["upheld", "overturned"] } } } } },
            { id: "end", kind: "end", config: { terminal_code: "appeal_reviewed" } },
          ],
          edges: [edge("start", "success", "second_look"), edge("second_look", "completed", "end"), edge("second_look", "timeout", "end")],
        },
      },
    });
    assert.equal(version.status, 201, JSON.stringify(version.body));
    assert.equal((await admin("/triggers", { body: { event: "appeal.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } })).status, 201);
    const reported = await admin("/reports", { body: { subject: { kind: "content", id: `post-appeal-${TAG}` }, category: "scams_and_fraud", source: "notice", description: "A scam." } });
    assert.equal(reported.status, 201, JSON.stringify(reported.body));
    const report = reported.body;
    const appeal = await admin("/appeals", { body: { reportId: report.id, appellant: { id: "author-1" }, reason: "It was a joke between friends, not a scam." } });
    assert.equal(appeal.status, 201, JSON.stringify(appeal.body));

    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Review", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
    await page.getByRole("button", { name: "Next task in appeals" }).click({ timeout: 20_000 });
    await page.waitForURL(/\/tasks\/[^/]+$/u);
    await page.getByRole("heading", { name: "Appeal", exact: true }).waitFor();
    await page.getByText("It was a joke between friends, not a scam.").waitFor();
    await page.getByTestId("submit-answer").waitFor();
    await page.keyboard.press("2");
    await until(async () => ({ value: (await page.getByText(/^(Opening the report|Loading the timeline)/u).count()) === 0, seen: "loading" }), "the task's report and timeline");
    await expectNoSeriousViolations(page, "an appeal task");
    await shot(page, "09-appeal");
    await page.keyboard.press("Control+Enter");
    await page.getByTestId("task-completed").waitFor({ timeout: 15_000 });
    const decided = await until(async () => {
      const current = await admin(`/appeals/${appeal.body.id}`);
      return { value: current.body.state === "overturned" ? current.body : null, seen: current.body };
    }, "the appeal's outcome");
    assert.equal(decided.outcome, "overturned");
  });
});
