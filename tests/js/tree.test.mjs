// Tree search over steps (web/tree.js, web/worker/tree.js) through the
// public API: equality with plain sampling, a verifier that steers the
// search, the memory bound of the live frontier, the plan's errors,
// callbacks that fail, cancellation, determinism, MCTS and best-first.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODEL_PATH, ROOT, reference, isError } from './helpers.mjs';
import { loadModel, jsonSchemaToGbnf } from '../../web/index.js';
import { Engine } from '../../web/worker/engine.js';
import { checkOptions } from '../../web/options.js';
import { treePlan } from '../../web/worker/tree.js';
import { makeModel, SHAPES } from '../../models/make-model.js';

const REF = reference();
const PROMPT = 'Once upon a time';
const SAMPLE = { temperature: 1, topK: 0, topP: 1, minP: 0, repeatPenalty: 1 };
const GREEDY = { temperature: 0, repeatPenalty: 1, ignoreEos: true };

let model;
test.before(async () => { model = await loadModel(MODEL_PATH, { threads: 1 }); });
test.after(async () => { await model?.dispose(); });

/** The nodes from the root to n (root excluded). */
function pathOf(r, n) {
  const out = [];
  for (let x = n; x && x.parent !== null; x = r.nodes[x.parent]) out.unshift(x);
  return out;
}
const tokensOf = (r, n) => pathOf(r, n).flatMap((x) => x.tokens);
const logprobsOf = (r, n) => pathOf(r, n).flatMap((x) => x.logprobs);

async function greedyStillRight(m = model) {
  const g = await m.complete(PROMPT, { ...GREEDY, maxTokens: 200 });
  assert.deepEqual(g.tokens, REF.results[0].generated_token_ids);
}

test('expand 1, keep 1 is plain sampling with the same seed, step by step (stories260K)', async () => {
  for (const [seed, maxTokens, step, perStep] of [[7, 60, '.', 200], [42, 80, ['.', ','], 200], [3, 50, '\n', 6], [99, 40, ' the', 9]]) {
    const plain = await model.complete(PROMPT, { ...SAMPLE, seed, maxTokens });
    for (const strategy of ['beam', 'best-first', 'mcts']) {
      const t = await model.treeSearch(PROMPT, { ...SAMPLE, seed, maxTokens, expand: 1, keep: 1, step, maxSteps: 1000, maxTokensPerStep: perStep, strategy, maxExpansions: 1000 });
      const what = `seed ${seed} ${strategy}`;
      if (strategy === 'mcts') {
        // mcts: the first child's rollout draws with a seed of its own; the child itself continues the root's stream
        const first = t.nodes[1];
        assert.deepEqual(first.tokens, plain.tokens.slice(0, first.tokens.length), what);
        continue;
      }
      assert.equal(t.text, plain.text, what);
      assert.deepEqual(tokensOf(t, t.best), plain.tokens, what);
      assert.deepEqual(logprobsOf(t, t.best), plain.logprobs, what);
      assert.equal(t.best.finishReason, plain.finishReason, what);
      assert.equal(t.best.final, true);
      // a chain: one node a depth, each step but the last ends with its delimiter (or the step's budget)
      const chain = pathOf(t, t.best);
      assert.equal(chain.length, t.nodes.length - 1, what);
      const delims = [].concat(step);
      for (const n of chain.slice(0, -1)) {
        assert.ok(n.tokens.length === perStep || delims.some((d) => n.text.endsWith(d) || n.text.slice(0, -1).includes(d)), `${what}: ${JSON.stringify(n.text)}`);
        assert.ok(n.tokens.length <= perStep);
      }
      assert.ok(chain.length > 2, `${what}: several steps`);
    }
  }
});

