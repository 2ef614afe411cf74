// Accounts: an account's history (the subjects it owns, as reports name them), its strikes and
// ladder of sanctions (DSA Art. 23(1) included), keyed by a keyed hash of the product's own id.
// strikes.ts holds the statements the decision and appeal batches of enforcement and cases add.
export { readAccount, accountKeyOf, sanctionView } from "./accounts";
export { ART23_WARNING_REQUIRED, sanctionAccount, settleAccount, settleDecisionAccount, settleOverturnedDecision, startSanctions, sweepAccountLadders } from "./ladder";
export { getStrikePolicy, kindOf, LADDER_AUTHORITY_MODES, putStrikePolicy, SANCTION_KINDS, type SanctionKind, type StrikePolicy } from "./strike-policy";
export { accountRecordsOf, strikeAccrualStatement, strikeReversalStatement, unlinkAccountStatements } from "./strikes";
export { ART23_SUSPENSIONS_SQL } from "./transparency";
export { sweepBulkActions } from "./bulk-actions";
