// AbortSignal helpers shared by web/index.js and web/scaling.js.

/** The error an aborted call rejects with: the signal's reason when it is an
 * Error, else an AbortError. */
export function abortError(signal) {
  const r = signal && signal.reason;
  if (r instanceof Error) return r;
  const e = new Error(typeof r === 'string' ? r : 'The operation was aborted');
  e.name = 'AbortError';
  e.code = 'ABORTED';
  return e;
}

/** Sends worker request `op` through `client`, aborting it when `signal` fires. */
export async function withSignal(client, op, payload, signal, onEvent) {
  if (signal && signal.aborted) throw abortError(signal);
  const { id, promise } = client.request(op, payload, { onEvent });
  if (!signal) return promise;
  const onAbort = () => client.abort(id);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await promise;
  } catch (e) {
    if (signal.aborted) throw abortError(signal);
    throw e;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Sends streaming worker request `op` through `client` as an async
 * iterator: yields the request's events as they come and returns its
 * result. `signal` firing, or the caller leaving the loop early, aborts the
 * request in the worker.
 */
export async function* streamRequest(client, op, payload, signal) {
  if (signal && signal.aborted) throw abortError(signal);
  const queue = [];
  let waiter = null, settled = false, final, failure = null, aborted = false;
  const wake = () => { if (waiter) { const w = waiter; waiter = null; w(); } };
  const { id, promise } = client.request(op, payload, { onEvent: (ev) => { queue.push(ev); wake(); } });
  promise.then((r) => { settled = true; final = r; wake(); }, (e) => { settled = true; failure = e; wake(); });
  const onAbort = () => { aborted = true; client.abort(id); wake(); };
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      if (aborted) throw abortError(signal);
      if (queue.length) { yield queue.shift(); continue; }
      if (failure) throw failure;
      if (settled) return final;
      await new Promise((r) => { waiter = r; });
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (!settled && !aborted) client.abort(id);   // the caller stopped reading
    promise.catch(() => {});
  }
}
