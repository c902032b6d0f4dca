// Type declarations for wasmlm (web/index.js).

/** Where a model comes from. A string is a registry name (e.g. "stories260K"),
 * a file path (Node), a URL (http:, https:, file:, blob:, data:), or a hub id:
 * 'hf:OWNER/REPO/PATH.gguf', 'hf:OWNER/REPO:Q4_K_M' (the file of that quantization
 * in the repository's listing) or 'hf:OWNER/REPO', each with an optional '@REVISION'
 * after REPO (default main); see LoadOptions.hubUrl. A path or http(s) URL of the
 * first part of a split GGUF (NAME-00001-of-0000N.gguf) loads every part; an array
 * holds a split GGUF's parts in order (Files are checked by name first). */
export type ModelSource =
  | string
  | Array<Blob | ArrayBuffer | ArrayBufferView>
  | URL
  | ArrayBuffer
  | ArrayBufferView
  | Blob
  | ReadableStream<Uint8Array>
  | Response
  | AsyncIterable<Uint8Array>;

export interface LoadProgress {
  /** bytes read so far (a resumed download counts the bytes it already had) */
  loaded: number;
  /** total bytes, 0 when unknown */
  total: number;
  /** bytes per second of this download or load so far */
  rate?: number;
  /** 'download' while a registry model or hub id is downloaded into the Node cache */
  phase?: 'download';
}

export interface LoadOptions {
  /** Compute threads (default: available cores, at most 8). Needs shared memory: in browsers a crossOriginIsolated page; otherwise 1 with one warning. */
  threads?: number;
  /** SIMD flavour: 'auto' (default: relaxed SIMD when a known-answer probe passes), 'simd128' or 'relaxed'. */
  simd?: 'auto' | 'simd128' | 'relaxed';
  /** Engine build: 'auto' (default: the memory64 (wasm64) build when the model file does not fit the
   * 4 GiB of wasm32 with a context, and its probe passes), 'on' (UNSUPPORTED where memory64 is not
   * available) or 'off'. A file no build here can hold is refused with TOO_LARGE before it is read. */
  memory64?: 'auto' | 'on' | 'off';
  /** KV cache length in tokens; 0 / omitted = min(model context, 2048). */
  contextLength?: number;
  /** max tokens per forward call (prefill chunk); 0 / omitted = 64. */
  batchSize?: number;
  /** KV cache element type (default 'f32'). */
  kvType?: 'f32' | 'f16';
  /** What happens when the context is full: 'error' (default: generation ends
   * with finishReason 'context') or 'slide' (drop the oldest positions after nKeep). */
  onFull?: 'error' | 'slide';
  /** With onFull 'slide': first positions never dropped. */
  nKeep?: number;
  /** Sequences the cache is planned for up front (default 1). bestOfN / beamSearch /
   * speculative decoding re-plan the context once when they need more (sequences, cache
   * slots or logits rows); set this to size everything before the first generation. */
  maxSequences?: number;
  /** Sliding-window layers (Gemma 2/3, Mistral-style): 'window' (default) keeps only the
   * positions their window still sees, in a ring of maxSequences x (window - 1) + batchSize
   * rows (less memory; a rewind deeper than the ring holds, as prefix reuse may ask, evaluates
   * the prompt again); 'full' keeps every position, as the other layers do. */
  windowCache?: 'window' | 'full';
  /** Limit of the engine's memory in bytes (default: the build's maximum, 4 GiB for wasm32, 16 GiB for memory64). */
  memoryLimit?: number;
  onProgress?: (p: LoadProgress) => void;
  /** Directory holding NAME.gguf for registry names (default env WASMLM_MODELS); in browsers a URL prefix. */
  modelDir?: string;
  /** Download cache (Node; default env WASMLM_CACHE or ~/.cache/wasmlm). Each download is recorded
   * (NAME.gguf.json: url, size, sha256) and every cache hit is hashed and checked against that record and
   * the registry's sha256: a mismatch evicts and downloads again (INTEGRITY when offline). */
  cacheDir?: string;
  /** Extra registry entries, merged over models/registry.json. */
  registry?: Record<string, RegistryEntry>;
  /** Expected sha256 of the model bytes (64 hex digits; anything else is a BAD_OPTION error before any
   * request), checked while streaming (URL, bytes, Blob, stream sources; not Node file paths): INTEGRITY on mismatch. */
  sha256?: string;
  /** Stall timeout in ms for URL, Response and registry downloads: fail with NETWORK when no byte
   * arrives for this long (not a limit on the total time). Default: none for URLs and Responses,
   * REGISTRY_TIMEOUT_MS (30,000 ms) for registry names; 0 = none. Connection errors, HTTP statuses
   * and a body shorter or longer than its Content-Length are NETWORK errors naming the URL (and the
   * bytes received of expected). */
  timeout?: number;
  /** Fail instead of downloading a registry model that is not local. */
  offline?: boolean;
  /** Keep downloaded models (default true). Browsers: models fetched by URL or hub id in Cache Storage,
   * read from there next time (see web/cache.js). Node: hub ids are downloaded into cacheDir, resumably
   * (HTTP Range after an interruption), and kept by URL and ETag: a changed file is fetched again. */
  cache?: boolean;
  /** Base URL of the model hub for 'hf:' ids (default env WASMLM_HUB_URL, else 'https://huggingface.co'):
   * a mirror, or a local server in tests. Listing: GET {hubUrl}/api/models/OWNER/REPO/tree/REVISION;
   * files: {hubUrl}/OWNER/REPO/resolve/REVISION/PATH. */
  hubUrl?: string;
  /** Access token for gated or private repositories of 'hf:' ids (printable ASCII, no spaces: BAD_OPTION
   * otherwise, never echoed). Sent as 'Authorization: Bearer TOKEN' only to the hub's own origin (the
   * listing and the resolve URLs), never to the CDN a resolve URL redirects to nor any other URL, and
   * never written into a message, a cache key, a record, a progress event or `info`. Node default: env
   * WASMLM_HUB_TOKEN, else env HF_TOKEN when the hub is https://huggingface.co. A refusal (HTTP 401 / 403)
   * is UNAUTHORIZED, saying whether a token was sent and what to do (set a token; accept the model's licence). */
  hubToken?: string;
  /** The engine: a compiled module, its bytes, or a path/URL (default ../wasm/wasmlm.wasm; Node env WASMLM_WASM).
   * A memory64 (wasm64) build is recognised from its bytes (a path, URL or bytes, not a compiled module). */
  wasm?: WebAssembly.Module | ArrayBuffer | ArrayBufferView | string | URL;
  signal?: AbortSignal;
}

