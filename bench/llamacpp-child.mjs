// node-llama-cpp (llama.cpp's prebuilt CPU binaries) in a process of its own,
// driven by bench/llama-native.mjs over IPC: the benchmarks run it in the
// environment they pick (its libuv thread pool size is read once, at the
// pool's first use, so it must be set before this process starts).
//   {op: 'open', file} · {op: 'rep', threads, prompt = 128, gen = 64} -> {prefill, decode} · {op: 'close'} · {op: 'exit'}
//   {op: 'sample', threads, prompt, gen, grammar, seed, temperature, topK, topP, minP} -> {msPerToken, tokens}
import { promptOf } from './common.mjs';

let llama = null, model = null, toks = null;
const grammars = new Map();   // GBNF text -> LlamaGrammar (parsed once, as our engine keeps its compiled grammars)

async function open(file) {
  if (!llama) {
    const { getLlama } = await import('node-llama-cpp');
    llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  }
  if (model) await model.dispose();
  model = await llama.loadModel({ modelPath: file });
  toks = null;
  return { file };
}

// prefill: `prompt` tokens (BOS first) into a fresh context; decode: `gen`
// greedy tokens after them
async function rep({ threads, prompt = 128, gen = 64 }) {
  if (!toks || toks.length !== prompt) toks = [model.tokens.bos, ...model.tokenize(promptOf(prompt))].slice(0, prompt);
  const ctx = await model.createContext({ contextSize: prompt + gen + 64, threads, batchSize: 512 });
  try {
    const seq = ctx.getSequence();
    let t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(toks);
    const prefill = toks.length / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    let n = 0;
    for await (const _ of seq.evaluate([toks[1]], { temperature: 0 })) if (++n >= gen) break;
    const decode = gen / ((performance.now() - t0) / 1000);
    return { prefill, decode };
  } finally {
    await ctx.dispose();
  }
}

// sampled decoding after a `prompt`-token prompt (BOS first), with a GBNF
// grammar or without (null): ms per generated token over at most `gen`
// tokens (fewer when an end-of-generation token ends it), prefill excluded
async function sample({ threads, prompt = 16, gen = 128, grammar = null, seed = 1, temperature = 0.8, topK = 40, topP = 0.95, minP = 0.05 }) {
  const ids = [model.tokens.bos, ...model.tokenize(promptOf(prompt))].slice(0, prompt);
  let state;
  if (grammar != null) {
    if (!grammars.has(grammar)) grammars.set(grammar, await llama.createGrammar({ grammar }));
    const { LlamaGrammarEvaluationState } = await import('node-llama-cpp');
    state = new LlamaGrammarEvaluationState({ model, grammar: grammars.get(grammar) });
  }
  const ctx = await model.createContext({ contextSize: prompt + gen + 64, threads, batchSize: 512 });
  try {
    const seq = ctx.getSequence();
    await seq.evaluateWithoutGeneratingNewTokens(ids.slice(0, -1));
    const t0 = performance.now();
    let n = 0;
    for await (const _ of seq.evaluate(ids.slice(-1), { temperature, topK, topP, minP, seed, grammarEvaluationState: state })) if (++n >= gen) break;
    return { msPerToken: (performance.now() - t0) / Math.max(n, 1), tokens: n };
  } finally {
    await ctx.dispose();
  }
}

process.on('message', async (m) => {
  try {
    let result = null;
    if (m.op === 'open') result = await open(m.file);
    else if (m.op === 'rep') result = await rep(m);
    else if (m.op === 'sample') result = await sample(m);
    else if (m.op === 'close') { if (model) await model.dispose(); model = null; }
    else if (m.op === 'exit') { process.send({ result: null }, () => process.exit(0)); return; }
    else throw new Error(`unknown op ${m.op}`);
    process.send({ result });
  } catch (e) {
    process.send({ error: String(e && e.stack || e) });
  }
});
