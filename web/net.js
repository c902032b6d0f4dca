// Network loading: fetch a model URL and read its body without trusting the
// server. A stalled server fails after `timeout` ms without a byte, a body
// shorter or longer than declared fails naming both numbers, and every
// failure is a WasmlmError('NETWORK') naming the URL and why.
import { WasmlmError } from './errors.js';
import { checkValue } from './options.js';
import { abortError } from './abort.js';
import { isNode } from './env.js';

/** Stall timeout (ms) used for registry downloads when options.timeout is not given. */
export const REGISTRY_TIMEOUT_MS = 30000;

/**
 * Checks a sha256 option: 64 hex digits (any case). Returns it lower-cased;
 * null/undefined pass as null. Throws BAD_OPTION naming `option` otherwise.
 */
export function checkSha256(value, option = 'sha256') {
  if (value == null) return null;
  return checkValue('sha256', value, undefined, option).toLowerCase();
}

/** Checks a timeout option (ms, 0 = none). Returns it, or `fallback` when not given. */
export function checkTimeout(value, fallback = 0, option = 'timeout') {
  if (value == null) return fallback;
  return checkValue('timeout', value, undefined, option);
}

/** The URL for messages: without user name and password (a label that is not a URL stays as it is). */
export function safeUrl(url) {
  if (!/^[a-z][a-z0-9+.-]*:/i.test(String(url))) return String(url);
  try {
    const u = new URL(String(url), globalThis.location?.href);
    u.username = ''; u.password = '';
    return u.href;
  } catch {
    return String(url);
  }
}

/** Why a fetch or a body read failed, in words (undici hides it in `cause`). */
function reason(e) {
  const c = e && e.cause;
  const code = (c && (c.code || c.name)) || (e && e.code);
  const msg = (c && c.message) || (e && e.message) || String(e);
  return code && !msg.includes(code) ? `${msg} (${code})` : msg;
}

function networkError(url, message, props = {}) {
  return new WasmlmError('NETWORK', message, { url: safeUrl(url), ...props });
}

/** A NETWORK error for a response whose status is not 2xx. */
export function httpError(url, res) {
  const text = `${res.status}${res.statusText ? ' ' + res.statusText : ''}`;
  return networkError(url, `cannot fetch ${safeUrl(url)}: HTTP ${text}`, { status: res.status });
}

/**
 * A controller that aborts after `timeout` ms unless kicked; it also follows
 * the caller's `signal`. `ms` 0 = never times out.
 */
class StallTimer {
  constructor(timeout, signal) {
    this.ms = timeout;
    this.ctl = new AbortController();
    this.timer = null;
    this.fired = false;
    this.signal = signal;
    this.onAbort = () => this.ctl.abort(abortError(signal));
    if (signal?.aborted) this.onAbort();
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }
  /** Restarts the countdown; `onStall` runs when it ends. */
  kick(onStall) {
    this.stop();
    if (this.ms > 0) this.timer = setTimeout(() => { this.fired = true; onStall(); }, this.ms);
  }
  stop() { if (this.timer) clearTimeout(this.timer); this.timer = null; }
  done() { this.stop(); this.signal?.removeEventListener('abort', this.onAbort); }
  /** Ends the request (its body too) with `reason`. */
  abort(reason) { this.ctl.abort(reason); }
}

/**
 * fetch(url) whose failures are NETWORK errors naming the URL: connection
 * errors, a non-2xx status, and no response within `timeout` ms. The
 * returned response's body is still to be read with readBody (same timeout).
 * `headers` are sent with the request (Range, If-None-Match, ...); statuses
 * in `allow` (e.g. 304, 416) are returned like 2xx ones, body unread.
 * `auth` ({origin, token}, a hub's access token: web/hub.js hubAuth) adds
 * `Authorization: Bearer TOKEN` while the request is on that origin (see
 * fetchWithToken); it never appears in an error.
 * @param {string} url
 * @param {{signal?: AbortSignal, timeout?: number, fetch?: Function, headers?: object, allow?: number[], method?: string,
 *   auth?: {origin: string, token: string|null}}} [opts]
 * @returns {Promise<{response: Response, timer: StallTimer}>}
 */
export async function fetchChecked(url, { signal, timeout = 0, fetch: doFetch = globalThis.fetch, headers, allow, method, auth } = {}) {
  if (signal?.aborted) throw abortError(signal);
  const timer = new StallTimer(timeout, signal);
  let res;
  try {
    const stalled = new Promise((_, reject) => timer.kick(() => {
      const e = networkError(url, `cannot fetch ${safeUrl(url)}: no response within ${timeout} ms`, { timeout });
      timer.ctl.abort(e);
      reject(e);
    }));
    stalled.catch(() => {});
    const init = { signal: timer.ctl.signal };
    if (headers) init.headers = headers;
    if (method) init.method = method;
    const request = auth && auth.token ? fetchWithToken(doFetch, url, init, auth) : doFetch(url, init);
    res = await Promise.race([request, stalled]);
  } catch (e) {
    timer.done();
    if (signal?.aborted) throw abortError(signal);
    if (e instanceof WasmlmError) throw e;
    throw networkError(url, `cannot fetch ${safeUrl(url)}: ${reason(e)}`, { cause: e });
  }
  timer.stop();
  if (!res.ok && !(allow && allow.includes(res.status))) {
    timer.done();
    res.body?.cancel().catch(() => {});
    throw httpError(url, res);
  }
  return { response: res, timer };
}

