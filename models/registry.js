// Model registry: resolves a short name ("stories260K") to a local file
// (Node) or a URL (browsers).
//
// Node resolution order for NAME:
//   1. options.modelDir, else env WASMLM_MODELS: a directory holding NAME.gguf
//      (offline use and tests; no checksum is checked there)
//   2. the cache directory (options.cacheDir, else env WASMLM_CACHE, else
//      ~/.cache/wasmlm): NAME.gguf, present only after a verified download
//   3. download from the registry URL: streamed to a temp file in the cache
//      while hashing, sha256 (and size) verified, then renamed into place.
// Browsers: options.modelDir (a URL prefix) gives `${modelDir}/NAME.gguf`,
// else the registry URL; the caller verifies the sha256 while streaming.

const isNode = typeof process !== 'undefined' && !!(process.versions && process.versions.node);

let builtin = null;

/** The built-in registry entries (models/registry.json). */
export async function loadRegistry() {
  if (builtin) return builtin;
  const url = new URL('./registry.json', import.meta.url);
  if (isNode && url.protocol === 'file:') {
    const fs = await import('node:fs');
    builtin = JSON.parse(fs.readFileSync(url, 'utf8'));
  } else {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`cannot read model registry ${url}: HTTP ${res.status}`);
    builtin = await res.json();
  }
  return builtin;
}

/** Entries = built-in registry overlaid with options.registry (an object of entries). */
export async function registryEntries(options = {}) {
  return { ...(await loadRegistry()), ...(options.registry || {}) };
}

/** Whether `name` is a registry name (and not a path or URL). */
export async function isRegistryName(name, options = {}) {
  if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name) || name.endsWith('.gguf')) return false;
  const entries = await registryEntries(options);
  return Object.prototype.hasOwnProperty.call(entries, name);
}

/** Node: the default cache directory. */
export async function defaultCacheDir() {
  if (process.env.WASMLM_CACHE) return process.env.WASMLM_CACHE;
  const os = await import('node:os');
  const path = await import('node:path');
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'wasmlm');
}

function checkName(name) {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`invalid model name '${name}'`);
}

/**
 * Resolves a registry name.
 * Node: returns {name, path, source: 'modelDir'|'cache'|'download', entry}.
 * Browser: returns {name, url, sha256, size, entry} (no download here).
 * @param {string} name
 * @param {{modelDir?: string, cacheDir?: string, registry?: object, onProgress?: Function, signal?: AbortSignal, offline?: boolean}} [options]
 */
export async function resolveModel(name, options = {}) {
  checkName(name);
  const entries = await registryEntries(options);
  const entry = entries[name] || null;
  if (!isNode) {
    if (options.modelDir) return { name, url: `${String(options.modelDir).replace(/\/$/, '')}/${name}.gguf`, sha256: null, size: null, entry };
    if (!entry) throw unknown(name, entries);
    return { name, url: entry.url, sha256: entry.sha256 || null, size: entry.size || null, entry };
  }
  const fs = await import('node:fs');
  const path = await import('node:path');
  const modelDir = options.modelDir || process.env.WASMLM_MODELS;
  if (modelDir) {
    const p = path.resolve(modelDir, name + '.gguf');
    if (fs.existsSync(p)) return { name, path: p, source: 'modelDir', entry };
  }
  if (!entry) {
    throw unknown(name, entries, modelDir);
  }
  const cacheDir = options.cacheDir || await defaultCacheDir();
  const cached = path.join(cacheDir, name + '.gguf');
  if (fs.existsSync(cached)) {
    const st = fs.statSync(cached);
    if (!entry.size || st.size === entry.size) return { name, path: cached, source: 'cache', entry };
  }
  if (options.offline ?? process.env.WASMLM_OFFLINE === '1') {
    throw new Error(`model '${name}' is not available offline (looked in ${modelDir ? modelDir + ' and ' : ''}${cacheDir})`);
  }
  await downloadModel(name, entry, cached, options);
  return { name, path: cached, source: 'download', entry };
}

function unknown(name, entries, modelDir) {
  const known = Object.keys(entries).join(', ');
  return new Error(`unknown model '${name}': not a file, URL or registry name (registry has: ${known})` +
    (modelDir ? `; not found as ${name}.gguf in ${modelDir}` : ''));
}

/**
 * Node: downloads entry.url to `dest`: streamed into a temp file beside it
 * while hashing, verified (sha256, size), then renamed into place.
 */
export async function downloadModel(name, entry, dest, options = {}) {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const { createHash } = await import('node:crypto');
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const tmp = `${dest}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const doFetch = options.fetch || globalThis.fetch;
  let res;
  try {
    res = await doFetch(entry.url, { signal: options.signal });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new Error(`cannot download model '${name}' from ${entry.url}: ${e && e.message || e}`);
  }
  if (!res.ok) throw new Error(`cannot download model '${name}' from ${entry.url}: HTTP ${res.status} ${res.statusText || ''}`.trim());
  const total = entry.size || Number(res.headers.get('content-length')) || 0;
  const hash = createHash('sha256');
  const fh = await fs.promises.open(tmp, 'w');
  let loaded = 0;
  try {
    for await (const chunk of res.body) {
      const u8 = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
      hash.update(u8);
      await fh.write(u8);
      loaded += u8.byteLength;
      if (options.onProgress) options.onProgress({ loaded, total, phase: 'download' });
    }
    await fh.sync();
    await fh.close();
    const got = hash.digest('hex');
    if (entry.sha256 && got !== entry.sha256.toLowerCase()) {
      throw new Error(`sha256 mismatch for model '${name}' from ${entry.url}: expected ${entry.sha256}, got ${got} (download discarded)`);
    }
    if (entry.size && loaded !== entry.size) {
      throw new Error(`download of model '${name}' from ${entry.url} has ${loaded} bytes, expected ${entry.size}`);
    }
    fs.renameSync(tmp, dest);
  } catch (e) {
    try { await fh.close(); } catch { /* closed */ }
    try { fs.unlinkSync(tmp); } catch { /* gone */ }
    throw e;
  }
  return dest;
}
