// A plain HTTP API that components may call in tests; it says which host it was reached as.
export default {
  fetch(request: Request): Response {
    return Response.json({ reachedAs: new URL(request.url).hostname, ok: true });
  },
};
