// The OpenAI-style API (web/openai.js, web/tools.js): model.chat.completions.create
// and model.completions.create. Synthetic qwen2 and Llama 3 models carry the
// real Qwen2.5 and Llama 3.1 chat templates (tests/js/fixtures/tool-templates.mjs);
// "scripts" steer their greedy output (models/make-model.js): the Qwen model
// says "Hi!", the Llama one "Hello!", and the *_AUTO ones open a tool call
// on their own (<tool_call>, or a reply starting with "{"). Checked: the
// response shapes, streamed deltas reassembled equal the whole response, n > 1
// as one batch (choice i = n 1 with seed + i), logprobs, field errors,
// response_format outputs valid for their schema (ajv), tool calls forced and
// chosen, parsed and valid for both formats, and tool results rendered in the next turn.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv2020Module from 'ajv/dist/2020.js';
import { makeModel, CHAT_TEMPLATES } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { samplingOf, CHAT_FIELDS, COMPLETION_FIELDS, UNSUPPORTED_FIELDS } from '../../web/openai.js';
import {
  TOOL_FORMATS, toolFormatOf, normalizeTools, toolCallGrammar, leadingMarkerGrammar, ToolCallParser, prefixRules,
  argumentProblem, templateMessages, templateTools,
} from '../../web/tools.js';
import { parseGbnf, Recognizer, Generator } from './gbnf-reference.mjs';
import { QWEN2_5, LLAMA3_1, WEATHER, CLOCK } from './fixtures/tool-templates.mjs';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const AJV = new Ajv2020({ strict: false });

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-openai-'));
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 2048, vocab: 320 };
const TOOL_TOKENS = ['<tool_call>', '</tool_call>'];
const FILES = {
  qwen: [11, { arch: 'qwen2', chatTemplate: QWEN2_5, addedTokens: TOOL_TOKENS, script: [['Ċ', 'Hi'], ['Hi', '!'], ['!', '<|im_end|>']] }],
  qwenAuto: [12, { arch: 'qwen2', chatTemplate: QWEN2_5, addedTokens: TOOL_TOKENS, script: [['Ċ', '<tool_call>']] }],
  qwenRandom: [13, { arch: 'qwen2', chatTemplate: QWEN2_5, addedTokens: TOOL_TOKENS }],
  llama: [14, { arch: 'llama3', chatTemplate: LLAMA3_1, script: [['ĊĊ', 'Hello'], ['Hello', '!'], ['!', '<|eot_id|>']] }],
  llamaAuto: [15, { arch: 'llama3', chatTemplate: LLAMA3_1, script: [['ĊĊ', '{']] }],
};
const M = {};
for (const [name, [seed, opts]] of Object.entries(FILES)) makeModel(path.join(DIR, `${name}.gguf`), SHAPE, 'f32', seed, opts);

test.before(async () => {
  const names = Object.keys(FILES);
  const models = await Promise.all(names.map((n) => loadModel(path.join(DIR, `${n}.gguf`), { threads: 1 })));
  names.forEach((n, i) => { M[n] = models[i]; });
});
test.after(async () => {
  await Promise.all(Object.values(M).map((m) => m.dispose()));
  fs.rmSync(DIR, { recursive: true, force: true });
});

const USER = [{ role: 'user', content: 'Hello' }];
const GREEDY = { temperature: 0 };

const TOOLS = [WEATHER, CLOCK];
const paramsOf = Object.fromEntries(TOOLS.map((t) => [t.function.name, t.function.parameters]));

/** Reads a stream and puts its deltas back together as a ChatCompletion would hold them. */
async function reassembleChat(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const choices = new Map();
  let usage = null;
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      let r = choices.get(ch.index);
      if (!r) { r = { index: ch.index, content: null, tool_calls: [], logprobs: null, finish_reason: null, role: null }; choices.set(ch.index, r); }
      const d = ch.delta;
      if (d.role) r.role = d.role;
      if (typeof d.content === 'string') r.content = (r.content ?? '') + d.content;
      for (const tc of d.tool_calls || []) {
        const t = r.tool_calls[tc.index] || (r.tool_calls[tc.index] = { id: null, type: null, function: { name: '', arguments: '' } });
        if (tc.id) t.id = tc.id;
        if (tc.type) t.type = tc.type;
        if (tc.function?.name) t.function.name += tc.function.name;
        if (tc.function?.arguments) t.function.arguments += tc.function.arguments;
      }
      if (ch.logprobs) r.logprobs = (r.logprobs || []).concat(ch.logprobs.content);
      if (ch.finish_reason) r.finish_reason = ch.finish_reason;
    }
  }
  return { chunks, choices: [...choices.values()].sort((a, b) => a.index - b.index), usage };
}

