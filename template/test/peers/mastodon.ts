// A Mastodon server as a peer Worker for tests (host mastodon.test), speaking what Mastodon's
// documentation says (mastodon/documentation: content/en/admin/webhooks.md,
// methods/admin/accounts.md, methods/admin/reports.md, entities/Admin_Report.md):
// - its admin webhooks: GET /_control/report-created?id=&statuses=N&category=&rules=1,2&secret=
//   answers {body, signature}: a `report.created` event whose object is an Admin::Report shaped as
//   the documentation's example (reporter, target account, N statuses, rules), and the
//   `X-Hub-Signature` value Mastodon sends with it: `sha256=` + hex HMAC-SHA256 of the body;
// - POST /api/v1/admin/accounts/:id/action (form or JSON: type none|sensitive|disable|silence|
//   suspend, report_id, text, send_email_notification) → 200 {}; an unknown type → 422
//   {"error":"Record invalid"}; POST /api/v1/admin/reports/:id/resolve → 200 Admin::Report;
//   POST /api/v1/statuses (status, visibility) → 200 Status, 422 over 500 characters;
// - a bearer token the test registered (POST /_control/token {token}) or 401
//   {"error":"The access token is invalid"}.
// - GET /api/v1/admin/accounts/:id → Admin::Account, its suspended/silenced/sensitized/disabled
//   as the actions left them; GET /api/v1/admin/reports/:id → Admin::Report with action_taken;
// - as Mastodon does: an account action other than `none` resolves every open report about the
//   account, a `none` (warning) only the report it names; admin calls ignore Idempotency-Key, so
//   a repeated call repeats the action (each warning is counted: GET /_control/warnings?token=&account=);
//   a throttled call is a 429 with `X-RateLimit-Reset` (an ISO time) and no Retry-After.
// Test controls: POST /_control/plan {token, plan: [{status, lost?, resetInSeconds?}]} — the next
// POSTs with that token answer those statuses (e.g. 422, 503; 429 with X-RateLimit-Reset that
// many seconds ahead); `lost: true` applies the call first, then answers the status (an answer
// lost on the way back). GET /_control/log?token= lists every admin call. report-created takes
// `event=report.updated&action_taken=true` for the update webhook.

interface Call {
  method: string;
  path: string;
  form: Record<string, string>;
  authorization: string | null;
  status: number;
  at: number;
}

interface Planned {
  status: number;
  lost?: boolean;
  resetInSeconds?: number;
}

const tokens = new Set<string>();
const plans = new Map<string, Planned[]>();
/** Account flags the actions set, warnings given, and the reports each made resolved — per token (each test's own server). */
const accounts = new Map<string, { suspended: boolean; silenced: boolean; sensitized: boolean; disabled: boolean; warnings: number }>();
const reportTargets = new Map<string, string>();
const resolvedReports = new Set<string>();
const accountState = (id: string) => {
  let found = accounts.get(id);
  if (!found) {
    found = { suspended: false, silenced: false, sensitized: false, disabled: false, warnings: 0 };
    accounts.set(id, found);
  }
  return found;
};
const FLAGS: Record<string, "suspended" | "silenced" | "sensitized" | "disabled"> = { suspend: "suspended", silence: "silenced", sensitive: "sensitized", disable: "disabled" };

/** What POST /api/v1/admin/accounts/:id/action does (app/models/admin/account_action.rb): the flag, then the reports. */
function applyAccountAction(token: string, id: string, form: Record<string, string>) {
  const state = accountState(`${token}:${id}`);
  if (form.type === "none") state.warnings += 1;
  else state[FLAGS[form.type!]!] = true;
  if (form.type === "none") {
    if (form.report_id) resolvedReports.add(`${token}:${form.report_id}`);
  } else for (const [reportId, target] of reportTargets) if (target === id) resolvedReports.add(`${token}:${reportId}`);
}
const log: Call[] = [];
const ACCOUNT_ACTIONS = ["none", "sensitive", "disable", "silence", "suspend"];
const encoder = new TextEncoder();

