// The console in a real browser: Debian's Chromium driven by playwright-core against `wrangler
// dev` started as `npm start` starts it. One server for the file; the tests build on each other:
// sign in → build a workflow in the editor by adding and connecting nodes → publish → a report
// sent through the API becomes a task → claim, answer with the keyboard → the run finishes → the
// audit chain verifies. Then: a viewer cannot claim or approve; an invalid CEL expression shows
// its error on the node; blurred media stays blurred until revealed; axe-core finds no serious or
// critical violation on the review, editor and run pages.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { apiClient, axeViolations, buildConsole, launchBrowser, pngDataUrl, reuseOrStartServer, signinLink, sleep, until } from "./harness.mjs";

let server;
let browser;
let api;
let admin; // the demo admin's browser context and page
let adminPage;
let intakeKey;
const state = {}; // what one test leaves for the next

// Names carry a tag, so the file can also run against a server that already has data.
const TAG = Math.random().toString(36).slice(2, 7);
const QUEUE = `console-review-${TAG}`;

before(
  async () => {
    buildConsole();
    server = await reuseOrStartServer({ label: "console" });
    api = apiClient(server.baseUrl, server.apiKey);
    browser = await launchBrowser();
    admin = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    adminPage = watch(await admin.newPage());
    const intake = await api("/api-keys", { body: { name: "product intake", scopes: ["reports:write"] } });
    assert.equal(intake.status, 201, JSON.stringify(intake.body));
    intakeKey = intake.body.apiKey;
    const queue = await api("/queues", { body: { name: QUEUE, slaSeconds: 3600, priority: 10 } });
    assert.equal(queue.status, 201, JSON.stringify(queue.body));
    state.queueId = queue.body.id;
  },
  { timeout: 180_000 },
);

after(async () => {
  await browser?.close().catch(() => undefined);
  await server?.stop();
});

/** The demo admin's page, signed in (test 1 signs in through the link npm start printed). */
async function adminSignedIn() {
  if (!state.signedIn) {
    await adminPage.goto(server.signinUrl);
    await adminPage.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
    state.signedIn = true;
  }
  return adminPage;
}

const pageErrors = [];
function watch(page) {
  page.on("pageerror", (error) => pageErrors.push(`${page.url()}: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(`${page.url()} console: ${message.text()}`);
  });
  return page;
}

function onFailure(t, page) {
  t.after(async () => {
    if (t.passed !== false) return;
    if (pageErrors.length) console.error(`browser errors:\n${pageErrors.slice(-20).join("\n")}`);
    if (page) {
      const shot = path.join(tmpdir(), `safest-console-${t.name.replace(/\W+/gu, "-").slice(0, 40)}.png`);
      await page.screenshot({ path: shot, fullPage: true }).catch(() => undefined);
      console.error(
        `page ${page.url()} (screenshot ${shot}):\n${(
          await page
            .locator("main")
            .innerText()
            .catch(() => "")
        ).slice(0, 3000)}`,
      );
    }
    console.error(`server output:\n${server.output().slice(-6000)}`);
  });
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

async function sendReport(subjectId, extra = {}) {
  const report = await api("/reports", {
    as: intakeKey,
    body: {
      subject: { kind: "content", id: subjectId, url: `https://example.social/p/${subjectId}`, snapshot: { text: "Cheap pills, DM me at scam.example", media: [{ type: "image", url: pngDataUrl(), alt: "attached picture" }] } },
      category: "scams_and_fraud",
      reporter: { id: "user-77", contact: "reporter@example.org" },
      description: "This post is a scam.",
      ...extra,
    },
  });
  assert.equal(report.status, 201, JSON.stringify(report.body));
  return report.body;
}

async function taskOfRun(runId) {
  return until(async () => {
    const listing = await api(`/queues/${state.queueId}/tasks?state=open&limit=200`);
    const run = await api(`/runs/${runId}`);
    return { value: listing.body.items?.find((task) => task.runId === runId), stop: ["failed", "repair_required", "terminated", "succeeded"].includes(run.body?.state), seen: run.body };
  }, `the task of run ${runId}`);
}

async function expectNoSeriousViolations(page, label) {
  const violations = await axeViolations(page);
  assert.deepEqual(violations, [], `${label}: axe found serious or critical violations:\n${JSON.stringify(violations, null, 2)}`);
}

