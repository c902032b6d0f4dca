// Every option of the public API, defined once: its kind, default, range and
// a one-line doc. `checkOptions(method, options)` validates a call's options
// on the caller's thread before anything reaches a worker: an unknown key is
// an error naming the closest known key, a value of the wrong type or out of
// range is an error naming the option, the value and what is allowed. Nothing
// is coerced or clamped silently. index.d.ts, the CLI flags and the README's
// option table describe these entries (tests/js/options.test.mjs checks them).
import { WasmlmError, badOption, describe } from './errors.js';
import { jsonSchemaToGbnf, jsonGrammar } from './grammar/json-schema.js';

const I32_MAX = 2 ** 31 - 1;
const GRAMMAR_MAX = 4 * 1024 * 1024;   // WLM_G_MAX_TEXT bytes (src/grammar.h); longer UTF-8 is refused by the engine
const U64_MAX = 2n ** 64n - 1n;
/** Longest hub access token accepted (a hub's tokens are ~40 characters; this bounds the header). */
const MAX_TOKEN = 4096;

/** Marks wasmlm Model objects (the `draft` option) without importing index.js. */
export const MODEL_BRAND = Symbol.for('wasmlm.Model');

// ---- kinds: each checks a value and says what is allowed --------------------

// logitBias: {tokenId: bias} (OpenAI's logit_bias shape) or [[tokenId | text, bias], ...]
const MAX_BIASES = 65536;
const MAX_BIAS_TEXT = 1024;
const BIAS_SHAPE = `an object {tokenId: bias} or an array of [tokenId or text, bias] pairs (bias a finite number or -Infinity), at most ${MAX_BIASES} entries`;
const isBias = (b) => typeof b === 'number' && (Number.isFinite(b) || b === -Infinity);
const isTokenId = (t) => Number.isInteger(t) && t >= 0 && t <= I32_MAX;

