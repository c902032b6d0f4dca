// The options schema (web/options.js) and the caller-side hardening of
// issue #25 (docs/hardening.md): every option of every method rejects an
// unknown key (naming the closest known one), a wrong type and an
// out-of-range value with BAD_OPTION naming the option, on the caller's
// thread before anything is posted to the worker; callbacks that throw or
// are not functions fail their call, never the process; values the
// structured clone cannot copy never leave a request pending; dispose()
// stops what is running instead of waiting for it.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { spawn, spawnSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { MODEL_PATH, ROOT } from './helpers.mjs';
import { loadModel, WasmlmError, DEFAULT_SAMPLING } from '../../web/index.js';
import { OPTIONS, METHODS, checkOptions, closestKey, optionSpec } from '../../web/options.js';

// Every message posted to any worker of this process is counted: a rejected
// call must not have posted one.
let posted = 0;
const realPost = Worker.prototype.postMessage;
Worker.prototype.postMessage = function countedPost(...args) { posted++; return realPost.apply(this, args); };

// uncaught exceptions would kill a user's process; here they are counted
const uncaught = [];
process.on('uncaughtException', (e) => uncaught.push(e));

const GREEDY = { temperature: 0, repeatPenalty: 1 };
let model;
test.before(async () => { model = await loadModel(MODEL_PATH, { contextLength: 128, threads: 1 }); });
test.after(async () => { await model?.dispose(); Worker.prototype.postMessage = realPost; });

const isBad = (option) => (e) => {
  assert.ok(e instanceof WasmlmError, `a WasmlmError, got ${e && e.name}: ${e && e.message}`);
  assert.equal(e.code, 'BAD_OPTION', e.message);
  if (option) assert.match(e.message, new RegExp(`\\b${option}\\b`), `message names ${option}`);
  return true;
};

// ---- the schema itself -------------------------------------------------------

/** Values of the wrong type and out of range for one option of a method. */
function badValuesOf(name, method) {
  const s = optionSpec(name, method);
  const wrongType = {
    int: ['', '5', true, 1.5, NaN, Infinity, 5n, {}, () => 1],
    number: ['', '0.5', true, NaN, Infinity, -Infinity, 1n, [], () => 1],
    boolean: [1, 0, 'true', {}, () => 1],
    string: [1, '', {}, [], () => 1],
    enum: ['nope', 1, true, {}],
    function: [1, 'f', {}, true],
    signal: [{}, 'signal', 1, { aborted: false }],
    object: [1, 'x', [], () => 1, { f: () => 1 }, { s: Symbol('s') }, new Date(0)],
    seed: [-1, 1.5, NaN, '5', -1n, 2n ** 64n, {}, () => 1],
    stop: [1, '', [1], [''], {}, () => 1],
    grammar: [1, '', {}, [], () => 1],
    json: [1, 'array', 'true', {}, () => 1],
    jsonSchema: [1, 'x', [], () => 1, new Date(0)],
    sha256: ['abc', 'g'.repeat(64), 'a'.repeat(63), 1, {}],
    hubToken: [1, '', ' ', 'hf_a b', 'hf_x\n', 'hf_\u00e9', 'x'.repeat(4097), {}, () => 1],
    scorer: ['best', 1, {}],
    draft: ['model', 1, {}, () => 1],
    feedback: ['yes', 1, {}],
    wasm: [1, true, {}, ''],
    escalate: ['tree', ['best-of-n', 'best-of-n'], ['beam'], [1], {}],
    adaptiveN: [true, 1, 'x', [], { minN: 0 }, { minN: 1.5 }, { maxN: 4097 }, { confidence: 1 }, { confidence: 0.5 }, { confidence: '0.9' },
      { minN: 8, maxN: 4 }, { batch: 65 }, { maxn: 8 }, ...(s.adaptiveKeys && !s.adaptiveKeys.includes('target') ? [{ target: 1 }] : [{ target: Infinity }])],
    logitBias: [1, 'x', true, () => 1, new Map([[1, 1]]), { dragon: 1 }, { '-1': 1 }, { '01': 1 }, { 1.5: 1 }, { 1: NaN }, { 1: Infinity },
      { 1: '2' }, { 4294967296: 1 }, [[1]], [1, 2], [['', 1]], [[-1, 1]], [[1.5, 1]], [[1, 'x']], [[1, Infinity]], [['x'.repeat(1025), 1]],
      [[{}, 1]]],
  }[s.kind];
  const range = [];
  if (s.kind === 'int') {
    if (s.min !== undefined) range.push(s.min - 1);
    if (s.max !== undefined) range.push(s.max + 1, ...(s.max < 4294967297 ? [4294967297] : []));   // (memoryLimit goes to 16 GiB)
  }
  if (s.kind === 'number') {
    if (s.min !== undefined) range.push(s.minExclusive ? s.min : s.min - 0.5);
    if (s.max !== undefined) range.push(s.max + 0.5);
  }
  return [...wrongType, ...range];
}