test("sign in with the link npm start prints, build start → human_task → end in the editor, publish", { timeout: 120_000 }, async (t) => {
  onFailure(t, adminPage);
  const page = adminPage;
  await page.goto(server.signinUrl);
  await page.waitForURL(`${server.baseUrl}/`);
  await page.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
  state.signedIn = true;
  assert.equal(await page.getByTestId("role").innerText(), "Admin");

  await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Workflows", exact: true }).click();
  await page.getByLabel("Name").fill(`console-review-flow-${TAG}`);
  await page.getByRole("button", { name: "Create and open the editor" }).click();
  await page.waitForURL(/\/workflows\/[^/]+\/edit$/u);
  state.workflowId = new URL(page.url()).pathname.split("/")[2];

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
  state.versionId = new URL(page.url()).searchParams.get("published");

  const version = await api(`/workflow-versions/${state.versionId}`);
  assert.equal(version.status, 200, JSON.stringify(version.body));
  const task = version.body.graph.nodes.find((n) => n.id === "human_task");
  assert.equal(task.config.queue_id, QUEUE);
  assert.deepEqual(task.inputMapping, { category: "report.category" });
  assert.deepEqual(version.body.graph.edges.map((e) => `${e.from.nodeId}.${e.from.port}>${e.to.nodeId}`).sort(), ["human_task.completed>end", "human_task.timeout>end", "start.success>human_task"]);
});