function logitBiasProblem(v) {
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    if (keys.length > MAX_BIASES || Object.getOwnPropertySymbols(v).length) return BIAS_SHAPE;
    for (const k of keys) {
      if (!/^(0|[1-9]\d{0,9})$/.test(k) || !isTokenId(Number(k))) {
        return `${BIAS_SHAPE}; key ${describe(k)} is not a token id (a text goes in a pair: [[${describe(k)}, bias]])`;
      }
      if (!isBias(v[k])) return `${BIAS_SHAPE}; the bias of token ${k} is ${describe(v[k])}`;
    }
    return true;
  }
  if (Array.isArray(v)) {
    if (v.length > MAX_BIASES) return BIAS_SHAPE;
    for (let i = 0; i < v.length; i++) {
      const e = v[i];
      if (!Array.isArray(e) || e.length !== 2) return `${BIAS_SHAPE}; entry ${i} is not a [key, bias] pair`;
      const [key, b] = e;
      if (!(isTokenId(key) || (typeof key === 'string' && key !== '' && key.length <= MAX_BIAS_TEXT))) {
        return `${BIAS_SHAPE}; entry ${i}: ${describe(key)} is neither a token id nor a text of 1 to ${MAX_BIAS_TEXT} characters`;
      }
      if (!isBias(b)) return `${BIAS_SHAPE}; entry ${i}: the bias is ${describe(b)}`;
    }
    return true;
  }
  return BIAS_SHAPE;
}

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
  json: (v) => v === true || v === false || v === 'object' || "true (any JSON value), 'object' (a JSON object) or false",
  jsonSchema: (v) => isPlainObject(v) || typeof v === 'boolean' || 'a JSON Schema: a plain object (or true / false)',
  enum: (v, s) => s.values.includes(v) || `one of ${s.values.map((x) => `'${x}'`).join(', ')}`,
  function: (v) => typeof v === 'function' || 'a function',
  signal: (v) => isSignal(v) || 'an AbortSignal',
  object: (v) => (isPlainObject(v) && cloneable(v)) || 'a plain object of cloneable values (no functions, symbols or class instances)',
  seed: (v) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) || (typeof v === 'bigint' && v >= 0n && v <= U64_MAX) ||
    'an integer in [0, 2^53) or a bigint in [0, 2^64)',
  stop: (v) => (typeof v === 'string' && v !== '') ||
    (Array.isArray(v) && v.length <= 64 && v.every((x) => typeof x === 'string' && x !== '')) || 'a non-empty string or an array of at most 64 of them',
  sha256: (v) => (typeof v === 'string' && /^[0-9a-fA-F]{64}$/.test(v)) || '64 hex digits (a sha256 digest)',
  // an HTTP header value as it is: printable ASCII, no spaces or control characters (nothing is trimmed)
  hubToken: (v) => (typeof v === 'string' && v.length <= MAX_TOKEN && /^[\x21-\x7e]+$/.test(v)) ||
    `an access token: 1 to ${MAX_TOKEN} printable ASCII characters without spaces or control characters`,
  scorer: (v) => v === 'mean-logprob' || v === 'total-logprob' || typeof v === 'function' || "'mean-logprob', 'total-logprob' or a function",
  adaptiveN: (v, s) => adaptiveProblem(v, s.adaptiveKeys) || true,
  draft: (v) => v === 'lookup' || !!(v && v[MODEL_BRAND]) || "a Model (a draft model) or 'lookup'",
  feedback: (v) => typeof v === 'boolean' || typeof v === 'function' || 'true, false or a function',
  escalate: (v) => (Array.isArray(v) && v.every((x) => x === 'best-of-n' || x === 'tree') && new Set(v).size === v.length) ||
    "an array of 'best-of-n' and / or 'tree' (each at most once)",
  logitBias: (v) => logitBiasProblem(v),
  wasm: (v) => (typeof WebAssembly !== 'undefined' && v instanceof WebAssembly.Module) || v instanceof ArrayBuffer || ArrayBuffer.isView(v) ||
    (typeof v === 'string' && v !== '') || v instanceof URL || 'a WebAssembly.Module, its bytes, or a path or URL',
};

