// Fuzz target: the worker protocol (web/worker/worker.js), spoken directly as a
// peer would: random sequences of known and unknown ops with random fields
// (wrong types, missing ids, duplicate ids, garbage bytes, huge numbers),
// loads of real and broken model bytes, aborts of running, queued, finished
// and unknown requests, and dispose. A finding is: the worker dying (other
// than after 'dispose'), a request with a numeric id that gets no reply or
// more than one, a reply without an error message, a request still running
// 20 s after it was aborted, or an idle worker that no longer answers.
//
//   node fuzz/fuzz_protocol.mjs SECONDS [SEED]     (make fuzz-protocol)
import path from 'node:path';
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { getWasmModule } from '../web/index.js';
import { OPS as PROTOCOL_OPS } from '../web/protocol.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SHARED = path.resolve(ROOT, process.env.WLM_SHARED || '../shared');
const MODEL = fs.readFileSync(path.join(SHARED, 'models', 'stories260K.gguf'));
const seconds = Number(process.argv[2] || 10);
let state = BigInt(process.argv[3] || Date.now()) & 0xffffffffn;
const seed0 = state;
function rnd() { state ^= (state << 13n) & 0xffffffffn; state ^= state >> 17n; state ^= (state << 5n) & 0xffffffffn; return Number(state) / 4294967296; }
const pick = (a) => a[Math.floor(rnd() * a.length)];
const chance = (p) => rnd() < p;

// every op of the protocol (web/protocol.js), and names that are not ops
const OPS = [...Object.keys(PROTOCOL_OPS), 'nope', '__proto__', 'constructor', 'toString', 'specRoom'];

const findings = [];
const mod = await getWasmModule(undefined, false, 'simd128');

function junk() {
  return pick([undefined, null, NaN, -1, 0, 1, 7, 2 ** 31, 1e12, '', 'x', 'Once upon a time', true, [], [1, 2, 3], [NaN], [1e9],
    {}, { maxTokens: 4 }, new Uint8Array(0), new Uint8Array(64), MODEL.subarray(0, 1024), 5n]);
}
function genOptions() {
  const o = {};
  for (const k of ['maxTokens', 'temperature', 'topK', 'topP', 'seed', 'n', 'beams', 'ignoreEos', 'stop', 'onFull', 'contextLength', 'draftTokens', 'resume']) {
    if (chance(0.3)) o[k] = chance(0.7) ? pick([0, 1, 2, 4, 8, 0.5, true, 'x', -1, 64, 1e9]) : junk();
  }
  if (chance(0.8)) o.maxTokens = Math.floor(rnd() * 20);
  return o;
}
function randomMessage(id) {
  const op = pick(OPS);
  const m = { op, id };
  switch (op) {
    case 'loadBegin': m.size = pick([0, MODEL.length, 2 ** 31, -5, 'x', undefined]); if (chance(0.3)) m.vocabOnly = pick([true, false, junk()]); break;
    case 'loadChunk': m.bytes = chance(0.5) ? new Uint8Array(MODEL) : junk(); break;
    case 'loadEnd': m.options = chance(0.7) ? { contextLength: pick([0, 16, 64, 256]), onFull: pick(['error', 'slide', 'x']) } : junk(); break;
    case 'loadFile': m.path = pick([path.join(SHARED, 'models', 'stories260K.gguf'), '/nonexistent', '/dev/null', ROOT, 5]); m.options = {};
      if (chance(0.3)) m.vocabOnly = pick([true, junk()]);
      break;
    case 'loadState': {
      const s = savedState;
      m.bytes = pick([s, s && s.subarray(0, Math.floor(rnd() * s.length)), s && flipped(s), new Uint8Array(Math.floor(rnd() * 200)), junk()]) ?? junk();
      break;
    }
    case 'generate': case 'bestOfN': case 'beamSearch': case 'specStart':
      m.prompt = pick(['Once upon a time', '', [1, 2], [1e9], junk()]); m.options = chance(0.9) ? genOptions() : junk(); m.stream = chance(0.5);
      if (op === 'specStart') m.session = pick([1, 2, junk()]);
      if (op === 'generate' && chance(0.3)) m.draft = pick(['lookup', 'lookup', junk()]);
      if (chance(0.05)) m.extra = junk();   // a field the op does not have
      break;
    case 'specRound': m.session = pick([1, 2, junk()]); m.drafts = pick([[], [1, 2], junk()]); m.qs = pick([null, [], junk()]); m.plain = pick([undefined, 1, 3, 2 ** 31]); break;
    case 'draftStart': case 'draftPropose': case 'draftEnd': case 'specEnd': m.session = pick([1, 2, junk()]); m.ids = pick([[1, 2], junk()]); m.k = pick([1, 4, junk()]); m.options = genOptions(); break;
    case 'tokenize': m.text = pick(['hello', '', junk()]); m.addBos = junk(); break;
    case 'detokenize': m.ids = pick([[1, 2, 3], [], junk()]); break;
    case 'distribution': m.text = pick(['Once', [1], junk()]); m.options = genOptions(); break;
    case 'logits': m.ids = pick([[1, 2], [], junk()]); m.all = junk(); break;
    case 'quantize': m.type = pick(['q8_0', 'f16', 'nope', junk()]); break;
    default: for (const k of ['a', 'b']) if (chance(0.5)) m[k] = junk();
  }
  if (chance(0.03)) delete m.id;
  return m;
}

