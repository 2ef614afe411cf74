// A plain HTTP API that components may call in tests; it says which host it was reached as.
// GET /redirect?to=<url> answers 302 to that URL (a declared host bouncing a component elsewhere).
// GET /flaky/<id>?failures=N answers 503 to the first N requests of each path (a provider that is
// down, then fixed).
const seen = new Map<string, number>();

export default {
  fetch(request: Request): Response {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/flaky/")) {
      const count = (seen.get(url.pathname) ?? 0) + 1;
      seen.set(url.pathname, count);
      if (count <= Number(url.searchParams.get("failures") ?? 1)) return Response.json({ ok: false, count }, { status: 503 });
      return Response.json({ ok: true, count });
    }
    const to = url.pathname === "/redirect" ? url.searchParams.get("to") : null;
    if (to) return new Response(null, { status: 302, headers: { location: to } });
    return Response.json({ reachedAs: url.hostname, ok: true });
  },
};
