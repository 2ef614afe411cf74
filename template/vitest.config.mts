// Tests run inside workerd (real D1, R2, Queues, Workflows, Worker Loader) through
// vitest-pool-workers. Peers run as separate Workers: the webhook receiver gets every fetch() the
// platform makes (outboundService, routed by host through the "internet" peer) and verifies
// signatures with the standardwebhooks library; a model server speaks the OpenAI chat API; a fake
// Workers AI binding answers env.AI.run over RPC; a Mastodon server (host mastodon.test) speaks its
// admin webhooks and admin API; three hash exchanges (threatexchange.test, ncmec.test,
// stopncii.test) speak ThreatExchange's threat_updates, NCMEC's hash sharing XML and StopNCII's
// FetchHashes, with test controls to add, update, delete and fail; NCMEC's CyberTipline Reporting
// API (host cybertipline.test, and the media it is sent from, media.test) validates reports by the
// schema's rules.
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { build } from "esbuild";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL(".", import.meta.url));
/**
 * Test files whose assertions hold over the whole database (a sweep's totals over every
 * installation, "nothing readable at rest" in any table); they run with storage of their own.
 */
const FRESH_FILES = ["test/audit-anchor.test.ts", "test/case-archive.test.ts", "test/backtest-chunks.test.ts", "test/cases.test.ts", "test/content.test.ts", "test/cybertipline.test.ts", "test/erasure-shredding.test.ts", "test/metrics.test.ts", "test/preservation.test.ts", "test/retention.test.ts", "test/sweeps.test.ts"];

/**
 * PDQ's public reference images and expected hashes live outside the repository (shared/pdq_vectors
 * beside the checkout; PDQ_VECTORS_DIR overrides): the tests fetch them through the PDQ_VECTORS
 * binding, a function run here in Node, and skip (saying so) where the folder is absent.
 */
const PDQ_VECTORS_DIR = process.env.PDQ_VECTORS_DIR ?? `${root}../../shared/pdq_vectors/`;
async function pdqVectors(request: Request): Promise<Response> {
  const name = decodeURIComponent(new URL(request.url).pathname.slice(1));
  if (!existsSync(PDQ_VECTORS_DIR)) return new Response("absent", { status: 404 });
  if (name === "") return new Response("present");
  if (name.includes("..") || !/^[A-Za-z0-9._/-]+$/u.test(name)) return new Response("bad name", { status: 400 });
  try {
    return new Response(await readFile(`${PDQ_VECTORS_DIR}${name}`));
  } catch {
    return new Response("not found", { status: 404 });
  }
}

/**
 * Squoosh's Emscripten glue (@jsquash/jpeg, @jsquash/webp) assigns `import.meta.url` when it is undefined; Vite's
 * transform turns `import.meta.url` into a literal, so that assignment no longer parses. workerd
 * always defines it, so the guard is dropped here (wrangler's esbuild bundle keeps it unchanged).
 */
const emscriptenImportMeta = {
  name: "emscripten-import-meta",
  enforce: "pre" as const,
  transform(code: string, id: string) {
    return id.includes("/@jsquash/") ? code.replace('if(import.meta.url===undefined){import.meta.url="https://localhost"}', "") : undefined;
  },
};

async function bundle(entry: string): Promise<string> {
  const result = await build({ entryPoints: [`${root}${entry}`], bundle: true, write: false, format: "esm", platform: "neutral", target: "es2022", mainFields: ["module", "main"], external: ["cloudflare:*"], logLevel: "error" });
  return result.outputFiles[0]!.text;
}

