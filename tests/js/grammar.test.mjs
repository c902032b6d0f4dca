// Grammar-constrained generation (options.grammar, docs/grammar.md) through
// the public API on stories260K (SentencePiece with byte fallback) and on
// synthetic byte-level BPE models (Llama 3 and Qwen2 vocabularies): every
// output of seeded sampled generations is a sentence of its grammar, checked
// twice: by the engine's own recognizer (a second engine in this process) and
// by an independent parser written here (regular expressions, JSON.parse, a
// recursive-descent parser for a tiny language). Also: a forbidden token is
// never sampled at any temperature, seeds are deterministic, streamed text is
// whole UTF-8 characters, best-of-N, beam search, speculative decoding and
// chat follow the grammar, and bad grammars are BAD_OPTION with line:column.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODEL_PATH, ROOT, isError } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { Engine } from '../../web/worker/engine.js';
import { makeModel } from '../../models/make-model.js';

// ---- grammars and their independent checkers ----------------------------------------

const ARITH = `root ::= expr "="
expr ::= term (op term){0,3}
term ::= num | "(" num op num ")"
op   ::= " + " | " - " | " * "
num  ::= [1-9] [0-9]{0,2}
`;
const NUM = '[1-9][0-9]{0,2}', OP = ' [-+*] ', TERM = `(?:${NUM}|\\(${NUM}${OP}${NUM}\\))`;
const arithOk = (t) => new RegExp(`^${TERM}(?:${OP}${TERM}){0,3}=$`).test(t);

const LIST = `# a JSON array of one to five small items
root ::= "[" item ("," " "? item){0,4} "]"
item ::= "\\"" [a-z]{1,6} "\\"" | "0" | [1-9] [0-9]{0,2} | "true" | "false"
`;
function listOk(t) {
  let v;
  try { v = JSON.parse(t); } catch { return false; }
  return Array.isArray(v) && v.length >= 1 && v.length <= 5 && /^\[[^ ]/.test(t) &&
    v.every((x) => (typeof x === 'string' && /^[a-z]{1,6}$/.test(x)) || typeof x === 'boolean' || (Number.isInteger(x) && x >= 0 && x <= 999));
}

const LANG = `root  ::= stmt{1,3}
stmt  ::= "let " ident " = " expr ";\\n" | "print " expr ";\\n" | "if " expr " { print " expr "; }\\n"
expr  ::= atom (" + " atom){0,2}
atom  ::= ident | [0-9]{1,2} | "(" ident " * " [0-9] ")"
ident ::= [a-z]{1,3}
`;
/** A recursive-descent parser of LANG, written apart from the grammar. */
function langOk(src) {
  let i = 0;
  const eat = (s) => { if (src.startsWith(s, i)) { i += s.length; return true; } return false; };
  const run = (re) => { re.lastIndex = i; const m = re.exec(src); if (!m || m.index !== i) return false; i += m[0].length; return true; };
  const ident = () => run(/[a-z]{1,3}/y) && !/[a-z]/.test(src[i] || '');
  const atom = () => {
    const at = i;
    if (eat('(')) { if (ident() && eat(' * ') && run(/[0-9]/y) && eat(')')) return true; i = at; return false; }
    if (/[0-9]/.test(src[i] || '')) return run(/[0-9]{1,2}/y) && !/[0-9]/.test(src[i] || '');
    return ident();
  };
  const expr = () => { if (!atom()) return false; for (let k = 0; k < 2 && src.startsWith(' + ', i); k++) { i += 3; if (!atom()) return false; } return true; };
  const stmt = () => {
    if (eat('let ')) return ident() && eat(' = ') && expr() && eat(';\n');
    if (eat('print ')) return expr() && eat(';\n');
    if (eat('if ')) return expr() && eat(' { print ') && expr() && eat('; }\n');
    return false;
  };
  let n = 0;
  while (i < src.length && n < 3) { if (!stmt()) return false; n++; }
  return n >= 1 && i === src.length;
}

// every word has a character outside ASCII: a byte-fallback or byte-level
// vocabulary spells it in several tokens, one character split across them
const UNI = `root ::= "«" word (" " word){0,3} "»"
word ::= [a-z]{0,3} [éèàüö] [a-z]{0,2} | "☕" | "🙂"
`;
const WORD = '(?:[a-z]{0,3}[éèàüö][a-z]{0,2}|☕|🙂)';
const uniOk = (t) => new RegExp(`^«${WORD}(?: ${WORD}){0,3}»$`, 'u').test(t);

const CASES = [['arithmetic', ARITH, arithOk], ['list', LIST, listOk], ['tiny language', LANG, langOk], ['unicode', UNI, uniOk]];

// ---- models -------------------------------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-grammar-'));
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 128, ctx: 512, vocab: 1200 };
const synth = {};
for (const arch of ['llama3', 'qwen2']) {
  synth[arch] = path.join(tmp, `${arch}.gguf`);
  makeModel(synth[arch], SHAPE, 'f32', 77, { arch, outStd: 0.5 });
}

