// Delivering an action type through a Mastodon connector instead of a Standard Webhook: the
// delivery (same row, queue, attempts and backoff as every webhook, enforcement/webhooks.ts) is
// one admin API call with the connector's bearer token — an account action
// (POST /api/v1/admin/accounts/:id/action: type, report_id, text, send_email_notification) or
// resolving the report (POST /api/v1/admin/reports/:id/resolve). 2xx is delivered; 408, 429 and
// 5xx (and timeouts, network errors) are retried with the endpoint's backoff; any other 4xx
// (422 record invalid, 403 missing scope, 404 unknown account) is permanent: dead at once.
// With tellReporters, message.send deliveries to a reporter of the server become a direct status.
//
// As Mastodon behaves: a 429 names the end of its window in `X-RateLimit-Reset` (an ISO time; no
// Retry-After), so the delivery waits until then and the throttled attempt is not counted against
// its attempts (`deferred`). Admin calls ignore `Idempotency-Key` (only posting a status keeps
// it), so after an attempt whose answer was lost (a timeout, a network error, a 5xx) the account
// is read back first: an action already applied is delivered without a second call (and a second
// warning e-mail). The connector acts only on accounts its own reports named.
import { openPersonalData } from "../cases";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { attemptRowsSql } from "../lib/delivery-attempts";
import { activeConnectorRow, configOf, tokenContext } from "./connector-rows";
import { mastodonId } from "./mastodon-mapping";
import { resolveConnectorReports } from "./mastodon-resolution";

const SCHEME = "connector://";

/** Whether a webhook endpoint's url names a connector (only connectors/ creates such rows). */
export const isConnectorEndpoint = (url: string): boolean => url.startsWith(SCHEME);

export interface TransportResult {
  status: number | null;
  error: string | null;
  retryAfter: number | null;
  /** The delivery can never succeed as it is: dead now, not after maxAttempts. */
  permanent: boolean;
  /** Throttled with a known end (429 and X-RateLimit-Reset or Retry-After): wait, and do not count it as an attempt. */
  deferred?: boolean;
}

/** The error an attempt that was deferred by a rate limit records (webhooks.ts counts attempts without them). */
export const RATE_LIMITED = "rate_limited";

const refused = (error: string): TransportResult => ({ status: null, error, retryAfter: null, permanent: true });

interface ActionPayload {
  type?: string;
  data?: { actionType?: unknown; reportId?: unknown; subject?: { kind?: unknown; id?: unknown } | null; params?: Record<string, unknown> | null; proposalId?: unknown };
}

interface MessagePayload {
  type?: string;
  data?: { kind?: unknown; body?: unknown; reportId?: unknown; recipient?: { kind?: unknown; contact?: unknown } | null; facts?: Record<string, unknown> | null };
}

/**
 * The Mastodon report and account an action is about: the connector's record of the report, else
 * an account subject of this server — but only an account one of this connector's own reports
 * named. Any other account (an admin's, say, named in a report made through the API) is never
 * acted on with the moderator's token.
 */
async function targetOf(env: Env, connector: { id: string; installationId: string; baseUrl: string }, data: NonNullable<ActionPayload["data"]>): Promise<{ accountId: string; remoteReportId: string | null } | null> {
  if (typeof data.reportId === "string") {
    const known = await env.DB.prepare(`SELECT remote_report_id AS remoteReportId, target_account_id AS accountId FROM connector_reports WHERE installation_id = ?1 AND connector_id = ?2 AND report_id = ?3`)
      .bind(connector.installationId, connector.id, data.reportId)
      .first<{ remoteReportId: string; accountId: string }>();
    if (known) return known;
  }
  const prefix = mastodonId(new URL(connector.baseUrl).host, "account", "");
  const subjectId = typeof data.subject?.id === "string" ? data.subject.id : "";
  if (data.subject?.kind !== "account" || !subjectId.startsWith(prefix) || subjectId.length <= prefix.length) return null;
  const accountId = subjectId.slice(prefix.length);
  const named = await env.DB.prepare(`SELECT 1 AS found FROM connector_reports WHERE connector_id = ?1 AND target_account_id = ?2 AND installation_id = ?3 LIMIT 1`)
    .bind(connector.id, accountId, connector.installationId)
    .first<{ found: number }>();
  return named ? { accountId, remoteReportId: null } : null;
}

/** Seconds until Mastodon's rate-limit window ends (`X-RateLimit-Reset`: an ISO time, or Unix seconds), or null. */
export function rateLimitResetOf(value: string | null, now = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  const at = /^\d{9,11}$/u.test(text) ? Number(text) * 1000 : Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}

