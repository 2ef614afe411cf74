// One call to the CyberTipline Reporting API (basic auth with the ESP's credentials), and what its
// answer means for the submission: success, a refusal of what was sent (permanent: the document
// or file is wrong, retrying sends the same), refused credentials (permanent until an admin fixes
// the registration), or the service being unavailable (transient: a later pass resumes). Besides
// the four steps of a report: `/retract`, which cancels a report opened and not finished, and
// `/status`, which checks that the registration's credentials are accepted.
import { AppError } from "../../errors";
import { assertEgressAllowed } from "../../lib/egress";
import type { Registration } from "./settings";
import { parseAnswer, RESPONSE_ALREADY_FINISHED, RESPONSE_SUCCESS, type ServiceAnswer } from "./xml";

export const STEPS = ["submit", "upload", "fileinfo", "finish"] as const;
/** A step of a report, or the cancellation of one opened and not finished. */
export type Step = (typeof STEPS)[number] | "retract";

const TIMEOUT_MS = 30_000;

/** The outcome of one call: its answer, or the typed error the submission records. */
export type CallResult = { ok: true; answer: ServiceAnswer } | { ok: false; error: AppError };

function basic(registration: Registration): string {
  const bytes = new TextEncoder().encode(`${registration.username}:${registration.password}`);
  return `Basic ${btoa(String.fromCharCode(...bytes))}`;
}

/** What a non-zero response code means: credentials (2000-3999), the submission itself (4000-5999 but "already finished"), else the service. */
function refusal(step: Step | "status", answer: ServiceAnswer, status: number): AppError {
  const code = answer.responseCode;
  const details = { step, responseCode: code, httpStatus: status };
  if (code !== null && code >= 2000 && code < 4000) {
    return new AppError("cybertipline.credentials_refused", `NCMEC refused the ESP credentials at ${step} (response code ${code}); PUT /cybertipline/settings with the registration NCMEC issued, then resume.`, { status: 502, details });
  }
  if (code !== null && code >= 4000 && code < 6000) {
    return new AppError("cybertipline.report_rejected", `NCMEC refused the ${step} step (response code ${code}${answer.responseDescription ? `: ${answer.responseDescription.slice(0, 200)}` : ""}).`, { status: 422, details });
  }
  return new AppError("cybertipline.unavailable", `NCMEC's service did not complete the ${step} step (${code === null ? `HTTP ${status}` : `response code ${code}`}); the submission resumes from there.`, {
    status: 503,
    retryable: true,
    details,
  });
}

/** Sends one step's request. Never throws: transport failures come back as `cybertipline.unavailable`. */
export async function callStep(env: Env, registration: Registration, step: Step, body: { xml?: string; form?: FormData }): Promise<CallResult> {
  const url = `${registration.baseUrl}/${step}`;
  assertEgressAllowed(url, env, "cybertipline.base_url_not_allowed", { field: "baseUrl" });
  const headers: Record<string, string> = { authorization: basic(registration) };
  if (body.xml !== undefined) headers["content-type"] = "text/xml; charset=utf-8";
  let response: Response;
  try {
    response = await fetch(url, { method: "POST", headers, body: body.xml ?? body.form ?? null, signal: AbortSignal.timeout(TIMEOUT_MS), redirect: "manual" });
  } catch {
    return { ok: false, error: new AppError("cybertipline.unavailable", `NCMEC's service could not be reached at the ${step} step; the submission resumes from there.`, { status: 503, retryable: true, details: { step } }) };
  }
  const answer = parseAnswer(await response.text());
  if (answer.responseCode === RESPONSE_SUCCESS || (step === "finish" && answer.responseCode === RESPONSE_ALREADY_FINISHED)) return { ok: true, answer };
  return { ok: false, error: refusal(step, answer, response.status) };
}

/**
 * `GET /status`: whether NCMEC's service answers and accepts the registration's credentials.
 * Never throws: the answer, or `cybertipline.credentials_refused` / `cybertipline.unavailable`.
 */
export async function checkStatus(env: Env, registration: Registration): Promise<CallResult> {
  const url = `${registration.baseUrl}/status`;
  assertEgressAllowed(url, env, "cybertipline.base_url_not_allowed", { field: "baseUrl" });
  let response: Response;
  try {
    response = await fetch(url, { method: "GET", headers: { authorization: basic(registration) }, signal: AbortSignal.timeout(TIMEOUT_MS), redirect: "manual" });
  } catch {
    return { ok: false, error: new AppError("cybertipline.unavailable", "NCMEC's service could not be reached at /status.", { status: 503, retryable: true, details: { step: "status" } }) };
  }
  const answer = parseAnswer(await response.text());
  if (answer.responseCode === RESPONSE_SUCCESS) return { ok: true, answer };
  // A 401 without a parsable answer is still a refusal of the credentials.
  if (answer.responseCode === null && response.status === 401) answer.responseCode = 2000;
  return { ok: false, error: refusal("status", answer, response.status) };
}
