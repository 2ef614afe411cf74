// A plain HTTP API that components may call in tests; it says which host it was reached as.
// GET /redirect?to=<url> answers 302 to that URL (a declared host bouncing a component elsewhere).
export default {
  fetch(request: Request): Response {
    const url = new URL(request.url);
    const to = url.pathname === "/redirect" ? url.searchParams.get("to") : null;
    if (to) return new Response(null, { status: 302, headers: { location: to } });
    return Response.json({ reachedAs: url.hostname, ok: true });
  },
};
