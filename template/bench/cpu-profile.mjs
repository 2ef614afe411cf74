// A CPU profile of the platform Worker while a bench section runs: attaches to the devtools
// inspector of the `wrangler dev` the bench started (found by its HTTP port, which the bench logs as
// "starting wrangler dev … on 127.0.0.1:<port>"), samples for a while (the Chrome DevTools Protocol's
// Profiler.start/stop), writes the .cpuprofile (open it in Chrome DevTools) with the bundled
// worker.js beside it (the profile's line numbers are that file's), and prints the functions with
// the most samples, self and inclusive.
//
//   node bench/cpu-profile.mjs --http-port 42981 [--seconds 15] [--out /tmp/intake.cpuprofile] [--interval-us 500]
//
// The profile is of the Worker's isolate only: the SQLite work of D1 and the R2 and rate-limit
// services run outside it. Samples are wall-clock: on a busy machine, time the thread waited for a
// core lands on whatever was running, so read shares, not milliseconds.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";

const args = new Map();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i].replace(/^--/u, ""), process.argv[i + 1]);
const httpPort = args.get("http-port");
if (!httpPort) throw new Error("usage: node bench/cpu-profile.mjs --http-port <the dev server's port> [--seconds 15] [--out file] [--interval-us 500]");
const seconds = Number(args.get("seconds") ?? 15);
const out = args.get("out") ?? `/tmp/worker-${Date.now()}.cpuprofile`;
const intervalUs = Number(args.get("interval-us") ?? 500);

/** The inspector port of the wrangler dev serving `httpPort` (its command line holds both). */
function inspectorPort() {
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/u.test(name))) {
    let argv;
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const port = argv.indexOf("--port");
    const inspector = argv.indexOf("--inspector-port");
    if (argv.includes("dev") && port >= 0 && argv[port + 1] === String(httpPort) && inspector >= 0) return argv[inspector + 1];
  }
  throw new Error(`no wrangler dev with --port ${httpPort} and an --inspector-port`);
}

const port = inspectorPort();
const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
if (targets.length === 0) throw new Error("the inspector lists no Worker");
// The inspector proxy refuses a WebSocket without an Origin it allows.
const socket = new WebSocket(targets[0].webSocketDebuggerUrl, { headers: { origin: "http://localhost" } });
const pending = new Map();
let lastId = 0;
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  if (message.id !== undefined && pending.has(message.id)) {
    pending.get(message.id)(message);
    pending.delete(message.id);
  }
};
await new Promise((resolve, reject) => {
  socket.onopen = resolve;
  socket.onerror = () => reject(new Error("the inspector refused the connection"));
});
const send = (method, params = {}) =>
  new Promise((resolve) => {
    const id = ++lastId;
    pending.set(id, resolve);
    socket.send(JSON.stringify({ id, method, params }));
  });

await send("Profiler.enable");
await send("Profiler.setSamplingInterval", { interval: intervalUs });
await send("Profiler.start");
await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
const { result } = await send("Profiler.stop");
const profile = result.profile;
writeFileSync(out, JSON.stringify(profile));
await send("Debugger.enable");
const scriptId = profile.nodes.find((node) => node.callFrame.url.endsWith("worker.js"))?.callFrame.scriptId;
if (scriptId) {
  const source = await send("Debugger.getScriptSource", { scriptId });
  if (source.result?.scriptSource) writeFileSync(`${out}.worker.js`, source.result.scriptSource);
}
socket.close();

// Self and inclusive samples by function (name, file, line).
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
const counts = new Map();
for (const sample of profile.samples) counts.set(sample, (counts.get(sample) ?? 0) + 1);
const name = (node) => `${node.callFrame.functionName || "(anonymous)"} ${node.callFrame.url.split("/").pop()}:${node.callFrame.lineNumber + 1}`;
const self = new Map();
const inclusive = new Map();
for (const [id, count] of counts) {
  self.set(name(byId.get(id)), (self.get(name(byId.get(id))) ?? 0) + count);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const key = name(byId.get(at));
    if (!seen.has(key)) inclusive.set(key, (inclusive.get(key) ?? 0) + count);
    seen.add(key);
  }
}
const total = profile.samples.length;
const top = (map, n) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([key, count]) => `${((100 * count) / total).toFixed(1).padStart(5)} %  ${key}`)
    .join("\n");
console.log(`${total} samples over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s → ${out}\n\nself:\n${top(self, 30)}\n\ninclusive:\n${top(inclusive, 40)}`);
