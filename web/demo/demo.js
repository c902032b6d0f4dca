// wasmlm demo page. The engine runs in a Web Worker started by loadModel()
// (web/index.js -> web/worker/worker.js, plus compute workers when threads > 1):
// this file only reads controls and draws. Everything the page does with the
// model goes through the public API, so it doubles as a usage example.
import { OPTIONS } from '../options.js';
import { loadModel, registryEntries, listCachedModels, deleteCachedModel, DEFAULT_SAMPLING, isHubId, parseHubId } from '../index.js';
import { parseSplitName, sortSplitFiles } from '../split.js';
import { setupTreePanel } from './tree-panel.js';
import { setupChatPanel } from './chat-panel.js';

const $ = (id) => document.getElementById(id);
const el = {
  threads: $('threads'), simd: $('simd'), isolated: $('isolated'), offline: $('offline'),
  modelSelect: $('model-select'), loadBtn: $('load-btn'), fileInput: $('file-input'),
  urlInput: $('url-input'), urlBtn: $('url-btn'), progress: $('progress'), progressText: $('progress-text'),
  loadCancel: $('load-cancel'), modelInfo: $('model-info'),
  cacheList: $('cache-list'), cacheTotal: $('cache-total'), cacheClear: $('cache-clear'),
  form: $('gen-form'), prompt: $('prompt'), structured: $('structured'), schema: $('schema'), schemaWrap: $('schema-wrap'), generate: $('generate'), stop: $('stop'), spec: $('spec'),
  output: $('output'), stats: $('stats'), chart: $('chart'), chartDesc: $('chart-desc'),
  bonN: $('bon-n'), bonScorer: $('bon-scorer'), bonRun: $('bon-run'), bonStop: $('bon-stop'),
  bonStatus: $('bon-status'), bonGrid: $('bon-grid'), drop: $('drop-overlay'),
  embedTexts: $('embed-texts'), embedPooling: $('embed-pooling'), embedRun: $('embed-run'),
  embedStatus: $('embed-status'), embedMatrix: $('embed-matrix'),
};
// [control id, digits shown, option]: the controls start at the API's defaults (web/options.js);
// a control without min/max in the page takes the option's range from there
const SLIDERS = [
  ['temperature', 2, 'temperature'], ['top-k', 0, 'topK'], ['top-p', 2, 'topP'], ['min-p', 2, 'minP'], ['repeat-penalty', 2, 'repeatPenalty'],
  ['presence-penalty', 2, 'presencePenalty'], ['frequency-penalty', 2, 'frequencyPenalty'], ['typical-p', 2, 'typicalP'],
];
for (const [id, , option] of SLIDERS) {
  const input = $(id), o = OPTIONS[option];
  if (!input.hasAttribute('min')) input.min = String(o.minExclusive ? o.min + +input.step : o.min);
  if (!input.hasAttribute('max')) input.max = String(o.max);
  input.value = String(DEFAULT_SAMPLING[option]);
}
/** The sliders' values by option name. */
const sliderValues = () => Object.fromEntries(SLIDERS.map(([id, , option]) => [option, +$(id).value]));
$('seed').value = String(DEFAULT_SAMPLING.seed);

const state = {
  model: null,          // the loaded Model
  modelLabel: '',
  draft: null,          // {model, of} quantized draft copy for speculative decoding
  busy: null,           // 'load' | 'generate' | 'chat' | 'bestofn' | 'tree' | 'spend' | 'embed' | null
  abort: null,          // AbortController of the running job
  promptText: '',       // text of the last generation: prompt + output
  outputText: '',
  plainRate: null,      // decode tokens/s of the last non-speculative run (speedup baseline)
  chartSeq: 0,
  lastDistribution: null,
  lastResult: null,
  bestOfN: null,
  embedding: null,      // the last comparison: {texts, matrix}
  structured: null,     // the last structured output: {value} (parsed JSON)
};
window.wasmlmDemo = { state };   // for the browser tests and the curious