export default defineConfig(async () => {
  const migrations = await readD1Migrations(`${root}migrations`);
  const [receiver, model, internet, componentApi, access, workersAi, transparencyDb, mastodon, threatExchange, ncmecHashes, stopNcii, cybertipline] = await Promise.all(
    ["webhook-receiver", "model-server", "internet", "component-api", "access", "workers-ai", "transparency-db", "mastodon", "threatexchange", "ncmec-hashes", "stopncii", "cybertipline"].map((name) => bundle(`test/peers/${name}.ts`)),
  );
  const peer = (name: string, script: string, extra: Record<string, unknown> = {}) => ({ name, modules: true, script, compatibilityDate: "2026-04-01", ...extra });
  return {
    plugins: [
      emscriptenImportMeta,
      cloudflareTest({
        wrangler: { configPath: "./wrangler.jsonc" },
        miniflare: {
          // Production allows 6,000 reports a minute per key; the tests flood a smaller limit.
          ratelimits: { INTAKE_RATE_LIMIT: { namespace_id: "1001", simple: { limit: 300, period: 60 } } },
          bindings: { TEST_MIGRATIONS: migrations, ADMIN_TOKEN: "test-admin-token", REPORT_MASTER_KEY: "test-master-key-0123456789abcdef0123456789abcdef",
            AUDIT_CHECKPOINT_KEY: "test-audit-key-0123456789abcdef0123456789abcdef", WEBHOOK_TIMEOUT_SECONDS: "2", REQUEST_LOG: "off",
            ACCESS_TEAM_DOMAIN: "safest-test.cloudflareaccess.com", ACCESS_AUD: "test-access-aud" },
          // AI: a fake Workers AI binding (an RPC entrypoint with run(model, input)); none is declared in
          // wrangler.jsonc, since the real one needs an account and the network.
          serviceBindings: { RECEIVER: "receiver", ACCESS_PEER: "access", TDB_PEER: "transparency-db", MASTODON_PEER: "mastodon", THREATEXCHANGE_PEER: "threatexchange", NCMEC_PEER: "ncmec-hashes", STOPNCII_PEER: "stopncii", CYBERTIPLINE_PEER: "cybertipline", AI: { name: "workers-ai", entrypoint: "FakeAi" }, PDQ_VECTORS: pdqVectors },
          outboundService: "internet",
          workers: [
            peer("internet", internet!, { serviceBindings: { MODEL: "model", RECEIVER: "receiver", COMPONENT_API: "component-api", ACCESS: "access", TRANSPARENCY_DB: "transparency-db", MASTODON: "mastodon", THREATEXCHANGE: "threatexchange", NCMEC_HASHES: "ncmec-hashes", STOPNCII: "stopncii", CYBERTIPLINE: "cybertipline" } }),
            peer("access", access!),
            peer("receiver", receiver!),
            peer("model", model!),
            peer("component-api", componentApi!),
            peer("workers-ai", workersAi!),
            peer("transparency-db", transparencyDb!),
            peer("mastodon", mastodon!),
            peer("threatexchange", threatExchange!),
            peer("ncmec-hashes", ncmecHashes!),
            peer("stopncii", stopNcii!),
            peer("cybertipline", cybertipline!),
          ],
        },
      }),
    ],
    test: {
      setupFiles: ["./test/setup.ts"],
      // Transformed by Vite (and so by emscriptenImportMeta above) rather than loaded as they are.
      server: { deps: { inline: [/@jsquash\//u] } },
      // Two projects. "shared": one runtime per vitest worker, reused across its test files, so the
      // D1 migrations are applied once per worker (test/setup.ts skips those already applied) and
      // no file pays for a fresh runtime; those files share the worker's D1, R2 and queues, and a
      // test there works in installations of its own and never counts rows it did not create.
      // "fresh": files whose assertions hold over the whole database (one sweep over every
      // installation, no plaintext in any table) get a runtime and storage of their own, as before.
      projects: [
        { extends: true, test: { name: "shared", isolate: false, include: ["test/**/*.test.ts", "src/**/*.test.ts"], exclude: FRESH_FILES } },
        { extends: true, test: { name: "fresh", isolate: true, include: FRESH_FILES } },
      ],
      // maxWorkers stays vitest's default (one less than the cores: one worker on CI's two): `npm
      // test` runs the scaffolder's tests beside vitest (scripts/run-blocks.mjs), which take the
      // other core, and with a second worker on a loaded machine the heaviest test (re-applying
      // 1,200 erasures) ran past its 30 s bound.
      testTimeout: 30_000,
      hookTimeout: 30_000,
      // Logs go straight to workerd's output instead of through Vitest's console RPC: a line logged
      // by a Workflow step or a waitUntil task after its file finished left that RPC pending, and
      // Vitest failed the whole run at teardown ("Closing rpc while onUserConsoleLog was pending",
      // vitest-dev/vitest#11153). The per-request line is off (REQUEST_LOG above).
      disableConsoleIntercept: true,
    },
  };
});
