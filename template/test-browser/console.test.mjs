// The console in a real browser: Debian's Chromium driven by playwright-core against `wrangler
// dev` started as `npm start` starts it. One server for the file; each test works in an
// installation of its own (the first in the one npm start made, which no other test touches; the
// rest each in one made through POST /installations) and builds every queue, workflow and report it
// needs, so any test runs alone (--test-name-pattern) and in any order (--test-randomize). What is
// tried: sign in and build a workflow in the editor by adding and connecting nodes, then publish;
// a report sent through the API becomes a task, claimed from the keyboard, its reporter sealed and
// its media blurred until revealed; a task answered with the keyboard finishes its run and the
// audit chain verifies; a viewer cannot claim or approve and a moderator can reject; an invalid CEL
// expression shows its error on the node; the task shows what automation proposed; a run in
// repair_required is repaired and another terminated in bulk. axe-core finds no serious or
// critical violation on the pages on the way.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { apiClient, axeViolations, buildConsole, ownInstallation, pngDataUrl, reuseOrStartServer, serverAndBrowser, signedInPage, TEST_CONCURRENCY, until } from "./harness.mjs";

let server;
let browser;
let shots = 0;

// Names carry a tag, so the file can also run against a server that already has data.
const TAG = Math.random().toString(36).slice(2, 7);
const QUEUE = `console-review-${TAG}`;
const ADMIN = { email: "admin@example.org", name: "Ada Admin", role: "admin" };
const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

before(
  async () => {
    buildConsole();
    ({ server, browser } = await serverAndBrowser(() => reuseOrStartServer({ label: "console" })));
  },
  { timeout: 180_000 },
);

after(async () => {
  await browser?.close().catch(() => undefined);
  await server?.stop();
});

/**
 * A page signed in through `url` in a browser context of the test's own. The page's errors are
 * collected; if the test fails they are printed with a screenshot, the page's text and the
 * server's output.
 */
async function openConsole(t, url, { viewport, path: at } = {}) {
  const errors = [];
  return signedInPage(t, browser, url, {
    viewport,
    path: at,
    onOpen: (page) => {
      page.on("pageerror", (error) => errors.push(`${page.url()}: ${error.message}`));
      page.on("console", (message) => {
        if (message.type() === "error") errors.push(`${page.url()} console: ${message.text()}`);
      });
    },
    onClose: async (page) => {
      if (t.passed !== false) return;
      if (errors.length) console.error(`browser errors:\n${errors.slice(-20).join("\n")}`);
      shots += 1;
      const shot = path.join(tmpdir(), `safest-console-${t.name.replace(/\W+/gu, "-").slice(0, 40)}-${shots}.png`);
      await page.screenshot({ path: shot, fullPage: true }).catch(() => undefined);
      const text = await page
        .locator("main")
        .innerText()
        .catch(() => "");
      console.error(`page ${page.url()} (screenshot ${shot}):\n${text.slice(0, 3000)}\nserver output:\n${server.output().slice(-6000)}`);
    },
  });
}

/**
 * A review desk in the test's installation, built through the API: an intake key, the review
 * queue and (unless `review: false`) a published workflow start → human_task (outcome remove |
 * keep, the report's category as input) → end, with a trigger that starts it, autonomous, for
 * every report.
 */