const setBodyState = (s) => { document.body.dataset.state = s; };
const fmtBytes = (n) => n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e3).toFixed(0)} kB`;

function settings() {
  return {
    ...sliderValues(),
    seed: Math.max(0, Math.floor(+$('seed').value || 0)) >>> 0,
    maxTokens: Math.max(1, Math.floor(+$('max-tokens').value || 1)),
    ignoreEos: $('ignore-eos').checked,
  };
}

/** An embedding-only model (bert, nomic-bert: non-causal, no output layer) has no next token. */
const embeddingOnly = () => !!state.model && state.model.info.embedding?.causal === false;

function updateButtons() {
  const ready = !!state.model && !state.busy;
  el.embedRun.disabled = !ready;
  el.generate.disabled = !ready || embeddingOnly();
  el.stop.disabled = state.busy !== 'generate';
  el.bonStop.disabled = state.busy !== 'bestofn';
  el.bonRun.disabled = !ready || embeddingOnly();
  el.loadBtn.disabled = el.urlBtn.disabled = !!state.busy && state.busy !== 'load';
  el.loadCancel.hidden = state.busy !== 'load';
  treePanelUpdate();
  chatPanel?.update();
}
// the tree-search panel (./tree-panel.js) and the chat panel (./chat-panel.js) set their own buttons from the same state
let treePanelUpdate = () => {};
let chatPanel = null;

function showError(where, e) {
  const msg = e && e.message ? e.message : String(e);
  where.textContent = msg;
  where.classList.add('err');
  console.error(e);
}

// ---- environment badges -----------------------------------------------------

function showEnv() {
  el.isolated.textContent = globalThis.crossOriginIsolated ? 'yes' : 'no';
  el.offline.textContent = 'serviceWorker' in navigator ? (navigator.serviceWorker.controller ? 'ready' : 'after reload') : 'unsupported';
  if (state.model) {
    el.threads.textContent = String(state.model.threads);
    el.simd.textContent = state.model.simd === 'relaxed' ? 'relaxed SIMD' : state.model.simd === 'simd128' ? 'SIMD128' : state.model.simd;
  }
}

// ---- model loading -----------------------------------------------------------

let localModels = [];

async function fillModelList() {
  el.modelSelect.textContent = '';
  try {
    const r = await fetch('/local-models/index.json');
    if (r.ok) localModels = await r.json();
  } catch { localModels = []; }
  for (const m of localModels) {
    const o = new Option(`${m.name} (local, ${fmtBytes(m.size)})`, `local:${m.file}`);
    el.modelSelect.add(o);
  }
  let reg = {};
  try { reg = await registryEntries(); } catch (e) { console.warn('registry:', e.message); }
  for (const [name, e] of Object.entries(reg)) {
    el.modelSelect.add(new Option(`${name} (registry${e.size ? ', ' + fmtBytes(e.size) : ''})`, `registry:${name}`));
  }
}

function sourceOfSelection() {
  const v = el.modelSelect.value;
  if (v.startsWith('local:')) return { source: `/local-models/${encodeURIComponent(v.slice(6))}`, label: v.slice(6).replace(/\.gguf$/, '') };
  if (v.startsWith('registry:')) return { source: v.slice(9), label: v.slice(9) };
  return null;
}

async function load(source, label) {
  if (state.abort && state.busy === 'load') state.abort.abort();
  const ac = new AbortController();
  state.abort = ac;
  state.busy = 'load';
  setBodyState('loading');
  updateButtons();
  el.progressText.classList.remove('err');
  el.progress.removeAttribute('value');  // indeterminate until sizes are known
  el.progressText.textContent = `Loading ${label}…`;
  const t0 = performance.now();
  try {
    // the working model stays until this one is ready: a failed load leaves it usable
    const model = await loadModel(source, {
      signal: ac.signal,
      contextLength: 1024,
      onProgress: ({ loaded, total }) => {
        if (total) { el.progress.max = total; el.progress.value = loaded; }
        el.progressText.textContent = `Loading ${label}: ${fmtBytes(loaded)}${total ? ' of ' + fmtBytes(total) : ''}`;
      },
    });
    if (ac.signal.aborted) { await model.dispose(); return; }   // a newer load took over
    const old = state.model, oldDraft = state.draft;
    state.model = model; state.draft = null;
    await old?.dispose(); await oldDraft?.model.dispose();
    state.modelLabel = label;
    el.progress.max = 1; el.progress.value = 1;
    const s = ((performance.now() - t0) / 1000).toFixed(2);
    el.progressText.textContent = `${label} loaded in ${s} s${model.info.fromCache ? ' (from the browser cache)' : ''}`;
    const hp = model.info.hparams || {};
    const name = model.info.name && model.info.name !== model.info.architecture ? model.info.name : label;
    el.modelInfo.textContent = `${name} · ${model.info.architecture} · ${fmtBytes(model.info.fileSize)}` +
      (model.info.paramCount ? ` · ${(model.info.paramCount / 1e6).toFixed(2)}M params` : '') +
      (hp.nLayer ? ` · ${hp.nLayer} layers` : '') + ` · context ${model.info.context?.nCtx ?? model.info.context?.contextLength ?? '?'}` +
      (embeddingOnly() ? ' · an embedding model: see Embeddings below' : '');
    el.modelInfo.classList.remove('err');
    await chatPanel.modelLoaded();   // the model's saved conversation, before anything else uses its context
    setBodyState('ready');
    showEnv();
    refreshCache();
    scheduleChart();
  } catch (e) {
    if (state.abort !== ac) return;   // a newer load took over and shows its own progress
    el.progress.max = 1; el.progress.value = 0;
    if (e.name === 'AbortError') { el.progressText.textContent = 'Loading cancelled'; setBodyState(state.model ? 'ready' : 'idle'); }
    else { showError(el.progressText, new Error(`Could not load ${label}: ${e.message}`)); setBodyState('error'); }
  } finally {
    if (state.abort === ac) { state.abort = null; state.busy = null; }
    updateButtons();
  }
}

el.loadBtn.addEventListener('click', () => { const s = sourceOfSelection(); if (s) load(s.source, s.label); });
el.urlBtn.addEventListener('click', () => {
  const u = el.urlInput.value.trim();
  if (!u) { el.urlInput.focus(); return; }
  if (isHubId(u)) { // hf:OWNER/REPO[:QUANT | /PATH.gguf]: loadModel resolves it on the hub
    let id;
    try { id = parseHubId(u); } catch (e) { showError(el.progressText, e); return; }
    load(u, `${id.repo}${id.quant ? ':' + id.quant : ''}${id.path ? '/' + id.path : ''}`);
    return;
  }
  let url;
  try { url = new URL(u, location.href); } catch { showError(el.progressText, new Error(`not a URL: ${u}`)); return; }
  load(url.href, decodeURIComponent(url.pathname.split('/').pop() || url.host).replace(/\.gguf$/i, ''));
});
el.urlInput.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); el.urlBtn.click(); } });
/** Picked or dropped files: one .gguf, or every part of a split GGUF (NAME-00001-of-0000N.gguf ...), passed in part order. */
function loadFiles(list) {
  const files = [...(list || [])];
  if (!files.length) return;
  const bad = files.find((f) => !/\.gguf$/i.test(f.name));
  if (bad) { showError(el.progressText, new Error(`${bad.name} is not a .gguf file`)); return; }
  if (files.length === 1) { load(files[0], files[0].name.replace(/\.gguf$/i, '')); return; }
  const split = parseSplitName(files[0].name);
  load(sortSplitFiles(files), split ? `${split.prefix} (${files.length} parts)` : `${files.length} files`);
}
el.fileInput.addEventListener('change', () => loadFiles(el.fileInput.files));
el.loadCancel.addEventListener('click', () => { if (state.busy === 'load') state.abort?.abort(); });

// drag and drop anywhere on the page
let dragDepth = 0;
addEventListener('dragenter', (e) => { if ([...(e.dataTransfer?.types || [])].includes('Files')) { dragDepth++; el.drop.hidden = false; } });
addEventListener('dragleave', () => { dragDepth = Math.max(0, dragDepth - 1); if (!dragDepth) el.drop.hidden = true; });
addEventListener('dragover', (e) => { e.preventDefault(); });
addEventListener('drop', (e) => {
  e.preventDefault();
  dragDepth = 0; el.drop.hidden = true;
  loadFiles(e.dataTransfer?.files);
});

// ---- cache manager ----------------------------------------------------------------

async function refreshCache() {
  let list = [];
  try { list = await listCachedModels(); } catch (e) { console.warn('cache:', e.message); }
  el.cacheList.textContent = '';
  let total = 0;
  for (const m of list) {
    total += m.size;
    const li = document.createElement('li');
    li.dataset.key = m.key;
    const span = document.createElement('span');
    span.textContent = `${m.name} · ${fmtBytes(m.size)} · ${new URL(m.key).host}`;
    span.title = m.key;
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = 'Delete';
    b.setAttribute('aria-label', `Delete cached model ${m.name}`);
    b.addEventListener('click', async () => { await deleteCachedModel(m.key); refreshCache(); });
    li.append(span, b);
    el.cacheList.append(li);
  }
  if (!list.length) {
    const li = document.createElement('li');
    li.textContent = 'No cached models yet: a model loaded by URL or from the registry is kept here.';
    el.cacheList.append(li);
  }
  el.cacheTotal.textContent = `(${list.length}, ${fmtBytes(total)})`;
  el.cacheClear.disabled = !list.length;
}
el.cacheClear.addEventListener('click', async () => {
  for (const m of await listCachedModels()) await deleteCachedModel(m.key);
  refreshCache();
});

// ---- generation -------------------------------------------------------------------

function setOutput(prompt, gen) {
  el.output.textContent = '';
  const p = document.createElement('span'); p.className = 'prompt'; p.textContent = prompt;
  const g = document.createElement('span'); g.className = 'gen'; g.textContent = gen;
  el.output.append(p, g);
  return g;
}

async function draftOption() {
  const mode = el.spec.value;
  if (mode === 'off') return {};
  if (mode === 'lookup') return { draft: 'lookup', draftTokens: 4 };
  if (!state.draft || state.draft.of !== state.model) {
    el.stats.textContent = 'Making a Q8_0 draft copy of the model…';
    const q = await state.model.quantize('q8_0');
    state.draft = { model: await loadModel(q.bytes, { threads: 1, contextLength: 1024 }), of: state.model };
  }
  return { draft: state.draft.model, draftTokens: 4 };
}

/**
 * The structured-output options when the mode is on: {jsonSchema} from the
 * editor ({json: true}, any JSON value, when it is empty), else {}. Text
 * that is not JSON is an error here; a schema keyword the converter does
 * not support is a BAD_SCHEMA from generate(), naming the keyword and where.
 */
function structuredOption() {
  if (!el.structured.checked) return {};
  const text = el.schema.value.trim();
  if (!text) return { json: true };
  try {
    return { jsonSchema: JSON.parse(text) };
  } catch (e) {
    throw new Error(`the JSON Schema is not JSON: ${e.message}`);
  }
}
const showSchema = () => {
  el.schemaWrap.hidden = !el.structured.checked;
  el.schemaWrap.parentElement.classList.toggle('with-schema', el.structured.checked);
};
el.structured.addEventListener('change', showSchema);
showSchema();

async function generate() {
  if (!state.model || state.busy) return;
  const ac = new AbortController();
  state.abort = ac; state.busy = 'generate';
  setBodyState('generating');
  updateButtons();
  const prompt = el.prompt.value;
  const opts = settings();
  const genSpan = setOutput(prompt, '');
  delete el.output.dataset.json;
  state.structured = null;
  el.stats.setAttribute('aria-live', 'off');   // no announcement per token; the final line is announced
  el.stats.classList.remove('err');
  el.stats.textContent = 'Prefilling…';
  let text = '', n = 0, tFirst = 0, lastStats = 0, pending = '', frame = 0;
  // Tokens can arrive faster than frames: the DOM is touched once per
  // animation frame (new text appended as one node, stats every 100 ms), so
  // the main thread's work per token is a string append.
  const paint = () => {
    frame = 0;
    if (pending) { genSpan.append(pending); pending = ''; }
    const now = performance.now();
    if (now - lastStats > 100 || n === 1) {
      lastStats = now;
      const rate = n > 1 ? (n - 1) / ((now - tFirst) / 1000) : 0;
      el.stats.innerHTML = `<strong>${n}</strong> tokens · <strong data-live-rate>${rate.toFixed(1)}</strong> tokens/s`;
      el.output.scrollTop = el.output.scrollHeight;
    }
  };
  const t0 = performance.now();
  let extra = {};
  try {
    const structured = structuredOption();
    extra = await draftOption();
    const it = state.model.generate(prompt, { ...opts, ...structured, ...extra, signal: ac.signal });
    let result;
    for (;;) {
      const r = await it.next();
      if (r.done) { result = r.value; break; }
      n++;
      if (n === 1) tFirst = performance.now();
      text += r.value.text;
      pending += r.value.text;
      if (!frame) frame = requestAnimationFrame(paint);
    }
    if (frame) { cancelAnimationFrame(frame); frame = 0; }
    genSpan.textContent = text;
    state.lastResult = result;
    let cut = '';
    if (structured.json || structured.jsonSchema) {
      // the grammar lets only JSON through: once it is complete it parses; cut short by Max tokens, it cannot
      try {
        const value = JSON.parse(text);
        state.structured = { value };
        genSpan.textContent = JSON.stringify(value, null, 2);
        genSpan.classList.add('json');
        el.output.dataset.json = 'valid';
      } catch {
        el.output.dataset.json = 'cut';
        cut = ' · <strong>the JSON was cut short by Max tokens: raise it</strong>';
      }
    }
    const st = result.stats;
    let line = `<strong>${st.generatedTokens}</strong> tokens · <strong data-rate>${st.decodeTokensPerSec.toFixed(1)}</strong> tokens/s decode · ` +
      `prompt ${st.promptTokens} tokens at ${st.prefillTokensPerSec.toFixed(0)} tokens/s · ${result.finishReason}`;
    if (st.speculative) {
      const sp = st.speculative;
      const speed = state.plainRate ? ` · speed-up ×${(st.decodeTokensPerSec / state.plainRate).toFixed(2)} vs. the last plain run` : '';
      line += ` · speculative: acceptance <strong data-acceptance>${(sp.acceptanceRate * 100).toFixed(0)} %</strong>, ${sp.tokensPerPass.toFixed(2)} tokens per pass${speed}`;
    } else {
      state.plainRate = st.decodeTokensPerSec;
    }
    el.stats.innerHTML = line + cut;
    setBodyState('done');
  } catch (e) {
    if (frame) { cancelAnimationFrame(frame); frame = 0; }
    genSpan.textContent = text;
    if (e.name === 'AbortError') {
      const s = ((performance.now() - t0) / 1000).toFixed(2);
      el.stats.innerHTML = `Stopped after <strong>${n}</strong> tokens (${s} s)`;
      setBodyState('stopped');
    } else {
      showError(el.stats, e);
      setBodyState('error');
    }
  } finally {
    el.stats.setAttribute('aria-live', 'polite');
    state.outputText = text;
    state.promptText = prompt + text;
    state.abort = null; state.busy = null;
    updateButtons();
    scheduleChart();
  }
}

el.form.addEventListener('submit', (e) => { e.preventDefault(); generate(); });
for (const t of [el.prompt, el.schema]) {
  t.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); generate(); }
  });
}
el.stop.addEventListener('click', () => { if (state.busy === 'generate') state.abort?.abort(); });
addEventListener('keydown', (e) => { if (e.key === 'Escape' && state.busy && state.busy !== 'load') state.abort?.abort(); });
el.prompt.addEventListener('input', () => { state.promptText = ''; scheduleChart(); });

// ---- next-token distribution chart ----------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  if (text != null) n.textContent = text;
  return n;
}
const showToken = (t) => JSON.stringify(t).slice(1, -1).replace(/ /g, '␣') || '∅';

function drawChart(dist, temperature) {
  const W = Math.round(Math.max(280, Math.min(640, el.chart.clientWidth || 400))), rowH = 24, top = 6, labelW = 96, valueW = 56;
  const rows = dist.slice(0, 10);
  const H = top + Math.max(rows.length, 1) * rowH + 8;
  el.chart.setAttribute('viewBox', `0 0 ${W} ${H}`);
  el.chart.textContent = '';
  const maxP = Math.max(...rows.map((d) => d.prob), 1e-9);
  const barW = W - labelW - valueW - 8;
  el.chart.append(svg('line', { class: 'axis', x1: labelW, x2: labelW, y1: top - 2, y2: H - 6 }));
  rows.forEach((d, i) => {
    const y = top + i * rowH;
    const w = Math.max(1, (d.prob / maxP) * barW);
    el.chart.append(svg('text', { x: labelW - 6, y: y + 15, 'text-anchor': 'end' }, showToken(d.text).slice(0, 11)));
    el.chart.append(svg('rect', { class: 'bar' + (i === 0 ? ' top1' : ''), x: labelW, y: y + 3, width: w.toFixed(1), height: rowH - 6, rx: 2, 'data-prob': d.prob.toFixed(6) }));
    el.chart.append(svg('text', { class: 'prob', x: labelW + w + 5, y: y + 15 }, `${(d.prob * 100).toFixed(1)}%`));
  });
  if (!rows.length) el.chart.append(svg('text', { x: 10, y: 20 }, 'no candidates'));
  el.chart.dataset.temperature = String(temperature);
  el.chart.dataset.signature = rows.map((d) => `${d.token}:${d.prob.toFixed(4)}`).join(',');
  el.chartDesc.textContent = `At temperature ${temperature}: ` + rows.map((d) => `${showToken(d.text)} ${(d.prob * 100).toFixed(1)} percent`).join(', ');
}

let chartTimer = 0, chartRunning = false, chartAgain = false;
function scheduleChart() {
  clearTimeout(chartTimer);
  chartTimer = setTimeout(updateChart, 40);
}
async function updateChart() {
  if (!state.model || state.busy === 'load') return;
  if (embeddingOnly()) {   // no next token to chart
    el.chart.textContent = '';
    state.lastDistribution = null;
    el.chartDesc.textContent = 'An embedding model has no next-token distribution.';
    return;
  }
  if (chartRunning) { chartAgain = true; return; }   // one request in flight; the latest settings win
  chartRunning = true;
  try {
    do {
      chartAgain = false;
      const o = settings();
      const text = state.promptText || el.prompt.value;
      const dist = await state.model.nextTokenDistribution(text, { topN: 10, ...sliderValues() });
      state.lastDistribution = dist;
      state.chartSeq++;
      drawChart(dist, o.temperature);
    } while (chartAgain);
  } catch (e) {
    if (!state.model || state.model.disposed) return;
    el.chartDesc.textContent = 'chart: ' + e.message;
    console.warn('chart:', e.message);
  } finally {
    chartRunning = false;
  }
}

// redraw (no engine call) when the chart's width changes, so labels stay readable
let lastWidth = 0;
new ResizeObserver(() => {
  const w = el.chart.clientWidth;
  if (state.lastDistribution && Math.abs(w - lastWidth) > 8) { lastWidth = w; drawChart(state.lastDistribution, +el.chart.dataset.temperature); }
}).observe(el.chart);

for (const [id, digits] of SLIDERS) {
  const input = $(id), out = $(id + '-out');
  const show = () => { out.textContent = (+input.value).toFixed(digits); };
  input.addEventListener('input', () => { show(); scheduleChart(); });
  show();
}

// ---- best-of-N ---------------------------------------------------------------------

function candidateCard(i) {
  let li = el.bonGrid.querySelector(`[data-index="${i}"]`);
  if (li) return li;
  li = document.createElement('li');
  li.className = 'cand';
  li.dataset.index = String(i);
  li.innerHTML = '<header><span class="name"></span><span class="score"></span></header><div class="text"></div>';
  li.querySelector('.name').textContent = `#${i + 1}`;
  el.bonGrid.append(li);
  return li;
}

