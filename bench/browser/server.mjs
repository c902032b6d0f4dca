// Static server for the browser bench: serves on 127.0.0.1, with COOP/COEP
// (so the page is crossOriginIsolated and both engines can use
// SharedArrayBuffer threads), correct MIME types, HEAD and byte ranges, only
// what the bench page loads: its own page, wasmlm (web/, wasm/, the model
// registry), wllama's ESM build, and the *.gguf files of bench/cache/ (the
// models it benches). Everything else in the repository (.git, package
// files, sources) is a 404. Request handling: web/demo/static.mjs.
import path from 'node:path';
import { ISOLATION, startStatic, allowedFile, modelFile } from '../../web/demo/static.mjs';

/** The URL paths the bench page fetches (prefixes end in '/'). */
export const BENCH_PATHS = [
  '/bench/browser/index.html', '/bench/browser/page.js',
  '/web/', '/wasm/', '/models/registry.json', '/models/registry.js',
  '/node_modules/@wllama/wllama/esm/',
];
const MODELS_URL = '/bench/cache/';

/**
 * Starts the server for `root`; resolves with {url, port, close()}.
 * `allow`: the URL paths served from `root` (BENCH_PATHS; ['/'] serves the
 * whole folder, for a build output); `modelsDir`: served under /bench/cache/.
 */
export function startServer(root, { port = 0, log = null, allow = BENCH_PATHS, modelsDir = path.join(root, 'bench', 'cache') } = {}) {
  root = path.resolve(root);
  const models = path.resolve(modelsDir);
  const route = (rel) => {
    if (rel.startsWith(MODELS_URL)) return modelFile(models, rel.slice(MODELS_URL.length));
    return allowedFile(root, allow, rel.endsWith('/') ? rel + 'index.html' : rel);
  };
  return startStatic({ port, host: '127.0.0.1', headers: { ...ISOLATION, 'Cache-Control': 'no-store' }, route, log });
}
