// model.chat.completions.create in Chromium (web/openai.js, web/tools.js)
// through the demo server, which serves @huggingface/jinja at
// /vendor/jinja.js and points the chat-template worker's bare import at it
// (web/demo/server.mjs), as a bundler's dev server would. A synthetic qwen2
// model with the real Qwen2.5 template (tests/js/fixtures/tool-templates.mjs)
// and random weights, as in tests/js/openai.test.mjs: a plain reply with
// logprobs, the same reply streamed (its deltas reassemble to the whole
// response), response_format json_schema (the output parses and validates)
// and a forced Hermes tool call (tool_choice 'required'), each equal to the
// same request with the same seed in Node, up to the ids and times that
// differ between any two runs.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv2020Module from 'ajv/dist/2020.js';
import { startDemoServer } from '../../web/demo/server.mjs';
import { openPage } from './browser.mjs';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { QWEN2_5, WEATHER, CLOCK } from '../js/fixtures/tool-templates.mjs';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const AJV = new Ajv2020({ strict: false });

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-openai-chat-browser-'));
const FILE = path.join(DIR, 'qwen.gguf');
makeModel(FILE, { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 2048, vocab: 320 }, 'f32', 13,
  { arch: 'qwen2', chatTemplate: QWEN2_5, addedTokens: ['<tool_call>', '</tool_call>'] });

const USER = [{ role: 'user', content: 'Hello' }];
const PERSON = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 120 }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } },
  required: ['name', 'age'], additionalProperties: false,
};
const PARAMS = { get_weather: WEATHER.function.parameters, now: CLOCK.function.parameters };

// name -> request; each runs whole and streamed in both places (the tool
// request's seed gives this model two parallel calls, one with arguments, so
// the stream's call indices are exercised too)
const REQUESTS = {
  plain: { messages: USER, temperature: 0.9, seed: 3, max_tokens: 12, logprobs: true, top_logprobs: 3 },
  schema: { messages: USER, response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } }, temperature: 1, seed: 9, max_tokens: 200 },
  tool: { messages: USER, tools: [WEATHER, CLOCK], tool_choice: 'required', temperature: 1, seed: 6, max_tokens: 200 },
};

let server, page, close;
const errors = [];

before(async () => {
  server = await startDemoServer({ modelsDir: DIR });
  // any same-origin document will do (the demo page would load a model of its own)
  ({ page, close } = await openPage({ server, errors, path: '/local-models/index.json' }));
});
after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

/**
 * A ChatCompletion without what differs between two runs: its id and time,
 * the tool calls' ids (checked for their form, then left out).
 */
function plain(r) {
  return JSON.stringify({
    ...r, id: undefined, created: undefined,
    choices: r.choices.map((c) => ({
      ...c,
      message: {
        ...c.message,
        tool_calls: c.message.tool_calls?.map((t) => { assert.match(t.id, /^call_[A-Za-z0-9]{24}$/); return { ...t, id: undefined }; }),
      },
    })),
  });
}

/** Runs the requests whole and streamed in the page; streamed deltas are put back together there. */
function inPage(requests) {
  return page.evaluate(async (requests) => {
    const { loadModel: load } = await import('/web/index.js');
    const bytes = new Uint8Array(await (await fetch('/local-models/qwen.gguf')).arrayBuffer());
    const m = await load(bytes, { threads: 1 });
    try {
      const out = {};
      for (const [name, req] of Object.entries(requests)) {
        const whole = await m.chat.completions.create(req);
        const s = { role: null, content: null, calls: [], logprobs: null, finish: null, chunks: 0 };
        for await (const c of await m.chat.completions.create({ ...req, stream: true })) {
          s.chunks++;
          if (c.object !== 'chat.completion.chunk' || c.choices.length !== 1 || c.choices[0].index !== 0) throw new Error(`chunk ${JSON.stringify(c)}`);
          const { delta, logprobs, finish_reason: fin } = c.choices[0];
          if (delta.role) s.role = delta.role;
          if (typeof delta.content === 'string') s.content = (s.content ?? '') + delta.content;
          for (const tc of delta.tool_calls || []) {
            const t = s.calls[tc.index] || (s.calls[tc.index] = { type: null, name: '', arguments: '' });
            if (tc.type) t.type = tc.type;
            if (tc.function?.name) t.name += tc.function.name;
            if (tc.function?.arguments) t.arguments += tc.function.arguments;
          }
          if (logprobs) s.logprobs = (s.logprobs || []).concat(logprobs.content);
          if (fin) s.finish = fin;
        }
        out[name] = { whole, stream: s };
      }
      return out;
    } finally { await m.dispose(); }
  }, requests);
}

let got, node;
test('chat.completions.create runs in Chromium through the demo server\'s Jinja', async () => {
  got = await inPage(REQUESTS);
  const m = await loadModel(FILE, { threads: 1 });
  try {
    node = {};
    for (const [name, req] of Object.entries(REQUESTS)) node[name] = await m.chat.completions.create(req);
  } finally { await m.dispose(); }
  for (const { whole } of Object.values(got)) {
    assert.match(whole.id, /^chatcmpl-[A-Za-z0-9]{24}$/);
    assert.equal(whole.object, 'chat.completion');
  }
});

test('the streamed replies in Chromium reassemble to the whole ones', () => {
  for (const [name, { whole, stream: s }] of Object.entries(got)) {
    const w = whole.choices[0];
    assert.ok(s.chunks > 1, name);
    assert.equal(s.role, 'assistant', name);
    assert.equal(s.content ?? '', w.message.content ?? '', name);
    assert.deepEqual(s.calls, (w.message.tool_calls || []).map((t) => ({ type: t.type, name: t.function.name, arguments: t.function.arguments })), name);
    assert.deepEqual(s.logprobs, w.logprobs ? w.logprobs.content : null, name);
    assert.equal(s.finish, w.finish_reason, name);
  }
});

test('a plain reply with logprobs: Chromium equals Node', () => {
  const r = got.plain.whole;
  assert.equal(r.choices[0].logprobs.content.length, r.usage.completion_tokens);
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(plain(r), plain(node.plain));
});

test('response_format json_schema: the reply parses and validates, and Chromium equals Node', () => {
  const c = got.schema.whole.choices[0];
  assert.equal(c.finish_reason, 'stop', c.message.content);
  const validate = AJV.compile(PERSON);
  assert.ok(validate(JSON.parse(c.message.content)), `${c.message.content}: ${JSON.stringify(validate.errors)}`);
  assert.equal(plain(got.schema.whole), plain(node.schema));
});

test('tool_choice required (Hermes, Qwen2.5 template): valid calls, and Chromium equals Node', () => {
  const c = got.tool.whole.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.ok(c.message.tool_calls.length >= 1);
  for (const t of c.message.tool_calls) {
    assert.equal(t.type, 'function');
    const validate = AJV.compile(PARAMS[t.function.name]);
    assert.ok(validate(JSON.parse(t.function.arguments)), `${t.function.name}(${t.function.arguments}): ${JSON.stringify(validate.errors)}`);
  }
  assert.equal(plain(got.tool.whole), plain(node.tool));
});

test('no page errors', () => {
  assert.deepEqual(errors, []);
});