/**
 * loadTokenizer options: loadModel's loading options without the ones for
 * weights and a context (threads, contextLength, batchSize, kvType, onFull,
 * nKeep, maxSequences, windowCache), for a whole file (sha256: only the
 * file's header and metadata are read, so there is no digest to check) or
 * for its size (memory64: a tokenizer always runs in the wasm32 build).
 */
export interface TokenizerLoadOptions extends Omit<LoadOptions, 'threads' | 'contextLength' | 'batchSize' | 'kvType' | 'onFull' | 'nKeep' | 'maxSequences' | 'windowCache' | 'memory64' | 'sha256'> {}

/**
 * Logit bias: an object {tokenId: bias} (OpenAI's logit_bias shape; keys are
 * token ids) or an array of [tokenId or text, bias] pairs (a Map: pass
 * [...map]). -Infinity bans a token. A text biases each distinct token of
 * it, tokenized as written: no BOS, no SentencePiece space prefix (" word"
 * for a word after a space). A token given twice gets the sum.
 */
export type LogitBias = Record<string, number> | Array<[number | string, number]>;

/**
 * Sampling options. Defaults (DEFAULT_SAMPLING, llama.cpp's): maxTokens 256,
 * temperature 0.8, topK 40, topP 0.95, minP 0.05, typicalP 1, repeatPenalty 1,
 * presencePenalty 0, frequencyPenalty 0, repeatLastN 64, seed 0xC0FFEE
 * (12648430). The pipeline, in order (docs/options.md): a grammar's mask
 * (StructuredOutputOptions), logit bias, penalties, temperature, top-k,
 * typical, top-p, min-p, draw. temperature 0 alone is plain greedy decoding
 * (the argmax, lowest id on ties).
 */
export interface SamplingOptions {
  maxTokens?: number;
  temperature?: number;
  /** 0 = off */
  topK?: number;
  /** 1 = off; 0 = only the most likely token */
  topP?: number;
  /** 0 = off */
  minP?: number;
  /** locally typical sampling, (0, 1]; 1 = off */
  typicalP?: number;
  /** 1 = off */
  repeatPenalty?: number;
  /** OpenAI's presence_penalty, [-2, 2]; 0 = off */
  presencePenalty?: number;
  /** OpenAI's frequency_penalty, [-2, 2]; 0 = off */
  frequencyPenalty?: number;
  /** the window of the three penalties (prompt included) */
  repeatLastN?: number;
  /** added to the logits first */
  logitBias?: LogitBias;
  /** PRNG seed (PCG32); the same seed gives the same tokens everywhere. */
  seed?: number | bigint;
}

/** One of the most likely tokens at a generated position (options.logprobs). */
export interface TopLogprob {
  token: number;
  /** the token's text (its bytes as UTF-8; a partial character gives U+FFFD) */
  text: string;
  /** log P(token) under the model's own distribution (T = 1, before a grammar's mask, bias, penalties and filters) */
  logprob: number;
}

/**
 * Structured output: at most one of the three (BAD_OPTION naming both
 * otherwise). Its mask is the first stage of sampling, before the bias,
 * penalties, temperature and filters, so the distribution is renormalised
 * over the tokens it allows; an end-of-generation token is allowed only where
 * it may end. The text ends with finishReason 'stop' once it is complete and
 * nothing else may follow; 'grammar' at a dead end (no token continues it).
 */
export interface StructuredOutputOptions {
  /** A GBNF grammar (rules `name ::= ...`, start rule `root`): only text it allows is generated.
   * Compiled once per text and model (cached). A grammar that does not parse or check is
   * BAD_OPTION naming line:column. See docs/grammar.md. */
  grammar?: string;
  /** JSON output: true, any JSON value; 'object', a JSON object; false, off (jsonGrammar). */
  json?: boolean | 'object';
  /** JSON output that validates against this JSON Schema (the subset of docs/json-schema.md),
   * turned into a grammar on the caller's thread by jsonSchemaToGbnf: an unsupported keyword
   * rejects the call with BAD_SCHEMA (naming it and its JSON Pointer) before anything runs. */
  jsonSchema?: object | boolean;
}

export interface GenerateOptions extends SamplingOptions, StructuredOutputOptions {
  /** 0..20 (default 0): per generated token, this many most likely tokens of the model's own
   * distribution (as `logprob`: before a grammar's mask, bias, penalties and filters, so a token the
   * grammar forbids may be among them), as `topLogprobs` of chunks and results. */
  logprobs?: number;
  /** Speculative decoding: a draft Model with the same vocabulary proposes tokens that this
   * model checks in one batched pass (the output follows this model's distribution; greedy
   * output is identical), or 'lookup' to draft from n-gram matches in the context. */
  draft?: Model | 'lookup';
  /** Most draft tokens per target pass (default 4; 8 for 'lookup'). */
  draftTokens?: number;
  /** Default true. Prompt lookup: each round drafts the tokens accepted in the last round that
   * drafted + 2 (the first round 4), within [1, draftTokens]. A draft model: each round drafts the k in [0, draftTokens] with the most
   * expected tokens per unit of work, from the acceptance rate so far and a cost model: what a draft token
   * and one more verified token cost in target steps. Sampled decoding uses a fixed model (a draft token
   * costs draft file size / target file size target steps; no timings, so a seed gives the same tokens
   * everywhere); greedy decoding (temperature 0 or topK 1, whose output does not depend on k) measures
   * both costs from the rounds' wall times as it goes. k = 0 is a plain target step (a draft that is rarely
   * right then costs 10-30 %, the draft reading every token to stay in step), with a one-token probe after 8
   * plain rounds, the interval doubling up to 512 while the draft stays poor. false: always draftTokens. */
  adaptive?: boolean;
  /** Stop strings: generation ends before the first occurrence (not included in the text). */
  stop?: string[] | string;
  /** Aborting rejects the iterator / complete() with an AbortError. */
  signal?: AbortSignal;
  /** Keep generating after an end-of-generation token (EOS, EOT, <|im_end|>, ... per wlm_token_is_eog). */
  ignoreEos?: boolean;
  /** Prepend BOS (default: the model's add_bos flag). */
  addBos?: boolean;
  /** Text of control tokens (e.g. "<|im_start|>") in the prompt becomes their id (default false: plain text). */
  parseSpecial?: boolean;
  /** Reuse the cache entries of a shared prompt prefix from the previous call (default true);
   * false evaluates the whole prompt again (e.g. to time a prefill). */
  reusePrefix?: boolean;
}

