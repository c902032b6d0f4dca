// Every option of the public API, defined once: its kind, default, range and
// a one-line doc. `checkOptions(method, options)` validates a call's options
// on the caller's thread before anything reaches a worker: an unknown key is
// an error naming the closest known key, a value of the wrong type or out of
// range is an error naming the option, the value and what is allowed. Nothing
// is coerced or clamped silently. index.d.ts, the CLI flags and the README's
// option table describe these entries (tests/js/options.test.mjs checks them).
import { WasmlmError, badOption, describe } from './errors.js';

const I32_MAX = 2 ** 31 - 1;
const GRAMMAR_MAX = 4 * 1024 * 1024;   // WLM_G_MAX_TEXT bytes (src/grammar.h); longer UTF-8 is refused by the engine
const U64_MAX = 2n ** 64n - 1n;

/** Marks wasmlm Model objects (the `draft` option) without importing index.js. */
export const MODEL_BRAND = Symbol.for('wasmlm.Model');

// ---- kinds: each checks a value and says what is allowed --------------------

const isPlainObject = (v) => v !== null && typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);
const isSignal = (v) => v !== null && typeof v === 'object' && typeof v.aborted === 'boolean' &&
  typeof v.addEventListener === 'function' && typeof v.removeEventListener === 'function';

function rangeText(s) {
  const lo = s.min === undefined ? null : `${s.min}`;
  const hi = s.max === undefined ? null : `${s.max}`;
  if (s.kind === 'number' && s.minExclusive) return hi ? `a number > ${lo} and <= ${hi}` : `a finite number > ${lo}`;
  const what = s.kind === 'int' ? 'an integer' : 'a number';
  if (lo !== null && hi !== null) return `${what} in [${lo}, ${hi}]`;
  if (lo !== null) return `${what} >= ${lo}`;
  return `a finite ${what.replace(/^an? /, '')}`;
}

const KINDS = {
  int: (v, s) => (typeof v === 'number' && Number.isInteger(v) && (s.min === undefined || v >= s.min) && (s.max === undefined || v <= s.max)) || rangeText(s),
  number: (v, s) => (typeof v === 'number' && Number.isFinite(v) && (s.min === undefined || (s.minExclusive ? v > s.min : v >= s.min)) &&
    (s.max === undefined || v <= s.max)) || rangeText(s),
  boolean: (v) => typeof v === 'boolean' || 'true or false',
  string: (v) => (typeof v === 'string' && v !== '') || 'a non-empty string',
  grammar: (v) => (typeof v === 'string' && v !== '' && v.length <= GRAMMAR_MAX) || `a non-empty string of GBNF (at most ${GRAMMAR_MAX} characters)`,
  enum: (v, s) => s.values.includes(v) || `one of ${s.values.map((x) => `'${x}'`).join(', ')}`,
  function: (v) => typeof v === 'function' || 'a function',
  signal: (v) => isSignal(v) || 'an AbortSignal',
  object: (v) => (isPlainObject(v) && cloneable(v)) || 'a plain object of cloneable values (no functions, symbols or class instances)',
  seed: (v) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) || (typeof v === 'bigint' && v >= 0n && v <= U64_MAX) ||
    'an integer in [0, 2^53) or a bigint in [0, 2^64)',
  stop: (v) => (typeof v === 'string' && v !== '') ||
    (Array.isArray(v) && v.length <= 64 && v.every((x) => typeof x === 'string' && x !== '')) || 'a non-empty string or an array of at most 64 of them',
  sha256: (v) => (typeof v === 'string' && /^[0-9a-fA-F]{64}$/.test(v)) || '64 hex digits (a sha256 digest)',
  scorer: (v) => v === 'mean-logprob' || v === 'total-logprob' || typeof v === 'function' || "'mean-logprob', 'total-logprob' or a function",
  draft: (v) => v === 'lookup' || !!(v && v[MODEL_BRAND]) || "a Model (a draft model) or 'lookup'",
  feedback: (v) => typeof v === 'boolean' || typeof v === 'function' || 'true, false or a function',
  wasm: (v) => (typeof WebAssembly !== 'undefined' && v instanceof WebAssembly.Module) || v instanceof ArrayBuffer || ArrayBuffer.isView(v) ||
    (typeof v === 'string' && v !== '') || v instanceof URL || 'a WebAssembly.Module, its bytes, or a path or URL',
};

function cloneable(v) {
  if (typeof structuredClone !== 'function') return true;
  try { structuredClone(v); return true; } catch { return false; }
}

