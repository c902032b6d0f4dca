// JSON output through the public API: options `json` (true: any JSON value,
// 'object': a JSON object) and `jsonSchema` become a GBNF grammar on the
// caller's thread (web/options.js, web/grammar/json-schema.js) that the
// worker's grammar sampler follows (docs/grammar.md). For the schema corpus
// of tests/js/fixtures/json-schemas.mjs, seeded generations at temperatures
// 0.8 to 1.5 on a synthetic model with a byte-level BPE vocabulary (and a
// few on stories260K, SentencePiece with byte fallback) must each be
// complete, parse with JSON.parse and validate with ajv (2020-12 +
// ajv-formats), an implementation independent of the converter. Also:
// json: true / 'object', streamed chunks (whole UTF-8 characters, joined
// equal to the result), seeds, every method that takes a grammar, the
// errors raised before anything is posted, and top-N logprobs under a
// grammar (the raw distribution).
//
// The models have random weights: nothing makes them want to close a string
// or write an '@', and the length of an unbounded string is a geometric
// tail. The BPE model's vocabulary (4000 tokens) holds JSON punctuation
// pieces ('",', '"}', ...), and its generations take QUOTE_BIAS on the
// tokens with a '"' (what a trained model learns; the mask comes first, so
// the bias never puts a quote where the grammar has none): measured over 8
// seeds a schema at T 0.8-1.5 the longest complete output was 395 tokens,
// p99 185, so MAX_TOKENS = 1024 leaves a wide margin (without the bias the
// tail reached 592). An output cut by maxTokens is a failure, except for the
// RARE schemas below, whose grammar can only end after a sequence such a
// model almost never writes: they run with fewer seeds and a smaller cap; a
// generation of theirs cut by maxTokens is counted and reported, and must
// still be a prefix of the grammar's language (the engine's own recognizer
// on a second engine); one that ends is held to JSON.parse and ajv like the
// others. stories260K (a 512-token context) takes no bias; its dozen
// schemas' outputs measured at most 169 tokens.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { MODEL_PATH, ROOT, isError } from './helpers.mjs';
import { loadModel, jsonSchemaToGbnf, jsonGrammar } from '../../web/index.js';
import { Engine } from '../../web/worker/engine.js';
import { makeModel } from '../../models/make-model.js';
import { CORPUS } from './fixtures/json-schemas.mjs';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const addFormats = addFormatsModule.default ?? addFormatsModule;
const AJV = new Ajv2020({ strict: true, strictTypes: false, strictTuples: false, strictRequired: false, ownProperties: true });
addFormats(AJV);

let posted = 0;
const realPost = Worker.prototype.postMessage;
Worker.prototype.postMessage = function countedPost(...args) { posted++; return realPost.apply(this, args); };

const PROMPT = 'JSON: ';
const MAX_TOKENS = 1024;
const STORIES_MAX = 400;
const QUOTE_BIAS = 1;
const TEMPS = [0.8, 1, 1.25, 1.5];
const SEEDS = 8;
/** Schemas whose grammar ends only after a sequence a random-weight model almost never writes, and what it is. */
const RARE = new Map([
  ['object with required', "an email: an '@', then a domain"],
  ['format email', "an '@', then a domain"],
  ['realistic: order', "a customer email: an '@', then a domain"],
  ['pattern unanchored', "an '@'"],
  ['pattern with quote and backslash', 'an escaped quote \\" to open the string and another to close it'],
  ['pattern half anchored', "'id-' first or '-end' last"],
]);
const RARE_SEEDS = 2, RARE_MAX = 128;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-json-'));
const BPE = path.join(tmp, 'bpe.gguf');
makeModel(BPE, { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 128, ctx: 2048, vocab: 4000 }, 'f32', 77, { arch: 'llama3', outStd: 0.5, bpeFill: true });

