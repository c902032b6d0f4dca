// Synthetic model generator: valid GGUFs with random weights (normal, std
// 0.02, fixed seed) in real shapes, for speed and architecture tests:
// llama with a 32000-piece SentencePiece-style vocabulary (default), a
// Llama 3 style llama (RoPE scaling, byte-level BPE, chat template), qwen2
// (Q/K/V biases, NEOX RoPE, ChatML), qwen3 (per-head Q/K RMSNorm, the Qwen3
// template with thinking blocks), smollm3 (every 4th layer without RoPE),
// granite (embedding/residual/attention/logit multipliers), gemma2 and gemma3
// (norm weights stored as the multipliers 1 + w, post-attention/post-FFN
// norms, a sliding window, soft-capping or Q/K norms, a Gemma vocabulary and
// chat template), phi3 (fused QKV and gate/up tensors, LongRoPE factors,
// Phi-3 chat template) and Mistral-style llama with attention.sliding_window.
// llama.cpp-based engines accept these files.
// Weights are written as F32 or F16; other types come from `wasmlm quantize`.
import { writeGGUF, T, GGML } from './gguf-writer.js';

export const SHAPES = {
  // name: embedding, layers, heads, kv heads, ffn, context
  tiny: { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 192, ctx: 256, vocab: 512 },
  s15m: { dim: 288, layers: 6, heads: 6, kvHeads: 6, ffn: 768, ctx: 256, vocab: 32000 },
  s110m: { dim: 768, layers: 12, heads: 12, kvHeads: 12, ffn: 2048, ctx: 1024, vocab: 32000 },
  tl1b: { dim: 2048, layers: 22, heads: 32, kvHeads: 4, ffn: 5632, ctx: 2048, vocab: 32000 },
  // Qwen2.5-0.5B's dimensions and vocabulary size (with arch 'qwen2' and
  // bpeFill, a byte-level BPE vocabulary of that size)
  q05b: { dim: 896, layers: 24, heads: 14, kvHeads: 2, ffn: 4864, ctx: 2048, vocab: 151936 },
  // all-MiniLM-L6-v2's shape (arch 'bert'): the embedding benchmark's
  minilm: { dim: 384, layers: 6, heads: 12, kvHeads: 12, ffn: 1536, ctx: 512, vocab: 30522 },
};

// xorshift128+ with Box-Muller: fast, seeded, platform independent
function rng(seed) {
  let s0 = BigInt.asUintN(64, BigInt(seed) * 0x9E3779B97F4A7C15n + 1n), s1 = BigInt.asUintN(64, s0 * 0xBF58476D1CE4E5B9n + 7n);
  // use 32-bit state in Numbers for speed (xorshift128)
  let x = Number(s0 & 0xffffffffn) | 1, y = Number(s0 >> 32n) | 0, z = Number(s1 & 0xffffffffn) | 0, w = Number(s1 >> 32n) | 0;
  const u32 = () => { const t = x ^ (x << 11); x = y; y = z; z = w; w = (w ^ (w >>> 19) ^ (t ^ (t >>> 8))) >>> 0; return w; };
  let spare = null;
  return () => {
    if (spare !== null) { const s = spare; spare = null; return s; }
    const u = (u32() + 1) / 4294967297, v = u32() / 4294967296;
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
export function toHalf(f) {
  // round-to-nearest-even float -> half (normal range is all we produce)
  f32buf[0] = f;
  const x = u32buf[0], sign = (x >>> 16) & 0x8000, ax = x & 0x7fffffff;
  if (ax < 0x38800000) { // subnormal half
    if (ax < 0x33000000) return sign;
    const e = ax >>> 23, m = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
    let q = m >>> shift; const rem = m & ((1 << shift) - 1), half = 1 << (shift - 1);
    if (rem > half || (rem === half && (q & 1))) q++;
    return sign | q;
  }
  const r = ax - 0x38000000; let q = r >>> 13; const rem = r & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (q & 1))) q++;
  return sign | Math.min(q, 0x7bff);
}

/** Tensor data writers over the random stream `r`: fromFloats(n, type, f) writes f(0..n-1) as F32 or F16 in
 * chunks; random(ne, type, std) writes std x r() values. One definition for every generator below. */
function writers(r) {
  const CH = 1 << 16;
  const fromFloats = (n, t, f) => (emit) => {
    for (let i = 0; i < n; i += CH) {
      const m = Math.min(CH, n - i);
      if (t === GGML.F32) { const a = new Float32Array(m); for (let j = 0; j < m; j++) a[j] = f(i + j); emit(new Uint8Array(a.buffer)); }
      else { const a = new Uint16Array(m); for (let j = 0; j < m; j++) a[j] = toHalf(f(i + j)); emit(new Uint8Array(a.buffer)); }
    }
  };
  return { fromFloats, random: (ne, t, std = 0.02) => fromFloats(ne.reduce((a, b) => a * b, 1), t, () => std * r()) };
}