async function reviewDesk(api, { review = true } = {}) {
  const intake = await api("/api-keys", { body: { name: "product intake", scopes: ["reports:write"] } });
  assert.equal(intake.status, 201, JSON.stringify(intake.body));
  const queue = await api("/queues", { body: { name: QUEUE, slaSeconds: 3600, priority: 10 } });
  assert.equal(queue.status, 201, JSON.stringify(queue.body));
  if (!review) return { intakeKey: intake.body.apiKey, queueId: queue.body.id };
  const workflow = await api("/workflows", { body: { name: `console-review-flow-${TAG}` } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  const version = await api(`/workflows/${workflow.body.id}/versions`, {
    body: {
      graph: {
        schemaVersion: 1,
        nodes: [
          { id: "start", kind: "start" },
          {
            id: "human_task",
            kind: "human_task",
            config: { queue_id: QUEUE, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["remove", "keep"] } } } },
            inputMapping: { category: "report.category" },
          },
          { id: "end", kind: "end" },
        ],
        edges: [edge("start", "success", "human_task"), edge("human_task", "completed", "end"), edge("human_task", "timeout", "end")],
      },
    },
  });
  assert.equal(version.status, 201, JSON.stringify(version.body));
  const trigger = await api("/triggers", { body: { event: "report.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } });
  assert.equal(trigger.status, 201, JSON.stringify(trigger.body));
  return { intakeKey: intake.body.apiKey, queueId: queue.body.id, versionId: version.body.id, triggerId: trigger.body.id };
}

/** A report of a scam post with a picture, sent with the intake key; returns the report and the run its trigger started. */
async function sendReport(api, desk, subjectId) {
  const report = await api("/reports", {
    as: desk.intakeKey,
    body: {
      subject: { kind: "content", id: subjectId, url: `https://example.social/p/${subjectId}`, snapshot: { text: "Cheap pills, DM me at scam.example", media: [{ type: "image", url: pngDataUrl(), alt: "attached picture" }] } },
      category: "scams_and_fraud",
      reporter: { id: "user-77", contact: "reporter@example.org" },
      description: "This post is a scam.",
    },
  });
  assert.equal(report.status, 201, JSON.stringify(report.body));
  const started = report.body.runs.filter((r) => r.triggerId === desk.triggerId);
  assert.equal(started.length, 1, JSON.stringify(report.body));
  return { report: report.body, runId: started[0].runId };
}

/** The open task a run made in the desk's queue. */
async function taskOfRun(api, queueId, runId) {
  return until(async () => {
    const listing = await api(`/queues/${queueId}/tasks?state=open&limit=200`);
    const run = await api(`/runs/${runId}`);
    return { value: listing.body.items?.find((task) => task.runId === runId), stop: ["failed", "repair_required", "terminated", "succeeded"].includes(run.body?.state), seen: run.body };
  }, `the task of run ${runId}`);
}

/** Waits until the validator has answered for the graph on screen. */
async function settled(page) {
  await until(async () => ({ value: !(await page.getByTestId("validation-status").innerText()).includes("Checking") }), "the validator's answer", 15_000);
}

/** Drags from a port's handle to a node's input handle, as a person connects nodes. */
async function connect(page, from, port, to) {
  await settled(page);
  const source = page.locator(`.react-flow__node[data-id="${from}"] .react-flow__handle.source[data-handleid="${port}"]`);
  const target = page.locator(`.react-flow__node[data-id="${to}"] .react-flow__handle.target`);
  const a = await source.boundingBox();
  const b = await target.boundingBox();
  assert.ok(a && b, `handles of ${from}.${port} and ${to} are on screen`);
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move((a.x + b.x) / 2, (a.y + b.y) / 2 + 10, { steps: 6 });
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2, { steps: 6 });
  await page.mouse.up();
  await page.locator(`.react-flow__edge[data-id="${from}:${port}->${to}"]`).waitFor({ timeout: 5_000 });
}

async function expectNoSeriousViolations(page, label) {
  const violations = await axeViolations(page);
  assert.deepEqual(violations, [], `${label}: axe found serious or critical violations:\n${JSON.stringify(violations, null, 2)}`);
}

/** Waits until the page has handled what was dispatched to it: a frame drawn and a task after it. */
async function pageTurned(page) {
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0))));
}

