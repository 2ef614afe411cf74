// The console's entry: session, layout and routes. The review pages ship in this chunk; the
// workflow editor, run inspector, settings and the rest load on demand.
import { Component, lazy, StrictMode, Suspense, useCallback, useEffect, useState, type ComponentType, type LazyExoticComponent, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import { api, ApiError, onUnauthenticated, setCsrfToken, type ConsoleUser, type Session } from "./api";
import { Link, match, RouterProvider, useLocation } from "./router";
import { ROLE_LABELS, roleCan, SessionContext, useSession } from "./session";
import { ErrorNote, Loading, ToastProvider } from "./ui";
import { QueuePage, QueuesPage } from "./pages/queues";
import { TaskPage } from "./pages/task";
import { ApprovalsPage } from "./pages/approvals";
// The stylesheets in cascade order: later files may override earlier ones.
import "./styles/base.css";
import "./styles/components.css";
import "./styles/forms.css";
import "./styles/review.css";
import "./styles/workflows.css";
import "./styles/flow-nodes.css";
import "./styles/dashboard.css";

type Params = Record<string, string>;
const WorkflowsPage = lazy(() => import("./pages/workflows").then((m) => ({ default: m.WorkflowsPage })));
const WorkflowPage = lazy(() => import("./pages/workflows").then((m) => ({ default: m.WorkflowPage })));
const ComparePage = lazy(() => import("./pages/workflows").then((m) => ({ default: m.ComparePage })));
const EditorPage = lazy(() => import("./pages/editor").then((m) => ({ default: m.EditorPage })));
const RunsPage = lazy(() => import("./pages/runs").then((m) => ({ default: m.RunsPage })));
const RunPage = lazy(() => import("./pages/run-inspector").then((m) => ({ default: m.RunPage })));
const ReportsPage = lazy(() => import("./pages/reports").then((m) => ({ default: m.ReportsPage })));
const ReportPage = lazy(() => import("./pages/reports").then((m) => ({ default: m.ReportPage })));
const AuditPage = lazy(() => import("./pages/audit").then((m) => ({ default: m.AuditPage })));
const DashboardPage = lazy(() => import("./pages/dashboard").then((m) => ({ default: m.DashboardPage })));
const SettingsPage = lazy(() => import("./pages/settings").then((m) => ({ default: m.SettingsPage })));
const QaPage = lazy(() => import("./pages/qa").then((m) => ({ default: m.QaPage })));
const HashBanksPage = lazy(() => import("./pages/child-safety").then((m) => ({ default: m.HashBanksPage })));
const CyberTiplinePage = lazy(() => import("./pages/child-safety").then((m) => ({ default: m.CyberTiplinePage })));
const CyberTiplineReportPage = lazy(() => import("./pages/child-safety").then((m) => ({ default: m.CyberTiplineReportPage })));
const TransparencyPage = lazy(() => import("./pages/transparency").then((m) => ({ default: m.TransparencyPage })));
const SearchPage = lazy(() => import("./pages/accounts").then((m) => ({ default: m.SearchPage })));
const AccountPage = lazy(() => import("./pages/accounts").then((m) => ({ default: m.AccountPage })));
const StoragePage = lazy(() => import("./pages/storage").then((m) => ({ default: m.StoragePage })));
const RulesPage = lazy(() => import("./pages/rules").then((m) => ({ default: m.RulesPage })));
const GalleryPage = lazy(() => import("./pages/gallery").then((m) => ({ default: m.GalleryPage })));
const OnboardingPage = lazy(() => import("./pages/onboarding").then((m) => ({ default: m.OnboardingPage })));
const OnboardingPanel = lazy(() => import("./pages/onboarding").then((m) => ({ default: m.OnboardingPanel })));

type Page = ComponentType<{ params: Params }> | LazyExoticComponent<ComponentType<{ params: Params }>>;
const ROUTES: Array<[string, Page, string]> = [
  ["/", QueuesPage, "review"],
  ["/queues/:id", QueuePage, "review"],
  ["/tasks/:id", TaskPage, "review"],
  ["/approvals", ApprovalsPage, "approvals"],
  ["/reports", ReportsPage, "reports"],
  ["/reports/:id", ReportPage, "reports"],
  ["/search", SearchPage, "search"],
  ["/accounts/:id", AccountPage, "search"],
  ["/workflows", WorkflowsPage, "workflows"],
  ["/workflows/:id", WorkflowPage, "workflows"],
  ["/workflows/:id/edit", EditorPage, "workflows"],
  ["/workflows/:id/compare", ComparePage, "workflows"],
  ["/templates", GalleryPage, "templates"],
  ["/getting-started", OnboardingPage, "getting-started"],
  ["/runs", RunsPage, "runs"],
  ["/runs/:id", RunPage, "runs"],
  ["/dashboard", DashboardPage, "dashboard"],
  ["/audit", AuditPage, "audit"],
  ["/qa", QaPage, "qa"],
  ["/transparency", TransparencyPage, "transparency"],
  ["/hash-banks", HashBanksPage, "child-safety"],
  ["/cybertipline", CyberTiplinePage, "child-safety"],
  ["/cybertipline/:id", CyberTiplineReportPage, "child-safety"],
  ["/storage", StoragePage, "storage"],
  ["/rules", RulesPage, "rules"],
  ["/settings", SettingsPage, "settings"],
  ["/settings/:tab", SettingsPage, "settings"],
];

const NAV: Array<[string, string, string]> = [
  ["/", "Review", "review"],
  ["/dashboard", "Dashboard", "dashboard"],
  ["/approvals", "Approvals", "approvals"],
  ["/reports", "Reports", "reports"],
  ["/search", "Search", "search"],
  ["/workflows", "Workflows", "workflows"],
  ["/templates", "Templates", "templates"],
  ["/runs", "Runs", "runs"],
  ["/audit", "Audit", "audit"],
  ["/qa", "QA", "qa"],
  ["/transparency", "DSA report", "transparency"],
  ["/cybertipline", "Child safety", "child-safety"],
  ["/storage", "Storage", "storage"],
  ["/rules", "Rules", "rules"],
  ["/settings", "Settings", "settings"],
];

function resolve(pathname: string): { page: Page; params: Params; section: string } | null {
  for (const [pattern, page, section] of ROUTES) {
    const params = match(pattern, pathname);
    if (params) return { page, params, section };
  }
  return null;
}

function NotFound() {
  return (
    <section>
      <h1 tabIndex={-1}>Not found</h1>
      <p>
        There is no console page at this address. <Link to="/">Go to the review queues</Link>.
      </p>
    </section>
  );
}

/** A page that throws shows what happened instead of a blank screen; the rest of the console works. */
class PageBoundary extends Component<{ children: ReactNode }, { error: Error | null }> {
  override state = { error: null as Error | null };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  override render() {
    if (!this.state.error) return this.props.children;
    return (
      <section>
        <h1 tabIndex={-1}>This page failed</h1>
        <p className="note note-error" role="alert">
          {this.state.error.message}
        </p>
        <p>
          <button type="button" className="btn" onClick={() => window.location.reload()}>
            Reload
          </button>{" "}
          <Link to="/">Back to the review queues</Link>
        </p>
      </section>
    );
  }
}

function UserMenu() {
  const { user, setUser, signOut } = useSession();
  const [saving, setSaving] = useState(false);
  const toggleBlur = async () => {
    setSaving(true);
    const blurMedia = !user.preferences.blurMedia;
    try {
      await api("/session/preferences", { method: "PATCH", body: { blurMedia } });
      setUser({ ...user, preferences: { ...user.preferences, blurMedia } });
    } catch {
      // Keep the old preference; the switch shows it.
    } finally {
      setSaving(false);
    }
  };
  return (
    <div className="user-menu">
      <span className="user-name" title={user.email}>
        {user.name}
      </span>
      <span className="badge tone-info" data-testid="role">
        {ROLE_LABELS[user.role]}
      </span>
      <label className="switch" title="Blur and grey out media until you reveal it (your default)">
        <input type="checkbox" checked={user.preferences.blurMedia} disabled={saving} onChange={() => void toggleBlur()} />
        <span>Blur media</span>
      </label>
      <button type="button" className="btn btn-small btn-quiet" onClick={() => void signOut()}>
        Sign out
      </button>
    </div>
  );
}

/** Sections only admins see in the navigation (reviewers must not learn how they are measured). */
const ADMIN_ONLY = new Set(["qa", "transparency", "child-safety", "storage", "rules"]);

function Shell() {
  const location = useLocation();
  const isAdmin = roleCan(useSession().user.role, "admin");
  const route = resolve(location.pathname);
  const Page = route?.page;
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/" className="brand" aria-label="Safest Tools, review queues">
          <svg aria-hidden="true" viewBox="0 0 16 16" width="18" height="18">
            <path d="M8 1l6 2.5v4c0 3.6-2.6 6.4-6 7.5-3.4-1.1-6-3.9-6-7.5v-4z" fill="currentColor" />
          </svg>
          <span>Safest Tools</span>
        </Link>
        <nav aria-label="Console">
          <ul>
            {NAV.filter(([, , section]) => isAdmin || !ADMIN_ONLY.has(section)).map(([to, label, section]) => (
              <li key={to}>
                <Link to={to} aria-current={route?.section === section ? "page" : undefined}>
                  {label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <UserMenu />
      </header>
      <main id="main" tabIndex={-1}>
        <PageBoundary key={location.pathname}>
          <Suspense fallback={<Loading />}>
            {/* An admin's first page carries the first-run checklist until it is done (its own chunk). */}
            {isAdmin && location.pathname === "/" ? (
              <Suspense fallback={null}>
                <OnboardingPanel />
              </Suspense>
            ) : null}
            {Page && route ? <Page params={route.params} /> : <NotFound />}
          </Suspense>
        </PageBoundary>
      </main>
    </>
  );
}

function SignIn({ expired }: { expired: boolean }) {
  return (
    <main id="main" className="signin">
      <h1>Safest Tools console</h1>
      {expired ? (
        <p className="note note-warn" role="alert">
          Your session ended. Sign in again to continue.
        </p>
      ) : null}
      <p>
        Sign in with the link that <code>npm start</code> prints (it opens <code>/console/signin?token=…</code>), or through your organisation's Cloudflare Access.
      </p>
      <p>Each sign-in link works once. An admin can invite you under Settings → Users.</p>
    </main>
  );
}

/** Cloudflare Access: this email is a console user of several installations; each link signs in to one. */
function ChooseInstallation({ installations }: { installations: Array<{ id: string; name: string }> }) {
  return (
    <main id="main" className="signin">
      <h1>Safest Tools console</h1>
      <p>Your email is a console user in several installations. Choose the one to open:</p>
      <ul className="plain-list" data-testid="installation-choice">
        {installations.map((installation) => (
          <li key={installation.id}>
            <a href={`/?installation=${encodeURIComponent(installation.id)}`}>{installation.name}</a> <span className="muted small">{installation.id}</span>
          </li>
        ))}
      </ul>
    </main>
  );
}

function App() {
  const [state, setState] = useState<{ status: "loading" } | { status: "signed-out"; expired: boolean } | { status: "error"; error: unknown } | { status: "ready"; user: ConsoleUser }>({ status: "loading" });
  const load = useCallback(() => {
    api<Session>("/session", { quiet401: true }).then(
      (session) => {
        setCsrfToken(session.csrfToken);
        setState({ status: "ready", user: session.user });
      },
      (error: unknown) => setState(error instanceof ApiError && error.status === 401 ? { status: "signed-out", expired: false } : { status: "error", error }),
    );
  }, []);
  useEffect(() => {
    load();
    return onUnauthenticated(() => setState({ status: "signed-out", expired: true }));
  }, [load]);
  if (state.status === "loading")
    return (
      <main id="main">
        <Loading label="Opening the console…" />
      </main>
    );
  if (state.status === "signed-out") return <SignIn expired={state.expired} />;
  if (state.status === "error" && state.error instanceof ApiError && state.error.code === "auth.installation_choice_required") {
    const details = state.error.details as { installations?: Array<{ id: string; name: string }> } | undefined;
    return <ChooseInstallation installations={details?.installations ?? []} />;
  }
  if (state.status === "error")
    return (
      <main id="main">
        <h1>Safest Tools console</h1>
        <ErrorNote error={state.error} retry={load} />
      </main>
    );
  const value = {
    user: state.user,
    setUser: (user: ConsoleUser) => setState({ status: "ready", user }),
    signOut: async () => {
      try {
        await api("/session/logout", { method: "POST", body: {} });
      } finally {
        setCsrfToken("");
        setState({ status: "signed-out", expired: false });
      }
    },
  };
  return (
    <SessionContext.Provider value={value}>
      <RouterProvider>
        <ToastProvider>
          <Shell />
        </ToastProvider>
      </RouterProvider>
    </SessionContext.Provider>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
