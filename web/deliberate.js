// Deliberate decoding: answer greedily first, and spend more only when the
// answer's own signals say it is uncertain: best-of-N with adaptive
// sampling, then tree search, within a budget of generated tokens. Caller
// side, over the public methods (web/scaling.js, web/tree.js).
//
// Signals (`uncertainty`), each with a threshold:
//   'min-logprob' (default without a verifier): the least log-probability
//       of the answer's tokens; uncertain below the threshold (default
//       -3: some token had at most e^-3 = 5 % of the probability).
//   'entropy': the mean entropy (nats) of the model's distributions at the
//       answer's tokens; uncertain above the threshold (default 1.5).
//       It needs those distributions: one extra evaluation of prompt and
//       answer (model.logits), reported as signalTokens.
//   'verifier' (the default when `verify` is given): the caller's
//       verify(answer) rejects it.
// Later stages look for a better answer the same way: with a verifier its
// verdict is their score (1 or 0, and best-of-N stops at the first pass);
// otherwise best-of-N ranks by min log-prob and tree search by mean
// log-prob, and the winner is judged by the signal again.
import { WasmlmError, badOption } from './errors.js';
import { abortError } from './abort.js';
import { DEFAULT_SAMPLING } from './options.js';

export const DELIBERATE_DEFAULTS = Object.freeze({ budget: 2048, escalate: Object.freeze(['best-of-n', 'tree']), thresholds: Object.freeze({ 'min-logprob': -3, entropy: 1.5 }) });

/** Mean entropy (nats) of softmax rows. */
export function meanEntropy(rows) {
  if (!rows.length) return 0;
  let total = 0;
  for (const f of rows) {
    let m = -Infinity;
    for (let i = 0; i < f.length; i++) if (f[i] > m) m = f[i];
    let z = 0, s = 0;
    for (let i = 0; i < f.length; i++) { const e = Math.exp(f[i] - m); z += e; s += e * (f[i] - m); }
    total += Math.log(z) - s / z;
  }
  return total / rows.length;
}

const verdictOk = (v) => (typeof v === 'object' && v !== null ? !!v.ok : !!v);

