#!/usr/bin/env node
// Seed corpus and model files for the libFuzzer targets in fuzz/ (generated,
// not committed):
//   node tools/fuzz-seeds.mjs [OUTDIR]      (default build/fuzz)
// OUTDIR/models: small valid models whose vocabularies the tokenizer and
//   sampler targets load (SentencePiece "llama", byte-level BPE "gpt2" with
//   Llama 3 and Qwen2 pre-tokenizers, WordPiece "bert");
// OUTDIR/seed/gguf: those models plus the whole hostile corpus
//   (tools/make-hostile.mjs), so mutations start from every broken shape, and
//   split GGUFs (the parts one after the other: fuzz_gguf cuts them apart at
//   each GGUF magic);
// OUTDIR/seed/tokenize: selector byte + text (ASCII, Unicode, invalid UTF-8,
//   control-token text, whitespace runs) or selector + int32 ids to decode;
// OUTDIR/seed/sampler: sampler parameters + history + logits, with NaN, Inf,
//   huge, tiny and tied values; some with the presence / frequency
//   penalties, typical_p and logit biases (byte 33, fuzz/fuzz_sampler.c);
// OUTDIR/seed/grammar: selector byte + GBNF + NUL + text to read (JSON,
//   arithmetic, Unicode, nesting, nullable loops).
import fs from 'node:fs';
import path from 'node:path';
import { makeModel } from '../models/make-model.js';
import { hostileCases, MICRO } from './make-hostile.mjs';
import { splitGguf } from '../models/gguf-split.js';

const out = process.argv[2] || 'build/fuzz';
const dir = (d) => { const p = path.join(out, d); fs.rmSync(p, { recursive: true, force: true }); fs.mkdirSync(p, { recursive: true }); return p; };
const models = dir('models');
makeModel(path.join(models, 'micro-spm.gguf'), MICRO, 'f32', 3, { arch: 'llama' });
makeModel(path.join(models, 'micro-bpe.gguf'), MICRO, 'f32', 3, { arch: 'llama3' });
makeModel(path.join(models, 'micro-qwen.gguf'), { ...MICRO, heads: 2, kvHeads: 2 }, 'f16', 3, { arch: 'qwen2' });
makeModel(path.join(models, 'micro-swa.gguf'), { ...MICRO, layers: 2 }, 'f32', 3, { arch: 'gemma2', slidingWindow: 4 });   // fuzz_state's window ring
makeModel(path.join(models, 'tiny-bpe.gguf'), 'tiny', 'f32', 3, { arch: 'llama3' });
makeModel(path.join(models, 'tiny-qwen.gguf'), 'tiny', 'f32', 3, { arch: 'qwen2' });
makeModel(path.join(models, 'tiny-bert.gguf'), { ...MICRO, heads: 2, kvHeads: 2, vocab: 600 }, 'f32', 3, { arch: 'bert' });

let n = 0;
const gguf = dir('seed/gguf');
for (const f of ['micro-spm.gguf', 'micro-bpe.gguf', 'micro-qwen.gguf']) fs.copyFileSync(path.join(models, f), path.join(gguf, f));
for (const c of hostileCases()) { fs.writeFileSync(path.join(gguf, `${c.name}.gguf`), c.bytes); n++; }
for (const f of ['micro-spm.gguf', 'micro-qwen.gguf']) {
  const tmp = fs.mkdtempSync(path.join(out, 'split-'));
  fs.copyFileSync(path.join(models, f), path.join(tmp, f));
  const size = fs.statSync(path.join(tmp, f)).size;
  for (const parts of [2, 3]) {
    const { parts: files } = splitGguf(path.join(tmp, f), Math.ceil(size / parts));
    fs.writeFileSync(path.join(gguf, `split${parts}-${files.length}-${f}`), Buffer.concat(files.map((p) => fs.readFileSync(p))));
    for (const p of files) fs.rmSync(p);
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}

const tok = dir('seed/tokenize');
const texts = [
  'Hello world', 'Once upon a time, there was a little girl named Lily.', '', ' ', '   leading and trailing   ',
  '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n', '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
  '<s>x</s><unk>', 'héllo wörld – “quotes” 世界 🙂👍🏽 \u200d', '12345 3.14159 1,000,000', "it's we'll I'M", '\n\n\t\t  \r\n',
  'a'.repeat(300), 'ab'.repeat(100) + ' ' + 'cab'.repeat(50), '\u2581\u2581 \u2581x',
  'Café NAÏVE, 中国! [CLS] unaffable $5 \u1100\u1161 \ud55c\uad6d', // WordPiece: case, accents, CJK, punctuation, jamo, Hangul
];
const bytesSeeds = [Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82, 0xf0, 0x9f, 0x98]), Buffer.from([0xed, 0xa0, 0x80, 0xc0, 0xaf, 0, 0, 0x41])];
texts.forEach((t, i) => {
  for (let sel = 0; sel < 3; sel++) {
    const flags = (i % 4) << 2;
    fs.writeFileSync(path.join(tok, `text-${i}-${sel}`), Buffer.concat([Buffer.from([sel | flags]), Buffer.from(t, 'utf8')]));
  }
});
bytesSeeds.forEach((b, i) => { for (let sel = 0; sel < 3; sel++) fs.writeFileSync(path.join(tok, `bytes-${i}-${sel}`), Buffer.concat([Buffer.from([sel | 4]), b])); });
const idSeeds = [[0, 1, 2, 3, 4, 5, 300, 511], [-1, -2147483648, 2147483647, 512, 513, 100000], [260, 261, 262, 263, 3, 3, 3]];
idSeeds.forEach((ids, i) => { for (let sel = 0; sel < 3; sel++) fs.writeFileSync(path.join(tok, `ids-${i}-${sel}`), Buffer.concat([Buffer.from([0x80 | sel]), Buffer.from(new Int32Array(ids).buffer)])); });

