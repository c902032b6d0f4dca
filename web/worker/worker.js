// wasmlm worker: runs one Engine (one model) off the caller's thread.
// The same file serves Node `worker_threads` and browser module Web Workers.
//
// The protocol (its ops, each request's fields, results and events) is
// defined in web/protocol.js: a request that does not fit it is refused
// with an INTERNAL error, never run.
// Requests run one at a time in arrival order; 'abort' is handled at once.
// During generation the worker yields to its event loop between tokens
// (setImmediate in Node, a MessageChannel tick in browsers), so an abort
// message is seen within one token; with a SharedArrayBuffer flag it is seen
// even without yielding.
import { Engine, VOCAB_ONLY_OPS } from './engine.js';
import { startBatch, startBeam, startSpeculative, startDraft, vocabFingerprint } from './multi.js';
import { startTree } from './tree.js';
import { readModelFile } from './model-file.js';
import { WasmlmError } from '../errors.js';
import { templateErrorReply } from '../chat.js';
import { isNode, nodeImport } from '../env.js';
import { OPS, checkRequest } from '../protocol.js';

// Node built-ins come through nodeImport (web/env.js): bundlers then leave
// them alone, so a browser bundle of this worker is one self-contained file
// (Vite's default worker format, iife, allows no code splitting).

let port;            // {post(msg, transfer), on(fn)}
let engine = null;
let abortFlag = null;
const aborted = new Set();
let chain = Promise.resolve();
const live = new Set(); // ids queued or running: aborts of finished requests are ignored
let initDone;
const ready = new Promise((r) => { initDone = r; });

let yieldNow;
if (isNode) {
  yieldNow = () => new Promise((r) => setImmediate(r));
} else {
  // A MessageChannel tick is the cheapest way back to the event loop; every
  // 25 ms a timer tick is taken instead, so that no task source (the
  // caller's abort message included) can be starved by our own channel.
  const ch = new MessageChannel();
  const q = [];
  let lastTimer = Date.now();
  ch.port1.onmessage = () => { const r = q.shift(); if (r) r(); };
  yieldNow = () => new Promise((r) => {
    if (Date.now() - lastTimer >= 25) { lastTimer = Date.now(); setTimeout(r, 0); return; }
    q.push(r); ch.port2.postMessage(0);
  });
}

function post(msg, transfer) { port.post(msg, transfer); }

// An error as a plain object for the caller: name, message, code and the
// error's own primitive fields (status, statusName, option, limit, url, ...).
function errToPlain(e) {
  const plain = { name: e && e.name || 'Error', message: e && e.message || String(e), code: e && e.code };
  if (e && typeof e === 'object') {
    for (const [k, v] of Object.entries(e)) {
      if (!(k in plain) && v !== undefined && (v === null || ['string', 'number', 'boolean'].includes(typeof v))) plain[k] = v;
    }
  }
  return plain;
}

function isAborted(id) {
  return aborted.has(id) || (abortFlag !== null && Atomics.load(abortFlag, 0) === id);
}

let nodeFs = null;

// Starts one compute thread (web/worker/thread-worker.js) and resolves when it is
// inside its loop; the engine waits for all of them before any work.
async function spawnThread(msg) {
  if (isNode) {
    const { Worker } = await nodeImport('node:worker_threads');
    const w = new Worker(new URL('./thread-worker.js', import.meta.url));
    w.unref();
    await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
      w.postMessage(msg);
    });
    return w;
  }
  const w = new Worker(new URL('./thread-worker.js', import.meta.url), { type: 'module' });  // inline: bundlers follow it
  await new Promise((resolve, reject) => {
    w.onmessage = resolve;
    w.onerror = (ev) => reject(new Error('compute thread failed to start: ' + (ev.message || '')));
    w.postMessage(msg);
  });
  return w;
}