test('expand 1 is plain sampling on synthetic models too (llama F32, qwen2 F16), with a delimiter that occurs', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-tree-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const [name, type, arch] of [['llama', 'f32', 'llama'], ['qwen2', 'f16', 'qwen2']]) {
    const file = path.join(dir, `${name}.gguf`);
    makeModel(file, SHAPES.tiny, type, 11, { arch, qkStd: 0.2 });
    const m = await loadModel(file, { threads: 1, contextLength: 128 });
    try {
      const ids = [1, 5, 17, 200, 33];
      const plain = await m.complete(ids, { ...SAMPLE, seed: 5, maxTokens: 40, ignoreEos: true });
      assert.equal(plain.tokens.length, 40);
      // a delimiter that the plain text has: a step ends there
      const piece = await m.detokenize([plain.tokens[9]]);
      const step = piece.trim() ? piece : 'zz-never';
      const r = await m.treeSearch(ids, { ...SAMPLE, seed: 5, maxTokens: 40, ignoreEos: true, expand: 1, keep: 1, step, maxSteps: 500, maxTokensPerStep: 7 });
      assert.deepEqual(tokensOf(r, r.best), plain.tokens, name);
      assert.equal(r.text, plain.text, name);
      assert.ok(r.nodes.length > 5, `${name}: ${r.nodes.length} nodes`);
    } finally { await m.dispose(); }
  }
});

test('a scorer that rewards a word finds a path with it far more often than plain sampling (12 seeds)', async () => {
  const word = /\bpark\b/i;
  let plainHits = 0, treeHits = 0, treeTokens = 0;
  for (let s = 1; s <= 12; s++) {
    const seed = 1000 + s;
    const plain = await model.complete(PROMPT, { ...SAMPLE, seed, maxTokens: 48 });
    if (word.test(plain.text)) plainHits++;
    const r = await model.treeSearch(PROMPT, {
      ...SAMPLE, seed, maxTokens: 48, expand: 8, keep: 2, step: '.', maxSteps: 4, maxTokensPerStep: 24,
      score: (n) => (word.test(n.pathText) ? 1 : 0) + n.pathLogprob / Math.max(n.pathTokens, 1) / 100,
    });
    if (word.test(r.text)) treeHits++;
    treeTokens += r.stats.tokens;
    assert.equal(r.best.final, true);
  }
  // measured: plain 1 of 12, tree 12 of 12 (about 16x the tokens of one plain sample)
  assert.ok(plainHits <= 3, `plain sampling found it ${plainHits} times of 12`);
  assert.ok(treeHits >= 10, `tree search found it ${treeHits} times of 12`);
  assert.ok(treeHits >= plainHits + 7);
  assert.ok(treeTokens > 0);
});

/** The cache slots the live nodes of a beam search hold after a call: the prompt but its last token, that token once, and every live path but its node's last token, shared prefixes once. */
function heldSlots(r, live, P) {
  const held = new Set();
  for (const n of live) {
    for (const x of pathOf(r, n)) {
      const k = x === n ? x.tokens.length - 1 : x.tokens.length;
      for (let i = 0; i < k; i++) held.add(`${x.id}:${i}`);
    }
  }
  return P - 1 + (live.length ? 1 : 0) + held.size;
}

test('beam: the cache holds exactly the live frontier (pruned nodes freed at once) and stays within the stated plan', async () => {
  const P = (await model.tokenize(PROMPT)).length;
  const o = { ...SAMPLE, seed: 5, maxTokens: 60, expand: 4, keep: 2, step: '.', maxSteps: 5, maxTokensPerStep: 20 };
  const r = await model.treeSearch(PROMPT, o);
  assert.deepEqual(r.stats.plan, treePlan({ ...o, strategy: 'beam', promptTokens: P, ctxLimit: 2048 }));
  assert.equal(r.stats.plan.width, 8);
  assert.equal(r.stats.plan.sequences, 9);
  assert.equal(r.stats.plan.slots, P + 8 * 60);
  const depths = Math.max(...r.nodes.map((n) => n.depth));
  assert.equal(r.stats.calls.length, depths);
  for (let d = 1; d <= depths; d++) {
    // after the call that grew depth d: the children of depth d that did not end hold sequences
    const live = r.nodes.filter((n) => n.depth === d && !(n.final && n.finishReason !== 'final'));
    const m = r.stats.calls[d - 1];
    assert.equal(m.liveSequences, 1 + live.length, `depth ${d}`);
    assert.equal(m.usedSlots, heldSlots(r, live, P), `depth ${d}`);
    assert.ok(m.usedSlots <= r.stats.plan.slots);
    // pruned nodes of depth d are gone by the next call: at most keep of them grew
    const grown = r.nodes.filter((n) => n.depth === d && n.expanded);
    assert.ok(grown.length <= 2);
    for (const n of r.nodes.filter((x) => x.depth === d && x.pruned)) assert.equal(n.expanded, false);
  }
  assert.ok(r.stats.peakUsedSlots <= r.stats.plan.slots);
  assert.ok(r.stats.peakSequences <= r.stats.plan.sequences);
  assert.ok(r.nodes.some((n) => n.pruned), 'something was pruned');
  // the tree: ids in creation order, parents before children, keep nodes grow per depth
  r.nodes.forEach((n, i) => { assert.equal(n.id, i); if (n.parent !== null) assert.ok(n.parent < n.id); });
  for (const n of r.nodes.slice(1)) assert.equal(n.depth, r.nodes[n.parent].depth + 1);
  for (const n of r.nodes.filter((x) => x.expanded && x.parent !== null)) assert.ok(!n.final && !n.pruned);
});

