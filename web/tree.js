// Tree search over steps, caller side: scores nodes, picks which grow and
// which are pruned, runs the strategies (beam, best-first, MCTS). The
// tokens are decoded in the model's worker (web/worker/tree.js): each call
// grows the chosen nodes as one batch sharing their paths in the KV cache.
// Scorers and predicates are the caller's functions, so they run here,
// between the worker's calls; their failures are CALLBACK errors.
import { WasmlmError, badOption } from './errors.js';
import { abortError, withSignal } from './abort.js';
import { workerOptions } from './options.js';
import { CHANNEL } from './protocol.js';
import { treePlan, treePlanProblem, treeShape } from './worker/tree.js';

/** MCTS: the default exploration constant c of UCT (UCB1's sqrt 2, for values in [0, 1]). */
export const UCT_EXPLORATION = Math.SQRT2;

let sessionSeq = 1;

/** The built-in node scorers (a node's whole path, not only its step). */
function nodeScorer(score) {
  if (score == null || score === 'mean-logprob') return (n) => (n.pathTokens ? n.pathLogprob / n.pathTokens : -Infinity);
  if (score === 'total-logprob') return (n) => n.pathLogprob;
  if (typeof score === 'function') return score;
  throw badOption('score', score, "must be 'mean-logprob', 'total-logprob' or a function");
}

/** Resolves with `p`, or rejects when `signal` fires first (a callback that never settles cannot hang an aborted search). */
function untilAborted(p, signal) {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then((v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e) => { signal.removeEventListener('abort', onAbort); reject(e); });
  });
}

/** Runs a caller's callback on a node; a throw or a rejection becomes a CALLBACK error naming it and the node. */
async function guarded(what, fn, node, signal, extra) {
  try {
    const r = extra === undefined ? fn(node) : fn(node, extra);
    return r && typeof r.then === 'function' ? await untilAborted(Promise.resolve(r), signal) : r;
  } catch (e) {
    if (signal && signal.aborted) throw abortError(signal);
    throw new WasmlmError('CALLBACK', `treeSearch: the ${what} callback failed on node ${node.id}: ${e && e.message || e}`,
      { cause: e, callback: what, node: node.id });
  }
}

const byScore = (a, b) => b.score - a.score || a.id - b.id;

/**
 * Tree search over steps. See docs/scaling.md for the strategies, the
 * memory plan and the result.
 * @returns {Promise<{best: object|null, text: string, nodes: object[], stats: object}>}
 */