/** Stream and whole response agree: content, calls (names, arguments), logprobs, finish reasons. */
function assertSame(whole, streamed) {
  assert.equal(streamed.choices.length, whole.choices.length);
  whole.choices.forEach((w, i) => {
    const s = streamed.choices[i];
    assert.equal(s.role, 'assistant');
    assert.equal(s.content ?? '', w.message.content ?? '');
    assert.deepEqual(s.tool_calls.map((t) => [t.type, t.function.name, t.function.arguments]),
      (w.message.tool_calls || []).map((t) => [t.type, t.function.name, t.function.arguments]));
    assert.deepEqual(s.logprobs, w.logprobs ? w.logprobs.content : null);
    assert.equal(s.finish_reason, w.finish_reason);
  });
}

function assertValidCalls(message, format) {
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, 'tool_calls');
  if (format === 'llama3') assert.equal(message.tool_calls.length, 1);
  for (const c of message.tool_calls) {
    assert.match(c.id, /^call_[A-Za-z0-9]{24}$/);
    assert.equal(c.type, 'function');
    assert.ok(paramsOf[c.function.name], c.function.name);
    const args = JSON.parse(c.function.arguments);
    const validate = AJV.compile(paramsOf[c.function.name]);
    assert.ok(validate(args), `${c.function.name}(${c.function.arguments}): ${JSON.stringify(validate.errors)}`);
  }
}

// ---- without a model -----------------------------------------------------------------

test('the tool-call format is read from the template', () => {
  assert.equal(toolFormatOf(QWEN2_5), TOOL_FORMATS.hermes);
  assert.equal(toolFormatOf(CHAT_TEMPLATES.qwen3), TOOL_FORMATS.hermes);
  assert.equal(toolFormatOf(LLAMA3_1), TOOL_FORMATS.llama3);
  assert.equal(toolFormatOf(CHAT_TEMPLATES.chatml), null);
  assert.equal(toolFormatOf(CHAT_TEMPLATES.llama3), null);
});

test('the call grammars accept the formats with valid arguments only, and every sentence parses into valid calls', () => {
  const tools = normalizeTools(TOOLS);
  const hermes = toolCallGrammar(TOOL_FORMATS.hermes, tools);
  const llama = toolCallGrammar(TOOL_FORMATS.llama3, tools);
  const rh = new Recognizer(parseGbnf(hermes)), rl = new Recognizer(parseGbnf(llama));
  const call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>';
  assert.ok(rh.accepts(call));
  assert.ok(rh.accepts(`${call}\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>`));
  assert.ok(!rh.accepts(call.replace('3', '9')), 'days above its maximum');
  assert.ok(!rh.accepts(call.replace(', "days": 3', '')), 'a required property missing');
  assert.ok(!rh.accepts(call.replace('get_weather', 'get_time')), 'not a tool');
  assert.ok(!rh.accepts('Hi'));
  const single = toolCallGrammar(TOOL_FORMATS.hermes, tools, { parallel: false });
  assert.ok(!new Recognizer(parseGbnf(single)).accepts(`${call}\n${call}`));
  assert.ok(rl.accepts('{"name": "get_weather", "parameters": {"city": "Rome", "days": 1, "unit": "f"}}'));
  assert.ok(!rl.accepts('{"name": "now", "parameters": {}}{"name": "now", "parameters": {}}'));
  const after = new Recognizer(parseGbnf(toolCallGrammar(TOOL_FORMATS.hermes, tools, { afterMarker: true })));
  assert.ok(after.accepts(call.slice('<tool_call>'.length)));
  for (const [format, gbnf] of [[TOOL_FORMATS.hermes, hermes], [TOOL_FORMATS.llama3, llama]]) {
    const gen = new Generator(parseGbnf(gbnf), { seed: 7 });
    for (let i = 0; i < 60; i++) {
      const text = gen.next();
      const p = new ToolCallParser(format);
      p.push(text);
      assert.ok(p.complete, text);
      for (const c of p.calls) {
        const validate = AJV.compile(paramsOf[c.name]);
        assert.ok(validate(JSON.parse(c.arguments)), `${text}: ${JSON.stringify(validate.errors)}`);
      }
    }
  }
});

