// Delivering an action type through a Mastodon connector instead of a Standard Webhook: the
// delivery (same row, queue, attempts and backoff as every webhook, enforcement/webhooks.ts) is
// one admin API call with the connector's bearer token — an account action
// (POST /api/v1/admin/accounts/:id/action: type, report_id, text, send_email_notification) or
// resolving the report (POST /api/v1/admin/reports/:id/resolve). 2xx is delivered; 408, 429 and
// 5xx (and timeouts, network errors) are retried with the endpoint's backoff; any other 4xx
// (422 record invalid, 403 missing scope, 404 unknown account) is permanent: dead at once.
import { openPersonalData } from "../cases";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { activeConnectorRow, configOf, tokenContext } from "./connector-rows";
import { mastodonId } from "./mastodon-mapping";

const SCHEME = "connector://";

/** Whether a webhook endpoint's url names a connector (only connectors/ creates such rows). */
export const isConnectorEndpoint = (url: string): boolean => url.startsWith(SCHEME);

export interface TransportResult {
  status: number | null;
  error: string | null;
  retryAfter: number | null;
  /** The delivery can never succeed as it is: dead now, not after maxAttempts. */
  permanent: boolean;
}

const refused = (error: string): TransportResult => ({ status: null, error, retryAfter: null, permanent: true });

interface ActionPayload {
  type?: string;
  data?: { actionType?: unknown; reportId?: unknown; subject?: { kind?: unknown; id?: unknown } | null; params?: Record<string, unknown> | null; proposalId?: unknown };
}

/** The Mastodon report and account an action is about: the connector's record of the report, else an account subject of this server. */
async function targetOf(env: Env, connector: { id: string; installationId: string; baseUrl: string }, data: NonNullable<ActionPayload["data"]>): Promise<{ accountId: string; remoteReportId: string | null } | null> {
  if (typeof data.reportId === "string") {
    const known = await env.DB.prepare(`SELECT remote_report_id AS remoteReportId, target_account_id AS accountId FROM connector_reports WHERE installation_id = ?1 AND connector_id = ?2 AND report_id = ?3`)
      .bind(connector.installationId, connector.id, data.reportId)
      .first<{ remoteReportId: string; accountId: string }>();
    if (known) return known;
  }
  const prefix = mastodonId(new URL(connector.baseUrl).host, "account", "");
  const subjectId = typeof data.subject?.id === "string" ? data.subject.id : "";
  return data.subject?.kind === "account" && subjectId.startsWith(prefix) && subjectId.length > prefix.length ? { accountId: subjectId.slice(prefix.length), remoteReportId: null } : null;
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
  const payload = await openPersonalData<ActionPayload>(env, input.installationId, `webhook_delivery:${input.deliveryId}`, input.payloadSealed);
  if (payload?.type !== "action.execute" || !payload.data) return refused("connector_event_unsupported");
  const verb = typeof payload.data.actionType === "string" ? configOf(connector).actions[payload.data.actionType] : undefined;
  if (!verb) return refused("connector_action_unmapped");
  const target = await targetOf(env, connector, payload.data);
  if (!target) return refused("connector_target_unknown");
  if (verb === "resolve" && !target.remoteReportId) return refused("connector_report_unknown");
  if (egressRefusal(connector.baseUrl, { allowLocal: allowLocalEgress(env) })) return refused("egress_refused");
  const { token } = await openPersonalData<{ token: string }>(env, input.installationId, tokenContext(connector.id), connector.accessTokenSealed);
  const params = payload.data.params ?? {};
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
  try {
    const response = await fetch(url, {
      method: "POST",
      // The token never follows a redirect to another address.
      redirect: "manual",
      signal: AbortSignal.timeout(input.timeoutMs),
      headers: { authorization: `Bearer ${token}`, "user-agent": "SafestTools-Connectors/1", accept: "application/json", "idempotency-key": input.deliveryId, ...(body ? {} : { "content-type": "application/x-www-form-urlencoded" }) },
      ...(body ? { body } : {}),
    });
    await response.body?.cancel();
    const status = response.status;
    const transient = status === 408 || status === 429 || status >= 500;
    const ok = status >= 200 && status < 300;
    return { status, error: null, retryAfter: retryAfterOf(response.headers.get("retry-after")), permanent: !ok && !transient };
  } catch (failure) {
    return { status: null, error: failure instanceof Error && failure.name === "TimeoutError" ? "timeout" : "network_error", retryAfter: null, permanent: false };
  }
}
