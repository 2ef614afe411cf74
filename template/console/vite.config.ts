// The console: a React single-page app built into ../console-dist, which the Worker serves as
// static assets next to the API (wrangler.jsonc "assets"). The review routes stay in the entry
// chunk; the workflow editor and run inspector (React Flow) load on demand.
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";

const root = fileURLToPath(new URL(".", import.meta.url));
const outDir = fileURLToPath(new URL("../console-dist", import.meta.url));

/**
 * The output folder is never emptied: `wrangler dev` watches it, and a moment with no index.html
 * leaves it serving no console. New files are written first, then the previous build's removed.
 */
function pruneStaleAssets(): Plugin {
  return {
    name: "safest-prune-stale-assets",
    apply: "build",
    writeBundle(_options, bundle) {
      const assets = path.join(outDir, "assets");
      let files: string[] = [];
      try {
        files = readdirSync(assets);
      } catch {
        return;
      }
      for (const file of files) if (!(`assets/${file}` in bundle)) rmSync(path.join(assets, file), { force: true });
    },
  };
}

export default defineConfig({
  root,
  base: "/",
  publicDir: false,
  plugins: [pruneStaleAssets()],
  // JSX with React's automatic runtime, through Vite's own transformer (no plugin needed).
  oxc: { jsx: { runtime: "automatic", importSource: "react" } },
  build: {
    outDir,
    emptyOutDir: false,
    target: "es2022",
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 600,
    rolldownOptions: {
      // React Flow starts with "use client" (a server-components hint); nothing to preserve here.
      onwarn(warning, warn) {
        if (warning.code !== "MODULE_LEVEL_DIRECTIVE") warn(warning);
      },
      output: {
        // React in its own long-lived chunk: cached across console releases.
        codeSplitting: { groups: [{ name: "react", test: /node_modules[\\/](react|react-dom|scheduler)[\\/]/u }] },
      },
    },
  },
  server: {
    // `npx vite --config console/vite.config.ts` during development: the API from `npm start`.
    proxy: { "/api": process.env.SAFEST_API ?? "http://127.0.0.1:8787", "/console": process.env.SAFEST_API ?? "http://127.0.0.1:8787" },
  },
});