// adaptive: {minN, maxN, confidence, batch[, target]} (web/adaptive.js): why a value is not one, or null
function adaptiveProblem(v, keys) {
  const what = `an object {${keys.join(', ')}}`;
  if (!isPlainObject(v)) return what;
  for (const k of Object.keys(v)) {
    if (!keys.includes(k)) { const near = closestKey(k, keys); return `${what} (unknown key ${k}${near ? `: did you mean ${near}?` : ''})`; }
  }
  const int = (k, lo, hi) => v[k] === undefined || (typeof v[k] === 'number' && Number.isInteger(v[k]) && v[k] >= lo && v[k] <= hi);
  if (!int('minN', 1, 64)) return `${what} with minN an integer in [1, 64]`;
  if (!int('batch', 1, 64)) return `${what} with batch an integer in [1, 64]`;
  if (!int('maxN', 1, 4096)) return `${what} with maxN an integer in [1, 4096]`;
  if (v.maxN !== undefined && v.maxN < (v.minN ?? 1)) return `${what} with maxN >= minN`;
  if (v.confidence !== undefined && !(typeof v.confidence === 'number' && v.confidence > 0.5 && v.confidence < 1)) return `${what} with confidence a number > 0.5 and < 1`;
  if (v.target !== undefined && !(typeof v.target === 'number' && Number.isFinite(v.target))) return `${what} with target a finite number`;
  return null;
}

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
  memory64: opt('enum', "engine build: 'auto' (the memory64 (wasm64) build when the model file does not fit the 4 GiB of wasm32 with a context, and a probe passes), 'on' or 'off'", { values: ['auto', 'on', 'off'], default: 'auto' }),
  contextLength: opt('int', 'KV cache length in tokens; 0 = min(model context, 2048)', { min: 0, max: 2 ** 24, default: 0 }),
  batchSize: opt('int', 'most tokens per forward call (prefill chunk); 0 = 64', { min: 0, max: 65536, default: 0 }),
  kvType: opt('enum', 'KV cache element type', { values: ['f32', 'f16'], default: 'f32' }),
  onFull: opt('enum', "when the context is full: 'error' (finishReason 'context') or 'slide' (drop the oldest after nKeep)", { values: ['error', 'slide'], default: 'error' }),
  nKeep: opt('int', "with onFull 'slide': first positions never dropped", { min: 0, max: 2 ** 24, default: 0 }),
  maxSequences: opt('int', 'sequences the cache is planned for up front', { min: 1, max: 64, default: 1 }),
  windowCache: opt('enum', "sliding-window layers (Gemma 2/3, Mistral-style): 'window' keeps only the positions their window still sees (less memory; a deeper rewind evaluates the prompt again), 'full' keeps every position", { values: ['window', 'full'], default: 'window' }),
  memoryLimit: opt('int', 'limit of the engine memory in bytes (default: the build\'s maximum, 4 GiB for wasm32, 16 GiB for memory64)', { min: 65536, max: 2 ** 34 }),
  onProgress: opt('function', "called with {loaded, total, rate} while the model downloads (phase 'download', Node cache) and loads; rate in bytes/s", { side: 'caller' }),
  modelDir: opt('string', 'directory (browsers: URL prefix) holding NAME.gguf for registry names'),
  cacheDir: opt('string', 'Node download cache directory (default env WASMLM_CACHE or ~/.cache/wasmlm)'),
  registry: opt('object', 'extra registry entries, merged over models/registry.json'),
  sha256: opt('sha256', 'expected sha256 of the model bytes, checked while streaming'),
  offline: opt('boolean', 'fail instead of downloading a registry model that is not local', { default: false }),
  cache: opt('boolean', 'keep downloaded models: browsers, URLs and hub ids in Cache Storage; Node, hub ids in cacheDir', { default: true }),
  hubUrl: opt('string', "base URL of the model hub for hf: ids (default env WASMLM_HUB_URL, else 'https://huggingface.co')"),
  hubToken: opt('hubToken', "access token for gated or private repositories of hf: ids, sent as 'Authorization: Bearer' to the hub's own origin only, " +
    'never to the CDN it redirects to (Node default env WASMLM_HUB_TOKEN, or HF_TOKEN when the hub is huggingface.co)', { side: 'caller', secret: true }),
  wasm: opt('wasm', 'the engine build: a compiled module, its bytes, or a path/URL', { side: 'caller' }),
  timeout: opt('int', 'network loading: fail when no byte arrives for this many ms (0 = never; default none for URLs, 30 s for registry names and hub ids)', { min: 0, max: I32_MAX }),
  signal: opt('signal', 'AbortSignal that cancels the call', { side: 'caller' }),

  // sampling (generate, complete, chat, bestOfN, ...): the defaults are
  // llama.cpp's (penalties off), so temperature 0 alone is plain greedy decoding
  maxTokens: opt('int', 'most tokens to generate', { min: 0, max: I32_MAX, default: 256 }),
  logitBias: opt('logitBias', "added to the logits before anything else: {tokenId: bias} (OpenAI's logit_bias) or [[tokenId or text, bias], ...]; " +
    '-Infinity bans a token; a text biases each distinct token of it, tokenized as written (no BOS, no space prefix: give " word" for a word after a space); a token given twice gets the sum'),
  repeatPenalty: opt('number', 'divide the logits of the tokens in the last repeatLastN by this (multiply a negative logit); 1 = off', { min: 0, minExclusive: true, default: 1 }),
  presencePenalty: opt('number', "subtract this once from the logit of each token in the last repeatLastN (OpenAI's presence_penalty); 0 = off", { min: -2, max: 2, default: 0 }),
  frequencyPenalty: opt('number', "subtract this times its count in the last repeatLastN from a token's logit (OpenAI's frequency_penalty); 0 = off", { min: -2, max: 2, default: 0 }),
  repeatLastN: opt('int', 'how many recent tokens (prompt included) the three penalties look at', { min: 0, max: I32_MAX, default: 64 }),
  temperature: opt('number', '0 = greedy: the argmax after bias and penalties (lowest id on ties), the filters and seed unused', { min: 0, default: 0.8 }),
  topK: opt('int', 'keep the k most likely tokens; 0 = off', { min: 0, max: I32_MAX, default: 40 }),
  typicalP: opt('number', 'locally typical sampling: keep the tokens whose -log p is closest to the entropy, up to this much probability; 1 = off', { min: 0, minExclusive: true, max: 1, default: 1 }),
  topP: opt('number', 'keep the smallest set of tokens whose probability reaches p; 1 = off, 0 = the most likely token only', { min: 0, max: 1, default: 0.95 }),
  minP: opt('number', 'drop tokens below minP x the best probability; 0 = off', { min: 0, max: 1, default: 0.05 }),
  seed: opt('seed', 'PRNG seed (PCG32): the same seed gives the same tokens everywhere', { default: 0xC0FFEE }),
  logprobs: opt('int', "per generated token, the N most likely tokens of the model's own distribution (log-softmax of the raw logits, before a grammar's mask, bias, penalties and filters, like logprob: a token the grammar forbids can be among them) as topLogprobs in chunks and results; 0 = off", { min: 0, max: 20, default: 0 }),

  // generation
  grammar: opt('grammar', 'GBNF grammar (start rule root): only text it allows is generated. Its mask is the first stage of sampling, before logitBias, ' +
    'the penalties, temperature and the filters (the distribution is renormalised over the allowed tokens). ' +
    "The generation ends with finishReason 'stop' once the text is complete and nothing may follow, 'grammar' at a dead end (docs/grammar.md)"),
  json: opt('json', "JSON output: true, any JSON value; 'object', a JSON object; false, off. Turned into a grammar on the caller's thread " +
    '(jsonGrammar, docs/json-schema.md); not with grammar or jsonSchema'),
  jsonSchema: opt('jsonSchema', "JSON output that validates against this JSON Schema, turned into a grammar on the caller's thread (jsonSchemaToGbnf): " +
    'an unsupported keyword is a BAD_SCHEMA error naming it and its JSON Pointer, before anything runs (docs/json-schema.md); not with grammar or json'),
  stop: opt('stop', 'stop strings: generation ends before the first occurrence'),
  ignoreEos: opt('boolean', 'keep generating after an end-of-generation token', { default: false }),
  addBos: opt('boolean', "prepend BOS (default: the model's add_bos flag)"),
  parseSpecial: opt('boolean', 'control-token text in the prompt becomes the token id', { default: false }),
  reusePrefix: opt('boolean', 'reuse the cache of a prompt prefix shared with the previous call', { default: true }),
  resume: opt('boolean', 'continue where the last plain generation (or loadState) left off: the prompt is appended to its tokens and sampling continues its random stream (seed unused)', { default: false }),
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

  // tree search
  step: opt('stop', 'treeSearch: a step ends with the token that completes one of these strings, or after maxTokensPerStep tokens (default a newline)'),
  expand: opt('int', 'treeSearch: children sampled from a node that grows (all children of a call decode as one batch)', { min: 1, max: 64, default: 4 }),
  keep: opt('int', "treeSearch: nodes kept: 'beam' per depth, 'best-first' open at once, 'mcts' keep x expand sequences in the cache", { min: 1, max: 64, default: 2 }),
  maxSteps: opt('int', 'treeSearch: most steps on a path (nodes at this depth are final)', { min: 1, max: 4096, default: 8 }),
  maxTokensPerStep: opt('int', 'treeSearch: most tokens in one step', { min: 1, max: 2 ** 20, default: 32 }),
  strategy: opt('enum', "treeSearch: 'beam' (the best keep per depth), 'best-first' (grow the best open node) or 'mcts' (UCT selection, expansion, rollout, backup)", { values: ['beam', 'best-first', 'mcts'], default: 'beam' }),
  score: opt('scorer', "treeSearch: rates each new node by its whole path: 'mean-logprob' (default), 'total-logprob' or a function (node) => number | Promise", { side: 'caller' }),
  isFinal: opt('function', 'treeSearch: (node) => boolean | Promise: the node ends its path (an answer); end of generation and maxSteps end paths too', { side: 'caller' }),
  onNode: opt('function', "treeSearch: called with (node, event) as the tree grows: 'node' (new, scored) or 'pruned'", { side: 'caller' }),
  maxExpansions: opt('int', "treeSearch: most nodes grown (default keep x maxSteps, a 'beam' search's most)", { min: 1, max: 1e6 }),
  exploration: opt('number', "treeSearch 'mcts': the UCT exploration constant c (values scaled to [0, 1])", { min: 0, default: Math.SQRT2 }),

  // deliberate decoding
  budget: opt('int', 'deliberate: most tokens generated in all (greedy answer, then each stage)', { min: 1, max: I32_MAX, default: 2048 }),
  escalate: opt('escalate', "deliberate: the stages after the greedy answer, in order (default ['best-of-n', 'tree'])"),
  uncertainty: opt('enum', "deliberate: the signal that the answer is uncertain (default 'verifier' with verify, else 'min-logprob')", { values: ['min-logprob', 'entropy', 'verifier'] }),
  threshold: opt('number', "deliberate: uncertain when the min log-prob is below it (default -3) or the mean entropy in nats above it (default 1.5)"),

  // beam search
  beams: opt('int', 'beams kept per step', { min: 1, max: 32, default: 4 }),
  lengthPenalty: opt('number', 'score = logprob / length^lengthPenalty', { default: 1 }),

  // analysis
  topN: opt('int', 'nextTokenDistribution: entries returned (at most the vocabulary)', { min: 1, max: I32_MAX, default: 20 }),
  all: opt('boolean', 'logits(): one row per token instead of the last', { default: false }),
  outPath: opt('string', 'quantize(): write the GGUF file here (Node)'),

  // embeddings
  pooling: opt('enum', "embed(): one vector from a text's token states: 'model' (the file's pooling_type; else 'mean' for encoders, 'last' for decoders), 'mean', 'cls' (the first token's) or 'last'",
    { values: ['model', 'mean', 'cls', 'last'], default: 'model' }),
  normalize: opt('boolean', 'embed(): scale each vector to length 1 (cosine similarity is then a dot product)', { default: true }),
});