test('a reply that starts with "{" may only be the marker (llama3, tool_choice auto)', () => {
  const r = new Recognizer(parseGbnf(leadingMarkerGrammar(TOOL_FORMATS.llama3)));
  for (const ok of ['{', '', 'Hello {there}', ' {"name": 1}']) assert.ok(r.accepts(ok), ok);
  for (const bad of ['{"', '{ "name"']) assert.ok(!r.accepts(bad), bad);
});

test('the parser reads calls piece by piece as it reads them whole; an unfinished call stays open', () => {
  const text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "O\\"slo}", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>';
  const whole = new ToolCallParser(TOOL_FORMATS.hermes);
  whole.push(text);
  assert.deepEqual(whole.calls.map((c) => [c.name, c.arguments, c.done]),
    [['get_weather', '{"city": "O\\"slo}", "days": 2}', true], ['now', '{}', true]]);
  const bytes = new ToolCallParser(TOOL_FORMATS.hermes);
  const args = ['', ''];
  for (const ch of text) for (const ev of bytes.push(ch)) if (ev.type === 'arguments') args[ev.index] += ev.text;
  assert.deepEqual(args, whole.calls.map((c) => c.arguments));
  assert.ok(bytes.complete);
  const cut = new ToolCallParser(TOOL_FORMATS.hermes);
  cut.push(text.slice(0, 60));
  assert.ok(!cut.complete);
  assert.equal(cut.calls[0].done, false);
  assert.throws(() => new ToolCallParser(TOOL_FORMATS.llama3).push('{"name": "x", "arguments": {}}'), { code: 'INTERNAL' });
});

test('prefixRules renames rules, not text inside literals and classes', () => {
  const g = 'root ::= "root" item [root] item\nitem ::= "x" | root\n';
  assert.equal(prefixRules(g, 'p-'), 'p-root ::= "root" p-item [root] p-item\np-item ::= "x" | p-root\n');
});

test('argumentProblem: the small check of arguments', () => {
  const s = WEATHER.function.parameters;
  assert.equal(argumentProblem(s, { city: 'Paris', days: 2 }), null);
  assert.match(argumentProblem(s, { city: 'Paris' }), /required property "days"/);
  assert.match(argumentProblem(s, { city: 'Lyon', days: 2 }), /city must be one of/);
  assert.match(argumentProblem(s, { city: 'Paris', days: 2.5 }), /days must be integer/);
  assert.match(argumentProblem(s, { city: 'Paris', days: 2, x: 1 }), /does not allow/);
});

test('messages: tool calls and tool results as templates take them; unsupported parts say why', () => {
  const m = templateMessages([
    { role: 'developer', content: [{ type: 'text', text: 'Be ' }, { type: 'text', text: 'brief' }] },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'now', arguments: '{"tz": "UTC"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
  ]);
  assert.deepEqual(m, [
    { role: 'system', content: 'Be brief' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'now', arguments: { tz: 'UTC' } } }] },
    { role: 'tool', content: '12:00', tool_call_id: 'call_1' },
  ]);
  assert.throws(() => templateMessages([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }]),
    { code: 'BAD_OPTION', option: 'messages[0].content[0].type', message: /not supported: only text/ });
  assert.throws(() => templateMessages([{ role: 'function', name: 'f', content: 'x' }]), { option: 'messages[0].role', message: /deprecated form of 'tool'/ });
  assert.throws(() => templateMessages([{ role: 'tool', content: 'x' }]), { option: 'messages[0].tool_call_id' });
  assert.throws(() => templateMessages([{ role: 'user', content: 'x', audio: {} }]), { option: 'messages[0].audio', message: /audio encoder/ });
});

test('sampling: OpenAI defaults, max_tokens to the context, the penalty window, seeds modulo 2^64', () => {
  const o = samplingOf({ presence_penalty: 0.5, frequency_penalty: -0.5, logit_bias: { 5: -100 }, stop: 'x', seed: -1 }, 'chat', 512);
  assert.deepEqual({ ...o, seed: String(o.seed) }, {
    topK: 0, minP: 0, typicalP: 1, repeatPenalty: 1, temperature: 1, topP: 1, maxTokens: 512, repeatLastN: 512,
    presencePenalty: 0.5, frequencyPenalty: -0.5, seed: String(2n ** 64n - 1n), stop: 'x', logitBias: { 5: -100 },
  });
  const p = samplingOf({ max_completion_tokens: 20, temperature: 0.3, top_p: 0.9, seed: 7 }, 'chat', 512);
  assert.equal(p.maxTokens, 20);
  assert.equal(p.repeatLastN, 20);
  assert.equal(p.seed, 7n);
  assert.equal(p.temperature, 0.3);
  assert.equal(p.topP, 0.9);
  assert.notEqual(samplingOf({}, 'chat', 8).seed, samplingOf({}, 'chat', 8).seed, 'no seed: a random one');
  assert.throws(() => samplingOf({ max_tokens: 3, max_completion_tokens: 4 }, 'chat', 8), { option: 'max_completion_tokens' });
  assert.throws(() => samplingOf({ logit_bias: { 5: 101 } }, 'chat', 8), { option: 'logit_bias.5' });
  assert.throws(() => samplingOf({ temperature: 2.5 }, 'chat', 8), { option: 'temperature' });
  assert.throws(() => samplingOf({ top_p: 2 }, 'chat', 8), { option: 'top_p', message: /option top_p: must be a number in \[0, 1\]/ });
  assert.ok(CHAT_FIELDS.every((f) => !Object.hasOwn(UNSUPPORTED_FIELDS, f) || f === 'best_of'));
  assert.ok(COMPLETION_FIELDS.includes('best_of'));
});

