// Wellness on the review pages: why "Next task" passed over a category (the reviewer reached its
// daily exposure cap) or found only capped work left, and when the caps reset. Blur and greyscale
// of media stay as they are (task/panels.tsx).
import { get, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { AbsoluteTime } from "../ui";

export type NextTask = ApiResponse<"post", "/queues/:id/next">;
type Exposure = ApiResponse<"get", "/wellness/exposure">;
type Skipped = NextTask["wellness"]["skipped"][number];

export interface CapNotice {
  /** `skipped`: the task handed out is of other work; `none_left`: only capped work is left in the queue. */
  kind: "skipped" | "none_left";
  skipped: Array<Pick<Skipped, "category" | "exposureMinutes" | "capMinutes" | "waitingTasks">>;
  resetsAt: string;
}

/** What /next said about the tasks it handed out, by task id (read by the task page it opens). */
const byTask = new Map<string, CapNotice>();

export function rememberNext(task: NextTask): void {
  if (task.wellness.skipped.length === 0) return;
  byTask.set(task.id, { kind: "skipped", skipped: task.wellness.skipped, resetsAt: task.wellness.resetsAt });
  if (byTask.size > 20) byTask.delete(byTask.keys().next().value!);
}

export function skippedFor(taskId: string): CapNotice | null {
  return byTask.get(taskId) ?? null;
}

/** The notice of a 409 wellness.exposure_cap_reached (its details name the capped categories). */
export function capReachedNotice(details: unknown): CapNotice {
  const d = (details ?? {}) as { capped?: CapNotice["skipped"]; resetsAt?: string };
  return { kind: "none_left", skipped: Array.isArray(d.capped) ? d.capped : [], resetsAt: d.resetsAt ?? "" };
}

const label = (category: string) => category.replace(/_/gu, " ");

export function WellnessNotice({ notice }: { notice: CapNotice | null }) {
  if (!notice) return null;
  const names = notice.skipped.map((s) => label(s.category)).join(", ") || "some categories";
  const figures = notice.skipped.map((s) => `${label(s.category)}: ${Math.round(s.exposureMinutes)} of ${s.capMinutes} min today, ${s.waitingTasks} waiting`).join("; ");
  return (
    <div className={`note ${notice.kind === "none_left" ? "note-warn" : "note-info"}`} role="status" data-testid="wellness-notice" data-kind={notice.kind}>
      {notice.kind === "skipped" ? (
        <p>
          <strong>Skipped {names}.</strong> You reached today's exposure limit for {notice.skipped.length === 1 ? "it" : "them"}, so this is a task of other work.
        </p>
      ) : (
        <p>
          <strong>Only {names} work is left in this queue</strong>, and you reached today's exposure limit for it. Take a break, or work another queue.
        </p>
      )}
      <p className="small">
        {figures ? `${figures}. ` : ""}The limits reset {notice.resetsAt ? <AbsoluteTime at={notice.resetsAt} /> : "at midnight UTC"}; other reviewers still get this work.
      </p>
    </div>
  );
}

/** The reviewer's own exposure today in the categories that have a cap (nothing when none has). */
export function ExposureSummary() {
  const exposure = useResource((signal) => get<Exposure>("/wellness/exposure", signal), []);
  const capped = (exposure.data?.categories ?? []).filter((c) => c.capMinutes !== null && (c.exposureMinutes > 0 || c.capped));
  if (capped.length === 0) return null;
  return (
    <p className="muted small" data-testid="exposure-summary">
      Your exposure today: {capped.map((c) => `${label(c.category)} ${Math.round(c.exposureMinutes)} of ${c.capMinutes} min${c.capped ? " (limit reached)" : ""}`).join(" · ")}.
    </p>
  );
}