/** Options of generate() and complete(): plain generation can continue where the last one stopped. */
export interface PlainGenerateOptions extends GenerateOptions {
  /** Continue where the last plain generation (or a state given to loadState) left the context
   * (default false): the prompt's tokens (a text prompt without BOS unless addBos; '' for none) follow
   * its tokens, the token it sampled last included, and sampling continues its random stream: `seed`
   * is not used. So generating 20 tokens, then 30 with resume, gives the tokens of one 50-token
   * generation with the same options, even across saveState, dispose, loadModel and loadState.
   * A generation that ended with an end-of-generation token resumes after the tokens before it.
   * Rejects with BAD_STATE when nothing can be continued (another kind of call used the context since).
   * Not with `draft`. */
  resume?: boolean;
}

export interface CompleteOptions extends PlainGenerateOptions {
  /** Called with each chunk as it is generated (streams internally). */
  onToken?: (chunk: GenerateChunk) => void;
}

export interface GenerateChunk {
  /** New text; '' while a UTF-8 character or a possible stop string is incomplete.
   * Always a valid string: joined chunks equal CompletionResult.text. */
  text: string;
  /** The sampled token id; -1 for a final text-only chunk (bytes of an
   * incomplete UTF-8 character flushed at the end as U+FFFD). */
  token: number;
  /** log P(token) under the model's own distribution (T = 1, no filters). */
  logprob: number;
  /** with options.logprobs N: the N most likely tokens at this position, best first (absent on a final text-only chunk) */
  topLogprobs?: TopLogprob[];
}

/** 'stop': EOS, a stop string, or a grammar's text complete with nothing allowed after it;
 * 'length': maxTokens; 'context': the context is full; 'grammar': a grammar's dead end
 * (no token of the vocabulary continues the text: it is incomplete). */
export type FinishReason = 'stop' | 'length' | 'context' | 'grammar';

/** Present when options.grammar was given: the time its compilation took (0 when the
 * compiled grammar was cached from an earlier call with the same text), and the time the
 * model's vocabulary trie took (built by the model's first grammar, else 0). */
export interface GrammarStats { compileMs: number; cached: boolean; trieMs: number }

export interface SpeculativeStats {
  /** forward passes of the target model */
  targetPasses: number;
  /** draft tokens proposed / accepted */
  proposed: number;
  accepted: number;
  acceptanceRate: number;
  /** generated tokens per target pass (1 = no gain) */
  tokensPerPass: number;
  draftTokens: number;
  /** with a draft model: time spent drafting, rounds, rounds without drafts (adaptive k = 0), wall time */
  draftMs?: number;
  rounds?: number;
  plainRounds?: number;
  wallMs?: number;
  /** whether the draft length was adaptive (draft models and prompt lookup) */
  adaptive?: boolean;
  /** adaptive with a draft model: where the last round's costs came from ('measured': greedy decoding,
   * timed as it went; 'fixed': the file-size model) and the costs, in target steps: a draft token, one
   * more token in a target pass, and what a drafting round of the draft costs beyond its tokens (its
   * catch-up and the call; measured only, 0 in the fixed model) */
  costModel?: 'measured' | 'fixed';
  draftCost?: number;
  verifyCost?: number;
  draftOverhead?: number;
  /** adaptive and timed: the measured costs said no draft length could pay even at full acceptance, so the
   * rounds stopped probing the draft */
  stoppedDrafting?: boolean;
}

export interface GenerationStats {
  promptTokens: number;
  /** prompt tokens whose cache entries were reused from the previous call (not evaluated again) */
  reusedPromptTokens: number;
  /** present when options.draft was given */
  speculative?: SpeculativeStats;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  grammar?: GrammarStats;
}

export interface CompletionResult {
  text: string;
  tokens: number[];
  logprobs: number[];
  /** with options.logprobs: per token, the most likely tokens at its position */
  topLogprobs?: TopLogprob[][];
  /** see FinishReason */
  finishReason: FinishReason;
  stats: GenerationStats;
}

export interface HParams {
  nVocab: number; nCtxTrain: number; nEmbd: number; nLayer: number; nHead: number; nHeadKv: number;
  headDim: number; nFf: number; nRot: number; ropeFreqBase: number; rmsEps: number;
  bosId: number; eosId: number; unkId: number;
  addBos: boolean; addSpacePrefix: boolean; tiedOutput: boolean;
  /** value head size (attention.value_length); headDim is the query/key head size (attention.key_length) */
  headDimV: number;
  /** RoPE pairing: 'norm' (x[2i], x[2i+1]; llama) or 'neox' (x[i], x[i + nRot/2]; qwen2) */
  ropeType: 'norm' | 'neox';
  /** per-frequency RoPE divisors in use (rope_freqs.weight, or rope.scaling.type llama3 / linear) */
  ropeScaled: boolean;
}

/** Arrays with more than 16 elements are summarised. */
export interface ArraySummary {
  arrayOf: string;
  count: number;
  /** the first 8 elements */
  head: MetadataValue[];
}
export type MetadataValue = number | bigint | boolean | string | MetadataValue[] | ArraySummary;

export interface TensorInfo {
  name: string;
  /** GGML type id */
  type: number;
  typeName: string;
  dims: number[];
  /** absolute offset in the file (for a split GGUF: in its part) */
  offset: number;
  /** split GGUFs only: the part holding it (0-based) */
  part?: number;
}

/** Tokenizer.info (loadTokenizer): what the file's metadata says; no tensors, no context. */
export interface TokenizerInfo {
  architecture: string | null;
  /** text of the BOS / EOS tokens, null when the vocabulary has none */
  specialTokens: { bos: string | null; eos: string | null };
  /** tokenizer.chat_template, null when the file has none */
  chatTemplate: string | null;
  name: string | null;
  vocabOnly: true;
  /** bytes of the file that were read: its header and metadata (for a whole model, a small part of it) */
  bytesRead: number;
  /** nCtxTrain is 0 when the file names no architecture or its context_length */
  hparams: Pick<HParams, 'nVocab' | 'nCtxTrain' | 'bosId' | 'eosId' | 'unkId' | 'addBos' | 'addSpacePrefix'>;
  metadata: Record<string, MetadataValue>;
  /** Browsers, URL sources: true when the bytes came from the model cache. */
  fromCache?: boolean;
}