const smp = dir('seed/sampler');
const header = (which, { t = 0.8, k = 40, p = 0.95, minP = 0.05, pen = 1.1, lastN = 64, seed = 1, nHist = 0, sane = 64, rawHist = 0, spread = 0 } = {}) => {
  const b = Buffer.alloc(34);
  b[0] = which; b.writeFloatLE(t, 1); b.writeUInt32LE(k >>> 0, 5); b.writeFloatLE(p, 9); b.writeFloatLE(minP, 13);
  b.writeFloatLE(pen, 17); b.writeUInt32LE(lastN >>> 0, 21); b.writeUInt32LE(seed >>> 0, 25); b[29] = nHist; b[30] = sane; b[31] = rawHist; b[32] = spread;
  return b;
};
const f32 = (a) => Buffer.from(new Float32Array(a).buffer);
const i32 = (a) => Buffer.from(new Int32Array(a).buffer);
const logitSets = {
  ramp: Array.from({ length: 64 }, (_, i) => i * 0.1 - 3),
  nan: [NaN, 1, NaN, 2, NaN, -Infinity],
  allnan: [NaN],
  inf: [Infinity, 1, -Infinity, Infinity, 0],
  huge: [3.4e38, -3.4e38, 3e38, 1e-45, -1e-45],
  ties: [1, 1, 1, 1],
  neginf: [-Infinity, -Infinity, -Infinity, 5],
};
const params = [
  {}, { t: 0 }, { t: 0, pen: 1 }, { t: 1e-45 }, { t: 1e30 }, { k: 0, p: 1, minP: 0 }, { k: 1 }, { p: 1e-9 }, { minP: 1 },
  { pen: 1e30, nHist: 8 }, { pen: 1e-30, nHist: 8 }, { t: NaN, sane: 0 }, { t: -1, sane: 0 }, { p: 0, sane: 0 }, { p: NaN, sane: 0 },
  { minP: 2, sane: 0 }, { pen: 0, sane: 0 }, { pen: Infinity, sane: 0 }, { t: Infinity, sane: 0 }, { k: 0xffffffff, lastN: 0xffffffff, nHist: 8, rawHist: 1 },
];
params.forEach((pp, i) => {
  Object.entries(logitSets).forEach(([name, l]) => {
    const which = (i + name.length) % 2;
    const hist = i32([0, 1, 2, 3, -1, 100000, 5, 5]);
    fs.writeFileSync(path.join(smp, `p${i}-${name}`), Buffer.concat([header(which, { ...pp, seed: i * 7 + 1, spread: name === 'ties' ? 0 : 1 }), pp.nHist ? hist : Buffer.alloc(0), f32(l)]));
  });
});
// byte 33: (biases << 4) | 1, then presence, frequency, typical_p and the (token, bias) pairs
const extra = [
  { pres: 0.5, freq: 0.25, typ: 0.9, bias: [[3, -Infinity], [5, 2]] },
  { pres: -2, freq: 2, typ: 0.2, bias: [[0, -Infinity], [1, -Infinity], [2, -Infinity], [3, -Infinity], [4, -Infinity], [5, -Infinity]] },
  { pres: 1e6, freq: -1e6, typ: 1e-6, bias: [[511, 3e38], [-5, 1], [100000, NaN]], sane: 0 },
  { pres: NaN, freq: Infinity, typ: 2, bias: [[1, Infinity]], sane: 0 },
  { pres: 0, freq: 0, typ: 0.5, bias: [] },
];
extra.forEach((e, i) => {
  Object.entries(logitSets).forEach(([name, l]) => {
    const h = header(i % 2, { t: i === 4 ? 1.5 : 0.8, nHist: 8, sane: e.sane ?? 64, seed: i + 3, spread: 1 });
    h[33] = (e.bias.length << 4) | 1;
    const pairs = Buffer.concat(e.bias.map(([t, b]) => Buffer.concat([i32([t]), f32([b])])));
    fs.writeFileSync(path.join(smp, `x${i}-${name}`), Buffer.concat([h, f32([e.pres, e.freq, e.typ]), pairs, i32([0, 1, 2, 3, 3, 3, 5, 5]), f32(l)]));
  });
});
// saved states (fuzz_state.c): a mode byte, then a raw state, edits to a valid one, or a length
const st = dir('seed/state');
const u16x = (pairs) => Buffer.from(pairs.flatMap(([at, x]) => [at & 255, at >> 8, x]));
const stateSeeds = {
  'raw-garbage': Buffer.concat([Buffer.from([0]), Buffer.from('WLMS\x01\x00\x00\x00', 'latin1'), Buffer.alloc(120, 7)]),
  'raw-empty': Buffer.from([0]),
  'valid': Buffer.from([1]), 'valid-seq1': Buffer.from([1 | 4]), 'valid-slid': Buffer.from([2]),
  'edit-counts': Buffer.concat([Buffer.from([1]), u16x([[56, 1], [60, 1], [64, 2], [68, 16], [72, 1], [32, 2], [88, 1]])]),
  'edit-tokens': Buffer.concat([Buffer.from([1 | 4]), u16x([[97, 0x80], [99, 0xff], [150, 1], [151, 2]])]),
  'edit-slid-ring': Buffer.concat([Buffer.from([2]), u16x([[68, 8], [72, 3], [64, 1], [120, 9]])]),
  'cut-header': Buffer.concat([Buffer.from([3]), Buffer.from([50, 0, 0, 0])]),
  'cut-body': Buffer.concat([Buffer.from([3]), Buffer.from([0, 2, 0, 0])]),
  'extended': Buffer.concat([Buffer.from([3]), Buffer.from([0xff, 0xff, 0, 0]), Buffer.from('tail bytes')]),
  // the window ring's state (bit 3): its rewind floor (offset 76), its window layer's row count, cut
  'valid-window': Buffer.from([1 | 8]), 'valid-window-seq1': Buffer.from([1 | 4 | 8]),
  'edit-window-floor': Buffer.concat([Buffer.from([1 | 8]), u16x([[76, 1], [77, 0], [64, 1]])]),
  'edit-window-rows': Buffer.concat([Buffer.from([1 | 8]), u16x([[76, 3], [60, 1], [56, 1]])]),
  'cut-window': Buffer.concat([Buffer.from([3 | 8]), Buffer.from([0, 1, 0, 0])]),
};
for (const [name, b] of Object.entries(stateSeeds)) fs.writeFileSync(path.join(st, name), b);

