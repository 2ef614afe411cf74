-- CyberTipline reports (NCMEC's Reporting API, 18 U.S.C. § 2258A): where an installation reports
-- from, and each report it files.
--
-- cybertipline_settings: configuration tier, one row per installation (~600 bytes). The ESP's
-- registration with NCMEC: the API base URL, the username and password NCMEC issued and the
-- reporting person's contact (both sealed under the installation's key, never returned or logged).
CREATE TABLE cybertipline_settings (
  installation_id TEXT PRIMARY KEY,
  base_url TEXT NOT NULL,
  credentials_sealed TEXT NOT NULL,
  reporter_sealed TEXT NOT NULL,
  -- The product the reported person used (espService), shown on every report; not personal data.
  esp_service TEXT,
  enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- cybertipline_submissions: hot tier while open, a few per installation a day; ~700 bytes a row
-- (the report's XML, the reported person and the files' names are sealed in `payload_sealed`; the
-- files themselves are sealed objects in R2 under keys derived from the id, see
-- enforcement/cybertipline/evidence.ts). A submission is the exactly-once record of one report:
-- each step of the API's protocol (open → upload each file → file details → finish) writes its
-- result here before the next starts, so a submission that stopped halfway resumes where it
-- stopped, and `ncmec_report_id` is written once (a second /submit is never sent for a row that
-- has one). Rows are kept while their preservation hold is active (one year); the row holds no
-- personal data in the clear.
CREATE TABLE cybertipline_submissions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  case_id TEXT NOT NULL,
  report_id TEXT NOT NULL,
  -- The workflow step that asked for it (NULL from the API): one submission per step.
  run_id TEXT,
  step_run_id TEXT UNIQUE,
  state TEXT NOT NULL CHECK (state IN ('pending', 'opened', 'finished', 'rejected')),
  ncmec_report_id TEXT,
  -- [{ "fileId": string|null, "details": 0|1, "sha256": hex }] by file index: each upload's file id
  -- and whether its details were sent, written as each step answers.
  files_json TEXT NOT NULL,
  payload_sealed TEXT NOT NULL,
  -- sha256 of the report's XML as built (what NCMEC was sent).
  xml_digest TEXT NOT NULL,
  -- Who confirmed it: the authenticated principal (a console user's email or a reviewer key's
  -- identity), and the human task it was confirmed in, if any.
  confirmed_by TEXT NOT NULL,
  confirmation_task_id TEXT,
  hold_id TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  -- A pass that works on the row holds it until then (no two passes send the same step).
  lease_until TEXT,
  next_attempt_at TEXT,
  last_error_code TEXT,
  last_response_code INTEGER,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT,
  -- When the preserved files and the sealed payload were erased, after the hold ended.
  evidence_erased_at TEXT
);
-- The installation's list, newest first.
CREATE INDEX cybertipline_submissions_installation ON cybertipline_submissions (installation_id, created_at);
-- The sweep's "open and due" (pending and opened rows only; finished and rejected ones are not indexed).
CREATE INDEX cybertipline_submissions_due ON cybertipline_submissions (next_attempt_at) WHERE state IN ('pending', 'opened');
-- Erasing the preserved copies of ended submissions whose hold is over (rows not yet erased only).
CREATE INDEX cybertipline_submissions_preserved ON cybertipline_submissions (installation_id) WHERE evidence_erased_at IS NULL AND state IN ('finished', 'rejected');

-- A queue's wellness profile. 'strict' (the child-safety desk's): media in its tasks are shown
-- blurred and in greyscale whatever a reviewer's own preference (a reviewer may unblur one item to
-- confirm it, never lift the greyscale), and /next counts its work against the shortest exposure
-- cap the installation has (or 60 minutes a day when it has none). The column adds a few bytes to
-- a configuration row.
ALTER TABLE queues ADD COLUMN wellness TEXT NOT NULL DEFAULT 'standard' CHECK (wellness IN ('standard', 'strict'));