/** The keys an interface of index.d.ts declares at its top level, with those of the interfaces it extends. */
function dtsKeys(dts, name) {
  const m = new RegExp(`export interface ${name}(?: extends (\\w+))? \\{\\n([\\s\\S]*?)\\n\\}`).exec(dts);
  assert.ok(m, `interface ${name} in index.d.ts`);
  const keys = [...m[2].matchAll(/^ {2}(\w+)\??:/gm)].map((x) => x[1]);
  return m[1] ? [...dtsKeys(dts, m[1]), ...keys] : keys;
}

test('index.d.ts declares exactly the fields each create() takes', () => {
  const dts = fs.readFileSync(new URL('../../index.d.ts', import.meta.url), 'utf8');
  assert.deepEqual(dtsKeys(dts, 'ChatCompletionCreateParams').sort(), [...CHAT_FIELDS].sort());
  assert.deepEqual(dtsKeys(dts, 'CompletionCreateParams').sort(), [...COMPLETION_FIELDS].sort());
});

// ---- chat.completions.create --------------------------------------------------------

test('a ChatCompletion: id, object, created, model, choices, usage', async () => {
  const r = await M.qwen.chat.completions.create({ model: 'qwen-test', messages: USER, ...GREEDY });
  assert.match(r.id, /^chatcmpl-[A-Za-z0-9]{24}$/);
  assert.equal(r.object, 'chat.completion');
  assert.ok(Number.isInteger(r.created) && Math.abs(r.created - Date.now() / 1000) < 60);
  assert.equal(r.model, 'qwen-test');
  assert.deepEqual(r.choices, [{ index: 0, message: { role: 'assistant', content: 'Hi!', refusal: null }, logprobs: null, finish_reason: 'stop' }]);
  const prompt = await M.qwen.applyChatTemplate(USER);
  const ids = await M.qwen.tokenize(prompt, { parseSpecial: true });
  assert.deepEqual(r.usage, { prompt_tokens: ids.length, completion_tokens: 2, total_tokens: ids.length + 2 });
  const noModel = await M.qwen.chat.completions.create({ messages: USER, ...GREEDY });
  assert.equal(noModel.model, M.qwen.info.name);
  const cut = await M.qwen.chat.completions.create({ messages: USER, ...GREEDY, max_tokens: 1 });
  assert.equal(cut.choices[0].message.content, 'Hi');
  assert.equal(cut.choices[0].finish_reason, 'length');
  assert.equal(cut.usage.completion_tokens, 1);
  const stopped = await M.qwen.chat.completions.create({ messages: USER, ...GREEDY, stop: ['!'] });
  assert.equal(stopped.choices[0].message.content, 'Hi');
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  // a stop string longer than 64 characters is one string (not 64 stop strings)
  const long = await M.qwen.chat.completions.create({ messages: USER, ...GREEDY, stop: 'x'.repeat(70) });
  assert.equal(long.choices[0].message.content, 'Hi!');
});

test('stream: true gives chunks whose deltas reassemble to the whole response; include_usage adds the usage last', async () => {
  const req = { messages: USER, temperature: 0.9, seed: 3, max_tokens: 12, logprobs: true, top_logprobs: 3 };
  const whole = await M.qwenRandom.chat.completions.create(req);
  const stream = await M.qwenRandom.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  assert.equal(typeof stream[Symbol.asyncIterator], 'function');
  const s = await reassembleChat(stream);
  assertSame(whole, s);
  assert.equal(s.chunks[0].choices[0].delta.role, 'assistant');
  const last = s.chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, whole.usage);
  assert.ok(s.chunks.slice(0, -1).every((c) => c.usage === null && c.id === s.chunks[0].id && c.created === s.chunks[0].created));
  const plain = await reassembleChat(await M.qwenRandom.chat.completions.create({ ...req, stream: true }));
  assert.ok(plain.chunks.every((c) => !('usage' in c)));
});

