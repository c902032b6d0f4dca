// Model registry: resolves a short name ("stories260K") to a local file
// (Node) or a URL (browsers).
//
// Node resolution order for NAME:
//   1. options.modelDir, else env WASMLM_MODELS: a directory holding NAME.gguf
//      (offline use and tests; no checksum is checked there)
//   2. the cache directory (options.cacheDir, else env WASMLM_CACHE, else
//      ~/.cache/wasmlm): NAME.gguf, present only after a verified download,
//      beside NAME.gguf.json recording its url, size and sha256. Every hit is
//      hashed again and compared with that record (and with the entry's
//      sha256); a file that fails is evicted and downloaded again.
//   3. download from the registry URL: streamed to a temp file in the cache
//      while hashing, sha256 (and size) verified, then renamed into place.
//      Without a registry sha256 the body must at least be a GGUF file of the
//      declared size (never an HTML error page). A stall of options.timeout ms
//      (default REGISTRY_TIMEOUT_MS) fails the download.
// Temp files of dead processes, or older than a day, are swept from the cache.
// Browsers: options.modelDir (a URL prefix) gives `${modelDir}/NAME.gguf`,
// else the registry URL; the caller verifies the sha256 while streaming.

import { WasmlmError, badOption } from '../web/errors.js';
import { isNode, nodeImport } from '../web/env.js';
import { checkSha256, checkTimeout, fetchChecked, readBody, declaredLength, safeUrl, REGISTRY_TIMEOUT_MS } from '../web/net.js';


let builtin = null;

/** The built-in registry entries (models/registry.json). */
export async function loadRegistry() {
  if (builtin) return builtin;
  const url = new URL('./registry.json', import.meta.url);
  if (isNode && url.protocol === 'file:') {
    const fs = await nodeImport('node:fs');
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
  const os = await nodeImport('node:os');
  const path = await nodeImport('node:path');
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'wasmlm');
}

function checkName(name) {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`invalid model name '${name}'`);
}

/**
 * Checks a registry entry before it is used: a URL string, a sha256 of 64
 * hex digits when given, a size that is a positive integer when given.
 */
export function checkEntry(name, entry) {
  const at = `registry.${name}`;
  if (!entry || typeof entry !== 'object') throw badOption(at, entry, 'must be an object {url, sha256?, size?}');
  if (typeof entry.url !== 'string' || !entry.url) throw badOption(`${at}.url`, entry.url, 'must be a URL string');
  checkSha256(entry.sha256, `${at}.sha256`);
  if (entry.size != null && !(Number.isSafeInteger(entry.size) && entry.size > 0)) {
    throw badOption(`${at}.size`, entry.size, 'must be a positive integer (bytes)');
  }
  return entry;
}

/**
 * Resolves a registry name.
 * Node: returns {name, path, source: 'modelDir'|'cache'|'download', entry}.
 * Browser: returns {name, url, sha256, size, entry} (no download here).
 * @param {string} name
 * @param {{modelDir?: string, cacheDir?: string, registry?: object, onProgress?: Function, signal?: AbortSignal, offline?: boolean, timeout?: number}} [options]
 */