/** Constrained output: a GBNF grammar, or JSON (any value / an object) or JSON Schema, converted to GBNF on the caller's thread. */
const STRUCTURED = ['grammar', 'json', 'jsonSchema'];
const SAMPLING = ['maxTokens', 'temperature', 'topK', 'topP', 'minP', 'repeatPenalty', 'repeatLastN', 'seed',
  'presencePenalty', 'frequencyPenalty', 'typicalP', 'logitBias'];
const GENERATE = [...SAMPLING, 'logprobs', ...STRUCTURED, 'stop', 'ignoreEos', 'addBos', 'parseSpecial', 'reusePrefix', 'draft', 'draftTokens', 'adaptive', 'signal'];
const CHAT_TEMPLATE = ['template', 'addGenerationPrompt', 'variables', 'templateLimits'];
const BATCH = [...GENERATE.filter((k) => !['draft', 'draftTokens', 'adaptive'].includes(k)), 'n', 'scorer', 'onCandidate', 'adaptive'];
const TREE = [...SAMPLING, ...STRUCTURED, 'ignoreEos', 'addBos', 'parseSpecial', 'reusePrefix', 'signal',
  'step', 'expand', 'keep', 'maxSteps', 'maxTokensPerStep', 'strategy', 'score', 'isFinal', 'onNode', 'maxExpansions', 'exploration'];

