-- Promotion gates and automatic demotion (issue 14 §3).
--
-- trigger_gates: per installation and trigger, what a promotion needs (shadow → assisted: compared
-- runs and the lower bound of agreement's 95% Wilson interval; assisted → autonomous: per action
-- type of the version, decided proposals and the lower bound of precision) and when an autonomous
-- trigger is demoted (the overturn rate over a window, above a minimum sample). No row: the
-- defaults of src/cases/promotion/promotion-gates.ts apply.
-- action_type_gates: per installation and action type, what promoting its autonomy needs.
-- action_types.autonomy: 'assisted' makes every action of the type a proposal that waits for a
-- person, even in an autonomous run ('autonomous', the default, is the behaviour before).
-- triggers.authority_changed_at: when the trigger's mode last changed by a promotion or demotion
-- (the demotion window starts no earlier); demotion_checked_at: the demotion sweep's last look.
-- trigger_demotions: every automatic demotion, with its figures and their digest (the source of
-- its automation.demoted webhook delivery).

PRAGMA defer_foreign_keys = true;

ALTER TABLE action_types ADD COLUMN autonomy TEXT NOT NULL DEFAULT 'autonomous' CHECK (autonomy IN ('assisted', 'autonomous'));
ALTER TABLE triggers ADD COLUMN authority_changed_at TEXT;
ALTER TABLE triggers ADD COLUMN demotion_checked_at TEXT;

CREATE TABLE trigger_gates (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  trigger_id TEXT NOT NULL REFERENCES triggers(id),
  min_compared_runs INTEGER NOT NULL CHECK (min_compared_runs BETWEEN 1 AND 100000),
  min_agreement_low REAL NOT NULL CHECK (min_agreement_low BETWEEN 0 AND 1),
  min_decided_proposals INTEGER NOT NULL CHECK (min_decided_proposals BETWEEN 1 AND 10000),
  min_precision_low REAL NOT NULL CHECK (min_precision_low BETWEEN 0 AND 1),
  max_overturn_rate REAL NOT NULL CHECK (max_overturn_rate BETWEEN 0 AND 1),
  min_overturn_sample INTEGER NOT NULL CHECK (min_overturn_sample BETWEEN 1 AND 100000),
  overturn_window_days INTEGER NOT NULL CHECK (overturn_window_days BETWEEN 1 AND 365),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, trigger_id)
);

CREATE TABLE action_type_gates (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  action_type_id TEXT NOT NULL REFERENCES action_types(id),
  min_decided_proposals INTEGER NOT NULL CHECK (min_decided_proposals BETWEEN 1 AND 10000),
  min_precision_low REAL NOT NULL CHECK (min_precision_low BETWEEN 0 AND 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, action_type_id)
);

CREATE TABLE trigger_demotions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  trigger_id TEXT NOT NULL REFERENCES triggers(id),
  from_mode TEXT NOT NULL,
  to_mode TEXT NOT NULL,
  figures_json TEXT NOT NULL,
  digest TEXT NOT NULL,
  endpoint_id TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX trigger_demotions_trigger ON trigger_demotions (installation_id, trigger_id, created_at DESC);

-- The sweep's scan: autonomous triggers, least recently looked at first. The overturn figures:
-- a trigger's runs by idempotency key range (already UNIQUE (installation_id, idempotency_key)),
-- decisions by run, appeals by decision, proposals by type.
CREATE INDEX triggers_autonomous ON triggers (demotion_checked_at) WHERE authority_mode = 'autonomous' AND enabled = 1;
CREATE INDEX decisions_run ON decisions (run_id, decided_at) WHERE run_id IS NOT NULL;
CREATE INDEX appeals_decision ON appeals (installation_id, decision_id) WHERE decision_id IS NOT NULL;
CREATE INDEX action_proposals_type_decided ON action_proposals (installation_id, action_type_key, decided_at DESC, id DESC) WHERE decided_at IS NOT NULL;
