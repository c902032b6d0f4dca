// An OpenAI-style API over a Model (caller side): model.chat.completions.create
// and model.completions.create take OpenAI's request fields and return
// objects shaped like OpenAI's ChatCompletion / ChatCompletionChunk /
// Completion. Every field is checked here first: an unknown one is a
// BAD_OPTION naming it (with the closest known field), a known OpenAI field
// that wasmlm does not support is a BAD_OPTION saying why. The fields map
// onto the package's own options (docs/openai.md has the table), the work
// runs through the model's worker as generate (n = 1) or best-of-N (n > 1,
// one batch), always as a stream of tokens, so a streamed and a whole
// response are built by the same code from the same events.
//
// Tool calls (web/tools.js): tools go to the chat template; a required or
// named call is generated under a grammar of the family's call format; with
// tool_choice 'auto' the reply is free until it opens a call (the format's
// marker), and the call is then finished under the grammar.
import { WasmlmError, badOption, describe } from './errors.js';
import { checkOptions, checkValue, checkForModel, workerOptions, closestKey, checkPrompt } from './options.js';
import { CHANNEL } from './protocol.js';
import { abortError, streamRequest } from './abort.js';
import { chatGenerateOptions } from './chat.js';
import {
  normalizeTools, templateTools, templateMessages, toolFormatOf, toolCallGrammar, leadingMarkerGrammar,
  ToolCallParser, toolCallsOf, onlyKeys,
} from './tools.js';

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// ---- the request fields --------------------------------------------------------------

const COMMON = ['model', 'stream', 'stream_options', 'n', 'max_tokens', 'temperature', 'top_p', 'stop', 'seed',
  'logit_bias', 'presence_penalty', 'frequency_penalty', 'signal'];
/** The fields chat.completions.create takes (`signal`, an AbortSignal, is wasmlm's; the rest are OpenAI's). */
export const CHAT_FIELDS = Object.freeze(['messages', ...COMMON, 'max_completion_tokens', 'logprobs', 'top_logprobs',
  'response_format', 'tools', 'tool_choice', 'parallel_tool_calls']);
/** The fields completions.create takes. */
export const COMPLETION_FIELDS = Object.freeze(['prompt', ...COMMON, 'best_of', 'logprobs', 'echo']);

/** OpenAI fields that are not supported, and why (docs/openai.md lists them). */
export const UNSUPPORTED_FIELDS = Object.freeze({
  functions: "deprecated by OpenAI: give tools ([{type: 'function', function: {name, description, parameters}}])",
  function_call: 'deprecated by OpenAI: give tool_choice',
  audio: 'audio output needs a model with an audio decoder, which wasmlm does not run',
  modalities: 'only text in and text out',
  prediction: 'predicted outputs are not supported here; for speculative decoding use model.generate(prompt, {draft})',
  store: 'nothing is stored: the completion runs in this process and is not kept anywhere',
  metadata: 'it tags stored completions, and nothing is stored',
  service_tier: 'there are no service tiers: the model runs here',
  reasoning_effort: "a setting of OpenAI's reasoning models; a template's own switches (enable_thinking) are options of model.chat",
  verbosity: "a setting of OpenAI's models, not of a local model",
  web_search_options: 'no web search: the model runs without network tools',
  user: "an end-user id for OpenAI's abuse monitoring; nothing here would use it",
  safety_identifier: "an end-user id for OpenAI's abuse monitoring; nothing here would use it",
  prompt_cache_key: 'the cache of a prompt prefix is kept per model without a key (the reusePrefix option of generate)',
  suffix: 'insertion needs the model\'s own fill-in-the-middle prompt format: write that prompt and complete it',
  best_of: 'best_of belongs to completions.create; here n choices decode as one batch',
});

const WHERE = { chat: 'chat.completions.create', completions: 'completions.create' };