/** The options each public method accepts. */
export const METHODS = Object.freeze({
  loadModel: ['threads', 'simd', 'memory64', 'contextLength', 'batchSize', 'kvType', 'onFull', 'nKeep', 'maxSequences', 'windowCache', 'memoryLimit',
    'onProgress', 'modelDir', 'cacheDir', 'registry', 'sha256', 'offline', 'cache', 'hubUrl', 'hubToken', 'wasm', 'timeout', 'signal'],
  loadTokenizer: ['simd', 'memoryLimit', 'onProgress', 'modelDir', 'cacheDir', 'registry', 'offline', 'cache', 'hubUrl', 'hubToken', 'wasm', 'timeout', 'signal'],
  generate: [...GENERATE, 'resume'],
  complete: [...GENERATE, 'onToken', 'resume'],
  applyChatTemplate: CHAT_TEMPLATE,
  chat: [...GENERATE, ...CHAT_TEMPLATE],
  chatComplete: [...GENERATE, 'onToken', ...CHAT_TEMPLATE],
  bestOfN: BATCH,
  selfConsistency: [...BATCH.filter((k) => k !== 'scorer'), 'extract'],
  generateUntil: [...GENERATE, 'verify', 'maxAttempts', 'feedback'],
  beamSearch: ['beams', 'maxTokens', 'lengthPenalty', ...STRUCTURED, 'ignoreEos', 'addBos', 'parseSpecial', 'signal'],
  treeSearch: TREE,
  deliberate: [...SAMPLING, ...STRUCTURED, 'ignoreEos', 'addBos', 'parseSpecial', 'signal', 'budget', 'escalate', 'uncertainty', 'threshold', 'verify',
    'step', 'expand', 'keep', 'maxTokensPerStep'],
  nextTokenDistribution: [...SAMPLING.filter((k) => k !== 'maxTokens' && k !== 'seed'), 'topN', 'addBos', 'parseSpecial'],
  tokenize: ['addBos', 'parseSpecial'],
  countTokens: ['addBos', 'parseSpecial'],
  logits: ['all'],
  quantize: ['outPath'],
  embed: ['pooling', 'normalize', 'signal'],
});

