// The demo's tree-search panel (web/demo/tree-panel.js) in headless
// Chromium: a search whose scorer rewards a word draws its tree as it
// grows (nodes coloured by score, the best path highlighted from the root
// to the answer, pruned branches faded), the answer has the word, Stop
// ends a long search and the model still generates, and the spend/success
// plot of the built-in task draws a point per setting. A screenshot goes
// to test-artifacts/.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startDemoServer } from '../../web/demo/server.mjs';
import { openPage, pressWhen, MODELS, MODEL_PATH, ARTIFACTS } from './browser.mjs';

let server, page, close;
const errors = [];
const waitState = (states, timeout = 120000) =>
  page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

before(async () => {
  assert.ok(fs.existsSync(MODEL_PATH), `${MODEL_PATH} is missing (set WASMLM_MODELS or WLM_SHARED)`);
  server = await startDemoServer({ modelsDir: MODELS });
  ({ page, close } = await openPage({ server, errors }));
  await waitState(['ready', 'error']);
});

after(async () => {
  await close?.();
});

async function setTree({ step = '.', expand = 4, keep = 2, depth = 3, strategy = 'beam', scorer = 'word', pattern = 'park' } = {}) {
  await page.fill('#prompt', 'Once upon a time');
  await page.fill('#temperature', '1');
  await page.fill('#seed', '1005');
  await page.fill('#max-tokens', '60');
  await page.fill('#tree-step', step);
  await page.fill('#tree-expand', String(expand));
  await page.fill('#tree-keep', String(keep));
  await page.fill('#tree-depth', String(depth));
  await page.selectOption('#tree-strategy', strategy);
  await page.selectOption('#tree-scorer', scorer);
  await page.fill('#tree-pattern', pattern);
}

test('a word-rewarding tree search draws its tree: scores as colours, the best path highlighted, pruned nodes faded', async () => {
  await setTree();
  // the tree grows while the search runs: nodes appear before it ends
  const grew = page.waitForFunction(() => document.querySelectorAll('#tree-svg .node').length > 3 && document.body.dataset.state === 'tree', null, { timeout: 60000 });
  await page.click('#tree-run');
  await grew;
  await waitState(['done', 'error', 'stopped']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'done', await page.textContent('#tree-status'));
  const r = await page.evaluate(() => {
    const t = window.wasmlmDemo.state.tree;
    const drawn = [...document.querySelectorAll('#tree-svg .node')].map((n) => ({
      id: +n.dataset.id, best: n.classList.contains('best'), pruned: n.classList.contains('pruned'), fill: n.getAttribute('fill'),
      opacity: getComputedStyle(n).opacity,
    }));
    return {
      drawn, bestEdges: document.querySelectorAll('#tree-svg .edge.best').length,
      nodes: t.nodes.map((n) => ({ id: n.id, parent: n.parent, pruned: n.pruned, depth: n.depth })), best: t.best.id, bestDepth: t.best.depth,
      text: t.text, shown: document.getElementById('tree-best').textContent, status: document.getElementById('tree-status').textContent,
    };
  });
  assert.equal(r.drawn.length, r.nodes.length);
  // the highlighted path: the best node and its ancestors, nothing else
  const onPath = new Set();
  for (let id = r.best; id !== null; id = r.nodes[id].parent) if (id !== 0) onPath.add(id);
  assert.deepEqual(r.drawn.filter((n) => n.best).map((n) => n.id).sort((a, b) => a - b), [...onPath].sort((a, b) => a - b));
  assert.equal(r.bestEdges, onPath.size);
  assert.equal(onPath.size, r.bestDepth);
  // pruned nodes are faded; some were pruned
  const pruned = r.drawn.filter((n) => n.pruned);
  assert.ok(pruned.length > 0);
  for (const n of pruned) assert.ok(+n.opacity < 0.5, `node ${n.id} opacity ${n.opacity}`);
  assert.deepEqual(pruned.map((n) => n.id).sort(), r.nodes.filter((n) => n.pruned).map((n) => n.id).sort());
  // colours follow the scores: more than one colour
  assert.ok(new Set(r.drawn.filter((n) => n.id !== 0).map((n) => n.fill)).size > 1);
  assert.match(r.text, /\bpark\b/i, 'the best path has the word');
  assert.match(r.status, /the best path matches/);
  assert.ok(r.shown.endsWith(r.text));
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.locator('section.tree').screenshot({ path: path.join(ARTIFACTS, 'demo-tree-search.png') });
});

test('MCTS draws its rollouts; Stop ends a long search and the model still generates', async () => {
  await setTree({ strategy: 'mcts', expand: 3, depth: 3, scorer: 'mean-logprob' });
  await page.click('#tree-run');
  await waitState(['done', 'error', 'stopped']);
  const rollouts = await page.evaluate(() => ({ drawn: document.querySelectorAll('#tree-svg rect.node').length, nodes: window.wasmlmDemo.state.tree.nodes.filter((n) => n.rollout).length }));
  assert.ok(rollouts.nodes > 0);
  assert.equal(rollouts.drawn, rollouts.nodes);
  await setTree({ step: 'never a step', expand: 8, keep: 4, depth: 8, scorer: 'mean-logprob' });
  await page.fill('#max-tokens', '2000');
  // the search takes under a second here: the page presses Stop itself once the first nodes are drawn
  await pressWhen(page, '#tree-stop', () => document.body.dataset.state === 'tree' && document.querySelectorAll('#tree-svg rect.node').length > 1);
  await page.click('#tree-run');
  await waitState(['done', 'error', 'stopped']);
  assert.equal(await page.evaluate(() => window.pressedEnabled), true);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'stopped');
  await page.fill('#max-tokens', '20');
  await page.fill('#temperature', '0');
  await page.click('#generate');
  await waitState(['done', 'error', 'stopped']);
  assert.equal(await page.evaluate(() => window.wasmlmDemo.state.lastResult.tokens.length), 20);
});

test('the spend/success plot of the built-in task draws a point per setting', async () => {
  await page.click('#spend-panel summary');
  await page.fill('#spend-tasks', '2');
  await page.click('#spend-run');
  await waitState(['done', 'error', 'stopped'], 240000);
  const r = await page.evaluate(() => ({
    points: window.wasmlmDemo.state.spend,
    circles: [...document.querySelectorAll('#spend-plot circle')].map((c) => c.dataset.method),
  }));
  assert.equal(r.circles.length, r.points.length);
  assert.deepEqual([...new Set(r.points.map((p) => p.method))], ['greedy', 'best-of-N', 'adaptive best-of-N', 'tree search', 'deliberate']);
  for (const p of r.points) { assert.equal(p.tasks, 2); assert.ok(p.tokens > 0); assert.ok(p.success >= 0 && p.success <= 1); }
  await page.locator('#spend-panel').screenshot({ path: path.join(ARTIFACTS, 'demo-spend-success.png') });
});

test('no page errors', () => {
  assert.deepEqual(errors, []);
});