const ops = {
  async loadFile(m) {
    const fs = nodeFs || (nodeFs = await nodeImport('node:fs'));
    try {
      await readModelFile(engine, m.path, {
        fs, vocabOnly: !!m.vocabOnly,
        aborted: () => isAborted(m.id),
        progress: m.progress ? (loaded, total) => post({ id: m.id, event: 'progress', loaded, total }) : null,
      });
    } catch (e) {
      engine.unload();
      throw e;
    }
    return finishLoad(m.options);
  },
  loadBegin(m) { engine.beginLoad(m.size || 0, { declared: true, vocabOnly: !!m.vocabOnly, name: m.name }); return null; }, // a size from a header or the caller: not trusted
  loadChunk(m) {
    try {
      engine.write(m.bytes);
      return engine.loadingVocab ? engine.metaProgress() : null;   // a vocabulary-only load stops reading once the metadata is in
    } catch (e) { engine.unload(); throw e; }
  },
  loadPart(m) {
    try { engine.nextPart(m.size || 0, { declared: true }); } catch (e) { engine.unload(); throw e; }
    return null;
  },
  loadEnd(m) { return finishLoad(m.options); },
  loadCancel() { engine.unload(); return null; },
  async generate(m) {
    if (m.draft === 'lookup') return generateLookup(m);
    const g = engine.startGeneration(m.prompt, m.options || {});
    const stop = () => isAborted(m.id);
    let lastYield = Date.now();
    for (;;) {
      const r = g.next(stop);
      if (r.done) return finishGeneration(m, r);
      if (m.stream) post({ id: m.id, event: 'chunk', ...r });
      // Yield every token when only messages can deliver an abort; with the
      // shared flag, yield every ~20 ms so other traffic still flows.
      if (abortFlag === null || m.stream || Date.now() - lastYield > 20) {
        await yieldNow();
        lastYield = Date.now();
      }
    }
  },
  async bestOfN(m) {
    const b = startBatch(engine, m.prompt, m.options || {});
    const stop = () => isAborted(m.id);
    for (;;) {
      const r = b.step(stop);
      if (m.stream) for (const ev of r.events) post({ id: m.id, event: 'chunk', ...ev });
      if (r.done) {
        if (r.candidates.some((c) => c.finishReason === 'abort')) {
          const err = new Error('best-of-N aborted');
          err.name = 'AbortError';
          err.partial = { candidates: r.candidates, stats: r.stats };
          throw err;
        }
        return { candidates: r.candidates, stats: r.stats };
      }
      await yieldNow();
    }
  },
  async beamSearch(m) {
    const b = startBeam(engine, m.prompt, m.options || {});
    const stop = () => isAborted(m.id);
    for (;;) {
      const r = b.step(stop);
      if (r.done) {
        if (r.aborted) throw Object.assign(new Error('beam search aborted'), { name: 'AbortError' });
        return { beams: r.beams, stats: r.stats };
      }
      await yieldNow();
    }
  },
  specStart(m) {
    const g = startSpeculative(engine, m.prompt, m.options || {});
    sessions.set(m.session, g);
    return { committed: g.committed.slice() };
  },
  // plain: n runs up to n rounds without drafts here, each round's tokens
  // sent as 'chunk' events as they come (the reply: the last round, its
  // chunks not sent)
  async specRound(m) {
    const g = sessions.get(m.session);
    if (!g) throw new Error('no speculative session ' + m.session);
    for (let i = 1; ; i++) {
      const r = g.round(m.drafts, m.qs, () => isAborted(m.id));
      if (r.done) sessions.delete(m.session);
      if (r.done || !(m.plain > i)) return r;
      for (const c of r.chunks) post({ id: m.id, event: 'chunk', ...c });
      await yieldNow();
    }
  },
  specEnd(m) {
    const g = sessions.get(m.session);
    sessions.delete(m.session);
    if (g && !g.finished) { try { g.round([], null, () => true); } catch { /* already closed */ } }
    return null;
  },
  draftStart(m) { drafts.set(m.session, startDraft(engine, m.options || {})); return null; },
  draftPropose(m) {
    const d = drafts.get(m.session);
    if (!d) throw new Error('no draft session ' + m.session);
    const r = d.propose(m.ids, m.k);
    return { ...r, __transfer: r.qs.flatMap((q) => [q.ids.buffer, q.probs.buffer]) };
  },
  draftEnd(m) { const d = drafts.get(m.session); drafts.delete(m.session); if (d) d.close(); return null; },
  treeStart(m) {
    const t = startTree(engine, m.prompt, m.options || {});
    trees.set(m.session, t);
    return { root: t.root, plan: t.plan, contextGrown: t.stats.contextGrown };
  },
  // one call of a tree search: its nodes decode as one batch, a token a
  // step; a failure or an abort ends the session (its sequences freed)
  async treeGrow(m) {
    const t = trees.get(m.session);
    if (!t) throw new WasmlmError('BAD_STATE', `no tree search session ${m.session} (it ended)`);
    try {
      const g = t.grow(m.grow, m.free || [], () => isAborted(m.id));
      for (;;) {
        const r = g.step();
        if (r.aborted) throw Object.assign(new Error('tree search aborted'), { name: 'AbortError' });
        if (r.done) { const { done, ...rest } = r; return rest; }
        await yieldNow();
      }
    } catch (e) {
      trees.delete(m.session);
      t.close();
      throw e;
    }
  },
  treeEnd(m) {
    const t = trees.get(m.session);
    trees.delete(m.session);
    if (!t) return null;
    const stats = t.stats;
    t.close();
    return { stats };
  },
  vocab() { return vocabFingerprint(engine); },
  vocabBytes() {
    const r = engine.vocabBytes();
    return { ...r, __transfer: [r.bytes.buffer, r.offsets.buffer] };
  },
  renderChat(m) { return renderChatTemplate(m); },
  tokenize(m) { return engine.tokenize(m.text, m.addBos, m.parseSpecial); },
  detokenize(m) { return engine.detokenize(m.ids); },
  info() { return engine.info(); },
  memory() { return engine.memoryStats(); },
  saveState() {
    const bytes = engine.saveState();
    return { bytes, __transfer: [bytes.buffer] };
  },
  loadState(m) { return engine.loadState(m.bytes); },
  distribution(m) { return engine.nextTokenDistribution(m.text, m.options || {}); },
  logits(m) {
    const rows = engine.logits(m.ids, { all: !!m.all });
    return { rows, __transfer: rows.map((r) => r.buffer) };
  },
  async embed(m) {
    const it = engine.embedSteps(m.texts, m.options || {});
    for (;;) {
      const r = it.next();
      if (r.done) return { ...r.value, __transfer: r.value.vectors.map((v) => v.buffer) };
      await yieldNow();
      if (isAborted(m.id)) throw Object.assign(new Error('embed aborted'), { name: 'AbortError' });
    }
  },
  async quantize(m) {
    if (m.outPath) {
      const fs = nodeFs || (nodeFs = await nodeImport('node:fs'));
      const tmp = `${m.outPath}.tmp-${process.pid}-${Date.now()}`;
      try {
        const r = engine.quantize(m.type, (view) => fs.writeFileSync(tmp, view));
        fs.renameSync(tmp, m.outPath);
        return r;
      } catch (e) {
        try { fs.unlinkSync(tmp); } catch { /* not written */ }
        throw e;
      }
    }
    let bytes = null;
    const r = engine.quantize(m.type, (view) => { bytes = view.slice(); });
    return { ...r, bytes, __transfer: [bytes.buffer] };
  },
  dispose() {
    if (templateWorker) templateWorker.w.terminate();
    if (engine) engine.dispose();
    engine = null;
    return null;
  },
};