async function hubSignature(secret: string, body: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(body)));
  return `sha256=${[...mac].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** An Account entity (the public part of Admin::Account). */
function account(id: string, username: string, domain: string | null) {
  const host = domain ?? "mastodon.test";
  return {
    id,
    username,
    acct: domain ? `${username}@${domain}` : username,
    display_name: username,
    locked: false,
    bot: false,
    group: false,
    created_at: "2023-07-13T00:00:00.000Z",
    note: "",
    url: `https://${host}/@${username}`,
    uri: `https://${host}/users/${username}`,
    avatar: `https://${host}/avatars/original/missing.png`,
    followers_count: 2,
    following_count: 2,
    statuses_count: 95,
    emojis: [],
    fields: [],
  };
}

/** An Admin::Account: e-mail, IPs and locale of a local account, nulls for a remote one. */
function adminAccount(id: string, username: string, domain: string | null) {
  return {
    id,
    username,
    domain,
    created_at: "2023-07-13T04:39:22.493Z",
    email: domain ? null : `${username}@mail.example`,
    ip: domain ? null : "12.34.56.78",
    confirmed: domain ? null : true,
    suspended: false,
    silenced: false,
    sensitized: false,
    disabled: domain ? null : false,
    approved: domain ? null : true,
    locale: domain ? null : "de",
    invite_request: null,
    ips: domain ? null : [{ ip: "12.34.56.78", used_at: "2023-07-13T04:45:31.835Z" }],
    account: account(id, username, domain),
    role: null,
  };
}

function reportCreated(url: URL) {
  const id = url.searchParams.get("id") ?? "8437";
  const statuses = Number(url.searchParams.get("statuses") ?? 1);
  const targetId = url.searchParams.get("target") ?? "123454321";
  const ruleIds = (url.searchParams.get("rules") ?? "").split(",").filter(Boolean);
  const target = account(targetId, "cheeseperson", "someothermastodonsite.com");
  reportTargets.set(id, targetId);
  const actionTaken = url.searchParams.get("action_taken") === "true";
  return {
    event: url.searchParams.get("event") ?? "report.created",
    created_at: "2023-10-26T13:34:00.351Z",
    object: {
      id,
      action_taken: actionTaken,
      action_taken_at: null,
      category: url.searchParams.get("category") ?? "violation",
      comment: url.searchParams.get("comment") ?? "",
      forwarded: true,
      created_at: "2023-10-26T13:34:00.348Z",
      updated_at: "2023-10-26T13:34:00.348Z",
      account: adminAccount("123456789", "bobisaburger", null),
      target_account: adminAccount(targetId, "cheeseperson", "someothermastodonsite.com"),
      assigned_account: null,
      action_taken_by_account: null,
      statuses: Array.from({ length: statuses }, (_, index) => ({
        id: `1230000000000000${index + 1}`,
        created_at: "2023-10-26T11:29:13.000Z",
        in_reply_to_id: null,
        in_reply_to_account_id: null,
        sensitive: false,
        spoiler_text: "",
        visibility: "public",
        language: "de",
        uri: `https://someothermastodonsite.com/users/cheeseperson/statuses/11130108336037162${index}`,
        url: `https://someothermastodonsite.com/@cheeseperson/11130108336037162${index}`,
        replies_count: 0,
        reblogs_count: 0,
        favourites_count: 0,
        edited_at: null,
        content: `<p>Reported post number ${index + 1}</p>`,
        reblog: null,
        account: target,
        media_attachments: [],
        mentions: [],
        tags: [],
        emojis: [],
        card: null,
        poll: null,
      })),
      rules: ruleIds.map((ruleId) => ({ id: ruleId, text: `Server rule ${ruleId}` })),
    },
  };
}

