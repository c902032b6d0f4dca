// wasmlm model cache.
//
// Browsers: models fetched by URL (registry names and hub ids resolve to
// URLs) are kept in Cache Storage (cache name MODEL_CACHE), keyed by their
// absolute URL and the ETag they were served with.
// A fetch streams the body to the engine and, through a tee, into the cache
// at the same time; the entry is kept only when the load succeeded (the
// sha256 matched, when one is known) and dropped otherwise. The next load of
// the same URL reads the cached copy without touching the network, so a page
// whose own files are cached too (see web/demo/sw.js) works offline.
//
// Node: registry downloads are cached on disk by models/registry.js (the
// directory options.cacheDir, env WASMLM_CACHE, $XDG_CACHE_HOME/wasmlm or
// ~/.cache/wasmlm); listCachedModels / deleteCachedModel work on it there.

import { fetchChecked } from './net.js';
import { isNode, nodeImport } from './env.js';
import { WasmlmError } from './errors.js';

export const MODEL_CACHE = 'wasmlm-models-v1';


/** Whether the browser model cache can be used here (Cache Storage exists: secure contexts only). */
export function modelCacheAvailable() {
  return !isNode && typeof caches !== 'undefined' && typeof caches.open === 'function';
}

function absolute(url) {
  return new URL(String(url), globalThis.location?.href).href;
}

/** The request header (and Vary) that puts a response's ETag into its cache key. */
const ETAG_KEY = 'X-Wasmlm-Etag';
/** Most ms a cache hit waits for the HEAD request asking whether the file changed. */
const REVALIDATE_MS = 10000;

/** The cache key of `href` as served with `etag`: the URL, plus the ETag (a header the entry Varies on). */
function cacheKey(href, etag) {
  return etag ? new Request(href, { headers: { [ETAG_KEY]: etag } }) : new Request(href);
}

/** The ETag the server has now for `href` (a HEAD request), null when none; throws when it cannot be asked. */
async function currentEtag(href, signal, timeout, auth) {
  const { response, timer } = await fetchChecked(href, { signal, timeout: timeout ? Math.min(timeout, REVALIDATE_MS) : REVALIDATE_MS, method: 'HEAD', auth });
  timer.done();
  return response.headers.get('etag');
}

/**
 * Fetches a model URL through the cache. Returns {response, fromCache,
 * timer, commit(), discard()}: call commit() after a successful load (waits
 * until the copy is stored), discard() after a failed one (removes a partial
 * or bad copy). With cache === false, or where Cache Storage is missing, it
 * is a plain fetch and commit/discard do nothing. Only http(s) URLs are
 * cached. An entry is keyed by the URL and the ETag it was served with (a
 * request header the entry Varies on): a hit whose entry has an ETag first
 * asks the server (HEAD) for the current one, and a changed file is fetched
 * again (the older copies are dropped on commit); when the server cannot be
 * reached the cached copy is used. A network fetch fails with NETWORK
 * (web/net.js: connection, HTTP status, no response within `timeout` ms);
 * `timer` (null for a cache hit) is the stall timer for web/net.js readBody.
 * `auth` (given for hub ids: the hub's access token, web/hub.js hubAuth)
 * goes with the GET and HEAD requests to the hub's origin only (web/net.js);
 * the cache key stays the URL and the ETag. For a hub id, a HEAD the hub
 * refuses (HTTP 401 / 403) fails the load instead of using the cached copy.
 * With fill === false it only looks: a miss (or no cache) resolves null and
 * nothing is fetched (a caller that reads part of the file: loadTokenizer).
 * @param {string} url
 * @param {{signal?: AbortSignal, cache?: boolean, timeout?: number, fill?: boolean, auth?: {origin: string, token: string|null}}} [opts]
 */