/** Per-method overrides of an option's entry: beam and tree search need a token to rank; `adaptive` of
 * bestOfN and selfConsistency is the object of web/adaptive.js, not generate's boolean. */
const ADAPTIVE_DOC = 'sample in batches until the outcome is settled (web/adaptive.js; default minN 4, maxN 32, confidence 0.95, batch minN)';
const OVERRIDES = {
  beamSearch: { maxTokens: { min: 1 } },
  treeSearch: { maxTokens: { min: 1, doc: 'most tokens on a path' } },
  deliberate: {
    maxTokens: { min: 1, doc: 'most tokens of an answer' },
    verify: { required: false, doc: 'deliberate: (answer) => true / false / {ok, message} (or a Promise): accepts an answer' },
  },
  bestOfN: { adaptive: { kind: 'adaptiveN', adaptiveKeys: ['minN', 'maxN', 'confidence', 'batch', 'target'], default: undefined,
    doc: `${ADAPTIVE_DOC}; stops when the best is unlikely to be beaten, or reaches target` } },
  selfConsistency: { adaptive: { kind: 'adaptiveN', adaptiveKeys: ['minN', 'maxN', 'confidence', 'batch'], default: undefined,
    doc: `${ADAPTIVE_DOC}; stops when the leading answer is settled` } },
};