async function runBestOfN() {
  if (!state.model || state.busy) return;
  const ac = new AbortController();
  state.abort = ac; state.busy = 'bestofn';
  setBodyState('bestofn');
  updateButtons();
  const n = Math.max(2, Math.min(8, Math.floor(+el.bonN.value || 4)));
  el.bonGrid.textContent = '';
  for (let i = 0; i < n; i++) candidateCard(i);
  el.bonStatus.classList.remove('err');
  el.bonStatus.textContent = `Sampling ${n} candidates…`;
  const o = settings();
  try {
    const r = await state.model.bestOfN(el.prompt.value, {
      ...o, n, scorer: el.bonScorer.value, signal: ac.signal,
      onCandidate: (c) => {
        const li = candidateCard(c.index);
        li.querySelector('.text').textContent = c.text;
        li.querySelector('.score').textContent = c.done && c.score != null ? `score ${c.score.toFixed(3)}` : `${c.tokens} tokens`;
      },
    });
    state.bestOfN = r;
    for (const c of r.candidates) {
      const li = candidateCard(c.index);
      li.querySelector('.text').textContent = c.text;
      li.querySelector('.score').textContent = `score ${c.score.toFixed(3)}`;
      li.dataset.score = String(c.score);
    }
    const best = candidateCard(r.best.index);
    best.classList.add('best');
    best.querySelector('.name').innerHTML = `#${r.best.index + 1} <span class="badge">★ best</span>`;
    best.setAttribute('aria-label', `Candidate ${r.best.index + 1}, the best`);
    el.bonStatus.textContent = `${r.candidates.length} candidates, ${r.stats.totalTokens} tokens in ${(r.stats.wallMs / 1000).toFixed(2)} s ` +
      `(${r.stats.tokensPerSec.toFixed(1)} tokens/s); best: #${r.best.index + 1}`;
    setBodyState('done');
  } catch (e) {
    if (e.name === 'AbortError') { el.bonStatus.textContent = 'Best-of-N stopped'; setBodyState('stopped'); }
    else { showError(el.bonStatus, e); setBodyState('error'); }
  } finally {
    state.abort = null; state.busy = null;
    updateButtons();
  }
}
el.bonRun.addEventListener('click', runBestOfN);
el.bonStop.addEventListener('click', () => { if (state.busy === 'bestofn') state.abort?.abort(); });