/** How each account action shows on the Admin::Account it was applied to (`none`, a warning, shows nowhere there). */
const APPLIED_FLAG: Record<string, string> = { suspend: "suspended", silence: "silenced", sensitive: "sensitized", disable: "disabled" };

/** Whether this delivery's last attempt may have reached Mastodon without its answer reaching us. */
async function answerLost(env: Env, deliveryId: string): Promise<boolean> {
  const last = await env.DB.prepare(`SELECT status_code AS status, error FROM (${attemptRowsSql("d.id = ?1", "attempt DESC")}) LIMIT 1`)
    .bind(deliveryId)
    .first<{ status: number | null; error: string | null }>();
  if (!last || last.error === RATE_LIMITED) return false;
  return last.status === null ? last.error === "timeout" || last.error === "network_error" || last.error === "connector_error" : last.status >= 500;
}

/**
 * Reads back whether an account action is already applied: the account's flag, or for a warning
 * tied to a report, whether that report was resolved by it. `unknown`: a warning without a report
 * leaves nothing to read back; a TransportResult: the read itself failed (try again later).
 */
async function appliedAlready(baseUrl: string, token: string, verb: string, target: { accountId: string; remoteReportId: string | null }, timeoutMs: number): Promise<boolean | "unknown" | TransportResult> {
  const path = APPLIED_FLAG[verb] ? `/api/v1/admin/accounts/${encodeURIComponent(target.accountId)}` : target.remoteReportId ? `/api/v1/admin/reports/${encodeURIComponent(target.remoteReportId)}` : null;
  if (!path) return "unknown";
  try {
    const response = await fetch(`${baseUrl}${path}`, {
      method: "GET",
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
      headers: { authorization: `Bearer ${token}`, "user-agent": "SafestTools-Connectors/1", accept: "application/json" },
    });
    if (response.status !== 200) {
      await response.body?.cancel();
      const transient = response.status === 408 || response.status === 429 || response.status >= 500;
      return { status: response.status, error: "read_back_failed", retryAfter: retryAfterOf(response.headers.get("retry-after")) ?? rateLimitResetOf(response.headers.get("x-ratelimit-reset")), permanent: !transient };
    }
    const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    return APPLIED_FLAG[verb] ? body[APPLIED_FLAG[verb]!] === true : body.action_taken === true;
  } catch (failure) {
    return { status: null, error: failure instanceof Error && failure.name === "TimeoutError" ? "timeout" : "network_error", retryAfter: null, permanent: false };
  }
}

function retryAfterOf(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d{1,10}$/u.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, (date - Date.now()) / 1000);
}

/**
 * One attempt of a delivery whose endpoint is a connector's. Never throws for the product's
 * answer; what it could not even try (connector deleted, action type not mapped, no Mastodon
 * account to act on, a refused URL) is permanent. Nothing is logged but codes.
 */
export async function sendThroughConnector(env: Env, input: { installationId: string; deliveryId: string; endpointUrl: string; payloadSealed: string; timeoutMs: number }): Promise<TransportResult> {
  const connector = await activeConnectorRow(env.DB, input.installationId, input.endpointUrl.slice(SCHEME.length));
  if (!connector?.accessTokenSealed) return refused("connector_missing");
  const payload = await openPersonalData<ActionPayload & MessagePayload>(env, input.installationId, `webhook_delivery:${input.deliveryId}`, input.payloadSealed);
  if (payload?.type === "message.send" && payload.data) return sendDirectMessage(env, connector, payload as MessagePayload, input);
  if (payload?.type !== "action.execute" || !payload.data) return refused("connector_event_unsupported");
  const verb = typeof payload.data.actionType === "string" ? ownValue(configOf(connector).actions, payload.data.actionType) : undefined;
  if (!verb) return refused("connector_action_unmapped");
  const target = await targetOf(env, connector, payload.data);
  if (!target) return refused("connector_target_unknown");
  if (verb === "resolve" && !target.remoteReportId) return refused("connector_report_unknown");
  if (egressRefusal(connector.baseUrl, { allowLocal: allowLocalEgress(env) })) return refused("egress_refused");
  const { token } = await openPersonalData<{ token: string }>(env, input.installationId, tokenContext(connector.id), connector.accessTokenSealed);
  const params = payload.data.params ?? {};
  if (verb !== "resolve" && (await answerLost(env, input.deliveryId))) {
    // Mastodon ignores Idempotency-Key on admin calls: a second call would repeat the action and its e-mail.
    const applied = await appliedAlready(connector.baseUrl, token, verb, target, input.timeoutMs);
    if (applied === true) {
      await afterApplied(env, connector, verb, target);
      return { status: 200, error: null, retryAfter: null, permanent: false };
    }
    if (applied === "unknown") return refused("connector_outcome_unknown");
    if (applied !== false) return applied;
  }
  let url: string;
  let body: URLSearchParams | undefined;
  if (verb === "resolve") {
    url = `${connector.baseUrl}/api/v1/admin/reports/${encodeURIComponent(target.remoteReportId!)}/resolve`;
  } else {
    url = `${connector.baseUrl}/api/v1/admin/accounts/${encodeURIComponent(target.accountId)}/action`;
    body = new URLSearchParams({ type: verb });
    if (target.remoteReportId) body.set("report_id", target.remoteReportId);
    if (typeof params.text === "string" && params.text.length > 0) body.set("text", params.text.slice(0, 5000));
    const notify = typeof params.notify === "boolean" ? params.notify : configOf(connector).notifyByEmail;
    body.set("send_email_notification", notify ? "true" : "false");
  }
  const result = await post(url, token, body, input);
  if (result.status !== null && result.status >= 200 && result.status < 300) await afterApplied(env, connector, verb, target);
  return result;
}