test('every option of every method: wrong types and out-of-range values are BAD_OPTION naming the option', () => {
  let checked = 0;
  for (const [method, keys] of Object.entries(METHODS)) {
    for (const key of keys) {
      for (const v of badValuesOf(key, method)) {
        assert.throws(() => checkOptions(method, { [key]: v }), isBad(key), `${method}({${key}: ${String(v)}})`);
        checked++;
      }
    }
  }
  assert.ok(checked > 500, `${checked} cases`);
});

test('unknown keys are errors that suggest the closest known key', () => {
  assert.throws(() => checkOptions('generate', { max_tokens: 5 }), (e) => isBad('max_tokens')(e) && /did you mean maxTokens\?/.test(e.message) && e.suggestion === 'maxTokens');
  assert.throws(() => checkOptions('complete', { temprature: 0 }), (e) => e.suggestion === 'temperature');
  assert.throws(() => checkOptions('loadModel', { context_length: 64 }), (e) => e.suggestion === 'contextLength');
  assert.throws(() => checkOptions('loadModel', { temperature: 0 }), (e) => /not an option of loadModel/.test(e.message));
  assert.throws(() => checkOptions('bestOfN', { x: 1 }), isBad('x'));
  assert.throws(() => checkOptions('generate', { [Symbol('s')]: 1 }), isBad());
  assert.equal(closestKey('zzzzzzzz', METHODS.generate), null);
  for (const [method, keys] of Object.entries(METHODS)) {
    for (const key of keys) assert.equal(closestKey(key.toUpperCase(), keys), key, `${method}.${key}`);
  }
});

test('options that are not an object are refused; null and undefined values mean "not given"', () => {
  for (const v of [5, 'x', true, [], () => 1]) assert.throws(() => checkOptions('generate', v), isBad('options'));
  assert.deepEqual(checkOptions('generate', undefined), {});
  assert.deepEqual(checkOptions('generate', { maxTokens: null, temperature: undefined }), {});
  assert.deepEqual(checkOptions('generate', { maxTokens: 5, seed: 7n, stop: 'x' }), { maxTokens: 5, seed: 7n, stop: 'x' });
  assert.throws(() => checkOptions('selfConsistency', {}), isBad('extract'));
  assert.throws(() => checkOptions('generateUntil', {}), isBad('verify'));
});

test('the sampling defaults come from the schema and every option has a doc line', () => {
  for (const [k, v] of Object.entries(DEFAULT_SAMPLING)) assert.equal(OPTIONS[k].default, v, k);
  for (const [k, s] of Object.entries(OPTIONS)) assert.ok(typeof s.doc === 'string' && s.doc.length > 5, k);
  for (const keys of Object.values(METHODS)) for (const k of keys) assert.ok(OPTIONS[k], k);
});

