// The demo product's page (/demo/product): the actions, messages and handoffs it received from the
// platform, each with whether its Standard Webhooks signature verified. Plain HTML, no script.
import type { Received } from "./product";

const escapeHtml = (value: unknown): string => String(value ?? "").replace(/[&<>"']/gu, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);

type Data = Record<string, unknown>;
const field = (data: unknown, ...path: string[]): unknown => path.reduce<unknown>((value, key) => (value && typeof value === "object" ? (value as Data)[key] : undefined), data);

function verifiedCell(item: Received): string {
  return item.verified ? `<td class="ok">✔ verified</td>` : `<td class="bad">✘ not verified<br><span class="small">${escapeHtml(item.problem)}</span></td>`;
}

function rowAttributes(item: Received): string {
  const proposal = field(item.data, "proposalId");
  return `data-testid="received" data-type="${escapeHtml(item.type)}" data-verified="${item.verified}" data-webhook-id="${escapeHtml(item.webhookId)}"${proposal ? ` data-proposal-id="${escapeHtml(proposal)}"` : ""}`;
}

function subjectOf(data: unknown): string {
  const subject = field(data, "subject") as Data | null | undefined;
  return subject ? `${escapeHtml(subject.kind)} <code>${escapeHtml(subject.id)}</code>` : "—";
}

function actionsTable(items: Received[]): string {
  if (items.length === 0) return `<p>No action received yet. Approve a proposal in the console (Approvals) and it arrives here.</p>`;
  const rows = items.map(
    (item) =>
      `<tr ${rowAttributes(item)}><td><time datetime="${escapeHtml(item.receivedAt)}">${escapeHtml(item.receivedAt)}</time></td><td><code>${escapeHtml(field(item.data, "actionType"))}</code></td><td>${subjectOf(item.data)}</td><td>${escapeHtml(field(item.data, "authorityMode"))}${field(item.data, "approvedBy") ? ` — approved by ${escapeHtml(field(item.data, "approvedBy"))}` : ""}</td>${verifiedCell(item)}</tr>`,
  );
  return `<table><caption>Actions (action.execute), newest first</caption><thead><tr><th scope="col">Received</th><th scope="col">Action</th><th scope="col">Subject</th><th scope="col">Mode</th><th scope="col">Signature</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

function messagesTable(items: Received[]): string {
  if (items.length === 0) return `<p>No message received yet.</p>`;
  const rows = items.map((item) => {
    const recipient = field(item.data, "recipient") as Data | null | undefined;
    const who = recipient ? `${escapeHtml(recipient.kind)}${recipient.contact ? ` (${escapeHtml(recipient.contact)})` : recipient.id ? ` (${escapeHtml(recipient.id)})` : ""}` : "—";
    const body = String(field(item.data, "body") ?? "");
    return `<tr ${rowAttributes(item)}><td><time datetime="${escapeHtml(item.receivedAt)}">${escapeHtml(item.receivedAt)}</time></td><td>${who}</td><td class="body">${escapeHtml(body.length > 600 ? `${body.slice(0, 600)}…` : body)}</td>${verifiedCell(item)}</tr>`;
  });
  return `<table><caption>Messages (message.send) the product would send its users, newest first</caption><thead><tr><th scope="col">Received</th><th scope="col">To</th><th scope="col">Text</th><th scope="col">Signature</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

function otherTable(items: Received[]): string {
  if (items.length === 0) return `<p>Nothing else received.</p>`;
  const rows = items.map(
    (item) =>
      `<tr ${rowAttributes(item)}><td><time datetime="${escapeHtml(item.receivedAt)}">${escapeHtml(item.receivedAt)}</time></td><td><code>${escapeHtml(item.type ?? "unknown")}</code></td><td>${escapeHtml(item.hook)}</td>${verifiedCell(item)}</tr>`,
  );
  return `<table><caption>Handoffs and other deliveries, newest first</caption><thead><tr><th scope="col">Received</th><th scope="col">Type</th><th scope="col">Hook</th><th scope="col">Signature</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

export function productPage(items: Received[]): string {
  const actions = items.filter((i) => i.type === "action.execute");
  const messages = items.filter((i) => i.type === "message.send");
  const other = items.filter((i) => i.type !== "action.execute" && i.type !== "message.send");
  const verified = items.filter((i) => i.verified).length;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Demo product — Safest Tools</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#5b2a86;color:#fff;padding:1rem 1.5rem}header p{margin:.25rem 0 0}
main{padding:1rem 1.5rem;max-width:80rem}
.banner{background:#fff4ce;border:1px solid #8a6d00;padding:.5rem .75rem;border-radius:4px}
table{border-collapse:collapse;width:100%;background:#fff;margin:.5rem 0 1.5rem}caption{text-align:left;font-weight:600;padding:.25rem 0}
th,td{border:1px solid #c9ced6;padding:.35rem .5rem;text-align:left;vertical-align:top}
.ok{color:#0b6b2b;font-weight:600}.bad{color:#a4161a;font-weight:600}.small{font-size:.85em;font-weight:400}
.body{white-space:pre-wrap;max-width:40rem}a{color:#3b1a5a}header a{color:#fff}
</style></head>
<body><header><h1>Demo product</h1><p>A stand-in for your product, bundled with <code>npm start</code> — <strong>demo only</strong>: no real users, no real posts.</p></header>
<main>
<p class="banner">This page shows what the platform sent to the demo product's webhooks, and whether each <a href="https://www.standardwebhooks.com/">Standard Webhooks</a> signature verified with the endpoint's secret. ${items.length} received, ${verified} verified. <a href="/demo/product">Refresh</a> · <a href="/demo/product/received">as JSON</a></p>
<h2>Actions</h2>${actionsTable(actions)}
<h2>Messages</h2>${messagesTable(messages)}
<h2>Other deliveries</h2>${otherTable(other)}
</main></body></html>`;
}
