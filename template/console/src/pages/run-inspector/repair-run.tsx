// Repair of one run stopped for repair (or failed), for admins: retry the failed node, route it to
// a port, or migrate the run to another version of its workflow; each with a reason.
import { useState, type FormEvent } from "react";
import { get, post, type RunDetail, type Workflow, type WorkflowVersion } from "../../api";
import { portsOf } from "../../graph/kinds";
import { useResource } from "../../hooks";
import { ErrorNote, shortId, useToast } from "../../ui";

type RepairAction = "retry" | "route" | "migrate";

/** Retry the failed node, route it to a port (a person's decision), or migrate the run to another version; each with a reason. */
export function RepairRun({ run, version, onRepaired }: { run: RunDetail; version: WorkflowVersion; onRepaired: () => void }) {
  const failed = run.steps.filter((s) => s.state === "failed" && s.output === null);
  const nodeId = failed[0]?.nodeId ?? run.currentNodeId ?? "";
  const node = version.graph.nodes.find((n) => n.id === nodeId);
  const ports = node ? portsOf(node) : [];
  const workflow = useResource((signal) => get<Workflow>(`/workflows/${encodeURIComponent(version.workflowId)}`, signal), [version.workflowId]);
  const others = (workflow.data?.versions ?? []).filter((v) => v.id !== version.id && !v.retiredAt);
  const [action, setAction] = useState<RepairAction>("retry");
  const [port, setPort] = useState(ports[0] ?? "");
  const [target, setTarget] = useState("");
  const [reason, setReason] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const toast = useToast();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = action === "route" ? { action, port, reason } : action === "migrate" ? { action, workflowVersionId: target || others[0]?.id || "", reason } : { action, reason };
      await post(`/runs/${encodeURIComponent(run.id)}/repair`, body);
      toast(action === "retry" ? `Node ${nodeId} runs again.` : action === "route" ? `Node ${nodeId} routed to ${port}.` : "The run continues on the chosen version.");
      setReason("");
      onRepaired();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={(e) => void submit(e)} className="form-card" aria-labelledby="repair-heading" data-testid="repair-form">
      <h2 id="repair-heading">Repair</h2>
      <p className="help">
        Node <code>{nodeId || "—"}</code> failed. The run keeps its id and history and continues in a new instance; recorded nodes are not run again.
      </p>
      <fieldset className="field">
        <legend>Action</legend>
        <label>
          <input type="radio" name="repair-action" value="retry" checked={action === "retry"} onChange={() => setAction("retry")} /> Retry the node (after its provider or component was fixed)
        </label>
        <label>
          <input type="radio" name="repair-action" value="route" checked={action === "route"} onChange={() => setAction("route")} /> Route it to a port (your decision, recorded as such)
        </label>
        <label>
          <input type="radio" name="repair-action" value="migrate" checked={action === "migrate"} onChange={() => setAction("migrate")} disabled={others.length === 0} /> Migrate to another version
          {others.length === 0 ? " (no other live version)" : ""}
        </label>
      </fieldset>
      {action === "route" ? (
        <div className="field">
          <label htmlFor="repair-port">Port</label>
          <select id="repair-port" value={port} onChange={(e) => setPort(e.target.value)} required>
            {ports.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      {action === "migrate" ? (
        <div className="field">
          <label htmlFor="repair-version">Version</label>
          <select id="repair-version" value={target || others[0]?.id || ""} onChange={(e) => setTarget(e.target.value)} required>
            {others.map((v) => (
              <option key={v.id} value={v.id}>
                v{v.version} · {shortId(v.id)}
              </option>
            ))}
          </select>
          <p className="help">Refused if a recorded node differs there (kind, ports, config) or the failed node is missing.</p>
        </div>
      ) : null}
      <div className="field">
        <label htmlFor="repair-reason">Reason</label>
        <textarea id="repair-reason" rows={2} value={reason} onChange={(e) => setReason(e.target.value)} required maxLength={1000} />
        <p className="help">Recorded in the audit trail with your name.</p>
      </div>
      <ErrorNote error={error} />
      <button type="submit" className="btn btn-primary" disabled={busy || !reason.trim() || (action === "route" && !port)}>
        Repair the run
      </button>
    </form>
  );
}