// the last state a saveState reply carried (loadState sends it, cut, or with a byte flipped)
let savedState = null;
function flipped(s) { const c = s.slice(); c[Math.floor(rnd() * c.length)] ^= 1 << Math.floor(rnd() * 8); return c; }

class Peer {
  constructor() {
    this.w = new Worker(new URL('../web/worker/worker.js', import.meta.url));
    this.replies = new Map(); // id -> replies
    this.sends = new Map();   // id -> messages sent with it (ids may repeat)
    this.open = new Map();    // id -> {op, abortedAt}
    this.dead = null; this.disposed = false;
    this.w.on('message', (m) => {
      if (!m || m.event) return;
      const b = m.ok && m.result && m.result.bytes;
      if (b instanceof Uint8Array && b.length >= 4 && String.fromCharCode(...b.subarray(0, 4)) === 'WLMS') savedState = b;
      if (m.id === 0 && m.ok === false) { findings.push(`init failed: ${m.error && m.error.message}`); return; }
      const n = (this.replies.get(m.id) || 0) + 1;
      this.replies.set(m.id, n);
      if (n > (this.sends.get(m.id) || 0)) findings.push(`request ${m.id} answered ${n} times, sent ${this.sends.get(m.id) || 0}`);
      if (m.ok === false && !(m.error && typeof m.error.message === 'string')) findings.push(`request ${m.id}: error reply without a message`);
      this.open.delete(m.id);
    });
    this.w.on('error', (e) => { this.dead = e; });
    this.w.on('exit', (code) => { if (!this.disposed) this.dead = this.dead || new Error(`worker exited with ${code}`); });
    this.w.postMessage({ op: 'init', wasm: mod, threads: 1, abortFlag: null });
  }
  send(m) {
    this.sends.set(m.id, (this.sends.get(m.id) || 0) + 1);
    if (typeof m.id === 'number') this.open.set(m.id, { op: m.op, sentAt: Date.now(), abortedAt: null });
    try { this.w.postMessage(m); } catch (e) { this.open.delete(m.id); }
  }
  abort(id) { const o = this.open.get(id); if (o && !o.abortedAt) o.abortedAt = Date.now(); this.w.postMessage({ op: 'abort', target: id }); }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
let sent = 0, workers = 1, nextId = 1;
let peer = new Peer();
while ((Date.now() - t0) / 1000 < seconds && findings.length === 0) {
  const m = randomMessage(chance(0.05) ? pick([1, nextId - 1, -3, 'x']) : nextId++);
  if (m.op === 'dispose' && !chance(0.2)) continue;
  peer.send(m);
  sent++;
  if (m.op === 'dispose') peer.disposed = true;
  if (chance(0.2)) peer.abort(pick([...peer.open.keys(), 999999]));
  // anything running long is aborted; it must then end within 20 s
  for (const [id, o] of peer.open) {
    if (!o.abortedAt && Date.now() - o.sentAt > 3000) peer.abort(id);
    if (o.abortedAt && Date.now() - o.abortedAt > 20000) findings.push(`request ${id} (${o.op}) still running 20 s after its abort`);
  }
  await sleep(chance(0.5) ? 0 : 5);
  if (peer.dead && !peer.disposed) findings.push(`worker died: ${peer.dead.message}`);
  if (peer.disposed || peer.dead) {
    await peer.w.terminate();
    peer = new Peer();
    workers++;
  }
}
// drain: every numeric request must be answered; an idle worker must answer an 'info'
for (const id of peer.open.keys()) peer.abort(id);
for (let i = 0; i < 400 && peer.open.size > 0 && !peer.dead; i++) await sleep(50);
if (peer.open.size > 0) findings.push(`requests never answered: ${[...peer.open.entries()].map(([id, o]) => `${id} ${o.op}`).join(', ')}`);
const probe = nextId++;
peer.send({ op: 'tokenize', id: probe, text: 'hello' });
for (let i = 0; i < 200 && !peer.replies.has(probe); i++) await sleep(50);
if (!peer.replies.has(probe)) findings.push('the worker no longer answers');
await peer.w.terminate();
console.log(`fuzz_protocol: ${sent} messages to ${workers} workers in ${((Date.now() - t0) / 1000).toFixed(1)} s, seed ${seed0}`);
if (findings.length) {
  console.log(`fuzz_protocol: FINDINGS (${findings.length}):\n` + findings.slice(0, 10).join('\n'));
  process.exit(1);
}