test('the plan is stated up front: too many sequences and too many cache slots are clear errors naming the numbers', async () => {
  await assert.rejects(model.treeSearch(PROMPT, { keep: 9, expand: 8 }), isError('BAD_OPTION', /keep x expand = 9 x 8 = 72 live sequences/, /73 sequences/, /at most 64/));
  await assert.rejects(model.treeSearch(PROMPT, { keep: 60, expand: 8, strategy: 'best-first' }), isError('BAD_OPTION', /keep \+ expand - 1 = 60 \+ 8 - 1 = 67/));
  assert.throws(() => checkOptions('treeSearch', { expand: 65 }), isError('BAD_OPTION', /expand/));
  assert.throws(() => checkOptions('treeSearch', { strategy: 'dfs' }), isError('BAD_OPTION', /'beam', 'best-first', 'mcts'/));
  assert.throws(() => checkOptions('treeSearch', { maxTokens: 0 }), isError('BAD_OPTION', /maxTokens/));
  assert.throws(() => checkOptions('treeSearch', { scorer: 'x' }), isError('BAD_OPTION', /did you mean score\?/));
  const small = await loadModel(MODEL_PATH, { threads: 1, memoryLimit: 32 << 20 });
  try {
    await assert.rejects(small.treeSearch(PROMPT, { keep: 7, expand: 9, maxTokens: 2000, maxSteps: 100, maxTokensPerStep: 64 }),
      isError('NOMEM', /width 63/, /64 sequences/, /cache slots/));
    await greedyStillRight(small);
  } finally { await small.dispose(); }
});

test('a throwing or rejecting scorer, isFinal or onNode is a CALLBACK error naming it; the model stays usable', async () => {
  const unhandled = [];
  const onUnhandled = (e) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    const boom = new Error('verifier boom');
    const o = { ...SAMPLE, seed: 1, maxTokens: 30, step: '.', maxSteps: 3 };
    for (const [bad, what] of [
      [{ score: () => { throw boom; } }, 'score'],
      [{ score: async (n) => { if (n.id > 3) throw boom; return 0; } }, 'score'],
      [{ isFinal: async () => { await new Promise((r) => setTimeout(r, 1)); throw boom; } }, 'isFinal'],
      [{ onNode: (n, e) => { if (e === 'pruned') throw boom; } }, 'onNode'],
      [{ score: () => { throw boom; }, strategy: 'mcts' }, 'score'],
    ]) {
      await assert.rejects(model.treeSearch(PROMPT, { ...o, ...bad }), (e) => {
        assert.equal(e.code, 'CALLBACK', e.message);
        assert.equal(e.callback, what);
        assert.equal(e.cause, boom);
        assert.match(e.message, new RegExp(`the ${what} callback failed on node \\d+: verifier boom`));
        return true;
      });
    }
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(unhandled.map((e) => e.message), []);
  } finally { process.off('unhandledRejection', onUnhandled); }
  await greedyStillRight();
});

test('cancellation mid-search (in a callback, and while a scorer never settles) leaves the model usable and the next search the same', async () => {
  const o = { ...SAMPLE, seed: 21, maxTokens: 50, step: '.', maxSteps: 4, expand: 4, keep: 2 };
  const want = await model.treeSearch(PROMPT, o);
  const ac = new AbortController();
  let seen = 0;
  await assert.rejects(model.treeSearch(PROMPT, { ...o, signal: ac.signal, onNode: () => { if (++seen === 6) ac.abort(); } }), (e) => e.name === 'AbortError');
  assert.equal(seen, 6);
  // aborted while the worker decodes
  const ac2 = new AbortController();
  const p = model.treeSearch(PROMPT, { ...o, signal: ac2.signal, maxTokens: 200, maxSteps: 50, maxTokensPerStep: 200, step: 'never' });
  setTimeout(() => ac2.abort(), 30);
  await assert.rejects(p, (e) => e.name === 'AbortError');
  // a scorer that never settles: the abort still ends the search
  const ac3 = new AbortController();
  const hang = model.treeSearch(PROMPT, { ...o, signal: ac3.signal, score: () => new Promise(() => {}) });
  setTimeout(() => ac3.abort(), 50);
  await assert.rejects(hang, (e) => e.name === 'AbortError');
  const again = await model.treeSearch(PROMPT, o);
  assert.deepEqual(again.nodes, want.nodes);
  await greedyStillRight();
});