// The option keys an interface of index.d.ts declares, following `extends`
// (including Omit<X, 'a' | 'b'>) and ignoring nested object types.
function dtsKeys(dts, name) {
  const m = new RegExp(`export interface ${name}(?:<[^>]*>)?(?: extends ([^{]+))?\\s*\\{`).exec(dts);
  assert.ok(m, `interface ${name} in index.d.ts`);
  const keys = new Set();
  let depth = 1, i = m.index + m[0].length, line = '';
  for (; depth > 0 && i < dts.length; i++) {
    const ch = dts[i];
    if (ch === '{') depth++;
    else if (ch === '}') depth--;
    if (ch === '\n' || depth === 0) {
      const k = /^\s*(\w+)\??\s*:/.exec(line);
      if (k) keys.add(k[1]);
      line = '';
    } else if (depth === 1) line += ch;
  }
  const comments = (t) => t.replace(/\/\*[\s\S]*?\*\//g, '');
  for (const part of (m[1] || '').split(/,(?![^<]*>)/).map((x) => comments(x).trim()).filter(Boolean)) {
    const omit = /^Omit<(\w+),\s*([^>]+)>$/.exec(part);
    const base = omit ? omit[1] : part;
    const drop = omit ? new Set([...omit[2].matchAll(/'(\w+)'/g)].map((x) => x[1])) : new Set();
    for (const k of dtsKeys(dts, base)) if (!drop.has(k)) keys.add(k);
  }
  return keys;
}

test('the TypeScript option types of every method declare exactly the schema\'s options', () => {
  const dts = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8');
  const IFACE = {
    loadModel: 'LoadOptions', loadTokenizer: 'TokenizerLoadOptions', generate: 'PlainGenerateOptions', complete: 'CompleteOptions',
    applyChatTemplate: 'ChatTemplateOptions', countTokens: 'CountTokensOptions',
    chat: 'ChatOptions', chatComplete: 'ChatCompleteOptions', bestOfN: 'BestOfNOptions', selfConsistency: 'SelfConsistencyOptions',
    generateUntil: 'GenerateUntilOptions', beamSearch: 'BeamSearchOptions', treeSearch: 'TreeSearchOptions', deliberate: 'DeliberateOptions', nextTokenDistribution: 'DistributionOptions',
    tokenize: 'TokenizeOptions', logits: 'LogitsOptions', quantize: 'QuantizeOptions', embed: 'EmbedOptions',
  };
  assert.deepEqual(Object.keys(IFACE).sort(), Object.keys(METHODS).sort());
  for (const [method, iface] of Object.entries(IFACE)) {
    assert.deepEqual([...dtsKeys(dts, iface)].sort(), [...METHODS[method]].sort(), `${method} (${iface})`);
  }
});

test('docs/options.md is generated from the schema and current', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'tools/gen-options-doc.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

// ---- through the public API: nothing reaches the worker ------------------------

test('issue #25 item 9: each misuse is BAD_OPTION naming the option, and posts nothing to a worker', async () => {
  const before = posted;
  const bad = [
    [() => loadModel(MODEL_PATH, { contextLength: 4294967297 }), 'contextLength'],
    [() => loadModel(MODEL_PATH, { contextLength: true }), 'contextLength'],
    [() => loadModel(MODEL_PATH, { contextLength: -1 }), 'contextLength'],
    [() => loadModel(MODEL_PATH, { batchSize: 4294967297 }), 'batchSize'],
    [() => loadModel(MODEL_PATH, { nKeep: true }), 'nKeep'],
    [() => loadModel(MODEL_PATH, { memoryLimit: -1 }), 'memoryLimit'],
    [() => loadModel(MODEL_PATH, { threads: 4294967298 }), 'threads'],
    [() => loadModel(MODEL_PATH, { threads: Infinity }), 'threads'],
    [() => loadModel(MODEL_PATH, { threads: 65 }), 'threads'],
    [() => loadModel(MODEL_PATH, { onProgress: 5 }), 'onProgress'],
    [() => loadModel(MODEL_PATH, { signal: {} }), 'signal'],
    [() => loadModel(MODEL_PATH, { sha256: 'abc' }), 'sha256'],
    [() => loadModel(fs.readFileSync(MODEL_PATH), { contextLength: () => 1 }), 'contextLength'],
    [() => model.complete('x', { maxTokens: '' }), 'maxTokens'],
    [() => model.complete('x', { topK: 4294967297 }), 'topK'],
    [() => model.complete('x', { topP: 1.5 }), 'topP'],
    [() => model.complete('x', { seed: 1.5 }), 'seed'],
    [() => model.complete('x', { max_tokens: 5 }), 'max_tokens'],
    [() => model.complete('x', { extra: () => 1 }), 'extra'],
    [() => model.complete('x', { signal: { addEventListener: 1 } }), 'signal'],
    [() => model.complete(() => 1), 'prompt'],
    [() => model.complete([1, NaN]), 'prompt'],
    [() => model.complete([1, 100000]), 'prompt'],
    [() => model.complete({ prompt: 'x' }), 'prompt'],
    [() => model.logits([NaN]), 'tokens'],
    [() => model.logits([]), 'tokens'],
    [() => model.quantize(NaN), 'type'],
    [() => model.quantize('q9_9'), 'type'],
    [() => model.detokenize([1.5]), 'ids'],
    [() => model.tokenize(5), 'text'],
    [() => model.nextTokenDistribution('x', { topN: 0 }), 'topN'],
    [() => model.bestOfN('x', { onCandidate: 1 }), 'onCandidate'],
    [() => model.bestOfN('x', { n: 65 }), 'n'],
    [() => model.bestOfN('x', { x: model }), 'x'],
    [() => model.bestOfN('x', { scorer: 'best' }), 'scorer'],
    [() => model.beamSearch('x', { beams: 2, maxTokens: 0 }), 'maxTokens'],
    [() => model.beamSearch('x', { beams: 33 }), 'beams'],
    [() => model.generateUntil('x', { verify: () => true, maxAttempts: 0 }), 'maxAttempts'],
    [() => model.selfConsistency('x', { extract: 1 }), 'extract'],
    [() => model.chatComplete([{ role: 'user', content: 'x' }], { template: 5 }), 'template'],
    [() => model.chatComplete([{ role: 'user', content: 'x' }], { variables: { f: () => 1 } }), 'variables'],
    [async () => { for await (const c of model.generate('x', { draft: 'other' })) void c; }, 'draft'],
    [async () => { for await (const c of model.generate('x', { temperature: -1 })) void c; }, 'temperature'],
  ];
  for (const [call, option] of bad) await assert.rejects(call(), isBad(option), `${call}`);
  assert.equal(posted, before, 'no message reached a worker');
  // and the model is untouched
  const r = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 4 });
  assert.equal(r.tokens.length, 4);
});