export async function deliberate(model, prompt, opts = {}) {
  const {
    budget = DELIBERATE_DEFAULTS.budget, escalate = DELIBERATE_DEFAULTS.escalate, verify, threshold, signal, uncertainty: chosen,
    step, expand = 4, keep = 2, maxTokensPerStep = 32, ...sampling
  } = opts;
  const uncertainty = chosen ?? (verify ? 'verifier' : 'min-logprob');
  if (uncertainty === 'verifier' && typeof verify !== 'function') throw badOption('verify', verify, "must be a function (answer) => verdict with uncertainty 'verifier'");
  const limit = uncertainty === 'verifier' ? null : threshold ?? DELIBERATE_DEFAULTS.thresholds[uncertainty];
  const maxTokens = Math.min(sampling.maxTokens ?? DEFAULT_SAMPLING.maxTokens, budget);
  const t0 = Date.now();
  const stages = [];
  let spent = 0, signalTokens = 0;
  const promptIds = typeof prompt === 'string' ? await model.tokenize(prompt, { addBos: sampling.addBos, parseSpecial: sampling.parseSpecial }) : prompt;

  /** The signal of an answer {text, tokens, logprobs}: {ok, value, why}. */
  async function judge(a) {
    if (signal && signal.aborted) throw abortError(signal);
    if (uncertainty === 'verifier') {
      let v;
      try { v = await verify({ text: a.text, tokens: a.tokens, logprobs: a.logprobs }); } catch (e) {
        throw new WasmlmError('CALLBACK', `deliberate: the verify callback failed: ${e && e.message || e}`, { cause: e, callback: 'verify' });
      }
      const ok = verdictOk(v);
      return { ok, value: ok ? 1 : 0, why: ok ? 'the verifier accepted it' : `the verifier rejected it${v && v.message ? `: ${v.message}` : ''}` };
    }
    if (uncertainty === 'min-logprob') {
      const value = a.logprobs.length ? Math.min(...a.logprobs) : 0;
      const ok = value >= limit;
      return { ok, value, why: `min log-prob ${value.toFixed(3)} ${ok ? '>=' : '<'} ${limit}` };
    }
    const ids = promptIds.concat(a.tokens);
    const rows = a.tokens.length ? (await model.logits(ids, { all: true })).slice(promptIds.length - 1, ids.length - 1) : [];
    signalTokens += ids.length;
    const value = meanEntropy(rows);
    const ok = value <= limit;
    return { ok, value, why: `mean entropy ${value.toFixed(3)} nats ${ok ? '<=' : '>'} ${limit}` };
  }
  // the answer the signal likes best so far (verifier: a pass; else the highest min log-prob / lowest entropy)
  let answer = null;
  const better = (j) => !answer || (uncertainty === 'entropy' ? j.value < answer.judged.value : j.value > answer.judged.value);
  function record(stage, a, judged, tokens, extra = {}) {
    spent += tokens;
    stages.push({ stage, tokens, text: a.text, accepted: judged.ok, signal: judged.value, why: judged.why, ...extra });
    if (better(judged)) answer = { stage, text: a.text, tokens: a.tokens, logprobs: a.logprobs, judged };
    return judged.ok;
  }

  const g = await model.complete(prompt, { ...sampling, maxTokens, temperature: 0, signal });
  let done = record('greedy', g, await judge(g), g.tokens.length);
  for (const stage of done ? [] : escalate) {
    const left = budget - spent;
    if (stage === 'best-of-n') {
      // half of what is left when a tree search may follow, so that it has tokens to search with
      const share = escalate.indexOf(stage) < escalate.length - 1 ? Math.floor(left / 2) : left;
      const maxN = Math.min(4096, Math.floor(share / Math.max(maxTokens, 1)));
      if (maxN < 2) { stages.push({ stage, tokens: 0, skipped: `${share} tokens for this stage: not 2 candidates of ${maxTokens}` }); continue; }
      const scorer = uncertainty === 'verifier'
        ? async (c) => ((await judge(c)).ok ? 1 : 0)
        : (c) => (c.logprobs.length ? Math.min(...c.logprobs) : 0);
      const r = await model.bestOfN(prompt, {
        ...sampling, maxTokens, scorer, signal,
        adaptive: { minN: Math.min(4, maxN), maxN, ...(uncertainty === 'verifier' ? { target: 1 } : {}) },
      });
      done = record(stage, r.best, await judge(r.best), r.stats.totalTokens, { samples: r.stats.adaptive.samples, stoppedBy: r.stats.adaptive.stoppedBy });
    } else if (stage === 'tree') {
      const per = expand * maxTokensPerStep;
      const maxExpansions = Math.floor(left / per);
      if (maxExpansions < 1) { stages.push({ stage, tokens: 0, skipped: `${left} tokens left: not one expansion of ${expand} x ${maxTokensPerStep}` }); continue; }
      const meanLp = (n) => (n.pathTokens ? n.pathLogprob / n.pathTokens : -Infinity);
      const score = uncertainty === 'verifier'
        ? async (n) => ((await judge({ text: n.pathText, tokens: [], logprobs: [] })).ok ? 1 : 0) + meanLp(n) / 1000
        : meanLp;
      const r = await model.treeSearch(prompt, {
        ...sampling, maxTokens, signal, expand, keep, maxTokensPerStep, maxExpansions, score,
        maxSteps: Math.max(1, Math.ceil(maxTokens / maxTokensPerStep)), ...(step !== undefined ? { step } : {}),
      });
      const best = r.best;
      const path = [];
      for (let n = best; n && n.parent !== null; n = r.nodes[n.parent]) path.unshift(n);
      const a = { text: best.pathText, tokens: path.flatMap((n) => n.tokens), logprobs: path.flatMap((n) => n.logprobs) };
      done = record(stage, a, await judge(a), r.stats.tokens, { nodes: r.stats.nodes, expansions: r.stats.expansions });
    } else {
      throw badOption('escalate', stage, "must list 'best-of-n' and / or 'tree'");
    }
    if (done) break;
  }
  return {
    text: answer.text, tokens: answer.tokens, accepted: answer.judged.ok, stage: answer.stage,
    spent, budget, signalTokens, uncertainty, threshold: limit, stages, wallMs: Date.now() - t0,
  };
}
