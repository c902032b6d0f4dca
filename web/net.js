// Network loading: fetch a model URL and read its body without trusting the
// server. A stalled server fails after `timeout` ms without a byte, a body
// shorter or longer than declared fails naming both numbers, and every
// failure is a WasmlmError('NETWORK') naming the URL and why.
import { WasmlmError } from './errors.js';
import { checkValue } from './options.js';
import { abortError } from './abort.js';

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
 * @param {string} url
 * @param {{signal?: AbortSignal, timeout?: number, fetch?: Function, headers?: object, allow?: number[], method?: string}} [opts]
 * @returns {Promise<{response: Response, timer: StallTimer}>}
 */
export async function fetchChecked(url, { signal, timeout = 0, fetch: doFetch = globalThis.fetch, headers, allow, method } = {}) {
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
    res = await Promise.race([doFetch(url, init), stalled]);
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