export interface ModelInfo {
  /** general.architecture: 'llama', 'qwen2', 'qwen3', 'gemma2', 'gemma3', 'phi3', 'smollm3', 'granite', 'bert', 'nomic-bert' */
  architecture: string | null;
  /** text of the BOS / EOS tokens (e.g. '<|im_end|>'), null when the model has none */
  specialTokens: { bos: string | null; eos: string | null };
  /** tokenizer.chat_template, null when the file has none */
  chatTemplate: string | null;
  name: string | null;
  /** bytes of the file (a split GGUF: of all its parts) */
  fileSize: number;
  /** files the model was loaded from: 1, or the parts of a split GGUF */
  parts: number;
  paramCount: number;
  hparams: HParams;
  /** windowRows: rows the sliding-window layers keep (0: one per position, as the other layers) */
  context: { nCtx: number; nBatch: number; kvType: 'f32' | 'f16'; onFull: 'error' | 'slide'; windowCache: 'window' | 'full'; windowRows: number };
  /** embed(): vector length, the pooling 'model' means, and whether attention is causal (decoders) */
  embedding: { length: number; pooling: 'mean' | 'cls' | 'last'; causal: boolean };
  metadata: Record<string, MetadataValue>;
  tensors: TensorInfo[];
  vocabOnly: false;
  /** Browsers, URL sources: true when the bytes came from the model cache (web/cache.js), false when fetched. */
  fromCache?: boolean;
}

export interface TokenProb { token: number; prob: number; text: string }

export type QuantType = 'f32' | 'f16' | 'q8_0' | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'q2_k' | 'q3_k' | 'q4_k' | 'q5_k' | 'q6_k' | 'q4_k_m' | 'q5_k_m';

export interface QuantizeResult {
  /** one line per tensor */
  report: string;
  size: number;
  /** the GGUF bytes (when no outPath was given) */
  bytes?: Uint8Array;
}

/** An async iterator of chunks; its return value (when iterated by hand) is the CompletionResult. */
export type Generation = AsyncGenerator<GenerateChunk, CompletionResult, undefined>;

export interface ChatMessage {
  /** 'system' | 'user' | 'assistant' | ... (whatever the template knows) */
  role: string;
  content: string;
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** A Jinja chat template used instead of the model's tokenizer.chat_template. */
  template?: string;
  /** Append the assistant turn header (default true). */
  addGenerationPrompt?: boolean;
  /** Extra template variables (e.g. tools, date_string): plain data (they are sent to the model's worker). */
  variables?: Record<string, unknown>;
  /** Bounds of the render (the template is untrusted: it comes with the model file). Going past one
   * rejects with a WasmlmError code 'TEMPLATE_LIMIT' whose `limit` names it; the model stays usable. */
  templateLimits?: TemplateLimits;
}

/** Bounds of one chat-template render; each defaults as shown. */
export interface TemplateLimits {
  /** wall time of the render, ms (1000) */
  timeMs?: number;
  /** interpreter steps: node evaluations and block runs, i.e. loop iterations (2000000) */
  steps?: number;
  /** characters of the prompt, of any one string, and of the text inside any one list/dict (4194304) */
  outputChars?: number;
  /** items of any one list/dict, nested ones counted; range() is refused above it (100000) */
  items?: number;
  /** macro/function calls in progress (recursion), and nesting of lists/dicts (64) */
  depth?: number;
  /** length of the template source (1048576) */
  templateChars?: number;
}

export interface ChatOptions extends GenerateOptions, ChatTemplateOptions {}
export interface ChatCompleteOptions extends Omit<CompleteOptions, 'resume'>, ChatTemplateOptions {}

export interface Candidate {
  /** 0-based; candidate i sampled with seed + i (it equals complete(prompt, {seed: seed + i})) */
  index: number;
  seed: string;
  text: string;
  tokens: number[];
  logprobs: number[];
  /** with options.logprobs: per token, the most likely tokens at its position */
  topLogprobs?: TopLogprob[][];
  finishReason: FinishReason;
  score: number;
}

export interface CandidateProgress {
  index: number;
  /** the candidate's whole text so far */
  text: string;
  /** what this event added */
  delta: string;
  token: number;
  /** tokens so far */
  tokens: number;
  /** true once per candidate, after scoring */
  done: boolean;
  score?: number;
  finishReason?: FinishReason;
}

export type Scorer = 'mean-logprob' | 'total-logprob' | ((candidate: Omit<Candidate, 'score'>) => number | Promise<number>);

/** Adaptive sampling (web/adaptive.js): minN candidates, then `batch` at a time, until the
 * outcome is settled with `confidence` or maxN are drawn. */
export interface AdaptiveSampling {
  /** the first batch (1..64, default 4) */
  minN?: number;
  /** most candidates in all (1..4096, default 32) */
  maxN?: number;
  /** in (0.5, 1), default 0.95 */
  confidence?: number;
  /** candidates per later batch (1..64, default minN) */
  batch?: number;
}
/** bestOfN: stops when P(none of the next `batch` candidates beats the best) = (k + 1) / (k + 1 + batch)
 * reaches `confidence` (k: candidates drawn since the best, a uniform prior on the chance of beating it),
 * or at once when the best score reaches `target`. */
export interface AdaptiveBest extends AdaptiveSampling {
  /** a score that ends the sampling when reached (e.g. 1 for a verifier's pass) */
  target?: number;
}
/** What an adaptive run spent and why it stopped (stats.adaptive). */
export interface AdaptiveStats {
  samples: number;
  batches: number;
  stoppedBy: 'confidence' | 'target' | 'maxN';
  /** the rule's probability when sampling stopped */
  confidence: number;
  minN: number;
  maxN: number;
  batch: number;
  target?: number;
}

export interface BestOfNOptions extends Omit<GenerateOptions, 'draft' | 'draftTokens' | 'adaptive'> {
  /** candidates (1..64, default 4); not with adaptive */
  n?: number;
  /** sample in batches until the best is settled (candidate i still samples with seed + i) */
  adaptive?: AdaptiveBest;
  /** default 'mean-logprob' (mean log-probability per token); a function is a verifier */
  scorer?: Scorer;
  onCandidate?: (p: CandidateProgress) => void;
}

