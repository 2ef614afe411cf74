-- The sanctions a run acted for, by run: an appeal that overturns the decision a sanction's own run
-- recorded (the account action's statement of reasons) walks that sanction back with it. Partial:
-- only sanctions whose run was started, a few per account at most.
--
-- Storage tier: hot, with account_sanctions (an index of it).
CREATE INDEX account_sanctions_run ON account_sanctions (run_id) WHERE run_id IS NOT NULL;
