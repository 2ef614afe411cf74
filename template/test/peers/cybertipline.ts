// NCMEC's CyberTipline Reporting API as a peer Worker for tests (host cybertipline.test, base path
// /ispws), speaking what NCMEC's documentation (report.cybertip.org/ispws/documentation) says:
// - HTTP Basic auth with an ESP's username and password (registered here by POST /_control/account);
//   anything else is 401 with responseCode 2000;
// - POST /submit: one XML `report` document, validated by the schema's rules (below) → reportResponse
//   {responseCode 0, reportId}; invalid → responseCode 4100 with the problems in responseDescription;
// - POST /upload (multipart: id, file) → {responseCode 0, reportId, fileId, hash (MD5 is what NCMEC
//   answers; the peer answers SHA-256 hex, which the platform does not read)}; unknown report → 5001;
// - POST /fileinfo: one XML `fileDetails` document, validated likewise; the file must belong to the report;
// - POST /finish (form: id) → reportDoneResponse {responseCode 0, reportId, files/fileId}; a second
//   finish → 5102 (already finished); nothing can be added to a finished report (5102).
// - POST /retract (form: id) cancels a report opened and not finished → {responseCode 0}; the report
//   is gone (later calls about it: 5001); a finished report → 5102;
// - GET /status → {responseCode 0} for accepted credentials.
// The schema's rules checked (from the XSD's sequences): required elements, their order, how many
// times each may occur, enumerations, xs:dateTime and xs:boolean values, required attributes, and
// no element the sequence does not declare. Parts the platform never writes (internetDetails,
// victims…) are accepted as opaque.
// Test controls: POST /_control/plan {username, failAt: step, times, mode?: "http_503"|"server_error"|"refuse"}
// fails that step's next `times` calls (before doing anything; "refuse" answers responseCode 4200,
// a refusal of what was sent); POST /_control/rule {username,
// require: "incidentSummary/incidentDateTimeDescription"} makes an element required from then on (a
// schema newer than the platform's copy); GET /_control/log?username= lists every call;
// GET /_control/reports?username= the stored reports. POST /_control/validate {kind: report|fileDetails,
// xml} answers the problems the validator finds. The media host (media.test) serves GET /files/<name>
// with the bytes `media:<name>` (as text/html when the name ends .html, as a hostile host would).

type Step = "submit" | "upload" | "fileinfo" | "finish" | "retract" | "status";

interface Plan {
  failAt: Step;
  times: number;
  mode: "http_503" | "server_error" | "refuse";
}

interface StoredReport {
  xml: string;
  finished: boolean;
  files: Map<string, { name: string; bytes: number; sha256: string; details: string | null }>;
}

interface Account {
  password: string;
  reports: Map<string, StoredReport>;
  log: Array<{ step: Step; reportId: string | null; responseCode: number; httpStatus: number }>;
  plans: Plan[];
  required: string[];
}

const accounts = new Map<string, Account>();
let nextReportId = 100_000;
let nextFileId = 1;

// ---- A small XML reader: elements, attributes, text; the declaration and whitespace between elements. ----