// ---- the options ---------------------------------------------------------------

const opt = (kind, doc, extra = {}) => ({ kind, doc, ...extra });

/** Every option, by name. `side: 'caller'` ones never travel to a worker. */
export const OPTIONS = Object.freeze({
  // loading (loadModel)
  threads: opt('int', 'compute threads (default: available cores, at most 8); more than 1 needs shared memory', { min: 1, max: 64 }),
  simd: opt('enum', "engine build: 'auto' (relaxed SIMD when a known-answer probe passes), 'simd128' or 'relaxed'", { values: ['auto', 'simd128', 'relaxed'], default: 'auto' }),
  contextLength: opt('int', 'KV cache length in tokens; 0 = min(model context, 2048)', { min: 0, max: 2 ** 24, default: 0 }),
  batchSize: opt('int', 'most tokens per forward call (prefill chunk); 0 = 64', { min: 0, max: 65536, default: 0 }),
  kvType: opt('enum', 'KV cache element type', { values: ['f32', 'f16'], default: 'f32' }),
  onFull: opt('enum', "when the context is full: 'error' (finishReason 'context') or 'slide' (drop the oldest after nKeep)", { values: ['error', 'slide'], default: 'error' }),
  nKeep: opt('int', "with onFull 'slide': first positions never dropped", { min: 0, max: 2 ** 24, default: 0 }),
  maxSequences: opt('int', 'sequences the cache is planned for up front', { min: 1, max: 64, default: 1 }),
  memoryLimit: opt('int', 'limit of the engine memory in bytes (default: the wasm32 maximum, 4 GiB)', { min: 65536, max: 2 ** 32 }),
  onProgress: opt('function', "called with {loaded, total, rate} while the model downloads (phase 'download', Node cache) and loads; rate in bytes/s", { side: 'caller' }),
  modelDir: opt('string', 'directory (browsers: URL prefix) holding NAME.gguf for registry names'),
  cacheDir: opt('string', 'Node download cache directory (default env WASMLM_CACHE or ~/.cache/wasmlm)'),
  registry: opt('object', 'extra registry entries, merged over models/registry.json'),
  sha256: opt('sha256', 'expected sha256 of the model bytes, checked while streaming'),
  offline: opt('boolean', 'fail instead of downloading a registry model that is not local', { default: false }),
  cache: opt('boolean', 'keep downloaded models: browsers, URLs and hub ids in Cache Storage; Node, hub ids in cacheDir', { default: true }),
  hubUrl: opt('string', "base URL of the model hub for hf: ids (default env WASMLM_HUB_URL, else 'https://huggingface.co')"),
  wasm: opt('wasm', 'the engine build: a compiled module, its bytes, or a path/URL', { side: 'caller' }),
  timeout: opt('int', 'network loading: fail when no byte arrives for this many ms (0 = never; default none for URLs, 30 s for registry names and hub ids)', { min: 0, max: I32_MAX }),
  signal: opt('signal', 'AbortSignal that cancels the call', { side: 'caller' }),

  // sampling (generate, complete, chat, bestOfN, ...)
  maxTokens: opt('int', 'most tokens to generate', { min: 0, max: I32_MAX, default: 256 }),
  temperature: opt('number', '0 = greedy (argmax after the penalties)', { min: 0, default: 0.8 }),
  topK: opt('int', 'keep the k most likely tokens; 0 = off', { min: 0, max: I32_MAX, default: 40 }),
  topP: opt('number', 'keep the smallest set of tokens whose probability reaches p; 1 = off, 0 = the most likely token only', { min: 0, max: 1, default: 0.95 }),
  minP: opt('number', 'drop tokens below minP x the best probability; 0 = off', { min: 0, max: 1, default: 0.05 }),
  repeatPenalty: opt('number', 'divide the logits of recent tokens by this (1 = off)', { min: 0, minExclusive: true, default: 1.1 }),
  repeatLastN: opt('int', 'how many recent tokens the repeat penalty looks at', { min: 0, max: I32_MAX, default: 64 }),
  seed: opt('seed', 'PRNG seed (PCG32): the same seed gives the same tokens everywhere', { default: 0xC0FFEE }),

  // generation
  grammar: opt('grammar', 'GBNF grammar (start rule root): only text it allows is generated. Sampling order: the grammar\'s allowed tokens first, ' +
    'then repetition penalty, temperature, top-k, top-p, min-p, draw (the distribution is renormalised over the allowed tokens). ' +
    "The generation ends with finishReason 'stop' once the text is complete and nothing may follow, 'grammar' at a dead end (docs/grammar.md)"),
  stop: opt('stop', 'stop strings: generation ends before the first occurrence'),
  ignoreEos: opt('boolean', 'keep generating after an end-of-generation token', { default: false }),
  addBos: opt('boolean', "prepend BOS (default: the model's add_bos flag)"),
  parseSpecial: opt('boolean', 'control-token text in the prompt becomes the token id', { default: false }),
  reusePrefix: opt('boolean', 'reuse the cache of a prompt prefix shared with the previous call', { default: true }),
  draft: opt('draft', "speculative decoding: a draft Model with the same vocabulary, or 'lookup' (prompt lookup)", { side: 'caller' }),
  draftTokens: opt('int', 'most draft tokens per target pass (default 4; 8 for lookup)', { min: 1, max: 32 }),
  adaptive: opt('boolean', 'choose the draft length each round', { default: true }),
  onToken: opt('function', 'complete(): called with each chunk as it is generated', { side: 'caller' }),

  // chat templates
  template: opt('string', "a Jinja chat template used instead of the model's own"),
  addGenerationPrompt: opt('boolean', 'append the assistant turn header', { default: true }),
  variables: opt('object', 'extra template variables (tools, date_string, ...)'),
  templateLimits: opt('object', 'bounds of one template render: {timeMs, steps, outputChars, items, depth, templateChars} (web/chat.js)'),

  // best-of-N and friends
  n: opt('int', 'candidates decoded as one batch', { min: 1, max: 64, default: 4 }),
  scorer: opt('scorer', "'mean-logprob' (default), 'total-logprob' or a function (a verifier)", { side: 'caller' }),
  onCandidate: opt('function', 'called with each candidate\'s progress', { side: 'caller' }),
  extract: opt('function', 'selfConsistency: pulls the answer out of a candidate\'s text', { side: 'caller', required: true }),
  verify: opt('function', 'generateUntil: judges a result (true / false / {ok, message})', { side: 'caller', required: true }),
  maxAttempts: opt('int', 'generateUntil: most attempts', { min: 1, max: 1000, default: 4 }),
  feedback: opt('feedback', "generateUntil: feed the verifier's message back into the prompt", { side: 'caller' }),

  // beam search
  beams: opt('int', 'beams kept per step', { min: 1, max: 32, default: 4 }),
  lengthPenalty: opt('number', 'score = logprob / length^lengthPenalty', { default: 1 }),

  // analysis
  topN: opt('int', 'nextTokenDistribution: entries returned (at most the vocabulary)', { min: 1, max: I32_MAX, default: 20 }),
  all: opt('boolean', 'logits(): one row per token instead of the last', { default: false }),
  outPath: opt('string', 'quantize(): write the GGUF file here (Node)'),
});