test('n > 1: one batch; choice i is what n = 1 gives with seed + i; streamed choices reassemble too', async () => {
  const req = { messages: USER, temperature: 1, seed: 40, max_tokens: 10 };
  const r = await M.qwenRandom.chat.completions.create({ ...req, n: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (let i = 0; i < 3; i++) {
    const one = await M.qwenRandom.chat.completions.create({ ...req, seed: 40 + i });
    assert.equal(r.choices[i].message.content, one.choices[0].message.content);
    assert.equal(r.choices[i].finish_reason, one.choices[0].finish_reason);
  }
  assert.equal(new Set(r.choices.map((c) => c.message.content)).size > 1, true, 'different seeds, different samples');
  assert.equal(r.usage.completion_tokens, (await Promise.all([0, 1, 2].map(async (i) =>
    (await M.qwenRandom.chat.completions.create({ ...req, seed: 40 + i })).usage.completion_tokens))).reduce((a, b) => a + b));
  assertSame(r, await reassembleChat(await M.qwenRandom.chat.completions.create({ ...req, n: 3, stream: true })));
});

test('logit_bias and the penalties reach the sampler', async () => {
  const [hi] = await M.qwen.tokenize('Hi');
  const banned = await M.qwen.chat.completions.create({ messages: USER, ...GREEDY, max_tokens: 3, logit_bias: { [hi]: -100 } });
  assert.ok(!banned.choices[0].message.content.startsWith('Hi'), banned.choices[0].message.content);
  const req = { messages: USER, ...GREEDY, max_tokens: 20 };
  const base = (await M.qwenRandom.chat.completions.create(req)).choices[0].message.content;
  for (const pen of [{ presence_penalty: 2 }, { frequency_penalty: 2 }]) {
    assert.notEqual((await M.qwenRandom.chat.completions.create({ ...req, ...pen })).choices[0].message.content, base, JSON.stringify(pen));
  }
});

test('logprobs: per token {token, logprob, bytes, top_logprobs}; the sampled token among the top at greedy', async () => {
  const r = await M.qwenRandom.chat.completions.create({ messages: USER, ...GREEDY, max_tokens: 6, logprobs: true, top_logprobs: 4 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  for (const e of content) {
    assert.deepEqual(Object.keys(e), ['token', 'logprob', 'bytes', 'top_logprobs']);
    assert.equal(new TextDecoder().decode(new Uint8Array(e.bytes)), e.token);
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 4);
    for (let k = 1; k < 4; k++) assert.ok(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob);
    assert.deepEqual(e.top_logprobs[0], { token: e.token, logprob: e.logprob, bytes: e.bytes });   // greedy: the best one
  }
  const none = await M.qwenRandom.chat.completions.create({ messages: USER, ...GREEDY, max_tokens: 3, logprobs: true });
  assert.ok(none.choices[0].logprobs.content.every((e) => e.top_logprobs.length === 0));
});

test('unknown and unsupported fields, bad values: BAD_OPTION naming the field', async () => {
  const create = (body) => M.qwen.chat.completions.create(body);
  const bad = (body, option, message) => assert.rejects(create(body), (e) => {
    assert.equal(e.code, 'BAD_OPTION');
    assert.equal(e.option, option);
    if (message) assert.match(e.message, message);
    return true;
  });
  await bad({ messages: USER, maxTokens: 3 }, 'maxTokens', /unknown field maxTokens — did you mean max_tokens\?/);
  await bad({ messages: USER, temprature: 1 }, 'temprature', /did you mean temperature/);
  await bad({ messages: USER, user: 'u1' }, 'user', /not supported: .*abuse monitoring/);
  await bad({ messages: USER, functions: [] }, 'functions', /deprecated.*tools/);
  await bad({ messages: USER, best_of: 2 }, 'best_of', /completions.create/);
  await bad({ messages: USER, audio: {} }, 'audio', /audio decoder/);
  await bad({ messages: USER, temperature: -1 }, 'temperature');
  await bad({ messages: USER, n: 0 }, 'n');
  await bad({ messages: USER, top_logprobs: 2 }, 'top_logprobs', /needs logprobs: true/);
  await bad({ messages: USER, stream_options: { include_usage: true } }, 'stream_options', /stream: true/);
  await bad({ messages: USER, stream: true, stream_options: { include_usage: true, x: 1 } }, 'stream_options.x');
  await bad({ messages: USER, tool_choice: 'required' }, 'tool_choice', /needs tools/);
  await bad({ messages: USER, tools: [{ type: 'retrieval' }] }, 'tools[0].type');
  await bad({ messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice.function.name');
  await bad({ messages: USER, response_format: { type: 'xml' } }, 'response_format.type');
  await bad({ messages: USER, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'ipv4' } } } },
    'response_format.json_schema.schema', /format/);
  await bad({ messages: USER, tools: TOOLS, response_format: { type: 'json_object' } }, 'response_format', /tool_choice 'auto'/);
  await bad({ messages: USER, logit_bias: { 99999: 1 } }, 'logit_bias', /out of range/);
  await bad({ messages: [] }, 'messages');
  await bad({ messages: USER, tools: TOOLS, stop: Array.from({ length: 64 }, (_, i) => `s${i}`) }, 'stop', /marker takes one/);
  const gone = await loadModel(path.join(DIR, 'qwen.gguf'));
  await gone.dispose();
  await assert.rejects(gone.chat.completions.create({ messages: USER }), { code: 'DISPOSED' });
});

test('a model whose template knows no tool-call format refuses tools (tool_choice none still works)', async () => {
  const file = path.join(DIR, 'chatml.gguf');
  makeModel(file, SHAPE, 'f32', 11, { arch: 'qwen2', script: [['Ċ', 'Hi'], ['Hi', '!'], ['!', '<|im_end|>']] });
  const m = await loadModel(file);
  try {
    await assert.rejects(m.chat.completions.create({ messages: USER, tools: TOOLS }), { code: 'BAD_OPTION', option: 'tools', message: /no tool-call format/ });
    const r = await m.chat.completions.create({ messages: USER, tools: TOOLS, tool_choice: 'none', ...GREEDY });
    assert.equal(r.choices[0].message.content, 'Hi!');
  } finally {
    await m.dispose();
  }
});

test('abort: a signal ends a stream; leaving the loop early stops the generation; the model stays usable', async () => {
  const ac = new AbortController();
  const stream = await M.qwenRandom.chat.completions.create({ messages: USER, seed: 1, max_tokens: 300, stream: true, signal: ac.signal });
  let n = 0;
  await assert.rejects(async () => { for await (const _ of stream) if (++n === 4) ac.abort(); }, { name: 'AbortError' });
  assert.ok(n >= 4 && n < 300);
  for await (const _ of await M.qwenRandom.chat.completions.create({ messages: USER, seed: 1, max_tokens: 300, stream: true })) break;
  const r = await M.qwen.chat.completions.create({ messages: USER, ...GREEDY });
  assert.equal(r.choices[0].message.content, 'Hi!');
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(M.qwen.chat.completions.create({ messages: USER, signal: pre.signal }), { name: 'AbortError' });
});

// ---- response_format -------------------------------------------------------------------

test('response_format json_schema: every output validates against the schema; json_object gives an object', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 120 }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } },
    required: ['name', 'age'], additionalProperties: false,
  };
  const validate = AJV.compile(schema);
  const rf = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
  const r = await M.qwenRandom.chat.completions.create({ messages: USER, response_format: rf, temperature: 1, seed: 9, n: 4, max_tokens: 200 });
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop', c.message.content);
    assert.ok(validate(JSON.parse(c.message.content)), `${c.message.content}: ${JSON.stringify(validate.errors)}`);
  }
  const s = await reassembleChat(await M.qwenRandom.chat.completions.create({ messages: USER, response_format: rf, temperature: 1, seed: 9, n: 4, max_tokens: 200, stream: true }));
  assertSame(r, s);
  const obj = await M.qwenRandom.chat.completions.create({ messages: USER, response_format: { type: 'json_object' }, temperature: 1, seed: 2, n: 4, max_tokens: 120 });
  let parsed = 0;
  for (const c of obj.choices) {
    assert.match(c.message.content, /^\s*\{/);
    if (c.finish_reason === 'stop') { assert.equal(typeof JSON.parse(c.message.content), 'object'); parsed++; }
  }
  assert.ok(parsed >= 1, 'at least one object completed within max_tokens');
  const text = await M.qwen.chat.completions.create({ messages: USER, response_format: { type: 'text' }, ...GREEDY });
  assert.equal(text.choices[0].message.content, 'Hi!');
});

