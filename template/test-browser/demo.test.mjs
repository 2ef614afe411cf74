// The demo desk in a real browser, on a server of its own: `npm start` on a fresh state folder
// seeds it (the state this test starts from, which no other test shares); the demo admin
// signs in with the printed link, sees the seeded proposals waiting, approves one in the console,
// and the bundled demo product's page shows that action arriving with a verified Standard Webhooks
// signature. axe-core finds no serious or critical issue on the demo product's page.
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { api as apiFor, startServer } from "../test-node/harness.mjs";
import { axeViolations, buildConsole, serverAndBrowser, until } from "./harness.mjs";

let server;
let browser;
let api;

before(
  async () => {
    buildConsole();
    ({ server, browser } = await serverAndBrowser(() => startServer({ label: "browser-demo", readyTimeoutMs: 240_000, signin: true, args: [] })));
    api = apiFor(server.baseUrl, server.apiKey, { prefix: "/api/v1" });
  },
  { timeout: 400_000 },
);

after(async () => {
  await browser?.close().catch(() => undefined);
  await server?.stop();
});

test("approve a seeded proposal in the console; the demo product shows the signed action, verified", { timeout: 180_000 }, async (t) => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  t.after(async () => {
    if (t.passed !== false) return;
    const shot = path.join(tmpdir(), "safest-demo-desk.png");
    await page.screenshot({ path: shot, fullPage: true }).catch(() => undefined);
    console.error(`page ${page.url()} (screenshot ${shot}); browser errors: ${errors.join("\n")}\nserver output:\n${server.output().slice(-6000)}`);
  });

  const waiting = await api("/action-proposals?state=approval_required&limit=200");
  assert.equal(waiting.status, 200, JSON.stringify(waiting.body));
  assert.ok(waiting.body.items.length >= 1, "the seeded spam triage left proposals waiting");

  await page.goto(server.signinUrl);
  await page.waitForURL((url) => !url.pathname.startsWith("/console/signin"), { timeout: 30_000 });
  await page.goto(`${server.baseUrl}/approvals`);
  await page.getByRole("heading", { level: 1, name: "Approvals" }).waitFor();
  const first = page.getByTestId("proposal").first();
  await first.waitFor();
  const cards = await page.getByTestId("proposal").count();
  assert.equal(cards, waiting.body.items.length, "every waiting proposal is listed");
  // The card links its run: that names the proposal being approved.
  const runHref = await first.locator('a[href^="/runs/"]').first().getAttribute("href");
  const proposal = waiting.body.items.find((p) => `/runs/${encodeURIComponent(p.runId)}` === runHref);
  assert.ok(proposal, `a waiting proposal of ${runHref}`);
  const proposalId = proposal.id;
  await first.getByTestId("approve").click();
  await page.getByText(/Approved remove_content; it is being delivered\./u).waitFor({ timeout: 30_000 });
  const decided = await api(`/action-proposals/${encodeURIComponent(proposalId)}`);
  assert.notEqual(decided.body.state, "approval_required", JSON.stringify(decided.body));
  assert.equal(decided.body.decidedBy !== null, true, JSON.stringify(decided.body));

  // The demo product's page, reloaded until the delivery has arrived (the outbox sends it at once).
  const product = await context.newPage();
  const row = product.locator(`[data-testid="received"][data-type="action.execute"][data-proposal-id="${proposalId}"]`);
  await until(
    async () => {
      await product.goto(`${server.baseUrl}/demo/product`);
      return { value: (await row.count()) > 0, seen: await product.locator("main").innerText() };
    },
    "the approved action to reach the demo product",
    60_000,
    1_000,
  );
  assert.equal(await row.getAttribute("data-verified"), "true");
  assert.match(await row.innerText(), /remove_content/u);
  assert.match(await row.innerText(), /verified/u);
  assert.match(await product.getByRole("heading", { level: 1 }).innerText(), /Demo product/u);
  assert.deepEqual(await axeViolations(product), []);
  assert.deepEqual(errors, []);
  await context.close();
});
