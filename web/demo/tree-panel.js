// The demo's tree-search panel: model.treeSearch with the page's sampling
// settings, the tree drawn as it grows (onNode): a column per depth, nodes
// coloured by score (low red, high green), the best path drawn thick once
// the search ends, pruned branches faded, MCTS rollouts dashed. Below it,
// the spend/success plot of the built-in task (./mentions-task.js).
import { spendSuccess, spendSuccessSvg, mentionTasks, mentionMethods } from './mentions-task.js';

const SVG = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);

function svg(tag, attrs, text) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  if (text != null) n.textContent = text;
  return n;
}

/** The scorer the controls describe: mean log-prob, or a word / regex found in the path (mean log-prob breaks ties). */
export function scorerOf(kind, pattern) {
  const meanLp = (n) => (n.pathTokens ? n.pathLogprob / n.pathTokens : -Infinity);
  if (kind === 'mean-logprob') return { score: 'mean-logprob', test: null };
  const re = kind === 'word'
    ? new RegExp(`\\b${pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`, 'i')
    : new RegExp(pattern, 'i');
  return { score: (n) => (re.test(n.pathText) ? 1 : 0) + meanLp(n) / 100, test: (t) => re.test(t) };
}

/** Draws `nodes` (treeSearch nodes, by id) into the svg element; `best`: the node whose path is highlighted. */
export function drawTree(el, nodes, best) {
  const list = nodes.filter(Boolean);
  const onBest = new Set();
  for (let n = best; n; n = n.parent === null ? null : nodes[n.parent]) onBest.add(n.id);
  // rows: a depth's nodes in id order; rollouts sit one column past their start node
  const col = (n) => (n.rollout ? nodes[n.parent].depth + 1 : n.depth);
  const rows = new Map();
  const place = new Map();
  for (const n of list) {
    const c = col(n);
    const r = rows.get(c) || 0;
    rows.set(c, r + 1);
    place.set(n.id, [c, r]);
  }
  const maxRows = Math.max(1, ...rows.values()), cols = Math.max(1, ...rows.keys()) + 1;
  const colW = 90, rowH = 22, pad = 16;
  const W = Math.max(600, pad * 2 + (cols - 1) * colW + 40), H = pad * 2 + (maxRows - 1) * rowH + 10;
  el.setAttribute('viewBox', `0 0 ${W} ${H}`);
  el.textContent = '';
  const xy = (id) => { const [c, r] = place.get(id); return [pad + 10 + c * colW, pad + r * rowH]; };
  const scored = list.filter((n) => Number.isFinite(n.score));
  const lo = Math.min(...scored.map((n) => n.score)), hi = Math.max(...scored.map((n) => n.score));
  const color = (n) => {
    if (n.parent === null) return 'var(--muted)';
    if (!Number.isFinite(n.score)) return 'hsl(0 0% 60%)';
    const t = hi > lo ? (n.score - lo) / (hi - lo) : 0.5;
    return `hsl(${Math.round(t * 120)} 70% 45%)`;
  };
  for (const n of list) {
    if (n.parent === null) continue;
    const [x1, y1] = xy(n.parent), [x2, y2] = xy(n.id);
    const cls = ['edge', onBest.has(n.id) ? 'best' : '', n.rollout ? 'rollout' : '', n.pruned ? 'pruned' : ''].filter(Boolean).join(' ');
    el.append(svg('path', { class: cls, d: `M${x1},${y1} C${(x1 + x2) / 2},${y1} ${(x1 + x2) / 2},${y2} ${x2},${y2}` }));
  }
  for (const n of list) {
    const [x, y] = xy(n.id);
    const cls = ['node', onBest.has(n.id) && n.parent !== null ? 'best' : '', n.final ? 'final' : '', n.pruned ? 'pruned' : ''].filter(Boolean).join(' ');
    const attrs = { class: cls, fill: color(n), 'data-id': n.id, 'data-score': String(n.score), 'data-depth': n.depth };
    const shape = n.rollout ? svg('rect', { ...attrs, x: x - 5, y: y - 5, width: 10, height: 10 }) : svg('circle', { ...attrs, cx: x, cy: y, r: n.parent === null ? 7 : 6 });
    shape.append(svg('title', {}, n.parent === null ? 'prompt' :
      `#${n.id} ${n.rollout ? 'rollout ' : ''}score ${Number.isFinite(n.score) ? n.score.toFixed(3) : n.score}${n.final ? ` (${n.finishReason})` : ''}${n.pruned ? ', pruned' : ''}: ${n.text}`));
    el.append(shape);
  }
  for (let c = 1; c < cols; c++) el.append(svg('text', { x: pad + 10 + c * colW, y: H - 4, 'text-anchor': 'middle' }, `step ${c}`));
}

/**
 * Wires the panel to the page: `page` = {state, settings(), updateButtons(),
 * setBodyState(s), showError(el, e)}. Returns update(), which sets the
 * panel's buttons from the page's state.
 */
