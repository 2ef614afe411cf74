// Form pieces shared by the settings tabs.
import { useState, type FormEvent, type ReactNode } from "react";
import { ErrorNote } from "../../ui";

export function useSubmit(action: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (event?: FormEvent) => {
    event?.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, submit };
}

export function FormCard({ title, children, onSubmit, busy, error, submitLabel }: { title: string; children: ReactNode; onSubmit: (e: FormEvent) => void; busy: boolean; error: unknown; submitLabel: string }) {
  const id = `form-${title.replace(/\W+/gu, "-").toLowerCase()}`;
  return (
    <form className="card form-card" onSubmit={onSubmit} aria-labelledby={id}>
      <h2 id={id} className="h3">
        {title}
      </h2>
      {children}
      <ErrorNote error={error} />
      <button type="submit" className="btn btn-primary" disabled={busy}>
        {busy ? "Saving…" : submitLabel}
      </button>
    </form>
  );
}

export function Input({ id, label, help, ...rest }: { id: string; label: string; help?: string } & React.InputHTMLAttributes<HTMLInputElement>) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} aria-describedby={help ? `${id}-help` : undefined} autoComplete="off" {...rest} />
      {help ? (
        <p className="help" id={`${id}-help`}>
          {help}
        </p>
      ) : null}
    </div>
  );
}