let bpe, stories, recognizer, quoteBias;
test.before(async () => {
  bpe = await loadModel(BPE, { contextLength: 2048, threads: 1 });
  stories = await loadModel(MODEL_PATH, { contextLength: 512, threads: 1 });
  quoteBias = [];
  for (let id = 0; id < bpe.info.hparams.nVocab; id++) if ((await bpe.detokenize([id])).includes('"')) quoteBias.push([id, QUOTE_BIAS]);
  assert.ok(quoteBias.length > 50, `${quoteBias.length} tokens with a quote`);
});
/** The sampling options of the BPE model's generations (see the top of the file). */
const biased = (o) => ({ ...o, logitBias: quoteBias });
test.after(async () => {
  await bpe?.dispose();
  await stories?.dispose();
  recognizer?.dispose();
  Worker.prototype.postMessage = realPost;
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The engine's own recognizer on a second engine (this thread): is `text` a prefix of the grammar's language? */
async function isPrefix(file, grammar, text) {
  if (!recognizer || recognizer.file !== file) {
    recognizer?.dispose();
    recognizer = await Engine.create(fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm')));
    recognizer.loadBytes(fs.readFileSync(file), { contextLength: 64 });
    recognizer.file = file;
  }
  const g = recognizer.grammars.get(grammar);
  const s = g.newState();
  try { return g.acceptText(s, text); } finally { g.freeState(s); }
}

/** A generation that ended ('stop') parses and validates; returns the value. */
function validOutput(r, validate, what) {
  assert.equal(r.finishReason, 'stop', `${what}: ended '${r.finishReason}' after ${r.tokens.length} tokens: ${JSON.stringify(r.text).slice(0, 300)}`);
  let v;
  assert.doesNotThrow(() => { v = JSON.parse(r.text); }, `${what}: JSON.parse refuses ${JSON.stringify(r.text)}`);
  if (validate) assert.ok(validate(v), `${what}: ajv refuses ${JSON.stringify(r.text)}: ${JSON.stringify(validate.errors)}`);
  return v;
}

/** Runs the corpus on a model; returns {validated: schemas with a validated output, cut: RARE cases cut by maxTokens}. */
async function runCorpus(model, file, entries, seeds) {
  const validated = new Set(), cut = [];
  let tokens = 0, longest = 0;
  for (const { name, schema } of entries) {
    const validate = AJV.compile(schema);
    const rare = RARE.has(name);
    for (let seed = 1; seed <= (rare ? Math.min(seeds, RARE_SEEDS) : seeds); seed++) {
      const temperature = TEMPS[(seed - 1) % TEMPS.length];
      const o = { jsonSchema: schema, temperature, seed, maxTokens: rare ? RARE_MAX : model === bpe ? MAX_TOKENS : STORIES_MAX };
      const r = await model.complete(PROMPT, model === bpe ? biased(o) : o);
      tokens += r.tokens.length;
      const what = `${name} (seed ${seed}, T ${temperature})`;
      if (rare && r.finishReason === 'length') {
        assert.ok(await isPrefix(file, jsonSchemaToGbnf(schema), r.text), `${what}: cut at maxTokens outside the grammar: ${JSON.stringify(r.text)}`);
        cut.push(name);
        continue;
      }
      validOutput(r, validate, what);
      longest = Math.max(longest, r.tokens.length);
      validated.add(name);
    }
  }
  return { validated, cut, tokens, longest };
}

test(`corpus on a byte-level BPE model: ${SEEDS} seeded generations a schema (T 0.8-1.5) each end, parse and validate (ajv)`, async (t) => {
  assert.ok(CORPUS.length >= 50);
  const r = await runCorpus(bpe, BPE, CORPUS, SEEDS);
  for (const { name } of CORPUS) if (!RARE.has(name)) assert.ok(r.validated.has(name), name);
  assert.ok(r.validated.size >= 50, `${r.validated.size} schemas validated`);
  t.diagnostic(`${r.validated.size} of ${CORPUS.length} schemas validated, ${r.tokens} tokens, the longest complete output ${r.longest} tokens (cap ${MAX_TOKENS})`);
  t.diagnostic(`cut at maxTokens ${RARE_MAX} (still inside the grammar): ${r.cut.length} of ${RARE.size * RARE_SEEDS} generations of ${[...new Set(r.cut)].map((n) => `${n} (needs ${RARE.get(n)})`).join('; ')}`);
});

test('stories260K (SentencePiece, byte fallback): a dozen schemas of the corpus end, parse and validate', async (t) => {
  const names = ['string', 'string lengths (code points)', 'integer 0..150', 'number 0..1', 'boolean', 'enum of unicode and escapes',
    'enum of mixed values', 'format date', 'format uuid', 'nested objects', 'linked list (recursion)', 'tuple (prefixItems, items false)'];
  const entries = names.map((n) => CORPUS.find((c) => c.name === n) || assert.fail(`no corpus entry ${n}`));
  const r = await runCorpus(stories, MODEL_PATH, entries, 2);
  assert.equal(r.validated.size, names.length);
  t.diagnostic(`${r.tokens} tokens, the longest ${r.longest}`);
});

test("json: true gives any JSON value and json: 'object' a JSON object; both parse (BPE and SentencePiece)", async () => {
  const kinds = new Set();
  for (const [model, n] of [[bpe, 16], [stories, 4]]) {
    for (let seed = 1; seed <= n; seed++) {
      const temperature = TEMPS[seed % TEMPS.length];
      const opts = (o) => (model === bpe ? biased({ ...o, maxTokens: MAX_TOKENS }) : { ...o, maxTokens: STORIES_MAX });
      const any = validOutput(await model.complete(PROMPT, opts({ json: true, temperature, seed })), null, `json: true seed ${seed}`);
      kinds.add(any === null ? 'null' : Array.isArray(any) ? 'array' : typeof any);
      const obj = validOutput(await model.complete(PROMPT, opts({ json: 'object', temperature, seed })), null, `json: 'object' seed ${seed}`);
      assert.ok(obj !== null && typeof obj === 'object' && !Array.isArray(obj), `json: 'object' gave ${JSON.stringify(obj)}`);
    }
  }
  assert.ok(kinds.size >= 2, `json: true produced only ${[...kinds]}`);
  // json: false is no constraint at all: the same tokens as no option
  const plain = await bpe.complete(PROMPT, { temperature: 1, seed: 3, maxTokens: 20 });
  assert.deepEqual((await bpe.complete(PROMPT, { json: false, temperature: 1, seed: 3, maxTokens: 20 })).tokens, plain.tokens);
});

test('streaming: chunks are whole UTF-8 characters and join to the result; seeds are deterministic', async () => {
  const schemas = ['enum of unicode and escapes', 'string', 'array of strings', 'unicode property names and values'].map((n) => CORPUS.find((c) => c.name === n) || assert.fail(n));
  let nonAscii = 0;
  const texts = new Set();
  for (const { name, schema } of schemas) {
    for (let seed = 1; seed <= 3; seed++) {
      const o = biased({ jsonSchema: schema, temperature: 1.25, seed, maxTokens: MAX_TOKENS });
      const it = bpe.generate(PROMPT, o);
      const chunks = [];
      let r;
      for (;;) { r = await it.next(); if (r.done) break; chunks.push(r.value.text); }
      const result = r.value;
      for (const c of chunks) {
        assert.equal(Buffer.from(c, 'utf8').toString('utf8'), c, `${name}: a chunk with a lone surrogate`);
        assert.ok(!c.includes('\uFFFD'), `${name}: a chunk cut a character: ${JSON.stringify(c)}`);
      }
      const joined = chunks.join('');
      assert.equal(joined, result.text, name);
      validOutput(result, AJV.compile(schema), `${name} streamed`);
      if ([...joined].some((c) => c.codePointAt(0) > 0x7f)) nonAscii++;
      // the same seed: the same tokens, streamed or not
      const again = await bpe.complete(PROMPT, o);
      assert.deepEqual(again.tokens, result.tokens, `${name} seed ${seed}`);
      assert.equal(again.text, joined);
      texts.add(`${name}:${joined}`);
    }
  }
  assert.ok(nonAscii >= 3, `${nonAscii} outputs with a character outside ASCII (split across byte-level tokens)`);
  assert.ok(texts.size >= 8, 'other seeds, other texts');
});

const PERSON = {
  type: 'object', additionalProperties: false, required: ['name', 'age', 'tags'],
  properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 }, tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 } },
};