export async function resolveModel(name, options = {}) {
  checkName(name);
  const entries = await registryEntries(options);
  const entry = entries[name] ? checkEntry(name, entries[name]) : null;
  if (!isNode) {
    if (options.modelDir) return { name, url: `${String(options.modelDir).replace(/\/$/, '')}/${name}.gguf`, sha256: null, size: null, entry };
    if (!entry) throw unknown(name, entries);
    return { name, url: entry.url, sha256: entry.sha256 || null, size: entry.size || null, entry };
  }
  const fs = await nodeImport('node:fs');
  const path = await nodeImport('node:path');
  const modelDir = options.modelDir || process.env.WASMLM_MODELS;
  if (modelDir) {
    const p = path.resolve(modelDir, name + '.gguf');
    if (fs.existsSync(p)) return { name, path: p, source: 'modelDir', entry };
  }
  if (!entry) {
    throw unknown(name, entries, modelDir);
  }
  const cacheDir = options.cacheDir || await defaultCacheDir();
  await sweepTempFiles(cacheDir);
  const cached = path.join(cacheDir, name + '.gguf');
  const problem = await verifyCached(entry, cached);
  if (!problem) return { name, path: cached, source: 'cache', entry };
  if (options.offline ?? process.env.WASMLM_OFFLINE === '1') {
    if (problem !== 'missing') {
      throw new WasmlmError('INTEGRITY', `cached model '${name}' (${cached}) failed verification: ${problem}; it was removed, and downloading again is not allowed offline`, { path: cached });
    }
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

const GGUF_MAGIC = 'GGUF';
const DAY_MS = 24 * 3600 * 1000;

/** The record kept beside a cached model: {url, size, sha256, etag?, downloadedAt}. */
function sidecarPath(file) { return file + '.json'; }

async function readSidecar(file) {
  const fs = await nodeImport('node:fs');
  try { return JSON.parse(fs.readFileSync(sidecarPath(file), 'utf8')); } catch { return null; }
}

/** Node: sha256 (hex) and the first 4 bytes of a file, streamed. */
async function digestFile(file) {
  const fs = await nodeImport('node:fs');
  const { createHash } = await nodeImport('node:crypto');
  const hash = createHash('sha256');
  let head = '';
  for await (const chunk of fs.createReadStream(file)) {
    if (head.length < 4) head += chunk.subarray(0, 4 - head.length).toString('latin1');
    hash.update(chunk);
  }
  return { sha256: hash.digest('hex'), magic: head };
}

/**
 * Node: checks a cached model against its record and the registry entry.
 * Resolves null when it may be used, 'missing' when there is none, or the
 * problem in words (the file and its record are then evicted).
 */
async function verifyCached(entry, file) {
  const fs = await nodeImport('node:fs');
  let st;
  try { st = fs.statSync(file); } catch { await evictCached(file); return 'missing'; }
  const rec = await readSidecar(file);
  const problem = await cacheProblem(entry, file, st, rec);
  if (problem) { await evictCached(file); return problem; }
  return null;
}

async function cacheProblem(entry, file, st, rec) {
  if (!st.isFile()) return 'not a regular file';
  if (entry.size && st.size !== entry.size) return `it has ${st.size} bytes, the registry says ${entry.size}`;
  if (rec && rec.size !== st.size) return `it has ${st.size} bytes, ${rec.size} were downloaded`;
  if (rec && !entry.sha256 && rec.url !== entry.url) return `it was downloaded from ${safeUrl(rec.url)}, the registry now says ${safeUrl(entry.url)}`;
  const got = await digestFile(file);
  const want = entry.sha256 ? entry.sha256.toLowerCase() : rec && rec.sha256;
  if (want && got.sha256 !== want) return `sha256 ${got.sha256}, expected ${want}`;
  if (got.magic !== GGUF_MAGIC) return 'not a GGUF file';
  // a file cached before records were kept: record what it is now
  if (!rec || rec.sha256 !== got.sha256) await writeSidecar(file, { url: entry.url, size: st.size, sha256: got.sha256 });
  return null;
}

async function writeSidecar(file, rec) {
  const fs = await nodeImport('node:fs');
  const tmp = `${sidecarPath(file)}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  fs.writeFileSync(tmp, JSON.stringify({ ...rec, recordedAt: new Date().toISOString() }, null, 1));
  fs.renameSync(tmp, sidecarPath(file));
}

/** Node: removes a cached model and its record (a load of it failed, or it failed verification). */
export async function evictCached(file) {
  const fs = await nodeImport('node:fs');
  for (const f of [file, sidecarPath(file)]) {
    try { fs.unlinkSync(f); } catch (e) { if (e.code !== 'ENOENT') console.warn(`wasmlm: cannot remove ${f}: ${e.message}`); }
  }
}

/** Whether process `pid` is alive (EPERM: it is, but another user's). */
function processAlive(pid) {
  if (pid === process.pid) return true;
  try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; }
}

/**
 * Node: deletes temp files (NAME.gguf.tmp-PID-X, NAME.gguf.json.tmp-PID-X)
 * left in the cache by a download whose process is gone or that is older
 * than a day. Resolves with the names removed.
 */
export async function sweepTempFiles(dir) {
  const fs = await nodeImport('node:fs');
  const path = await nodeImport('node:path');
  let names;
  try { names = fs.readdirSync(dir); } catch { return []; }
  const removed = [];
  for (const f of names) {
    const m = /\.gguf(?:\.json)?\.tmp-(\d+)-[A-Za-z0-9]+$/.exec(f);
    if (!m) continue;
    const p = path.join(dir, f);
    try {
      const old = Date.now() - fs.statSync(p).mtimeMs > DAY_MS;
      if (old || !processAlive(Number(m[1]))) { fs.unlinkSync(p); removed.push(f); }
    } catch { /* gone meanwhile */ }
  }
  return removed;
}

/**
 * Node: downloads entry.url to `dest`: streamed into a temp file beside it
 * while hashing, verified (sha256, size, GGUF magic), then renamed into place
 * beside its record (dest + '.json'). Failures are WasmlmErrors: NETWORK
 * (connection, HTTP status, stall, cut body), INTEGRITY (sha256 or size),
 * BAD_FILE (not a GGUF file, e.g. an HTML error page); nothing is cached then.
 */
export async function downloadModel(name, entry, dest, options = {}) {
  checkEntry(name, entry);
  const fs = await nodeImport('node:fs');
  const path = await nodeImport('node:path');
  const { createHash } = await nodeImport('node:crypto');
  const timeout = checkTimeout(options.timeout, REGISTRY_TIMEOUT_MS);
  const url = entry.url;
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const { response: res, timer } = await fetchChecked(url, { signal: options.signal, timeout, fetch: options.fetch });
  const type = res.headers.get('content-type') || '';
  if (!entry.sha256 && /^text\/html/i.test(type)) {
    timer.done();
    res.body?.cancel().catch(() => {});
    throw new WasmlmError('BAD_FILE', `model '${name}' from ${safeUrl(url)} is an HTML page (content-type ${type}), not a GGUF file; not cached`, { url: safeUrl(url) });
  }
  const expected = entry.size || declaredLength(res);
  const tmp = `${dest}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const hash = createHash('sha256');
  const fh = await fs.promises.open(tmp, 'w');
  let loaded = 0, head = '';
  try {
    if (!res.body) throw new WasmlmError('NETWORK', `model '${name}' from ${safeUrl(url)} has no body`, { url: safeUrl(url) });
    for await (const u8 of readBody(res, { url, expected, timeout, signal: options.signal, timer })) {
      if (head.length < 4) head += Buffer.from(u8.subarray(0, 4 - head.length)).toString('latin1');
      hash.update(u8);
      await fh.write(u8);
      loaded += u8.byteLength;
      if (options.onProgress) options.onProgress({ loaded, total: expected, phase: 'download' });
    }
    await fh.sync();
    await fh.close();
    const got = hash.digest('hex');
    checkDownload(name, entry, { got, loaded, head });
    await writeSidecar(dest, { url, size: loaded, sha256: got, etag: res.headers.get('etag') || undefined });
    fs.renameSync(tmp, dest);
  } catch (e) {
    try { await fh.close(); } catch { /* closed */ }
    try { fs.unlinkSync(tmp); } catch { /* gone */ }
    throw e;
  }
  return dest;
}

/** Throws when downloaded bytes do not match the entry or are not a GGUF file. */
function checkDownload(name, entry, { got, loaded, head }) {
  const url = safeUrl(entry.url);
  if (entry.sha256 && got !== entry.sha256.toLowerCase()) {
    throw new WasmlmError('INTEGRITY', `sha256 mismatch for model '${name}' from ${url}: expected ${entry.sha256}, got ${got} (download discarded)`,
      { url, expected: entry.sha256, actual: got });
  }
  if (entry.size && loaded !== entry.size) {
    throw new WasmlmError('INTEGRITY', `download of model '${name}' from ${url} has ${loaded} bytes, expected ${entry.size}`, { url });
  }
  if (head !== GGUF_MAGIC) {
    throw new WasmlmError('BAD_FILE', `model '${name}' from ${url} is not a GGUF file (it starts with ${JSON.stringify(head)}); not cached`, { url });
  }
}