/** Checks the request's keys: known fields only, each unknown one named (with the closest), each unsupported one with its reason. */
function checkFields(body, known, where) {
  if (!isObj(body)) throw new WasmlmError('BAD_OPTION', `${where}: the request must be an object, got ${describe(body)}`, { option: 'request' });
  for (const key of Reflect.ownKeys(body)) {
    if (typeof key === 'symbol') throw new WasmlmError('BAD_OPTION', `${where}: unknown field ${String(key)}`, { option: String(key) });
    if (known.includes(key)) continue;
    const why = UNSUPPORTED_FIELDS[key];
    if (why) throw new WasmlmError('BAD_OPTION', `${where}: field ${key} is not supported: ${why}`, { option: key });
    const near = closestKey(key, known);
    throw new WasmlmError('BAD_OPTION', `${where}: unknown field ${key}${near ? ` — did you mean ${near}?` : ''}`, { option: key, suggestion: near });
  }
}

const given = (v) => v !== undefined && v !== null;

function intIn(field, v, lo, hi) {
  if (!(Number.isInteger(v) && v >= lo && v <= hi)) throw badOption(field, v, `must be an integer in [${lo}, ${hi}]`);
  return v;
}

function randomSeed() {
  const a = new Uint32Array(2);
  globalThis.crypto.getRandomValues(a);
  return (BigInt(a[0]) << 32n) | BigInt(a[1]);
}

/**
 * The package's sampling options from the request's fields (docs/openai.md):
 * OpenAI's defaults (temperature 1, top_p 1, no other filter), the penalty
 * window of max_tokens tokens, a random seed when none is given.
 */
export function samplingOf(b, method, nCtx, nVocab = Infinity) {
  const o = { topK: 0, minP: 0, typicalP: 1, repeatPenalty: 1, temperature: 1, topP: 1 };
  const set = (name, field) => { if (given(b[field])) o[name] = checkValue(name, b[field], method, field); };
  if (given(b.max_tokens) && given(b.max_completion_tokens) && b.max_tokens !== b.max_completion_tokens) {
    throw badOption('max_completion_tokens', b.max_completion_tokens, `must equal max_tokens (${b.max_tokens}) when both are given`);
  }
  set('maxTokens', 'max_tokens');
  set('maxTokens', 'max_completion_tokens');
  if (o.maxTokens === undefined) o.maxTokens = nCtx;   // OpenAI: up to the context
  set('temperature', 'temperature');
  if (o.temperature > 2) throw badOption('temperature', o.temperature, 'must be a number in [0, 2]');
  set('topP', 'top_p');
  set('presencePenalty', 'presence_penalty');
  set('frequencyPenalty', 'frequency_penalty');
  // OpenAI counts every token of the completion: a window of maxTokens holds them all
  o.repeatLastN = Math.max(1, o.maxTokens);
  if (given(b.seed)) {
    if (!Number.isSafeInteger(b.seed)) throw badOption('seed', b.seed, 'must be an integer (a safe integer; negative ones are taken modulo 2^64)');
    o.seed = BigInt.asUintN(64, BigInt(b.seed));
  } else o.seed = randomSeed();
  set('stop', 'stop');
  if (given(b.logit_bias)) {
    const lb = checkValue('logitBias', b.logit_bias, method, 'logit_bias');
    if (!isObj(lb)) throw badOption('logit_bias', lb, 'must be an object {tokenId: bias}');
    for (const [k, v] of Object.entries(lb)) {
      if (!(v >= -100 && v <= 100)) throw badOption(`logit_bias.${k}`, v, 'must be a number in [-100, 100]');
      if (Number(k) >= nVocab) throw badOption('logit_bias', lb, `token id ${k} out of range: ids are integers in [0, ${nVocab})`);
    }
    o.logitBias = lb;
  }
  return o;
}

function checkStream(b) {
  if (given(b.stream) && typeof b.stream !== 'boolean') throw badOption('stream', b.stream, 'must be true or false');
  const stream = b.stream === true;
  let includeUsage = false;
  if (given(b.stream_options)) {
    if (!stream) throw badOption('stream_options', b.stream_options, 'is only allowed with stream: true');
    if (!isObj(b.stream_options)) throw badOption('stream_options', b.stream_options, 'must be an object {include_usage}');
    onlyKeys(b.stream_options, ['include_usage'], 'stream_options');
    const iu = b.stream_options.include_usage;
    if (given(iu) && typeof iu !== 'boolean') throw badOption('stream_options.include_usage', iu, 'must be true or false');
    includeUsage = iu === true;
  }
  if (given(b.signal)) checkValue('signal', b.signal, 'generate', 'signal');
  if (given(b.model) && typeof b.model !== 'string') throw badOption('model', b.model, 'must be a string');
  return { stream, includeUsage };
}