// ---- tool calls -----------------------------------------------------------------------

for (const [name, format] of [['qwen', 'hermes'], ['llama', 'llama3']]) {
  test(`${format}: a required call is written in the format, parsed, valid; streamed calls reassemble`, async () => {
    const m = M[name];
    for (const seed of [1, 2, 3]) {
      const req = { messages: USER, tools: TOOLS, tool_choice: 'required', temperature: 1, seed, max_tokens: 200 };
      const r = await m.chat.completions.create(req);
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.content, null);
      assertValidCalls(c.message, format);
      assertSame(r, await reassembleChat(await m.chat.completions.create({ ...req, stream: true })));
    }
    const named = await m.chat.completions.create({ messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...GREEDY, max_tokens: 200 });
    assertValidCalls(named.choices[0].message, format);
    assert.ok(named.choices[0].message.tool_calls.every((t) => t.function.name === 'get_weather'));
    const n = await m.chat.completions.create({ messages: USER, tools: TOOLS, tool_choice: 'required', temperature: 1, seed: 5, n: 3, max_tokens: 200 });
    for (const ch of n.choices) { assert.equal(ch.finish_reason, 'tool_calls'); assertValidCalls(ch.message, format); }
    // cut short: the call so far, finish 'length'
    const cut = await m.chat.completions.create({ messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...GREEDY, max_tokens: 12 });
    assert.equal(cut.choices[0].finish_reason, 'length');
  });
}