export interface BatchStats {
  promptTokens: number;
  reusedPromptTokens: number;
  prefillMs: number;
  decodeMs: number;
  /** forward passes (each advances every live candidate by one token) */
  steps: number;
  totalTokens: number;
  tokensPerSec: number;
  wallMs: number;
  scoringMs?: number;
  /** the context was re-planned for more sequences / slots */
  contextGrown: boolean;
  grammar?: GrammarStats;
  /** with options.adaptive (the times and counts are the sums over its batches) */
  adaptive?: AdaptiveStats;
}

export interface BestOfNResult { candidates: Candidate[]; best: Candidate; stats: BatchStats }

export interface SelfConsistencyResult<A = unknown> {
  /** the majority answer (ties: the one seen first), null when no candidate answered */
  answer: A | null;
  votes: { answer: A; count: number }[];
  answered: number;
  candidates: (Candidate & { answer: A | null | undefined })[];
  stats: BatchStats;
}

export type Verdict = boolean | { ok: boolean; message?: string };

export interface GenerateUntilOptions extends GenerateOptions {
  verify: (result: CompletionResult, attempt: number) => Verdict | Promise<Verdict>;
  /** default 4 */
  maxAttempts?: number;
  /** true: append "\n<message>\n" to the prompt for the next attempt; or a function returning the next prompt */
  feedback?: boolean | ((prompt: string | number[], result: CompletionResult, message: string, attempt: number) => string | number[] | Promise<string | number[]>);
}

export interface Attempt {
  attempt: number; seed: string; prompt: string | number[]; text: string; tokens: number[];
  finishReason: FinishReason; ok: boolean; message: string | null; stats: GenerationStats;
}

/** With a grammar (or json / jsonSchema) beams rank only the tokens it allows (log-probabilities renormalised over them). */
export interface BeamSearchOptions extends StructuredOutputOptions {
  /** 1..32, default 4 */
  beams?: number;
  maxTokens?: number;
  /** score = logprob / length^lengthPenalty (default 1) */
  lengthPenalty?: number;
  ignoreEos?: boolean;
  addBos?: boolean;
  parseSpecial?: boolean;
  signal?: AbortSignal;
}

export interface SelfConsistencyOptions<A = unknown> extends Omit<BestOfNOptions, 'scorer' | 'adaptive'> {
  /** sample in batches until P(leader's share among the top two > 1/2) = P(Binomial(a + b + 1, 1/2) <= a)
   * reaches `confidence` (a, b: the votes of the leading answer and the runner-up; a uniform prior) */
  adaptive?: AdaptiveSampling;
  /** pulls the answer out of a candidate's text (null / undefined: no answer) */
  extract: (text: string, candidate: Candidate) => A | null | undefined | Promise<A | null | undefined>;
}

/** One node of a tree search: a step of a path (the root: the prompt). */
export interface TreeNode {
  id: number;
  /** null for the root */
  parent: number | null;
  depth: number;
  /** this step's text and tokens, with their log-probabilities (their sum: logprob) */
  text: string;
  tokens: number[];
  logprobs: number[];
  logprob: number;
  /** the whole path from the root: its text, summed log-probability and token count */
  pathText: string;
  pathLogprob: number;
  pathTokens: number;
  /** the scorer's rating (null: the root, a rollout that did not end) */
  score: number | null;
  /** an end: end of generation or a complete grammar ('stop'), maxTokens ('length'), the context ('context'), a grammar's dead end ('grammar'), maxSteps ('steps') or isFinal ('final') */
  final: boolean;
  finishReason: FinishReason | 'steps' | 'final' | null;
  /** mcts: a rollout (one node for all its steps; `steps` of them), not part of the searched tree */
  rollout: boolean;
  steps?: number;
  /** the search dropped this node (its sequence was freed) */
  pruned: boolean;
  /** the node grew children (their ids) */
  expanded: boolean;
  children: number[];
  /** mcts: backups through this node and their mean value */
  visits?: number;
  value?: number | null;
}

export interface TreeSearchOptions extends SamplingOptions, StructuredOutputOptions {
  /** a step ends with the token completing one of these (default '\n'), or after maxTokensPerStep tokens */
  step?: string | string[];
  /** children sampled from a node that grows (1..64, default 4); a call's children decode as one batch */
  expand?: number;
  /** 'beam': nodes kept per depth; 'best-first': most open nodes; 'mcts': keep x expand sequences stay cached (default 2) */
  keep?: number;
  /** most steps on a path (default 8) */
  maxSteps?: number;
  /** most tokens in one step (default 32) */
  maxTokensPerStep?: number;
  /** default 'beam' */
  strategy?: 'beam' | 'best-first' | 'mcts';
  /** rates each new node by its whole path: 'mean-logprob' (default), 'total-logprob' or a function (a verifier);
   * a throw or rejection fails the search with code 'CALLBACK' */
  score?: 'mean-logprob' | 'total-logprob' | ((node: TreeNode) => number | Promise<number>);
  /** the node is an answer: its path ends there */
  isFinal?: (node: TreeNode) => boolean | Promise<boolean>;
  /** progress: 'node' for each new scored node, 'pruned' when one is dropped */
  onNode?: (node: TreeNode, event: 'node' | 'pruned') => void | Promise<void>;
  /** most nodes grown (default keep x maxSteps) */
  maxExpansions?: number;
  /** mcts: the UCT constant c (default sqrt 2; values are scaled to [0, 1] by the scores seen) */
  exploration?: number;
  ignoreEos?: boolean;
  addBos?: boolean;
  parseSpecial?: boolean;
  reusePrefix?: boolean;
  signal?: AbortSignal;
}

/** The memory a search planned: `width` live sequences besides the prompt's, each at most `pathTokens` tokens past it. */
export interface TreePlan {
  strategy: 'beam' | 'best-first' | 'mcts';
  width: number;
  sequences: number;
  pathTokens: number;
  promptTokens: number;
  /** promptTokens + width x pathTokens */
  slots: number;
}

export interface TreeSearchResult {
  /** the best-scoring final node (null only when nothing was scored); not final when the budget ended first */
  best: TreeNode | null;
  /** best.pathText */
  text: string;
  /** every explored node, by id (the root first) */
  nodes: TreeNode[];
  stats: {
    strategy: 'beam' | 'best-first' | 'mcts';
    expansions: number;
    nodes: number;
    finals: number;
    /** tokens sampled, forward passes, tokens evaluated again to rebuild paths (mcts, or after other calls) */
    tokens: number;
    passes: number;
    rebuiltTokens: number;
    peakUsedSlots: number;
    peakSequences: number;
    /** with a grammar: nodes whose recognizer state was given up (a search keeps at most 160) and rebuilt from their path's tokens */
    grammarReplays: number;
    plan: TreePlan;
    contextGrown: boolean;
    /** each worker call: nodes grown or stepped, forward passes, decode time, and the cache after it */
    calls: { nodes: number; passes: number; decodeMs: number; usedSlots: number; liveSequences: number }[];
    scoringMs: number;
    wallMs: number;
  };
}