test('the explored tree is deterministic for a seed (every strategy, 1 and 2 threads); other seeds explore other trees', async () => {
  const two = await loadModel(MODEL_PATH, { threads: 2 });
  try {
    for (const strategy of ['beam', 'best-first', 'mcts']) {
      const o = { ...SAMPLE, seed: 77, maxTokens: 40, step: '.', maxSteps: 3, expand: 3, keep: 2, strategy, maxExpansions: 5 };
      const a = await model.treeSearch(PROMPT, o);
      const b = await model.treeSearch(PROMPT, o);
      const c = await two.treeSearch(PROMPT, o);
      const strip = (r) => r.nodes;
      assert.deepEqual(strip(b), strip(a), strategy);
      assert.deepEqual(strip(c), strip(a), `${strategy}, 2 threads`);
      assert.equal(a.text, b.text);
      const d = await model.treeSearch(PROMPT, { ...o, seed: 78 });
      assert.notDeepEqual(d.nodes.map((n) => n.text), a.nodes.map((n) => n.text));
    }
  } finally { await two.dispose(); }
});

test('other calls on the model between the steps of a search: its paths are rebuilt and the tree is the same', async () => {
  const o = { ...SAMPLE, seed: 3, maxTokens: 40, step: '.', maxSteps: 3, expand: 3, keep: 2 };
  const want = await model.treeSearch(PROMPT, o);
  let calls = 0;
  const r = await model.treeSearch(PROMPT, {
    ...o,
    // the model's worker runs these between two calls of the search: they clear its sequences
    onNode: async (n) => { if (n.id % 3 === 0) { calls++; await model.complete('Lily had a dog', { maxTokens: 5, seed: n.id }); await model.bestOfN('A cat', { n: 3, maxTokens: 4 }); } },
  });
  assert.ok(calls > 2);
  assert.deepEqual(r.nodes, want.nodes);
  assert.ok(r.stats.rebuiltTokens > 0, 'paths were rebuilt');
  assert.equal(want.stats.rebuiltTokens, 0);
  // mcts: between the steps of its rollouts too (isFinal runs after each)
  const m = { ...o, strategy: 'mcts', maxExpansions: 4, expand: 3, keep: 1, maxTokens: 90, maxSteps: 6, maxTokensPerStep: 12 };
  const mWant = await model.treeSearch(PROMPT, m);
  let k = 0;
  const mr = await model.treeSearch(PROMPT, { ...m, isFinal: async (n) => { if (n.rollout && k++ % 2 === 0) await model.complete('Tom', { maxTokens: 3 }); return false; } });
  assert.ok(k > 2);
  assert.deepEqual(mr.nodes, mWant.nodes);
  assert.ok(mr.stats.rebuiltTokens > mWant.stats.rebuiltTokens);
});

test('isFinal ends paths: final nodes grow no children and the best answer is a final node', async () => {
  const isFinal = (n) => /\bLily\b/.test(n.text);
  for (const strategy of ['beam', 'best-first', 'mcts']) {
    const r = await model.treeSearch(PROMPT, { ...SAMPLE, seed: 8, maxTokens: 60, step: '.', maxSteps: 4, expand: 4, keep: 2, strategy, isFinal });
    const byCaller = r.nodes.filter((n) => n.finishReason === 'final');
    assert.ok(byCaller.length > 0, strategy);
    for (const n of byCaller) { assert.ok(isFinal(n)); assert.equal(n.final, true); assert.equal(n.expanded, false); }
    for (const n of r.nodes) if (n.parent !== null) assert.equal(r.nodes[n.parent].final, false, `${strategy}: node ${n.id}'s parent is final`);
    assert.equal(r.best.final, true);
    const finals = r.nodes.filter((n) => n.final);
    assert.equal(r.best.score, Math.max(...finals.map((n) => n.score)));
    assert.equal(r.stats.finals, finals.length);
  }
});

