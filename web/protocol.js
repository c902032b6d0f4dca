// The closed protocol between a model's caller (web/index.js, web/scaling.js)
// and its worker (web/worker/worker.js), and the constants both sides share.
// Caller-safe: no worker-side imports.
//
// Every request is {id, op, ...fields}; the reply is {id, ok: true, result}
// or {id, ok: false, error: {name, message, code, ...}}; some ops send events
// {id, event, ...} before it. OPS lists each op's fields (a trailing '?' marks
// an optional one), its result and its events; checkRequest refuses an op
// not listed and fields that do not match, on both sides of the channel.
// Two control messages carry no id and get no reply: {op: 'init', wasm,
// threads, abortFlag} starts the engine and {op: 'abort', target} stops
// request `target` (queued or running).

/** GGML type ids accepted by quantize (names as `model.quantize(type)` takes them). */
export const QUANT_TYPES = Object.freeze({
  f32: 0, f16: 1, q4_0: 2, q8_0: 8, q4_1: 3, q5_0: 6, q5_1: 7,
  q2_k: 10, q3_k: 11, q4_k: 12, q5_k: 13, q6_k: 14, q4_k_m: 1000, q5_k_m: 1001,
});

/** Model[CHANNEL] is the model's request channel ({request, call, abort}) for the caller-side strategies (web/scaling.js). */
export const CHANNEL = Symbol('wasmlm.channel');

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v);
const isIds = (v) => Array.isArray(v) && v.every((t) => typeof t === 'number' && Number.isInteger(t));