/** A 206 response's Content-Range "bytes START-END/TOTAL" as {start, end, total} (total 0: "*"), or null. */
export function parseContentRange(res) {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec((res.headers.get('content-range') || '').trim());
  if (!m) return null;
  const [start, end, total] = [Number(m[1]), Number(m[2]), m[3] === '*' ? 0 : Number(m[3])];
  return Number.isSafeInteger(start) && Number.isSafeInteger(end) && end >= start && Number.isSafeInteger(total) ? { start, end, total } : null;
}

/** Most redirects followed by fetchWithToken (as fetch itself). */
const MAX_REDIRECTS = 20;
const REDIRECTS = [301, 302, 303, 307, 308];

function originOf(url) {
  try { return new URL(url).origin; } catch { return null; }
}

/**
 * fetch(url, init) with `Authorization: Bearer auth.token` sent only while
 * the request is on `auth.origin` (the hub's). A URL of another origin gets
 * no token at all. Node: the redirects are followed here (redirect:
 * 'manual', whose Location Node lets us read): the token goes along
 * same-origin hops, is dropped at the first hop to another origin (the CDN a
 * resolve URL redirects to) and is not sent again, even when a later hop
 * comes back; fetch follows the rest. This does not depend on what the fetch
 * in use does with Authorization on a cross-origin redirect (Node 20's
 * undici drops it, other fetch implementations need not). Browsers cannot
 * read a manual redirect (it is opaque): there the browser follows and
 * drops the header on a cross-origin hop itself, as the Fetch standard
 * says (tests/browser/hub.test.mjs watches a CDN on another origin).
 */
export async function fetchWithToken(doFetch, url, init, auth) {
  const home = originOf(auth.origin);
  if (!home || originOf(url) !== home) return doFetch(url, init);
  const headers = { ...(init.headers || {}), Authorization: `Bearer ${auth.token}` };
  if (!isNode) return doFetch(url, { ...init, headers });
  let cur = url;
  for (let hops = 0; ; hops++) {
    const res = await doFetch(cur, { ...init, headers, redirect: 'manual' });
    const loc = REDIRECTS.includes(res.status) ? res.headers.get('location') : null;
    if (!loc) return res;
    res.body?.cancel().catch(() => {});
    if (hops >= MAX_REDIRECTS) throw new TypeError(`more than ${MAX_REDIRECTS} redirects`);
    let next;
    try { next = new URL(loc, cur).href; } catch { throw new TypeError('a redirect to an invalid URL'); }
    if (originOf(next) !== home) return doFetch(next, init); // off the hub: no token from here on
    cur = next;
  }
}

/** The body length a response declares (0 = unknown): Content-Length of an unencoded body. */
export function declaredLength(res) {
  const enc = res.headers.get('content-encoding');
  if (enc && enc !== 'identity') return 0;
  const n = Number(res.headers.get('content-length'));
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/**
 * Reads a response body chunk by chunk (an async iterator of Uint8Array).
 * Fails with NETWORK naming `url` when no byte arrives for `timeout` ms,
 * when the connection breaks, or when the body is longer or shorter than
 * `expected` (0 = unknown); an aborted `signal` rejects with its reason.
 * @param {Response} res
 * @param {{url: string, expected?: number, timeout?: number, signal?: AbortSignal, timer?: StallTimer}} opts
 */
export async function* readBody(res, { url, expected = 0, timeout = 0, signal, timer }) {
  const own = !timer;
  if (own) timer = new StallTimer(timeout, signal);
  const reader = res.body.getReader();
  const of = expected ? ` of ${expected}` : '';
  let received = 0, finished = false;
  try {
    for (;;) {
      const { done, value } = await readWithin(reader, timer, () =>
        networkError(url, `download of ${safeUrl(url)} stalled: no data for ${timer.ms} ms (received ${received}${of} bytes)`,
          { received, expected, timeout: timer.ms }));
      if (done) break;
      const u8 = value instanceof Uint8Array ? value : new Uint8Array(value);
      received += u8.byteLength;
      if (expected && received > expected) {
        throw networkError(url, `download of ${safeUrl(url)} is longer than declared: received ${received} bytes, expected ${expected}`,
          { received, expected });
      }
      yield u8;
    }
    finished = true;
  } catch (e) {
    if (signal?.aborted) throw abortError(signal);
    if (e instanceof WasmlmError || e?.name === 'AbortError') throw e;
    throw networkError(url, `download of ${safeUrl(url)} failed: received ${received}${of} bytes, then ${reason(e)}`,
      { received, expected, cause: e });
  } finally {
    timer.done();
    if (!finished) reader.cancel().catch(() => {});
  }
  if (expected && received !== expected) {
    throw networkError(url, `download of ${safeUrl(url)} was cut short: received ${received} of ${expected} bytes`,
      { received, expected });
  }
}

/** reader.read() that rejects with makeError() after the timer's ms without data, or with the abort reason. */
function readWithin(reader, timer, makeError) {
  return new Promise((resolve, reject) => {
    const ctl = timer.ctl.signal;
    const onAbort = () => reject(ctl.reason);
    if (ctl.aborted) { onAbort(); return; }
    ctl.addEventListener('abort', onAbort, { once: true });
    timer.kick(() => timer.ctl.abort(makeError()));
    reader.read().then(resolve, reject).finally(() => { timer.stop(); ctl.removeEventListener('abort', onAbort); });
  });
}