function vocabulary(n) {
  const tokens = ['<unk>', '<s>', '</s>'], types = [2, 3, 3], scores = [0, 0, 0];
  for (let b = 0; b < 256; b++) { tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`); types.push(6); scores.push(0); }
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const seen = new Set(tokens);
  // single letters and '▁'-words first (so every text can be encoded), then
  // synthetic pieces of growing length
  const add = (p) => { if (!seen.has(p) && tokens.length < n) { seen.add(p); tokens.push(p); types.push(1); scores.push(-tokens.length); } };
  add('\u2581');
  for (const c of letters) { add(c); add('\u2581' + c); }
  // synthetic pieces: every length-2 string, then length-3, ... in a fixed
  // order, each with and without the word-start mark
  for (let len = 2; tokens.length < n; len++) {
    const total = 26 ** len;
    for (let i = 0; i < total && tokens.length < n; i++) {
      let p = '', k = i;
      for (let j = 0; j < len; j++) { p += letters[k % 26]; k = Math.floor(k / 26); }
      add('\u2581' + p); add(p);
    }
  }
  return { tokens, types, scores };
}

// ---- byte-level BPE vocabulary (GPT-2 style) ---------------------------------

/** GPT-2's printable stand-in for each byte: printable Latin-1 bytes map to
 * themselves, the others to U+0100 upwards in byte order. */
export function byteToChar() {
  const map = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    map[b] = String.fromCodePoint(printable ? b : next++);
  }
  return map;
}

const BPE_WORDS = [
  'Hello', 'Hi', 'hello', 'world', 'user', 'assistant', 'system', 'the', 'and', 'you', 'How', 'are', 'is',
  'story', 'Once', 'upon', 'time', 'there', 'was', 'little', 'girl', 'named', 'Lily', 'happy', 'What',
  'can', 'help', 'with', 'today', 'name', 'You', 'a', 'helpful', 'I', 'am', 'fine', 'thanks',
];

/**
 * A small byte-level BPE vocabulary: the 256 byte characters, merges that
 * build a few English words (with and without the 'Ġ' space mark) and
 * two-letter pieces up to `n` tokens, then the control tokens `specials`.
 * With `fill`, merges go on until the vocabulary has `n` tokens: every pair
 * of characters of FILL_CHARS (letters, digits, JSON punctuation, the space
 * and line-break marks), then each such pair with one more character, then
 * each triple with one more: pieces like 'Ġ{"', '":', '12', 'Ġthe' that a
 * real large vocabulary has, for the grammar benchmark's trie.
 */
export function bpeVocabulary(n, specials, fill = false) {
  const b2c = byteToChar();
  const tokens = [...b2c], types = new Array(256).fill(1), merges = [];
  const seen = new Set(tokens), mergeSet = new Set();
  const room = () => tokens.length < n - specials.length;
  const merge = (l, r) => {
    const m = `${l} ${r}`;
    if (mergeSet.has(m) || !room()) return seen.has(l + r);
    mergeSet.add(m); merges.push(m);
    if (!seen.has(l + r)) { seen.add(l + r); tokens.push(l + r); types.push(1); }
    return true;
  };
  const build = (w) => { // left to right: each prefix is a token before the next merge
    const chars = [...w];
    let cur = chars[0];
    for (const c of chars.slice(1)) { if (!merge(cur, c)) return; cur += c; }
  };
  const sp = b2c[32], nl = b2c[10];
  merge(nl, nl);
  for (const w of BPE_WORDS) { build(w); build(sp + w); }
  const letters = 'etaoinshrdlucmfwypvbgkjqxz';
  for (let i = 0; i < letters.length && room(); i++)
    for (let j = 0; j < letters.length && room(); j++) merge(letters[i], letters[j]);
  if (fill) {
    const chars = [...FILL_CHARS].map((c) => (c === ' ' ? sp : c === '\n' ? nl : c));
    let level = [...chars];
    while (room() && level.length) {
      const next = [];
      for (const l of level) for (const c of chars) { if (!room()) break; if (merge(l, c)) next.push(l + c); }
      level = next;
    }
  }
  for (const s of specials) { tokens.push(s); types.push(3); }
  return { tokens, types, merges };
}
const FILL_CHARS = 'etaoinshrdlucmfwypvbgkjqxzETAOINS0123456789 "{}[]:,.-_\n';

// ---- chat templates (written for the synthetic models; same formats as the
// families they imitate) ---------------------------------------------------------

export const CHAT_TEMPLATES = {
  chatml: "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
  // Phi-3 / Phi-3.5-mini-instruct's template as published with the models
  phi3: "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}" +
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}" +
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
  // Gemma 2 / Gemma 3's published template (no system role; 'assistant' renders as 'model')
  gemma: "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" +
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}" +
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}" +
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
  llama3: "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}" +
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
};

/** Llama 3.1 RoPE frequency divisors (rope_freqs.weight) for n_rot dims. */
export function llama3RopeDivisors(nRot, base, { factor = 8, lowFreqFactor = 1, highFreqFactor = 4, originalContext = 8192 } = {}) {
  const out = new Float32Array(nRot / 2);
  for (let i = 0; i < nRot / 2; i++) {
    const theta = Math.pow(base, -2 * i / nRot), wavelen = 2 * Math.PI / theta;
    if (wavelen < originalContext / highFreqFactor) out[i] = 1;
    else if (wavelen > originalContext / lowFreqFactor) out[i] = factor;
    else {
      const smooth = (originalContext / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / factor + smooth);
    }
  }
  return out;
}

// The Qwen3 chat template as Qwen3 GGUF files carry it (tools, thinking
// blocks: reasoning kept only after the last user query; enable_thinking=false
// pre-fills an empty think block)
CHAT_TEMPLATES.qwen3 = String.raw`{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}`;

// written for the synthetic granite models (Granite 3's role markers)
CHAT_TEMPLATES.granite = "{% for message in messages %}{{ '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|start_of_role|>assistant<|end_of_role|>' }}{% endif %}";

export const ARCHS = ['llama', 'llama3', 'qwen2', 'qwen3', 'smollm3', 'granite', 'gemma2', 'gemma3', 'phi3', 'bert', 'nomic-bert'];

// granite multipliers of the synthetic models (Granite 3.x files carry values
// of this kind: embeddings x12, block outputs x0.22, logits / 8)
export const GRANITE_SCALES = { embedding: 12, residual: 0.22, attention: 0.3, logit: 2 };

/** Synthetic LongRoPE divisors (phi3): short ones near 1, long ones growing
 * to 16 with the wavelength, as the published factor lists do. */
export function phi3RopeFactors(nRot) {
  const half = nRot / 2, short = new Float32Array(half), long = new Float32Array(half);
  for (let i = 0; i < half; i++) {
    const t = half > 1 ? i / (half - 1) : 0;
    short[i] = 1 + 0.25 * t * t;
    long[i] = 1 + 15 * t * t;
  }
  return { short, long };
}

// Phi-3's added tokens (ids follow the base vocabulary, in Phi-3's order)
export const PHI3_SPECIALS = ['<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>',
  '<|placeholder4|>', '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>'];

/** A Gemma-style SentencePiece vocabulary of n pieces: <pad>, <eos>, <bos>,
 * <unk>, <start_of_turn>, <end_of_turn> first, then the synthetic pieces. */
function gemmaVocabulary(n) {
  const v = vocabulary(n - 3);
  const head = ['<pad>', '<eos>', '<bos>', '<unk>', '<start_of_turn>', '<end_of_turn>'];
  return {
    tokens: [...head, ...v.tokens.slice(3)],
    types: [3, 3, 3, 2, 3, 3, ...v.types.slice(3)],
    scores: [0, 0, 0, 0, 0, 0, ...v.scores.slice(3)],
  };
}

/**
 * The keys every generator starts with: the architecture, the name, the
 * file type and the <arch>.* sizes, in the converter's order.
 */
function generalKeys(arch, name, s, wt) {
  return [
    { key: 'general.architecture', type: T.STRING, value: arch },
    { key: 'general.name', type: T.STRING, value: `wasmlm-synthetic-${name}` },
    { key: 'general.file_type', type: T.U32, value: wt === GGML.F32 ? 0 : 1 },
    { key: `${arch}.context_length`, type: T.U32, value: s.ctx },
    { key: `${arch}.embedding_length`, type: T.U32, value: s.dim },
    { key: `${arch}.block_count`, type: T.U32, value: s.layers },
    { key: `${arch}.feed_forward_length`, type: T.U32, value: s.ffn },
  ];
}

/**
 * The tokenizer.ggml.* keys of a vocabulary, in the converter's order: the
 * tokenizer model, `pre`, the tokens, their scores (when v has them), types,
 * merges (when v has them), `typeCount` (token_type_count), then `ids` (name
 * -> token id, written as <name>_token_id) and `flags` (key -> BOOL) in the
 * order given, and the chat template when there is one.
 */
function tokenizerKeys(model, v, { pre, typeCount, ids = {}, flags = {}, template = null } = {}) {
  const kv = [{ key: 'tokenizer.ggml.model', type: T.STRING, value: model }];
  if (pre) kv.push({ key: 'tokenizer.ggml.pre', type: T.STRING, value: pre });
  kv.push({ key: 'tokenizer.ggml.tokens', type: T.ARRAY, arrayType: T.STRING, value: v.tokens });
  if (v.scores) kv.push({ key: 'tokenizer.ggml.scores', type: T.ARRAY, arrayType: T.F32, value: v.scores });
  kv.push({ key: 'tokenizer.ggml.token_type', type: T.ARRAY, arrayType: T.I32, value: v.types });
  if (v.merges) kv.push({ key: 'tokenizer.ggml.merges', type: T.ARRAY, arrayType: T.STRING, value: v.merges });
  if (typeCount) kv.push({ key: 'tokenizer.ggml.token_type_count', type: T.U32, value: typeCount });
  for (const [name, id] of Object.entries(ids)) kv.push({ key: `tokenizer.ggml.${name}_token_id`, type: T.U32, value: id });
  for (const [key, on] of Object.entries(flags)) kv.push({ key: `tokenizer.ggml.${key}`, type: T.BOOL, value: on });
  if (template) kv.push({ key: 'tokenizer.chat_template', type: T.STRING, value: template });
  return kv;
}

/**
 * Writes a synthetic model.
 * @param {string} path output file
 * @param {keyof SHAPES | object} shape
 * @param {'f32'|'f16'} type weight type of the 2-D tensors
 * @param {number} seed
 * @param {object} [opts]
 * @param {'llama'|'llama3'|'qwen2'|'qwen3'|'smollm3'|'granite'|'gemma2'|'gemma3'|'phi3'} [opts.arch] 'llama' (default: SentencePiece vocab, RoPE base 10000);
 *   'llama3' (architecture llama, RoPE base 500000, Llama 3.1 frequency
 *   scaling as rope_freqs.weight, byte-level BPE vocab with Llama 3 control
 *   tokens, pre 'llama-bpe', a Llama 3 chat template); 'qwen2' (architecture
 *   qwen2: Q/K/V biases, NEOX RoPE base 1000000, BPE vocab with ChatML
 *   control tokens, pre 'qwen2', a ChatML chat template, eos <|im_end|>);
 *   'gemma2' / 'gemma3' (tied output, NEOX RoPE, GeGLU, every norm weight
 *   1 + N(0, 0.1) as the converter stores Gemma's (1 + w), post-attention and
 *   post-FFN norms, attention.sliding_window; gemma2: soft-capping 50 / 30,
 *   sliding window on even layers; gemma3: Q/K norms, RoPE base 1000000 on
 *   global layers (every sixth) and 10000 on the others, no soft-capping;
 *   a Gemma SentencePiece vocabulary and Gemma's chat template); 'phi3' (architecture
 *   phi3: attn_qkv.weight = Q, K, V rows; ffn_up.weight = gate rows then up rows, no ffn_gate;
 *   NEOX RoPE base 10000 with LongRoPE rope_factors_short/long.weight, rope.scaling.attn_factor
 *   and original_context_length; the SentencePiece vocab plus Phi-3's added tokens, eos
 *   <|endoftext|>, eot <|end|>, no BOS; Phi-3's chat template)
 *   'bert' / 'nomic-bert' (the embedding encoders as llama.cpp's converter writes them: a
 *   WordPiece vocabulary (makeModel's wordPieceVocabulary), token_types, LayerNorms with
 *   biases after attention and after the FFN; bert: absolute position_embd, Q/K/V/O and FFN
 *   biases, GELU FFN; nomic-bert: fused attn_qkv, NEOX RoPE base 1000, SwiGLU, no biases;
 *   attention.causal false, pooling_type from opts.pooling (default 1, mean))
 * @param {number} [opts.pooling] bert / nomic-bert: <arch>.pooling_type (0 none, 1 mean, 2 cls, 3 last);
 *   other architectures: written only when given (decoder embeddings)
 * @param {number} [opts.ropeOriginalContext] also phi3: rope.scaling.original_context_length (default
 *   ctx / 32, at least 1; contexts past it use the long factors)
 * @param {number} [opts.slidingWindow] attention.sliding_window: llama (Mistral-style, every layer; none
 *   by default) or gemma (its sliding layers only; default 4, so short prompts reach it)
 * @param {number} [opts.attnSoftcap] / [opts.finalSoftcap] gemma2 soft-capping values (default 50 / 30)
 * @param {number} [opts.embdStd] gemma: std of the token embeddings, which are the output matrix too
 *   (default 0.02; larger values give peaked next-token distributions)
 * @param {number} [opts.keyLength] / [opts.valueLength] head sizes (attention.key_length / value_length)
 * @param {'tensor'|'metadata'} [opts.ropeScaling] llama3: divisors as rope_freqs.weight (default) or rope.scaling.* metadata
 * @param {number} [opts.ropeOriginalContext] llama3 scaling: original context length (default 8192; small values
 *   scale more frequencies, so that short test prompts see the effect)
 * @param {string|false} [opts.chatTemplate] tokenizer.chat_template (false: none)
 *   'qwen3' (architecture qwen3: no biases, per-head attn_q_norm / attn_k_norm weights near 1,
 *   NEOX RoPE, attention.key_length/value_length always written, ChatML + <think> tokens, the
 *   Qwen3 chat template); 'smollm3' (llama-like, RoPE base 5000000, Llama 3 BPE vocab; llama.cpp
 *   leaves layers 3, 7, 11, ... unrotated); 'granite' (llama-like with granite.embedding_scale,
 *   residual_scale, attention.scale, logit_scale from opts.graniteScales or GRANITE_SCALES)
 * @param {boolean} [opts.bpeFill] byte-level BPE archs: fill the vocabulary to the shape's size
 *   (bpeVocabulary's fill; without it the synthetic BPE vocabulary stays near 1000 tokens)
 * @param {string[]} [opts.addedTokens] byte-level BPE archs: user-defined tokens appended to the
 *   vocabulary (as Qwen2.5's <tool_call> and </tool_call>: matched in text, printed)
 * @param {number} [opts.ropeBase] RoPE base (default by arch)
 * @param {number} [opts.outStd] std of output.weight (default 0.02; larger values spread the logits)
 * @param {number} [opts.qkStd] std of the Q and K weights (default 0.02; larger values make attention
 *   peaked, so that tests see RoPE at work)
 * @param {Array<[string,string]>} [opts.script] deterministic bigrams [after, next] (token texts):
 *   blocks contribute nothing (attn_output, ffn_down zero) and the output row
 *   of `next` is 4x the embedding of `after`, so greedy decoding follows the script
 */
export function makeModel(path, shape, type = 'f16', seed = 1234, opts = {}) {
  const s = typeof shape === 'string' ? SHAPES[shape] : shape;
  if (!s) throw new Error(`unknown shape ${shape} (known: ${Object.keys(SHAPES).join(', ')})`);
  const arch = opts.arch || 'llama';
  if (!ARCHS.includes(arch)) throw new Error(`unknown arch ${arch} (known: ${ARCHS.join(', ')})`);
  const wt = type === 'f32' ? GGML.F32 : GGML.F16;
  const gArch = arch === 'llama3' ? 'llama' : arch;
  const qwen = arch === 'qwen2' || arch === 'qwen3';
  const kl = opts.keyLength || s.dim / s.heads, vl = opts.valueLength || s.dim / s.heads;
  const qDim = kl * s.heads, kDim = kl * s.kvHeads, vDim = vl * s.kvHeads, oDim = vl * s.heads;
  const ropeBase = opts.ropeBase || { llama3: 500000, qwen2: 1000000, qwen3: 1000000, smollm3: 5000000, gemma3: 1000000 }[arch] || 10000;
  if (arch === 'gemma2' || arch === 'gemma3') return makeGemma(path, s, wt, seed, opts, { arch, shapeName: typeof shape === 'string' ? shape : 'custom', kl, vl, ropeBase });
  if (arch === 'bert' || arch === 'nomic-bert') return makeEncoder(path, s, wt, seed, opts, { arch, shapeName: typeof shape === 'string' ? shape : 'custom' });
  const kv = [
    ...generalKeys(gArch, `${arch}-${typeof shape === 'string' ? shape : 'custom'}`, s, wt),
    { key: `${gArch}.rope.dimension_count`, type: T.U32, value: kl },
    { key: `${gArch}.attention.head_count`, type: T.U32, value: s.heads },
    { key: `${gArch}.attention.head_count_kv`, type: T.U32, value: s.kvHeads },
    { key: `${gArch}.attention.layer_norm_rms_epsilon`, type: T.F32, value: qwen ? 1e-6 : 1e-5 },
    { key: `${gArch}.rope.freq_base`, type: T.F32, value: ropeBase },
  ];
  if (opts.slidingWindow) kv.push({ key: `${gArch}.attention.sliding_window`, type: T.U32, value: opts.slidingWindow });
  if (opts.pooling !== undefined) kv.push({ key: `${gArch}.pooling_type`, type: T.U32, value: opts.pooling });
  let phiFactors = null;
  if (arch === 'phi3') {
    const orig = opts.ropeOriginalContext || Math.max(1, Math.floor(s.ctx / 32));
    phiFactors = phi3RopeFactors(kl);
    kv.push({ key: 'phi3.rope.scaling.original_context_length', type: T.U32, value: orig });
    kv.push({ key: 'phi3.rope.scaling.attn_factor', type: T.F32, value: Math.sqrt(1 + Math.log(s.ctx / orig) / Math.log(orig)) });
  }
  if (opts.keyLength || opts.valueLength || arch === 'qwen3') {
    kv.push({ key: `${gArch}.attention.key_length`, type: T.U32, value: kl });
    kv.push({ key: `${gArch}.attention.value_length`, type: T.U32, value: vl });
  }
  if (arch === 'granite') {
    const g = { ...GRANITE_SCALES, ...opts.graniteScales };
    kv.push({ key: 'granite.embedding_scale', type: T.F32, value: g.embedding });
    kv.push({ key: 'granite.residual_scale', type: T.F32, value: g.residual });
    kv.push({ key: 'granite.attention.scale', type: T.F32, value: g.attention });
    kv.push({ key: 'granite.logit_scale', type: T.F32, value: g.logit });
  }
  const ropeScaling = arch === 'llama3' ? (opts.ropeScaling || 'tensor') : null;
  if (ropeScaling === 'metadata') {
    kv.push({ key: 'llama.rope.scaling.type', type: T.STRING, value: 'llama3' });
    kv.push({ key: 'llama.rope.scaling.factor', type: T.F32, value: 8 });
    kv.push({ key: 'llama.rope.scaling.low_freq_factor', type: T.F32, value: 1 });
    kv.push({ key: 'llama.rope.scaling.high_freq_factor', type: T.F32, value: 4 });
    kv.push({ key: 'llama.rope.scaling.original_context_length', type: T.U32, value: opts.ropeOriginalContext || 8192 });
  }
  // the chat template: the architecture's unless opts.chatTemplate says otherwise (false: none)
  const chat = (own) => (opts.chatTemplate !== undefined ? opts.chatTemplate || null : own);
  let vocabSize;
  if (arch === 'llama' || arch === 'phi3') {
    const v = vocabulary(arch === 'phi3' ? Math.max(s.vocab - PHI3_SPECIALS.length, 300) : s.vocab);
    if (arch === 'phi3') for (const t of PHI3_SPECIALS) { v.tokens.push(t); v.types.push(3); v.scores.push(0); }
    vocabSize = v.tokens.length;
    const id = (t) => v.tokens.indexOf(t);
    kv.push(...tokenizerKeys('llama', v, arch === 'phi3'
      ? { ids: { bos: 1, eos: id('<|endoftext|>'), unknown: 0, eot: id('<|end|>'), padding: id('<|endoftext|>') },
        flags: { add_bos_token: false }, template: chat(CHAT_TEMPLATES.phi3) }
      : { ids: { bos: 1, eos: 2, unknown: 0 }, template: chat(null) }));
  } else {
    const specials = arch === 'qwen2' ? ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
      : arch === 'qwen3' ? ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<think>', '</think>']
        : arch === 'granite' ? ['<|end_of_text|>', '<|start_of_role|>', '<|end_of_role|>']
          : ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'];
    const v = bpeVocabulary(Math.max(s.vocab, 300), specials, !!opts.bpeFill);
    // Qwen3's think markers are user-defined tokens (matched in text, printed)
    if (arch === 'qwen3') for (const t of ['<think>', '</think>']) v.types[v.tokens.indexOf(t)] = 4;
    for (const t of opts.addedTokens || []) { v.tokens.push(t); v.types.push(4); }
    vocabSize = v.tokens.length;
    const id = (t) => v.tokens.indexOf(t);
    const pre = qwen ? 'qwen2' : arch === 'granite' ? 'refact' : 'llama-bpe';
    kv.push(...tokenizerKeys('gpt2', v, qwen
      ? { pre, ids: { eos: id('<|im_end|>'), padding: id('<|endoftext|>'), bos: id('<|endoftext|>') }, flags: { add_bos_token: false },
        template: chat(arch === 'qwen3' ? CHAT_TEMPLATES.qwen3 : CHAT_TEMPLATES.chatml) }
      : arch === 'granite'
        ? { pre, ids: { bos: id('<|end_of_text|>'), eos: id('<|end_of_text|>') }, flags: { add_bos_token: false }, template: chat(CHAT_TEMPLATES.granite) }
        : { pre, ids: { bos: id('<|begin_of_text|>'), eos: id('<|eot_id|>') }, flags: { add_bos_token: true }, template: chat(CHAT_TEMPLATES.llama3) }));
  }

  const r = rng(seed);
  const { fromFloats, random } = writers(r);
  const ones = (n) => (emit) => emit(new Uint8Array(new Float32Array(n).fill(1).buffer));
  const zeros = (ne, t) => fromFloats(ne.reduce((a, b) => a * b, 1), t, () => 0);

  // a script makes token embeddings concrete first: the output rows copy them
  let embed = null, outRows = null;
  if (opts.script) {
    embed = new Float32Array(s.dim * vocabSize);
    for (let i = 0; i < embed.length; i++) embed[i] = 0.02 * r();
    outRows = new Float32Array(s.dim * vocabSize);
    for (let i = 0; i < outRows.length; i++) outRows[i] = 0.02 * r();
    const tokId = (t) => {
      const all = kv.find((e) => e.key === 'tokenizer.ggml.tokens').value;
      const i = all.indexOf(t);
      if (i < 0) throw new Error(`script token ${JSON.stringify(t)} is not in the vocabulary`);
      return i;
    };
    for (const [after, next] of opts.script) {
      const a = tokId(after), n = tokId(next);
      for (let j = 0; j < s.dim; j++) outRows[n * s.dim + j] = 4 * embed[a * s.dim + j];
    }
  }
  const tensors = [
    { name: 'token_embd.weight', ne: [s.dim, vocabSize], type: wt, write: embed ? fromFloats(embed.length, wt, (i) => embed[i]) : random([s.dim, vocabSize], wt) },
    { name: 'output_norm.weight', ne: [s.dim], type: GGML.F32, write: ones(s.dim) },
    { name: 'output.weight', ne: [s.dim, vocabSize], type: wt, write: outRows ? fromFloats(outRows.length, wt, (i) => outRows[i]) : random([s.dim, vocabSize], wt, opts.outStd || 0.02) },
  ];
  if (phiFactors) {
    tensors.push({ name: 'rope_factors_long.weight', ne: [kl / 2], type: GGML.F32, write: (emit) => emit(new Uint8Array(phiFactors.long.buffer)) });
    tensors.push({ name: 'rope_factors_short.weight', ne: [kl / 2], type: GGML.F32, write: (emit) => emit(new Uint8Array(phiFactors.short.buffer)) });
  }
  if (ropeScaling === 'tensor') {
    const div = llama3RopeDivisors(kl, ropeBase, { originalContext: opts.ropeOriginalContext || 8192 });
    tensors.push({ name: 'rope_freqs.weight', ne: [kl / 2], type: GGML.F32, write: (emit) => emit(new Uint8Array(div.buffer)) });
  }
  for (let l = 0; l < s.layers; l++) {
    const m = (name, ne, write) => tensors.push({ name: `blk.${l}.${name}`, ne, type: wt, write: write || random(ne, wt) });
    const bias = (name, n) => tensors.push({ name: `blk.${l}.${name}`, ne: [n], type: GGML.F32, write: random([n], GGML.F32, 0.1) });
    tensors.push({ name: `blk.${l}.attn_norm.weight`, ne: [s.dim], type: GGML.F32, write: ones(s.dim) });
    if (arch === 'phi3') { // one matrix: the Q rows, the K rows, the V rows
      const qk = opts.qkStd || 0.02, n = s.dim * (qDim + kDim);
      m('attn_qkv.weight', [s.dim, qDim + kDim + vDim], fromFloats(s.dim * (qDim + kDim + vDim), wt, (i) => (i < n ? qk : 0.02) * r()));
    } else {
      m('attn_q.weight', [s.dim, qDim], opts.qkStd ? random([s.dim, qDim], wt, opts.qkStd) : null);
      m('attn_k.weight', [s.dim, kDim], opts.qkStd ? random([s.dim, kDim], wt, opts.qkStd) : null);
      m('attn_v.weight', [s.dim, vDim]);
    }
    if (arch === 'qwen2') { bias('attn_q.bias', qDim); bias('attn_k.bias', kDim); bias('attn_v.bias', vDim); }
    if (arch === 'qwen3') {   // per-head norm weights near 1 (all heads share them)
      const near1 = (n) => fromFloats(n, GGML.F32, () => 1 + 0.2 * r());
      tensors.push({ name: `blk.${l}.attn_q_norm.weight`, ne: [kl], type: GGML.F32, write: near1(kl) });
      tensors.push({ name: `blk.${l}.attn_k_norm.weight`, ne: [kl], type: GGML.F32, write: near1(kl) });
    }
    m('attn_output.weight', [oDim, s.dim], opts.script ? zeros([oDim, s.dim], wt) : null);
    tensors.push({ name: `blk.${l}.ffn_norm.weight`, ne: [s.dim], type: GGML.F32, write: ones(s.dim) });
    if (arch === 'phi3') { // one matrix: the gate rows, then the up rows
      m('ffn_down.weight', [s.ffn, s.dim], opts.script ? zeros([s.ffn, s.dim], wt) : null);
      m('ffn_up.weight', [s.dim, 2 * s.ffn]);
    } else {
      m('ffn_gate.weight', [s.dim, s.ffn]);
      m('ffn_down.weight', [s.ffn, s.dim], opts.script ? zeros([s.ffn, s.dim], wt) : null);
      m('ffn_up.weight', [s.dim, s.ffn]);
    }
  }
  writeGGUF(path, kv, tensors);
  return path;
}

// gemma2 / gemma3: the key set and tensor layout the GGUF converter writes
// for them (no output.weight: the embeddings are the output matrix)
function makeGemma(path, s, wt, seed, opts, { arch, shapeName, kl, vl, ropeBase }) {
  const qDim = kl * s.heads, kDim = kl * s.kvHeads, vDim = vl * s.kvHeads, oDim = vl * s.heads;
  const g2 = arch === 'gemma2';
  const kv = [
    ...generalKeys(arch, `${arch}-${shapeName}`, s, wt),
    { key: `${arch}.attention.head_count`, type: T.U32, value: s.heads },
    { key: `${arch}.attention.head_count_kv`, type: T.U32, value: s.kvHeads },
    { key: `${arch}.attention.layer_norm_rms_epsilon`, type: T.F32, value: 1e-6 },
    { key: `${arch}.attention.key_length`, type: T.U32, value: kl },
    { key: `${arch}.attention.value_length`, type: T.U32, value: vl },
    { key: `${arch}.attention.sliding_window`, type: T.U32, value: opts.slidingWindow || 4 },
  ];
  if (opts.pooling !== undefined) kv.push({ key: `${arch}.pooling_type`, type: T.U32, value: opts.pooling });
  if (g2) {
    kv.push({ key: 'gemma2.attn_logit_softcapping', type: T.F32, value: opts.attnSoftcap ?? 50 });
    kv.push({ key: 'gemma2.final_logit_softcapping', type: T.F32, value: opts.finalSoftcap ?? 30 });
  } else {
    kv.push({ key: 'gemma3.rope.freq_base', type: T.F32, value: ropeBase });
  }
  const v = gemmaVocabulary(s.vocab);
  kv.push(...tokenizerKeys('llama', v, {
    ids: { bos: 2, eos: 1, unknown: 3, padding: 0 },
    flags: { add_bos_token: true, add_eos_token: false, add_space_prefix: false },
    template: opts.chatTemplate !== undefined ? opts.chatTemplate || null : CHAT_TEMPLATES.gemma,
  }));

  const r = rng(seed);
  const { fromFloats, random } = writers(r);
  // stored norm weights are Gemma's 1 + w
  const norm = (name, n) => ({ name, ne: [n], type: GGML.F32, write: fromFloats(n, GGML.F32, () => 1 + 0.1 * r()) });
  const tensors = [
    { name: 'token_embd.weight', ne: [s.dim, v.tokens.length], type: wt, write: random([s.dim, v.tokens.length], wt, opts.embdStd || 0.02) },
    norm('output_norm.weight', s.dim),
  ];
  for (let l = 0; l < s.layers; l++) {
    const m = (name, ne, std) => tensors.push({ name: `blk.${l}.${name}`, ne, type: wt, write: random(ne, wt, std) });
    tensors.push(norm(`blk.${l}.attn_norm.weight`, s.dim));
    m('attn_q.weight', [s.dim, qDim], opts.qkStd);
    m('attn_k.weight', [s.dim, kDim], opts.qkStd);
    m('attn_v.weight', [s.dim, vDim]);
    if (!g2) { tensors.push(norm(`blk.${l}.attn_q_norm.weight`, kl)); tensors.push(norm(`blk.${l}.attn_k_norm.weight`, kl)); }
    m('attn_output.weight', [oDim, s.dim]);
    tensors.push(norm(`blk.${l}.post_attention_norm.weight`, s.dim));
    tensors.push(norm(`blk.${l}.ffn_norm.weight`, s.dim));
    m('ffn_gate.weight', [s.dim, s.ffn]);
    m('ffn_up.weight', [s.dim, s.ffn]);
    m('ffn_down.weight', [s.ffn, s.dim]);
    tensors.push(norm(`blk.${l}.post_ffw_norm.weight`, s.dim));
  }
  writeGGUF(path, kv, tensors);
  return path;
}

// ---- bert / nomic-bert: embedding encoders ----------------------------------------

const WORDPIECE_WORDS = ['the', 'a', 'of', 'and', 'to', 'in', 'is', 'it', 'that', 'for', 'on', 'with', 'as', 'was',
  'hello', 'world', 'cat', 'dog', 'sat', 'mat', 'play', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'search',
  'embed', 'vector', 'text', 'model', 'un', 'cafe', 'naive', 'weather', 'today', 'sunny', 'rain', 'music', 'song'];
const WORDPIECE_SUFFIXES = ['s', 'ing', 'ed', 'er', 'ly', 'aff', 'able', 'ding', 'tion', 'ness'];

/**
 * A WordPiece vocabulary of n tokens as llama.cpp's converter stores BERT's
 * (ids as in bert-base-uncased's vocab.txt for the specials): [PAD] 0,
 * [unused0..98] 1-99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103; then
 * punctuation, digits and letters as word starts ("▁x") and continuations
 * ("x", BERT's "##x"), whole words, suffixes, and synthetic two- and
 * three-letter pieces of both kinds until n. Specials are control tokens
 * (type 3) and keep their text; every other piece is normal (type 1).
 */
export function wordPieceVocabulary(n) {
  const tokens = ['[PAD]'], types = [3];
  for (let i = 0; i < 99; i++) { tokens.push(`\u2581[unused${i}]`); types.push(1); }
  tokens.push('[UNK]', '[CLS]', '[SEP]', '[MASK]'); types.push(3, 3, 3, 3);
  const seen = new Set(tokens);
  const add = (p) => { if (!seen.has(p) && tokens.length < n) { seen.add(p); tokens.push(p); types.push(1); } };
  const chars = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~0123456789abcdefghijklmnopqrstuvwxyz';
  for (const c of chars) add('\u2581' + c);
  for (const c of chars) add(c);
  for (const w of WORDPIECE_WORDS) add('\u2581' + w);
  for (const w of WORDPIECE_SUFFIXES) add(w);
  const letters = 'etaoinshrdlucmfwypvbgkjqxz';
  for (let len = 2; tokens.length < n && len <= 3; len++) {
    const total = 26 ** len;
    for (let i = 0; i < total && tokens.length < n; i++) {
      let p = '', k = i;
      for (let j = 0; j < len; j++) { p += letters[k % 26]; k = Math.floor(k / 26); }
      add('\u2581' + p); add(p);
    }
  }
  for (let i = 0; tokens.length < n; i++) add(`\u2581w${i}`);
  return { tokens, types };
}

// bert / nomic-bert (see makeModel's doc): the key set and tensor layout
// llama.cpp's converter writes for BertModel / NomicBertModel
function makeEncoder(path, s, wt, seed, opts, { arch, shapeName }) {
  const bert = arch === 'bert';
  const d = s.dim, ff = s.ffn;
  // (an encoder has as many K/V heads as query heads: a shape's kvHeads is not used)
  const v = wordPieceVocabulary(Math.max(s.vocab, 200));
  const id = (t) => v.tokens.indexOf(t);
  const kv = [
    ...generalKeys(arch, `${arch}-${shapeName}`, s, wt),
    { key: `${arch}.attention.head_count`, type: T.U32, value: s.heads },
    { key: `${arch}.attention.layer_norm_epsilon`, type: T.F32, value: 1e-12 },
    { key: `${arch}.attention.causal`, type: T.BOOL, value: false },
    { key: `${arch}.pooling_type`, type: T.U32, value: opts.pooling ?? 1 },
  ];
  if (!bert) kv.push({ key: `${arch}.rope.freq_base`, type: T.F32, value: opts.ropeBase || 1000 });
  kv.push(...tokenizerKeys('bert', v, {
    typeCount: 2,
    ids: { unknown: id('[UNK]'), cls: id('[CLS]'), seperator: id('[SEP]'), padding: id('[PAD]'), mask: id('[MASK]') },
    flags: opts.lowercase === false ? { 'normalizer.lowercase': false } : {},
  }));

  const r = rng(seed);
  const { fromFloats, random } = writers(r);
  const vec = (name, n, f) => ({ name, ne: [n], type: GGML.F32, write: fromFloats(n, GGML.F32, f) });
  const norm = (name, n) => [vec(`${name}.weight`, n, () => 1 + 0.1 * r()), vec(`${name}.bias`, n, () => 0.05 * r())];
  const bias = (name, n) => vec(name, n, () => 0.05 * r());
  const qk = opts.qkStd || 0.02;
  const tensors = [
    { name: 'token_embd.weight', ne: [d, v.tokens.length], type: wt, write: random([d, v.tokens.length], wt, opts.embdStd || 0.05) },
    // (the converter keeps the token-type rows in F32)
    { name: 'token_types.weight', ne: [d, 2], type: GGML.F32, write: random([d, 2], GGML.F32, 0.05) },
  ];
  if (bert) tensors.push({ name: 'position_embd.weight', ne: [d, s.ctx], type: wt, write: random([d, s.ctx], wt, 0.05) });
  tensors.push(...norm('token_embd_norm', d));
  for (let l = 0; l < s.layers; l++) {
    const m = (name, ne, std) => tensors.push({ name: `blk.${l}.${name}`, ne, type: wt, write: random(ne, wt, std) });
    if (bert) {
      m('attn_q.weight', [d, d], qk); tensors.push(bias(`blk.${l}.attn_q.bias`, d));
      m('attn_k.weight', [d, d], qk); tensors.push(bias(`blk.${l}.attn_k.bias`, d));
      m('attn_v.weight', [d, d]); tensors.push(bias(`blk.${l}.attn_v.bias`, d));
    } else { // one matrix: the Q rows, the K rows, the V rows
      tensors.push({ name: `blk.${l}.attn_qkv.weight`, ne: [d, 3 * d], type: wt, write: fromFloats(3 * d * d, wt, (i) => (i < 2 * d * d ? qk : 0.02) * r()) });
    }
    m('attn_output.weight', [d, d]);
    if (bert) tensors.push(bias(`blk.${l}.attn_output.bias`, d));
    tensors.push(...norm(`blk.${l}.attn_output_norm`, d));
    if (!bert) m('ffn_gate.weight', [d, ff]);
    m('ffn_up.weight', [d, ff]);
    if (bert) tensors.push(bias(`blk.${l}.ffn_up.bias`, ff));
    m('ffn_down.weight', [ff, d]);
    if (bert) tensors.push(bias(`blk.${l}.ffn_down.bias`, d));
    tensors.push(...norm(`blk.${l}.layer_output_norm`, d));
  }
  writeGGUF(path, kv, tensors);
  return path;
}