/** An answer as deliberate's verifier sees it. */
export interface DeliberateAnswer { text: string; tokens: number[]; logprobs: number[] }

export interface DeliberateOptions extends SamplingOptions, StructuredOutputOptions {
  /** most tokens generated in all: the greedy answer, then each stage (default 2048) */
  budget?: number;
  /** the stages after the greedy answer, in order (default ['best-of-n', 'tree']); best-of-N takes at most half of
   * what is left when a tree search follows */
  escalate?: ('best-of-n' | 'tree')[];
  /** the signal that an answer is uncertain: 'verifier' (default with verify), 'min-logprob' (default otherwise)
   * or 'entropy' (mean entropy of the model's distributions at the answer's tokens: one more evaluation) */
  uncertainty?: 'min-logprob' | 'entropy' | 'verifier';
  /** uncertain below this min log-prob (default -3) or above this mean entropy in nats (default 1.5) */
  threshold?: number;
  /** accepts or rejects an answer; a throw or rejection fails the call with code 'CALLBACK' */
  verify?: (answer: DeliberateAnswer) => Verdict | Promise<Verdict>;
  /** the tree stage: step delimiter, children per node (default 4), nodes kept (default 2), tokens per step (default 32) */
  step?: string | string[];
  expand?: number;
  keep?: number;
  maxTokensPerStep?: number;
  ignoreEos?: boolean;
  addBos?: boolean;
  parseSpecial?: boolean;
  signal?: AbortSignal;
}

export interface DeliberateStage {
  stage: 'greedy' | 'best-of-n' | 'tree';
  /** tokens this stage generated */
  tokens: number;
  text?: string;
  accepted?: boolean;
  /** the uncertainty signal of the stage's answer (verifier: 1 or 0) */
  signal?: number;
  /** why it was accepted or not, in words */
  why?: string;
  /** a stage the budget left no room for: why */
  skipped?: string;
  samples?: number;
  stoppedBy?: AdaptiveStats['stoppedBy'];
  nodes?: number;
  expansions?: number;
}

export interface DeliberateResult {
  /** the answer the signal rates best (accepted, when one was) */
  text: string;
  tokens: number[];
  accepted: boolean;
  /** the stage that gave it */
  stage: DeliberateStage['stage'];
  /** tokens generated in all (at most budget); signalTokens: tokens evaluated for the entropy signal */
  spent: number;
  budget: number;
  signalTokens: number;
  uncertainty: 'min-logprob' | 'entropy' | 'verifier';
  threshold: number | null;
  stages: DeliberateStage[];
  wallMs: number;
}

export interface DistributionOptions extends Omit<SamplingOptions, 'maxTokens' | 'seed'> {
  /** entries returned, best first (default 20; at most the vocabulary) */
  topN?: number;
  addBos?: boolean;
  parseSpecial?: boolean;
}

export interface TokenizeOptions {
  /** prepend BOS (default: the model's add_bos flag) */
  addBos?: boolean;
  /** control-token text becomes its id (default false) */
  parseSpecial?: boolean;
}
/** countTokens(): the same options as tokenize(). */
export interface CountTokensOptions extends TokenizeOptions {}
export interface LogitsOptions {
  /** one row per token instead of the last token's */
  all?: boolean;
}
export interface QuantizeOptions {
  /** Node: write the GGUF file here instead of returning its bytes */
  outPath?: string;
}
export interface EmbedOptions {
  /** one vector from a text's token states: 'model' (default: the file's pooling_type, else 'mean'
   * for encoders such as bert, 'last' for decoders), 'mean', 'cls' (the first token's) or 'last' */
  pooling?: 'model' | 'mean' | 'cls' | 'last';
  /** scale each vector to length 1 (default true) */
  normalize?: boolean;
  signal?: AbortSignal;
}

export interface Beam { text: string; tokens: number[]; logprob: number; score: number; finishReason: FinishReason }

/**
 * A vocabulary in a worker of its own (loadTokenizer), or a Model, which is
 * one too. Calls are async: the worker keeps a large vocabulary off the
 * page's main thread.
 */
export declare class Tokenizer {
  protected constructor();
  readonly info: TokenizerInfo | ModelInfo;
  readonly disposed: boolean;
  tokenize(text: string, options?: TokenizeOptions): Promise<number[]>;
  /** The number of tokens tokenize(text, options) gives. */
  countTokens(text: string, options?: CountTokensOptions): Promise<number>;
  detokenize(ids: Iterable<number>): Promise<string>;
  /** Renders messages with the chat template, in the worker (which loads @huggingface/jinja on first use).
   * Rejects with code 'NO_CHAT_TEMPLATE' when the file has none and options.template is not given,
   * 'TEMPLATE_LIMIT' when the render goes past options.templateLimits, 'TEMPLATE_ERROR' when the
   * template does not parse or fails to render. */
  applyChatTemplate(messages: ChatMessage[], options?: ChatTemplateOptions): Promise<string>;
  /** Frees it and ends its worker at once: requests in flight or queued reject with code 'DISPOSED'. */
  dispose(): Promise<void>;
}

