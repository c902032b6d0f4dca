// wasmlm demo service worker: keeps the page, the JS package files and the
// wasm engines in Cache Storage so that, after one online visit, the demo
// loads and generates with no network. Strategy: network first (an edited
// file is seen at once while online), the cached copy when the network fails.
// Model files (.gguf) are not handled here: web/cache.js keeps them in their
// own cache (wasmlm-models-v1), managed from the page.
const CACHE = 'wasmlm-demo-v1';
const PRECACHE = [
  '/web/demo/', '/web/demo/index.html', '/web/demo/demo.js', '/web/demo/demo.css', '/web/demo/tree-panel.js', '/web/demo/mentions-task.js',
  '/web/index.js', '/web/tree.js', '/web/adaptive.js', '/web/deliberate.js', '/web/worker/tree.js', '/web/cache.js', '/web/simd-probe.js', '/web/memory64.js', '/web/sha256.js', '/web/chat.js', '/web/scaling.js', '/web/abort.js',
  '/web/options.js', '/web/errors.js', '/web/net.js', '/web/env.js', '/web/protocol.js', '/web/hub.js', '/web/split.js',
  '/web/worker/worker.js', '/web/worker/thread-worker.js', '/web/worker/engine.js', '/web/worker/multi.js', '/web/worker/embed.js',
  '/web/worker/model-file.js', '/web/worker/template.js', '/web/worker/template-worker.js', '/web/worker/abi.js',
  '/web/worker/heap.js', '/web/worker/staging.js', '/web/worker/gguf.js', '/web/worker/text.js', '/web/worker/stream.js',
  '/web/worker/generation.js', '/web/worker/quantize.js',
  '/web/worker/grammar.js', '/web/grammar/json-schema.js', '/web/grammar/gbnf.js', '/web/grammar/regex.js',
  '/models/registry.js', '/models/registry.json', '/local-models/index.json',
  '/wasm/wasmlm.wasm', '/wasm/wasmlm-mt.wasm', '/wasm/wasmlm-relaxed.wasm', '/wasm/wasmlm-mt-relaxed.wasm',
  '/wasm/probe-relaxed.wasm',
  // the memory64 builds (models over 4 GiB) and their probe
  '/wasm/wasmlm64.wasm', '/wasm/wasmlm64-mt.wasm', '/wasm/wasmlm64-relaxed.wasm', '/wasm/wasmlm64-mt-relaxed.wasm',
  '/wasm/probe-memory64.wasm',
];

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    // one by one: a file this server does not have (an engine variant not
    // built) must not stop the others from being cached
    await Promise.all(PRECACHE.map(async (url) => {
      try {
        const res = await fetch(url, { cache: 'no-cache' });
        if (res.ok) await cache.put(url, res);
      } catch { /* offline during install: cached on first use instead */ }
    }));
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const k of await caches.keys()) if (k.startsWith('wasmlm-demo-') && k !== CACHE) await caches.delete(k);
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  if (/\.gguf$/i.test(url.pathname) || req.headers.has('range')) return;   // models: web/cache.js
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    const key = url.pathname === '/web/demo/index.html' ? '/web/demo/' : url.pathname;
    try {
      const res = await fetch(req);
      if (res.ok && res.status === 200) await cache.put(key, res.clone());
      return res;
    } catch (e) {
      const hit = await cache.match(key, { ignoreSearch: true });
      if (hit) return hit;
      throw e;
    }
  })());
});
