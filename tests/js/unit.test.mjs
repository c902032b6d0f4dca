// Pure-JS parts: no wasm, no worker.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { StopMatcher, decodeGgufValue, shortF32, samplingOptions, DEFAULT_SAMPLING, ARRAY_SUMMARY_LIMIT } from '../../web/worker/engine.js';
import { Sha256 } from '../../web/sha256.js';
import { parseArgs, nativeArgs, formatInfo } from '../../web/cli/cli.js';
import { lookupDraft, nextLookupTokens } from '../../web/worker/multi.js';

function feed(stops, pieces) {
  const m = new StopMatcher(stops);
  let out = '';
  let stopped = false;
  for (const p of pieces) {
    const r = m.push(p);
    out += r.emit;
    if (r.stopped) { stopped = true; break; }
  }
  if (!stopped) out += m.flush();
  return { out, stopped, text: m.text };
}

test('StopMatcher: no stops passes text through', () => {
  const r = feed([], ['a', 'b', '', 'c']);
  assert.equal(r.out, 'abc');
  assert.equal(r.stopped, false);
});

test('StopMatcher: stop string split across pieces is cut and never emitted', () => {
  const m = new StopMatcher(['\n\nUser:']);
  const emitted = [];
  for (const p of ['Hello', ' there\n', '\nUs', 'er:', ' more']) {
    const r = m.push(p);
    emitted.push(r.emit);
    if (r.stopped) break;
  }
  assert.deepEqual(emitted, ['Hello', ' there', '', '']);
  assert.equal(m.text, 'Hello there');
  assert.equal(emitted.join(''), m.text);
});

test('StopMatcher: held text is released when it turns out not to be a stop', () => {
  const r = feed(['END'], ['the E', 'N', 'D', 'nd']);
  assert.equal(r.out, 'the ');
  assert.equal(r.stopped, true);
  const r2 = feed(['END'], ['the E', 'N', 'x']);
  assert.equal(r2.out, 'the ENx');
  assert.equal(r2.stopped, false);
  const r3 = feed(['END'], ['the EN']);
  assert.equal(r3.out, 'the EN', 'flush releases a held prefix at the end');
});

test('StopMatcher: earliest of several stops wins; stop inside one piece', () => {
  const r = feed(['b', 'zz'], ['xxzz then b']);
  assert.equal(r.out, 'xx');
  const r2 = feed(['.', '!'], ['Hi! There.']);
  assert.equal(r2.out, 'Hi');
});

function gguf(parts) {
  const bufs = [];
  for (const [t, v] of parts) {
    const b = Buffer.alloc(t === 'u64' || t === 'f64' ? 8 : t === 'u32' || t === 'f32' ? 4 : t === 'u8' ? 1 : 0);
    if (t === 'u64') b.writeBigUInt64LE(BigInt(v));
    else if (t === 'u32') b.writeUInt32LE(v);
    else if (t === 'f32') b.writeFloatLE(v);
    else if (t === 'f64') b.writeDoubleLE(v);
    else if (t === 'u8') b.writeUInt8(v);
    bufs.push(t === 'raw' ? Buffer.from(v) : b);
  }
  const all = Buffer.concat(bufs);
  return new DataView(all.buffer, all.byteOffset, all.byteLength);
}
const str = (s) => [['u64', Buffer.byteLength(s)], ['raw', s]];

test('decodeGgufValue: scalars', () => {
  assert.equal(decodeGgufValue(gguf([['u32', 42]]), 0, 4).value, 42);
  assert.equal(decodeGgufValue(gguf([['f32', 1.5]]), 0, 6).value, 1.5);
  assert.equal(decodeGgufValue(gguf([['u8', 1]]), 0, 7).value, true);
  assert.equal(decodeGgufValue(gguf([['u64', 7]]), 0, 10).value, 7);
  assert.equal(decodeGgufValue(gguf([['u64', 2n ** 63n]]), 0, 10).value, 2n ** 63n);
  assert.equal(decodeGgufValue(gguf([['f64', 0.25]]), 0, 12).value, 0.25);
  assert.equal(decodeGgufValue(gguf(str('llama')), 0, 8).value, 'llama');
  assert.equal(decodeGgufValue(gguf(str('żółw ▁')), 0, 8).value, 'żółw ▁');
});