const SAMPLING = ['maxTokens', 'temperature', 'topK', 'topP', 'minP', 'repeatPenalty', 'repeatLastN', 'seed'];
const GENERATE = [...SAMPLING, 'grammar', 'stop', 'ignoreEos', 'addBos', 'parseSpecial', 'reusePrefix', 'draft', 'draftTokens', 'adaptive', 'signal'];
const CHAT_TEMPLATE = ['template', 'addGenerationPrompt', 'variables', 'templateLimits'];
const BATCH = [...GENERATE.filter((k) => !['draft', 'draftTokens', 'adaptive'].includes(k)), 'n', 'scorer', 'onCandidate'];

/** The options each public method accepts. */
export const METHODS = Object.freeze({
  loadModel: ['threads', 'simd', 'contextLength', 'batchSize', 'kvType', 'onFull', 'nKeep', 'maxSequences', 'memoryLimit',
    'onProgress', 'modelDir', 'cacheDir', 'registry', 'sha256', 'offline', 'cache', 'hubUrl', 'wasm', 'timeout', 'signal'],
  generate: GENERATE,
  complete: [...GENERATE, 'onToken'],
  applyChatTemplate: CHAT_TEMPLATE,
  chat: [...GENERATE, ...CHAT_TEMPLATE],
  chatComplete: [...GENERATE, 'onToken', ...CHAT_TEMPLATE],
  bestOfN: BATCH,
  selfConsistency: [...BATCH.filter((k) => k !== 'scorer'), 'extract'],
  generateUntil: [...GENERATE, 'verify', 'maxAttempts', 'feedback'],
  beamSearch: ['beams', 'maxTokens', 'lengthPenalty', 'grammar', 'ignoreEos', 'addBos', 'parseSpecial', 'signal'],
  nextTokenDistribution: [...SAMPLING.filter((k) => k !== 'maxTokens' && k !== 'seed'), 'topN', 'addBos', 'parseSpecial'],
  tokenize: ['addBos', 'parseSpecial'],
  logits: ['all'],
  quantize: ['outPath'],
});

