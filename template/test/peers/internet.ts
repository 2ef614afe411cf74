// The test "internet": every fetch() the platform makes arrives here (outboundService) and goes to
// the peer Worker serving that host — the model endpoint, the Transparency Database, the hash
// exchanges (ThreatExchange, NCMEC hash sharing, StopNCII), NCMEC's CyberTipline (and the media it
// is sent) or the webhook receiver.
interface Peers {
  MODEL: Fetcher;
  RECEIVER: Fetcher;
  COMPONENT_API: Fetcher;
  ACCESS: Fetcher;
  TRANSPARENCY_DB: Fetcher;
  MASTODON: Fetcher;
  THREATEXCHANGE: Fetcher;
  NCMEC_HASHES: Fetcher;
  STOPNCII: Fetcher;
  CYBERTIPLINE: Fetcher;
}

export default {
  fetch(request: Request, env: Peers): Promise<Response> {
    const host = new URL(request.url).hostname;
    if (host === "model.test") return env.MODEL.fetch(request);
    if (host === "allowed.test" || host === "forbidden.test" || host === "flaky.test") return env.COMPONENT_API.fetch(request);
    if (host.endsWith(".cloudflareaccess.com")) return env.ACCESS.fetch(request);
    if (host === "tdb.test") return env.TRANSPARENCY_DB.fetch(request);
    if (host === "mastodon.test") return env.MASTODON.fetch(request);
    if (host === "threatexchange.test") return env.THREATEXCHANGE.fetch(request);
    if (host === "ncmec.test") return env.NCMEC_HASHES.fetch(request);
    if (host === "stopncii.test") return env.STOPNCII.fetch(request);
    if (host === "cybertipline.test" || host === "media.test") return env.CYBERTIPLINE.fetch(request);
    return env.RECEIVER.fetch(request);
  },
};
