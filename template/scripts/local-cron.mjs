// The local schedule driver: Miniflare fires no Cron Triggers ("Miniflare does not currently
// trigger scheduled Workers automatically"), so under `wrangler dev` (npm start, the smoke harness)
// and the bench's dev server this calls the Worker's `scheduled` handler the way Cloudflare would:
// once a minute, at the start of each minute, with the cron of wrangler.jsonc.
//
// How it reaches the handler (checked with wrangler 4.86): the URL wrangler advertises,
// GET /cdn-cgi/handler/scheduled?cron=…, works for a Worker without static assets, but with
// `assets` (ours: the console) it answers 500 "exception" without ever calling the handler — the
// assets proxy's forwarding of the event fails. So the dev server runs with `--test-scheduled`
// (`wrangler dev --test-scheduled`), which adds wrangler's own middleware answering
// GET /__scheduled?cron=… inside the Worker ("Ran scheduled event", or 500 if the handler threw),
// and wrangler.jsonc lets /__scheduled reach the Worker before the assets (`run_worker_first`; on
// Cloudflare, without the middleware, that path is an ordinary 404 of the API). The driver uses
// /__scheduled and falls back to /cdn-cgi/handler/scheduled when the server lacks the middleware.
// One run at a time: a tick while the previous run is still going is skipped, as a slow cron run
// would be.
//
//   const cron = startLocalCron({ baseUrl, log });   // every minute until cron.stop()
//   await cron.tick();                               // one run now (tests, the bench)
//   await triggerScheduled(baseUrl);                 // the same, without a driver

export const CRON = "* * * * *";
const MINUTE_MS = 60_000;

/** One scheduled run now. Resolves to { ok, status, outcome, ms, via }; never throws on HTTP errors. */
export async function triggerScheduled(baseUrl, { cron = CRON, scheduledTime = Date.now(), timeoutMs = 5 * MINUTE_MS } = {}) {
  const started = Date.now();
  const query = `cron=${encodeURIComponent(cron)}&time=${scheduledTime}`;
  const call = async (path) => {
    const response = await fetch(`${baseUrl}${path}?${query}`, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, text: (await response.text()).trim() };
  };
  try {
    const middleware = await call("/__scheduled");
    if (middleware.text === "Ran scheduled event" || middleware.status >= 500) {
      return { ok: middleware.status === 200, status: middleware.status, outcome: middleware.status === 200 ? "ok" : "exception", ms: Date.now() - started, via: "/__scheduled" };
    }
    const handler = await call("/cdn-cgi/handler/scheduled");
    return { ok: handler.status === 200 && handler.text === "ok", status: handler.status, outcome: handler.text.slice(0, 40), ms: Date.now() - started, via: "/cdn-cgi/handler/scheduled" };
  } catch (error) {
    return { ok: false, status: null, outcome: error instanceof Error ? error.name : "error", ms: Date.now() - started, via: null };
  }
}

/**
 * Calls the scheduled handler at the start of every minute until stop(). `log(message)` gets one
 * line per failed run (and, with `verbose`, per run). The timer does not keep the process alive.
 */
export function startLocalCron({ baseUrl, cron = CRON, log = () => {}, verbose = false, intervalMs = MINUTE_MS } = {}) {
  let timer = null;
  let running = null;
  let stopped = false;
  const tick = async (scheduledTime = Date.now()) => {
    if (running) return running; // one run at a time
    running = triggerScheduled(baseUrl, { cron, scheduledTime }).then((result) => {
      if (!result.ok) log(`scheduled run failed (${result.status ?? "no answer"} ${result.outcome}); see the server log for the sweep that failed`);
      else if (verbose) log(`scheduled run ok in ${result.ms} ms`);
      return result;
    });
    try {
      return await running;
    } finally {
      running = null;
    }
  };
  const schedule = () => {
    if (stopped) return;
    const now = Date.now();
    const next = intervalMs === MINUTE_MS ? Math.ceil((now + 1) / MINUTE_MS) * MINUTE_MS : now + intervalMs;
    timer = setTimeout(() => {
      void tick(next);
      schedule();
    }, next - now);
    timer.unref?.();
  };
  schedule();
  return {
    tick,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (running) await running.catch(() => {});
    },
  };
}