let stories, recognizer;
const recognizers = new Map();
test.before(async () => {
  stories = await loadModel(MODEL_PATH, { contextLength: 512, threads: 1 });
});
test.after(async () => {
  await stories?.dispose();
  for (const r of recognizers.values()) r.dispose();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The engine's own recognizer, in this process: a second engine on the same file. */
async function ownRecognizer(file) {
  if (!recognizers.has(file)) {
    const eng = await Engine.create(fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm')));
    eng.loadBytes(fs.readFileSync(file), { contextLength: 64 });
    recognizers.set(file, eng);
  }
  recognizer = recognizers.get(file);
  return (grammar, text) => {
    const g = recognizer.grammars.get(grammar);
    const s = g.newState();
    try { return g.acceptText(s, text) && g.canEnd(s); } finally { g.freeState(s); }
  };
}

/** Seeded sampled generations: each one is complete ('stop') and parses both ways. */
async function checkGenerations(model, file, prompt, grammar, independent, { seeds = 6, temperature = 1.2, extra = {} } = {}) {
  const own = await ownRecognizer(file);
  const texts = new Set();
  for (let seed = 1; seed <= seeds; seed++) {
    const r = await model.complete(prompt, { grammar, temperature, seed, maxTokens: 120, topK: 0, topP: 1, minP: 0, ...extra });
    assert.equal(r.finishReason, 'stop', `seed ${seed}: ${JSON.stringify(r.text)} ended with ${r.finishReason}`);
    assert.ok(own(grammar, r.text), `own recognizer refuses ${JSON.stringify(r.text)}`);
    assert.ok(independent(r.text), `independent check refuses ${JSON.stringify(r.text)}`);
    texts.add(r.text);
  }
  return texts;
}

test('stories260K: sampled generations of arithmetic, a list, a tiny language and Unicode words all parse', async () => {
  for (const [name, grammar, ok] of CASES) {
    const texts = await checkGenerations(stories, MODEL_PATH, 'Once upon a time', grammar, ok);
    assert.ok(texts.size >= 2, `${name}: seeds give different outputs (${[...texts].join(' | ')})`);
  }
});

for (const arch of ['llama3', 'qwen2']) {
  test(`synthetic ${arch} (byte-level BPE): sampled generations parse`, async () => {
    const m = await loadModel(synth[arch], { contextLength: 512, threads: 1 });
    try {
      for (const [name, grammar, ok] of CASES) {
        const texts = await checkGenerations(m, synth[arch], 'Hello', grammar, ok, { seeds: 4, temperature: 1 });
        assert.ok(texts.size >= 2, `${name}: ${[...texts].join(' | ')}`);
      }
    } finally { await m.dispose(); }
  });
}

test('a forbidden token is never sampled, at any temperature', async () => {
  const grammar = 'root ::= [ab]{1,24}';
  for (const temperature of [0, 0.5, 1, 3, 100]) {
    for (let seed = 1; seed <= 3; seed++) {
      const r = await stories.complete('Once upon a time', { grammar, temperature, seed, topK: 0, topP: 1, minP: 0, maxTokens: 40 });
      assert.match(r.text, /^[ab]{1,24}$/, `T=${temperature} seed ${seed}`);
      for (const t of r.tokens) assert.match(await stories.detokenize([t]), /^[ab]+$/, `token ${t} at T=${temperature}`);
      assert.equal(r.finishReason, 'stop');
    }
  }
});

test('seeds are deterministic and the compiled grammar is cached', async () => {
  const o = { grammar: LANG, temperature: 1.5, seed: 99, topK: 0, topP: 1, minP: 0 };
  const a = await stories.complete('x', o);
  const b = await stories.complete('x', o);
  assert.deepEqual(a.tokens, b.tokens);
  assert.equal(b.stats.grammar.cached, true);
  assert.equal(b.stats.grammar.compileMs, 0);
  const c = await stories.complete('x', { ...o, seed: 100 });
  assert.notDeepEqual(a.tokens, c.tokens);
  assert.equal((await stories.complete('x', { temperature: 0, maxTokens: 2 })).stats.grammar, undefined);
});

// Seeded generations on a 32 000-token vocabulary (the s110m vocabulary's
// size: the sampler's SIMD scans, its sparse-mask gathering and the radix
// sort all run), pinned to the tokens recorded before the sampler's fast
// paths went in: the same seed gives the same tokens as it did, with and
// without a grammar (tests/c/test_grammar.c pins stories260K natively and in
// wasm the same way).
test('seeded generations at a 32k vocabulary keep their recorded tokens', async () => {
  const file = path.join(tmp, 'v32k.gguf');
  makeModel(file, { ...SHAPE, vocab: 32000 }, 'f32', 77, { outStd: 0.5 });
  const m = await loadModel(file, { threads: 1, contextLength: 128 });
  try {
    const G = String.raw`root ::= ("{" ws "\"k\":" ws "\"" [^"\\\x00-\x1F]{0,12} "\"," ws "\"n\":" ws [0-9]{1,4} ws "}" "\n")*
ws ::= [ \n]{0,2}`;
    const all = { topK: 0, topP: 1, minP: 0, temperature: 1.3 };
    const cases = [
      [null, 1, {}, [30225,4767,8486,3824,26209,29446,7144,9209,17492,3639,19306,12153,29321,25030,14383,27904,24086,15356,6074,2515,22645,20644,11808,26711,14873,12425,22790,17465,12144,1738,16671,3245]],
      [null, 2, all, [27370,4623,15413,19121,12758,13111,22731,7172,27031,3547,30187,26105,11054,31889,12641,8992,28370,11755,16389,22291,12958,27670,23532,5658,15533,2813,28566,16389,10086,3750,24175,17933]],
      [G, 1, {}, [126,13,13,37,110,37,61,37,392,269,19109,20799,213,177,37,47,35,13,37,113,37,61,58,54,128,13,126,13,37,110,37,61]],
      [G, 2, all, [126,13,259,37,110,37,61,37,392,22776,11783,467,37,47,35,13,37,113,37,61,57,56,56,56,13,128,13,126,37,110,37,61]],
      [G, 3, { repeatPenalty: 1.3, typicalP: 0.9, logitBias: { 5: 3, 300: -2 } }, [126,13,35,37,110,37,61,37,7466,13648,30450,37,47,35,13,37,113,37,61,58,54,128,13,126,13,13,37,280,37,61,37,12578]],
    ];
    for (const [grammar, seed, o, want] of cases) {
      const r = await m.complete('ab cd ef', { maxTokens: 32, temperature: 0.8, seed, ignoreEos: true, ...o, ...(grammar ? { grammar } : {}) });
      assert.deepEqual(r.tokens, want, `${grammar ? 'grammar' : 'plain'}, seed ${seed}`);
    }
  } finally {
    await m.dispose();
  }
});

test('streaming emits only whole UTF-8 characters, joined equal to the result', async () => {
  const own = await ownRecognizer(MODEL_PATH);
  for (let seed = 1; seed <= 4; seed++) {
    const chunks = [];
    const it = stories.generate('Once', { grammar: UNI, temperature: 1.5, seed, topK: 0, topP: 1, minP: 0 });
    let r;
    for (;;) { r = await it.next(); if (r.done) break; chunks.push(r.value.text); }
    for (const c of chunks) assert.ok(!c.includes('\uFFFD'), JSON.stringify(c));
    assert.ok(chunks.includes(''), 'a character was split across tokens (a chunk held it back)');
    const text = chunks.join('');
    assert.equal(text, r.value.text);
    assert.ok(uniOk(text) && own(UNI, text), text);
  }
});

test('the generation ends where the grammar is complete; ignoreEos keeps going while the grammar allows', async () => {
  // complete after "yes": nothing but the end may follow, so it stops without sampling it
  const r = await stories.complete('Once', { grammar: 'root ::= "yes" | "no"', temperature: 1, seed: 3 });
  assert.ok(['yes', 'no'].includes(r.text) && r.finishReason === 'stop', JSON.stringify(r));
  // ignoreEos: end tokens are never allowed; the text goes on until nothing else may follow
  const e = await stories.complete('Once', { grammar: 'root ::= "a"{1,40}', temperature: 0, ignoreEos: true, maxTokens: 100 });
  assert.equal(e.text, 'a'.repeat(40));
  assert.equal(e.finishReason, 'stop');
  const l = await stories.complete('Once', { grammar: 'root ::= [a-z ]+', temperature: 1, ignoreEos: true, maxTokens: 30, seed: 1 });
  assert.equal(l.finishReason, 'length');
  assert.match(l.text, /^[a-z ]+$/);
});

test('best-of-N: every candidate follows the grammar, candidate i is generate with seed + i', async () => {
  const { candidates, stats } = await stories.bestOfN('Once upon a time', { grammar: ARITH, n: 4, temperature: 1.3, seed: 5, topK: 0, topP: 1, minP: 0 });
  assert.equal(candidates.length, 4);
  for (const c of candidates) assert.ok(arithOk(c.text) && c.finishReason === 'stop', c.text);
  assert.ok(stats.grammar);
  const one = candidates.find((c) => c.index === 2);
  const alone = await stories.complete('Once upon a time', { grammar: ARITH, temperature: 1.3, seed: 7, topK: 0, topP: 1, minP: 0 });
  assert.deepEqual(one.tokens, alone.tokens);
});

test('beam search ranks only allowed tokens', async () => {
  const { beams } = await stories.beamSearch('Once upon a time', { grammar: LIST, beams: 3, maxTokens: 60 });
  assert.ok(beams.length >= 1);
  for (const b of beams) {
    assert.equal(b.finishReason, 'stop', JSON.stringify(b));
    assert.ok(listOk(b.text), b.text);
  }
});

test('speculative decoding (prompt lookup, a draft model) with a grammar: greedy output equals plain greedy', async () => {
  const o = { grammar: LANG, temperature: 0, repeatPenalty: 1, maxTokens: 400 };
  const plain = await stories.complete('Once upon a time', o);
  assert.ok(langOk(plain.text) && plain.finishReason === 'stop', plain.text);
  const lookup = await stories.complete('Once upon a time', { ...o, draft: 'lookup' });
  assert.equal(lookup.text, plain.text);
  const draft = await loadModel(MODEL_PATH, { contextLength: 512, threads: 1 });
  try {
    const spec = await stories.complete('Once upon a time', { ...o, draft });
    assert.equal(spec.text, plain.text);
    const sampled = await stories.complete('Once upon a time', { ...o, temperature: 1, seed: 4, draft });
    assert.ok(langOk(sampled.text), sampled.text);
  } finally { await draft.dispose(); }
});

test('chat with a grammar: the reply follows it', async () => {
  const m = await loadModel(synth.qwen2, { contextLength: 512, threads: 1 });
  try {
    const r = await m.chatComplete([{ role: 'user', content: 'A list, please.' }], { grammar: LIST, temperature: 1, seed: 2 });
    assert.ok(listOk(r.text), r.text);
  } finally { await m.dispose(); }
});

test('a grammar that does not parse or check is BAD_OPTION naming the place', async () => {
  await assert.rejects(stories.complete('x', { grammar: 'root ::= "a" (' }), isError('BAD_OPTION', /^option grammar: line 1, column 15: expected '\)'/));
  await assert.rejects(stories.complete('x', { grammar: 'root ::= ex\nex ::= ex "+" "1" | "1"' }), isError('BAD_OPTION', /left-recursive/, /line 2, column 1/));
  await assert.rejects(stories.complete('x', { grammar: 'start ::= "a"' }), isError('BAD_OPTION', /no rule 'root'/));
  await assert.rejects(stories.bestOfN('x', { grammar: 'root ::= [z-a]', n: 2 }), isError('BAD_OPTION', /ends below its start/));
  await assert.rejects(stories.complete('x', { grammar: 5 }), isError('BAD_OPTION', /grammar/));
  // the model still works
  assert.equal((await stories.complete('x', { grammar: 'root ::= "ok"' })).text, 'ok');
});
