// `make bench` (bench/grammar.mjs): the cost of grammar-constrained decoding
// (options.grammar, docs/grammar.md) side by side with unconstrained
// decoding, in one process, runs interleaved: per generated token, the
// decode time with a nested JSON-like grammar against the same sampling
// without it, on the s110m shape (32 000-token SentencePiece vocabulary) and
// on Qwen2.5-0.5B's shape with a 151 936-token byte-level BPE vocabulary
// (synthetic qwen2, models/make-model.js bpeFill); and the time to compile
// a grammar against each vocabulary (the model's first grammar also builds
// its vocabulary trie, counted apart). Targets (issue #29): per-token
// overhead <= 5 % at 32k, <= 10 % at 150k; compile <= 200 ms at 150k.
// Beside it, what the grammar itself costs inside the decode step (timed on
// an engine in this thread, free of the forward pass's noise), and
// llama.cpp's own overhead through node-llama-cpp (LlamaGrammar, the same
// model file, grammar and sampling, 1 thread; skipped with a note when
// node-llama-cpp is not installed, or with --no-llama).
// Writes bench/results/grammar-<time>.json and grammar-<out>.md.
//
//   node bench/grammar.mjs [--shapes s110m,q05b] [--type q8_0] [--tokens 128] [--reps 5] [--compiles 5]
//                          [--grammar FILE] [--out latest] [--smoke] [--no-llama]
// --smoke: small layers with the same vocabularies (a quick check that the
// program runs; its overheads are not meaningful, the models being tiny).
// --grammar: a GBNF file measured instead of the built-in one (e.g. a JSON
// Schema converter's output); it should not end, or end late (the runs use
// ignoreEos, so a grammar that completes stops its runs early).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { cache, root, native, promptOf, benchArgs, median } from './common.mjs';
import { makeModel, SHAPES } from '../models/make-model.js';
import { loadModel } from '../web/index.js';
import { Engine } from '../web/worker/engine.js';
import { nodeLlamaCpp, nodeLlamaCppInstalled, NODE_LLAMA_CPP_CONFIGS } from './llama-native.mjs';

const args = benchArgs();
const shapes = String(args.shapes || 's110m,q05b').split(',');
const type = String(args.type || 'q8_0');
const tokens = +(args.tokens || 128);
const reps = +(args.reps || 5);
const compiles = +(args.compiles || 5);
const smoke = !!args.smoke;

// Records of a small store: nested objects, an array of strings, an array
// of objects, numbers, a boolean; strings bounded (as maxLength makes them
// in a schema), so the decoding moves between states all the time. It never
// ends (records follow one another): every run generates `tokens`. The
// record's sequence is one group so that llama.cpp's parser, where a line
// break ends a rule outside parentheses, reads the same grammar.
export const JSON_GRAMMAR = String.raw`root    ::= record ("\n" record)*
record  ::= ("{" ws "\"id\":" ws int "," ws "\"name\":" ws name "," ws "\"active\":" ws bool "," ws
            "\"tags\":" ws "[" ws (name ("," ws name)*)? "]" "," ws
            "\"address\":" ws address "," ws
            "\"items\":" ws "[" ws (item ("," ws item){0,3})? "]" "," ws
            "\"note\":" ws note ws "}")
address ::= "{" ws "\"street\":" ws name "," ws "\"city\":" ws name "," ws "\"zip\":" ws int ws "}"
item    ::= "{" ws "\"sku\":" ws name "," ws "\"qty\":" ws int "," ws "\"price\":" ws number ws "}"
name    ::= "\"" char{1,16} "\""
note    ::= "\"" char{0,40} "\""
char    ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
int     ::= "-"? ([0-9] | [1-9] [0-9]{1,8})
number  ::= int ("." [0-9]{1,6})? ([eE] [-+]? [0-9]{1,3})?
bool    ::= "true" | "false"
ws      ::= [ \n]{0,2}
`;
const grammar = args.grammar ? fs.readFileSync(String(args.grammar), 'utf8') : JSON_GRAMMAR;