export async function treeSearch(model, prompt, opts = {}) {
  const { signal, score, isFinal, onNode, maxExpansions, exploration = UCT_EXPLORATION, ...rest } = opts;
  const shape = treeShape(rest);
  const { strategy, expand, keep, maxSteps } = shape;
  const problem = treePlanProblem(treePlan({ ...shape, maxTokens: 1, promptTokens: 0 }), shape);
  if (problem) throw badOption(strategy === 'best-first' ? 'keep' : 'expand', strategy === 'best-first' ? keep : expand, problem);
  const scoreFn = nodeScorer(score);
  const budget = maxExpansions ?? keep * maxSteps;
  const ch = model[CHANNEL];
  const session = sessionSeq++;
  const t0 = Date.now();
  let scoringMs = 0, expansions = 0, last = null;
  const calls = [];   // each worker call: {nodes, passes, decodeMs, usedSlots, liveSequences}
  const nodes = [];
  const finals = [];

  const start = await withSignal(ch, 'treeStart', { session, prompt, options: workerOptions(rest) }, signal);
  try {
    const root = adopt(start.root);
    root.score = null;

    /** A worker record as a caller node (or an update of a rollout node). */
    function adopt(rec) {
      let n = nodes[rec.id];
      const parent = rec.parent == null ? null : nodes[rec.parent];
      const logprob = rec.logprobs.reduce((a, b) => a + b, 0);
      if (!n) {
        n = {
          id: rec.id, parent: rec.parent, depth: rec.depth, text: '', pathText: '', tokens: [], logprobs: [], logprob: 0,
          pathLogprob: 0, pathTokens: 0, score: null, final: false, finishReason: null, rollout: rec.rollout, pruned: false,
          expanded: false, children: [],
          ...(strategy === 'mcts' && !rec.rollout ? { visits: 0, value: null } : {}),
        };
        nodes[rec.id] = n;
        if (parent && !rec.rollout) parent.children.push(n.id);
      }
      Object.assign(n, {
        depth: rec.depth, text: rec.text, tokens: rec.tokens, logprobs: rec.logprobs, logprob,
        pathText: (parent ? parent.pathText : '') + rec.text,
        pathLogprob: (parent ? parent.pathLogprob : 0) + logprob,
        pathTokens: (parent ? parent.pathTokens : 0) + rec.tokens.length,
        final: rec.final, finishReason: rec.finishReason,
      });
      if (rec.rollout) n.steps = rec.steps;
      return n;
    }

    let free = [];
    /** One worker call: frees what was pruned, grows `requests`; returns the new / updated nodes. */
    async function grow(requests) {
      const f = free;
      free = [];
      const before = last ? last.stats.passes : 0;
      last = await withSignal(ch, 'treeGrow', { session, grow: requests, free: f }, signal);
      calls.push({ nodes: requests.reduce((a, r) => a + (r.rollout ? 1 : r.n), 0), passes: last.stats.passes - before, decodeMs: last.stats.decodeMs,
        usedSlots: last.usedSlots, liveSequences: last.liveSequences });
      return last.nodes.map(adopt);
    }
    const notify = async (n, event) => { if (onNode) await guarded('onNode', onNode, n, signal, event); };
    /** isFinal, then score, for each new node (concurrently), then onNode in id order. */
    async function rate(list) {
      const ts = Date.now();
      await Promise.all(list.map(async (n) => {
        if (!n.final && isFinal && await guarded('isFinal', isFinal, n, signal)) {
          n.final = true; n.finishReason = 'final';
          free.push(n.id);   // the worker still holds its sequence
        }
        const s = Number(await guarded('score', scoreFn, n, signal));
        n.score = Number.isNaN(s) ? -Infinity : s;
      }));
      scoringMs += Date.now() - ts;
      if (signal && signal.aborted) throw abortError(signal);
      for (const n of list) {
        if (n.final) finals.push(n);
        await notify(n, 'node');
      }
    }
    async function prune(list) {
      for (const n of list) { n.pruned = true; free.push(n.id); await notify(n, 'pruned'); }
    }

    if (strategy === 'beam') {
      // each depth: every frontier node grows `expand` children in one call; the best `keep` open children go on
      let frontier = [root];
      while (frontier.length && expansions < budget) {
        const take = frontier.slice(0, budget - expansions);
        await prune(frontier.slice(take.length));
        const made = await grow(take.map((x) => ({ node: x.id, n: expand })));
        for (const x of take) x.expanded = true;
        expansions += take.length;
        await rate(made);
        const open = made.filter((c) => !c.final).sort(byScore);
        frontier = open.slice(0, keep);
        await prune(open.slice(keep));
      }
    } else if (strategy === 'best-first') {
      // always grow the best open node; at most `keep` stay open; stop when a
      // final node scores at least as well as every open one
      let open = [root];
      root.score = Infinity;
      while (open.length && expansions < budget) {
        const x = open.shift();
        const bestFinal = finals.reduce((a, f) => (!a || byScore(f, a) < 0 ? f : a), null);
        if (x !== root && bestFinal && bestFinal.score >= x.score) { open.unshift(x); break; }
        const made = await grow([{ node: x.id, n: expand }]);
        x.expanded = true;
        expansions++;
        await rate(made);
        open = open.concat(made.filter((c) => !c.final)).sort(byScore);
        await prune(open.slice(keep));
        open = open.slice(0, keep);
      }
      root.score = null;
    } else {
      await mcts(root);
    }

    // ---- MCTS: selection by UCT, expansion, rollouts (batched), backup ----
    async function mcts(rootNode) {
      let lo = Infinity, hi = -Infinity;
      const see = (v) => { if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } };
      // a value in [0, 1] by the range of values seen (scores have any scale); +-Infinity: the ends
      const norm = (v) => (v === Infinity ? 1 : v === -Infinity || !(hi > lo) ? (v === -Infinity ? 0 : 0.5) : (v - lo) / (hi - lo));
      const mean = (n) => (n.visits ? n.sum / n.visits : 0);
      const uct = (c, parent) => norm(mean(c)) + exploration * Math.sqrt(Math.log(parent.visits) / c.visits);
      const exhausted = new Set();
      const markUp = (path) => {
        for (let i = path.length - 1; i >= 0; i--) {
          const n = path[i];
          if (n.final || (n.expanded && n.children.every((id) => exhausted.has(nodes[id])))) exhausted.add(n); else break;
        }
      };
      const backup = (path, v) => {
        for (const n of path) { n.visits++; n.sum = (n.sum || 0) + v; }
      };
      rootNode.visits = 0;
      while (expansions < budget && !exhausted.has(rootNode)) {
        // selection: the child of best UCT (an unvisited child first) down to a node not grown yet
        const path = [rootNode];
        let x = rootNode;
        while (x.expanded) {
          let best = null, bestU = -Infinity;
          for (const id of x.children) {
            const c = nodes[id];
            if (exhausted.has(c)) continue;
            const u = c.visits ? uct(c, x) : Infinity;
            if (u > bestU) { best = c; bestU = u; }
          }
          if (!best) break;
          x = best; path.push(x);
        }
        if (x.final) {   // a final leaf: its value again, no tokens
          const v = x.score;
          backup(path, Number.isFinite(v) ? v : v > 0 ? hi : lo);
          markUp(path);
          continue;
        }
        // expansion
        const made = await grow([{ node: x.id, n: expand }]);
        x.expanded = true;
        expansions++;
        await rate(made);
        // rollouts: every open child runs to a final node, all of them in each call, a step a call
        const runs = made.filter((c) => !c.final).map((c) => ({ c, r: null }));
        let live = runs;
        while (live.length) {
          const got = await grow(live.map((o) => ({ node: (o.r || o.c).id, rollout: true })));
          for (const o of live) if (!o.r) o.r = got.find((n) => n.rollout && n.parent === o.c.id && n.id > o.c.id);
          const ended = [];
          await Promise.all(live.map(async (o) => {
            const r = o.r;
            if (!r.final && isFinal && await guarded('isFinal', isFinal, r, signal)) { r.final = true; r.finishReason = 'final'; free.push(r.id); }
          }));
          for (const o of live) if (o.r.final) ended.push(o);
          if (ended.length) {
            const ts = Date.now();
            await Promise.all(ended.map(async (o) => {
              const s = Number(await guarded('score', scoreFn, o.r, signal));
              o.r.score = Number.isNaN(s) ? -Infinity : s;
            }));
            scoringMs += Date.now() - ts;
            for (const o of ended) { finals.push(o.r); await notify(o.r, 'node'); }
          }
          live = live.filter((o) => !o.r.final);
        }
        // backup: each child's value (its own score when final, else its rollout's) along its path
        for (const c of made) {
          const v = c.final ? c.score : runs.find((o) => o.c === c).r.score;
          see(v);
          c.value = v;
        }
        for (const c of made) {
          const v = c.value;
          backup([...path, c], Number.isFinite(v) ? v : v > 0 ? hi : lo);
          if (c.final) markUp([...path, c]);
        }
      }
      for (const n of nodes) if (n.visits !== undefined) { n.value = n.visits ? n.sum / n.visits : null; delete n.sum; }
    }

    const best = finals.slice().sort(byScore)[0] || nodes.filter((n) => n && n.score != null).sort(byScore)[0] || null;
    const ws = last ? last.stats : {};
    return {
      best,
      text: best ? best.pathText : '',
      nodes: nodes.slice(),
      stats: {
        strategy, expansions, nodes: nodes.length, finals: finals.length,
        tokens: ws.tokens || 0, passes: ws.passes || 0, rebuiltTokens: ws.rebuiltTokens || 0,
        peakUsedSlots: ws.peakUsedSlots || 0, peakSequences: ws.peakSequences || 1, grammarReplays: ws.grammarReplays || 0,
        plan: start.plan, contextGrown: !!start.contextGrown, calls, scoringMs, wallMs: Date.now() - t0,
      },
    };
  } finally {
    ch.call('treeEnd', { session }).catch(() => {});
  }
}