/**
 * What an applied call resolved on Mastodon's side, mirrored on ours: resolving resolves that
 * report; a warning (`none`) tied to a report resolves that one; any other account action resolves
 * every open report about the account, as Mastodon does. Best effort: Mastodon's report.updated
 * webhooks say the same.
 */
async function afterApplied(env: Env, connector: { id: string; installationId: string }, verb: string, target: { accountId: string; remoteReportId: string | null }): Promise<void> {
  const scope = verb === "resolve" || verb === "none" ? (target.remoteReportId ? { remoteReportId: target.remoteReportId } : null) : { accountId: target.accountId };
  if (!scope) return;
  await resolveConnectorReports(env, connector, scope, verb === "resolve" || verb === "none" ? "report" : "account_action").catch(() => []);
}

/** One admin API call: 2xx delivered; 408, 429, 5xx and network failures retried; any other answer permanent. */
async function post(url: string, token: string, body: URLSearchParams | undefined, input: { deliveryId: string; timeoutMs: number }): Promise<TransportResult> {
  try {
    const response = await fetch(url, {
      method: "POST",
      // The token never follows a redirect to another address.
      redirect: "manual",
      signal: AbortSignal.timeout(input.timeoutMs),
      // Idempotency-Key: Mastodon keeps a status posted under it, so a retried message is posted once.
      // Its admin calls ignore the header, so it is sent only with a status (admin calls read back instead).
      headers: {
        authorization: `Bearer ${token}`,
        "user-agent": "SafestTools-Connectors/1",
        accept: "application/json",
        ...(url.endsWith("/api/v1/statuses") ? { "idempotency-key": input.deliveryId } : {}),
        ...(body ? {} : { "content-type": "application/x-www-form-urlencoded" }),
      },
      ...(body ? { body } : {}),
    });
    await response.body?.cancel();
    const status = response.status;
    const transient = status === 408 || status === 429 || status >= 500;
    const ok = status >= 200 && status < 300;
    const retryAfter = retryAfterOf(response.headers.get("retry-after")) ?? (status === 429 ? rateLimitResetOf(response.headers.get("x-ratelimit-reset")) : null);
    // Throttled until a known time: the delivery waits for it and the attempt does not count.
    if (status === 429 && retryAfter !== null) return { status, error: RATE_LIMITED, retryAfter, permanent: false, deferred: true };
    return { status, error: null, retryAfter, permanent: !ok && !transient };
  } catch (failure) {
    return { status: null, error: failure instanceof Error && failure.name === "TimeoutError" ? "timeout" : "network_error", retryAfter: null, permanent: false };
  }
}

/** Mastodon's default status length; mentions and text count in characters. */
const STATUS_LIMIT = 500;

/**
 * The decision on a notice, short enough for one status: what was decided and the redress (the
 * complaint's deadline and reference, out-of-court settlement, courts); the reasons as far as
 * they fit. Other messages: their body, shortened to fit.
 */