export async function fetchModelCached(url, { signal, cache = true, timeout = 0, fill = true, auth } = {}) {
  const noop = async () => {};
  const href = absolute(url);
  const cacheable = cache !== false && modelCacheAvailable() && /^https?:/i.test(href);
  if (!cacheable && fill === false) return null;
  let store = null;
  if (cacheable) {
    try { store = await caches.open(MODEL_CACHE); } catch { store = null; } // e.g. storage disabled
  }
  if (store) {
    const keys = await store.keys(href, { ignoreVary: true });
    let key = keys.find((k) => !k.headers.get(ETAG_KEY)) || null;
    const tagged = keys.filter((k) => k.headers.get(ETAG_KEY));
    if (tagged.length) {
      let now;
      try {
        now = await currentEtag(href, signal, timeout, auth);
      } catch (e) {
        if (signal?.aborted) throw e;
        // a hub that refuses (401 / 403) is no way around its gate, as in Node (models/registry.js)
        if (auth && (e.status === 401 || e.status === 403)) throw e;
        now = undefined; // unreachable (offline): any cached copy will do
      }
      key = now === undefined ? (tagged[0] || key) : tagged.find((k) => k.headers.get(ETAG_KEY) === now) || (now ? null : key || tagged[0]);
    }
    const hit = key && await store.match(key);
    if (hit && hit.ok && hit.body) {
      return { response: hit, fromCache: true, timer: null, commit: noop, discard: async () => { await store.delete(key).catch(() => {}); } };
    }
  }
  if (fill === false) return null;
  const { response: res, timer } = await fetchChecked(href, { signal, timeout, auth });
  if (!store || !res.body) return { response: res, fromCache: false, timer, commit: noop, discard: noop };
  const [toEngine, toCache] = res.body.tee();
  const etag = res.headers.get('etag');
  const headers = { 'Content-Type': 'application/octet-stream', 'X-Wasmlm-Cached-At': new Date().toISOString() };
  if (etag) { headers.ETag = etag; headers.Vary = ETAG_KEY; }
  const enc = res.headers.get('content-encoding');
  const len = res.headers.get('content-length');
  if (len && (!enc || enc === 'identity')) headers['Content-Length'] = len;
  const key = cacheKey(href, etag);
  const put = store.put(key, new Response(toCache, { status: 200, headers }));
  put.catch(() => {});
  const response = new Response(toEngine, { status: res.status, statusText: res.statusText, headers: res.headers });
  return {
    response,
    fromCache: false,
    timer,
    commit: async () => {
      await put;
      // older copies of this URL (another ETag) go
      for (const k of await store.keys(href, { ignoreVary: true })) {
        if ((k.headers.get(ETAG_KEY) || null) !== (etag || null)) await store.delete(k).catch(() => {});
      }
    },
    discard: async () => { await put.catch(() => {}); await store.delete(key).catch(() => {}); },
  };
}

async function nodeCacheDir(options) {
  const { defaultCacheDir } = await import('../models/registry.js');
  return options.cacheDir || defaultCacheDir();
}

/**
 * Lists cached models: [{key, name, size, cachedAt}] where `key` is the URL
 * (browsers) or the file path (Node) that deleteCachedModel takes.
 * @param {{cacheDir?: string}} [options] Node: the cache directory
 */
export async function listCachedModels(options = {}) {
  if (isNode) {
    const fs = await nodeImport('node:fs');
    const path = await nodeImport('node:path');
    const dir = await nodeCacheDir(options);
    let names = [];
    try { names = fs.readdirSync(dir).filter((f) => f.endsWith('.gguf')); } catch { return []; }
    return names.map((f) => {
      const st = fs.statSync(path.join(dir, f));
      return { key: path.join(dir, f), name: f.slice(0, -5), size: st.size, cachedAt: st.mtime.toISOString() };
    });
  }
  if (!modelCacheAvailable()) return [];
  const store = await caches.open(MODEL_CACHE);
  const out = [];
  for (const req of await store.keys()) {
    const res = await store.match(req);
    if (!res) continue;
    let size = Number(res.headers.get('content-length')) || 0;
    if (!size) size = (await res.blob()).size;
    const name = decodeURIComponent(new URL(req.url).pathname.split('/').pop() || req.url).replace(/\.gguf$/i, '');
    out.push({ key: req.url, name, size, cachedAt: res.headers.get('x-wasmlm-cached-at') || null });
  }
  return out;
}

/**
 * Deletes one cached model (a `key` from listCachedModels). Resolves true
 * when something was deleted.
 */
export async function deleteCachedModel(key, options = {}) {
  if (isNode) {
    const fs = await nodeImport('node:fs');
    const path = await nodeImport('node:path');
    const dir = path.resolve(await nodeCacheDir(options));
    const file = path.resolve(dir, String(key));
    if (path.dirname(file) !== dir || !file.endsWith('.gguf')) throw new WasmlmError('BAD_OPTION', `not a cached model in ${dir}: ${key}`, { option: 'key' });
    try { fs.unlinkSync(file + '.json'); } catch { /* no record (models/registry.js keeps one per download) */ }
    try { fs.unlinkSync(file); return true; } catch (e) { if (e.code === 'ENOENT') return false; throw e; }
  }
  if (!modelCacheAvailable()) return false;
  const store = await caches.open(MODEL_CACHE);
  return store.delete(absolute(key), { ignoreVary: true }); // every ETag of the URL
}

/** Deletes every cached model; resolves with how many were deleted. */
export async function clearModelCache(options = {}) {
  const all = await listCachedModels(options);
  let n = 0;
  for (const m of all) if (await deleteCachedModel(m.key, options)) n++;
  return n;
}