/** The model file of a shape: s110m with its SentencePiece vocabulary, q05b as qwen2 with a filled BPE vocabulary. */
function modelFile(shape) {
  fs.mkdirSync(cache, { recursive: true });
  const base = SHAPES[shape];
  if (!base) throw new Error(`unknown shape ${shape} (${Object.keys(SHAPES).join(', ')})`);
  const s = smoke ? { ...base, dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 128 } : base;
  const opts = shape === 'q05b' ? { arch: 'qwen2', bpeFill: true } : {};
  const name = `${shape}${smoke ? '-smoke' : ''}${opts.arch ? '-' + opts.arch : ''}`;
  const f16 = path.join(cache, `${name}_f16.gguf`);
  if (!fs.existsSync(f16)) { console.error(`generating ${f16}`); makeModel(f16, s, 'f16', 1234, opts); }
  if (type === 'f16') return f16;
  const out = path.join(cache, `${name}_${type}.gguf`);
  if (!fs.existsSync(out)) {
    if (!fs.existsSync(native)) throw new Error(`${out} is missing and build/wasmlm-native is not built (run make)`);
    console.error(`quantizing ${out}`);
    execFileSync(native, ['quantize', f16, out, type], { stdio: 'ignore' });
  }
  return out;
}

/**
 * The grammar's own cost per token, measured inside the decode step on an
 * engine in this thread (the wasm32 SIMD build, wasm/wasmlm.wasm), where
 * the forward pass's noise does not enter: each pair of runs (unconstrained,
 * constrained, seed rep + 1) times the recognizer's calls (mask, accept) and
 * the sampler (wlm_sample) apart from the whole decode step. Returns the
 * medians per token: {plainMs, samplePlainMs, sampleGrammarMs, maskMs, acceptMs}.
 */
async function directCost(file, prompt, base, text) {
  const eng = await Engine.create(fs.readFileSync(path.join(root, 'wasm', 'wasmlm.wasm')));
  try {
    eng.loadBytes(fs.readFileSync(file), { contextLength: tokens + 64 });
    const ms = {};
    const timed = (obj, name, key) => {
      const f = obj[name];
      obj[name] = (...a) => { const t = performance.now(); try { return f.apply(obj, a); } finally { ms[key] += performance.now() - t; } };
    };
    timed(eng, 'sample', 'sample');
    const g = eng.grammars.get(text);   // compiled here (and its first-use sets computed by the first run)
    timed(g, 'mask', 'mask'); timed(g, 'accept', 'accept');
    const out = { plainMs: [], samplePlainMs: [], sampleGrammarMs: [], maskMs: [], acceptMs: [] };
    for (let rep = 0; rep < reps; rep++) {
      for (const grammar of [null, text]) {
        ms.sample = ms.mask = ms.accept = 0;
        const r = eng.complete(prompt, { ...base, seed: rep + 1, ...(grammar ? { grammar } : {}) });
        const n = r.stats.generatedTokens;
        if (grammar) { out.sampleGrammarMs.push(ms.sample / n); out.maskMs.push(ms.mask / n); out.acceptMs.push(ms.accept / n); }
        else { out.plainMs.push(r.stats.decodeMs / n); out.samplePlainMs.push(ms.sample / n); }
      }
    }
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, median(v)]));
  } finally {
    eng.dispose();
  }
}

/** node-llama-cpp on the same file in a child process (1 thread), or null with the reason in `why`. */
async function openLlama(file) {
  if (args['no-llama']) return { llama: null, why: '--no-llama' };
  if (!nodeLlamaCppInstalled()) return { llama: null, why: 'node-llama-cpp is not installed (it is not a dependency: the llama.cpp row is skipped)' };
  const llama = nodeLlamaCpp(NODE_LLAMA_CPP_CONFIGS.find((c) => c.env.UV_THREADPOOL_SIZE === '1'));
  try { await llama.open(file); return { llama }; } catch (e) { await llama.exit(); return { llama: null, why: `node-llama-cpp could not load ${path.basename(file)}: ${String(e.message).split('\n')[0]}` }; }
}

