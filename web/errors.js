// One error type for every failure the package reports. `code` is stable
// (tests and apps branch on it); the message says what happened in words.
//
// Codes used across the package (index.d.ts documents them):
//   BAD_OPTION      an option, argument or callback is of the wrong type, out of range or unknown
//   DISPOSED        the model was disposed (in flight and queued requests reject with it)
//   ABORTED         an AbortSignal fired (the error's name is 'AbortError')
//   TEMPLATE_LIMIT  a chat template went past its time, step or output budget
//   TEMPLATE_ERROR  a chat template does not parse or failed to render
//   NO_CHAT_TEMPLATE the model has no chat template and none was given
//   NETWORK         a download failed: connection, HTTP status, stall, truncated body
//   NOT_FOUND       a hub id names a repository, revision, file or quantization that does not exist
//   UNAUTHORIZED    the hub refused a hub id's listing or file (HTTP 401 / 403): a gated or private
//                   repository; `tokenSent` says whether an access token went (hubToken, HF_TOKEN),
//                   the message what to do (never the token)
//   INTEGRITY       downloaded or cached bytes do not match their digest
//   BAD_FILE        a model path is not a readable regular file, or not a GGUF file
//   WORKER          the model's worker died
//   UNSUPPORTED     this runtime or build lacks what was asked for (relaxed SIMD, an architecture, ...)
//   TOO_LARGE       a model file larger than any engine build this runtime runs can hold (over the 4 GiB
//                   of wasm32 without memory64, over 16 GiB with it); `size` and `limit` in bytes
//   VOCAB_MISMATCH  a draft model whose vocabulary differs from the target's
//   CALLBACK        a caller's callback of a tree search (score, isFinal, onNode) threw or rejected: `cause` is its
//                   error, `callback` its name, `node` the node (other methods' callbacks reject with their own error)
//   BAD_SCHEMA      a JSON Schema that cannot be turned into a grammar: an unsupported keyword,
//                   format or pattern construct, or no value can satisfy it; `keyword` names the
//                   keyword and `path` its JSON Pointer in the schema (docs/json-schema.md)
//   BAD_SAVED_STATE bytes given to loadState that are cut short, corrupt, of another state version or
//                   another model, or do not fit the context (too short, another KV type); the status
//                   field holds the engine's wlm_status
//   INTERNAL        an unexpected failure inside wasmlm (a bug: please report it)
// Engine failures (the C library's wlm_status) map to these codes, with the
// status number in `status` and the C name in `statusName`:
//   BAD_ARGUMENT    WLM_ERR_ARG: an argument the engine refused (token id, prompt, ...)
//   BAD_FORMAT      WLM_ERR_FORMAT: a model file that is not valid GGUF / not a usable model
//   TRUNCATED       WLM_ERR_TRUNCATED: a model file cut short
//   UNSUPPORTED     WLM_ERR_UNSUPPORTED: an architecture, type or feature this build lacks
//   NOMEM           WLM_ERR_NOMEM: over the memory limit
//   CONTEXT_FULL    WLM_ERR_CONTEXT_FULL: the context has no room
//   BAD_STATE       WLM_ERR_STATE: a call out of order (generation finished, no model, ...)

export class WasmlmError extends Error {
  /**
   * @param {string} code stable code (see above)
   * @param {string} message
   * @param {object} [props] extra fields (option, value, url, status, ...)
   */
  constructor(code, message, props) {
    super(message, props && props.cause !== undefined ? { cause: props.cause } : undefined);
    this.name = 'WasmlmError';
    this.code = code;
    if (props) for (const [k, v] of Object.entries(props)) if (k !== 'cause') this[k] = v;
  }
}

/** Codes of the C engine's statuses, by wlm_status number. */
export const STATUS_CODES = Object.freeze(['OK', 'BAD_ARGUMENT', 'BAD_FORMAT', 'TRUNCATED', 'UNSUPPORTED', 'NOMEM', 'CONTEXT_FULL', 'BAD_STATE']);
const STATUS_C_NAMES = ['WLM_OK', 'WLM_ERR_ARG', 'WLM_ERR_FORMAT', 'WLM_ERR_TRUNCATED', 'WLM_ERR_UNSUPPORTED', 'WLM_ERR_NOMEM', 'WLM_ERR_CONTEXT_FULL', 'WLM_ERR_STATE'];

/** An engine failure: a WasmlmError whose code comes from the C status. */
export class EngineError extends WasmlmError {
  constructor(message, status = 1) {
    super(STATUS_CODES[status] || 'ENGINE', message, { status, statusName: STATUS_C_NAMES[status] || `WLM_STATUS_${status}` });
  }
}

/** A BAD_OPTION error naming the option, the value it got and what is allowed. */
export function badOption(option, value, allowed) {
  return new WasmlmError('BAD_OPTION', `option ${option}: ${allowed}, got ${describe(value)}`, { option });
}

/** A short, safe rendering of any value for an error message. */
export function describe(v) {
  try {
    if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v);
    if (typeof v === 'bigint') return v + 'n';
    if (typeof v === 'function') return 'a function';
    if (typeof v === 'symbol') return 'a symbol';
    if (v === null || typeof v !== 'object') return String(v);
    if (Array.isArray(v)) return `an array of ${v.length}`;
    const name = v.constructor && v.constructor.name;
    return name && name !== 'Object' ? `a ${name}` : 'an object';
  } catch {
    return 'a value';
  }
}