/** Per-method overrides of an option's range (beam search needs a token to rank). */
const OVERRIDES = { beamSearch: { maxTokens: { min: 1 } } };

/** The sampling defaults, from the entries above. */
export const DEFAULT_SAMPLING = Object.freeze(Object.fromEntries(SAMPLING.map((k) => [k, OPTIONS[k].default])));

// ---- checking -------------------------------------------------------------------

/** Edit distance, for "did you mean". */
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length][b.length];
}

/** The known key closest to `key` (max_tokens -> maxTokens, temprature -> temperature), or null. */
export function closestKey(key, known) {
  const norm = (s) => s.toLowerCase().replace(/[_\-\s]/g, '');
  const k = norm(key);
  const same = known.find((x) => norm(x) === k);
  if (same) return same;
  let best = null, bestD = Infinity;
  for (const x of known) {
    const dist = distance(k, norm(x));
    if (dist < bestD) { best = x; bestD = dist; }
  }
  return bestD <= Math.max(1, Math.floor(k.length / 3)) ? best : null;
}

/** A reusable check of one value against an option's entry (`label` names it in the error); throws BAD_OPTION. */
export function checkValue(name, value, method, label = name) {
  const s = { ...OPTIONS[name], ...(OVERRIDES[method] && OVERRIDES[method][name]) };
  const ok = KINDS[s.kind](value, s);
  if (ok !== true) throw badOption(label, value, `must be ${ok}`);
  return value;
}

/**
 * Validates `options` for public method `method`. Returns a new plain object
 * with the given (non-null) options; absent ones stay absent (their defaults
 * apply where they are used). Throws WasmlmError BAD_OPTION.
 */
export function checkOptions(method, options) {
  const known = METHODS[method];
  if (!known) throw new Error(`checkOptions: unknown method ${method}`);
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new WasmlmError('BAD_OPTION', `${method}: options must be an object, got ${describe(options)}`, { option: 'options' });
  }
  const out = {};
  for (const key of Reflect.ownKeys(options)) {
    if (typeof key === 'symbol') {
      if (key === Symbol.asyncDispose || key === Symbol.dispose) continue;
      throw new WasmlmError('BAD_OPTION', `${method}: unknown option ${String(key)}`, { option: String(key) });
    }
    if (!known.includes(key)) {
      const near = closestKey(key, known);
      const where = OPTIONS[key] ? ` (${key} is not an option of ${method})` : '';
      throw new WasmlmError('BAD_OPTION', `${method}: unknown option ${key}${where}${near ? ` — did you mean ${near}?` : ''}`,
        { option: key, suggestion: near });
    }
    const v = options[key];
    if (v === undefined || v === null) continue;
    out[key] = checkValue(key, v, method);
  }
  for (const key of known) {
    if (OPTIONS[key].required && out[key] === undefined) {
      throw new WasmlmError('BAD_OPTION', `${method}: option ${key} is required (${OPTIONS[key].doc})`, { option: key });
    }
  }
  if (method === 'loadModel' && out.nKeep !== undefined && out.contextLength && out.nKeep >= out.contextLength) {
    throw badOption('nKeep', out.nKeep, `must be below contextLength (${out.contextLength})`);
  }
  return out;
}

/** The options of a checked set that travel to the worker (no callbacks, signals or models). */
export function workerOptions(checked) {
  const out = {};
  for (const [k, v] of Object.entries(checked)) if (OPTIONS[k].side !== 'caller') out[k] = v;
  return out;
}

/** A prompt: a string or an array of token ids in [0, nVocab). Throws BAD_OPTION. */
export function checkPrompt(prompt, nVocab, what = 'prompt') {
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt) || ArrayBuffer.isView(prompt)) {
    const ids = Array.from(prompt);
    for (const t of ids) {
      if (!(typeof t === 'number' && Number.isInteger(t) && t >= 0 && t < nVocab)) {
        throw new WasmlmError('BAD_OPTION', `${what}: token id ${describe(t)} out of range: ids are integers in [0, ${nVocab})`, { option: what });
      }
    }
    return ids;
  }
  throw badOption(what, prompt, 'must be a string or an array of token ids');
}
