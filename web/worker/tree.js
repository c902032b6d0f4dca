// Tree search over steps, the worker side (the caller's side, which scores
// nodes and picks which to grow: web/tree.js).
//
// A node is one step of a path: the tokens sampled from its parent's end up
// to a step delimiter (or the step's token budget, or an end). A node that
// may still grow owns a sequence of the KV cache holding the prompt and its
// whole path except its own last token, which is "pending": it is evaluated
// when the node grows, in the same forward pass as the other nodes growing
// with it. Growing node X into n children:
//   1. X's pending token is evaluated in X's sequence (the root keeps
//      sequence 0, the prompt: its first child gets a fork of it);
//   2. children 2..n fork that sequence: the path is shared, not copied;
//   3. every child samples its first token from X's logits row and then all
//      the children of every node growing in this call are decoded as ONE
//      batch (one forward pass a token for all of them) until each ends its
//      step.
// Child 1 continues X's random stream (so `expand: 1` is plain sampling, step
// by step); child i > 1 and every rollout draw with seed + node id. A node
// the caller prunes is freed at once (its sequence removed: its slots are
// freed unless a live path shares them), so the cache holds only the live
// frontier's paths.
//
// Rollouts (MCTS): a rollout borrows its start node's sequence, decodes one
// step a call in place (one node, rollout: true), and on its end the
// sequence is cut back to the start node's length.
//
// Other requests on this model may run between two calls of a search (they
// may clear or reuse the cache): every call first checks that each live
// node's sequence still holds that node's tokens (the engine's own token
// lists) and rebuilds what does not, from the prompt, in one batched pass.
//
// With a grammar (options.grammar; json and jsonSchema arrive as one) each
// node that may still grow keeps the recognizer state after its tokens;
// children and rollouts start from a copy of it, and every draw takes its
// mask first (docs/grammar.md). A grammar holds at most 256 states, so the
// search keeps at most G_STATES: past that the least recently used open
// node gives its state up and, if it grows later, gets it back by replaying
// its path's tokens. A node whose text the grammar completes ends 'stop';
// one no token continues ends 'grammar'.
import { samplingOptions, promptIdsOf } from './stream.js';
import { GrammarState } from './grammar.js';
import { checkPromptFits } from './generation.js';
import { EngineError } from '../errors.js';

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

export const TREE_STRATEGIES = Object.freeze(['beam', 'best-first', 'mcts']);
const MAX_SEQ = 64;   // WLM_MAX_SEQ
const G_STATES = 160; // recognizer states a search keeps (of a grammar's 256; a call needs at most 2 x MAX_SEQ)

/**
 * The memory plan of a search: `width` live sequences besides the prompt's
 * (beam: keep x expand, the children of a depth; best-first: keep - 1 open
 * nodes plus the expand children of the one growing; mcts: keep x expand, a
 * pool whose least recently used leaves are rebuilt when needed again), each
 * holding at most `pathTokens` tokens of its own past the shared prompt, so
 * `slots` = prompt + width x pathTokens cache slots bound the whole search.
 */
export function treePlan({ strategy = 'beam', keep, expand, maxSteps, maxTokensPerStep, maxTokens, promptTokens, ctxLimit = Infinity }) {
  const width = strategy === 'best-first' ? keep + expand - 1 : keep * expand;
  const pathTokens = Math.max(0, Math.min(maxTokens, maxSteps * maxTokensPerStep, ctxLimit - promptTokens));
  return { strategy, width, sequences: width + 1, pathTokens, promptTokens, slots: promptTokens + width * pathTokens };
}

/** Why a plan cannot run (its numbers named), or null. */
export function treePlanProblem(plan, { keep, expand }) {
  if (plan.sequences <= MAX_SEQ) return null;
  const w = plan.strategy === 'best-first' ? `keep + expand - 1 = ${keep} + ${expand} - 1` : `keep x expand = ${keep} x ${expand}`;
  return `a '${plan.strategy}' tree search with ${w} = ${plan.width} live sequences, plus 1 for the prompt, needs ${plan.sequences} sequences; ` +
    `one context holds at most ${MAX_SEQ} (lower keep or expand)`;
}

