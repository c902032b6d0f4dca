// Hub ids: models named the way users find them on a model hub.
//
//   hf:OWNER/REPO[@REVISION]/PATH/FILE.gguf   one file of a repository
//   hf:OWNER/REPO[@REVISION]:QUANT            the GGUF file of quantization QUANT (Q4_K_M, q8_0, ...)
//   hf:OWNER/REPO[@REVISION]                  the repository's only GGUF file
//
// The file list comes from the hub's public tree listing
// (GET {hubUrl}/api/models/OWNER/REPO/tree/REVISION?recursive=true, pages
// followed through the Link header), the bytes from its resolve endpoint
// ({hubUrl}/OWNER/REPO/resolve/REVISION/PATH, which may redirect to a CDN).
// The base URL: option hubUrl, else env WASMLM_HUB_URL (Node), else
// DEFAULT_HUB_URL; the revision defaults to 'main'. Gated and private
// repositories need an access token (hubAuth): option hubToken, else (Node)
// env WASMLM_HUB_TOKEN, else env HF_TOKEN when the hub is huggingface.co. It
// is sent as `Authorization: Bearer` to the hub's own origin only (the
// listing and the resolve endpoint, never the CDN a resolve URL redirects to:
// web/net.js fetchWithToken), and never written into a message, a cache key
// or a record. Failures are WasmlmErrors: BAD_OPTION (a malformed id, a
// quantization that matches several files, a malformed token), NOT_FOUND (no
// such repository, revision, file or quantization: the message lists the
// GGUF files that exist), UNAUTHORIZED (HTTP 401 / 403: whether a token was
// sent, and what to do), BAD_FILE (a part of a split GGUF missing from the
// listing), NETWORK.
import { WasmlmError } from './errors.js';
import { isNode } from './env.js';
import { checkValue } from './options.js';
import { fetchChecked, readBody, safeUrl } from './net.js';
import { splitPartNames } from './split.js';

export const DEFAULT_HUB_URL = 'https://huggingface.co';
export const HUB_PREFIX = 'hf:';
/** Most pages of a tree listing followed (a repository of 100,000 files at 1,000 a page). */
const MAX_PAGES = 100;
/** Most bytes of one listing page. */
const MAX_PAGE_BYTES = 32 << 20;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const QUANT = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** Whether `s` is written as a hub id (starts with 'hf:'); parseHubId says whether it is a valid one. */
export function isHubId(s) {
  return typeof s === 'string' && s.slice(0, HUB_PREFIX.length).toLowerCase() === HUB_PREFIX;
}

function badId(id, why) {
  return new WasmlmError('BAD_OPTION', `not a valid hub id ${JSON.stringify(String(id))}: ${why}` +
    ' (expected hf:OWNER/REPO/PATH.gguf, hf:OWNER/REPO:QUANT or hf:OWNER/REPO, with an optional @REVISION after REPO)',
  { option: 'source' });
}

/**
 * Parses a hub id. Returns {owner, repo, revision, path, quant, id} where
 * path (a file in the repository) or quant (a quantization name) may be
 * null, and id is the id written canonically. Throws BAD_OPTION.
 * @param {string} id
 */