test('every method that takes a grammar takes json and jsonSchema: chat, chatComplete, bestOfN, selfConsistency, generateUntil, beamSearch, treeSearch, speculative', async () => {
  const validate = AJV.compile(PERSON);
  const o = biased({ jsonSchema: PERSON, temperature: 1, seed: 5, maxTokens: MAX_TOKENS });
  const msgs = [{ role: 'user', content: 'A person as JSON.' }];
  validOutput(await bpe.chatComplete(msgs, o), validate, 'chatComplete');
  let streamed = '';
  for await (const c of bpe.chat(msgs, o)) streamed += c.text;
  assert.equal(streamed, (await bpe.chatComplete(msgs, o)).text, 'chat streams what chatComplete returns');
  const b = await bpe.bestOfN(PROMPT, { ...o, n: 6 });
  assert.equal(b.candidates.length, 6);
  for (const c of b.candidates) validOutput(c, validate, `bestOfN candidate ${c.index}`);
  const sc = await bpe.selfConsistency(PROMPT, { ...o, n: 4, extract: (text) => JSON.parse(text).age });
  assert.ok(Number.isInteger(sc.answer));
  let attempts = 0;
  const gu = await bpe.generateUntil(PROMPT, { ...o, verify: (r) => { attempts++; return validate(JSON.parse(r.text)) && JSON.parse(r.text).tags.length > 0; }, maxAttempts: 8 });
  assert.ok(gu.ok && attempts >= 1);
  const beam = await bpe.beamSearch(PROMPT, { jsonSchema: PERSON, beams: 3, maxTokens: 200 });
  assert.equal(beam.beams.length, 3);
  for (const x of beam.beams) validOutput(x, validate, 'beamSearch');
  const tree = await bpe.treeSearch(PROMPT, { ...o, step: ',', expand: 3, keep: 2, maxSteps: 16, maxTokensPerStep: 16 });
  assert.equal(tree.best.finishReason, 'stop');
  assert.ok(validate(JSON.parse(tree.text)), `treeSearch: ${tree.text}`);
  // prompt lookup: sampled output follows the constrained distribution, greedy output is plain greedy's (PERSON is bounded)
  validOutput(await bpe.complete(PROMPT, { ...o, draft: 'lookup' }), validate, 'speculative');
  const g = { jsonSchema: PERSON, temperature: 0, maxTokens: MAX_TOKENS };
  const spec = await bpe.complete(PROMPT, { ...g, draft: 'lookup' });
  assert.deepEqual(spec.tokens, (await bpe.complete(PROMPT, g)).tokens, 'greedy with prompt lookup');
  validOutput(spec, validate, 'speculative greedy');
  const any = await bpe.bestOfN(PROMPT, biased({ json: 'object', n: 3, temperature: 1, maxTokens: MAX_TOKENS }));
  for (const c of any.candidates) validOutput(c, null, 'bestOfN json');
});