const gram = dir('seed/grammar');
const grammars = [
  'root ::= object\nvalue ::= object | array | string | number | ("true" | "false" | "null") ws\n' +
    'object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws\narray ::= "[" ws ( value ("," ws value)* )? "]" ws\n' +
    'string ::= "\\"" ( [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\\"" ws\n' +
    'number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws\nws ::= | " " | "\\n" [ \\t]{0,20}',
  'root ::= (expr "=" ws term "\\n")+\nexpr ::= term ([-+*/] term)*\nterm ::= ident | num | "(" ws expr ")" ws\nident ::= [a-z] [a-z0-9_]* ws\nnum ::= [0-9]+ ws\nws ::= [ \\t\\n]*',
  'root ::= ("\u00e9t\u00e9" | [\\u00e0-\\u00ff]+ | "\\U0001F600" | "<" . ">")* "!"',
  'root ::= "(" root ")" root | ""', 'root ::= ("a"?)* "b"{2,5} [^x-z]{0,3}', 'root ::= a | b\na ::= "x" a | "y"\nb ::= [a-c]+ ("," b)?',
];
const gtexts = ['{"a": [1, 2.5e3, "x\\u00e9"], "b": {"c": null}}', '1+2*(x3-4)=y\n', '\u00e9t\u00e9\u00e0<\u{1F600}>!', '(()())', 'aabbb', 'xyyyx,abc'];
grammars.forEach((g, i) => gtexts.forEach((t, j) => { for (let sel = 0; sel < 4; sel += 1 + (i % 2)) fs.writeFileSync(path.join(gram, `g${i}-t${j}-${sel}`), Buffer.concat([Buffer.from([sel * 5 + j]), Buffer.from(g, 'utf8'), Buffer.from([0]), Buffer.from(t, 'utf8')])); }));
console.log(`fuzz-seeds: models in ${models}; ${fs.readdirSync(gguf).length} gguf, ${fs.readdirSync(tok).length} tokenize, ${fs.readdirSync(smp).length} sampler, ` +
  `${fs.readdirSync(st).length} state, ${fs.readdirSync(gram).length} grammar seeds (${n} hostile)`);