test('decodeGgufValue: small arrays in full, big arrays summarised', () => {
  const small = gguf([['u32', 4], ['u64', 3], ['u32', 1], ['u32', 2], ['u32', 3]]);
  assert.deepEqual(decodeGgufValue(small, 0, 9).value, [1, 2, 3]);
  const n = ARRAY_SUMMARY_LIMIT + 100;
  const parts = [['u32', 8], ['u64', n]];
  for (let i = 0; i < n; i++) parts.push(...str('t' + i));
  const v = decodeGgufValue(gguf(parts), 0, 9).value;
  assert.equal(v.arrayOf, 'string');
  assert.equal(v.count, n);
  assert.deepEqual(v.head, ['t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7']);
  const f = [['u32', 6], ['u64', 1000]];
  for (let i = 0; i < 1000; i++) f.push(['f32', i]);
  const dv = gguf(f);
  const r = decodeGgufValue(dv, 0, 9);
  assert.equal(r.value.count, 1000);
  assert.equal(r.next, dv.byteLength, 'fixed-size elements are skipped to the end');
});

test('decodeGgufValue: truncated values throw', () => {
  assert.throws(() => decodeGgufValue(gguf([['u64', 100], ['raw', 'abc']]), 0, 8), RangeError);
  assert.throws(() => decodeGgufValue(gguf([['u32', 1]]), 0, 99), RangeError);
});

test('samplingOptions: defaults, validation, seed as BigInt', () => {
  const o = samplingOptions({});
  assert.equal(o.temperature, 0.8);
  assert.equal(o.topK, 40);
  assert.equal(o.seed, 0xC0FFEEn);
  assert.equal(o.maxTokens, 256);
  assert.deepEqual(o.stop, []);
  assert.equal(DEFAULT_SAMPLING.seed, 0xC0FFEE);
  assert.equal(samplingOptions({ seed: 42 }).seed, 42n);
  assert.equal(samplingOptions({ seed: 2n ** 64n + 5n }).seed, 5n);
  assert.deepEqual(samplingOptions({ stop: 'x' }).stop, ['x']);
  assert.throws(() => samplingOptions({ temperature: -1 }), /temperature/);
  assert.throws(() => samplingOptions({ topK: 'abc' }), /topK/);
  assert.throws(() => samplingOptions({ seed: 1.5 }), /seed/);
});

test('Sha256 matches node:crypto for many sizes and split points', () => {
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 65537]) {
    const d = randomBytes(n);
    const h = new Sha256();
    for (let i = 0; i < n;) { const k = Math.min(n - i, 1 + ((i * 7919) % 97)); h.update(d.subarray(i, i + k)); i += k; }
    assert.equal(h.hex(), createHash('sha256').update(d).digest('hex'), `size ${n}`);
  }
});

test('CLI argument parsing', () => {
  const { cmd, opts } = parseArgs(['generate', '-m', 'stories260K', '-p', 'Hi', '-n', '20', '--temp', '0',
    '--top-k=5', '--seed', '18446744073709551615', '--stop', 'x', '--stop', 'y', '--native', '--ignore-eos']);
  assert.equal(cmd, 'generate');
  assert.equal(opts.model, 'stories260K');
  assert.equal(opts.prompt, 'Hi');
  assert.equal(opts.maxTokens, 20);
  assert.equal(opts.temperature, 0);
  assert.equal(opts.topK, 5);
  assert.equal(opts.seed, 18446744073709551615n);
  assert.deepEqual(opts.stop, ['x', 'y']);
  assert.equal(opts.native, true);
  assert.equal(opts.ignoreEos, true);
  assert.throws(() => parseArgs(['generate', '--temp', 'hot']), /number/);
  assert.throws(() => parseArgs(['generate', '--bogus']), /unknown option/);
  assert.throws(() => parseArgs(['generate', '-m']), /needs a value/);
  const p = parseArgs(['quantize', 'a.gguf', 'b.gguf', 'q8_0']);
  assert.deepEqual(p.positional, ['a.gguf', 'b.gguf', 'q8_0']);
});