describe("the console", { concurrency: TEST_CONCURRENCY }, () => {
  test("sign in with the link npm start prints; add start, human_task and end in the editor (which shows expressions as json-numbers-1), connect them by dragging and from the panel; publish stores that graph with its semantics", {
    timeout: 120_000,
  }, async (t) => {
    // The installation npm start made, which only this test uses.
    const api = apiClient(server.baseUrl, server.apiKey);
    const queue = await api("/queues", { body: { name: QUEUE, slaSeconds: 3600, priority: 10 } });
    assert.equal(queue.status, 201, JSON.stringify(queue.body));
    const page = await openConsole(t, server.signinUrl);
    assert.equal(new URL(page.url()).pathname, "/");
    assert.equal(await page.getByTestId("role").innerText(), "Admin");

    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Workflows", exact: true }).click();
    await page.getByLabel("Name").fill(`console-review-flow-${TAG}`);
    await page.getByRole("button", { name: "Create and open the editor" }).click();
    await page.waitForURL(/\/workflows\/[^/]+\/edit$/u);
    // A new graph's expressions get the current semantics, shown in the editor and kept at publish.
    assert.equal(await page.getByTestId("expression-semantics").innerText(), "Expressions: json-numbers-1");

    const palette = page.getByRole("navigation", { name: "Node palette" });
    await palette.getByRole("button", { name: "Start", exact: true }).click();
    await palette.getByRole("button", { name: "Human task", exact: true }).click();
    await palette.getByRole("button", { name: "End", exact: true }).click();
    for (const id of ["start", "human_task", "end"]) await page.locator(`.react-flow__node[data-id="${id}"]`).waitFor();

    // The human task: its queue and its response schema, from its config panel.
    await page.locator('.react-flow__node[data-id="human_task"]').click();
    const panel = page.getByTestId("config-panel");
    await panel.getByTestId("queue-select").selectOption(QUEUE);
    await panel.getByTestId("outcome-options").fill("remove, keep");
    await panel.getByPlaceholder("name").fill("category");
    await panel.getByRole("button", { name: "Add field" }).click();
    const schema = JSON.parse(await panel.getByTestId("response-schema").inputValue());
    assert.deepEqual(schema.properties.outcome.enum, ["remove", "keep"]);

    // Ports as handles: drag two edges; the third through the panel's keyboard-friendly select.
    await connect(page, "start", "success", "human_task");
    await connect(page, "human_task", "completed", "end");
    await page.locator('.react-flow__node[data-id="human_task"]').click();
    await panel.getByTestId("connect-timeout").selectOption("end");
    await page.locator('.react-flow__edge[data-id="human_task:timeout->end"]').waitFor();

    await page.getByTestId("validation-status").filter({ hasText: "Valid: ready to publish." }).waitFor({ timeout: 15_000 });
    await expectNoSeriousViolations(page, "editor page");

    await page.getByTestId("publish").click();
    await page.waitForURL(/\/workflows\/[^/?]+\?published=/u);
    await page.getByTestId("published").waitFor();
    const versionId = new URL(page.url()).searchParams.get("published");

    const version = await api(`/workflow-versions/${versionId}`);
    assert.equal(version.status, 200, JSON.stringify(version.body));
    assert.equal(version.body.graph.expressionSemantics, "json-numbers-1");
    const task = version.body.graph.nodes.find((n) => n.id === "human_task");
    assert.equal(task.config.queue_id, QUEUE);
    assert.deepEqual(task.inputMapping, { category: "report.category" });
    assert.deepEqual(version.body.graph.edges.map((e) => `${e.from.nodeId}.${e.from.port}>${e.to.nodeId}`).sort(), ["human_task.completed>end", "human_task.timeout>end", "start.success>human_task"]);
  });

  test("a report sent through the API becomes a task claimed with Enter on Next task; the reporter stays sealed and the media blurred until revealed", { timeout: 90_000 }, async (t) => {
    const installation = await ownInstallation(server, `console-claim-${TAG}`);
    const api = installation.api;
    const desk = await reviewDesk(api);
    const { runId } = await sendReport(api, desk, `post-console-1-${TAG}`);
    await taskOfRun(api, desk.queueId, runId);

    const page = await openConsole(t, await installation.signinUrl(ADMIN));
    const row = page.getByRole("row").filter({ hasText: QUEUE });
    await until(
      async () => {
        await page.reload();
        await page.locator("section[data-ready]").waitFor();
        return { value: (await row.count()) && (await row.getByTestId("queue-open").innerText()) === "1" };
      },
      "the queue to show one open task",
      20_000,
    );
    await expectNoSeriousViolations(page, "review home (queues)");
    // Claimed from the keyboard: focus "Next task" and press Enter.
    await page.getByRole("button", { name: `Next task in ${QUEUE}` }).focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/tasks\/[^/]+$/u);
    const taskId = new URL(page.url()).pathname.split("/")[2];
    await page.getByTestId("submit-answer").waitFor();
    const claimed = await api(`/tasks/${taskId}`);
    assert.equal(claimed.body.state, "claimed", JSON.stringify(claimed.body));
    assert.equal(claimed.body.claim.reviewer, ADMIN.email);
    assert.equal(claimed.body.runId, runId);

    // The report opened for the reviewer, the context the workflow passed, the subject's history.
    await page.getByText("This post is a scam.").waitFor();
    // Who reported stays sealed until the reviewer asks, with a reason (audited).
    assert.equal(await page.getByText("reporter@example.org").count(), 0, "the reporter's contact is not shown unasked");
    await page.getByTestId("reveal-reporter").click();
    await page.getByTestId("reveal-reason").fill("Checking the notifier before replying");
    await page.getByRole("button", { name: "Reveal", exact: true }).click();
    await page.getByText("reporter@example.org").waitFor();
    await page.locator(".kv").filter({ hasText: "category" }).getByText("scams_and_fraud").first().waitFor();

    const media = page.getByTestId("media");
    const filter = () => media.evaluate((el) => getComputedStyle(el).filter);
    assert.match(await filter(), /blur\(\d+px\) grayscale\(1\)/u, "media starts blurred and greyscale");
    assert.equal(await media.getAttribute("data-revealed"), "false");
    // Doing other things (moving the pointer over the page, tabbing on) does not reveal it: once the
    // page has handled them and no transition runs on the media, it is as blurred as before.
    await page.mouse.move(600, 400);
    await page.keyboard.press("Tab");
    await pageTurned(page);
    await until(async () => ({ value: await media.evaluate((el) => el.getAnimations().length === 0) }), "no transition running on the media", 5_000);
    assert.match(await filter(), /blur\(\d+px\) grayscale\(1\)/u, "media stays blurred while the reviewer does other things");
    assert.equal(await media.getAttribute("data-revealed"), "false");
    await page.getByTestId("reveal-media").click();
    // (the filter eases out over 150 ms)
    await until(async () => ({ value: (await filter()) === "none", seen: await filter() }), "revealed media shown as it is", 5_000);
    assert.equal(await media.getAttribute("data-revealed"), "true");
    await page.getByTestId("reveal-media").click();
    await until(async () => ({ value: /blur\(\d+px\) grayscale\(1\)/u.test(await filter()), seen: await filter() }), "media hidden again", 5_000);
    await page.keyboard.press("v");
    await until(async () => ({ value: (await filter()) === "none", seen: await filter() }), "v reveals all media", 5_000);
    await page.keyboard.press("v");
    await until(async () => ({ value: /blur/u.test(await filter()), seen: await filter() }), "v hides all media again", 5_000);

    await page.getByRole("heading", { level: 1 }).focus();
    await expectNoSeriousViolations(page, "review (task) page");

    // The subject's history: its reports and the report's timeline (run, task).
    const timeline = page.getByRole("list", { name: "Report timeline" });
    await timeline.waitFor({ timeout: 10_000 });
    await timeline.getByText("Workflow run", { exact: true }).waitFor();
    await timeline.getByText("Review task", { exact: true }).waitFor();
  });

  test("claim a task, choose with keys 1 and 2, send with Ctrl+Enter; the run succeeds, its page shows each step done, and the audit chain verifies", { timeout: 90_000 }, async (t) => {
    const installation = await ownInstallation(server, `console-answer-${TAG}`);
    const api = installation.api;
    const desk = await reviewDesk(api);
    const { runId } = await sendReport(api, desk, `post-console-answer-${TAG}`);
    const open = await taskOfRun(api, desk.queueId, runId);

    const page = await openConsole(t, await installation.signinUrl(ADMIN), { path: `/tasks/${encodeURIComponent(open.id)}` });
    await page.getByTestId("claim").click();
    // The answer form is on the page before the claim too, its button disabled until the task is yours.
    await page.locator('[data-testid="submit-answer"]:enabled').waitFor();
    const claimed = await api(`/tasks/${open.id}`);
    assert.equal(claimed.body.state, "claimed", JSON.stringify(claimed.body));
    assert.equal(claimed.body.claim.reviewer, ADMIN.email);

    await page.getByRole("heading", { level: 1 }).focus();
    await page.keyboard.press("1");
    assert.equal(await page.getByTestId("option-outcome-remove").isChecked(), true, "key 1 chooses the first outcome");
    await page.keyboard.press("2");
    assert.equal(await page.getByTestId("option-outcome-keep").isChecked(), true, "key 2 chooses the second");
    await page.keyboard.press("1");
    await page.keyboard.press("Control+Enter");
    await page.getByTestId("task-completed").waitFor({ timeout: 15_000 });

    const task = await api(`/tasks/${open.id}`);
    assert.equal(task.body.state, "completed");
    assert.deepEqual(task.body.response, { outcome: "remove" });

    const run = await until(async () => {
      const current = await api(`/runs/${runId}`);
      return { value: current.body.state === "succeeded" ? current.body : null, stop: ["failed", "repair_required", "terminated"].includes(current.body.state), seen: current.body };
    }, "the run to succeed");
    assert.deepEqual(
      run.steps.map((s) => s.nodeId),
      ["start", "human_task", "end"],
    );

    await page.goto(`${server.baseUrl}/runs/${runId}`);
    await page.locator('section[data-run-state="succeeded"]').waitFor();
    await page.locator('.react-flow__node[data-id="human_task"] .flow-node-state').filter({ hasText: "succeeded" }).waitFor();
    await page.locator('.react-flow__node[data-id="end"] .flow-node-state').filter({ hasText: "succeeded" }).waitFor();
    await expectNoSeriousViolations(page, "run page");

    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Audit", exact: true }).click();
    await page.getByTestId("verify-chain").click();
    await page
      .getByTestId("verify-result")
      .filter({ hasText: /Chain verified: all \d+ events are intact/u })
      .waitFor({ timeout: 15_000 });
  });

  test("a viewer sees the queue but gets no claim or approve control, its claim shortcut does nothing and the API answers 403; a moderator rejects the proposal with a reason", { timeout: 120_000 }, async (t) => {
    const installation = await ownInstallation(server, `console-roles-${TAG}`);
    const api = installation.api;
    // An open task to look at, and an action proposal waiting for approval.
    const desk = await reviewDesk(api);
    const { runId: reviewRunId } = await sendReport(api, desk, `post-console-2-${TAG}`);
    const openTask = await taskOfRun(api, desk.queueId, reviewRunId);
    const hook = await api("/webhook-endpoints", { body: { url: "http://127.0.0.1:9/hooks", retryBaseSeconds: 1, maxAttempts: 5 } });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    const type = await api("/action-types", { body: { key: `remove_post_${TAG}`, name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: true } });
    assert.equal(type.status, 201, JSON.stringify(type.body));
    const workflow = await api("/workflows", { body: { name: `approval-flow-${TAG}` } });
    const version = await api(`/workflows/${workflow.body.id}/versions`, {
      body: {
        graph: {
          schemaVersion: 1,
          nodes: [
            { id: "start", kind: "start" },
            { id: "remove", kind: "action", config: { action_type: `remove_post_${TAG}`, approval_timeout_seconds: 3600 }, inputMapping: { postId: "input.postId" } },
            { id: "applied", kind: "end", config: { terminal_code: "applied" } },
            { id: "rejected", kind: "end", config: { terminal_code: "rejected" } },
            { id: "expired", kind: "end", config: { terminal_code: "expired" } },
          ],
          edges: [edge("start", "success", "remove"), edge("remove", "applied", "applied"), edge("remove", "rejected", "rejected"), edge("remove", "expired", "expired")],
        },
      },
    });
    assert.equal(version.status, 201, JSON.stringify(version.body));
    const run = await api("/runs", { body: { workflowVersionId: version.body.id, authorityMode: "assisted", input: { postId: "post-9" } } });
    assert.equal(run.status, 201, JSON.stringify(run.body));
    const proposal = await until(async () => {
      const list = await api("/action-proposals?state=approval_required");
      return { value: list.body.items?.find((p) => p.runId === run.body.id), seen: list.body };
    }, "the action proposal");

    const page = await openConsole(t, await installation.signinUrl({ email: "viewer@example.org", name: "Vera Viewer", role: "viewer" }), { viewport: { width: 1280, height: 900 } });
    assert.equal(await page.getByTestId("role").innerText(), "Viewer");
    await page.getByRole("row").filter({ hasText: QUEUE }).waitFor();
    assert.equal(await page.getByRole("button", { name: /Next task/u }).count(), 0, "no Next task for a viewer");

    await page.goto(`${server.baseUrl}/tasks/${openTask.id}`);
    await page.getByTestId("cannot-review").waitFor();
    // A viewer may not open personal data: the reported content stays sealed for them.
    await page.getByTestId("content-sealed").waitFor();
    assert.equal(await page.getByText("This post is a scam.").count(), 0, "a viewer does not see the reported content");
    assert.equal(await page.getByTestId("claim").count(), 0, "no Claim button for a viewer");
    assert.equal(await page.getByTestId("submit-answer").count(), 0, "no answer form for a viewer");
    const claimRequests = [];
    page.on("request", (request) => {
      if (/\/claim$/u.test(new URL(request.url()).pathname)) claimRequests.push(request.url());
    });
    await page.getByRole("heading", { level: 1 }).focus();
    await page.keyboard.press("c");
    await pageTurned(page);
    assert.deepEqual(claimRequests, [], "the claim shortcut sends nothing for a viewer");
    assert.equal((await api(`/tasks/${openTask.id}`)).body.state, "open", "the task is still open");

    // And the API refuses the viewer's session even when the request is made by hand.
    const attempt = async (pathname, body) =>
      page.evaluate(
        async ({ pathname, body }) => {
          const session = await (await fetch("/api/v1/session")).json();
          const response = await fetch(`/api/v1${pathname}`, { method: "POST", headers: { "content-type": "application/json", "x-csrf-token": session.csrfToken }, body: JSON.stringify(body) });
          return { status: response.status, code: (await response.json()).error?.code };
        },
        { pathname, body },
      );
    assert.deepEqual(await attempt(`/tasks/${openTask.id}/claim`, {}), { status: 403, code: "auth.scope_missing" });
    assert.deepEqual(await attempt(`/action-proposals/${proposal.id}/approve`, {}), { status: 403, code: "auth.scope_missing" });

    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Approvals", exact: true }).click();
    await page
      .getByTestId("proposal")
      .filter({ hasText: `remove_post_${TAG}` })
      .waitFor();
    await page.getByTestId("cannot-review").waitFor();
    assert.equal(await page.getByTestId("approve").count(), 0, "no Approve button for a viewer");
    assert.equal(await page.getByTestId("reject").count(), 0, "no Reject button for a viewer");
    assert.equal((await api(`/action-proposals/${proposal.id}`)).body.state, "approval_required");

    const modPage = await openConsole(t, await installation.signinUrl({ email: "mod@example.org", name: "Mo Moderator", role: "moderator" }), { viewport: { width: 1280, height: 900 } });
    await modPage.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Approvals", exact: true }).click();
    const card = modPage.getByTestId("proposal").filter({ hasText: `remove_post_${TAG}` });
    await card.getByTestId("reject").click();
    await card.getByLabel("Reason for rejecting").fill("Not a scam after all");
    await card.getByRole("button", { name: "Reject", exact: true }).click();
    await modPage.getByText("Nothing is waiting for approval.").waitFor();
    const decided = await api(`/action-proposals/${proposal.id}`);
    assert.equal(decided.body.state, "rejected");
    assert.equal(decided.body.reason, "Not a scam after all");
  });

  test("a condition's when set to the invalid CEL 'report.category ==' shows the validator's error on its field and node; a valid one clears both", { timeout: 60_000 }, async (t) => {
    const installation = await ownInstallation(server, `console-cel-${TAG}`);
    const api = installation.api;
    const workflow = await api("/workflows", { body: { name: `cel-check-${TAG}` } });
    assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
    const page = await openConsole(t, await installation.signinUrl(ADMIN), { path: `/workflows/${workflow.body.id}/edit` });
    const palette = page.getByRole("navigation", { name: "Node palette" });
    await palette.getByRole("button", { name: "Start", exact: true }).click();
    await palette.getByRole("button", { name: "Condition", exact: true }).click();
    const node = page.locator('.react-flow__node[data-id="condition"]');
    await node.waitFor();
    const when = page.getByTestId("case-when-0");
    await when.fill("report.category ==");

    const fieldError = page.getByTestId("config-panel").getByTestId("field-error").first();
    await fieldError.waitFor({ timeout: 15_000 });
    const message = (await fieldError.innerText()).trim();
    assert.ok(message.length > 0);
    assert.equal(await when.getAttribute("aria-invalid"), "true");
    const pinned = node.getByTestId("node-problems");
    await pinned.filter({ hasText: message.slice(0, 40) }).waitFor({ timeout: 5_000 });
    assert.ok((await node.locator(".flow-node").getAttribute("class")).includes("has-problems"));

    await when.fill("report.category == 'scams_and_fraud'");
    await until(async () => ({ value: (await page.getByTestId("config-panel").getByTestId("field-error").count()) === 0 }), "the expression error to clear", 10_000);
    assert.equal(await when.getAttribute("aria-invalid"), null);
    const remaining = (await pinned.count()) ? await pinned.innerText() : "";
    assert.ok(!remaining.includes(message.slice(0, 40)), `the node no longer shows the expression error (${remaining})`);
  });

  test("a task after an enrichment and an AI proposal (a model on loopback) shows the proposed result, its confidence and rationale, and the enrichment step", { timeout: 90_000 }, async (t) => {
    const installation = await ownInstallation(server, `console-ai-${TAG}`);
    const api = installation.api;
    const desk = await reviewDesk(api, { review: false });
    // An OpenAI-compatible model endpoint in this process, on loopback.
    const model = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", () => {
        const content = JSON.stringify({ result_code: "violation", confidence: 0.87, rationale: "The post links to a domain on the scam list." });
        response.writeHead(200, { "content-type": "application/json" });
        response.end(
          JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }], usage: { prompt_tokens: Math.ceil(body.length / 4), completion_tokens: 20 } }),
        );
      });
    });
    await new Promise((resolve) => model.listen(0, "127.0.0.1", resolve));
    t.after(
      () =>
        new Promise((resolve) => {
          model.closeAllConnections?.();
          model.close(resolve);
        }),
    );
    const provider = await api("/ai-providers", { body: { name: "local model", kind: "openai-compatible", baseUrl: `http://127.0.0.1:${model.address().port}/v1`, model: "fixed", apiKey: "sk-local-model" } });
    assert.equal(provider.status, 201, JSON.stringify(provider.body));

    const workflow = await api("/workflows", { body: { name: `assisted-review-${TAG}` } });
    const version = await api(`/workflows/${workflow.body.id}/versions`, {
      body: {
        graph: {
          schemaVersion: 1,
          nodes: [
            { id: "start", kind: "start" },
            { id: "history", kind: "enrichment", config: { component: "subject_history" } },
            {
              id: "ai",
              kind: "ai_proposal",
              config: { provider_id: provider.body.id, instructions: "Decide whether the report shows a policy violation.", result_ports: ["violation", "no_violation"] },
              inputMapping: { category: "report.category", reports: "steps.history.data.reportCount" },
            },
            { id: "review", kind: "human_task", config: { queue_id: QUEUE, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["remove", "keep"] } } } } },
            { id: "end", kind: "end" },
          ],
          edges: [edge("start", "success", "history"), edge("history", "success", "ai"), edge("ai", "violation", "review"), edge("ai", "no_violation", "review"), edge("review", "completed", "end"), edge("review", "timeout", "end")],
        },
      },
    });
    assert.equal(version.status, 201, JSON.stringify(version.body));
    const trigger = await api("/triggers", { body: { event: "report.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } });
    assert.equal(trigger.status, 201, JSON.stringify(trigger.body));
    const { runId } = await sendReport(api, { ...desk, triggerId: trigger.body.id }, `post-console-ai-${TAG}`);
    const task = await taskOfRun(api, desk.queueId, runId);

    const page = await openConsole(t, await installation.signinUrl(ADMIN), { path: `/tasks/${encodeURIComponent(task.id)}` });
    const proposal = page.getByTestId("ai-proposal");
    await proposal.waitFor();
    const text = await proposal.innerText();
    assert.match(text, /Proposed violation with 87% confidence/u);
    assert.match(text, /The post links to a domain on the scam list\./u);
    await page.getByRole("region", { name: "What automation did" }).or(page.locator('section[aria-labelledby="automation-heading"]')).getByText("history").first().waitFor();
  });

  test("a run in repair_required is routed to port no with a reason from the run inspector and succeeds; a second is terminated from the runs list after a dry run", { timeout: 90_000 }, async (t) => {
    const installation = await ownInstallation(server, `console-repair-${TAG}`);
    const api = installation.api;
    const workflow = await api("/workflows", { body: { name: `repair-${TAG}` } });
    assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "check", kind: "condition", timeoutPolicy: { retries: 0 }, config: { cases: [{ port: "yes", when: "input.missing.deeper == 1" }], case_ports: ["yes"], default_port: "no" } },
        { id: "end_yes", kind: "end", config: { terminal_code: "yes" } },
        { id: "end_no", kind: "end", config: { terminal_code: "no" } },
      ],
      edges: [edge("start", "success", "check"), edge("check", "yes", "end_yes"), edge("check", "no", "end_no")],
    };
    const version = await api(`/workflows/${workflow.body.id}/versions`, { body: { graph } });
    assert.equal(version.status, 201, JSON.stringify(version.body));
    const started = await api("/runs", { body: { workflowVersionId: version.body.id, authorityMode: "autonomous", input: {} } });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const runId = started.body.id;
    await until(async () => {
      const current = await api(`/runs/${runId}`);
      return { value: current.body.state === "repair_required" ? current.body : null, stop: ["failed", "succeeded", "terminated"].includes(current.body.state), seen: current.body };
    }, "the run to need repair");

    const page = await openConsole(t, await installation.signinUrl(ADMIN), { path: `/runs/${runId}` });
    await page.locator('section[data-run-state="repair_required"]').waitFor();
    const form = page.getByTestId("repair-form");
    await form.waitFor();
    await expectNoSeriousViolations(page, "run page with repair");
    await form.getByLabel(/Route it to a port/u).check();
    await form.getByLabel("Port", { exact: true }).selectOption("no");
    await form.getByLabel("Reason", { exact: true }).fill("Checked by hand: no match.");
    await form.getByRole("button", { name: "Repair the run" }).click();
    await page.locator('section[data-run-state="succeeded"]').waitFor({ timeout: 30_000 });
    // What a person reads once the repair went through: the run's outcome, and the step of the end
    // it was routed to among the steps. (The graph's node badges are not waited on: React Flow keeps
    // a node hidden until it has measured it, which on a loaded machine can outlast the wait.)
    const steps = page.getByRole("region", { name: "Steps" });
    await steps
      .getByRole("listitem")
      .filter({ has: page.getByText("end_no", { exact: true }) })
      .filter({ hasText: "succeeded" })
      .waitFor();
    await page.locator("dl.stats").getByText("no", { exact: true }).waitFor();
    const repaired = await api(`/runs/${runId}`);
    assert.equal(repaired.body.output.terminalCode, "no");
    assert.equal(repaired.body.repairs[0].reason, "Checked by hand: no match.");
    await expectNoSeriousViolations(page, "repaired run page");

    // Bulk: another stuck run of the version, terminated from the runs list after a dry run.
    const second = await api("/runs", { body: { workflowVersionId: version.body.id, authorityMode: "autonomous", input: {} } });
    await until(async () => {
      const current = await api(`/runs/${second.body.id}`);
      return { value: current.body.state === "repair_required" ? current.body : null, stop: ["failed", "succeeded", "terminated"].includes(current.body.state), seen: current.body };
    }, "the second run to need repair");
    await page.goto(`${server.baseUrl}/runs?state=repair_required&workflowVersionId=${version.body.id}`);
    await page.getByText("Bulk repair (terminate, retry, migrate)").click();
    const bulk = page.getByTestId("bulk-form");
    await bulk.getByLabel("Action", { exact: true }).selectOption("terminate");
    await bulk.getByLabel("Reason", { exact: true }).fill("Withdrawn version.");
    await bulk.getByRole("button", { name: "Dry run" }).click();
    await bulk.getByTestId("bulk-dry").filter({ hasText: "1 runs match" }).waitFor();
    await expectNoSeriousViolations(page, "runs page with bulk repair");
    await bulk.getByRole("button", { name: /^Start/u }).click();
    await bulk.getByTestId("bulk-progress").filter({ hasText: "completed: 1/1 done (1 succeeded" }).waitFor({ timeout: 30_000 });
    assert.equal((await api(`/runs/${second.body.id}`)).body.state, "terminated");
  });
});
