// Headless Debian Chromium for the browser benchmarks (bench/browser-bench.mjs,
// bench/browser-scaling.mjs): the static server of this folder, a fresh
// profile, the flags this machine needs, and a watchdog; close() undoes all.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from './server.mjs';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

/** Resolves with {server, context, userDataDir, close()}; exits the process with code 2
 * (and a message) when playwright-core or chromium is missing. `modelsDir`: the
 * folder served under /bench/cache/ (default bench/cache); `args`: more Chromium flags. */
export async function launchBench(root, { name = 'browser bench', watchdogMinutes = 30, modelsDir, args = [] } = {}) {
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch {
    console.error('playwright-core is not installed: run sh tools/setup-browser.sh (or npm run bench:browser)');
    process.exit(2);
  }
  if (!fs.existsSync(CHROMIUM)) { console.error(`${CHROMIUM} not found: run sh tools/setup-browser.sh`); process.exit(2); }
  const server = await startServer(root, modelsDir ? { modelsDir } : {});
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-bench-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', ...args],
  });
  const watchdog = setTimeout(() => { console.error(`${name}: watchdog (${watchdogMinutes} min) fired`); process.exit(3); }, watchdogMinutes * 60 * 1000);
  watchdog.unref();
  return {
    server, context, userDataDir,
    async close() {
      clearTimeout(watchdog);
      await context.close().catch(() => {});
      await server.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