treePanelUpdate = setupTreePanel({ state, settings, updateButtons, setBodyState, showError, promptText: () => el.prompt.value });
chatPanel = setupChatPanel({ state, settings, updateButtons, setBodyState, showError });

// ---- embeddings ---------------------------------------------------------------------

/** The cosine similarity matrix of `texts` as a table: a row and a column
 * per sentence; a cell's shade goes from the matrix's lowest value to 1. */
function drawMatrix(texts, matrix) {
  const t = el.embedMatrix;
  const lo = Math.min(...matrix.flat()), span = Math.max(1e-6, 1 - lo);
  t.textContent = '';
  const head = t.createTHead().insertRow();
  head.append(Object.assign(document.createElement('th'), { scope: 'col', textContent: 'sentence' }));
  texts.forEach((_, j) => head.append(Object.assign(document.createElement('th'), { scope: 'col', textContent: `#${j + 1}` })));
  const body = t.createTBody();
  texts.forEach((text, i) => {
    const row = body.insertRow();
    const th = Object.assign(document.createElement('th'), { scope: 'row', className: 'sentence', title: text, textContent: `#${i + 1} ${text}` });
    row.append(th);
    matrix[i].forEach((sim, j) => {
      const td = row.insertCell();
      td.textContent = sim.toFixed(3);
      td.dataset.sim = String(sim);
      td.style.setProperty('--sim', String(Math.max(0, Math.min(1, (sim - lo) / span))));
      td.setAttribute('aria-label', `#${i + 1} and #${j + 1}: ${sim.toFixed(3)}`);
    });
  });
}