test('topP 0 keeps the single most likely token on every path', async () => {
  const greedy = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 8, ignoreEos: true });
  const p0 = await model.complete('Once upon a time', { temperature: 1.5, topK: 0, minP: 0, topP: 0, repeatPenalty: 1, maxTokens: 8, ignoreEos: true, seed: 3 });
  assert.deepEqual(p0.tokens, greedy.tokens);
  const d = await model.nextTokenDistribution('Once upon a time', { topP: 0 });
  assert.equal(d.length, 1);
  assert.equal(d[0].token, greedy.tokens[0]);
  assert.equal(d[0].prob, 1);
  const b = await model.bestOfN('Once upon a time', { n: 2, topP: 0, temperature: 1, repeatPenalty: 1, maxTokens: 8, ignoreEos: true });
  for (const c of b.candidates) assert.deepEqual(c.tokens, greedy.tokens);
});

test('bigint and number seeds work in every method that samples', async () => {
  const o = { maxTokens: 4, ignoreEos: true, temperature: 1 };
  const a = await model.complete('Once', { ...o, seed: 5n });
  assert.deepEqual((await model.complete('Once', { ...o, seed: 5 })).tokens, a.tokens);
  const b = await model.bestOfN('Once', { ...o, n: 2, seed: 5n });
  assert.deepEqual(b.candidates.find((c) => c.index === 0).tokens, a.tokens);
  const u = await model.generateUntil('Once', { ...o, seed: 5n, verify: () => true });
  assert.deepEqual(u.result.tokens, a.tokens);
  const s = await model.selfConsistency('Once', { ...o, n: 2, seed: 2n ** 64n - 1n, extract: (t) => t.length });
  assert.equal(s.candidates.length, 2);
});

// ---- callbacks (item 4) ----------------------------------------------------------

test('issue #25 item 4: a throwing onCandidate / onToken / onProgress fails its call, not the process; the model stays usable', async () => {
  const n0 = uncaught.length;
  const boom = new Error('callback boom');
  await assert.rejects(model.bestOfN('Once upon a time', { n: 2, maxTokens: 20, ignoreEos: true, onCandidate: () => { throw boom; } }), (e) => e === boom);
  await assert.rejects(model.complete('Once upon a time', { maxTokens: 50, ignoreEos: true, onToken: () => { throw boom; } }), (e) => e === boom);
  await assert.rejects(loadModel(MODEL_PATH, { threads: 1, onProgress: () => { throw boom; } }), (e) => e === boom);
  await assert.rejects(model.bestOfN('Once', { n: 2, maxTokens: 3, scorer: () => { throw boom; } }), (e) => e === boom);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(uncaught.length, n0, `uncaught: ${uncaught.slice(n0).map((e) => e.message)}`);
  const r = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 4 });
  assert.equal(r.tokens.length, 4);
});

