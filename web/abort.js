// AbortSignal helpers shared by web/index.js and web/scaling.js.

/** The error an aborted call rejects with: the signal's reason when it is an
 * Error, else an AbortError. */
export function abortError(signal) {
  const r = signal && signal.reason;
  if (r instanceof Error) return r;
  const e = new Error(typeof r === 'string' ? r : 'The operation was aborted');
  e.name = 'AbortError';
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