export function setupTreePanel(page) {
  const el = {
    run: $('tree-run'), stop: $('tree-stop'), status: $('tree-status'), svg: $('tree-svg'), desc: $('tree-desc'), best: $('tree-best'),
    step: $('tree-step'), expand: $('tree-expand'), keep: $('tree-keep'), depth: $('tree-depth'), strategy: $('tree-strategy'),
    scorer: $('tree-scorer'), pattern: $('tree-pattern'), spendRun: $('spend-run'), spendTasks: $('spend-tasks'),
    spendStatus: $('spend-status'), spendPlot: $('spend-plot'),
  };
  const { state } = page;
  const int = (input, lo, hi, d) => Math.max(lo, Math.min(hi, Math.floor(+input.value || d)));

  async function run() {
    if (!state.model || state.busy) return;
    const ac = new AbortController();
    state.abort = ac; state.busy = 'tree';
    page.setBodyState('tree');
    page.updateButtons();
    el.status.classList.remove('err');
    let sc;
    try { sc = scorerOf(el.scorer.value, el.pattern.value); } catch (e) { page.showError(el.status, e); state.abort = null; state.busy = null; page.updateButtons(); page.setBodyState('error'); return; }
    const nodes = [];
    let frame = 0;
    const paint = () => { frame = 0; drawTree(el.svg, nodes, null); el.status.textContent = `${nodes.length - 1} nodes…`; };
    const o = page.settings();
    const prompt = page.promptText();
    const opts = {
      ...o, signal: ac.signal, step: el.step.value || '\n', expand: int(el.expand, 1, 8, 4), keep: int(el.keep, 1, 4, 2),
      maxSteps: int(el.depth, 1, 8, 4), maxTokensPerStep: 24, strategy: el.strategy.value, score: sc.score,
      onNode: (n) => { nodes[n.id] = n; if (!nodes[0]) nodes[0] = { id: 0, parent: null, depth: 0, text: '', score: null }; if (!frame) frame = requestAnimationFrame(paint); },
    };
    try {
      const r = await state.model.treeSearch(prompt, opts);
      if (frame) { cancelAnimationFrame(frame); frame = 0; }
      state.tree = r;
      drawTree(el.svg, r.nodes, r.best);
      el.best.textContent = '';
      const p = document.createElement('span'); p.className = 'prompt'; p.textContent = prompt;
      const g = document.createElement('span'); g.className = 'gen'; g.textContent = r.text;
      el.best.append(p, g);
      const found = sc.test ? (sc.test(r.text) ? ' · the best path matches' : ' · no path matched') : '';
      el.status.textContent = `${r.stats.nodes - 1} nodes, ${r.stats.expansions} grown, ${r.stats.tokens} tokens in ${r.stats.passes} batched passes ` +
        `(${(r.stats.wallMs / 1000).toFixed(2)} s); best score ${r.best ? r.best.score.toFixed(3) : '–'}${found}; the cache held at most ${r.stats.peakSequences} sequences, ${r.stats.peakUsedSlots} slots`;
      el.desc.textContent = `Tree of ${r.stats.nodes} nodes; the best path: ${r.text}`;
      page.setBodyState('done');
    } catch (e) {
      if (frame) { cancelAnimationFrame(frame); frame = 0; }
      if (e.name === 'AbortError') { drawTree(el.svg, nodes, null); el.status.textContent = 'Tree search stopped'; page.setBodyState('stopped'); }
      else { page.showError(el.status, e); page.setBodyState('error'); }
    } finally {
      state.abort = null; state.busy = null;
      page.updateButtons();
    }
  }

  async function runSpend() {
    if (!state.model || state.busy) return;
    const ac = new AbortController();
    state.abort = ac; state.busy = 'spend';
    page.setBodyState('spend');
    page.updateButtons();
    el.spendStatus.classList.remove('err');
    const tasks = mentionTasks(int(el.spendTasks, 1, 48, 6));
    const methods = mentionMethods({ quick: true });
    el.spendStatus.textContent = `Running ${methods.length} settings on ${tasks.length} tasks…`;
    try {
      const points = await spendSuccess(state.model, {
        tasks, methods, signal: ac.signal,
        onPoint: (pt, all) => {
          el.spendPlot.innerHTML = spendSuccessSvg(all, { title: `${tasks.length} tasks` });
          el.spendStatus.textContent = `${all.length} of ${methods.length} settings: ${pt.method} ${pt.setting} solved ${pt.solved} of ${pt.tasks} with ${pt.tokens.toFixed(0)} tokens a task`;
        },
      });
      state.spend = points;
      el.spendStatus.textContent = `Done: ${points.length} settings on ${tasks.length} tasks.`;
      page.setBodyState('done');
    } catch (e) {
      if (e.name === 'AbortError') { el.spendStatus.textContent = 'Stopped'; page.setBodyState('stopped'); }
      else { page.showError(el.spendStatus, e); page.setBodyState('error'); }
    } finally {
      state.abort = null; state.busy = null;
      page.updateButtons();
    }
  }

  el.run.addEventListener('click', run);
  el.stop.addEventListener('click', () => { if (state.busy === 'tree' || state.busy === 'spend') state.abort?.abort(); });
  el.spendRun.addEventListener('click', runSpend);
  return function update() {
    const ready = !!state.model && !state.busy;
    el.run.disabled = !ready;
    el.spendRun.disabled = !ready;
    el.stop.disabled = state.busy !== 'tree' && state.busy !== 'spend';
  };
}