/**
 * response_format as the package's structured-output options, turned into
 * their grammar here (so that a schema the converter refuses fails the
 * request at once, naming the field): json_object is `json: 'object'`,
 * json_schema is `jsonSchema` (docs/json-schema.md). null for text.
 */
function formatGrammar(rf) {
  if (!given(rf)) return null;
  if (!isObj(rf)) throw badOption('response_format', rf, "must be an object {type: 'text' | 'json_object' | 'json_schema'}");
  if (rf.type === 'text') { onlyKeys(rf, ['type'], 'response_format'); return null; }
  if (rf.type === 'json_object') { onlyKeys(rf, ['type'], 'response_format'); return checkOptions('generate', { json: 'object' }).grammar; }
  if (rf.type !== 'json_schema') throw badOption('response_format.type', rf.type, "must be 'text', 'json_object' or 'json_schema'");
  onlyKeys(rf, ['type', 'json_schema'], 'response_format');
  const js = rf.json_schema;
  if (!isObj(js)) throw badOption('response_format.json_schema', js, 'must be an object {name, schema, description?, strict?}');
  onlyKeys(js, ['name', 'schema', 'description', 'strict'], 'response_format.json_schema');
  if (typeof js.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(js.name)) throw badOption('response_format.json_schema.name', js.name, 'letters, digits, _ and -, 1 to 64 of them');
  if (given(js.strict) && typeof js.strict !== 'boolean') throw badOption('response_format.json_schema.strict', js.strict, 'must be true or false');
  if (given(js.description) && typeof js.description !== 'string') throw badOption('response_format.json_schema.description', js.description, 'must be a string');
  const field = 'response_format.json_schema.schema';
  try {
    return checkOptions('generate', { jsonSchema: given(js.schema) ? checkValue('jsonSchema', js.schema, 'generate', field) : true }).grammar;
  } catch (e) {
    if (e instanceof WasmlmError && e.code === 'BAD_SCHEMA') throw new WasmlmError('BAD_OPTION', `${field}: ${e.message}`, { option: field, cause: e });
    throw e;
  }
}

/** tools + tool_choice + parallel_tool_calls: {list, format, mode ('none'|'auto'|'forced'), forced (tools a forced call may use), parallel}. */
function toolPlan(b, template) {
  const choice = b.tool_choice;
  if (given(b.parallel_tool_calls) && typeof b.parallel_tool_calls !== 'boolean') throw badOption('parallel_tool_calls', b.parallel_tool_calls, 'must be true or false');
  if (!given(b.tools)) {
    if (given(choice) && choice !== 'none') throw badOption('tool_choice', choice, 'needs tools');
    return null;
  }
  const list = normalizeTools(b.tools);
  let mode = 'auto', forced = list;
  if (given(choice)) {
    if (choice === 'none' || choice === 'auto') mode = choice;
    else if (choice === 'required') mode = 'forced';
    else if (isObj(choice) && choice.type === 'function' && isObj(choice.function)) {
      onlyKeys(choice, ['type', 'function'], 'tool_choice');
      onlyKeys(choice.function, ['name'], 'tool_choice.function');
      forced = list.filter((t) => t.name === choice.function.name);
      if (forced.length === 0) throw badOption('tool_choice.function.name', choice.function.name, `must name one of the tools (${list.map((t) => t.name).join(', ')})`);
      mode = 'forced';
    } else throw badOption('tool_choice', choice, "must be 'none', 'auto', 'required' or {type: 'function', function: {name}}");
  }
  if (mode === 'none') return { list, mode, format: null };
  const format = toolFormatOf(template);
  if (!format) {
    throw new WasmlmError('BAD_OPTION', "option tools: this model's chat template shows no tool-call format wasmlm knows (Hermes/Qwen <tool_call> or " +
      "Llama 3.1 JSON with \"parameters\"), so its calls could be neither constrained nor parsed; with tool_choice 'none' the model answers in text", { option: 'tools' });
  }
  return { list, mode, forced, format, parallel: b.parallel_tool_calls !== false };
}