async function formOf(request: Request): Promise<Record<string, string>> {
  const type = request.headers.get("content-type") ?? "";
  if (type.includes("application/json")) return Object.fromEntries(Object.entries((await request.json()) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  return Object.fromEntries(new URLSearchParams(new TextDecoder().decode(await request.arrayBuffer())));
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/_control/report-created") {
      const body = JSON.stringify(reportCreated(url));
      return Response.json({ body, signature: await hubSignature(url.searchParams.get("secret") ?? "", body) });
    }
    if (url.pathname === "/_control/token") {
      tokens.add(((await request.json()) as { token: string }).token);
      return new Response("ok");
    }
    if (url.pathname === "/_control/plan") {
      const { token, plan } = (await request.json()) as { token: string; plan: Planned[] };
      plans.set(token, plan);
      return new Response("ok");
    }
    if (url.pathname === "/_control/warnings") return Response.json({ warnings: accountState(`${url.searchParams.get("token")}:${url.searchParams.get("account")}`).warnings });
    if (url.pathname === "/_control/log") {
      const token = url.searchParams.get("token");
      return Response.json(log.filter((call) => token === null || call.authorization === `Bearer ${token}`));
    }
    const authorization = request.headers.get("authorization");
    const form = request.method === "POST" ? await formOf(request) : {};
    const call: Call = { method: request.method, path: url.pathname, form, authorization, status: 200, at: Date.now() };
    log.push(call);
    const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      call.status = status;
      return Response.json(body, { status, headers });
    };
    const token = authorization?.startsWith("Bearer ") ? authorization.slice(7) : null;
    if (!token || !tokens.has(token)) return answer(401, { error: "The access token is invalid" });
    const planned = request.method === "POST" ? plans.get(token)?.shift() : undefined;
    const action = /^\/api\/v1\/admin\/accounts\/([^/]+)\/action$/u.exec(url.pathname);
    if (planned !== undefined && !planned.lost) {
      if (planned.status === 429) {
        // Mastodon's rack-attack throttle: the window's end as an ISO time, no Retry-After.
        const reset = new Date(Date.now() + (planned.resetInSeconds ?? 60) * 1000).toISOString();
        return answer(429, { error: "Too many requests" }, { "x-ratelimit-limit": "300", "x-ratelimit-remaining": "0", "x-ratelimit-reset": reset });
      }
      return answer(planned.status, { error: planned.status === 422 ? "Record invalid" : "Service unavailable" });
    }
    if (request.method === "POST" && action) {
      if (!ACCOUNT_ACTIONS.includes(form.type ?? "")) return answer(422, { error: "Record invalid" });
      applyAccountAction(token, action[1]!, form);
      if (planned?.lost) return answer(planned.status, { error: "Gateway timeout" });
      return answer(200, {});
    }
    const readAccount = /^\/api\/v1\/admin\/accounts\/([^/]+)$/u.exec(url.pathname);
    if (request.method === "GET" && readAccount) {
      const { warnings: _warnings, ...flags } = accountState(`${token}:${readAccount[1]}`);
      return answer(200, { ...adminAccount(readAccount[1]!, "cheeseperson", "someothermastodonsite.com"), ...flags });
    }
    const readReport = /^\/api\/v1\/admin\/reports\/([^/]+)$/u.exec(url.pathname);
    if (request.method === "GET" && readReport) return answer(200, { id: readReport[1], action_taken: resolvedReports.has(`${token}:${readReport[1]}`) });
    if (request.method === "POST" && url.pathname === "/api/v1/statuses") {
      // Mastodon's default limit is 500 characters; a direct status needs visibility=direct.
      if (!form.status || [...form.status].length > 500) return answer(422, { error: "Validation failed: Text character limit of 500 exceeded" });
      return answer(200, { id: `${Date.now()}`, visibility: form.visibility ?? "public", content: `<p>${form.status}</p>` });
    }
    const resolve = /^\/api\/v1\/admin\/reports\/([^/]+)\/resolve$/u.exec(url.pathname);
    if (request.method === "POST" && resolve) {
      resolvedReports.add(`${token}:${resolve[1]}`);
      const at = new Date().toISOString();
      return answer(200, { id: resolve[1], action_taken: true, action_taken_at: at, category: "violation", comment: "", forwarded: false, created_at: at, updated_at: at });
    }
    return answer(404, { error: "Record not found" });
  },
};
