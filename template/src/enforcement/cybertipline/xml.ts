// The XML of NCMEC's CyberTipline Reporting API (https://report.cybertip.org/ispws/documentation,
// schema at /ispws/xsd): the report a submission opens with (`/submit`), each file's details
// (`/fileinfo`), and reading the service's answers (`responseCode`, `reportId`, `fileId`). Elements
// are written in the order the schema's sequences require; only the parts the platform knows are
// written (everything but the incident type and time is voluntary, 18 U.S.C. § 2258A(b)).

import type { IncidentType } from "../../lib/cybertipline-vocabulary";

export { INCIDENT_TYPES, type IncidentType } from "../../lib/cybertipline-vocabulary";

/** Response codes the service documents: 0 success; the 4xxx family means the submission itself is wrong. */
export const RESPONSE_SUCCESS = 0;
export const RESPONSE_ALREADY_FINISHED = 5102;

/** The reporting person of an installation's ESP registration (the `reporter` element). */
export interface ReportingPerson {
  firstName?: string;
  lastName?: string;
  email: string;
  phone?: string;
}

export interface ReportInput {
  incidentType: IncidentType;
  incidentDateTime: string;
  reporter: ReportingPerson;
  /** Language the ESP wants on every report (how to serve legal process, retention). */
  companyTemplate?: string;
  reported: { espIdentifier?: string | null; espService?: string | null; profileUrl?: string | null };
  additionalInfo?: string;
}

export interface FileInput {
  originalFileName?: string;
  locationOfFile?: string | null;
  /** A person of the reporting company viewed the whole file (the confirmation). */
  fileViewedByEsp: boolean;
  sha256?: string | null;
  pdq?: string | null;
}

export function escapeXml(text: string): string {
  return text.replace(/[<>&"']/gu, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&apos;" })[c]!);
}

const el = (name: string, value: string | null | undefined, attributes = ""): string => (value === undefined || value === null || value === "" ? "" : `<${name}${attributes}>${escapeXml(value)}</${name}>`);

/** The document `/submit` takes: incidentSummary, reporter, personOrUserReported, additionalInfo (the schema's order). */
export function reportXml(input: ReportInput): string {
  const person = input.reporter;
  const reported = input.reported;
  const reportedXml =
    reported.espIdentifier || reported.espService || reported.profileUrl
      ? `<personOrUserReported>${el("espIdentifier", reported.espIdentifier)}${el("espService", reported.espService)}${el("profileUrl", reported.profileUrl)}</personOrUserReported>`
      : "";
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<report xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://report.cybertip.org/ispws/xsd">`,
    `<incidentSummary>${el("incidentType", input.incidentType)}${el("incidentDateTime", input.incidentDateTime)}</incidentSummary>`,
    `<reporter><reportingPerson>${el("firstName", person.firstName)}${el("lastName", person.lastName)}${person.phone ? el("phone", person.phone) : ""}${el("email", person.email)}</reportingPerson>${el("companyTemplate", input.companyTemplate)}</reporter>`,
    reportedXml,
    el("additionalInfo", input.additionalInfo),
    `</report>`,
  ].join("");
}

/** The document `/fileinfo` takes for one uploaded file: its hashes (SHA-256 as originalFileHash, PDQ as a HASH detail). */
export function fileDetailsXml(reportId: string, fileId: string, file: FileInput): string {
  const pdq = file.pdq ? `<details type="HASH"><nameValuePair><name>PDQ</name><value>${escapeXml(file.pdq)}</value></nameValuePair></details>` : "";
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<fileDetails xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://report.cybertip.org/ispws/xsd">`,
    el("reportId", reportId),
    el("fileId", fileId),
    el("originalFileName", file.originalFileName),
    el("locationOfFile", file.locationOfFile),
    el("fileViewedByEsp", String(file.fileViewedByEsp)),
    file.sha256 ? el("originalFileHash", file.sha256, ` hashType="SHA256"`) : "",
    pdq,
    `</fileDetails>`,
  ].join("");
}

export interface ServiceAnswer {
  responseCode: number | null;
  responseDescription: string | null;
  reportId: string | null;
  fileId: string | null;
}

const text = (xml: string, name: string): string | null => {
  const match = new RegExp(`<${name}>([^<]*)</${name}>`, "u").exec(xml);
  return match ? match[1]!.trim() : null;
};

/** Reads the flat answer every endpoint gives (reportResponse, reportDoneResponse): the fields the submission keeps. */
export function parseAnswer(xml: string): ServiceAnswer {
  const code = text(xml, "responseCode");
  return { responseCode: code !== null && /^\d+$/u.test(code) ? Number(code) : null, responseDescription: text(xml, "responseDescription"), reportId: text(xml, "reportId"), fileId: text(xml, "fileId") };
}