// every op of the protocol has its handler here, and only those
for (const name of new Set([...Object.keys(OPS), ...Object.keys(ops)])) {
  if (!Object.hasOwn(OPS, name) || !Object.hasOwn(ops, name)) throw new Error(`worker ops and web/protocol.js disagree on ${name}`);
}

const sessions = new Map();   // speculative generations (target side) by session id
const drafts = new Map();     // draft sides
const trees = new Map();      // tree searches (web/worker/tree.js) by session id

// The final record of a generation: its held-back text as a last chunk, an
// AbortError (with the partial result) when it was stopped, else the result.
function finishGeneration(m, r) {
  const { tail, done, chunks, ...result } = r;
  if (tail && m.stream) post({ id: m.id, event: 'chunk', text: tail, token: -1, logprob: 0 });
  if (result.finishReason === 'abort') {
    const err = new Error('generation aborted');
    err.name = 'AbortError';
    err.partial = result;
    throw err;
  }
  return result;
}

// Speculative decoding with drafts looked up in the context itself (no draft model).
async function generateLookup(m) {
  const g = startSpeculative(engine, m.prompt, m.options || {}, { lookup: true });
  const stop = () => isAborted(m.id);
  for (;;) {
    const r = g.round('lookup', null, stop);
    if (m.stream) for (const c of r.chunks || []) post({ id: m.id, event: 'chunk', ...c });
    if (r.done) return finishGeneration(m, r);
    await yieldNow();
  }
}

// Chat templates (web/worker/template.js, with @huggingface/jinja) are loaded on
// the first chat only: in Node imported here on demand; in browsers rendered
// by a worker of this worker (web/worker/template-worker.js), which bundlers bundle
// on its own. A failure is a reply ({error}), not a rejection, so that its
// code and limit reach the caller.
// a variable specifier: bundlers leave it out (browsers render in the template worker)
const TEMPLATE_MODULE = './template.js';
let templateModule = null;
let templateWorker = null;   // browsers: {w, pending}
const TEMPLATE_WATCHDOG_MS = 5000; // past its own time budget, a silent renderer is ended

async function renderChatTemplate(m) {
  try {
    if (!isNode) return await renderInTemplateWorker(m);
    if (!templateModule) {
      templateModule = import(/* @vite-ignore */ /* webpackIgnore: true */ TEMPLATE_MODULE).catch((e) => {
        templateModule = null;
        throw noJinja(e);
      });
    }
    const { renderChat } = await templateModule;
    return { prompt: renderChat(m.template, m.messages, m.options || {}) };
  } catch (e) {
    return templateErrorReply(e);
  }
}