interface XmlElement {
  name: string;
  attributes: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
const decode = (text: string) => text.replace(/&(lt|gt|amp|quot|apos);/gu, (_, name: string) => ENTITIES[name]!);

function parseXml(source: string): XmlElement {
  let at = 0;
  const fail = (message: string): never => {
    throw new Error(`malformed XML at ${at}: ${message}`);
  };
  const skipSpace = () => {
    while (at < source.length && /\s/u.test(source[at]!)) at++;
  };
  skipSpace();
  if (source.startsWith("<?xml", at)) {
    const end = source.indexOf("?>", at);
    if (end < 0) fail("unterminated declaration");
    at = end + 2;
  }
  const element = (): XmlElement => {
    skipSpace();
    if (source[at] !== "<") fail("expected an element");
    const open = /^<([A-Za-z_][\w.-]*)((?:\s+[A-Za-z_][\w.:-]*\s*=\s*"[^"<]*")*)\s*(\/?)>/u.exec(source.slice(at));
    if (!open) fail("bad start tag");
    at += open![0].length;
    const attributes: Record<string, string> = {};
    for (const match of open![2]!.matchAll(/([A-Za-z_][\w.:-]*)\s*=\s*"([^"<]*)"/gu)) attributes[match[1]!] = decode(match[2]!);
    const node: XmlElement = { name: open![1]!, attributes, children: [], text: "" };
    if (open![3] === "/") return node;
    for (;;) {
      const close = source.indexOf("<", at);
      if (close < 0) fail(`unterminated ${node.name}`);
      node.text += decode(source.slice(at, close));
      at = close;
      if (source.startsWith(`</${node.name}>`, at)) {
        at += node.name.length + 3;
        return node;
      }
      if (source.startsWith("</", at)) fail(`mismatched end tag in ${node.name}`);
      node.children.push(element());
    }
  };
  const root = element();
  skipSpace();
  if (at !== source.length) fail("content after the root element");
  return root;
}

// ---- The schema's rules, as sequences of child declarations. ----

type Simple = "string" | "dateTime" | "boolean" | "integer" | { enum: readonly string[] };
interface Child {
  name: string;
  min: number;
  max: number;
  type: Simple | Sequence | "any";
  attributes?: Record<string, { required: boolean; enum?: readonly string[] }>;
}
type Sequence = Child[];

const INCIDENT_TYPES = [
  "Child Pornography (possession, manufacture, and distribution)",
  "Child Sex Trafficking",
  "Child Sex Tourism",
  "Child Sexual Molestation",
  "Misleading Domain Name",
  "Misleading Words or Digital Images on the Internet",
  "Online Enticement of Children for Sexual Act",
  "Unsolicited Obscene Material Sent to a Child",
];
const MANY = Number.POSITIVE_INFINITY;
const one = (name: string, type: Child["type"], extra: Partial<Child> = {}): Child => ({ name, min: 1, max: 1, type, ...extra });
const opt = (name: string, type: Child["type"], extra: Partial<Child> = {}): Child => ({ name, min: 0, max: 1, type, ...extra });
const any = (name: string, type: Child["type"], min = 0): Child => ({ name, min, max: MANY, type });

const PERSON = (emailMin: number): Sequence => [opt("firstName", "string"), opt("lastName", "string"), any("phone", "any"), any("email", "string", emailMin), any("address", "any"), opt("age", "integer"), opt("dateOfBirth", "string")];

const REPORT: Sequence = [
  one("incidentSummary", [one("incidentType", { enum: INCIDENT_TYPES }), opt("escalateToHighPriority", "string"), opt("reportAnnotations", "any"), one("incidentDateTime", "dateTime"), opt("incidentDateTimeDescription", "string")]),
  any("internetDetails", "any"),
  opt("lawEnforcement", "any"),
  one("reporter", [one("reportingPerson", PERSON(1)), opt("contactPerson", "any"), opt("companyTemplate", "string"), opt("termsOfService", "string"), opt("legalUrl", "string")]),
  opt("personOrUserReported", [
    opt("personOrUserReportedPerson", PERSON(0)),
    opt("vehicleDescription", "string"),
    opt("espIdentifier", "string"),
    opt("espService", "string"),
    opt("screenName", "string"),
    any("displayName", "string"),
    any("profileUrl", "string"),
    any("ipCaptureEvent", "any"),
    any("deviceId", "any"),
    opt("thirdPartyUserReported", "boolean"),
    any("priorCTReports", "integer"),
    any("groupIdentifier", "string"),
    opt("estimatedLocation", "any"),
    opt("additionalInfo", "string"),
  ]),
  any("intendedRecipient", "any"),
  any("victim", "any"),
  opt("additionalInfo", "string"),
];

const FILE_DETAILS: Sequence = [
  one("reportId", "integer"),
  one("fileId", "string"),
  opt("fileName", "string"),
  opt("originalFileName", "string"),
  opt("locationOfFile", "string"),
  opt("fileViewedByEsp", "boolean"),
  opt("exifViewedByEsp", "boolean"),
  opt("publiclyAvailable", "boolean"),
  opt("fileRelevance", { enum: ["Reported", "Supplemental Reported", "Supplemental"] }),
  opt("fileAnnotations", "any"),
  opt("industryClassification", { enum: ["A1", "A2", "B1", "B2"] }),
  { name: "originalFileHash", min: 0, max: MANY, type: "string", attributes: { hashType: { required: true } } },
  any("ipCaptureEvent", "any"),
  any("deviceId", "any"),
  { name: "details", min: 0, max: MANY, type: [{ name: "nameValuePair", min: 1, max: MANY, type: [one("name", "string"), one("value", "string")] }], attributes: { type: { required: false, enum: ["EXIF", "HASH"] } } },
  any("additionalInfo", "string"),
];

const DATE_TIME = /^-?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$/u;
const XSI = new Set(["xmlns:xsi", "xsi:noNamespaceSchemaLocation"]);

function checkSimple(type: Simple, value: string, path: string, problems: string[]) {
  const text = value.trim();
  if (type === "dateTime" && !DATE_TIME.test(text)) problems.push(`${path}: not an xs:dateTime`);
  if (type === "boolean" && !["true", "false", "1", "0"].includes(text)) problems.push(`${path}: not an xs:boolean`);
  if (type === "integer" && !/^-?\d+$/u.test(text)) problems.push(`${path}: not an xs:integer`);
  if (typeof type === "object" && !type.enum.includes(text)) problems.push(`${path}: "${text.slice(0, 80)}" is not one of the enumeration`);
}

function checkElement(element: XmlElement, declaration: Child, path: string, problems: string[]) {
  for (const [name, rule] of Object.entries(declaration.attributes ?? {})) {
    const value = element.attributes[name];
    if (value === undefined && rule.required) problems.push(`${path}: attribute ${name} is required`);
    if (value !== undefined && rule.enum && !rule.enum.includes(value)) problems.push(`${path}/@${name}: not one of the enumeration`);
  }
  for (const name of Object.keys(element.attributes)) if (!declaration.attributes?.[name] && !XSI.has(name)) problems.push(`${path}: attribute ${name} is not declared`);
  if (declaration.type === "any") return;
  if (Array.isArray(declaration.type)) {
    if (element.text.trim() !== "") problems.push(`${path}: text is not allowed here`);
    checkSequence(element.children, declaration.type, path, problems);
    return;
  }
  if (element.children.length > 0) problems.push(`${path}: child elements are not allowed here`);
  checkSimple(declaration.type, element.text, path, problems);
}

/** Walks the children against the sequence: each declaration in turn takes its run of elements (min..max). */
function checkSequence(children: XmlElement[], sequence: Sequence, path: string, problems: string[]) {
  let index = 0;
  for (const declaration of sequence) {
    let count = 0;
    while (index < children.length && children[index]!.name === declaration.name) {
      count++;
      if (count > declaration.max) problems.push(`${path}/${declaration.name}: at most ${declaration.max} allowed`);
      checkElement(children[index]!, declaration, `${path}/${declaration.name}`, problems);
      index++;
    }
    if (count < declaration.min) problems.push(`${path}/${declaration.name}: required (in this position of the sequence)`);
  }
  if (index < children.length) problems.push(`${path}/${children[index]!.name}: not expected here (unknown element or out of order)`);
}

function validate(kind: "report" | "fileDetails", xml: string, required: string[] = []): { problems: string[]; root: XmlElement | null } {
  let root: XmlElement;
  try {
    root = parseXml(xml);
  } catch (error) {
    return { problems: [(error as Error).message], root: null };
  }
  const problems: string[] = [];
  if (root.name !== kind) problems.push(`root element must be ${kind}`);
  else checkElement(root, one(kind, kind === "report" ? REPORT : FILE_DETAILS), kind, problems);
  for (const rule of required) {
    let nodes = [root];
    for (const part of rule.split("/")) nodes = nodes.flatMap((n) => n.children.filter((c) => c.name === part));
    if (nodes.length === 0) problems.push(`${kind}/${rule}: required`);
  }
  return { problems, root };
}

// ---- The API. ----

const xmlAnswer = (root: string, fields: Record<string, string | number | string[]>, status = 200) => {
  const body = Object.entries(fields)
    .map(([k, v]) => (Array.isArray(v) ? `<${k}>${v.map((id) => `<fileId>${id}</fileId>`).join("")}</${k}>` : `<${k}>${String(v).replace(/[<&]/gu, (c) => (c === "<" ? "&lt;" : "&amp;"))}</${k}>`))
    .join("");
  return new Response(`<?xml version="1.0" encoding="UTF-8"?><${root}>${body}</${root}>`, { status, headers: { "content-type": "application/xml" } });
};

function authenticate(request: Request): { username: string; account: Account } | null {
  const header = request.headers.get("authorization") ?? "";
  if (!header.startsWith("Basic ")) return null;
  const [username, ...rest] = atob(header.slice(6)).split(":");
  const account = accounts.get(username ?? "");
  return account && account.password === rest.join(":") ? { username: username!, account } : null;
}

async function sha256(bytes: ArrayBuffer): Promise<string> {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function api(request: Request, step: Step): Promise<Response> {
  const who = authenticate(request);
  if (!who) return xmlAnswer("reportResponse", { responseCode: 2000, responseDescription: "Authentication required" }, 401);
  const { account } = who;
  const answer = (root: string, fields: Record<string, string | number | string[]>, reportId: string | null, status = 200) => {
    account.log.push({ step, reportId, responseCode: Number(fields.responseCode), httpStatus: status });
    return xmlAnswer(root, fields, status);
  };
  const plan = account.plans.find((p) => p.failAt === step && p.times > 0);
  if (plan) {
    plan.times -= 1;
    if (plan.mode === "http_503") return answer("reportResponse", { responseCode: 1000, responseDescription: "Service unavailable" }, null, 503);
    if (plan.mode === "refuse") return answer("reportResponse", { responseCode: 4200, responseDescription: "Malformed submittal" }, null, 400);
    return answer("reportResponse", { responseCode: 1000, responseDescription: "Server error" }, null, 500);
  }
  if (step === "status") return answer("reportResponse", { responseCode: 0, responseDescription: "Success" }, null);
  if (step === "retract") {
    const form = await request.formData();
    const reportId = String(form.get("id") ?? "");
    const report = account.reports.get(reportId);
    if (!report) return answer("reportResponse", { responseCode: 5001, responseDescription: "Report does not exist", reportId }, reportId, 400);
    if (report.finished) return answer("reportResponse", { responseCode: 5102, responseDescription: "Report already finished", reportId }, reportId, 400);
    account.reports.delete(reportId);
    return answer("reportResponse", { responseCode: 0, responseDescription: "Success", reportId }, reportId);
  }
  if (step === "submit") {
    const xml = await request.text();
    const { problems } = validate("report", xml, account.required);
    if (problems.length > 0) return answer("reportResponse", { responseCode: 4100, responseDescription: `Validation failed: ${problems.join("; ")}` }, null, 400);
    const reportId = String(nextReportId++);
    account.reports.set(reportId, { xml, finished: false, files: new Map() });
    return answer("reportResponse", { responseCode: 0, responseDescription: "Success", reportId }, reportId);
  }
  if (step === "upload") {
    const form = await request.formData();
    const reportId = String(form.get("id") ?? "");
    const file = form.get("file");
    const report = account.reports.get(reportId);
    if (!report) return answer("reportResponse", { responseCode: 5001, responseDescription: "Report does not exist", reportId }, reportId, 400);
    if (report.finished) return answer("reportResponse", { responseCode: 5102, responseDescription: "Report already finished", reportId }, reportId, 400);
    if (!(file instanceof File)) return answer("reportResponse", { responseCode: 4200, responseDescription: "Malformed file submittal", reportId }, reportId, 400);
    const bytes = await file.arrayBuffer();
    const fileId = `f${String(nextFileId++).padStart(6, "0")}`;
    const hash = await sha256(bytes);
    report.files.set(fileId, { name: file.name, bytes: bytes.byteLength, sha256: hash, details: null });
    return answer("reportResponse", { responseCode: 0, responseDescription: "Success", reportId, fileId, hash }, reportId);
  }
  if (step === "fileinfo") {
    const xml = await request.text();
    const { problems, root } = validate("fileDetails", xml);
    const reportId = root?.children.find((c) => c.name === "reportId")?.text.trim() ?? null;
    if (problems.length > 0) return answer("reportResponse", { responseCode: 4100, responseDescription: `Validation failed: ${problems.join("; ")}` }, reportId, 400);
    const report = account.reports.get(reportId ?? "");
    const fileId = root!.children.find((c) => c.name === "fileId")!.text.trim();
    if (!report) return answer("reportResponse", { responseCode: 5001, responseDescription: "Report does not exist", reportId: reportId ?? "" }, reportId, 400);
    if (report.finished) return answer("reportResponse", { responseCode: 5102, responseDescription: "Report already finished", reportId: reportId! }, reportId, 400);
    const file = report.files.get(fileId);
    if (!file) return answer("reportResponse", { responseCode: 5002, responseDescription: "File does not exist", reportId: reportId! }, reportId, 400);
    file.details = xml;
    return answer("reportResponse", { responseCode: 0, responseDescription: "Success", reportId: reportId! }, reportId);
  }
  const form = await request.formData();
  const reportId = String(form.get("id") ?? "");
  const report = account.reports.get(reportId);
  if (!report) return answer("reportDoneResponse", { responseCode: 5001, reportId }, reportId, 400);
  if (report.finished) return answer("reportDoneResponse", { responseCode: 5102, reportId }, reportId, 400);
  report.finished = true;
  return answer("reportDoneResponse", { responseCode: 0, reportId, files: [...report.files.keys()] }, reportId);
}

async function control(request: Request, url: URL): Promise<Response> {
  const json = (value: unknown) => Response.json(value);
  if (url.pathname === "/_control/validate") {
    const body = (await request.json()) as { kind: "report" | "fileDetails"; xml: string };
    return json({ problems: validate(body.kind, body.xml).problems });
  }
  if (request.method === "POST") {
    const body = (await request.json()) as { username: string; password?: string; failAt?: Step; times?: number; mode?: Plan["mode"]; require?: string };
    if (url.pathname === "/_control/account") {
      accounts.set(body.username, { password: body.password ?? "", reports: new Map(), log: [], plans: [], required: [] });
      return json({ ok: true });
    }
    const account = accounts.get(body.username);
    if (!account) return new Response("unknown account", { status: 404 });
    if (url.pathname === "/_control/plan") account.plans.push({ failAt: body.failAt!, times: body.times ?? 1, mode: body.mode ?? "http_503" });
    if (url.pathname === "/_control/rule") account.required.push(body.require!);
    return json({ ok: true });
  }
  const account = accounts.get(url.searchParams.get("username") ?? "");
  if (!account) return new Response("unknown account", { status: 404 });
  if (url.pathname === "/_control/log") return json(account.log);
  return json(
    [...account.reports.entries()].map(([reportId, report]) => ({
      reportId,
      finished: report.finished,
      xml: report.xml,
      files: [...report.files.entries()].map(([fileId, file]) => ({ fileId, ...file })),
    })),
  );
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.hostname === "media.test") {
      const name = url.pathname.replace(/^\/files\//u, "");
      return url.pathname.startsWith("/files/") ? new Response(`media:${name}`, { headers: { "content-type": name.endsWith(".html") ? "text/html" : "image/jpeg" } }) : new Response("not found", { status: 404 });
    }
    if (url.pathname.startsWith("/_control/")) return control(request, url);
    const step = /^\/ispws\/(submit|upload|fileinfo|finish|retract|status)$/u.exec(url.pathname)?.[1] as Step | undefined;
    if (!step || request.method !== (step === "status" ? "GET" : "POST")) return new Response("not found", { status: 404 });
    return api(request, step);
  },
};