export declare class Model extends Tokenizer {
  private constructor();
  readonly info: ModelInfo;
  /** Memory of the model's engine: wasm memory size (its peak), bytes in use, file size. */
  memory(): Promise<{ wasmBytes: number; engineBytes: number; fileBytes: number }>;
  /** Threads really used for compute. */
  readonly threads: number;
  /** SIMD flavour of the engine build in use. */
  readonly simd: 'relaxed' | 'simd128' | 'custom';
  /** Whether the engine build in use is a memory64 (wasm64) one. */
  readonly memory64: boolean;
  readonly disposed: boolean;
  /** Streams a completion of `prompt` (a string, or token ids). */
  generate(prompt: string | number[], options?: PlainGenerateOptions): Generation;
  complete(prompt: string | number[], options?: CompleteOptions): Promise<CompletionResult>;
  /** Streams the assistant's reply: the rendered prompt's special tokens are parsed to ids,
   * BOS is not doubled, and generation stops on the model's end-of-generation tokens. */
  chat(messages: ChatMessage[], options?: ChatOptions): Generation;
  /** The whole assistant reply (onToken streams). */
  chatComplete(messages: ChatMessage[], options?: ChatCompleteOptions): Promise<CompletionResult>;
  /** Raw logits from an empty context: the last token's, or with {all: true} one row per token. */
  logits(tokens: number[], options?: LogitsOptions): Promise<Float32Array[]>;
  /** The context's sequence as bytes: a versioned header, the model's fingerprint, its tokens (with the
   * token a plain generation sampled last), the keys and values of the cache rows it uses (its size
   * grows with the tokens, not with the context length) and the random stream to resume. */
  saveState(): Promise<Uint8Array>;
  /** Puts a saveState() back: the same model file (its fingerprint), a context long enough, the same
   * kvType (and for an onFull 'slide' context that slid, the same contextLength and nKeep). Then
   * generate(prompt, {resume: true}) continues exactly, and a prompt that starts with the saved tokens
   * (a chat's next turn) reuses their cache. Anything else (cut short, corrupt, another version,
   * another model, too long for the context) rejects with BAD_SAVED_STATE, the context unchanged. */
  loadState(bytes: Uint8Array | ArrayBuffer | ArrayBufferView): Promise<{ tokens: number[]; positions: number; resumable: boolean }>;
  /** Next-token distribution after `text` (top `topN`, default 20): the model's raw distribution
   * (temperature 1, no topK/topP/minP, no repeat penalty) unless sampling options are given, which
   * then apply as in generation (e.g. {temperature: 0.8, topK: 40}). */
  nextTokenDistribution(text: string | number[], options?: DistributionOptions): Promise<TokenProb[]>;
  /** n candidates decoded as one batch (the prompt prefilled once, its cache shared), scored, best first. */
  bestOfN(prompt: string | number[], options?: BestOfNOptions): Promise<BestOfNResult>;
  /** Majority vote over answers extract() pulls out of n samples. */
  selfConsistency<A = unknown>(prompt: string | number[], options: SelfConsistencyOptions<A>): Promise<SelfConsistencyResult<A>>;
  /** Resamples (seed, seed+1, ...) until verify accepts or maxAttempts; returns every attempt. */
  generateUntil(prompt: string | number[], options: GenerateUntilOptions): Promise<{ ok: boolean; result: Attempt | null; attempts: Attempt[] }>;
  /** Tree search over steps: beam, best-first or MCTS; each call grows nodes as one batch sharing their paths in the cache. */
  treeSearch(prompt: string | number[], options?: TreeSearchOptions): Promise<TreeSearchResult>;
  /** Answers greedily; when the answer looks uncertain (its min log-prob, its mean entropy, or a verifier), spends more
   * (adaptive best-of-N, then tree search) within a budget of tokens, and reports what it spent and why. */
  deliberate(prompt: string | number[], options?: DeliberateOptions): Promise<DeliberateResult>;
  /** Deterministic beam search on forked sequences. */
  beamSearch(prompt: string | number[], options?: BeamSearchOptions): Promise<{ beams: Beam[]; stats: { promptTokens: number; steps: number; wallMs: number } }>;
  /** Embeddings: one Float32Array (info.embedding.length floats) per text, in order; a single string
   * gives an array of one. An element may be token ids, used as they are. L2-normalized unless
   * {normalize: false}. Works for encoders (bert, nomic-bert) and decoders (pooled final-norm states). */
  embed(texts: string | Array<string | number[]>, options?: EmbedOptions): Promise<Float32Array[]>;
  /** Re-quantizes the model; with outPath (Node) writes the GGUF file there. */
  quantize(type: QuantType, options?: QuantizeOptions): Promise<QuantizeResult>;
}

/**
 * Stable error codes. Options are checked on the caller's thread before any
 * work: unknown keys (with the closest known key suggested), wrong types and
 * out-of-range values reject with BAD_OPTION naming the option. Engine
 * failures map C statuses to BAD_ARGUMENT, BAD_FORMAT, TRUNCATED, UNSUPPORTED, NOMEM, CONTEXT_FULL, BAD_STATE
 * (the C name is in `statusName`, its number in `status`).
 */
export type WasmlmErrorCode =
  | 'BAD_OPTION' | 'DISPOSED' | 'ABORTED' | 'TEMPLATE_LIMIT' | 'TEMPLATE_ERROR' | 'NO_CHAT_TEMPLATE'
  | 'NETWORK' | 'NOT_FOUND' | 'UNAUTHORIZED' | 'INTEGRITY' | 'BAD_FILE' | 'WORKER' | 'UNSUPPORTED' | 'TOO_LARGE' | 'VOCAB_MISMATCH' | 'BAD_SCHEMA' | 'INTERNAL'
  | 'BAD_ARGUMENT' | 'BAD_FORMAT' | 'TRUNCATED' | 'NOMEM' | 'CONTEXT_FULL' | 'BAD_STATE' | 'BAD_SAVED_STATE' | 'ENGINE' | 'CALLBACK'
  | (string & {});

/** Every failure the package reports; `code` is stable, `option` names the option for BAD_OPTION. */
export declare class WasmlmError extends Error {
  constructor(code: WasmlmErrorCode, message: string, props?: Record<string, unknown>);
  readonly code: WasmlmErrorCode;
  /** BAD_OPTION: the option (or argument) at fault */
  readonly option?: string;
  /** engine failures: the C wlm_status number and name (e.g. 5, 'WLM_ERR_NOMEM') */
  readonly status?: number;
  readonly statusName?: string;
  /** BAD_OPTION for an unknown key: the closest known option, when one is close */
  readonly suggestion?: string | null;
  /** CALLBACK: which callback failed ('score', 'isFinal', 'onNode', deliberate's 'verify'), on which node; `cause` is its error */
  readonly callback?: string;
  readonly node?: number;
  /** BAD_SCHEMA: the JSON Schema keyword at fault (null when the schema as a whole is) */
  readonly keyword?: string | null;
  /** BAD_SCHEMA: JSON Pointer of that keyword in the schema ('' for the whole schema) */
  readonly path?: string;
  /** UNAUTHORIZED (HTTP 401 / 403 from a hub): whether an access token was sent, and where it came from
   * ('hubToken', 'WASMLM_HUB_TOKEN', 'HF_TOKEN'; null when none was sent) */
  readonly tokenSent?: boolean;
  readonly tokenFrom?: string | null;
  /** TOO_LARGE: the model file's size and the limit it is over, in bytes */
  readonly size?: number;
  readonly limit?: number;
}

