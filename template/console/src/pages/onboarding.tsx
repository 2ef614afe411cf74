// The guided first run: a checklist from GET /onboarding, each step checked off from
// the installation's real state and linking to where it is done. Shown to admins at the top of the
// review home until every step is done or they dismiss it (per user, in this browser), and always
// at /getting-started. Its own chunk: the review pages do not load it for reviewers.
import { useState, type ReactNode } from "react";
import { server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { Link } from "../router";
import { useSession } from "../session";
import { ErrorNote, Loading, PageTitle, useToast } from "../ui";

type Checklist = ApiResponse<"get", "/onboarding">;
type StepId = Checklist["steps"][number]["id"];
type Hints = Checklist["hints"];

interface StepText {
  title: string;
  how: ReactNode;
  /** Said next to the step while it is open, from the hints (what is missing before it can happen). */
  next?: (hints: Hints) => ReactNode;
}

const STEPS: Record<StepId, StepText> = {
  connect_product: {
    title: "Connect your product",
    how: (
      <>
        Add a <Link to="/settings/webhooks">webhook endpoint</Link>: your product receives actions and messages there, signed (Standard Webhooks). Then name what it can do under <Link to="/settings/action-types">Action types</Link>.
      </>
    ),
  },
  publish_workflow: {
    title: "Publish a workflow",
    how: (
      <>
        Start from a <Link to="/templates">template</Link> or draw your own under <Link to="/workflows">Workflows</Link>.
      </>
    ),
    next: (hints) =>
      hints.triggerEnabled ? null : (
        <>
          Then connect it to reports with a <Link to="/settings/triggers">trigger</Link>.
        </>
      ),
  },
  send_report: {
    title: "Send a test report",
    how: (
      <>
        Your product sends reports to <code>POST /api/v1/reports</code> with an API key from <Link to="/settings/api-keys">API keys</Link>, or send one from here.
      </>
    ),
  },
  review_report: {
    title: "Review it",
    how: (
      <>
        Answer the report's task in the <Link to="/">review queues</Link>.
      </>
    ),
    next: (hints) => (hints.taskWaiting ? <strong>A task is waiting in a queue.</strong> : hints.triggerEnabled ? null : <>Reports become tasks once a trigger starts a workflow with a review step.</>),
  },
  see_action: {
    title: "See the action arrive",
    how: (
      <>
        When a decision takes an action, your product confirms its delivery; see the deliveries under <Link to="/settings/webhooks">Webhook endpoints</Link>.
      </>
    ),
    next: (hints) =>
      hints.actionDeliveryDead ? (
        <span className="text-bad">A delivery failed for good: check the endpoint's URL and secret.</span>
      ) : hints.actionDeliveryPending ? (
        <>A delivery is on its way (retried until your product answers 2xx).</>
      ) : hints.actionTypeExists ? null : (
        <>
          Needs an <Link to="/settings/action-types">action type</Link> delivered to your product.
        </>
      ),
  },
};

const dismissKey = (installationId: string, userId: string) => `safest.onboarding.dismissed.${installationId}.${userId}`;

function readDismissed(key: string): boolean {
  try {
    return window.localStorage.getItem(key) === "1";
  } catch {
    return false;
  }
}

/** A synthetic report, so that the checklist can be walked without a product yet. */
function SendTestReport({ onSent }: { onSent: () => void }) {
  const toast = useToast();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const send = async () => {
    setBusy(true);
    setError(null);
    try {
      await server.post("/reports", {
        subject: { kind: "content", id: `test-post-${Date.now().toString(36)}`, snapshot: { text: "Claim your prize: wire the fee to get double your money. (A test report from the getting-started checklist.)" } },
        category: "scams_and_fraud",
        description: "A test report sent from the getting-started checklist.",
      });
      toast("Test report sent.");
      onSent();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" className="btn btn-small" disabled={busy} onClick={() => void send()} data-testid="send-test-report">
        {busy ? "Sending…" : "Send a test report"}
      </button>
      <ErrorNote error={error} />
    </>
  );
}

function Steps({ checklist, reload }: { checklist: Checklist; reload: () => void }) {
  return (
    <ol className="plain-list" data-testid="onboarding-steps">
      {checklist.steps.map((step) => {
        const text = STEPS[step.id];
        const next = step.done ? null : text.next?.(checklist.hints);
        return (
          <li key={step.id} data-step={step.id} data-done={step.done ? "true" : "false"} style={{ padding: "0.5rem 0", borderBottom: "1px solid var(--border)" }}>
            <strong>{text.title}</strong> {step.done ? <span className="badge tone-ok">done</span> : <span className="badge tone-muted">to do</span>}
            <div className="muted">{text.how}</div>
            {next ? <div>{next}</div> : null}
            {step.id === "send_report" && !step.done ? <SendTestReport onSent={reload} /> : null}
          </li>
        );
      })}
    </ol>
  );
}

/** The checklist at the top of an admin's review home; nothing once done or dismissed. */
export function OnboardingPanel() {
  const { user } = useSession();
  const key = dismissKey(user.installationId, user.id);
  const [dismissed, setDismissed] = useState(() => readDismissed(key));
  const checklist = useResource(dismissed ? null : (signal) => server.get("/onboarding", { signal }), [dismissed]);
  if (dismissed || !checklist.data || checklist.data.allDone) return null;
  const dismiss = () => {
    try {
      window.localStorage.setItem(key, "1");
    } catch {
      // Storage disabled: dismissed for this page view only.
    }
    setDismissed(true);
  };
  return (
    <section className="card" aria-labelledby="onboarding-heading" data-testid="onboarding-panel">
      <div className="page-title">
        <div>
          <h2 id="onboarding-heading">
            Getting started: {checklist.data.completed} of {checklist.data.total} done
          </h2>
          <p className="subtitle">
            Each step is checked off from what your installation holds. <Link to="/getting-started">Open the checklist</Link>
          </p>
        </div>
        <div className="page-actions">
          <button type="button" className="btn btn-small btn-quiet" onClick={dismiss}>
            Dismiss
          </button>
        </div>
      </div>
      <Steps checklist={checklist.data} reload={checklist.reload} />
    </section>
  );
}

export function OnboardingPage() {
  const checklist = useResource((signal) => server.get("/onboarding", { signal }), []);
  return (
    <section data-ready={checklist.data ? "true" : undefined}>
      <PageTitle subtitle="Five steps from an empty installation to an action your product received; each is checked off from real state.">Getting started</PageTitle>
      <ErrorNote error={checklist.error} retry={checklist.reload} />
      {checklist.loading && !checklist.data ? <Loading /> : null}
      {checklist.data ? (
        <>
          <p role="status" data-testid="onboarding-progress">
            {checklist.data.allDone ? "Every step is done: your desk works end to end." : `${checklist.data.completed} of ${checklist.data.total} steps done.`}
          </p>
          <Steps checklist={checklist.data} reload={checklist.reload} />
          <p>
            <button type="button" className="btn btn-small" onClick={checklist.reload}>
              Check again
            </button>
          </p>
        </>
      ) : null}
    </section>
  );
}