test('fuzz findings: async callbacks that reject fail their call (no unhandled rejection); a bad wasm option is BAD_OPTION', async () => {
  const unhandled = [];
  const onUnhandled = (e) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    const boom = new Error('async boom');
    await assert.rejects(model.bestOfN('Once', { n: 2, maxTokens: 20, ignoreEos: true, onCandidate: async () => { throw boom; } }), (e) => e === boom);
    await assert.rejects(model.complete('Once', { maxTokens: 20, ignoreEos: true, onToken: async () => { throw boom; } }), (e) => e === boom);
    await assert.rejects(loadModel(fs.readFileSync(MODEL_PATH), { threads: 1, onProgress: async () => { throw boom; } }), (e) => e === boom);
    await assert.rejects(loadModel(MODEL_PATH, { threads: 1, wasm: '/nonexistent/engine.wasm' }), isBad('wasm'));
    await assert.rejects(loadModel(MODEL_PATH, { threads: 1, wasm: new Uint8Array(16) }), isBad('wasm'));
    await assert.rejects(model.applyChatTemplate([{ role: 'user', content: 'x' }]), (e) => e instanceof WasmlmError && e.code === 'NO_CHAT_TEMPLATE');
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(unhandled.map((e) => e.message), []);
  } finally { process.off('unhandledRejection', onUnhandled); }
  // an async onToken is awaited: tokens arrive one at a time
  let busy = false, overlapped = false;
  await model.complete('Once', { maxTokens: 5, ignoreEos: true, onToken: async () => { overlapped ||= busy; busy = true; await new Promise((r) => setTimeout(r, 5)); busy = false; } });
  assert.equal(overlapped, false);
});

// ---- non-cloneable values and orphaned requests (item 5) --------------------------

test('issue #25 item 5: non-cloneable options reject cleanly and leave nothing pending: the process exits by itself', async () => {
  const script = `
    import { loadModel } from ${JSON.stringify(path.join(ROOT, 'web/index.js'))};
    import fs from 'node:fs';
    const m = await loadModel(${JSON.stringify(MODEL_PATH)}, { threads: 1, contextLength: 64 });
    const d = await loadModel(${JSON.stringify(MODEL_PATH)}, { threads: 1, contextLength: 64 });
    const codes = [];
    for (const call of [
      () => m.complete('x', { extra: () => 1 }),
      () => loadModel(fs.readFileSync(${JSON.stringify(MODEL_PATH)}), { contextLength: () => 1 }),
      () => m.bestOfN('x', { x: d }),
      () => m.complete('x', { stop: [Symbol('s')] }),
      () => m.chatComplete([{ role: 'user', content: 'x' }], { template: '{{ x }}', variables: { m: d } }),
    ]) { try { await call(); codes.push('resolved'); } catch (e) { codes.push(e.code); } }
    console.log(JSON.stringify(codes));
    // no dispose: the workers are unref'd when idle, so the process must end now
  `;
  const file = path.join(os.tmpdir(), `wasmlm-orphan-${process.pid}.mjs`);
  fs.writeFileSync(file, script);
  try {
    const { code, out, err, ms } = await runNode(file, 60000);
    assert.equal(code, 0, err);
    assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), ['BAD_OPTION', 'BAD_OPTION', 'BAD_OPTION', 'BAD_OPTION', 'BAD_OPTION']);
    assert.ok(ms < 60000);
  } finally { fs.rmSync(file, { force: true }); }
});

function runNode(file, timeout) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`process did not exit by itself within ${timeout} ms: ${out} ${err}`)); }, timeout);
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, out, err, ms: Date.now() - t0 }); });
  });
}

// ---- dispose (item 6) ------------------------------------------------------------

test('issue #25 item 6: dispose() stops a running stream, an in-flight complete() and queued requests with DISPOSED, promptly', async () => {
  const m = await loadModel(MODEL_PATH, { contextLength: 2048, threads: 1 });
  const it = m.generate('Once upon a time', { maxTokens: 100000, ignoreEos: true, temperature: 0.8 });
  for (let i = 0; i < 3; i++) await it.next();
  const inFlight = assert.rejects(m.complete('Once upon a time', { maxTokens: 100000, ignoreEos: true }), (e) => e.code === 'DISPOSED');
  const queued = assert.rejects(m.tokenize('hello'), (e) => e.code === 'DISPOSED');
  const t0 = Date.now();
  await m.dispose();
  const disposeMs = Date.now() - t0;
  let chunks = 0, err = null;
  try { for (;;) { const r = await it.next(); if (r.done) break; chunks++; } } catch (e) { err = e; }
  assert.equal(err && err.code, 'DISPOSED', `stream ended with ${err && err.message} after ${chunks} more chunks`);
  assert.ok(chunks < 64, `${chunks} chunks after dispose`);
  await inFlight;
  await queued;
  await assert.rejects(m.complete('x'), (e) => e.code === 'DISPOSED');
  assert.ok(disposeMs < 5000, `dispose took ${disposeMs} ms`);
});