/** The plan in words, for errors. */
const planText = (p) => `a tree search of width ${p.width} and paths of up to ${p.pathTokens} tokens after a ${p.promptTokens}-token prompt ` +
  `needs ${p.sequences} sequences and ${p.promptTokens} + ${p.width} x ${p.pathTokens} = ${p.slots} cache slots`;

/** The step delimiters of options.step (default a newline). */
function delimitersOf(step) {
  const list = step == null ? ['\n'] : Array.isArray(step) ? step : [step];
  if (!list.length || list.some((s) => typeof s !== 'string' || s === '')) throw new EngineError('step must be a non-empty string or an array of them', 1);
  return list;
}

function intOpt(opts, name, def, min, max) {
  const v = opts[name] == null ? def : Number(opts[name]);
  if (!Number.isInteger(v) || v < min || v > max) throw new EngineError(`${name} must be an integer in ${min}..${max}, got ${opts[name]}`, 1);
  return v;
}

/** The shape options of a search with their defaults (web/options.js declares them). */
export function treeShape(opts = {}) {
  const strategy = opts.strategy ?? 'beam';
  if (!TREE_STRATEGIES.includes(strategy)) throw new EngineError(`strategy must be one of ${TREE_STRATEGIES.join(', ')}, got ${strategy}`, 1);
  return {
    strategy,
    expand: intOpt(opts, 'expand', 4, 1, 64),
    keep: intOpt(opts, 'keep', 2, 1, 64),
    maxSteps: intOpt(opts, 'maxSteps', 8, 1, 4096),
    maxTokensPerStep: intOpt(opts, 'maxTokensPerStep', 32, 1, 1 << 20),
    delimiters: delimitersOf(opts.step),
  };
}

/**
 * Starts a search session on `eng`: plans the context, prefills the prompt
 * (all but its last token) into sequence 0 and makes the root node.
 * Returns the session: grow(requests, free, shouldStop) -> stepper, close().
 */
