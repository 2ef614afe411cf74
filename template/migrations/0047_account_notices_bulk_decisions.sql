-- Bulk actions record a decision per subject, and the product hears when an account's sanction is
-- walked back or a strike expires. Hot tier, like the tables they extend (0040): rows grow by a
-- few bytes; nothing here is archived on its own.
--
-- bulk_actions.decision_json: the decision each subject's run records once its action is applied
-- ({ outcome, restrictions, ground, legal_ground?, contractual_ground?, policy_category? }, the
-- statement being the bulk action's reason), ~200 bytes; workflow_version_id: the carrier version
-- its runs start (fixed at creation, so a bulk action resumed later acts as it was approved).
-- NULL in both for bulk actions created before: they keep the action-only carrier.
ALTER TABLE bulk_actions ADD COLUMN decision_json TEXT;
ALTER TABLE bulk_actions ADD COLUMN workflow_version_id TEXT;

-- account_sanctions.reversal_notified_at: when the `account.sanction_reversed` webhook of a sanction
-- walked back was written (or found no endpoint to go to). The notice sweep finds the ones due.
ALTER TABLE account_sanctions ADD COLUMN reversal_notified_at TEXT;
UPDATE account_sanctions SET reversal_notified_at = updated_at WHERE state = 'reversed';
CREATE INDEX account_sanctions_reversal_due ON account_sanctions (updated_at) WHERE state = 'reversed' AND reversal_notified_at IS NULL;

-- strikes.expiry_notified_at: when the `account.strike_expired` webhook of an expired strike was
-- written (or found no endpoint). The index holds the strikes still to expire (the hot window's
-- live strikes), ordered by expiry, so the sweep seeks those due. Strikes expired before this
-- migration are not announced after the fact.
ALTER TABLE strikes ADD COLUMN expiry_notified_at TEXT;
UPDATE strikes SET expiry_notified_at = expires_at WHERE expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now') OR reversed_at IS NOT NULL;
CREATE INDEX strikes_expiry_due ON strikes (expires_at) WHERE reversed_at IS NULL AND expiry_notified_at IS NULL;
