// CyberTipline reports to NCMEC: the ESP registration, submissions (exactly once, resumable), the
// person's confirmation, the preserved files and the sweep.
export { confirmCyberTiplineReport, DEFAULT_CONFIRM_OUTCOME, reportToCyberTipline } from "./confirmation";
export { getCyberTiplineReport, listCyberTiplineReports, readPreservedFile, reconcileCyberTiplineReport, resumeCyberTiplineReport, retractCyberTiplineReport, sweepCyberTipline } from "./records";
export { checkCyberTiplineSettings, CYBERTIPLINE_PRESET_NAMES, getCyberTiplineSettings, putCyberTiplineSettings } from "./settings";
export { SUBMISSION_STATES as CYBERTIPLINE_SUBMISSION_STATES } from "./submissions";
export { INCIDENT_TYPES } from "./xml";
