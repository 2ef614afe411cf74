// Operations: what the Worker records about looking after itself (sweep_runs) and the alerts it
// pushes to an installation's chosen endpoint (alert_settings, alerts).
export { ALERT_KINDS, DEFAULT_REPAIR_SPIKE_THRESHOLD, getAlertSettings, listAlerts, putAlertSettings, sweepAlerts, type AlertKind } from "./alerts";
export { recordSweepRuns, SWEEP_RUNS_RETENTION_DAYS, type RecordedSweep } from "./sweep-runs";
