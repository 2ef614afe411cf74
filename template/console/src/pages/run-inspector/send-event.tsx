// Sending an event to a run, for admins: the event types its waits expect are offered first, and
// the payload is a JSON object.
import { useState, type FormEvent } from "react";
import { post, type RunDetail } from "../../api";
import { ErrorNote, useToast } from "../../ui";

export function SendEvent({ run, onSent }: { run: RunDetail; onSent: () => void }) {
  const waiting = run.waits.filter((w) => w.state === "waiting" && w.waitType === "event");
  const [type, setType] = useState(waiting[0]?.eventType ?? "");
  const [payload, setPayload] = useState("{}");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const toast = useToast();
  const send = async (event: FormEvent) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      setError(new Error("The payload must be a JSON object."));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await post(`/runs/${encodeURIComponent(run.id)}/events`, { type, payload: parsed });
      toast(`Event ${type} sent.`);
      onSent();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={(e) => void send(e)} className="form-card">
      <div className="field">
        <label htmlFor="event-type">Event type</label>
        <input id="event-type" className="mono" list="event-types" value={type} onChange={(e) => setType(e.target.value)} required pattern="[A-Za-z0-9._:\-]{1,100}" autoComplete="off" />
        <datalist id="event-types">
          {waiting.map((w) => (
            <option key={w.id} value={w.eventType} />
          ))}
        </datalist>
        <p className="help">{waiting.length ? `The run waits for: ${[...new Set(waiting.map((w) => w.eventType))].join(", ")}.` : "The run is not waiting for an event."}</p>
      </div>
      <div className="field">
        <label htmlFor="event-payload">Payload (JSON object)</label>
        <textarea id="event-payload" className="mono" rows={4} value={payload} onChange={(e) => setPayload(e.target.value)} />
      </div>
      <ErrorNote error={error} />
      <button type="submit" className="btn" disabled={busy || !type}>
        Send event
      </button>
    </form>
  );
}
