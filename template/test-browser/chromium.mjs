// Finds a Chromium or Chrome for the console's browser tests (playwright-core drives it; it never
// downloads a browser). Looked for in this order:
//   1. CHROME_PATH (or CHROMIUM_PATH), when set: that file, or an error naming it;
//   2. Playwright's own browser cache (PLAYWRIGHT_BROWSERS_PATH, else ~/.cache/ms-playwright on
//      Linux, ~/Library/Caches/ms-playwright on macOS, %LOCALAPPDATA%\ms-playwright on Windows),
//      as `npx playwright install chromium` leaves it;
//   3. where Debian, Ubuntu (apt, snap) and Google's packages put it;
//   4. the macOS app bundles in /Applications and ~/Applications;
//   5. Windows' Program Files.
//
//   node test-browser/chromium.mjs --check   prints the browser found, or one line saying how to
//                                            get one, and exits 1 (npm test runs it first)
import { existsSync, readdirSync } from "node:fs";
import { homedir, platform } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const HOW_TO_GET_ONE =
  "No Chromium or Chrome found for the browser tests: install one (Debian/Ubuntu: `sudo apt-get install chromium`; macOS: Google Chrome or `brew install --cask chromium`; anywhere: `npx playwright install chromium`) or set CHROME_PATH to its executable.";

function playwrightCacheDirs() {
  if (process.env.PLAYWRIGHT_BROWSERS_PATH && process.env.PLAYWRIGHT_BROWSERS_PATH !== "0") return [process.env.PLAYWRIGHT_BROWSERS_PATH];
  const home = homedir();
  if (platform() === "darwin") return [path.join(home, "Library", "Caches", "ms-playwright")];
  if (platform() === "win32") return [path.join(process.env.LOCALAPPDATA ?? path.join(home, "AppData", "Local"), "ms-playwright")];
  return [path.join(process.env.XDG_CACHE_HOME ?? path.join(home, ".cache"), "ms-playwright")];
}

/** The executables inside one of Playwright's browser folders (chromium-1234, chromium_headless_shell-1234). */
function playwrightExecutables(folder) {
  return [
    path.join(folder, "chrome-linux64", "chrome"),
    path.join(folder, "chrome-linux", "chrome"),
    path.join(folder, "chrome-linux", "headless_shell"),
    path.join(folder, "chrome-headless-shell-linux64", "chrome-headless-shell"),
    path.join(folder, "chrome-mac", "Chromium.app", "Contents", "MacOS", "Chromium"),
    path.join(folder, "chrome-mac-arm64", "Google Chrome for Testing.app", "Contents", "MacOS", "Google Chrome for Testing"),
    path.join(folder, "chrome-mac-x64", "Google Chrome for Testing.app", "Contents", "MacOS", "Google Chrome for Testing"),
    path.join(folder, "chrome-win", "chrome.exe"),
    path.join(folder, "chrome-win64", "chrome.exe"),
  ];
}

/** Every place looked at, in order (exported for the error message and for tests of this module). */
export function chromiumCandidates() {
  const candidates = [];
  for (const cache of playwrightCacheDirs()) {
    let entries = [];
    try {
      entries = readdirSync(cache);
    } catch {
      continue;
    }
    // Full Chromium before the headless shell; the newest revision first.
    const browsers = entries.filter((name) => /^chromium(_headless_shell)?-\d+$/u.test(name)).sort((a, b) => Number(a.includes("headless")) - Number(b.includes("headless")) || Number(b.split("-").pop()) - Number(a.split("-").pop()));
    for (const name of browsers) candidates.push(...playwrightExecutables(path.join(cache, name)));
  }
  candidates.push("/usr/bin/chromium", "/usr/bin/chromium-browser", "/snap/bin/chromium", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable", "/opt/google/chrome/chrome");
  for (const apps of ["/Applications", path.join(homedir(), "Applications")]) {
    candidates.push(path.join(apps, "Google Chrome.app", "Contents", "MacOS", "Google Chrome"), path.join(apps, "Chromium.app", "Contents", "MacOS", "Chromium"));
  }
  for (const base of [process.env.PROGRAMFILES, process.env["PROGRAMFILES(X86)"], process.env.LOCALAPPDATA].filter(Boolean)) {
    candidates.push(path.join(base, "Google", "Chrome", "Application", "chrome.exe"), path.join(base, "Chromium", "Application", "chrome.exe"));
  }
  return candidates;
}

/** The browser's executable; throws one line saying how to get one when there is none. */
export function findChromium() {
  const configured = process.env.CHROME_PATH || process.env.CHROMIUM_PATH;
  if (configured) {
    if (existsSync(configured)) return configured;
    throw new Error(`CHROME_PATH is ${configured}, which does not exist. ${HOW_TO_GET_ONE}`);
  }
  const found = chromiumCandidates().find((candidate) => existsSync(candidate));
  if (!found) throw new Error(HOW_TO_GET_ONE);
  return found;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url) && process.argv.includes("--check")) {
  try {
    console.log(`browser tests: ${findChromium()}`);
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
}
