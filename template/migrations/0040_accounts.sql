-- Accounts, strikes and search. An account is the product's own id of a subject's owner (a
-- report's subject.ownerId); it is personal data, so no table holds it: reports already carry its
-- keyed hash (reports.subject_owner_key, migration 0023, indexed per installation), and every row
-- below names the account by that same key (`account_key`, pk1_ + 64 hex). The account page finds
-- an account's reports through reports_subject_owner_key and everything else through them.
--
-- strike_policies: one row per installation, its strike policy as canonical JSON ({ categories:
-- { <category>: { points, manifestlyIllegal? } }, expiryDays, warningPeriodHours, authorityMode,
-- ladder: [{ points, actionType, kind, workflowVersionId }] }). Read once per decision; ~1 KB.
CREATE TABLE strike_policies (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  policy_json TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- strikes: one per restricting decision on a subject with an owner, written in the decision's own
-- batch (so a decision and its strike land together). ~230 bytes a row: ids, the account key, the
-- points the policy gave at the time, when it expires, and when an appeal reversed it.
-- `settled_at` NULL: the account's ladder has not been evaluated since this strike changed (the
-- schedule's sweep settles it when the decision came from a workflow run).
CREATE TABLE strikes (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  account_key TEXT NOT NULL,
  decision_id TEXT NOT NULL,
  category TEXT NOT NULL,
  points INTEGER NOT NULL CHECK (points >= 0),
  manifestly_illegal INTEGER NOT NULL DEFAULT 0 CHECK (manifestly_illegal IN (0, 1)),
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  reversed_at TEXT,
  settled_at TEXT,
  UNIQUE (installation_id, decision_id)
);
-- The account page and the ladder: an account's strikes, newest first.
CREATE INDEX strikes_account ON strikes (installation_id, account_key, created_at DESC);
-- The settle sweep: strikes whose account was not evaluated since they changed (few at any time).
CREATE INDEX strikes_unsettled ON strikes (created_at) WHERE settled_at IS NULL;

-- account_sanctions: each rung of the ladder an account reached (or an account action a person
-- took), ~300 bytes. kind: what the action does (DSA terms: a warning, a restriction of features,
-- a suspension, a termination). art23: a suspension for manifestly illegal content (DSA Art.
-- 23(1)), which needs a prior warning on record; refused without one (state `refused`,
-- refusal_code). state: `pending` (its action's run not started yet), `started` (run_id names the
-- workflow run that carries the action through its action type, in the policy's authority mode),
-- `refused`, `reversed` (an appeal overturned a decision it counted, so the account fell below it).
CREATE TABLE account_sanctions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  account_key TEXT NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('ladder', 'manual')),
  threshold INTEGER,
  kind TEXT NOT NULL CHECK (kind IN ('warning', 'restriction', 'suspension', 'termination')),
  action_type_key TEXT NOT NULL,
  art23 INTEGER NOT NULL DEFAULT 0 CHECK (art23 IN (0, 1)),
  decision_id TEXT,
  report_id TEXT,
  state TEXT NOT NULL CHECK (state IN ('pending', 'started', 'refused', 'reversed')),
  refusal_code TEXT,
  run_id TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
-- The account page and the ladder (its live rungs, its prior warnings).
CREATE INDEX account_sanctions_account ON account_sanctions (installation_id, account_key, created_at DESC);
-- One live sanction per rung of an account's ladder: a concurrent evaluation cannot start a rung twice.
CREATE UNIQUE INDEX account_sanctions_rung ON account_sanctions (installation_id, account_key, threshold) WHERE source = 'ladder' AND state IN ('pending', 'started', 'refused');
-- The start sweep: sanctions whose run is not started yet.
CREATE INDEX account_sanctions_pending ON account_sanctions (created_at) WHERE state = 'pending';
-- The transparency report's Art. 23(1) suspensions in a period.
CREATE INDEX account_sanctions_art23 ON account_sanctions (installation_id, created_at) WHERE art23 = 1;

-- search_terms: the search index, one row per (keyed term, record). A term is the HMAC (key
-- derived from REPORT_MASTER_KEY, message bound to the installation) of a field name and a
-- normalized word or identifier, truncated to 20 hex digits: a report's description words and its
-- reporter's id and contact are sealed at rest, and only these keyed hashes are searchable, so
-- nothing is decrypted to search and no plaintext is indexed. Not FTS5: over keyed hashes FTS5
-- adds nothing a B-tree lacks (no stemming or prefixes of a hash), and `wrangler d1 export`
-- refuses a database holding an FTS5 table. WITHOUT ROWID, the key is the lookup: a term's
-- records newest first, one seek per term. ~90 bytes a row.
CREATE TABLE search_terms (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  term TEXT NOT NULL,
  created_at TEXT NOT NULL,
  record_id TEXT NOT NULL,
  PRIMARY KEY (installation_id, term, created_at, record_id)
) WITHOUT ROWID;
-- Erasing a report's personal data (retention, a person's erasure) deletes its terms with it.
CREATE INDEX search_terms_record ON search_terms (record_id);

-- bulk_actions: one action type over up to 10,000 subjects (an id list or a search's reports),
-- ~250 bytes. state: approval_required (assisted: a person approves the whole, then its runs act
-- autonomously), running, paused, cancelled, completed. `started` counts items whose run exists.
CREATE TABLE bulk_actions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  action_type_key TEXT NOT NULL,
  reason TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('approval_required', 'running', 'paused', 'cancelled', 'completed')),
  total INTEGER NOT NULL,
  started INTEGER NOT NULL DEFAULT 0,
  created_by TEXT NOT NULL,
  approved_by TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
-- The sweep: running bulk actions, least recently advanced first.
CREATE INDEX bulk_actions_running ON bulk_actions (updated_at) WHERE state = 'running';

-- bulk_action_items: one per subject, ~120 bytes; keyed by the bulk action and the item's place,
-- which the run's Idempotency-Key repeats (a resumed slice replays a started run, never a second).
-- run_id NULL: not started yet.
CREATE TABLE bulk_action_items (
  bulk_action_id TEXT NOT NULL REFERENCES bulk_actions(id),
  position INTEGER NOT NULL,
  subject_kind TEXT NOT NULL,
  subject_id TEXT NOT NULL,
  report_id TEXT,
  run_id TEXT,
  PRIMARY KEY (bulk_action_id, position)
) WITHOUT ROWID;

-- account_signals: what ties accounts together, stored only as keyed hashes (never the IP, device
-- id, email or payment fingerprint itself): one row per (signal, account), with when it was first
-- and last seen and how often. Written by intake from a report's subject.signals (the owner's);
-- deleted with the person's data on erasure. ~150 bytes a row. The key finds an account's fellow
-- holders of a signal (one seek per signal); account_signals_account finds an account's signals.
CREATE TABLE account_signals (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  signal TEXT NOT NULL,
  account_key TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('ip', 'device', 'email', 'payment')),
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL,
  seen INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (installation_id, signal, account_key)
) WITHOUT ROWID;
CREATE INDEX account_signals_account ON account_signals (installation_id, account_key);
