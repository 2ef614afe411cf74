// Small shared pieces: headings that take focus on navigation, status text, times, JSON, fields.
import { createContext, useContext, useEffect, useId, useRef, useState, type ReactNode } from "react";
import { errorMessage } from "./api";

/** The page's heading; it takes focus when the page opens so screen readers announce it. */
export function PageTitle({ children, actions, subtitle }: { children: ReactNode; actions?: ReactNode; subtitle?: ReactNode }) {
  const ref = useRef<HTMLHeadingElement>(null);
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs once, when the page opens; a title whose text changes later neither retitles the tab nor takes focus again
  useEffect(() => {
    if (typeof children === "string") document.title = `${children} · Safest Tools`;
    // Only move focus when nothing inside the page already has it (e.g. after a page reload).
    if (!document.activeElement || document.activeElement === document.body || document.activeElement.closest("nav")) ref.current?.focus({ preventScroll: true });
  }, []);
  return (
    <div className="page-title">
      <div>
        <h1 ref={ref} tabIndex={-1}>
          {children}
        </h1>
        {subtitle ? <p className="subtitle">{subtitle}</p> : null}
      </div>
      {actions ? <div className="page-actions">{actions}</div> : null}
    </div>
  );
}

export function ErrorNote({ error, retry }: { error: unknown; retry?: () => void }) {
  if (!error) return null;
  return (
    <div className="note note-error" role="alert">
      <span>{errorMessage(error)}</span>
      {retry ? (
        <button type="button" className="btn btn-small" onClick={retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

export function Loading({ label = "Loading…" }: { label?: string }) {
  return (
    <p className="loading" role="status">
      {label}
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

const units: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ["year", 31_536_000],
  ["month", 2_592_000],
  ["day", 86_400],
  ["hour", 3_600],
  ["minute", 60],
  ["second", 1],
];
const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const dtf = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function relative(iso: string, now = Date.now()): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size || unit === "second") return rtf.format(Math.trunc(seconds / size), unit);
  }
  return iso;
}

export function Time({ at, className }: { at: string | null | undefined; className?: string }) {
  if (!at) return <span className="muted">—</span>;
  return (
    <time dateTime={at} title={dtf.format(new Date(at))} className={className}>
      {relative(at)}
    </time>
  );
}

export function AbsoluteTime({ at }: { at: string | null | undefined }) {
  if (!at) return <span className="muted">—</span>;
  return <time dateTime={at}>{dtf.format(new Date(at))}</time>;
}

const STATE_TONES: Record<string, string> = {
  open: "info",
  claimed: "warn",
  completed: "ok",
  expired: "bad",
  cancelled: "muted",
  created: "muted",
  dispatch_pending: "warn",
  queued: "info",
  running: "info",
  waiting: "warn",
  repair_required: "bad",
  succeeded: "ok",
  failed: "bad",
  terminated: "muted",
  superseded: "muted",
  timed_out: "bad",
  approval_required: "warn",
  approved: "info",
  delivery_pending: "info",
  applied: "ok",
  rejected: "bad",
  enabled: "ok",
  disabled: "muted",
  delivered: "ok",
  dead: "bad",
  pending: "warn",
  satisfied: "ok",
};

/** A state as text with a tone; never colour alone. */
export function StateBadge({ state }: { state: string }) {
  return <span className={`badge tone-${STATE_TONES[state] ?? "muted"}`}>{state.replace(/_/gu, " ")}</span>;
}

export function Json({ value, label }: { value: unknown; label?: string }) {
  const text = value === undefined ? "" : JSON.stringify(value, null, 2);
  return (
    // A long value scrolls inside the <pre>: focusable so the keyboard can scroll it (axe's
    // scrollable-region-focusable), and labelled so a screen reader says what it is on focus.
    // biome-ignore lint/a11y/noNoninteractiveTabindex: focusable to scroll by keyboard, see above
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: the label names the focusable scroll area, see above
    <pre className="json" tabIndex={0} aria-label={label ?? "JSON value"}>
      {text}
    </pre>
  );
}

export function Details({ summary, children, open }: { summary: ReactNode; children: ReactNode; open?: boolean }) {
  return (
    <details open={open}>
      <summary>{summary}</summary>
      <div className="details-body">{children}</div>
    </details>
  );
}

/** A labelled form control with help and error text tied to it (aria-describedby). */
export function Field({
  label,
  help,
  error,
  children,
  id: given,
}: {
  label: ReactNode;
  help?: ReactNode;
  error?: ReactNode;
  id?: string;
  children: (props: { id: string; "aria-describedby"?: string; "aria-invalid"?: boolean }) => ReactNode;
}) {
  const auto = useId();
  const id = given ?? auto;
  const described = [help ? `${id}-help` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ");
  return (
    <div className={`field${error ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, ...(described ? { "aria-describedby": described } : {}), ...(error ? { "aria-invalid": true } : {}) })}
      {help ? (
        <p className="help" id={`${id}-help`}>
          {help}
        </p>
      ) : null}
      {error ? (
        <p className="field-error" id={`${id}-error`}>
          {error}
        </p>
      ) : null}
    </div>
  );
}

export function Copy({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      className="btn btn-small"
      onClick={() => {
        // The Worker types (loaded for the server contract) declare a smaller Navigator than the DOM's.
        void (navigator as { clipboard?: Clipboard }).clipboard?.writeText(text).then(
          () => setCopied(true),
          () => setCopied(false),
        );
      }}
    >
      {copied ? "Copied" : label}
    </button>
  );
}

/** A secret shown once, with a copy button, until the person says they stored it. */
export function SecretOnce({ title, secret, onDone }: { title: string; secret: string; onDone: () => void }) {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <section className="secret-once" aria-label={title} tabIndex={-1} ref={ref}>
      <p>
        <strong>{title}</strong> — shown only now. Store it somewhere safe; it cannot be displayed again.
      </p>
      <div className="secret-row">
        <code className="secret" data-testid="secret-once">
          {secret}
        </code>
        <Copy text={secret} />
      </div>
      <button type="button" className="btn" onClick={onDone}>
        I have stored it
      </button>
    </section>
  );
}

/** Tabs as links would be heavier; these are buttons with the ARIA tab pattern. */
export function Tabs<T extends string>({ tabs, value, onChange, label }: { tabs: Array<{ id: T; label: ReactNode }>; value: T; onChange: (id: T) => void; label: string }) {
  const refs = useRef<Array<HTMLButtonElement | null>>([]);
  return (
    <div role="tablist" aria-label={label} className="tabs">
      {tabs.map((tab, i) => (
        <button
          key={tab.id}
          ref={(el) => {
            refs.current[i] = el;
          }}
          type="button"
          role="tab"
          id={`tab-${tab.id}`}
          aria-selected={tab.id === value}
          aria-controls={`panel-${tab.id}`}
          tabIndex={tab.id === value ? 0 : -1}
          className="tab"
          onClick={() => onChange(tab.id)}
          onKeyDown={(event) => {
            const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
            if (!step) return;
            event.preventDefault();
            const next = (i + step + tabs.length) % tabs.length;
            onChange(tabs[next]!.id);
            refs.current[next]?.focus();
          }}
        >
          {tab.label}
        </button>
      ))}
    </div>
  );
}

// --- Announcements (toasts) in one live region ------------------------------------------------

interface Toast {
  id: number;
  text: string;
  tone: "ok" | "bad";
}
const ToastContext = createContext<(text: string, tone?: "ok" | "bad") => void>(() => undefined);
export const useToast = () => useContext(ToastContext);

export function ToastProvider({ children }: { children: ReactNode }) {
  const [toasts, setToasts] = useState<Toast[]>([]);
  const counter = useRef(0);
  const push = (text: string, tone: "ok" | "bad" = "ok") => {
    const id = ++counter.current;
    setToasts((list) => [...list.slice(-2), { id, text, tone }]);
    window.setTimeout(() => setToasts((list) => list.filter((t) => t.id !== id)), 6000);
  };
  return (
    <ToastContext.Provider value={push}>
      {children}
      <div className="toasts" role="status" aria-live="polite">
        {toasts.map((toast) => (
          <div key={toast.id} className={`toast tone-${toast.tone}`}>
            {toast.text}
          </div>
        ))}
      </div>
    </ToastContext.Provider>
  );
}

export function shortId(id: string | null | undefined): string {
  if (!id) return "—";
  return id.length > 14 ? `${id.slice(0, 12)}…` : id;
}

export function formatSeconds(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400} d`;
  if (seconds % 3_600 === 0) return `${seconds / 3_600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}