export function directMessageText(handle: string, data: NonNullable<MessagePayload["data"]>, remoteReportId: string | null = null): string {
  const facts = data.facts ?? {};
  // The reporter knows their report by Mastodon's number, never by ours.
  const theirReport = remoteReportId ? `your report #${unmention(remoteReportId)}` : "your report";
  if (data.kind === "notice_receipt") {
    const kind = (facts.subject as { kind?: unknown } | undefined)?.kind;
    const about = kind === "account" ? " about an account" : kind === "content" ? " about a post" : "";
    return `${handle} Thank you for ${theirReport}${about}. We will review it and tell you our decision and how you can contest it.`.slice(0, STATUS_LIMIT);
  }
  if (data.kind !== "notice_decision") {
    const body = typeof data.body === "string" ? unmention(data.body) : "";
    const text = `${handle} ${body}`;
    return text.length <= STATUS_LIMIT ? text : `${text.slice(0, STATUS_LIMIT - 1)}…`;
  }
  const restrictions = Object.entries((facts.restrictions as Record<string, unknown> | null) ?? {}).map(([kind, value]) => `${kind.replace(/_/gu, " ")}: ${[value].flat().join(", ").replace(/_/gu, " ")}`);
  const redress = (facts.redress as { internalComplaint?: { until?: string; reference?: string } } | undefined)?.internalComplaint;
  const decided = facts.restricts ? `we restricted what you reported (${unmention(restrictions.join("; "))}).` : "we took no action against what you reported.";
  const head = `${handle} Thank you for ${theirReport}. After review, ${decided}`;
  const tail = ` You can complain about this decision until ${unmention(String(redress?.until ?? "").slice(0, 10))} (reference ${unmention(String(redress?.reference ?? ""))}) with our moderators, refer it to an out-of-court dispute settlement body (DSA Art. 21), or go to court.`;
  const statement = typeof facts.statement === "string" && facts.statement ? ` Reasons: ${unmention(facts.statement)}` : "";
  const room = STATUS_LIMIT - head.length - tail.length;
  const reasons = statement.length <= room ? statement : room > 12 ? `${statement.slice(0, room - 1)}…` : "";
  return `${head}${reasons}${tail}`.slice(0, STATUS_LIMIT);
}

/**
 * A direct status is seen by everyone it mentions: an `@` in the body or the reasons (a template,
 * or text quoted from a report) would add recipients. A zero-width space after each `@` keeps the
 * text readable and mentions nobody; only the leading handle mentions.
 */
export const unmention = (text: string) => text.replace(/@/gu, "@\u200B");

const ownValue = <T>(map: Record<string, T>, key: string): T | undefined => (Object.hasOwn(map, key) ? map[key] : undefined);

/**
 * A message to a reporter of this server (message.send with an @handle contact, which intake
 * stores for local reporters) as a direct status from the token's account
 * (POST /api/v1/statuses, visibility direct). A message with no handle to reach is dead
 * (`connector_recipient_unknown`): nobody on this server can be told through Mastodon.
 */
async function sendDirectMessage(
  env: Env,
  connector: { id: string; baseUrl: string; accessTokenSealed: string | null },
  payload: MessagePayload,
  input: { installationId: string; deliveryId: string; timeoutMs: number },
): Promise<TransportResult> {
  const contact = typeof payload.data?.recipient?.contact === "string" ? payload.data.recipient.contact : "";
  if (payload.data?.recipient?.kind !== "reporter" || !/^@[A-Za-z0-9_]{1,30}$/u.test(contact)) return refused("connector_recipient_unknown");
  // Only the reporter of a report this connector took in: an @handle alone could name anyone, on
  // this server or another connector's (a report sent through the API can carry any contact).
  const reportId = typeof payload.data.reportId === "string" ? payload.data.reportId : "";
  const ours = await env.DB.prepare(`SELECT remote_report_id AS remoteReportId FROM connector_reports WHERE installation_id = ?1 AND connector_id = ?2 AND report_id = ?3`)
    .bind(input.installationId, connector.id, reportId)
    .first<{ remoteReportId: string }>();
  if (!ours) return refused("connector_recipient_unknown");
  if (egressRefusal(connector.baseUrl, { allowLocal: allowLocalEgress(env) })) return refused("egress_refused");
  const { token } = await openPersonalData<{ token: string }>(env, input.installationId, tokenContext(connector.id), connector.accessTokenSealed!);
  const body = new URLSearchParams({ status: directMessageText(contact, payload.data!, ours.remoteReportId), visibility: "direct" });
  return post(`${connector.baseUrl}/api/v1/statuses`, token, body, input);
}
