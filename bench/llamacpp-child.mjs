// node-llama-cpp (llama.cpp's prebuilt CPU binaries) in a process of its own,
// driven by bench/llama-native.mjs over IPC: the benchmarks run it in the
// environment they pick (its libuv thread pool size is read once, at the
// pool's first use, so it must be set before this process starts).
//   {op: 'open', file} · {op: 'rep', threads, prompt = 128, gen = 64} -> {prefill, decode} · {op: 'close'} · {op: 'exit'}
import { promptOf } from './common.mjs';

let llama = null, model = null, toks = null;

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

process.on('message', async (m) => {
  try {
    let result = null;
    if (m.op === 'open') result = await open(m.file);
    else if (m.op === 'rep') result = await rep(m);
    else if (m.op === 'close') { if (model) await model.dispose(); model = null; }
    else if (m.op === 'exit') { process.send({ result: null }, () => process.exit(0)); return; }
    else throw new Error(`unknown op ${m.op}`);
    process.send({ result });
  } catch (e) {
    process.send({ error: String(e && e.stack || e) });
  }
});
