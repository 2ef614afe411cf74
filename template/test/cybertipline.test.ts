// CyberTipline reports: a report a person confirmed goes to NCMEC's Reporting API (the peer in
// test/peers/cybertipline.ts validates every document by the schema's rules) in its steps — open,
// upload each file, file details, finish — exactly once: a submission that stops halfway resumes
// where it stopped and never opens a second report. No path reaches a report without a person's
// confirmation. The reported files and the report are sealed and the case held; the hold survives
// the retention sweep and ends only by an admin's audited release. Another installation sees 404.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sweepRetention } from "../src/cases/retention/retention";
import { sweepCyberTipline } from "../src/enforcement/cybertipline/records";
import { fileDetailsXml, reportXml } from "../src/enforcement/cybertipline/xml";
import { api, newInstallation, personKey, publish, waitForRun, waitForWait } from "./helpers";

const DAY = 86_400_000;
const PASSWORD = "esp-password-7c1d";
const peer = env.CYBERTIPLINE_PEER;

async function control(path: string, body: unknown) {
  const response = await peer.fetch(`http://peer/_control/${path}`, { method: "POST", body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return response.json<any>();
}
const peerLog = async (username: string) => (await peer.fetch(`http://peer/_control/log?username=${username}`)).json<Array<{ step: string; reportId: string | null; responseCode: number }>>();
const peerReports = async (username: string) => (await peer.fetch(`http://peer/_control/reports?username=${username}`)).json<any[]>();

async function sha256(text: string) {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A preserved file as the API serves it (raw bytes, not JSON). */
async function preservedFile(key: string, id: string) {
  const response = await exports.default.fetch(new Request(`http://safest.test/api/v1/cybertipline/reports/${id}/file?index=0`, { headers: { authorization: `Bearer ${key}` } }));
  return { status: response.status, text: await response.text() };
}

/** An installation registered with the peer as an ESP, an admin's automation key and a reviewer's (a person's) key. */
async function desk(label: string) {
  const { apiKey: admin } = await newInstallation(`cybertipline-${label}`);
  const username = `esp-${label}-${crypto.randomUUID().slice(0, 8)}`;
  await control("account", { username, password: PASSWORD });
  const settings = await api("/api/v1/cybertipline/settings", {
    method: "PUT",
    key: admin,
    body: { baseUrl: "https://cybertipline.test/ispws", username, password: PASSWORD, reporter: { firstName: "Tess", lastName: "Liaison", email: "ncmec-liaison@product.example" }, espService: "Product Photos", enabled: true },
  });
  expect(settings.status).toBe(200);
  expect(settings.body).toMatchObject({ enabled: true, credentialsSet: true, baseUrl: "https://cybertipline.test/ispws" });
  expect(JSON.stringify(settings.body)).not.toContain(PASSWORD);
  expect(JSON.stringify(settings.body)).not.toContain("ncmec-liaison");
  const person = await personKey(admin, "Rita Reviewer");
  return { admin, person, username };
}

/** A report whose evidence names files on the media host, with their SHA-256 and PDQ hashes. */
async function reportWithFiles(key: string, names: string[]) {
  const evidence = await Promise.all(names.map(async (name, i) => ({ kind: "image", url: `https://media.test/files/${name}`, sha256: await sha256(`media:${name}`), pdq: `${i}f`.repeat(32) })));
  const created = await api("/api/v1/reports", {
    key,
    body: { category: "protection_of_minors", subject: { kind: "content", id: `post-${crypto.randomUUID()}`, ownerId: `uploader-${crypto.randomUUID()}` }, description: "apparent CSAM", evidence },
  });
  expect(created.status).toBe(201);
  return created.body as { id: string; caseId: string };
}

describe("the CyberTipline peer", () => {
  it("accepts the platform's documents and refuses malformed ones by the schema's rules", async () => {
    const validate = async (kind: string, xml: string) => (await control("validate", { kind, xml })).problems as string[];
    const good = reportXml({
      incidentType: "Child Pornography (possession, manufacture, and distribution)",
      incidentDateTime: "2026-11-30T10:00:00.000Z",
      reporter: { firstName: "Tess", email: "a@b.example" },
      reported: { espIdentifier: "u-1", espService: "Photos", profileUrl: null },
      additionalInfo: "x < y & z",
    });
    expect(await validate("report", good)).toEqual([]);
    expect(await validate("fileDetails", fileDetailsXml("100001", "f000001", { originalFileName: "a.jpg", fileViewedByEsp: true, sha256: "ab".repeat(32), pdq: "cd".repeat(32) }))).toEqual([]);
    // Out of order, missing, not in the enumeration, not a dateTime, undeclared, unparsable.
    const swapped = good.replace(
      /<incidentSummary>.*<\/incidentSummary>(<reporter>.*<\/reporter>)/u,
      (_all, reporter: string) => `${reporter}<incidentSummary><incidentType>Child Sex Tourism</incidentType><incidentDateTime>2026-11-30T10:00:00Z</incidentDateTime></incidentSummary>`,
    );
    expect((await validate("report", swapped)).join()).toMatch(/not expected here/u);
    expect((await validate("report", good.replace(/<incidentType>[^<]*<\/incidentType>/u, ""))).join()).toMatch(/incidentType: required/u);
    expect((await validate("report", good.replace("Child Pornography (possession, manufacture, and distribution)", "Spam")))[0]).toMatch(/enumeration/u);
    expect((await validate("report", good.replace("2026-11-30T10:00:00.000Z", "yesterday")))[0]).toMatch(/xs:dateTime/u);
    expect((await validate("report", good.replace("<email>a@b.example</email>", "")))[0]).toMatch(/email: required/u);
    expect((await validate("report", good.replace("</reporter>", "</reporter><favouriteColour>blue</favouriteColour>"))).join()).toMatch(/favouriteColour: not expected/u);
    expect((await validate("report", "<report><incidentSummary>")).join()).toMatch(/malformed XML/u);
    expect((await validate("fileDetails", fileDetailsXml("not-a-number", "f1", { fileViewedByEsp: true })))[0]).toMatch(/xs:integer/u);
  });
});

describe("CyberTipline reports", () => {
  it("a person's confirmation sends the report in the API's steps, once, with each file's hashes; report and files are sealed and the case held", async () => {
    const { admin, person, username } = await desk("steps");
    const report = await reportWithFiles(admin, ["one.jpg", "two.jpg"]);
    const sent = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(sent.status, JSON.stringify(sent.body)).toBe(201);
    expect(sent.body).toMatchObject({ state: "finished", reportId: report.id, ncmecReportId: expect.stringMatching(/^\d+$/u), lastErrorCode: null, confirmedById: expect.stringMatching(/^rvw_/u) });
    expect(sent.body.files).toHaveLength(2);
    expect((await peerLog(username)).map((l) => l.step)).toEqual(["submit", "upload", "upload", "fileinfo", "fileinfo", "finish"]);
    const [stored, ...others] = await peerReports(username);
    expect(others).toEqual([]);
    expect(stored).toMatchObject({ reportId: sent.body.ncmecReportId, finished: true });
    expect(stored.files.map((f: any) => f.fileId)).toEqual(sent.body.files.map((f: any) => f.fileId));
    expect(stored.files[0]).toMatchObject({ name: "one.jpg", sha256: await sha256("media:one.jpg") });
    expect(stored.files[1].details).toContain(`<originalFileHash hashType="SHA256">${await sha256("media:two.jpg")}</originalFileHash>`);
    // The PDQ a client put in the evidence is a claim: only a hash of the preserved bytes is sent,
    // and these bytes are not an image the hasher reads (the media tests prove PDQ itself).
    expect(stored.files[1].details).not.toContain("<name>PDQ</name>");
    expect(stored.files[1].details).toContain("<fileViewedByEsp>true</fileViewedByEsp>");
    expect(stored.xml).toContain("<email>ncmec-liaison@product.example</email>");
    expect(stored.xml).toContain("<espService>Product Photos</espService>");

    // Who confirmed is the authenticated principal (the reviewer's key), whatever the client says.
    const row = await env.DB.prepare("SELECT confirmed_by AS by, payload_sealed AS payload, hold_id AS holdId FROM cybertipline_submissions WHERE id = ?1").bind(sent.body.id).first<any>();
    expect(row.by).toMatch(/^api_key:[^/]+\/Rita Reviewer$/u);
    expect(row.payload).not.toContain("ncmec-liaison");
    const object = await env.WORKFLOW_ARTIFACTS.get(`cybertipline/${(await env.DB.prepare("SELECT installation_id AS i FROM cybertipline_submissions WHERE id = ?1").bind(sent.body.id).first<any>()).i}/${sent.body.id}/file-0`);
    expect(await object!.text()).not.toContain("media:one.jpg");
    const holds = await api(`/api/v1/cases/${report.caseId}/preservation-holds`, { key: admin });
    expect(holds.body.items).toEqual([expect.objectContaining({ id: row.holdId, active: true })]);
    expect(Date.parse(holds.body.items[0].heldUntil) - Date.now()).toBeGreaterThan(364 * DAY);
    const settings = await env.DB.prepare("SELECT credentials_sealed AS c, reporter_sealed AS r FROM cybertipline_settings s WHERE base_url = 'https://cybertipline.test/ispws'").all<any>();
    expect(JSON.stringify(settings.results)).not.toContain(PASSWORD);
    const actions = (await api("/api/v1/audit-events?limit=100", { key: admin })).body.items.map((e: any) => e.action);
    expect(actions).toEqual(expect.arrayContaining(["cybertipline.report_confirmed", "preservation_hold.placed", "cybertipline.report_opened", "cybertipline.report_finished"]));

    // Sending it again (the same submission) changes nothing at NCMEC.
    expect((await api(`/api/v1/cybertipline/reports/${sent.body.id}/resume`, { key: admin, body: {} })).body.state).toBe("finished");
    expect((await peerLog(username)).filter((l) => l.step === "submit")).toHaveLength(1);
  });

  it("a submission that fails at upload or at finish resumes where it stopped and never opens a second report", async () => {
    const { admin, person, username } = await desk("resume");
    await control("plan", { username, failAt: "upload", times: 1 });
    const report = await reportWithFiles(admin, ["a.jpg", "b.jpg"]);
    const first = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ state: "opened", ncmecReportId: expect.any(String), lastErrorCode: "cybertipline.unavailable", nextAttemptAt: expect.any(String) });
    expect(first.body.files.every((f: any) => f.fileId === null)).toBe(true);

    // Finish now fails twice: the admin's resume uploads the files and stops at finish again.
    await control("plan", { username, failAt: "finish", times: 2 });
    const resumed = await api(`/api/v1/cybertipline/reports/${first.body.id}/resume`, { key: admin, body: {} });
    expect(resumed.status).toBe(503);
    expect(resumed.body.error.code).toBe("cybertipline.unavailable");
    const between = (await api(`/api/v1/cybertipline/reports/${first.body.id}`, { key: admin })).body;
    expect(between).toMatchObject({ state: "opened", ncmecReportId: first.body.ncmecReportId, lastErrorCode: "cybertipline.unavailable" });
    expect(between.files.every((f: any) => f.fileId !== null && f.detailsSent)).toBe(true);

    // The sweep takes it up once its backoff ended (the first due pass still meets the second failure).
    await sweepCyberTipline(env, new Date(Date.now() + 2 * DAY));
    expect((await api(`/api/v1/cybertipline/reports/${first.body.id}`, { key: admin })).body.state).toBe("opened");
    const summary = await sweepCyberTipline(env, new Date(Date.now() + 4 * DAY));
    expect(summary.finished).toBeGreaterThanOrEqual(1);
    const done = (await api(`/api/v1/cybertipline/reports/${first.body.id}`, { key: admin })).body;
    expect(done).toMatchObject({ state: "finished", ncmecReportId: first.body.ncmecReportId, lastErrorCode: null });

    const log = await peerLog(username);
    expect(log.filter((l) => l.step === "submit")).toHaveLength(1);
    expect(new Set(log.map((l) => l.reportId).filter(Boolean))).toEqual(new Set([first.body.ncmecReportId]));
    // Each file was uploaded once (the failed upload stored nothing), and nothing was sent twice.
    expect(log.filter((l) => l.step === "upload" && l.responseCode === 0)).toHaveLength(2);
    expect(log.filter((l) => l.step === "fileinfo")).toHaveLength(2);
    const reports = await peerReports(username);
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ reportId: first.body.ncmecReportId, finished: true });
    expect(reports[0].files).toHaveLength(2);
  });

  it("one report is filed once: a second confirmation gets 409 naming the first; a /submit that failed is not sent again until an admin says what NCMEC holds", async () => {
    const { admin, person, username } = await desk("once");
    await control("plan", { username, failAt: "submit", times: 1 });
    const report = await reportWithFiles(admin, ["once.jpg"]);
    const sent = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    // NCMEC's answer to /submit failed: the submission is recorded and waits for an admin.
    expect(sent.status).toBe(409);
    expect(sent.body.error).toMatchObject({ code: "cybertipline.submit_outcome_unknown", details: { submissionId: expect.any(String) } });
    const first = await api(`/api/v1/cybertipline/reports/${sent.body.error.details.submissionId}`, { key: admin });
    expect(first.body).toMatchObject({ state: "pending", ncmecReportId: null, lastErrorCode: "cybertipline.submit_outcome_unknown", nextAttemptAt: null });
    // A double click, a retried POST or a second reviewer: the first submission, never a second report.
    const again = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "cybertipline.already_reported", details: { submissionId: first.body.id } });
    // Neither the sweep nor a resume sends /submit again: NCMEC may hold the first.
    await sweepCyberTipline(env, new Date(Date.now() + 2 * DAY));
    const resumed = await api(`/api/v1/cybertipline/reports/${first.body.id}/resume`, { key: admin, body: {} });
    expect(resumed.status).toBe(409);
    expect(resumed.body.error.code).toBe("cybertipline.submit_outcome_unknown");
    expect((await peerLog(username)).filter((l) => l.step === "submit")).toHaveLength(1);
    // Only an admin settles it (a reviewer's key without admin cannot); NCMEC holds nothing, so resend.
    const reviewer = await personKey(admin, "Rex Reviewer", ["review", "read"]);
    expect((await api(`/api/v1/cybertipline/reports/${first.body.id}/reconcile`, { key: reviewer, body: { resend: true } })).status).toBe(403);
    expect((await api(`/api/v1/cybertipline/reports/${first.body.id}/reconcile`, { key: admin, body: { resend: true, ncmecReportId: "x" } })).status).toBe(400);
    const reconciled = await api(`/api/v1/cybertipline/reports/${first.body.id}/reconcile`, { key: admin, body: { resend: true } });
    expect(reconciled.status).toBe(200);
    const done = await api(`/api/v1/cybertipline/reports/${first.body.id}/resume`, { key: admin, body: {} });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ state: "finished", ncmecReportId: expect.any(String) });
    expect((await peerLog(username)).filter((l) => l.step === "submit")).toHaveLength(2);
    expect(await peerReports(username)).toHaveLength(1);
    // Settled once: a second reconcile is refused.
    expect((await api(`/api/v1/cybertipline/reports/${first.body.id}/reconcile`, { key: admin, body: { resend: true } })).body.error.code).toBe("cybertipline.not_unknown");
  });

  it("a preserved file is served as an attachment of a known media type, never as a page of this origin", async () => {
    const { admin, person } = await desk("served");
    const report = await reportWithFiles(admin, ["page.html"]);
    const created = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(created.status).toBe(201);
    const response = await exports.default.fetch(new Request(`http://safest.test/api/v1/cybertipline/reports/${created.body.id}/file?index=0`, { headers: { authorization: `Bearer ${admin}` } }));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-disposition")).toMatch(/^attachment/u);
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(response.headers.get("content-security-policy")).toContain("sandbox");
    // The host answered text/html: served as bytes to download.
    expect(response.headers.get("content-type")).toBe("application/octet-stream");
  });

  it("a document NCMEC's schema refuses is a typed error on the submission and is not sent again", async () => {
    const { admin, person, username } = await desk("refused");
    // A schema newer than the platform's copy: an element the platform does not write becomes required.
    await control("rule", { username, require: "incidentSummary/incidentDateTimeDescription" });
    const report = await reportWithFiles(admin, ["c.jpg"]);
    const refused = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: "cybertipline.report_rejected", details: { step: "submit", responseCode: 4100, submissionId: expect.stringMatching(/^ctr_/u) } });
    const id = refused.body.error.details.submissionId;
    expect((await api(`/api/v1/cybertipline/reports/${id}`, { key: admin })).body).toMatchObject({ state: "rejected", lastErrorCode: "cybertipline.report_rejected", lastResponseCode: 4100, ncmecReportId: null });
    expect((await api(`/api/v1/cybertipline/reports/${id}/resume`, { key: admin, body: {} })).body.error.code).toBe("cybertipline.report_rejected");
    expect((await peerLog(username)).map((l) => l.step)).toEqual(["submit"]);
    expect(await peerReports(username)).toEqual([]);
  });

  it("a report NCMEC refuses after opening it is retracted there, so no half-made report stays open; it may then be confirmed again as a new report", async () => {
    const { admin, person, username } = await desk("retract-auto");
    await control("plan", { username, failAt: "upload", times: 1, mode: "refuse" });
    const report = await reportWithFiles(admin, ["r.jpg"]);
    const refused = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: "cybertipline.report_rejected", details: { step: "upload", responseCode: 4200 } });
    const id = refused.body.error.details.submissionId;
    const view = (await api(`/api/v1/cybertipline/reports/${id}`, { key: admin })).body;
    expect(view).toMatchObject({ state: "rejected", ncmecReportId: expect.any(String), retractedAt: expect.any(String), lastErrorCode: "cybertipline.report_rejected" });
    expect((await peerLog(username)).map((l) => `${l.step}:${l.responseCode}`)).toEqual(["submit:0", "upload:4200", "retract:0"]);
    expect(await peerReports(username)).toEqual([]);
    const events = (await api(`/api/v1/audit-events?targetId=${id}&limit=50`, { key: admin })).body.items;
    expect(events.find((e: any) => e.action === "cybertipline.report_retracted")).toMatchObject({ actor: { type: "system" }, details: { ncmecReportId: view.ncmecReportId, automatic: true } });

    // Retracted, the report may be confirmed again: a new submission, a new report at NCMEC, finished.
    const again = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(again.status).toBe(201);
    expect(again.body).toMatchObject({ state: "finished", ncmecReportId: expect.any(String), retractedAt: null });
    expect(again.body.id).not.toBe(id);
    expect(again.body.ncmecReportId).not.toBe(view.ncmecReportId);
    expect((await peerReports(username)).map((r) => [r.reportId, r.finished])).toEqual([[again.body.ncmecReportId, true]]);
  });

  it("an admin retracts a report opened and not finished, with a reason on the record; a finished report, one never opened and another installation's are refused", async () => {
    const { admin, person, username } = await desk("retract-admin");
    await control("plan", { username, failAt: "finish", times: 10 });
    const report = await reportWithFiles(admin, ["s.jpg"]);
    const opened = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } });
    expect(opened.status).toBe(201);
    expect(opened.body).toMatchObject({ state: "opened", lastErrorCode: "cybertipline.unavailable", retractedAt: null });
    const id = opened.body.id;

    const noReason = await api(`/api/v1/cybertipline/reports/${id}/retract`, { key: admin, body: {} });
    expect(noReason.status).toBe(400);
    expect(noReason.body.error.code).toEqual(expect.any(String));
    const other = await newInstallation("cybertipline-retract-other");
    expect((await api(`/api/v1/cybertipline/reports/${id}/retract`, { key: other.apiKey, body: { reason: "not ours" } })).status).toBe(404);
    const reviewerOnly = await personKey(admin, "Rita Reviewer", ["review", "read"]);
    expect((await api(`/api/v1/cybertipline/reports/${id}/retract`, { key: reviewerOnly, body: { reason: "a reviewer may not" } })).status).toBe(403);
    expect((await peerReports(username)).map((r) => r.reportId)).toEqual([opened.body.ncmecReportId]);

    const retracted = await api(`/api/v1/cybertipline/reports/${id}/retract`, { key: admin, body: { reason: "filed against the wrong account" } });
    expect(retracted.status).toBe(200);
    expect(retracted.body).toMatchObject({ id, state: "rejected", retractedAt: expect.any(String), ncmecReportId: opened.body.ncmecReportId });
    expect(await peerReports(username)).toEqual([]);
    // Once retracted, asking again answers the same and sends nothing.
    const twice = await api(`/api/v1/cybertipline/reports/${id}/retract`, { key: admin, body: { reason: "again" } });
    expect(twice.body.retractedAt).toBe(retracted.body.retractedAt);
    expect((await peerLog(username)).filter((l) => l.step === "retract")).toHaveLength(1);
    const events = (await api(`/api/v1/audit-events?targetId=${id}&limit=50`, { key: admin })).body.items.filter((e: any) => e.action === "cybertipline.report_retracted");
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor: { type: "api_key" }, details: { reason: "filed against the wrong account", automatic: false, stateBefore: "opened" } });
    // The sweep does not take a retracted submission up again.
    const calls = (await peerLog(username)).length;
    await sweepCyberTipline(env, new Date(Date.now() + 4 * DAY));
    expect((await peerLog(username)).length).toBe(calls);
    expect((await api(`/api/v1/cybertipline/reports/${id}`, { key: admin })).body.state).toBe("rejected");

    // A finished report cannot be retracted through the API.
    const other2 = await desk("retract-done");
    const done = await api("/api/v1/cybertipline/reports", { key: other2.person, body: { reportId: (await reportWithFiles(other2.admin, ["t.jpg"])).id } });
    expect(done.body.state).toBe("finished");
    const refused = await api(`/api/v1/cybertipline/reports/${done.body.id}/retract`, { key: other2.admin, body: { reason: "too late" } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("cybertipline.not_retractable");
    // Nor one whose /submit outcome is unknown: NCMEC's report id must be reconciled first.
    await control("plan", { username: other2.username, failAt: "submit", times: 1 });
    const unknown = await api("/api/v1/cybertipline/reports", { key: other2.person, body: { reportId: (await reportWithFiles(other2.admin, ["u.jpg"])).id } });
    const unknownId = unknown.body.id ?? unknown.body.error?.details?.submissionId;
    expect((await api(`/api/v1/cybertipline/reports/${unknownId}`, { key: other2.admin })).body).toMatchObject({ state: "pending", ncmecReportId: null });
    const notOpened = await api(`/api/v1/cybertipline/reports/${unknownId}/retract`, { key: other2.admin, body: { reason: "unknown" } });
    expect(notOpened.status).toBe(409);
    expect(notOpened.body.error).toMatchObject({ code: "cybertipline.not_retractable", message: expect.stringContaining("reconcile") });
    expect((await peerLog(other2.username)).map((l) => l.step)).not.toContain("retract");
  });

  it("a retraction NCMEC took whose record here was lost is recorded when asked again (NCMEC answers it holds no such report)", async () => {
    const { admin, person, username } = await desk("retract-lost");
    await control("plan", { username, failAt: "finish", times: 10 });
    const opened = await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: (await reportWithFiles(admin, ["v.jpg"])).id } });
    expect(opened.body.state).toBe("opened");
    // The retraction reached NCMEC, and its answer never came back here.
    const form = new FormData();
    form.append("id", opened.body.ncmecReportId);
    const direct = await peer.fetch("https://cybertipline.test/ispws/retract", { method: "POST", headers: { authorization: `Basic ${btoa(`${username}:${PASSWORD}`)}` }, body: form });
    expect(await direct.text()).toContain("<responseCode>0</responseCode>");
    expect(await peerReports(username)).toEqual([]);
    const retracted = await api(`/api/v1/cybertipline/reports/${opened.body.id}/retract`, { key: admin, body: { reason: "the first answer was lost" } });
    expect(retracted.status).toBe(200);
    expect(retracted.body).toMatchObject({ state: "rejected", retractedAt: expect.any(String) });
    expect((await peerLog(username)).filter((l) => l.step === "retract").map((l) => l.responseCode)).toEqual([0, 5001]);
  });

  it("an admin checks the registration against NCMEC's /status: accepted credentials answer ok, refused ones 502 with a code; audited, never with the password", async () => {
    const { admin, username } = await desk("status");
    const ok = await api("/api/v1/cybertipline/settings/check", { key: admin, body: {} });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ ok: true, baseUrl: "https://cybertipline.test/ispws", responseCode: 0 });
    const wrong = await api("/api/v1/cybertipline/settings", {
      method: "PUT",
      key: admin,
      body: { baseUrl: "https://cybertipline.test/ispws", username, password: "not-the-password", reporter: { firstName: "Tess", email: "ncmec-liaison@product.example" }, enabled: true },
    });
    expect(wrong.status).toBe(200);
    const refused = await api("/api/v1/cybertipline/settings/check", { key: admin, body: {} });
    expect(refused.status).toBe(502);
    expect(refused.body.error.code).toBe("cybertipline.credentials_refused");
    const events = (await api("/api/v1/audit-events?action=cybertipline.registration_checked&limit=10", { key: admin })).body.items;
    expect(events.map((e: any) => e.details.ok).sort()).toEqual([false, true]);
    expect(JSON.stringify(events)).not.toContain(PASSWORD);
    expect(JSON.stringify(events)).not.toContain("not-the-password");
    expect(JSON.stringify(refused.body)).not.toContain("not-the-password");
  });

  it("no path reaches a report without a person's confirmation: publishing refuses a bypass, an automation key's answer or call is refused with a code", async () => {
    const { admin, person, username } = await desk("confirm");
    expect((await api("/api/v1/queues", { key: admin, body: { name: "child-safety-confirm", slaSeconds: 3600 } })).status).toBe(201);
    const review = {
      id: "review",
      kind: "human_task",
      config: { queue_id: "child-safety-confirm", timeout_seconds: 3600, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["report", "dismiss"] } } } },
    };
    const graph = (bypass: boolean) => ({
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        review,
        { id: "route", kind: "condition", config: { cases: [{ port: "report", when: "steps.review.event.payload.response.outcome == 'report'" }], case_ports: ["report"], default_port: "dismiss" } },
        { id: "ncmec", kind: "ncmec_report", errorPort: "report_failed", config: { confirmation_node: "review" } },
        { id: "reported", kind: "end", config: { terminal_code: "reported" } },
        { id: "dismissed", kind: "end", config: { terminal_code: "dismissed" } },
        { id: "failed", kind: "end", config: { terminal_code: "report_failed" } },
      ],
      edges: [
        { from: { nodeId: "start", port: "success" }, to: { nodeId: bypass ? "ncmec" : "review" } },
        ...(bypass ? [{ from: { nodeId: "ncmec", port: "reported" }, to: { nodeId: "review" } }] : []),
        { from: { nodeId: "review", port: "completed" }, to: { nodeId: "route" } },
        { from: { nodeId: "review", port: "timeout" }, to: { nodeId: "dismissed" } },
        { from: { nodeId: "route", port: "report" }, to: { nodeId: bypass ? "dismissed" : "ncmec" } },
        { from: { nodeId: "route", port: "dismiss" }, to: { nodeId: "dismissed" } },
        ...(bypass ? [] : [{ from: { nodeId: "ncmec", port: "reported" }, to: { nodeId: "reported" } }]),
        { from: { nodeId: "ncmec", port: "report_failed" }, to: { nodeId: "failed" } },
      ],
    });
    const workflow = (await api("/api/v1/workflows", { key: admin, body: { name: `bypass-${crypto.randomUUID()}` } })).body;
    const bypassed = await api(`/api/v1/workflows/${workflow.id}/versions`, { key: admin, body: { graph: graph(true) } });
    expect(bypassed.status).toBe(422);
    expect(bypassed.body.error.details.map((d: any) => d.code)).toContain("confirmation_bypassed");
    const notATask = structuredClone(graph(false));
    (notATask.nodes[3] as any).config.confirmation_node = "route";
    expect((await api(`/api/v1/workflows/${workflow.id}/versions`, { key: admin, body: { graph: notATask } })).body.error.details.map((d: any) => d.code)).toContain("confirmation_node_invalid");

    // The API: an automation key (no person behind it) is refused, whatever reviewer name it sends.
    const report = await reportWithFiles(admin, ["d.jpg"]);
    const byAutomation = await api("/api/v1/cybertipline/reports", { key: admin, body: { reportId: report.id } });
    expect(byAutomation.status).toBe(403);
    expect(byAutomation.body.error.code).toBe("cybertipline.confirmation_required");

    // The workflow: a task answered by an automation key does not confirm; one answered by a person does.
    const version = await publish(admin, graph(false));
    const answer = async (key: string) => {
      const run = (await api("/api/v1/runs", { key: admin, body: { workflowVersionId: version.id, authorityMode: "autonomous", reportId: report.id } })).body;
      await waitForWait(admin, run.id);
      const task = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(run.id).first<{ id: string }>())!;
      expect((await api(`/api/v1/tasks/${task.id}/claim`, { key, body: {} })).status).toBe(200);
      expect((await api(`/api/v1/tasks/${task.id}/complete`, { key, body: { response: { outcome: "report" } } })).status).toBe(200);
      return waitForRun(admin, run.id);
    };
    const automated = await answer(admin);
    expect(automated.output.terminalCode).toBe("report_failed");
    const failedStep = automated.steps.find((s: any) => s.nodeId === "ncmec");
    expect(JSON.stringify(failedStep)).toContain("cybertipline.confirmation_required");
    expect(await peerLog(username)).toEqual([]);

    const confirmed = await answer(person);
    expect(confirmed.output.terminalCode).toBe("reported");
    const step = confirmed.steps.find((s: any) => s.nodeId === "ncmec");
    expect(step.output).toMatchObject({ port: "reported", ncmecReportId: expect.any(String), submissionId: expect.stringMatching(/^ctr_/u) });
    expect((await peerLog(username)).filter((l) => l.step === "submit")).toHaveLength(1);
    const row = await env.DB.prepare("SELECT confirmed_by AS by, confirmation_task_id AS task FROM cybertipline_submissions WHERE id = ?1").bind(step.output.submissionId).first<any>();
    expect(row.by).toMatch(/\/Rita Reviewer$/u);
    const confirming = await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(confirmed.id).first<{ id: string }>();
    expect(row.task).toBe(confirming!.id);
  });

  it("the ncmec_report node resumes a submission its step left halfway (one report at NCMEC) and surfaces a refusal as its error code", async () => {
    const { admin, person, username } = await desk("effect");
    expect((await api("/api/v1/queues", { key: admin, body: { name: "child-safety-effect", slaSeconds: 3600, wellness: "strict" } })).status).toBe(201);
    const version = await publish(admin, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "child-safety-effect", timeout_seconds: 3600, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["report", "dismiss"] } } } } },
        { id: "route", kind: "condition", config: { cases: [{ port: "report", when: "steps.review.event.payload.response.outcome == 'report'" }], case_ports: ["report"], default_port: "dismiss" } },
        { id: "ncmec", kind: "ncmec_report", errorPort: "report_failed", config: { confirmation_node: "review" } },
        { id: "reported", kind: "end", config: { terminal_code: "reported" } },
        { id: "dismissed", kind: "end", config: { terminal_code: "dismissed" } },
        { id: "failed", kind: "end", config: { terminal_code: "report_failed" } },
      ],
      edges: [
        { from: { nodeId: "start", port: "success" }, to: { nodeId: "review" } },
        { from: { nodeId: "review", port: "completed" }, to: { nodeId: "route" } },
        { from: { nodeId: "review", port: "timeout" }, to: { nodeId: "dismissed" } },
        { from: { nodeId: "route", port: "report" }, to: { nodeId: "ncmec" } },
        { from: { nodeId: "route", port: "dismiss" }, to: { nodeId: "dismissed" } },
        { from: { nodeId: "ncmec", port: "reported" }, to: { nodeId: "reported" } },
        { from: { nodeId: "ncmec", port: "report_failed" }, to: { nodeId: "failed" } },
      ],
    });
    const confirmRun = async (names: string[]) => {
      const report = await reportWithFiles(admin, names);
      const run = (await api("/api/v1/runs", { key: admin, body: { workflowVersionId: version.id, authorityMode: "autonomous", reportId: report.id } })).body;
      await waitForWait(admin, run.id);
      const task = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(run.id).first<{ id: string }>())!;
      expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: person, body: {} })).status).toBe(200);
      expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: person, body: { response: { outcome: "report" } } })).status).toBe(200);
      return waitForRun(admin, run.id);
    };
    // The first upload fails: the step's retry resumes at the upload, with the report already open.
    await control("plan", { username, failAt: "upload", times: 1 });
    const resumed = await confirmRun(["e1.jpg", "e2.jpg"]);
    expect(resumed.output.terminalCode).toBe("reported");
    const step = resumed.steps.find((s: any) => s.nodeId === "ncmec");
    const log = await peerLog(username);
    expect(log.filter((l) => l.step === "submit")).toHaveLength(1);
    expect(log.filter((l) => l.step === "upload").map((l) => l.responseCode)).toEqual([1000, 0, 0]);
    expect(await peerReports(username)).toEqual([expect.objectContaining({ reportId: step.output.ncmecReportId, finished: true })]);
    const attempts = await env.DB.prepare("SELECT attempts FROM cybertipline_submissions WHERE id = ?1").bind(step.output.submissionId).first<{ attempts: number }>();
    expect(attempts!.attempts).toBe(2);

    // A document NCMEC refuses fails the node with the refusal's code; nothing more is sent.
    await control("rule", { username, require: "incidentSummary/incidentDateTimeDescription" });
    const refused = await confirmRun(["e3.jpg"]);
    expect(refused.output.terminalCode).toBe("report_failed");
    expect(JSON.stringify(refused.steps.find((s: any) => s.nodeId === "ncmec"))).toContain("cybertipline.report_rejected");
    expect((await peerLog(username)).filter((l) => l.step === "submit").map((l) => l.responseCode)).toEqual([0, 4100]);
  });

  it("a strict queue counts its work against the shortest exposure cap the installation has; a standard queue does not", async () => {
    const { admin, person } = await desk("strict");
    const strict = (await api("/api/v1/queues", { key: admin, body: { name: "strict-desk", slaSeconds: 3600, wellness: "strict" } })).body;
    const standard = (await api("/api/v1/queues", { key: admin, body: { name: "standard-desk", slaSeconds: 3600 } })).body;
    expect(strict.wellness).toBe("strict");
    expect(standard.wellness).toBe("standard");
    // Only another category is capped (at 0 minutes): the strict queue takes that shortest cap for every category.
    expect((await api("/api/v1/wellness/caps", { key: admin, method: "PUT", body: { categories: { animal_welfare: 0 } } })).status).toBe(200);
    const graph = (queue: string) => ({
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: queue, timeout_seconds: 3600 } },
        { id: "done", kind: "end" },
      ],
      edges: [
        { from: { nodeId: "start", port: "success" }, to: { nodeId: "review" } },
        { from: { nodeId: "review", port: "completed" }, to: { nodeId: "done" } },
        { from: { nodeId: "review", port: "timeout" }, to: { nodeId: "done" } },
      ],
    });
    for (const queue of ["strict-desk", "standard-desk"]) {
      const version = await publish(admin, graph(queue));
      const report = await reportWithFiles(admin, [`${queue}.jpg`]);
      const run = (await api("/api/v1/runs", { key: admin, body: { workflowVersionId: version.id, authorityMode: "autonomous", reportId: report.id } })).body;
      await waitForWait(admin, run.id);
    }
    const capped = await api(`/api/v1/queues/${strict.id}/next`, { key: person, body: {} });
    expect(capped.status).toBe(409);
    expect(capped.body.error.code).toBe("wellness.exposure_cap_reached");
    const served = await api(`/api/v1/queues/${standard.id}/next`, { key: person, body: {} });
    expect(served.status).toBe(200);
    expect(served.body.display ?? { profile: "standard" }).toMatchObject({ profile: "standard" });
    const task = (await env.DB.prepare("SELECT t.id FROM human_tasks t WHERE t.queue_id = ?1").bind(strict.id).first<{ id: string }>())!;
    expect((await api(`/api/v1/tasks/${task.id}`, { key: person })).body.display).toEqual({ profile: "strict", blurMedia: true, greyscale: true, locked: true, exposureCapMinutes: 0 });
  });

  it("a preserved file survives the retention sweep; only an admin's audited release ends the hold, then the copy is erased", async () => {
    const { admin, person } = await desk("preserve");
    const report = await reportWithFiles(admin, ["kept.jpg"]);
    const sent = (await api("/api/v1/cybertipline/reports", { key: person, body: { reportId: report.id } })).body;
    expect(sent.state).toBe("finished");
    const past = new Date(Date.now() - 400 * DAY).toISOString();
    await env.DB.batch([
      env.DB.prepare("UPDATE cases SET last_reported_at = ?2, first_reported_at = ?2, updated_at = ?2 WHERE id = ?1").bind(report.caseId, past),
      env.DB.prepare("UPDATE reports SET created_at = ?2 WHERE case_id = ?1").bind(report.caseId, past),
    ]);
    const erasedAt = async () => (await env.DB.prepare("SELECT personal_data_erased_at AS at FROM reports WHERE id = ?1").bind(report.id).first<{ at: string | null }>())!.at;
    await sweepRetention(env, new Date());
    await sweepCyberTipline(env, new Date());
    expect(await erasedAt()).toBeNull();
    const file = await preservedFile(admin, sent.id);
    expect(file).toEqual({ status: 200, text: "media:kept.jpg" });
    const read = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'cybertipline.file_read' AND target_id = ?1").bind(sent.id).first<{ n: number }>();
    expect(read!.n).toBe(1);

    // A reviewer cannot release it; an admin can, with a reason (audited).
    const reviewer = await personKey(admin, "Rob Reviewer", ["review", "read"]);
    expect((await api(`/api/v1/preservation-holds/${sent.holdId}/release`, { key: reviewer, body: { reason: "done" } })).status).toBe(403);
    expect((await api(`/api/v1/cybertipline/reports/${sent.id}/file?index=0`, { key: reviewer })).status).toBe(403);
    const released = await api(`/api/v1/preservation-holds/${sent.holdId}/release`, { key: admin, body: { reason: "Counsel: NCMEC preservation period served" } });
    expect(released.status).toBe(200);
    await sweepRetention(env, new Date());
    expect(await erasedAt()).not.toBeNull();
    expect((await sweepCyberTipline(env, new Date())).erased).toBeGreaterThanOrEqual(1);
    const gone = await api(`/api/v1/cybertipline/reports/${sent.id}/file?index=0`, { key: admin });
    expect(gone.status).toBe(410);
    expect(gone.body.error.code).toBe("cybertipline.evidence_erased");
    const actions = (await api("/api/v1/audit-events?limit=200", { key: admin })).body.items.map((e: any) => e.action);
    expect(actions).toEqual(expect.arrayContaining(["preservation_hold.released", "cybertipline.evidence_erased"]));
  });

  it("another installation sees 404 for every submission route and cannot report another installation's report", async () => {
    const a = await desk("tenant-a");
    const b = await desk("tenant-b");
    const report = await reportWithFiles(a.admin, ["t.jpg"]);
    const sent = (await api("/api/v1/cybertipline/reports", { key: a.person, body: { reportId: report.id } })).body;
    for (const [path, body] of [
      [`/api/v1/cybertipline/reports/${sent.id}`, undefined],
      [`/api/v1/cybertipline/reports/${sent.id}/resume`, {}],
      [`/api/v1/cybertipline/reports/${sent.id}/file?index=0`, undefined],
      ["/api/v1/cybertipline/reports", { reportId: report.id }],
    ] as const) {
      const response = await api(path, { key: b.person, ...(body ? { body } : {}) });
      expect(response.status, path).toBe(404);
      expect(JSON.stringify(response.body)).not.toContain(sent.ncmecReportId);
    }
    expect((await api("/api/v1/cybertipline/reports", { key: b.admin })).body.items).toEqual([]);
  });
});