const rows = [];
for (const shape of shapes) {
  const file = modelFile(shape);
  const model = await loadModel(file, { threads: 1, contextLength: tokens + 64 });
  const nVocab = model.info.hparams.nVocab;
  const prompt = promptOf(16);
  const base = { maxTokens: tokens, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1, ignoreEos: true };
  // compile: the first grammar builds the vocabulary trie; then distinct texts (a comment differs) compile anew
  const first = await model.complete(prompt, { ...base, maxTokens: 1, grammar });
  const compileMs = [];
  for (let i = 0; i < compiles; i++) {
    const r = await model.complete(prompt, { ...base, maxTokens: 1, grammar: `${grammar}\n# ${shape} compile ${i}\n` });
    compileMs.push(r.stats.grammar.compileMs);
  }
  // interleaved, rep by rep: ours unconstrained, constrained, then llama.cpp
  // (node-llama-cpp, same file, grammar and sampling, 1 thread) unconstrained,
  // constrained; the first constrained run meets every state for the first time
  const { llama, why } = await openLlama(file);
  if (!llama) console.error(`${shape}: no llama.cpp row: ${why}`);
  const plain = [], constrained = [], lPlain = [], lConstrained = [], outputs = [];
  // the order within a rep alternates (odd reps constrained first), so
  // neither side is always the one that runs second
  const inOrder = async (rep, first, second) => (rep % 2 ? (await second(), await first()) : (await first(), await second()));
  for (let rep = 0; rep < reps; rep++) {
    await inOrder(rep, async () => {
      const a = await model.complete(prompt, { ...base, seed: rep + 1 });
      plain.push(a.stats.decodeMs / a.stats.generatedTokens);
    }, async () => {
      const b = await model.complete(prompt, { ...base, seed: rep + 1, grammar: `${grammar}\n# ${shape} runs\n` });
      constrained.push(b.stats.decodeMs / b.stats.generatedTokens);
      outputs.push(b.text);
    });
    if (llama) {
      const sampling = { threads: 1, prompt: 16, gen: tokens, seed: rep + 1, temperature: base.temperature, topK: base.topK, topP: base.topP, minP: base.minP };
      await inOrder(rep, async () => lPlain.push((await llama.sample(1, sampling)).msPerToken),
        async () => lConstrained.push((await llama.sample(1, { ...sampling, grammar })).msPerToken));
    }
  }
  await model.dispose();
  if (llama) await llama.exit();
  const direct = await directCost(file, prompt, base, `${grammar}\n# ${shape} direct\n`);
  // a ratio per rep (its two runs are next to each other, so a busy machine
  // slows both alike), then the median of those after the first
  const ratios = (xs, ys) => xs.map((x, i) => ys[i] / x - 1);
  const ours = ratios(plain, constrained), theirs = ratios(lPlain, lConstrained);
  const grammarMs = direct.maskMs + direct.acceptMs + direct.sampleGrammarMs - direct.samplePlainMs;
  const row = {
    shape, type, nVocab, smoke, file: path.basename(file), tokens, reps,
    trieMs: first.stats.grammar.trieMs, firstCompileMs: first.stats.grammar.compileMs, compileMs: median(compileMs),
    plainMsPerToken: median(plain), constrainedMsPerToken: median(constrained.slice(1)), firstConstrainedMsPerToken: constrained[0],
    overhead: median(ours.slice(1)), firstRunOverhead: ours[0],
    direct, directMsPerToken: grammarMs, directOverhead: grammarMs / direct.plainMs,
    llama: llama ? { plainMsPerToken: median(lPlain), constrainedMsPerToken: median(lConstrained), overhead: median(theirs) } : { skipped: why },
    runs: { plain, constrained, llamaPlain: lPlain, llamaConstrained: lConstrained, compileMs }, sample: outputs[outputs.length - 1].slice(0, 300),
  };
  rows.push(row);
  console.error(`${shape}: ${row.plainMsPerToken.toFixed(2)} ms/token unconstrained, ${row.constrainedMsPerToken.toFixed(2)} constrained (${(100 * row.overhead).toFixed(1)} %), first run ${(100 * row.firstRunOverhead).toFixed(1)} %; ` +
    `grammar itself ${grammarMs.toFixed(3)} ms/token (${(100 * row.directOverhead).toFixed(1)} %); ` +
    (llama ? `llama.cpp ${row.llama.plainMsPerToken.toFixed(2)} / ${row.llama.constrainedMsPerToken.toFixed(2)} (${(100 * row.llama.overhead).toFixed(1)} %); ` : '') +
    `compile ${row.compileMs.toFixed(1)} ms, trie ${row.trieMs.toFixed(1)} ms`);
}