/** Options of jsonSchemaToGbnf / jsonGrammar (docs/json-schema.md). */
export interface JsonGrammarOptions {
  /** 'flexible' (default): after { [ , : and before } ] nothing, one space, or a newline and up to
   * maxIndent spaces/tabs; 'compact': no whitespace at all. */
  whitespace?: 'flexible' | 'compact';
  /** Spaces/tabs allowed after a newline in 'flexible' mode, 0..256; default 24. */
  maxIndent?: number;
}
/** GBNF text (start rule `root`) whose every sentence is JSON valid against `schema` (the JSON Schema
 * 2020-12 subset of docs/json-schema.md); BAD_SCHEMA naming the keyword and its JSON Pointer otherwise. */
export declare function jsonSchemaToGbnf(schema: object | boolean, options?: JsonGrammarOptions): string;
/** GBNF text for any JSON value, or with `object: true` any JSON object. */
export declare function jsonGrammar(options?: JsonGrammarOptions & { object?: boolean }): string;

export declare function loadModel(source: ModelSource, options?: LoadOptions): Promise<Model>;
/** Loads only a GGUF file's vocabulary (a model, or a vocabulary-only file such as ggml-vocab-*.gguf), from
 * the sources loadModel takes: only its header and metadata are read (a URL by Range requests when the
 * server allows them; a split GGUF's first part). */
export declare function loadTokenizer(source: ModelSource, options?: TokenizerLoadOptions): Promise<Tokenizer>;

/** A cached model: browsers key it by URL (Cache Storage 'wasmlm-models-v1'), Node by file path in the cache directory. */
export interface CachedModel { key: string; name: string; size: number; cachedAt: string | null }
/** Cached models (browsers: Cache Storage; Node: options.cacheDir / WASMLM_CACHE / ~/.cache/wasmlm). */
export declare function listCachedModels(options?: { cacheDir?: string }): Promise<CachedModel[]>;
/** Deletes one cached model by its key; resolves true when something was deleted. */
export declare function deleteCachedModel(key: string, options?: { cacheDir?: string }): Promise<boolean>;
/** Deletes every cached model; resolves with the count. */
export declare function clearModelCache(options?: { cacheDir?: string }): Promise<number>;
/** Name of the browser Cache Storage cache holding models. */
export declare const MODEL_CACHE: string;

export declare const DEFAULT_SAMPLING: Readonly<Required<Omit<SamplingOptions, 'logitBias'>>>;
export declare const DEFAULT_CONTEXT: Readonly<{ contextLength: number; batchSize: number; kvType: 'f32' | 'f16'; onFull: 'error' | 'slide'; nKeep: number }>;
export declare const QUANT_TYPES: Readonly<Record<QuantType, number>>;

/** Compiles (once) the engine's WebAssembly.Module. */
export declare function getWasmModule(wasm?: WebAssembly.Module | ArrayBuffer | ArrayBufferView | string | URL | null, threaded?: boolean, simd?: 'simd128' | 'relaxed', memory64?: boolean): Promise<WebAssembly.Module>;
/** Whether this JS engine runs relaxed SIMD correctly (a known-answer probe module). */
export declare function relaxedSimdAvailable(): Promise<boolean>;
/** Whether this JS engine runs the memory64 (wasm64) builds (a known-answer probe module and a
 * 16 GiB memory64 memory); `shared`: threaded too; `reason`: why not. */
export declare function memory64Support(): Promise<{ ok: boolean; shared: boolean; reason: string | null }>;
/** Default compute threads: available cores, at most 8. */
export declare function defaultThreads(): Promise<number>;

/** A parsed hub id (web/hub.js): path (a file) or quant (a quantization) may be null. */
export interface HubId { owner: string; repo: string; revision: string; path: string | null; quant: string | null; id: string }
/** Whether a string is written as a hub id ('hf:...'). */
export declare function isHubId(source: unknown): boolean;
/** Parses 'hf:OWNER/REPO[@REV][/PATH.gguf | :QUANT]'; BAD_OPTION when malformed. */
export declare function parseHubId(id: string): HubId;
/** One file of a hub repository: size and sha256 are known when the listing was read. */
export interface HubFile { path: string; url: string; size: number | null; sha256: string | null }
/** Resolves a hub id to its file's resolve URL (reading the repository's listing for a quantization):
 * NOT_FOUND (listing the GGUF files that exist), BAD_OPTION (several matches) or UNAUTHORIZED (a gated
 * or private repository: see LoadOptions.hubToken) otherwise. The first part of a split GGUF comes with
 * `parts`, every part in order (null otherwise). */
export declare function resolveHubId(id: string, options?: { hubUrl?: string; hubToken?: string; signal?: AbortSignal; timeout?: number }):
  Promise<HubId & HubFile & { hubUrl: string; parts: HubFile[] | null }>;

export interface RegistryEntry {
  url: string;
  sha256?: string;
  size?: number;
  license?: string;
  description?: string;
}

export interface ResolvedModel {
  name: string;
  /** Node: local file */
  path?: string;
  source?: 'modelDir' | 'cache' | 'download';
  /** browsers: where to fetch it */
  url?: string;
  sha256?: string | null;
  size?: number | null;
  entry: RegistryEntry | null;
}

export declare function resolveModel(name: string, options?: {
  modelDir?: string; cacheDir?: string; registry?: Record<string, RegistryEntry>;
  onProgress?: (p: LoadProgress) => void; signal?: AbortSignal; offline?: boolean;
  /** stall timeout of a download in ms (default REGISTRY_TIMEOUT_MS, 0 = none) */
  timeout?: number;
}): Promise<ResolvedModel>;

/** Default stall timeout (ms) of registry downloads: 30,000. */
export declare const REGISTRY_TIMEOUT_MS: number;
/** Validates a sha256 option: returns it lower-cased (null for null/undefined); throws a BAD_OPTION
 * WasmlmError naming `option` unless it is 64 hex digits. */
export declare function checkSha256(value: unknown, option?: string): string | null;

export declare function registryEntries(options?: { registry?: Record<string, RegistryEntry> }): Promise<Record<string, RegistryEntry>>;

declare const _default: { loadModel: typeof loadModel; loadTokenizer: typeof loadTokenizer; DEFAULT_SAMPLING: typeof DEFAULT_SAMPLING };
export default _default;