function noJinja(e) {
  return new WasmlmError('TEMPLATE_ERROR', 'chat templates need the package @huggingface/jinja, which the model\'s worker could not load' +
    ` (${e && e.message || e}): install it, and in a browser load wasmlm through a bundler (Vite, webpack, ...) so that the template worker's imports resolve`);
}

function renderInTemplateWorker(m) {
  if (!templateWorker) {
    const w = new Worker(new URL('./template-worker.js', import.meta.url), { type: 'module' }); // inline: bundlers follow it
    const tw = { w, pending: null };
    const fail = (err) => {
      if (templateWorker === tw) templateWorker = null;
      w.terminate();
      if (tw.pending) { tw.pending.resolve(templateErrorReply(err)); tw.pending = null; }
    };
    w.onmessage = (ev) => {
      const p = tw.pending;
      if (!p || ev.data.id !== p.id) return;
      tw.pending = null;
      clearTimeout(p.timer);
      p.resolve(ev.data);
    };
    w.onerror = (ev) => { ev.preventDefault?.(); fail(noJinja(ev.message || 'the template worker failed to start')); };
    tw.fail = fail;
    templateWorker = tw;
  }
  const tw = templateWorker;
  const timeMs = (m.options && m.options.limits && m.options.limits.timeMs) || 1000;
  return new Promise((resolve) => {
    const timer = setTimeout(() => tw.fail(new WasmlmError('TEMPLATE_LIMIT',
      `chat template went past its timeMs limit (${timeMs}): the renderer did not answer within ${timeMs + TEMPLATE_WATCHDOG_MS} ms and was stopped`,
      { limit: 'timeMs' })), timeMs + TEMPLATE_WATCHDOG_MS);
    tw.pending = { id: m.id, resolve, timer };
    tw.w.postMessage({ id: m.id, template: m.template, messages: m.messages, options: m.options });
  });
}

function finishLoad(options = {}) {
  if (options.memoryLimit) engine.setMemoryLimit(options.memoryLimit);
  return engine.finishLoad(options);
}

async function run(m) {
  await ready;
  if (isAborted(m.id) && m.op !== 'dispose') {
    aborted.delete(m.id);
    post({ id: m.id, ok: false, error: { name: 'AbortError', message: 'aborted' } });
    return;
  }
  try {
    const problem = checkRequest(m);
    if (problem) throw new WasmlmError('INTERNAL', `protocol: ${problem} (web/protocol.js)`);
    if (!engine && m.op !== 'dispose') throw new WasmlmError('DISPOSED', 'engine is disposed');
    if (engine && engine.vocabOnly && !VOCAB_ONLY_OPS.includes(m.op)) {
      throw new WasmlmError('BAD_STATE', `${m.op}: this worker holds a vocabulary only (loadTokenizer): it has no weights to run`);
    }
    let result = await ops[m.op](m);
    let transfer;
    if (result && result.__transfer) { transfer = result.__transfer; delete result.__transfer; }
    post({ id: m.id, ok: true, result }, transfer);
  } catch (e) {
    const error = errToPlain(e);
    if (e && e.partial) error.partial = e.partial;
    post({ id: m.id, ok: false, error });
  } finally {
    aborted.delete(m.id);
    live.delete(m.id);
  }
  if (m.op === 'dispose' && isNode) port.close();
}

function onMessage(m) {
  if (!m || typeof m !== 'object') return;
  if (m.op === 'init') {
    abortFlag = m.abortFlag ? new Int32Array(m.abortFlag) : null;
    Engine.create(m.wasm, { threads: m.threads || 1, spawnThread, build: m.build || null }).then((e) => { engine = e; initDone(); },
      (e) => { post({ id: 0, ok: false, error: errToPlain(e) }); initDone(); });
    return;
  }
  if (m.op === 'abort') {
    if (!live.has(m.target)) return;
    aborted.add(m.target);
    return;
  }
  live.add(m.id);
  chain = chain.then(() => run(m));
}

if (isNode) {
  // no top-level await: a port queues messages until a listener is attached
  nodeImport('node:worker_threads').then(({ parentPort }) => {
    port = {
      post: (msg, transfer) => parentPort.postMessage(msg, transfer),
      close: () => parentPort.close(),
    };
    parentPort.on('message', onMessage);
  });
} else {
  port = { post: (msg, transfer) => self.postMessage(msg, transfer || []), close() {} };
  self.onmessage = (ev) => onMessage(ev.data);
}
