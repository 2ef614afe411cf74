// Signals of a subject's owner (subject.signals: IP, device id, email, payment fingerprint): kept
// only as keyed hashes in account_signals, per account, with first and last seen, so the account
// page lists the accounts that share them (accounts/). Never sealed with the report, never stored.
import { signalKey } from "../../lib/person-keys";

export const SIGNAL_KINDS = { ip: "ip", deviceId: "device", email: "email", paymentFingerprint: "payment" } as const;
export type SignalInput = Partial<Record<keyof typeof SIGNAL_KINDS, string>>;

/** A signal as compared: trimmed; an IP and an email also case-insensitively. */
function normalize(kind: string, value: string): string {
  const trimmed = value.normalize("NFKC").trim();
  return kind === "ip" || kind === "email" ? trimmed.toLowerCase() : trimmed;
}

/** The keyed signals of a report's subject owner. */
export function signalKeys(installationId: string, signals: SignalInput | undefined): Array<{ kind: string; signal: string }> {
  const keys: Array<{ kind: string; signal: string }> = [];
  for (const [field, kind] of Object.entries(SIGNAL_KINDS)) {
    const value = signals?.[field as keyof SignalInput];
    if (typeof value === "string" && value.trim().length > 0) keys.push({ kind, signal: signalKey(installationId, kind, normalize(kind, value)) });
  }
  return keys;
}

/** For intake's batch: the owner's signals seen now, written only if the report was. */
export function signalsStatement(db: D1Database, input: { installationId: string; reportId: string; accountKey: string | null; signals: Array<{ kind: string; signal: string }>; at: string }): D1PreparedStatement | null {
  if (!input.accountKey || input.signals.length === 0) return null;
  return db
    .prepare(`INSERT INTO account_signals (installation_id, signal, account_key, kind, first_seen, last_seen, seen)
      SELECT ?1, json_extract(s.value, '$.signal'), ?2, json_extract(s.value, '$.kind'), ?3, ?3, 1 FROM json_each(?4) s
      WHERE EXISTS (SELECT 1 FROM reports WHERE id = ?5 AND installation_id = ?1)
      ON CONFLICT (installation_id, signal, account_key) DO UPDATE SET last_seen = MAX(last_seen, excluded.last_seen), seen = seen + 1`)
    .bind(input.installationId, input.accountKey, input.at, JSON.stringify(input.signals), input.reportId);
}

/** Deletes an account's signals (a person's erasure). */
export function eraseAccountSignalsStatement(db: D1Database, installationId: string, accountKey: string): D1PreparedStatement {
  return db.prepare(`DELETE FROM account_signals WHERE installation_id = ?1 AND account_key = ?2`).bind(installationId, accountKey);
}
