// Bindings that exist only in tests.
declare namespace Cloudflare {
  interface Env {
    TEST_MIGRATIONS: import("cloudflare:test").D1Migration[];
  }
}
declare namespace Cloudflare {
  interface Env {
    RECEIVER: Fetcher;
  }
}
declare namespace Cloudflare {
  interface Env {
    ACCESS_PEER: Fetcher;
    ACCESS_TEAM_DOMAIN: string;
    ACCESS_AUD: string;
  }
}
declare namespace Cloudflare {
  interface Env {
    TDB_PEER: Fetcher;
  }
}
declare namespace Cloudflare {
  interface Env {
    /** PDQ's reference images and expected.json, served from the shared folder (404 at / when absent). */
    PDQ_VECTORS: Fetcher;
  }
}
declare namespace Cloudflare {
  interface Env {
    /** The hash exchange peers' test controls (test/peers/threatexchange.ts, ncmec-hashes.ts, stopncii.ts). */
    THREATEXCHANGE_PEER: Fetcher;
    NCMEC_PEER: Fetcher;
    STOPNCII_PEER: Fetcher;
    /** NCMEC's CyberTipline Reporting API peer (test/peers/cybertipline.ts), for its test controls. */
    CYBERTIPLINE_PEER: Fetcher;
  }
}