test('mcts: visits add up along the tree, each grown child gets a rollout to a final node, values lie within the scores', async () => {
  const r = await model.treeSearch(PROMPT, { ...SAMPLE, seed: 12, maxTokens: 50, step: '.', maxSteps: 4, expand: 3, keep: 2, strategy: 'mcts', maxExpansions: 7 });
  assert.equal(r.stats.expansions, 7);
  const tree = r.nodes.filter((n) => !n.rollout);
  const rolls = r.nodes.filter((n) => n.rollout);
  const kids = (n) => n.children.map((id) => r.nodes[id]);
  const root = r.nodes[0];
  assert.equal(root.visits, kids(root).reduce((a, c) => a + c.visits, 0));
  for (const n of tree.slice(1)) {
    assert.ok(n.visits >= 1, `node ${n.id}`);
    if (n.expanded) assert.equal(n.visits, 1 + kids(n).reduce((a, c) => a + c.visits, 0), `node ${n.id}`);
  }
  // a rollout for every child that was open when it was made, each final, hanging off its child
  const open = tree.filter((n) => n.parent !== null && !(n.final && !rolls.some((x) => x.parent === n.id)));
  for (const n of open) assert.equal(rolls.filter((x) => x.parent === n.id).length, 1, `node ${n.id}`);
  for (const x of rolls) { assert.equal(x.final, true); assert.ok(x.depth > r.nodes[x.parent].depth || x.finishReason !== 'steps'); }
  const scores = r.nodes.filter((n) => n.final).map((n) => n.score);
  for (const n of tree) if (n.visits) assert.ok(n.value >= Math.min(...scores) - 1e-9 && n.value <= Math.max(...scores) + 1e-9);
  assert.ok(r.stats.peakSequences <= r.stats.plan.sequences);
  assert.ok(r.stats.calls.every((m) => m.usedSlots <= r.stats.plan.slots));
});

test('best-first: at most keep nodes stay open, and it stops once a final node scores at least as well as every open one', async () => {
  const r = await model.treeSearch(PROMPT, { ...SAMPLE, seed: 4, maxTokens: 50, step: '.', maxSteps: 5, expand: 3, keep: 3, strategy: 'best-first', maxExpansions: 40 });
  assert.ok(r.stats.calls.every((m) => m.liveSequences <= 1 + 3 + 3 - 1));
  assert.ok(r.stats.expansions < 40, 'stopped before the budget');
  const open = r.nodes.filter((n) => !n.final && !n.pruned && !n.expanded && n.parent !== null);
  for (const n of open) assert.ok(r.best.score >= n.score, `open node ${n.id} scores above the answer`);
  assert.equal(r.best.final, true);
});

// ---- grammars (options.grammar / json / jsonSchema) -------------------------------------------------

const LIST_SCHEMA = { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 2, maxItems: 5 };
const LIST_GBNF = jsonSchemaToGbnf(LIST_SCHEMA);

/** The engine's own recognizer in this process: accepts(text) is a prefix of the grammar's language, complete(text) a sentence. */
async function recognizerOf(grammar) {
  const eng = await Engine.create(fs.readFileSync(path.join(ROOT, 'wasm', 'wasmlm.wasm')));
  eng.loadBytes(fs.readFileSync(MODEL_PATH), { contextLength: 64 });
  const g = eng.grammars.get(grammar);
  const run = (text, fn) => { const s = g.newState(); try { return g.acceptText(s, text) && fn(s); } finally { g.freeState(s); } };
  return { prefix: (t) => run(t, () => true), complete: (t) => run(t, (s) => g.canEnd(s)), dispose: () => eng.dispose() };
}