async function runEmbeddings() {
  if (!state.model || state.busy) return;
  const texts = el.embedTexts.value.split('\n').map((l) => l.trim()).filter(Boolean);
  if (!texts.length) { el.embedTexts.focus(); return; }
  state.busy = 'embed';
  setBodyState('embedding');
  updateButtons();
  el.embedStatus.classList.remove('err');
  el.embedStatus.textContent = `Embedding ${texts.length} sentences…`;
  const t0 = performance.now();
  try {
    // normalized vectors: the cosine of two is their dot product
    const vectors = await state.model.embed(texts, { pooling: el.embedPooling.value });
    const ms = performance.now() - t0;
    const matrix = vectors.map((a) => vectors.map((b) => { let s = 0; for (let k = 0; k < a.length; k++) s += a[k] * b[k]; return s; }));
    state.embedding = { texts, matrix };
    drawMatrix(texts, matrix);
    const e = state.model.info.embedding;
    let best = null;
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) if (!best || matrix[i][j] > best.sim) best = { i, j, sim: matrix[i][j] };
    el.embedStatus.textContent = `${texts.length} vectors of ${e.length} numbers (pooling ${el.embedPooling.value === 'model' ? e.pooling : el.embedPooling.value}) in ${ms.toFixed(0)} ms` +
      (best ? `; most similar: #${best.i + 1} and #${best.j + 1} (${best.sim.toFixed(3)})` : '');
    setBodyState('done');
  } catch (e) {
    showError(el.embedStatus, e);
    setBodyState('error');
  } finally {
    state.busy = null;
    updateButtons();
  }
}
el.embedRun.addEventListener('click', runEmbeddings);
el.embedTexts.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); runEmbeddings(); }
});

// ---- start-up --------------------------------------------------------------------

async function registerServiceWorker() {
  if (!('serviceWorker' in navigator)) return;
  try {
    await navigator.serviceWorker.register('./sw.js', { scope: '/' });
    navigator.serviceWorker.addEventListener('controllerchange', showEnv);
  } catch (e) {
    console.warn('service worker not registered (no offline use):', e.message);
  }
}

async function start() {
  showEnv();
  updateButtons();
  const sw = registerServiceWorker();
  await fillModelList();
  refreshCache();
  const params = new URLSearchParams(location.search);
  if (params.get('autoload') !== '0' && el.modelSelect.options.length) {
    const s = sourceOfSelection();
    await load(s.source, s.label);
  } else {
    setBodyState('idle');
  }
  await sw;
  showEnv();
}
start();