test('CLI --native argument list spells out every sampling default', () => {
  const { opts } = parseArgs(['generate', '-m', 'x', '-p', 'Once', '--temp', '0.5']);
  const a = nativeArgs('generate', opts, [], '/m.gguf');
  const get = (f) => a[a.indexOf(f) + 1];
  assert.equal(a[0], 'generate');
  assert.equal(get('-m'), '/m.gguf');
  assert.equal(get('-p'), 'Once');
  assert.equal(get('--temp'), '0.5');
  assert.equal(get('-n'), String(DEFAULT_SAMPLING.maxTokens));
  assert.equal(get('--top-k'), '40');
  assert.equal(get('--repeat-penalty'), '1');
  assert.equal(get('--presence-penalty'), '0');
  assert.equal(get('--frequency-penalty'), '0');
  assert.equal(get('--typical'), '1');
  assert.equal(get('--seed'), String(0xC0FFEE));
  assert.deepEqual(nativeArgs('quantize', {}, ['in', 'out', 'q4_0'], '/in.gguf'), ['quantize', '/in.gguf', 'out', 'q4_0']);
});

test('formatInfo prints metadata and a tensor table', () => {
  const s = formatInfo({
    metadata: { 'general.architecture': 'llama', 'tokenizer.ggml.tokens': { arrayOf: 'string', count: 512, head: ['<unk>', '<s>'] } },
    hparams: { nVocab: 512, nCtxTrain: 2048, nEmbd: 64, nLayer: 5, nHead: 8, nHeadKv: 4, headDim: 8, nFf: 172, nRot: 8, ropeFreqBase: 10000, rmsEps: 1e-5, bosId: 1, eosId: 2 },
    paramCount: 10, fileSize: 100,
    tensors: [{ name: 'token_embd.weight', typeName: 'F32', dims: [64, 512], offset: 0 }],
  });
  assert.match(s, /general.architecture = "llama"/);
  assert.match(s, /\(512 string\)/);
  assert.match(s, /token_embd.weight\s+F32\s+64 x 512/);
});

test('shortF32 gives the shortest decimal of a float32', () => {
  assert.equal(shortF32(Math.fround(1e-5)), 1e-5);
  assert.equal(shortF32(Math.fround(0.1)), 0.1);
  assert.equal(shortF32(10000), 10000);
  assert.equal(shortF32(0), 0);
  assert.equal(Math.fround(shortF32(Math.fround(Math.PI))), Math.fround(Math.PI));
});

test('lookupDraft: continues the latest match of the longest n-gram, running on into its own draft', () => {
  // no earlier occurrence of the last token: nothing to draft
  assert.deepEqual(lookupDraft([1, 2, 3, 4], 4), []);
  // "5 6" occurred before, followed by 7 8 9: the latest occurrence wins
  assert.deepEqual(lookupDraft([5, 6, 1, 5, 6, 7, 8, 9, 4, 5, 6], 3), [7, 8, 9]);
  // the longest n-gram first: "2 3" matches at 0 (then 9), "3" alone at 5 (then 4)
  assert.deepEqual(lookupDraft([2, 3, 9, 1, 3, 4, 2, 3], 1), [9]);
  // a period-2 loop drafts k tokens, not just the 2 left before the end
  assert.deepEqual(lookupDraft([7, 1, 2, 1, 2, 1, 2], 6), [1, 2, 1, 2, 1, 2]);
  // period 3, continuation copied from the context then from the draft
  assert.deepEqual(lookupDraft([4, 5, 6, 4, 5, 6, 4], 5), [5, 6, 4, 5, 6]);
  assert.deepEqual(lookupDraft([1, 1], 3), [1, 1, 1]);
  assert.deepEqual(lookupDraft([3], 4), []);
  assert.deepEqual(lookupDraft([1, 2, 1, 2], 0), []);
});

test('nextLookupTokens: starts at 4, then the last accepted run + 2, within [1, kMax]', () => {
  assert.equal(nextLookupTokens(8, null), 4);
  assert.equal(nextLookupTokens(3, null), 3);
  assert.equal(nextLookupTokens(8, 4, 4, 4), 6);    // all accepted: grow
  assert.equal(nextLookupTokens(8, 6, 6, 6), 8);    // capped at kMax
  assert.equal(nextLookupTokens(8, 8, 8, 1), 3);    // a short run: shrink
  assert.equal(nextLookupTokens(8, 3, 3, 0), 2);
  assert.equal(nextLookupTokens(1, 1, 1, 0), 1);    // never below 1
  assert.equal(nextLookupTokens(8, 5, 0, 0), 5);    // no n-gram match, nothing drafted: unchanged
});