test('the schema\'s sampling defaults are the C library\'s wlm_sampler_default_params (one source of truth)', async () => {
  const { readSamplerParams } = (await import('../../web/worker/abi.js')).ABI32;   // a wasm32 module below
  const memory = new WebAssembly.Memory({ initial: 32, maximum: 65536 });
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(path.join(ROOT, 'wasm/wasmlm.wasm')), { env: { memory } });
  const p = instance.exports.__heap_base.value; // nothing is allocated yet: free bytes
  instance.exports.wlm_sampler_default_params(p);
  const c = readSamplerParams(new DataView(memory.buffer), p);
  const f32 = (x) => Math.fround(x);
  assert.deepEqual(c, {
    temperature: f32(DEFAULT_SAMPLING.temperature), topK: DEFAULT_SAMPLING.topK, topP: f32(DEFAULT_SAMPLING.topP),
    minP: f32(DEFAULT_SAMPLING.minP), repeatPenalty: f32(DEFAULT_SAMPLING.repeatPenalty), repeatLastN: DEFAULT_SAMPLING.repeatLastN,
    presencePenalty: f32(DEFAULT_SAMPLING.presencePenalty), frequencyPenalty: f32(DEFAULT_SAMPLING.frequencyPenalty),
    typicalP: f32(DEFAULT_SAMPLING.typicalP), nBiases: 0, biases: 0,
    allow: 0,   // every token (no grammar)
  });
  // and they are llama.cpp's (common_params_sampling): penalties off, so temperature 0 alone is plain greedy
  assert.deepEqual({ ...DEFAULT_SAMPLING, maxTokens: undefined, seed: undefined }, {
    maxTokens: undefined, seed: undefined, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, typicalP: 1,
    repeatPenalty: 1, presencePenalty: 0, frequencyPenalty: 0, repeatLastN: 64,
  });
});

test('logitBias: the shapes it takes, token ids checked against the vocabulary before anything is posted', async () => {
  assert.deepEqual(checkOptions('generate', { logitBias: { 5: -Infinity, 10: 2.5 } }), { logitBias: { 5: -Infinity, 10: 2.5 } });
  assert.deepEqual(checkOptions('bestOfN', { logitBias: [[5, -1], [' dragon', -Infinity]] }).logitBias, [[5, -1], [' dragon', -Infinity]]);
  assert.throws(() => checkOptions('generate', { logitBias: { dragon: 1 } }), (e) => isBad('logitBias')(e) && /\[\["dragon", bias\]\]/.test(e.message));
  assert.throws(() => checkOptions('generate', { logitBias: [[1, 2], [3]] }), (e) => isBad('logitBias')(e) && /entry 1/.test(e.message));
  assert.throws(() => checkOptions('generate', { logprobs: 21 }), isBad('logprobs'));
  assert.throws(() => checkOptions('nextTokenDistribution', { logprobs: 2 }), isBad('logprobs'));
  assert.throws(() => checkOptions('generate', { typicalP: 0 }), isBad('typicalP'));
  assert.throws(() => checkOptions('generate', { presencePenalty: 2.5 }), isBad('presencePenalty'));
  const before = posted;
  const nv = model.info.hparams.nVocab;
  for (const call of [
    () => model.complete('x', { logitBias: { [nv]: 1 } }),
    () => model.complete('x', { logitBias: [[nv + 7, -Infinity]] }),
    () => model.bestOfN('x', { logitBias: { [nv]: 1 } }),
    () => model.chatComplete([{ role: 'user', content: 'x' }], { logitBias: { [nv]: 1 } }),
    () => model.nextTokenDistribution('x', { logitBias: { [nv]: 1 } }),
  ]) await assert.rejects(call, (e) => isBad('logitBias')(e) && new RegExp(`token id (${nv}|${nv + 7}) out of range`).test(e.message));
  assert.equal(posted, before, 'nothing posted');
  const r = await model.complete('Once upon a time', { ...GREEDY, maxTokens: 4, logitBias: { [nv - 1]: -Infinity } });
  assert.equal(r.tokens.length, 4);
});
