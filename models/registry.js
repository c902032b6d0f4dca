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
import { parseHubId, resolveHubId, hubBaseUrl, hubFileUrl, hubFileError, pickFile, hubAuth } from '../web/hub.js';
import { splitPartNames } from '../web/split.js';


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
/** Days after which an abandoned partial download (NAME.gguf.partial) is swept. */
export const PARTIAL_DAYS = 7;

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
 * than a day, and partial downloads (NAME.gguf.partial and its .json) not
 * locked and untouched for PARTIAL_DAYS. Resolves with the names removed.
 */
export async function sweepTempFiles(dir) {
  const fs = await nodeImport('node:fs');
  const path = await nodeImport('node:path');
  let names;
  try { names = fs.readdirSync(dir); } catch { return []; }
  const removed = [];
  for (const f of names) {
    // a resumable partial download nobody holds, untouched for PARTIAL_DAYS: given up
    if (/\.gguf\.partial(?:\.json)?$/.test(f)) {
      const p = path.join(dir, f), lock = path.join(dir, f.replace(/\.json$/, '') + '.lock');
      try {
        if (!fs.existsSync(lock) && Date.now() - fs.statSync(p).mtimeMs > PARTIAL_DAYS * DAY_MS) { fs.unlinkSync(p); removed.push(f); }
      } catch { /* gone meanwhile */ }
      continue;
    }
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
 * Node: downloads entry.url to `dest`: streamed into a file beside it while
 * hashing, verified (sha256, size, GGUF magic), then renamed into place
 * beside its record (dest + '.json'). Failures are WasmlmErrors: NETWORK
 * (connection, HTTP status, stall, cut body), INTEGRITY (sha256 or size),
 * BAD_FILE (not a GGUF file, e.g. an HTML error page); nothing is cached then.
 *
 * Resumable: when the server names the file with a strong ETag, the bytes
 * go to dest + '.partial' (its record dest + '.partial.json': url, etag,
 * total), which an interrupted download leaves behind. The next attempt (a
 * later call, or this one after a cut or a stall, up to MAX_RESUMES times)
 * asks for the rest with `Range: bytes=N-` and `If-Range: ETAG`; a 200
 * instead of 206, a 206 of another ETag or of another offset starts over.
 * A partial file in use by a live process is left alone (this download then
 * goes to a temp file and cannot resume). `options.ifNoneMatch` (an ETag)
 * makes the request conditional: a 304 resolves {status: 'unchanged'}.
 * Progress: options.onProgress({loaded, total, rate, phase: 'download'}),
 * rate in bytes/s of this attempt.
 * @returns {Promise<{status: 'downloaded'|'unchanged', path: string, etag?: string, resumed: number}>}
 */
export async function downloadModel(name, entry, dest, options = {}) {
  checkEntry(name, entry);
  const fs = await nodeImport('node:fs');
  const path = await nodeImport('node:path');
  const timeout = checkTimeout(options.timeout, REGISTRY_TIMEOUT_MS);
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const lock = await takeLock(dest + '.partial.lock');
  const part = lock ? dest + '.partial' : `${dest}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const dropPart = () => { for (const f of [part, part + '.json']) { try { fs.unlinkSync(f); } catch { /* gone */ } } };
  try {
    let prec = lock ? readJson(fs, part + '.json') : null;
    if (!prec || prec.url !== entry.url || !strongEtag(prec.etag) || !fs.existsSync(part)) { dropPart(); prec = null; }
    let resumes = 0, restarts = 0, resumedFrom = 0;
    for (;;) {
      const have = prec ? fs.statSync(part).size : 0;
      const r = await downloadAttempt(name, entry, { part, have, prec, timeout, options, conditional: !have && options.ifNoneMatch });
      if (r.status === 'unchanged') { dropPart(); return { status: 'unchanged', path: dest, resumed: 0 }; }
      if (r.status === 'restart') {
        // the server sent the whole file, another version, or refused the range: from the start
        dropPart(); prec = null;
        if (++restarts > 2) throw new WasmlmError('NETWORK', `download of ${safeUrl(entry.url)} keeps restarting (${r.why})`, { url: safeUrl(entry.url) });
        continue;
      }
      if (r.status === 'cut') {
        // bytes kept in a resumable partial file: try again from where it stopped
        prec = r.prec;
        if (!lock || !prec || resumes >= MAX_RESUMES || options.signal?.aborted) throw r.error;
        resumes++;
        if (!resumedFrom) resumedFrom = fs.statSync(part).size;
        continue;
      }
      if (have && !resumedFrom) resumedFrom = have;
      checkDownload(name, entry, r);
      await writeSidecar(dest, { url: entry.url, size: r.loaded, sha256: r.got, etag: r.etag || undefined, ...(options.record || {}) });
      fs.renameSync(part, dest);
      dropPart();
      return { status: 'downloaded', path: dest, etag: r.etag || undefined, resumed: resumedFrom };
    }
  } catch (e) {
    // a network failure keeps a resumable partial file; bad bytes never stay
    const keep = lock && (e.code === 'NETWORK' || e.code === 'ABORTED' || e.name === 'AbortError');
    if (!keep || !fs.existsSync(part + '.json')) dropPart();
    throw e;
  } finally {
    if (lock) lock.release();
  }
}

/** Resumes within one download call after a cut or a stall. */
export const MAX_RESUMES = 3;

function readJson(fs, file) {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')); } catch { return null; }
}

/** A strong ETag ("..."): weak ones (W/"...") may not be used in If-Range. */
function strongEtag(etag) { return typeof etag === 'string' && /^"[^"]*"$/.test(etag); }

/** `Content-Range: bytes START-END/TOTAL` → {start, end, total} (total null for '*'). */
function contentRange(h) {
  const m = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i.exec(h || '');
  if (!m) return null;
  const r = { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? null : Number(m[3]) };
  return Number.isSafeInteger(r.end) && r.end >= r.start ? r : null;
}

/**
 * One request of a download. Resolves {status: 'done', got, loaded, head,
 * etag}, 'unchanged' (304), 'restart' (start over, with why), or 'cut'
 * (the body broke after `received` bytes; error, prec for a resume).
 */
async function downloadAttempt(name, entry, { part, have, prec, timeout, options, conditional }) {
  const fs = await nodeImport('node:fs');
  const { createHash } = await nodeImport('node:crypto');
  const url = entry.url;
  const headers = {};
  if (have) { headers.Range = `bytes=${have}-`; headers['If-Range'] = prec.etag; }
  if (conditional) headers['If-None-Match'] = conditional;
  const { response: res, timer } = await fetchChecked(url, { signal: options.signal, timeout, fetch: options.fetch, headers, allow: [304, 416], auth: options.auth });
  const drop = (status, why) => { timer.done(); res.body?.cancel().catch(() => {}); return { status, why }; };
  if (res.status === 304) return conditional ? drop('unchanged') : drop('restart', 'HTTP 304 to an unconditional request');
  if (res.status === 416) return drop('restart', `HTTP 416 for bytes ${have}-`);
  const etag = res.headers.get('etag');
  let offset = 0, total;
  if (res.status === 206) {
    const cr = contentRange(res.headers.get('content-range'));
    if (!have || !cr || cr.start !== have) return drop('restart', `a 206 for ${res.headers.get('content-range') || 'no Content-Range'} when asking for bytes ${have}-`);
    if (etag && etag !== prec.etag) return drop('restart', `the file changed (ETag ${etag}, was ${prec.etag})`);
    offset = have;
    total = cr.total ?? (entry.size || 0);
  } else {
    const type = res.headers.get('content-type') || '';
    if (!entry.sha256 && /^text\/html/i.test(type)) {
      drop();
      throw new WasmlmError('BAD_FILE', `model '${name}' from ${safeUrl(url)} is an HTML page (content-type ${type}), not a GGUF file; not cached`, { url: safeUrl(url) });
    }
    total = entry.size || declaredLength(res);
  }
  if (!res.body) { drop(); throw new WasmlmError('NETWORK', `model '${name}' from ${safeUrl(url)} has no body`, { url: safeUrl(url) }); }
  // resumable only with a strong ETag to ask If-Range with
  const resumable = strongEtag(etag) && (offset > 0 || /bytes/i.test(res.headers.get('accept-ranges') || ''));
  const rec = resumable ? { url, etag, total } : null;
  if (rec) fs.writeFileSync(part + '.json', JSON.stringify(rec));
  else { try { fs.unlinkSync(part + '.json'); } catch { /* none */ } }
  const hash = createHash('sha256');
  let head = '';
  if (offset) { // the bytes already here count toward the digest and the magic
    for await (const chunk of fs.createReadStream(part, { end: offset - 1 })) {
      if (head.length < 4) head += chunk.subarray(0, 4 - head.length).toString('latin1');
      hash.update(chunk);
    }
  }
  const fh = await fs.promises.open(part, offset ? 'a' : 'w');
  const t0 = Date.now();
  let received = 0;
  try {
    try {
      for await (const u8 of readBody(res, { url, expected: total ? total - offset : 0, timeout, signal: options.signal, timer })) {
        if (head.length < 4) head += Buffer.from(u8.subarray(0, 4 - head.length)).toString('latin1');
        hash.update(u8);
        await fh.write(u8);
        received += u8.byteLength;
        if (options.onProgress) {
          const secs = (Date.now() - t0) / 1000;
          options.onProgress({ loaded: offset + received, total, rate: secs > 0 ? Math.round(received / secs) : 0, phase: 'download' });
        }
      }
    } catch (e) {
      if (e.code === 'NETWORK' && rec && !e.status) { await fh.sync().catch(() => {}); return { status: 'cut', error: e, received, prec: rec }; }
      throw e;
    }
    await fh.sync();
  } finally {
    await fh.close().catch(() => {});
  }
  return { status: 'done', got: hash.digest('hex'), loaded: offset + received, head, etag };
}

/**
 * An exclusive lock file holding our pid; one of a dead process is taken
 * over. Resolves {release()} or null when a live process holds it.
 */
async function takeLock(file) {
  const fs = await nodeImport('node:fs');
  for (let i = 0; i < 2; i++) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
      return { release: () => { try { fs.unlinkSync(file); } catch { /* gone */ } } };
    } catch (e) {
      if (e.code !== 'EEXIST') return null;
      const pid = Number(readText(fs, file));
      if (pid && pid !== process.pid && processAlive(pid)) return null;
      if (pid === process.pid) return null; // another download of this process
      try { fs.unlinkSync(file); } catch { /* raced */ }
    }
  }
  return null;
}

function readText(fs, file) { try { return fs.readFileSync(file, 'utf8'); } catch { return ''; } }

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

// ---- hub ids (web/hub.js) in the Node cache ---------------------------------

/**
 * The cache name of a hub file (the file is NAME.gguf): hf--OWNER--REPO--REVISION--PATH with path
 * separators as -- and PATH's .gguf dropped, so that a split GGUF's parts keep their part names
 * (hf--...--m-00002-of-00003.gguf) and the worker finds them beside the first.
 */
export function hubCacheName(hub) {
  const clean = (x) => String(x).replace(/[^A-Za-z0-9._-]+/g, '_');
  return ['hf', hub.owner, hub.repo, clean(hub.revision), ...hub.path.replace(/\.gguf$/i, '').split('/').map(clean)].join('--');
}

/**
 * Node: a hub id (hf:OWNER/REPO..., web/hub.js) as a verified file in the
 * download cache. The cached copy is kept by URL and ETag: online, a
 * conditional request (If-None-Match: its ETag) asks whether it changed
 * (304: use it; 200: the new bytes replace it); offline, or when the hub
 * cannot be reached, the cached copy is used as it is. Ids with a
 * quantization are resolved from the repository listing (offline: from the
 * cached files of that repository). Downloads resume (downloadModel). The
 * first part of a split GGUF brings every part into the cache, named so
 * that the parts sit beside each other (their progress counts as one
 * download). The access token (options.hubToken or the env: hubAuth) goes
 * to the hub's origin only; it is in no record, name or message.
 * Resolves {name, path, source: 'cache'|'download', entry, hub} (path: the
 * first part's).
 */
export async function resolveHubModel(id, options = {}) {
  const fs = await nodeImport('node:fs');
  const path = await nodeImport('node:path');
  const ref = parseHubId(id);
  const base = hubBaseUrl(options);
  const auth = hubAuth(options, base);
  const cacheDir = options.cacheDir || await defaultCacheDir();
  await sweepTempFiles(cacheDir);
  const offline = options.offline ?? process.env.WASMLM_OFFLINE === '1';
  const timeout = checkTimeout(options.timeout, REGISTRY_TIMEOUT_MS);
  let hub;
  if (ref.path) hub = { ...ref, url: hubFileUrl(base, ref, ref.path), size: null, sha256: null, hubUrl: base };
  else if (offline) hub = cachedHubFile(fs, path, cacheDir, ref, options, null);
  else {
    try {
      hub = await resolveHubId(id, { ...options, timeout });
    } catch (e) {
      if (e.code !== 'NETWORK' || e.status) throw e;
      hub = cachedHubFile(fs, path, cacheDir, ref, options, e); // the hub is unreachable: a cached copy will do
    }
  }
  const names = splitPartNames(hub.path);
  if (!names) return hubFileToCache(hub, { fs, cacheDir, offline, timeout, auth, options });
  // a split GGUF: every part, one after the other, with one progress
  const parts = hub.parts || names.map((p) => ({ path: p, url: hubFileUrl(hub.hubUrl || base, hub, p), size: null, sha256: null }));
  const sizes = parts.map((p) => p.size);
  const total = sizes.every((n) => n) ? sizes.reduce((a, n) => a + n, 0) : 0;
  let done = 0, first = null, fresh = false;
  for (const [i, p] of parts.entries()) {
    const onProgress = options.onProgress && ((ev) => options.onProgress({ ...ev, loaded: done + ev.loaded, total: total || done + ev.total }));
    const what = `${hub.id} (split GGUF part ${i + 1} of ${parts.length}, ${p.path})`;
    const r = await hubFileToCache({ ...hub, path: p.path, url: p.url, size: p.size, sha256: p.sha256, parts: undefined },
      { fs, cacheDir, offline, timeout, auth, options: { ...options, onProgress }, what });
    done += p.size || fs.statSync(r.path).size;
    if (r.source === 'download') fresh = true;
    if (i === 0) first = r;
  }
  return { ...first, source: fresh ? 'download' : 'cache' };
}

/** One hub file into the cache (see resolveHubModel); `what` names it in messages (default the id). */
async function hubFileToCache(hub, { fs, cacheDir, offline, timeout, auth, options, what = hub.id }) {
  const path = await nodeImport('node:path');
  const name = hubCacheName(hub);
  const file = path.join(cacheDir, name + '.gguf');
  const entry = { url: hub.url, sha256: hub.sha256 || undefined, size: hub.size || undefined };
  const out = (source) => ({ name, path: file, source, entry, hub });
  const rec = await readSidecar(file);
  const cachedOk = fs.existsSync(file) && rec && rec.url === hub.url;
  const dl = { ...options, timeout, auth, record: hubRecord(hub) };
  if (cachedOk) {
    if (offline || !rec.etag) {
      const problem = await verifyCached(entry, file);
      if (!problem) return out('cache');
      if (offline) throw new WasmlmError('INTEGRITY', `cached ${what} (${file}) failed verification: ${problem}; it was removed, and downloading again is not allowed offline`, { path: file });
    } else {
      let r;
      try {
        r = await downloadModel(name, entry, file, { ...dl, ifNoneMatch: rec.etag });
      } catch (e) {
        if (e.code !== 'NETWORK' || e.status) throw hubFileError(e, hub, auth);
        console.warn(`wasmlm: cannot ask ${safeUrl(hub.url)} whether ${what} changed (${e.message}); using the cached copy`);
        r = { status: 'unchanged' };
      }
      if (r.status === 'downloaded') return out('download');
      const problem = await verifyCached(entry, file);
      if (!problem) return out('cache');
    }
  } else if (offline) {
    throw new WasmlmError('NOT_FOUND', `${what} is not in the cache ${cacheDir}, and downloading is not allowed offline`, { path: file });
  }
  try {
    await downloadModel(name, entry, file, dl);
  } catch (e) { throw hubFileError(e, hub, auth); }
  return out('download');
}

function hubRecord(hub) {
  return { hub: { owner: hub.owner, repo: hub.repo, revision: hub.revision, path: hub.path } };
}

/**
 * The cached file a quantization id picks among the cached files of its
 * repository and revision (records' `hub` fields); `cause` is the network
 * failure that sent us here (null: offline). Throws NOT_FOUND.
 */
function cachedHubFile(fs, path, cacheDir, ref, options, cause) {
  let names = [];
  try { names = fs.readdirSync(cacheDir).filter((f) => f.endsWith('.gguf.json')); } catch { /* no cache yet */ }
  const files = [];
  for (const f of names) {
    const rec = readJson(fs, path.join(cacheDir, f));
    const h = rec && rec.hub;
    if (h && h.owner === ref.owner && h.repo === ref.repo && h.revision === ref.revision && typeof h.path === 'string' &&
        fs.existsSync(path.join(cacheDir, f.slice(0, -5)))) files.push({ path: h.path, size: rec.size, sha256: null, url: rec.url });
  }
  const why = cause ? `the hub cannot be reached (${cause.message})` : 'offline';
  let pick;
  try {
    pick = pickFile(files, ref);
  } catch (e) {
    if (e.code !== 'NOT_FOUND') throw e;
    if (cause) throw cause;
    throw new WasmlmError('NOT_FOUND', `${ref.id}: ${why}, and no cached file of ${ref.owner}/${ref.repo} matches (cached: ${files.map((x) => x.path).join(', ') || 'none'})`, { cause });
  }
  // a split GGUF's other parts: beside the first part's recorded URL
  const partNames = splitPartNames(pick.path);
  const parts = partNames && partNames.map((p) => ({ path: p, url: new URL(encodeURIComponent(p.split('/').pop()), pick.url).href, size: null, sha256: null }));
  return { ...ref, path: pick.path, url: pick.url, size: null, sha256: null, parts };
}