const f = (x, d = 2) => Number(x).toFixed(d);
const pct = (x) => `${(100 * x).toFixed(1)} %`;
let md = `# Grammar-constrained decoding\n\n${new Date().toISOString()} · ${os.cpus()[0].model} × ${os.cpus().length} · Node ${process.version}${smoke ? ' · SMOKE RUN (tiny layers: overheads not meaningful)' : ''}\n\n`;
md += `Per generated token, the same sampling (T 0.8, top-k 40, top-p 0.95, min-p 0.05, ignoreEos, ${tokens} tokens after a 16-token prompt, 1 thread) without and with ${args.grammar ? `the grammar of ${path.basename(String(args.grammar))}` : 'the nested JSON-like grammar of bench/grammar.mjs'}, ${reps} seeds, runs interleaved rep by rep (odd reps constrained first). ` +
  'overhead = the median over reps after the first of (constrained / unconstrained − 1) of the two runs of a rep (the compiled grammar and its caches are kept between calls); first run = that ratio for the first rep, where every state is met for the first time. ' +
  'These end-to-end ratios carry the forward pass\'s run-to-run noise (several %, even on a quiet host). ' +
  'grammar itself = what the grammar adds inside the decode step, timed on an engine in the benchmark\'s thread: mask + accept + (sampler with the mask − sampler without), per token, against the unconstrained decode step (medians). ' +
  'llama.cpp = node-llama-cpp (prebuilt llama.cpp, 1 thread) on the same file with the same grammar (LlamaGrammar) and sampling, interleaved with ours. ' +
  `compile = a grammar text not seen before (median of ${compiles}); trie = the vocabulary's byte trie, built once per model by its first grammar.\n\n`;
md += '| model | vocabulary | ms/token unconstrained | ms/token constrained | overhead | first run | grammar itself ms/token | grammar itself | llama.cpp ms/token unconstrained | llama.cpp constrained | llama.cpp overhead | compile ms | trie ms | target |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
for (const r of rows) {
  const l = r.llama.skipped ? ['–', '–', `skipped: ${r.llama.skipped}`] : [f(r.llama.plainMsPerToken), f(r.llama.constrainedMsPerToken), pct(r.llama.overhead)];
  md += `| ${r.shape} ${r.type} | ${r.nVocab} | ${f(r.plainMsPerToken)} | ${f(r.constrainedMsPerToken)} | ${pct(r.overhead)} | ${pct(r.firstRunOverhead)} | ${f(r.directMsPerToken, 3)} | ${pct(r.directOverhead)} | ${l.join(' | ')} | ${f(r.compileMs, 1)} | ${f(r.trieMs, 1)} | ${r.nVocab > 100000 ? '≤ 10 %, compile ≤ 200 ms' : '≤ 5 %'} |\n`;
}
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `grammar-${stamp}.json`), JSON.stringify({ machine: { cpu: os.cpus()[0].model, cores: os.cpus().length, node: process.version }, grammar, rows }, null, 2));
fs.writeFileSync(path.join(root, 'bench', 'results', `grammar-${args.out || 'latest'}.md`), md);
console.log(md);
process.exit(0);