test('with a grammar, expand 1, keep 1 is still plain sampling with that grammar and seed (GBNF and jsonSchema)', async () => {
  for (const [what, g] of [['gbnf', { grammar: LIST_GBNF }], ['jsonSchema', { jsonSchema: LIST_SCHEMA }], ['json', { json: 'object' }]]) {
    for (const seed of [5, 6]) {
      const plain = await model.complete(PROMPT, { ...SAMPLE, ...g, seed, maxTokens: 60 });
      for (const strategy of ['beam', 'best-first', 'mcts']) {
        const t = await model.treeSearch(PROMPT, { ...SAMPLE, ...g, seed, maxTokens: 60, expand: 1, keep: 1, step: ',', maxSteps: 100, maxTokensPerStep: 200, strategy, maxExpansions: 100 });
        const tag = `${what} seed ${seed} ${strategy}`;
        if (strategy === 'mcts') { assert.deepEqual(t.nodes[1].tokens, plain.tokens.slice(0, t.nodes[1].tokens.length), tag); continue; }
        assert.equal(t.text, plain.text, tag);
        assert.deepEqual(tokensOf(t, t.best), plain.tokens, tag);
        assert.equal(t.best.finishReason, plain.finishReason, tag);
      }
      if (plain.finishReason === 'stop') JSON.parse(plain.text);
    }
  }
});

test('a wide search with a grammar: every path is a prefix of the grammar, every end it completes a sentence; states given up are replayed', async () => {
  const rec = await recognizerOf(LIST_GBNF);
  try {
    for (const [strategy, extra] of [['beam', {}], ['best-first', { maxExpansions: 12 }], ['mcts', { expand: 8, maxExpansions: 40 }]]) {
      const o = { ...SAMPLE, temperature: 1.3, seed: 21, maxTokens: 48, step: ',', maxSteps: 12, maxTokensPerStep: 4, expand: 4, keep: 2, strategy, jsonSchema: LIST_SCHEMA, ...extra };
      const r = await model.treeSearch(PROMPT, o);
      let complete = 0;
      for (const n of r.nodes.slice(1)) {
        assert.ok(rec.prefix(n.pathText), `${strategy}: node ${n.id} ${JSON.stringify(n.pathText)} leaves the grammar`);
        assert.notEqual(n.finishReason, 'grammar', `${strategy}: node ${n.id}`);
        if (n.finishReason === 'stop') {
          assert.ok(rec.complete(n.pathText), `${strategy}: node ${n.id} ended 'stop' incomplete: ${JSON.stringify(n.pathText)}`);
          const v = JSON.parse(n.pathText);
          assert.ok(Array.isArray(v) && v.length >= 2 && v.length <= 5 && v.every((x) => typeof x === 'string' && x.length <= 6));
          complete++;
        }
      }
      assert.ok(complete > 0, `${strategy}: some path completes the grammar`);
      if (strategy === 'mcts') assert.ok(r.stats.grammarReplays > 0, `mcts held more than 160 states at once: ${r.stats.grammarReplays} replays`);
      else assert.equal(r.stats.grammarReplays, 0, strategy);
      // deterministic, replays included
      assert.deepEqual((await model.treeSearch(PROMPT, o)).nodes, r.nodes, strategy);
    }
  } finally { rec.dispose(); }
  await greedyStillRight();
});

test('grammar options of treeSearch and deliberate: a schema the converter refuses is BAD_SCHEMA, two of them BAD_OPTION, before any call', async () => {
  await assert.rejects(model.treeSearch(PROMPT, { jsonSchema: { type: 'string', minProperties: 1 } }), isError('BAD_SCHEMA', /minProperties/));
  await assert.rejects(model.treeSearch(PROMPT, { json: true, grammar: 'root ::= "x"' }), isError('BAD_OPTION', /grammar and json/));
  await assert.rejects(model.deliberate(PROMPT, { json: true, jsonSchema: {} }), isError('BAD_OPTION', /json and jsonSchema/));
  await assert.rejects(model.treeSearch(PROMPT, { grammar: 'root ::= x' }), isError('BAD_OPTION', /grammar/));
  // deliberate passes the grammar to each stage: greedy, best-of-N and the tree all keep to it
  const d = await model.deliberate(PROMPT, { ...SAMPLE, jsonSchema: LIST_SCHEMA, maxTokens: 60, budget: 900, threshold: 0, escalate: ['best-of-n', 'tree'] });
  assert.deepEqual(d.stages.filter((s) => s.tokens).map((s) => s.stage), ['greedy', 'best-of-n', 'tree']);
  const rec = await recognizerOf(LIST_GBNF);
  try {
    for (const s of d.stages) if (s.tokens) assert.ok(rec.prefix(s.text), `${s.stage}: ${JSON.stringify(s.text)}`);
    assert.ok(rec.prefix(d.text));
  } finally { rec.dispose(); }
});