test('the mask comes before logitBias: a huge bias on forbidden tokens never brings them back', async () => {
  const ids = new Set();
  for (const s of ['x', ' x', 'xx', '"x', 'true', '{']) for (const id of await bpe.tokenize(s, { addBos: false })) ids.add(id);
  const logitBias = [...ids].map((id) => [id, 1e6]);
  for (let seed = 1; seed <= 4; seed++) {
    const r = await bpe.complete(PROMPT, { jsonSchema: { type: 'integer', minimum: -50, maximum: 50 }, logitBias, temperature: 1, seed, maxTokens: 16 });
    const v = validOutput(r, null, `seed ${seed}`);
    assert.ok(Number.isInteger(v) && v >= -50 && v <= 50, r.text);
  }
  // the same bias without a grammar takes over at once
  const free = await bpe.complete(PROMPT, { logitBias, temperature: 1, seed: 1, maxTokens: 4 });
  assert.ok(free.tokens.every((t) => ids.has(t)));
});

test('topLogprobs under a grammar are the raw distribution: equal to the unconstrained ones, forbidden tokens included', async () => {
  const r = await bpe.complete(PROMPT, { json: 'object', logprobs: 5, temperature: 1, seed: 2, maxTokens: 40 });
  const free = await bpe.complete(PROMPT, { logprobs: 5, temperature: 1, seed: 2, maxTokens: 1 });
  assert.deepEqual(r.topLogprobs[0], free.topLogprobs[0], 'the first position sees the same context');
  // an object's first token starts with '{' (or whitespace: none here); the raw top 5 name others
  assert.ok(r.topLogprobs[0].some((a) => !a.text.startsWith('{')), JSON.stringify(r.topLogprobs[0]));
  assert.ok(r.text.startsWith('{'));
  // a chosen token's logprob equals its entry among the alternatives whenever it is there
  r.tokens.forEach((tok, i) => {
    const e = r.topLogprobs[i].find((a) => a.token === tok);
    if (e) assert.equal(e.logprob, r.logprobs[i]);
  });
});