// ---- ids, logprobs ---------------------------------------------------------------

const ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function randomId(prefix, n = 24) {
  const a = new Uint8Array(n);
  globalThis.crypto.getRandomValues(a);
  let s = prefix;
  for (const x of a) s += ID_CHARS[x % ID_CHARS.length];
  return s;
}

const vocabTables = new WeakMap();   // Model -> Promise<{bytes, offsets}>

/** The bytes of every token of the model's vocabulary (fetched once per model, when logprobs are first asked for). */
function vocabTable(model) {
  let p = vocabTables.get(model);
  if (!p) {
    p = model[CHANNEL].call('vocabBytes', {});
    p.catch(() => vocabTables.delete(model));
    vocabTables.set(model, p);
  }
  return p;
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

function tokenInfo(table, id) {
  const bytes = table.bytes.subarray(table.offsets[id], table.offsets[id + 1]);
  return { token: utf8.decode(bytes), bytes: Array.from(bytes) };
}

// ---- decoding ------------------------------------------------------------------------

/**
 * One pass through the worker: n = 1 as generate, n > 1 as best-of-N (one
 * batch; candidate i samples with seed + i). Yields {index, text, token,
 * logprob, topLogprobs?} per token (token -1: text flushed at the end), and
 * returns {results (by index), promptTokens}.
 */
async function* decode(model, prompt, o, n, signal) {
  const checked = checkForModel(checkOptions(n > 1 ? 'bestOfN' : 'generate', n > 1 ? { ...o, n } : o), model.info.hparams.nVocab);
  const op = n > 1 ? 'bestOfN' : 'generate';
  const it = streamRequest(model[CHANNEL], op, { prompt, options: workerOptions(checked), stream: true }, signal);
  let r;
  try {
    while (!(r = await it.next()).done) {
      const e = r.value;
      yield { index: e.index ?? 0, text: e.text, token: e.token, logprob: e.logprob, topLogprobs: e.topLogprobs };
    }
  } finally {
    await it.return();
  }
  const results = n > 1 ? r.value.candidates.slice().sort((a, b) => a.index - b.index) : [r.value];
  return { results, promptTokens: (r.value.stats && r.value.stats.promptTokens) || 0 };
}

/** The finish reason of a choice in OpenAI's terms. */
function finishOf(choice, wasmlmReason) {
  if (choice.parser && choice.parser.complete && wasmlmReason === 'stop') return 'tool_calls';
  if (wasmlmReason === 'stop') return 'stop';
  return 'length';   // 'length' (max_tokens), 'context' (the context is full), 'grammar' (a grammar's dead end: incomplete)
}

/** One choice being built: content, tool calls, logprob entries, tokens, its end. */
class Choice {
  constructor(index, { calls, format }) {
    this.index = index;
    this.content = '';
    this.parser = calls ? new ToolCallParser(format) : null;
    this.callIds = [];
    this.logprobs = [];
    this.tokens = 0;
    this.lp = [];     // the log-probability of each generated token (best_of ranks by their mean)
    this.finish = null;
    this.held = '';   // 'auto' with a leading marker (llama3): a reply that begins with the marker is held back
  }
}

/**
 * A request ready to run: the prompt(s), the options, the tool plan. run()
 * is an async generator of per-choice deltas {index, delta, logprobs} and
 * {index, finish}, returning {choices, usage}.
 */
class Job {
  constructor(model, { prompts, o, n, tools, grammar, logprobs, signal }) {
    Object.assign(this, { model, prompts, o, n, tools, grammar, logprobs, signal });
    this.choices = [];
    this.promptTokens = 0;
    this.table = null;
  }

  entry(ev) {
    if (!this.logprobs.on || ev.token < 0) return null;
    const t = tokenInfo(this.table, ev.token);
    const top = (ev.topLogprobs || []).slice(0, this.logprobs.top).map((x) => { const i = tokenInfo(this.table, x.token); return { token: i.token, logprob: x.logprob, bytes: i.bytes }; });
    return { token: t.token, logprob: ev.logprob, bytes: t.bytes, top_logprobs: top };
  }

  /** The delta of a piece of a choice's text: content, or tool-call parts once calls are being written. */
  deltaOf(c, text, phase) {
    const delta = {};
    if (!text) return delta;
    if (c.parser && phase === 'calls') {
      const parts = new Map();
      for (const ev of c.parser.push(text)) {
        let p = parts.get(ev.index);
        if (!p) { p = { index: ev.index }; parts.set(ev.index, p); }
        if (ev.type === 'call') {
          c.callIds[ev.index] = randomId('call_');
          Object.assign(p, { id: c.callIds[ev.index], type: 'function', function: { name: ev.name, arguments: '' } });
        } else {
          p.function = p.function || {};
          p.function.arguments = (p.function.arguments || '') + ev.text;
        }
      }
      if (parts.size) delta.tool_calls = [...parts.values()];
      return delta;
    }
    if (this.tools && this.tools.mode === 'auto' && this.tools.format.leading && c.content === '' && c.held === '' && text.startsWith(this.tools.format.marker)) {
      c.held = text;   // the grammar lets a reply that starts with the marker be the marker alone
      return delta;
    }
    c.content += text;
    delta.content = text;
    return delta;
  }

  /** Runs a decode pass, yielding deltas for `who` (the choices of this pass, by the pass's index). */
  async* pass(prompt, o, who, phase) {
    const gen = decode(this.model, prompt, o, who.length, this.signal);
    let r;
    while (!(r = await gen.next()).done) {
      const ev = r.value;
      const c = who[ev.index];
      if (ev.token >= 0) { c.tokens++; c.lp.push(ev.logprob); }
      const delta = this.deltaOf(c, ev.text, phase);
      const entry = this.entry(ev);
      if (entry) c.logprobs.push(entry);
      if (Object.keys(delta).length || entry) yield { index: c.index, delta, logprobs: entry ? [entry] : null };
    }
    return r.value;
  }

  async* run() {
    if (this.logprobs.on) this.table = await vocabTable(this.model);
    const t = this.tools;
    const n = this.n;
    let base = 0;
    for (const prompt of this.prompts) {
      const forced = t && t.mode === 'forced';
      const auto = t && t.mode === 'auto';
      const who = [];
      for (let i = 0; i < n; i++) who.push(new Choice(base + i, { calls: forced || auto, format: t && t.format }));
      this.choices.push(...who);
      let o = this.o;
      if (forced) o = { ...o, grammar: toolCallGrammar(t.format, t.forced, { parallel: t.parallel }), stop: undefined };
      else if (auto && t.format.leading) o = { ...o, grammar: leadingMarkerGrammar(t.format) };
      else if (auto) {
        o = { ...o, stop: [...stopList(o.stop), t.format.marker] };
        if (o.stop.length > 64) throw badOption('stop', this.o.stop, 'at most 63 stop strings with tools (the tool-call marker takes one)');
      } else if (this.grammar) o = { ...o, grammar: this.grammar };
      if (o.stop === undefined) delete o.stop;
      for (const c of who) yield { index: c.index, delta: forced ? { role: 'assistant', content: null } : { role: 'assistant', content: '' }, logprobs: null };
      const first = yield* this.pass(prompt, o, who, forced ? 'calls' : 'content');
      this.promptTokens += first.promptTokens;
      for (let i = 0; i < n; i++) {
        const c = who[i], r = first.results[i];
        if (auto && await this.opened(c, r)) {
          yield* this.callPhase(prompt, c, r);
          continue;
        }
        if (c.held) { c.content += c.held; yield { index: c.index, delta: { content: c.held }, logprobs: null }; c.held = ''; }
        c.finish = finishOf(c, r.finishReason);
        yield { index: c.index, finish: c.finish };
      }
      base += n;
    }
    return this.result();
  }

  /** Whether a free reply stopped because it opened a tool call (tool_choice 'auto'). */
  async opened(c, r) {
    const f = this.tools.format;
    if (r.finishReason !== 'stop' || r.tokens.length === 0) return false;
    if (f.leading) return c.held === f.marker;
    // the marker was a stop string: the generated tokens hold it (the reply's text cannot: the stop
    // would have ended it there), and no other stop string comes first
    const full = await this.model.detokenize(r.tokens);
    const at = full.indexOf(f.marker);
    return at >= 0 && !stopList(this.o.stop).some((s) => { const k = full.indexOf(s); return k >= 0 && k < at; });
  }

  /** A call opened in free text, finished under the call grammar from just after the marker. */
  async* callPhase(prompt, c, first) {
    const t = this.tools, f = t.format;
    const left = this.o.maxTokens - first.tokens.length;
    c.held = '';
    c.parser.push(f.marker);
    if (left <= 0) {
      c.finish = 'length';
      yield { index: c.index, finish: c.finish };
      return;
    }
    const o = {
      ...this.o, maxTokens: left, grammar: toolCallGrammar(f, t.list, { parallel: t.parallel, afterMarker: true }),
      seed: BigInt.asUintN(64, BigInt(this.o.seed) + BigInt(c.index)),
    };
    delete o.stop;
    const r = yield* this.pass(`${prompt}${c.content}${f.marker}`, o, [c], 'calls');
    c.finish = finishOf(c, r.results[0].finishReason);
    yield { index: c.index, finish: c.finish };
  }

  result() {
    const completion = this.choices.reduce((a, c) => a + c.tokens, 0);
    return {
      choices: this.choices,
      usage: { prompt_tokens: this.promptTokens, completion_tokens: completion, total_tokens: this.promptTokens + completion },
    };
  }
}

const stopList = (s) => (s == null ? [] : Array.isArray(s) ? s : [s]);

// ---- chat.completions.create -------------------------------------------------------

/** The message of a finished choice. */
function messageOf(c, tools) {
  const calls = c.parser ? toolCallsOf(c.parser.calls, tools ? tools.list : [], c.callIds) : [];
  const m = { role: 'assistant', content: calls.length && c.content === '' ? null : c.content, refusal: null };
  if (calls.length) m.tool_calls = calls;
  return m;
}

async function prepareChat(model, body) {
  const where = WHERE.chat;
  checkFields(body, CHAT_FIELDS, where);
  const { stream, includeUsage } = checkStream(body);
  if (given(body.signal) && body.signal.aborted) throw abortError(body.signal);
  const info = model.info;
  const o = samplingOf(body, 'chat', info.context.nCtx, info.hparams.nVocab);
  const n = given(body.n) ? checkValue('n', body.n, 'bestOfN', 'n') : 1;
  if (given(body.logprobs) && typeof body.logprobs !== 'boolean') throw badOption('logprobs', body.logprobs, 'must be true or false');
  const top = given(body.top_logprobs) ? intIn('top_logprobs', body.top_logprobs, 0, 20) : 0;
  if (given(body.top_logprobs) && body.logprobs !== true) throw badOption('top_logprobs', body.top_logprobs, 'needs logprobs: true');
  if (top > 0) o.logprobs = top;
  const messages = templateMessages(body.messages);
  const template = info.chatTemplate;
  const tools = toolPlan(body, template);
  const grammar = formatGrammar(body.response_format);
  if (grammar && tools && tools.mode === 'auto') {
    throw badOption('response_format', body.response_format, "cannot be JSON with tools and tool_choice 'auto' (the reply may open a tool call " +
      "instead); use tool_choice 'none' or 'required', or give the answer's shape as a tool");
  }
  const variables = tools && tools.mode !== 'none' ? { tools: templateTools(tools.list) } : undefined;
  const prompt = await model.applyChatTemplate(messages, variables ? { variables } : {});
  const gen = chatGenerateOptions(prompt, info, o);
  const job = new Job(model, { prompts: [prompt], o: gen, n, tools, grammar, logprobs: { on: body.logprobs === true, top }, signal: body.signal });
  return { job, stream, includeUsage, model: given(body.model) ? body.model : (info.name || 'wasmlm') };
}

/**
 * model.chat.completions.create(request): a ChatCompletion, or with
 * stream: true an async iterable of ChatCompletionChunk.
 */
export async function createChatCompletion(model, body) {
  if (model.disposed) throw new WasmlmError('DISPOSED', 'model disposed');
  const p = await prepareChat(model, body);
  const head = { id: randomId('chatcmpl-'), object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: p.model };
  if (p.stream) return chatStream(p, head);
  const it = p.job.run();
  let r;
  while (!(r = await it.next()).done);
  const { choices, usage } = r.value;
  const tools = p.job.tools;
  return {
    ...head,
    choices: choices.map((c) => ({
      index: c.index, message: messageOf(c, tools),
      logprobs: p.job.logprobs.on ? { content: c.logprobs, refusal: null } : null,
      finish_reason: c.finish,
    })),
    usage,
  };
}

async function* chatStream(p, head) {
  const it = p.job.run();
  const usageField = p.includeUsage ? { usage: null } : {};
  const chunk = (choice) => ({ ...head, object: 'chat.completion.chunk', choices: [choice], ...usageField });
  try {
    let r;
    while (!(r = await it.next()).done) {
      const d = r.value;
      if (d.finish) yield chunk({ index: d.index, delta: {}, logprobs: null, finish_reason: d.finish });
      else {
        // the finished message's checks (arguments against their schema) run before the call's end is sent
        yield chunk({ index: d.index, delta: d.delta, logprobs: d.logprobs ? { content: d.logprobs, refusal: null } : null, finish_reason: null });
      }
    }
    for (const c of r.value.choices) messageOf(c, p.job.tools);   // the calls' arguments checked as in a whole response
    if (p.includeUsage) yield { ...head, object: 'chat.completion.chunk', choices: [], usage: r.value.usage };
  } finally {
    await it.return();
  }
}

// ---- completions.create -------------------------------------------------------------

function promptsOf(prompt, nVocab) {
  const bad = () => badOption('prompt', prompt, 'must be a string, an array of token ids, or an array of strings or of token-id arrays');
  if (typeof prompt === 'string') return [prompt];
  if (!Array.isArray(prompt) || prompt.length === 0) throw bad();
  if (prompt.every((x) => typeof x === 'number')) return [checkPrompt(prompt, nVocab, 'prompt')];
  if (prompt.length > 64) throw badOption('prompt', prompt, 'at most 64 prompts');
  return prompt.map((x, i) => {
    if (typeof x === 'string') return x;
    if (Array.isArray(x) && x.length && x.every((t) => typeof t === 'number')) return checkPrompt(x, nVocab, `prompt[${i}]`);
    throw bad();
  });
}

/** OpenAI's legacy logprobs of a completion choice: {tokens, token_logprobs, top_logprobs, text_offset}. */
function legacyLogprobs(entries, offset0) {
  const out = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let off = offset0;
  for (const e of entries) {
    out.tokens.push(e.token);
    out.token_logprobs.push(e.logprob);
    const top = {};
    for (const x of e.top_logprobs) if (!Object.hasOwn(top, x.token)) top[x.token] = x.logprob;
    out.top_logprobs.push(top);
    out.text_offset.push(off);
    off += e.token.length;
  }
  return out;
}

async function prepareCompletion(model, body) {
  checkFields(body, COMPLETION_FIELDS, WHERE.completions);
  const { stream, includeUsage } = checkStream(body);
  if (given(body.signal) && body.signal.aborted) throw abortError(body.signal);
  const info = model.info;
  if (!given(body.prompt)) throw badOption('prompt', body.prompt, 'is required');
  const prompts = promptsOf(body.prompt, info.hparams.nVocab);
  const o = samplingOf(body, 'complete', info.context.nCtx, info.hparams.nVocab);
  const n = given(body.n) ? checkValue('n', body.n, 'bestOfN', 'n') : 1;
  let bestOf = n;
  if (given(body.best_of)) {
    bestOf = checkValue('n', body.best_of, 'bestOfN', 'best_of');
    if (bestOf < n) throw badOption('best_of', bestOf, `must be at least n (${n})`);
    if (stream && bestOf > n) throw badOption('best_of', bestOf, 'cannot be above n with stream: true (the best are known only at the end)');
  }
  const top = given(body.logprobs) ? intIn('logprobs', body.logprobs, 0, 20) : null;
  if (top) o.logprobs = top;
  if (given(body.echo) && typeof body.echo !== 'boolean') throw badOption('echo', body.echo, 'must be true or false');
  const echo = body.echo === true;
  if (echo && top !== null) throw badOption('echo', true, "cannot be combined with logprobs (the prompt tokens' log-probabilities are not computed)");
  const job = new Job(model, { prompts, o, n: bestOf, tools: null, grammar: null, logprobs: { on: top !== null, top: top || 0 }, signal: body.signal });
  return { job, n, bestOf, stream, includeUsage, echo, prompts, model: given(body.model) ? body.model : (info.name || 'wasmlm') };
}

/**
 * model.completions.create(request): a Completion, or with stream: true an
 * async iterable of Completion chunks.
 */
export async function createCompletion(model, body) {
  if (model.disposed) throw new WasmlmError('DISPOSED', 'model disposed');
  const p = await prepareCompletion(model, body);
  const head = { id: randomId('cmpl-'), object: 'text_completion', created: Math.floor(Date.now() / 1000), model: p.model };
  const echoes = p.echo ? await Promise.all(p.prompts.map((x) => (typeof x === 'string' ? x : model.detokenize(x)))) : null;
  if (p.stream) return completionStream(p, head, echoes);
  const it = p.job.run();
  let r;
  while (!(r = await it.next()).done);
  let { choices } = r.value;
  if (p.bestOf > p.n) {
    // best_of: per prompt, the n of best_of with the highest mean log-probability per token
    const mean = (c) => (c.lp.length ? c.lp.reduce((a, b) => a + b, 0) / c.lp.length : -Infinity);
    const picked = [];
    for (let k = 0; k < p.prompts.length; k++) {
      const group = choices.slice(k * p.bestOf, (k + 1) * p.bestOf).map((c) => ({ c, lp: c.lp }));
      group.sort((a, b) => mean(b) - mean(a) || a.c.index - b.c.index);
      picked.push(...group.slice(0, p.n).map((g) => g.c));
    }
    choices = picked;
  }
  return {
    ...head,
    choices: choices.map((c, i) => {
      const prefix = echoes ? echoes[Math.floor(c.index / p.bestOf)] : '';
      return {
        index: i, text: prefix + c.content,
        logprobs: p.job.logprobs.on ? legacyLogprobs(c.logprobs, prefix.length) : null,
        finish_reason: c.finish,
      };
    }),
    usage: r.value.usage,
  };
}

async function* completionStream(p, head, echoes) {
  const it = p.job.run();
  const usageField = p.includeUsage ? { usage: null } : {};
  const chunk = (choice) => ({ ...head, object: 'text_completion', choices: [choice], ...usageField });
  const offsets = new Map();
  try {
    let r;
    while (!(r = await it.next()).done) {
      const d = r.value;
      if (d.finish) { yield chunk({ index: d.index, text: '', logprobs: null, finish_reason: d.finish }); continue; }
      let text = d.delta.content ?? '';
      if (d.delta.role) {   // a choice's first delta: the echoed prompt, if asked for
        if (!echoes) continue;
        text = echoes[Math.floor(d.index / p.bestOf)];
      }
      const off = offsets.get(d.index) ?? 0;
      offsets.set(d.index, off + text.length);
      yield chunk({ index: d.index, text, logprobs: d.logprobs ? legacyLogprobs(d.logprobs, off) : null, finish_reason: null });
    }
    if (p.includeUsage) yield { ...head, object: 'text_completion', choices: [], usage: r.value.usage };
  } finally {
    await it.return();
  }
}

/** The `chat.completions` and `completions` objects of a model (web/index.js hangs them off Model). */
export function openaiApi(model) {
  return {
    chat: Object.freeze({ completions: Object.freeze({ create: (body) => createChatCompletion(model, body) }) }),
    completions: Object.freeze({ create: (body) => createCompletion(model, body) }),
  };
}
