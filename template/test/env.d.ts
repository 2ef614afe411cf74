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