test('hermes, tool_choice auto: the model opens <tool_call> itself and the call is finished under the grammar; a plain reply stays content', async () => {
  const req = { messages: USER, tools: TOOLS, ...GREEDY, max_tokens: 200 };
  const r = await M.qwenAuto.chat.completions.create(req);
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assertValidCalls(c.message, 'hermes');
  assertSame(r, await reassembleChat(await M.qwenAuto.chat.completions.create({ ...req, stream: true })));
  // n > 1: the free replies decode as one batch, each opened call is finished on its own (at temperature 1
  // this seed's first choice does not open one); every token has its logprob
  const many = { messages: USER, tools: TOOLS, parallel_tool_calls: false, temperature: 1, seed: 21, n: 3, max_tokens: 200, logprobs: true };
  const rn = await M.qwenAuto.chat.completions.create(many);
  assert.deepEqual(rn.choices.map((ch) => ch.finish_reason), ['length', 'tool_calls', 'tool_calls']);
  assert.equal(rn.choices[0].message.tool_calls, undefined);
  assert.equal(typeof rn.choices[0].message.content, 'string');
  for (const ch of rn.choices.slice(1)) { assertValidCalls(ch.message, 'hermes'); assert.equal(ch.message.tool_calls.length, 1); }
  assert.equal(rn.choices.reduce((a, ch) => a + ch.logprobs.content.length, 0), rn.usage.completion_tokens);
  assertSame(rn, await reassembleChat(await M.qwenAuto.chat.completions.create({ ...many, stream: true })));
  const plain = await M.qwen.chat.completions.create(req);
  assert.deepEqual(plain.choices[0].message, { role: 'assistant', content: 'Hi!', refusal: null });
  assert.equal(plain.choices[0].finish_reason, 'stop');
  // tool_choice none: the tools are not offered and nothing is parsed
  const none = await M.qwenAuto.chat.completions.create({ ...req, tool_choice: 'none', max_tokens: 5 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.choices[0].finish_reason, 'length');
});

test('llama3, tool_choice auto: a reply starting with "{" is a call, finished under the grammar', async () => {
  const req = { messages: USER, tools: TOOLS, ...GREEDY, max_tokens: 200 };
  const r = await M.llamaAuto.chat.completions.create(req);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assertValidCalls(r.choices[0].message, 'llama3');
  assertSame(r, await reassembleChat(await M.llamaAuto.chat.completions.create({ ...req, stream: true })));
  const plain = await M.llama.chat.completions.create(req);
  assert.equal(plain.choices[0].message.content, 'Hello!');
  assert.equal(plain.choices[0].finish_reason, 'stop');
});

test('tool results render in the next turn through the model\'s own template', async () => {
  for (const [name, want] of [
    ['qwen', ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call><|im_end|>',
      '<|im_start|>user\n<tool_response>\n{"temp": -3}\n</tool_response><|im_end|>\n<|im_start|>assistant\n']],
    ['llama', ['<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Oslo", "days": 2}}<|eot_id|>',
      '<|start_header_id|>ipython<|end_header_id|>\n\n"{\\"temp\\": -3}"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n']],
  ]) {
    const m = M[name];
    const first = await m.chat.completions.create({ messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...GREEDY, max_tokens: 200 });
    const call = first.choices[0].message.tool_calls[0];
    call.function.arguments = '{"city": "Oslo", "days": 2}';   // what the app answers is its own business
    const turn = [...USER, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp": -3}' }];
    const prompt = await m.applyChatTemplate(templateMessages(turn), { variables: { tools: templateTools(normalizeTools(TOOLS)) } });
    for (const w of want) assert.ok(prompt.includes(w), `${name}: ${JSON.stringify(w)} in ${JSON.stringify(prompt)}`);
    const next = await m.chat.completions.create({ messages: turn, tools: TOOLS, tool_choice: 'none', ...GREEDY, max_tokens: 3 });
    const withTools = await m.chat.completions.create({ messages: turn, tools: TOOLS, ...GREEDY, max_tokens: 3 });
    assert.equal(withTools.usage.prompt_tokens, (await m.tokenize(prompt, { parseSpecial: true, addBos: false })).length);
    assert.ok(next.usage.prompt_tokens < withTools.usage.prompt_tokens, 'tool_choice none does not list the tools');
  }
});

// ---- completions.create ---------------------------------------------------------------

test('completions: a Completion and its stream; logprobs in the legacy shape; echo; several prompts; best_of', async () => {
  const m = M.qwenRandom;
  const req = { prompt: 'Hello world', temperature: 0.8, seed: 4, max_tokens: 8, logprobs: 2 };
  const r = await m.completions.create(req);
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  const c = r.choices[0];
  assert.deepEqual(Object.keys(c), ['index', 'text', 'logprobs', 'finish_reason']);
  assert.equal(c.logprobs.tokens.join(''), c.text);
  assert.equal(c.logprobs.token_logprobs.length, r.usage.completion_tokens);
  assert.ok(c.logprobs.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 2));
  assert.deepEqual(c.logprobs.text_offset, c.logprobs.tokens.map((_, i) => c.logprobs.tokens.slice(0, i).join('').length));
  const chunks = [];
  for await (const ch of await m.completions.create({ ...req, stream: true })) chunks.push(ch);
  assert.ok(chunks.every((ch) => ch.object === 'text_completion'));
  assert.equal(chunks.map((ch) => ch.choices[0].text).join(''), c.text);
  assert.deepEqual(chunks.flatMap((ch) => ch.choices[0].logprobs?.tokens || []), c.logprobs.tokens);
  assert.equal(chunks.at(-1).choices[0].finish_reason, c.finish_reason);
  const echo = await m.completions.create({ prompt: 'Hello world', temperature: 0.8, seed: 4, max_tokens: 8, echo: true });
  assert.equal(echo.choices[0].text, 'Hello world' + c.text);
  const two = await m.completions.create({ prompt: ['Hello', 'Once upon'], ...GREEDY, max_tokens: 4, n: 2 });
  assert.deepEqual(two.choices.map((x) => x.index), [0, 1, 2, 3]);
  assert.equal(two.choices[0].text, (await m.completions.create({ prompt: 'Hello', ...GREEDY, max_tokens: 4 })).choices[0].text);
  assert.equal(two.choices[2].text, (await m.completions.create({ prompt: 'Once upon', ...GREEDY, max_tokens: 4 })).choices[0].text);
  // best_of: the one of best_of samples with the highest mean log-probability per token
  const all = await m.completions.create({ prompt: 'Hello', temperature: 1, seed: 11, max_tokens: 6, n: 3, logprobs: 0 });
  const mean = (x) => x.logprobs.token_logprobs.reduce((a, b) => a + b, 0) / x.logprobs.token_logprobs.length;
  const best = all.choices.slice().sort((a, b) => mean(b) - mean(a))[0];
  const picked = await m.completions.create({ prompt: 'Hello', temperature: 1, seed: 11, max_tokens: 6, n: 1, best_of: 3 });
  assert.equal(picked.choices.length, 1);
  assert.equal(picked.choices[0].text, best.text);
  await assert.rejects(m.completions.create({ prompt: 'x', suffix: 'y' }), { option: 'suffix', message: /fill-in-the-middle/ });
  await assert.rejects(m.completions.create({ prompt: 'x', best_of: 2, stream: true }), { option: 'best_of' });
  await assert.rejects(m.completions.create({ prompt: 'x', echo: true, logprobs: 1 }), { option: 'echo' });
  await assert.rejects(m.completions.create({ messages: USER }), { option: 'messages', message: /unknown field messages/ });
});