export function startTree(eng, prompt, opts = {}) {
  eng.requireModel();
  const o = samplingOptions(opts);
  const shape = treeShape(opts);
  const promptIds = promptIdsOf(eng, prompt, o);
  checkPromptFits(eng, promptIds);
  if (o.grammar) eng.grammars.get(o.grammar);   // a grammar that does not compile fails the start
  const P = promptIds.length;
  const plan = treePlan({ ...shape, maxTokens: o.maxTokens, promptTokens: P, ctxLimit: eng.ctxLimit });
  const problem = treePlanProblem(plan, shape);
  if (problem) throw new EngineError(problem, 1);
  let grown;
  try {
    grown = eng.ensureContext({ nSeq: plan.sequences, slots: plan.slots, outputs: plan.width });
  } catch (e) {
    if (e.code === 'NOMEM') throw new EngineError(`${planText(plan)}: ${e.message}`, 5);
    throw e;
  }
  const H = Math.max(o.repeatLastN, 1);
  const { STREAM } = eng.abi;   // the stream block's layout in this build (./abi.js)
  const pool = eng.alloc(plan.width * STREAM.size, 'the tree search streams');
  const freeBlocks = Array.from({ length: plan.width }, (_, i) => pool + i * STREAM.size);
  const freeSeqs = Array.from({ length: plan.width }, (_, i) => i + 1);   // sequence 0 is the prompt's
  const nodes = [];
  let tick = 0, closed = false;
  const stats = { passes: 0, tokens: 0, rebuiltTokens: 0, peakUsedSlots: 0, peakSequences: 1, grammarReplays: 0, contextGrown: grown };

  const seedOf = (id) => BigInt.asUintN(64, o.seed + BigInt(id));
  const snapshot = (p) => eng.u8.slice(p, p + STREAM.size);
  const restore = (p, state) => eng.u8.set(state, p);

  // the root: sequence 0 holds the prompt but its last token (pending)
  const rootState = (() => {
    const p = freeBlocks[0];
    eng.seedRng(p + STREAM.rng, o.seed);
    eng.resetDetok(p + STREAM.detok);
    return snapshot(p);
  })();
  const root = {
    id: 0, parent: null, depth: 0, tokens: [], logprobs: [], text: '', pathLen: 0, pending: promptIds[P - 1],
    seq: 0, hist: promptIds.slice(-H), state: rootState, final: false, finishReason: null, rollout: false, expanded: false, gs: null,
  };
  nodes.push(root);

  // ---- grammar states (none without a grammar) ----
  let grammar = null;
  const holding = new Set();   // nodes holding a recognizer state
  /** The compiled grammar, looked up each call: while the search holds no state the engine may have dropped it. */
  function useGrammar() {
    if (!o.grammar) return;
    const g = eng.grammars.get(o.grammar);
    if (g !== grammar) { for (const n of holding) n.gs = null; holding.clear(); grammar = g; }
  }
  function dropState(n) {
    if (!n.gs) return;
    n.gs.free(); n.gs = null; holding.delete(n);
  }
  function holdState(n, gs) {
    while (holding.size >= G_STATES) {
      let victim = null;
      for (const x of holding) if (!pinned.has(x) && (!victim || (x.used ?? 0) < (victim.used ?? 0))) victim = x;
      if (!victim) throw new EngineError(`tree search: more than ${G_STATES} grammar states in one call`, 7);
      dropState(victim);
    }
    n.gs = gs; holding.add(n);
    return gs;
  }
  /** n's recognizer state after its path's tokens (rebuilt by replaying them when it was given up); null without a grammar. */
  function grammarOf(n) {
    if (!grammar) return null;
    if (n.gs) return n.gs;
    const chain = [];
    for (let x = n; x; x = x.parent) chain.push(x);
    const gs = new GrammarState(grammar, o.ignoreEos);
    if (n !== root) stats.grammarReplays++;
    try {
      for (let i = chain.length - 1; i >= 0; i--) for (const t of chain[i].tokens) gs.after(t);
    } catch (e) { gs.free(); throw e; }
    return holdState(n, gs);
  }

  /** The tokens node n's sequence holds: the prompt but its last token, then the path but n's own last token. */
  function cacheTokens(n) {
    const chain = [];
    for (let x = n; x; x = x.parent) chain.push(x);
    const out = promptIds.slice(0, P - 1);
    if (n === root) return out;
    out.push(promptIds[P - 1]);
    for (let i = chain.length - 2; i >= 0; i--) {
      const x = chain[i];
      const own = x === n ? x.tokens.slice(0, -1) : x.tokens;
      for (const t of own) out.push(t);
    }
    return out;
  }
  const cacheLen = (n) => P - 1 + n.pathLen;

  function intact(n) {
    if (n.seq == null) return false;
    const have = eng.tokensOf(n.seq);
    if (have.length !== cacheLen(n)) return false;
    const want = cacheTokens(n);
    for (let i = want.length - 1; i >= 0; i--) if (have[i] !== want[i]) return false;
    return true;
  }

  function usedSlots() { return eng.nCtx - (eng.x.wlm_ctx_free_slots(eng.ctx) >>> 0); }
  function liveSequences() { return 1 + plan.width - freeSeqs.length; }
  function noteMemory() {
    stats.peakUsedSlots = Math.max(stats.peakUsedSlots, usedSlots());
    stats.peakSequences = Math.max(stats.peakSequences, liveSequences());
  }

  // ---- sequences ----
  const pinned = new Set();
  function allocSeq() {
    if (!freeSeqs.length) {
      // mcts: the least recently used leaf gives up its sequence (rebuilt if it is chosen again);
      // beam and best-first free what they prune, so their plan always has room
      if (shape.strategy !== 'mcts') throw new EngineError(`tree search ran out of sequences (${plan.width} planned): a pruned node was not freed`, 7);
      let victim = null;
      for (const n of nodes) {
        if (n.seq == null || n === root || pinned.has(n) || n.lentTo || n.lender) continue;
        if (!victim || n.used < victim.used || (n.used === victim.used && n.id < victim.id)) victim = n;
      }
      if (!victim) throw new EngineError(`tree search ran out of sequences (${plan.width} planned)`, 7);
      releaseSeq(victim);
    }
    freeSeqs.sort((a, b) => a - b);
    return freeSeqs.shift();
  }
  /** Frees n's sequence (a rollout gives its borrowed sequence back, cut to its lender's length). */
  function releaseSeq(n) {
    if (n.lentTo) releaseSeq(n.lentTo);
    if (n.seq == null) return;
    if (n.lender) {
      const l = n.lender;
      if (!eng.rewindSequence(n.seq, cacheLen(l))) { eng.removeSequence(n.seq); freeSeqs.push(n.seq); l.seq = null; }
      l.lentTo = null; n.lender = null; n.seq = null;
      return;
    }
    if (n.seq === 0) return;   // the prompt's
    eng.removeSequence(n.seq);
    freeSeqs.push(n.seq);
    n.seq = null;
  }

  /** Checks every live sequence; rebuilds the prompt's when another request changed it. */
  function checkCache(shouldStop) {
    for (const n of nodes) {
      if (n.seq == null || n === root || n.lender || n.lentTo) continue;
      if (!intact(n)) { freeSeqs.push(n.seq); n.seq = null; }
    }
    for (const n of nodes) {
      // a rollout shares its lender's sequence: both lose it
      if (n.lender && !intact(n)) { const l = n.lender; l.lentTo = null; n.lender = null; freeSeqs.push(n.seq); l.seq = null; n.seq = null; }
    }
    if (!intact(root)) {
      // prefill drops every other sequence: whatever they held is gone
      for (const n of nodes) if (n !== root && n.seq != null) { if (!n.lender) freeSeqs.push(n.seq); n.seq = null; n.lender = null; n.lentTo = null; }
      const { status } = eng.prefill(promptIds.slice(0, P - 1), shouldStop, o.reusePrefix);
      if (status === -1) return false;
      eng.check(status, 'tree search prefill');
    }
    return true;
  }

  /** Gives each of `list` (pinned) a sequence holding its tokens: forks of the nearest ancestor with one, the rest evaluated in one pass. */
  function rebuild(list) {
    const toks = [], seqs = [];
    for (const n of list) {
      const s = allocSeq();   // first: making room may take an ancestor's sequence
      let a = n.parent;
      while (a && a.seq == null) a = a.parent;
      if (!a || a.lentTo) a = root;
      eng.forkSequence(a.seq, s);
      n.seq = s;
      const want = cacheTokens(n);
      for (let i = cacheLen(a); i < want.length; i++) { toks.push(want[i]); seqs.push(s); }
    }
    if (toks.length) {
      if (!eng.evalBatch(toks, seqs, toks.map(() => 0), 'tree search rebuild')) {
        throw new EngineError(`tree search: the cache is full while rebuilding ${list.length} path(s) (${planText(plan)})`, 6);
      }
      stats.rebuiltTokens += toks.length;
      stats.passes++;
    }
  }

  // ---- one call: grow nodes, step rollouts ----

  function node(id) {
    const n = nodes[id];
    if (!n) throw new EngineError(`tree search: no node ${id}`, 1);
    return n;
  }

  function record(n) {
    return {
      id: n.id, parent: n.parent ? n.parent.id : null, depth: n.depth, text: n.text, tokens: n.tokens.slice(), logprobs: n.logprobs.slice(),
      final: n.final, finishReason: n.finishReason, rollout: n.rollout, ...(n.rollout ? { steps: n.steps } : {}),
    };
  }

  /** A decoder: one node sampling its step in a stream block. */
  function decoder(n, seedFresh) {
    const block = freeBlocks.pop();
    restore(block, n.state);
    if (seedFresh) eng.seedRng(block + STREAM.rng, seedOf(n.id));
    return { n, block, stepTokens: 0, stepText: '', token: -1, logprob: 0 };
  }
  function sampleInto(d, row) {
    let allow = 0;
    const gs = d.n.gs;
    if (gs) {
      allow = gs.before();
      if (gs.end) { d.end = gs.end; return; }   // complete ('stop') or a dead end ('grammar'): nothing drawn
    }
    const { token, logprob } = eng.sample(row, o, d.n.hist, d.block + STREAM.rng, allow);
    d.token = token; d.logprob = logprob;
  }
  function endStep(d, reason) {
    const n = d.n;
    if (reason) {
      n.final = true; n.finishReason = reason;
      const tail = eng.detokFlush(d.block + STREAM.detok);
      if (tail) n.text += tail;
      n.pending = null;
      releaseSeq(n);
      dropState(n);
    } else {
      n.pending = n.tokens[n.tokens.length - 1];
      n.state = snapshot(d.block);
      if (n.hist.length > H) n.hist = n.hist.slice(-H);
    }
    freeBlocks.push(d.block);
  }
  const depthLimit = (n) => n.depth >= shape.maxSteps;
  /** Takes d's sampled token; returns true while d's step goes on. */
  function consume(d) {
    const n = d.n;
    if (d.end) { endStep(d, d.end); return false; }
    if (!o.ignoreEos && eng.isEog(d.token)) { endStep(d, 'stop'); return false; }
    if (n.gs) n.gs.after(d.token);
    n.tokens.push(d.token); n.logprobs.push(d.logprob); n.hist.push(d.token);
    n.pathLen++; d.stepTokens++; stats.tokens++;
    const piece = eng.detokPush(d.block + STREAM.detok, d.token);
    const prev = d.stepText.length;
    d.stepText += piece; n.text += piece;
    if (n.hist.length > 4 * Math.max(H, 16)) n.hist = n.hist.slice(-H);
    if (n.pathLen >= o.maxTokens) { endStep(d, 'length'); return false; }
    if (P + n.pathLen >= eng.ctxLimit) { endStep(d, 'context'); return false; }
    // a delimiter this token completes (one wholly before it would have ended the step already)
    const delim = piece !== '' && shape.delimiters.some((s) => d.stepText.indexOf(s, Math.max(0, prev - s.length + 1)) >= 0);
    if (delim || d.stepTokens >= shape.maxTokensPerStep) {
      // a text the grammar completes (or leaves at a dead end) here ends now, not in each child
      if (n.gs && !depthLimit(n)) { n.gs.before(); if (n.gs.end) { endStep(d, n.gs.end); return false; } }
      endStep(d, depthLimit(n) ? 'steps' : null);
      return false;
    }
    return true;
  }

  /**
   * One call: frees `free` (node ids), then grows each request {node, n}
   * into n children, or steps a rollout ({node, rollout: true}: from a tree
   * node it starts one, from a rollout node it continues it). Stepper:
   * step() -> {done: false} | {done: true, nodes, stats} | {done: true, aborted: true}.
   */
  function grow(requests, free = [], shouldStop = null) {
    if (closed) throw new EngineError('tree search session closed', 7);
    for (const id of free) {
      const n = node(id);
      if (n === root) continue;
      releaseSeq(n);
      dropState(n);
      if (n.rollout && !n.final) { n.final = true; n.finishReason = n.finishReason || 'caller'; }
    }
    if (!checkCache(shouldStop)) return { step: () => ({ done: true, aborted: true }) };
    useGrammar();
    // the nodes this call decodes from: each needs its sequence and its pending token
    const sources = [], rolls = [];
    for (const r of requests) {
      const x = node(r.node);
      if (x.final) throw new EngineError(`tree search: node ${x.id} is final (${x.finishReason})`, 1);
      if (r.rollout) {
        if (x.rollout) rolls.push({ x, start: false });
        else { if (x.lentTo) throw new EngineError(`tree search: node ${x.id} has a rollout running`, 1); rolls.push({ x, start: true }); }
      } else {
        const n = r.n == null ? shape.expand : Number(r.n);
        if (!Number.isInteger(n) || n < 1 || n > plan.width) throw new EngineError(`tree search: a node grows into 1..${plan.width} children, got ${r.n}`, 1);
        if (x.expanded) throw new EngineError(`tree search: node ${x.id} was grown already`, 1);
        if (x.rollout) throw new EngineError(`tree search: node ${x.id} is a rollout (step it with rollout: true)`, 1);
        sources.push({ x, n });
      }
    }
    const want = sources.reduce((a, s) => a + s.n, 0) + rolls.length;
    if (want > plan.width) throw new EngineError(`tree search: ${want} nodes in one call, the plan has ${plan.width} (${planText(plan)})`, 1);
    const t0 = now();
    pinned.clear();
    tick++;
    for (const s of sources) { pinned.add(s.x); s.x.used = tick; }
    for (const r of rolls) { pinned.add(r.x); r.x.used = tick; }
    // nodes whose sequences another request took (or mcts lent to a newer leaf): rebuilt; a rollout
    // rebuilt so owns its sequence
    rebuild([...sources.map((s) => s.x), ...rolls.map((r) => r.x)].filter((x) => x.seq == null || !intact(x)));

    // pending tokens of every source, in one pass; the root keeps sequence 0
    const pendToks = [], pendSeqs = [];
    const made = [];
    for (const s of sources) {
      const x = s.x;
      let s0;
      if (x === root) { s0 = allocSeq(); eng.forkSequence(0, s0); } else { s0 = x.seq; x.seq = null; }
      s.s0 = s0;
      pendToks.push(x.pending); pendSeqs.push(s0);
      x.expanded = true;
    }
    for (const r of rolls) {
      const x = r.x;
      if (r.start) {
        const id = nodes.length;
        const ro = {
          id, parent: x, from: x, depth: x.depth, tokens: [], logprobs: [], text: '', pathLen: x.pathLen, pending: x.pending,
          seq: x.seq, lender: x, hist: x.hist.slice(), state: x.state, final: false, finishReason: null, rollout: true, steps: 0, expanded: false, used: tick,
          gs: null,
        };
        x.lentTo = ro;
        nodes.push(ro);
        pinned.add(ro);
        if (grammar) holdState(ro, grammarOf(x).fork());
        r.x = ro;
      }
      pendToks.push(r.x.pending); pendSeqs.push(r.x.seq);
    }
    if (pendToks.length && !eng.evalBatch(pendToks, pendSeqs, null, 'tree search')) {
      throw new EngineError(`tree search: the cache is full (${planText(plan)})`, 6);
    }
    if (pendToks.length) stats.passes++;
    const decoders = [];
    sources.forEach((s, si) => {
      const x = s.x;
      const xgs = grammarOf(x);
      for (let i = 0; i < s.n; i++) {
        const c = {
          id: nodes.length, parent: x, depth: x.depth + 1, tokens: [], logprobs: [], text: '', pathLen: x.pathLen, pending: null,
          seq: null, hist: x.hist.slice(), state: x.state, final: false, finishReason: null, rollout: false, expanded: false, used: tick,
          gs: null,
        };
        nodes.push(c); pinned.add(c); made.push(c);
        if (xgs) holdState(c, xgs.fork());
        c.seq = i === 0 ? s.s0 : allocSeq();
        if (i > 0) eng.forkSequence(s.s0, c.seq);
        const d = decoder(c, i > 0);
        sampleInto(d, si);
        decoders.push(d);
      }
      dropState(x);   // grown: it never samples again
    });
    rolls.forEach((r, ri) => {
      const ro = r.x;
      ro.steps++; ro.depth = ro.from.depth + ro.steps;
      grammarOf(ro);
      const d = decoder(ro, r.start);
      sampleInto(d, sources.length + ri);
      decoders.push(d);
      if (r.start) made.push(ro);
    });
    noteMemory();
    let active = decoders;
    // this call's engine time: the setup above and each step (not the worker's yields between steps)
    let decodeMs = now() - t0, stepStart = 0;
    const finishCall = () => {
      noteMemory();
      pinned.clear();
      const changed = made.concat(rolls.filter((r) => !r.start).map((r) => r.x));
      const ms = decodeMs + now() - stepStart;
      return { done: true, nodes: changed.map(record), usedSlots: usedSlots(), liveSequences: liveSequences(), stats: { ...stats, decodeMs: ms } };
    };
    function stepOnce() {
      if (shouldStop && shouldStop()) {
        for (const d of active) freeBlocks.push(d.block);
        active = [];
        return { done: true, aborted: true };
      }
      const go = active.filter(consume);
      if (go.length) {
        if (!eng.evalBatch(go.map((d) => d.token), go.map((d) => d.n.seq), null, 'tree search')) {
          for (const d of go) endStep(d, 'context');
          active = [];
          return finishCall();
        }
        stats.passes++;
        go.forEach((d, r) => sampleInto(d, r));
      }
      active = go;
      return active.length ? { done: false } : finishCall();
    }
    return {
      step() {
        stepStart = now();
        try { return stepOnce(); } finally { decodeMs += now() - stepStart; }
      },
    };
  }

  /** Frees every sequence and block of the search; sequence 0 keeps the prompt (but its last token) for the next call's prefix reuse. */
  function close() {
    if (closed) return;
    closed = true;
    for (const n of [...holding]) dropState(n);
    eng.removeOtherSequences();
    if (!(eng.sequenceLength(0) >= P - 1 && eng.rewindSequence(0, P - 1))) eng.clearCache();
    eng.free(pool);
  }

  return {
    plan, root: record(root), promptTokens: P,
    grow, close,
    get stats() { return { ...stats }; },
  };
}