export function parseHubId(id) {
  if (!isHubId(id)) throw badId(id, "it does not start with 'hf:'");
  const rest = id.slice(HUB_PREFIX.length);
  // OWNER/REPO[@REV] then either /PATH or :QUANT or nothing
  const m = /^([^/@:]+)\/([^/@:]+)(?:@([^/:]+))?(?:(\/.*)|:([^/]*))?$/.exec(rest);
  if (!m) throw badId(id, 'it needs OWNER/REPO');
  const [, owner, repo, rawRev, rawPath, quant] = m;
  if (!NAME.test(owner)) throw badId(id, `bad owner ${JSON.stringify(owner)}`);
  if (!NAME.test(repo) || repo.endsWith('.gguf')) throw badId(id, `bad repository name ${JSON.stringify(repo)}`);
  let revision = 'main';
  if (rawRev !== undefined) {
    try { revision = decodeURIComponent(rawRev); } catch { throw badId(id, `bad revision ${JSON.stringify(rawRev)}`); }
    if (!revision || /[\s\\]|\.\./.test(revision)) throw badId(id, `bad revision ${JSON.stringify(rawRev)}`);
  }
  let path = null;
  if (rawPath !== undefined) {
    path = rawPath.slice(1);
    const parts = path.split('/');
    if (!path || parts.some((p) => p === '' || p === '.' || p === '..' || /[\\\s?#%]/.test(p))) {
      throw badId(id, `bad file path ${JSON.stringify(path)}`);
    }
    if (!/\.gguf$/i.test(path)) throw badId(id, `the file ${JSON.stringify(path)} is not a .gguf file`);
  }
  if (quant !== undefined && !QUANT.test(quant)) throw badId(id, `bad quantization ${JSON.stringify(quant)}`);
  const q = quant === undefined ? null : quant;
  const at = rawRev === undefined ? '' : `@${rawRev}`;
  const canonical = `${HUB_PREFIX}${owner}/${repo}${at}${path ? '/' + path : q ? ':' + q : ''}`;
  return { owner, repo, revision, path, quant: q, id: canonical };
}

/** The hub's base URL: options.hubUrl, env WASMLM_HUB_URL (Node), else DEFAULT_HUB_URL; no trailing slash. */
export function hubBaseUrl(options = {}) {
  const env = isNode ? process.env.WASMLM_HUB_URL : undefined;
  const base = options.hubUrl || env || DEFAULT_HUB_URL;
  let u;
  try { u = new URL(base); } catch { u = null; }
  if (!u || !/^https?:$/.test(u.protocol)) {
    throw new WasmlmError('BAD_OPTION', `option hubUrl: must be an http(s) URL, got ${JSON.stringify(String(base))}${options.hubUrl ? '' : ' (from WASMLM_HUB_URL)'}`, { option: 'hubUrl' });
  }
  return u.href.replace(/\/+$/, '');
}

/** Env variables read for a token (Node): ours for any hub, the hub's own for huggingface.co only. */
export const TOKEN_ENV = 'WASMLM_HUB_TOKEN';
export const HF_TOKEN_ENV = 'HF_TOKEN';

/**
 * The access token for the hub at `base` (default hubBaseUrl(options)):
 * {origin, token, from, hfTokenUnused}. token: options.hubToken, else (Node)
 * env WASMLM_HUB_TOKEN, else env HF_TOKEN when the hub's origin is
 * https://huggingface.co (HF_TOKEN is that hub's credential: it is not sent
 * to a mirror or a test server set by hubUrl / WASMLM_HUB_URL; then
 * hfTokenUnused is true, for the messages). from: 'hubToken', the env
 * variable's name, or null (no token). An empty env variable counts as
 * unset. A malformed token is BAD_OPTION before any request; no message
 * ever shows it.
 */
export function hubAuth(options = {}, base = hubBaseUrl(options)) {
  const origin = new URL(base).origin;
  if (options.hubToken != null) return { origin, token: checkValue('hubToken', options.hubToken), from: 'hubToken', hfTokenUnused: false };
  const env = isNode ? process.env : {};
  const isHf = origin === new URL(DEFAULT_HUB_URL).origin;
  for (const name of [TOKEN_ENV, ...(isHf ? [HF_TOKEN_ENV] : [])]) {
    const v = env[name];
    if (!v) continue;
    try { checkValue('hubToken', v); } catch (e) {
      e.message = e.message.replace('option hubToken', `env ${name} (a hub access token)`);
      e.env = name;
      throw e;
    }
    return { origin, token: v, from: name, hfTokenUnused: false };
  }
  return { origin, token: null, from: null, hfTokenUnused: !isHf && !!env[HF_TOKEN_ENV] };
}

/** What to do about a refused request, in this runtime's words. */
function tokenAdvice(auth) {
  if (!isNode) return 'pass an access token in the option hubToken';
  const hf = auth.origin === new URL(DEFAULT_HUB_URL).origin;
  return `set an access token: the option hubToken (CLI --hub-token) or env ${hf ? `${HF_TOKEN_ENV} (or ${TOKEN_ENV})` : TOKEN_ENV}` +
    (auth.hfTokenUnused ? `; ${HF_TOKEN_ENV} is set, but it is sent to ${DEFAULT_HUB_URL} only` : '');
}

/**
 * UNAUTHORIZED for HTTP 401 / 403 from the hub: `what` the request was for,
 * whether a token was sent (and from where), what to do. Never the token.
 */
export function unauthorizedError(ref, base, status, auth, what, url) {
  const repoUrl = `${base}/${ref.owner}/${ref.repo}`;
  const licence = `; a gated model also needs its licence accepted on ${safeUrl(repoUrl)}`;
  let why;
  if (!auth.token) {
    why = `no access token was sent, and the repository is gated or private (or does not exist): ${tokenAdvice(auth)}${licence}`;
  } else if (status === 403) {
    why = `the access token (from ${auth.from}) was sent, but it gives no access to this repository: accept the model's licence on ` +
      `${safeUrl(repoUrl)} (gated models) with the token's account, or use a token with read access to it`;
  } else {
    why = `the access token (from ${auth.from}) was sent and refused: check that it is valid and not expired, ` +
      `and that the repository exists${licence}`;
  }
  const where = `${ref.owner}/${ref.repo}${ref.revision === 'main' ? '' : '@' + ref.revision}`;
  return new WasmlmError('UNAUTHORIZED', `${what} on ${safeUrl(base).replace(/\/$/, '')}: HTTP ${status}: ${why}`,
    { repo: where, status, url: safeUrl(url || base), tokenSent: !!auth.token, tokenFrom: auth.from });
}

const enc = (p) => p.split('/').map(encodeURIComponent).join('/');

/** The resolve URL of one file: {hub}/OWNER/REPO/resolve/REVISION/PATH. */
export function hubFileUrl(base, { owner, repo, revision }, path) {
  return `${base}/${owner}/${repo}/resolve/${encodeURIComponent(revision)}/${enc(path)}`;
}

/** The tree listing URL of a repository at a revision (recursive). */
export function hubTreeUrl(base, { owner, repo, revision }) {
  return `${base}/api/models/${owner}/${repo}/tree/${encodeURIComponent(revision)}?recursive=true`;
}

/** A split part's name: PREFIX-00001-of-00003.gguf; returns {prefix, no, count} or null. */
export function splitPart(path) {
  const m = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i.exec(path);
  return m ? { prefix: m[1], no: Number(m[2]), count: Number(m[3]) } : null;
}

/** Whether `quant` names the quantization of file `path` (a whole token of its name, any case). */
export function matchesQuant(path, quant) {
  const name = path.split('/').pop();
  if (/^mmproj/i.test(name)) return false; // vision projectors carry a type in their name too
  const q = quant.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^a-z0-9_])${q}([^a-z0-9_]|$)`, 'i').test(path.replace(/\.gguf$/i, ''));
}

/**
 * Picks the file of a quantization from a listing ([{path, size, sha256}]):
 * the one matching file; among several, the single non-split one, else the
 * first part of the single split set. Throws NOT_FOUND (nothing matches:
 * the GGUF files that exist are listed) or BAD_OPTION (several candidates,
 * listed). With quant null: the repository's only GGUF model.
 */
export function pickFile(files, ref) {
  const where = `${ref.owner}/${ref.repo}${ref.revision === 'main' ? '' : '@' + ref.revision}`;
  const ggufs = files.filter((f) => /\.gguf$/i.test(f.path));
  const models = ggufs.filter((f) => !/^mmproj/i.test(f.path.split('/').pop()));
  const list = (fs) => fs.map((f) => f.path).join(', ');
  const cands = ref.quant ? models.filter((f) => matchesQuant(f.path, ref.quant)) : models;
  if (cands.length === 0) {
    const what = ref.quant ? `no GGUF file of quantization ${ref.quant}` : 'no GGUF file';
    throw new WasmlmError('NOT_FOUND', `${what} in ${where}: it has ${ggufs.length ? list(ggufs) : 'no GGUF files'}`,
      { repo: where, quant: ref.quant, files: ggufs.map((f) => f.path) });
  }
  // each split set counts once, as its first part
  const whole = cands.filter((f) => !splitPart(f.path));
  const sets = new Map();
  for (const f of cands) {
    const s = splitPart(f.path);
    if (s) { const k = `${s.prefix}/${s.count}`; if (!sets.has(k) || s.no < splitPart(sets.get(k).path).no) sets.set(k, f); }
  }
  if (whole.length === 1) return whole[0];
  if (whole.length === 0 && sets.size === 1) return [...sets.values()][0];
  const choices = [...whole, ...sets.values()];
  throw new WasmlmError('BAD_OPTION', `${ref.quant ? `quantization ${ref.quant}` : 'the id'} matches several files in ${where}: ${list(choices)}; ` +
    `name one, e.g. hf:${where}/${choices[0].path}`, { option: 'source', files: choices.map((f) => f.path) });
}

function notFound(ref, base, status, what) {
  const where = `${ref.owner}/${ref.repo}${ref.revision === 'main' ? '' : '@' + ref.revision}`;
  return new WasmlmError('NOT_FOUND', `${what} ${where} not found on ${safeUrl(base).replace(/\/$/, '')} (HTTP ${status})`,
    { repo: where, status, url: safeUrl(base) });
}

/**
 * Lists a repository's files: [{path, size, sha256}] (sha256: the LFS
 * object id, when the hub gives one). Follows Link rel="next" pages (the
 * token goes only to those on the hub's origin).
 */
export async function listHubFiles(ref, options = {}) {
  const base = hubBaseUrl(options);
  const auth = hubAuth(options, base);
  let url = hubTreeUrl(base, ref);
  const files = [];
  for (let page = 0; url; page++) {
    if (page >= MAX_PAGES) throw new WasmlmError('NETWORK', `the listing of ${ref.owner}/${ref.repo} has more than ${MAX_PAGES} pages`, { url: safeUrl(url) });
    let got;
    try {
      got = await fetchChecked(url, { signal: options.signal, timeout: options.timeout || 0, fetch: options.fetch, auth });
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        const where = `${ref.owner}/${ref.repo}${ref.revision === 'main' ? '' : '@' + ref.revision}`;
        throw unauthorizedError(ref, base, e.status, { ...auth, token: auth.token && new URL(url).origin === auth.origin ? auth.token : null },
          `the listing of ${where}`, url);
      }
      if (e.status === 404) throw notFound(ref, base, e.status, 'repository');
      throw e;
    }
    const { response: res, timer } = got;
    const chunks = [];
    let n = 0;
    for await (const c of readBody(res, { url, timeout: options.timeout || 0, signal: options.signal, timer })) {
      n += c.byteLength;
      if (n > MAX_PAGE_BYTES) throw new WasmlmError('NETWORK', `the listing ${safeUrl(url)} is larger than ${MAX_PAGE_BYTES} bytes`, { url: safeUrl(url) });
      chunks.push(c);
    }
    let items;
    try { items = JSON.parse(new TextDecoder().decode(concat(chunks, n))); } catch { items = null; }
    if (!Array.isArray(items)) throw new WasmlmError('NETWORK', `the listing ${safeUrl(url)} is not a JSON array of files`, { url: safeUrl(url) });
    for (const it of items) {
      if (!it || it.type !== 'file' || typeof it.path !== 'string') continue;
      const lfs = it.lfs && typeof it.lfs === 'object' ? it.lfs : null;
      const size = Number.isSafeInteger(lfs?.size) ? lfs.size : Number.isSafeInteger(it.size) ? it.size : null;
      const sha256 = typeof lfs?.oid === 'string' && /^[0-9a-f]{64}$/i.test(lfs.oid) ? lfs.oid.toLowerCase() : null;
      files.push({ path: it.path, size, sha256 });
    }
    url = nextLink(res.headers.get('link'), url);
  }
  return files;
}

function concat(chunks, n) {
  const out = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) { out.set(c, off); off += c.byteLength; }
  return out;
}

/** The rel="next" target of a Link header, resolved against `base`; null when none. */
export function nextLink(header, base) {
  if (!header) return null;
  for (const part of header.split(',')) {
    const m = /<([^>]*)>\s*;(.*)$/.exec(part.trim());
    if (m && /\brel\s*=\s*"?next"?/i.test(m[2])) {
      try { return new URL(m[1], base).href; } catch { return null; }
    }
  }
  return null;
}

/**
 * Resolves a hub id to the file to download: {id, owner, repo, revision,
 * path, url, size, sha256, hubUrl, parts} (size and sha256 null unless the
 * listing was read: ids with a quantization, or without a file). The first
 * part of a split GGUF (NAME-00001-of-0000N.gguf) comes with `parts`, every
 * part's {path, url, size, sha256} in order (a part missing from the listing
 * is BAD_FILE); otherwise parts is null. options.hubToken (else the env, see
 * hubAuth) is sent to the hub's listing.
 * @param {string} id
 * @param {{hubUrl?: string, hubToken?: string, signal?: AbortSignal, timeout?: number, fetch?: Function}} [options]
 */
export async function resolveHubId(id, options = {}) {
  const ref = parseHubId(id);
  const base = hubBaseUrl(options);
  hubAuth(options, base); // a malformed token fails before any request
  let file = { path: ref.path, size: null, sha256: null }, listing = null;
  if (!ref.path) { listing = await listHubFiles(ref, options); file = pickFile(listing, ref); }
  const names = splitPartNames(file.path);
  let parts = null;
  if (names) {
    parts = names.map((p, i) => {
      if (!listing) return { path: p, url: hubFileUrl(base, ref, p), size: null, sha256: null };
      const f = listing.find((x) => x.path === p);
      if (!f) {
        throw new WasmlmError('BAD_FILE', `split GGUF part ${i + 1} of ${names.length} is missing: ${p} is not in ${ref.owner}/${ref.repo}`,
          { part: i + 1, parts: names.length, file: p });
      }
      return { path: p, url: hubFileUrl(base, ref, p), size: f.size, sha256: f.sha256 };
    });
  }
  return { ...ref, path: file.path, url: hubFileUrl(base, ref, file.path), size: file.size, sha256: file.sha256, hubUrl: base, parts };
}

/**
 * A failure fetching a resolve URL in the hub's words: 401 / 403 are
 * UNAUTHORIZED (saying whether `auth` had a token), 404 NOT_FOUND naming
 * the file and the repository; other errors pass.
 */
export function hubFileError(e, hub, auth = { token: null, from: null, origin: null, hfTokenUnused: false }) {
  if (!e || e.code !== 'NETWORK' || ![401, 403, 404].includes(e.status)) return e;
  if (e.status !== 404) {
    const err = unauthorizedError(hub, hub.hubUrl || new URL(hub.url).origin, e.status, auth,
      `${hub.path} in ${hub.owner}/${hub.repo} at revision ${hub.revision}`, hub.url);
    err.cause = e;
    return err;
  }
  return new WasmlmError('NOT_FOUND', `${hub.path} not found in ${hub.owner}/${hub.repo} at revision ${hub.revision} (${e.message})`,
    { url: e.url, status: e.status, cause: e });
}