/** An option's entry as method `method` takes it (OPTIONS with the method's overrides). */
export function optionSpec(name, method) {
  return { ...OPTIONS[name], ...(OVERRIDES[method] && OVERRIDES[method][name]) };
}

/** The sampling defaults, from the entries above (logitBias has none: no bias). */
export const DEFAULT_SAMPLING = Object.freeze(Object.fromEntries(SAMPLING.filter((k) => OPTIONS[k].default !== undefined).map((k) => [k, OPTIONS[k].default])));

/** The sampling pipeline, in order (src/sampler.c; docs/options.md shows this list). */
export const SAMPLING_PIPELINE = Object.freeze([
  'grammar (or json / jsonSchema, which become one): the tokens that cannot continue the text inside the grammar are removed, so no later stage sees them and logitBias cannot bring them back',
  'logitBias: added to the logits (-Infinity removes a token)',
  'penalties over the last repeatLastN tokens (prompt included): a token seen c times has its logit divided by repeatPenalty (multiplied when negative), then reduced by presencePenalty + c x frequencyPenalty',
  'temperature: probabilities softmax(logits / temperature); temperature 0 takes the argmax here (lowest id on ties) and skips the rest',
  'topK',
  'typicalP: tokens ranked by |-log p - entropy|, the shortest prefix reaching typicalP kept',
  'topP',
  'minP',
  'the draw: a PCG32 number u in [0, 1) from the seed; the first token, most likely first, whose cumulative probability exceeds u',
]);

/** Checks what needs the model: logitBias token ids below nVocab. Throws BAD_OPTION. */
export function checkForModel(o, nVocab) {
  const lb = o.logitBias;
  if (!lb) return o;
  const ids = Array.isArray(lb) ? lb.map((e) => e[0]).filter((k) => typeof k === 'number') : Object.keys(lb).map(Number);
  const bad = ids.find((t) => t >= nVocab);
  if (bad !== undefined) throw badOption('logitBias', lb, `token id ${bad} out of range: ids are integers in [0, ${nVocab})`);
  return o;
}

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
  const s = optionSpec(name, method);
  const ok = KINDS[s.kind](value, s);
  if (ok === true) return value;
  // a secret (hubToken) is never echoed: only its length is told
  if (s.secret && typeof value === 'string') {
    throw new WasmlmError('BAD_OPTION', `option ${label}: must be ${ok}, got a string of ${value.length} characters (not shown)`, { option: label });
  }
  throw badOption(label, value, `must be ${ok}`);
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
    const spec = optionSpec(key, method);
    if (spec.required && out[key] === undefined) {
      throw new WasmlmError('BAD_OPTION', `${method}: option ${key} is required (${spec.doc})`, { option: key });
    }
  }
  if (known.includes('grammar')) structuredOutput(method, out);
  if (method === 'loadModel' && out.nKeep !== undefined && out.contextLength && out.nKeep >= out.contextLength) {
    throw badOption('nKeep', out.nKeep, `must be below contextLength (${out.contextLength})`);
  }
  return out;
}

/**
 * json and jsonSchema become `grammar` (GBNF) here, on the caller's thread,
 * so that a schema the converter refuses (BAD_SCHEMA) fails the call before
 * anything is posted and the worker only ever sees grammars. The three
 * exclude each other. Modifies `out`.
 */
function structuredOutput(method, out) {
  const given = STRUCTURED.filter((k) => out[k] !== undefined && out[k] !== false);
  if (given.length > 1) {
    throw new WasmlmError('BAD_OPTION', `${method}: options ${given.join(' and ')} exclude each other (each one constrains the whole output): give one`,
      { option: given[0] });
  }
  if (out.jsonSchema !== undefined) out.grammar = jsonSchemaToGbnf(out.jsonSchema);
  else if (out.json) out.grammar = jsonGrammar({ object: out.json === 'object' });
  delete out.json; delete out.jsonSchema;
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