test("a report sent through the API becomes a task; its media stays blurred until revealed", { timeout: 90_000 }, async (t) => {
  onFailure(t, adminPage);
  assert.ok(state.versionId, "the workflow was published");
  const trigger = await api("/triggers", { body: { event: "report.created", when: `report.category == 'scams_and_fraud' && report.subject.id.endsWith('-${TAG}')`, workflowVersionId: state.versionId, authorityMode: "autonomous" } });
  assert.equal(trigger.status, 201, JSON.stringify(trigger.body));
  state.triggerId = trigger.body.id;
  const report = await sendReport(`post-console-1-${TAG}`);
  const started = report.runs.filter((r) => r.triggerId === state.triggerId);
  assert.equal(started.length, 1, JSON.stringify(report));
  state.runId = started[0].runId;
  state.reportId = report.id;
  await taskOfRun(state.runId);

  const page = adminPage;
  await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Review", exact: true }).click();
  await until(
    async () => {
      await page.reload();
      await page.locator("section[data-ready]").waitFor();
      const row = page.getByRole("row").filter({ hasText: QUEUE });
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
  state.taskId = new URL(page.url()).pathname.split("/")[2];
  await page.getByTestId("submit-answer").waitFor();

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
  await page.mouse.move(600, 400);
  await page.keyboard.press("Tab");
  await sleep(1000);
  assert.match(await filter(), /blur/u, "media stays blurred while the reviewer does other things");
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

test("claim, answer with the keyboard; the run finishes; the audit chain verifies", { timeout: 90_000 }, async (t) => {
  onFailure(t, adminPage);
  assert.ok(state.taskId, "a claimed task");
  const page = adminPage;
  const claimed = await api(`/tasks/${state.taskId}`);
  assert.equal(claimed.body.state, "claimed", JSON.stringify(claimed.body));
  assert.equal(claimed.body.claim.reviewer, "admin@localhost");

  await page.keyboard.press("1");
  assert.equal(await page.getByTestId("option-outcome-remove").isChecked(), true, "key 1 chooses the first outcome");
  await page.keyboard.press("2");
  assert.equal(await page.getByTestId("option-outcome-keep").isChecked(), true, "key 2 chooses the second");
  await page.keyboard.press("1");
  await page.keyboard.press("Control+Enter");
  await page.getByTestId("task-completed").waitFor({ timeout: 15_000 });

  const task = await api(`/tasks/${state.taskId}`);
  assert.equal(task.body.state, "completed");
  assert.deepEqual(task.body.response, { outcome: "remove" });

  const run = await until(async () => {
    const current = await api(`/runs/${state.runId}`);
    return { value: current.body.state === "succeeded" ? current.body : null, stop: ["failed", "repair_required", "terminated"].includes(current.body.state), seen: current.body };
  }, "the run to succeed");
  assert.deepEqual(
    run.steps.map((s) => s.nodeId),
    ["start", "human_task", "end"],
  );

  await page.goto(`${server.baseUrl}/runs/${state.runId}`);
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

test("a viewer can read but cannot claim or approve; a moderator can reject", { timeout: 120_000 }, async (t) => {
  // An open task to look at, and an action proposal waiting for approval.
  const report = await sendReport(`post-console-2-${TAG}`);
  const openTask = await taskOfRun(report.runs.find((r) => r.triggerId === state.triggerId).runId);
  const hook = await api("/webhook-endpoints", { body: { url: "http://127.0.0.1:9/hooks", retryBaseSeconds: 1, maxAttempts: 5 } });
  assert.equal(hook.status, 201, JSON.stringify(hook.body));
  const type = await api("/action-types", { body: { key: `remove_post_${TAG}`, name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: true } });
  assert.equal(type.status, 201, JSON.stringify(type.body));
  const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
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

  const viewer = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = watch(await viewer.newPage());
  onFailure(t, page);
  try {
    await page.goto(await signinLink(server, { email: "viewer@example.org", name: "Vera Viewer", role: "viewer" }));
    await page.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
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
    await page.getByRole("heading", { level: 1 }).focus();
    await page.keyboard.press("c");
    await sleep(500);
    assert.equal((await api(`/tasks/${openTask.id}`)).body.state, "open", "the claim shortcut does nothing for a viewer");

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
  } finally {
    await viewer.close();
  }

  const moderator = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const modPage = watch(await moderator.newPage());
  onFailure(t, modPage);
  try {
    await modPage.goto(await signinLink(server, { email: "mod@example.org", name: "Mo Moderator", role: "moderator" }));
    await modPage.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
    await modPage.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Approvals", exact: true }).click();
    const card = modPage.getByTestId("proposal").filter({ hasText: `remove_post_${TAG}` });
    await card.getByTestId("reject").click();
    await card.getByLabel("Reason for rejecting").fill("Not a scam after all");
    await card.getByRole("button", { name: "Reject", exact: true }).click();
    await modPage.getByText("Nothing is waiting for approval.").waitFor();
    const decided = await api(`/action-proposals/${proposal.id}`);
    assert.equal(decided.body.state, "rejected");
    assert.equal(decided.body.reason, "Not a scam after all");
  } finally {
    await moderator.close();
  }
});

test("an invalid CEL expression shows the validator's error on its node and field", { timeout: 60_000 }, async (t) => {
  const page = await adminSignedIn();
  onFailure(t, page);
  const workflow = await api("/workflows", { body: { name: `cel-check-${TAG}` } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  await page.goto(`${server.baseUrl}/workflows/${workflow.body.id}/edit`);
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

test("the task shows what automation proposed and why (AI proposal, enrichment) before the reviewer answers", { timeout: 90_000 }, async (t) => {
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

  const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
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
  const trigger = await api("/triggers", { body: { event: "report.created", when: `report.subject.id.endsWith('-ai-${TAG}')`, workflowVersionId: version.body.id, authorityMode: "autonomous" } });
  assert.equal(trigger.status, 201, JSON.stringify(trigger.body));
  const report = await sendReport(`post-console-ai-${TAG}`);
  const task = await taskOfRun(report.runs.find((r) => r.triggerId === trigger.body.id).runId);

  const page = await adminSignedIn();
  onFailure(t, page);
  await page.goto(`${server.baseUrl}/tasks/${encodeURIComponent(task.id)}`);
  const proposal = page.getByTestId("ai-proposal");
  await proposal.waitFor();
  const text = await proposal.innerText();
  assert.match(text, /Proposed violation with 87% confidence/u);
  assert.match(text, /The post links to a domain on the scam list\./u);
  await page.getByRole("region", { name: "What automation did" }).or(page.locator('section[aria-labelledby="automation-heading"]')).getByText("history").first().waitFor();
});

test("a run in repair_required is repaired from the run inspector: route to a port with a reason", { timeout: 90_000 }, async (t) => {
  const page = await adminSignedIn();
  onFailure(t, page);
  const workflow = await api("/workflows", { body: { name: `repair-${TAG}` } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
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

  await page.goto(`${server.baseUrl}/runs/${runId}`);
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
