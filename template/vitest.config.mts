// Tests run inside workerd (real D1, R2, Queues, Workflows, Worker Loader) through
// vitest-pool-workers. Peers run as separate Workers: the webhook receiver gets every fetch() the
// platform makes (outboundService) and verifies signatures with the standardwebhooks library.
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL(".", import.meta.url));

async function bundle(entry: string): Promise<string> {
  const result = await build({ entryPoints: [`${root}${entry}`], bundle: true, write: false, format: "esm", platform: "neutral", target: "es2022", mainFields: ["module", "main"], logLevel: "error" });
  return result.outputFiles[0]!.text;
}

export default defineConfig(async () => {
  const migrations = await readD1Migrations(`${root}migrations`);
  const receiver = await bundle("test/peers/webhook-receiver.ts");
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.jsonc" },
        miniflare: {
          bindings: { TEST_MIGRATIONS: migrations, ADMIN_TOKEN: "test-admin-token", REPORT_MASTER_KEY: "test-master-key-0123456789abcdef0123456789abcdef" },
          serviceBindings: { RECEIVER: "receiver" },
          outboundService: "receiver",
          workers: [{ name: "receiver", modules: true, script: receiver, compatibilityDate: "2026-04-01" }],
        },
      }),
    ],
    test: {
      include: ["test/**/*.test.ts", "src/**/*.test.ts"],
      setupFiles: ["./test/setup.ts"],
      testTimeout: 30_000,
      hookTimeout: 30_000,
    },
  };
});