/** Field types: each returns true when a value fits. */
const TYPES = {
  string: (v) => typeof v === 'string',
  boolean: (v) => typeof v === 'boolean',
  int: (v) => typeof v === 'number' && Number.isSafeInteger(v),
  count: (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0,
  object: isPlainObject,
  bytes: (v) => v instanceof Uint8Array,
  ids: isIds,
  prompt: (v) => typeof v === 'string' || isIds(v),
  texts: (v) => Array.isArray(v) && v.every((t) => typeof t === 'string' || isIds(t)),
  messages: (v) => Array.isArray(v),
  lookup: (v) => v === 'lookup',
  // tree search: the nodes one call grows, each {node, n?} (children) or {node, rollout: true} (a rollout's next step)
  growth: (v) => Array.isArray(v) && v.every((g) => isPlainObject(g) && Number.isSafeInteger(g.node) && g.node >= 0 &&
    (g.n === undefined || (Number.isSafeInteger(g.n) && g.n >= 1)) && (g.rollout === undefined || typeof g.rollout === 'boolean') &&
    Object.keys(g).every((k) => k === 'node' || k === 'n' || k === 'rollout')),
  // a draft's distributions: per draft token {ids: Int32Array, probs: Float32Array}, or null (one-hot)
  qs: (v) => v === null || (Array.isArray(v) && v.every((q) => q === null || (isPlainObject(q) && q.ids instanceof Int32Array && q.probs instanceof Float32Array))),
};

const op = (request, result, events = null) => Object.freeze({ request: Object.freeze(request), result, events });

/** Every op: its request fields, what its result is, and the events it may send. */
export const OPS = Object.freeze({
  loadFile: op({ path: 'string', options: 'object?', progress: 'boolean?', vocabOnly: 'boolean?' },
    'model info (Node: the worker reads the file; vocabOnly: its header and metadata only)', 'progress {loaded, total}'),
  loadBegin: op({ size: 'count?', vocabOnly: 'boolean?', name: 'string?' },
    'null (size may be 0: unknown; a declared size is not trusted; vocabOnly: a tokenizer, loadEnd loads the metadata only; name: what errors call the bytes)'),
  loadChunk: op({ bytes: 'bytes' }, 'null (the bytes follow the previous chunks); vocabOnly: {done, need}, done once the metadata is in'),
  loadPart: op({ size: 'count?' }, 'null (the next part of a split GGUF starts; size as in loadBegin)'),
  loadEnd: op({ options: 'object?' }, 'model info (parses the bytes, creates the context)'),
  loadCancel: op({}, 'null'),
  generate: op({ prompt: 'prompt', options: 'object?', stream: 'boolean?', draft: 'lookup?' }, 'CompletionResult', 'chunk {text, token, logprob[, topLogprobs]}'),
  bestOfN: op({ prompt: 'prompt', options: 'object?', stream: 'boolean?' }, '{candidates, stats}', 'chunk {index, text, token, logprob[, topLogprobs]}'),
  beamSearch: op({ prompt: 'prompt', options: 'object?' }, '{beams, stats}'),
  specStart: op({ session: 'int', prompt: 'prompt', options: 'object?' }, '{committed: token ids}'),
  specRound: op({ session: 'int', drafts: 'ids', qs: 'qs?', plain: 'count?' }, 'a round {chunks, accepted, done, ...}', 'chunk {text, token, logprob[, topLogprobs]} (plain rounds)'),
  specEnd: op({ session: 'int' }, 'null'),
  draftStart: op({ session: 'int', options: 'object?' }, 'null'),
  draftPropose: op({ session: 'int', ids: 'ids', k: 'count' }, '{tokens, qs, caughtUp, stepMs}'),
  draftEnd: op({ session: 'int' }, 'null'),
  treeStart: op({ session: 'int', prompt: 'prompt', options: 'object?' }, '{root, plan, contextGrown} (web/worker/tree.js)'),
  treeGrow: op({ session: 'int', grow: 'growth', free: 'ids?' }, '{nodes, usedSlots, liveSequences, stats}: the grown or stepped nodes'),
  treeEnd: op({ session: 'int' }, '{stats} or null (the session had ended)'),
  vocab: op({}, '{nVocab, hash}'),
  vocabBytes: op({}, '{bytes: Uint8Array, offsets: Uint32Array}: token i is bytes[offsets[i] .. offsets[i + 1]) (logprobs of web/openai.js)'),
  renderChat: op({ template: 'string', messages: 'messages', options: 'object?' }, '{prompt} or {error}'),
  tokenize: op({ text: 'string', addBos: 'boolean?', parseSpecial: 'boolean?' }, 'token ids'),
  detokenize: op({ ids: 'ids' }, 'string'),
  info: op({}, 'model info'),
  memory: op({}, '{wasmBytes, engineBytes, fileBytes}'),
  saveState: op({}, '{bytes: Uint8Array} (sequence 0: tokens, cache rows in use, the resume point)'),
  loadState: op({ bytes: 'bytes' }, '{tokens, positions, resumable} (refused: BAD_SAVED_STATE)'),
  distribution: op({ text: 'prompt', options: 'object?' }, '[{token, prob, text}]'),
  logits: op({ ids: 'ids', all: 'boolean?' }, '{rows: Float32Array[]}'),
  embed: op({ texts: 'texts', options: 'object?' }, '{vectors: Float32Array[] (one per text), tokens: token count per text}'),
  quantize: op({ type: 'string', outPath: 'string?' }, '{report, size, bytes?}'),
  dispose: op({}, 'null'),
});

/** Why request `m` does not fit the protocol, or null when it does. Fields set to undefined count as absent. */
export function checkRequest(m) {
  if (!isPlainObject(m)) return 'a request must be an object';
  if (typeof m.op !== 'string' || !Object.hasOwn(OPS, m.op)) return `unknown op ${typeof m.op === 'string' ? m.op.slice(0, 40) : typeof m.op}`;
  if (!TYPES.int(m.id)) return `${m.op}: id must be an integer`;
  const fields = OPS[m.op].request;
  for (const [name, spec] of Object.entries(fields)) {
    const optional = spec.endsWith('?');
    const v = m[name];
    if (v === undefined) { if (optional) continue; return `${m.op}: field ${name} is missing`; }
    if (!TYPES[optional ? spec.slice(0, -1) : spec](v)) return `${m.op}: field ${name} must be ${optional ? spec.slice(0, -1) : spec}`;
  }
  for (const name of Object.keys(m)) {
    if (name !== 'id' && name !== 'op' && !Object.hasOwn(fields, name)) return `${m.op}: unknown field ${name}`;
  }
  return null;
}

/** A generate chunk as the caller sees it (from a 'chunk' event or a round's chunks): {text, token, logprob[, topLogprobs]}. */
export function chunkOf(c) {
  return c.topLogprobs ? { text: c.text, token: c.token, logprob: c.logprob, topLogprobs: c.topLogprobs } : { text: c.text, token: c.token, logprob: c.logprob };
}