test('errors before anything is posted: BAD_SCHEMA for a schema the converter refuses, BAD_OPTION for two constraints or a bad value', async () => {
  const before = posted;
  const cases = [
    [() => bpe.complete(PROMPT, { jsonSchema: { type: 'object', minProperties: 2 } }), 'BAD_SCHEMA', /minProperties.*\/minProperties/],
    [() => bpe.chatComplete([{ role: 'user', content: 'x' }], { jsonSchema: { type: 'string', pattern: '(?=a)' } }), 'BAD_SCHEMA', /pattern/],
    [() => bpe.bestOfN(PROMPT, { jsonSchema: { $ref: '#/$defs/missing' } }), 'BAD_SCHEMA', /missing/],
    [() => bpe.beamSearch(PROMPT, { jsonSchema: { type: 'integer', multipleOf: 3 } }), 'BAD_SCHEMA', /multipleOf/],
    [() => bpe.complete(PROMPT, { json: true, grammar: 'root ::= "a"' }), 'BAD_OPTION', /grammar and json/],
    [() => bpe.complete(PROMPT, { json: 'object', jsonSchema: { type: 'object' } }), 'BAD_OPTION', /json and jsonSchema/],
    [() => bpe.bestOfN(PROMPT, { grammar: 'root ::= "a"', jsonSchema: true }), 'BAD_OPTION', /grammar and jsonSchema/],
    [() => bpe.complete(PROMPT, { json: 'array' }), 'BAD_OPTION', /json/],
    [() => bpe.complete(PROMPT, { jsonSchema: 'string' }), 'BAD_OPTION', /jsonSchema/],
    [() => bpe.nextTokenDistribution(PROMPT, { json: true }), 'BAD_OPTION', /json/],
  ];
  for (const [call, code, re] of cases) await assert.rejects(call, isError(code, re));
  assert.equal(posted, before, 'nothing was posted to a worker');
  // json: false beside grammar is fine (json is off)
  const r = await bpe.complete(PROMPT, { json: false, grammar: 'root ::= "ab" | "cd"', maxTokens: 8 });
  assert.ok(['ab', 'cd'].includes(r.text));
  // the grammar the worker gets is the converter's
  assert.equal(typeof jsonGrammar({ object: true }), 'string');
});
