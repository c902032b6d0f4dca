// Fuzz target: the public API's option layer (web/options.js, web/index.js).
// Random option objects, prompts and callbacks go to a live model's methods:
// known keys with valid and hostile values (NaN, huge and negative numbers,
// BigInt, symbols, functions, class instances, getters and Proxies that
// throw, aborted signals), unknown and misspelt keys, callbacks that throw.
// A finding is: an uncaught exception or unhandled rejection, a call that
// rejects with anything but a WasmlmError carrying a code (or the fuzzer's
// own thrown marker), a call that does not settle within its bound, or a
// model that no longer gives its greedy reference afterwards. The process
// must then exit by itself (no orphaned request keeps it alive).
//
//   node fuzz/fuzz_options.mjs SECONDS [SEED]      (make fuzz-options)
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadModel, loadTokenizer, WasmlmError } from '../web/index.js';
import { OPTIONS, METHODS } from '../web/options.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SHARED = path.resolve(ROOT, process.env.WLM_SHARED || '../shared');
const MODEL = path.join(SHARED, 'models', 'stories260K.gguf');
const seconds = Number(process.argv[2] || 10);
let state = BigInt(process.argv[3] || Date.now()) & 0xffffffffn;
const seed0 = state;

// a small deterministic PRNG (xorshift32), so a finding can be replayed by seed
function rnd() { state ^= (state << 13n) & 0xffffffffn; state ^= state >> 17n; state ^= (state << 5n) & 0xffffffffn; return Number(state) / 4294967296; }
const pick = (a) => a[Math.floor(rnd() * a.length)];
const chance = (p) => rnd() < p;

const MARK = 'fuzz-thrown';
const marker = () => Object.assign(new Error(MARK), { fuzz: true });

const findings = [];
process.on('uncaughtException', (e) => findings.push(`uncaught exception: ${e && e.stack || e}`));
process.on('unhandledRejection', (e) => findings.push(`unhandled rejection: ${e && e.stack || e}`));

function hostile() {
  return pick([
    NaN, Infinity, -Infinity, -1, 0, 1, 0.5, -0.5, 1e300, 2 ** 32, 2 ** 32 + 1, 2 ** 53, -(2 ** 31), 1n, -1n, 2n ** 64n,
    '', 'x', '5', 'NaN', ' ', '\u0000', 'a'.repeat(5000), true, false, null, undefined, [], [1, 2], [''], ['stop'],
    {}, { a: 1 }, Object.create(null), new Date(0), new Map(), /x/, Symbol('s'), () => 1, async () => { throw marker(); },
    () => { throw marker(); }, new Uint8Array(4), new ArrayBuffer(8), Promise.resolve(1),
    new Proxy({}, { get() { throw marker(); }, ownKeys() { throw marker(); } }),
    { get aborted() { throw marker(); }, addEventListener() {}, removeEventListener() {} },
    AbortSignal.abort(), new AbortController().signal, AbortSignal.timeout(Math.floor(rnd() * 50)),
  ]);
}

/** A plausible value for an option (often valid, so calls get past the checks and run). */
function plausible(name) {
  const s = OPTIONS[name];
  switch (s.kind) {
    case 'int': {
      const lo = s.min ?? 0, hi = Math.min(s.max ?? 64, lo + 64);
      return chance(0.8) ? lo + Math.floor(rnd() * (hi - lo + 1)) : hostile();
    }
    case 'number': return chance(0.8) ? (s.max ?? 2) * rnd() + (s.minExclusive ? 1e-3 : 0) : hostile();
    case 'boolean': return chance(0.9) ? chance(0.5) : hostile();
    case 'enum': return chance(0.9) ? pick(s.values) : hostile();
    case 'seed': return chance(0.8) ? (chance(0.5) ? Math.floor(rnd() * 1e6) : BigInt(Math.floor(rnd() * 1e6))) : hostile();
    case 'stop': return chance(0.7) ? pick(['.', '\n', ['the', 'a'], 'Once']) : hostile();
    case 'grammar': return chance(0.7) ? pick(['root ::= [a-z .]+', 'root ::= "Once" | "The"', 'root ::= (', 'root ::= x', 'root ::= "(" root ")" root | ""',
      'root ::= root "a" | "b"', 'root ::= [^\\x00-\\U0010FFFF]', 'root ::= .{1,3}']) : hostile();
    case 'function': return chance(0.7) ? pick([() => 1, () => { throw marker(); }, async () => 0.5, (x) => x && x.text && x.text.length]) : hostile();
    case 'scorer': return chance(0.7) ? pick(['mean-logprob', 'total-logprob', () => rnd(), () => { throw marker(); }]) : hostile();
    case 'signal': {
      if (!chance(0.8)) return hostile();
      const ac = new AbortController();
      if (chance(0.5)) setTimeout(() => ac.abort(), Math.floor(rnd() * 30));
      return ac.signal;
    }
    case 'feedback': return chance(0.8) ? pick([true, false, (p) => p]) : hostile();
    case 'logitBias': {
      if (!chance(0.8)) return hostile();
      const id = () => Math.floor(rnd() * 600);   // some beyond the vocabulary (512)
      const bias = () => pick([-Infinity, -100, -1, 0, 0.5, 5, 100, NaN, Infinity]);
      return chance(0.5) ? { [id()]: bias(), [id()]: bias() }
        : [[id(), bias()], [pick([' the', 'Once', '\u{1F600}', 'x'.repeat(2000), '', '<s>']), bias()]];
    }
    default: return hostile();
  }
}

function randomOptions(method) {
  if (chance(0.03)) return hostile();
  const o = {};
  const keys = METHODS[method];
  const n = Math.floor(rnd() * 6);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.8) { const k = pick(keys); o[k] = plausible(k); }
    else if (r < 0.9) o[pick(['max_tokens', 'temp', 'top_p', 'x', 'constructor', '__proto__', 'toString'])] = hostile();
    else o[pick(Object.keys(OPTIONS))] = hostile();
  }
  // keep generations short: the point is the option layer, not long decoding
  if (typeof o.maxTokens === 'number' && o.maxTokens > 24 && chance(0.9)) o.maxTokens = 24;
  if (['generate', 'complete', 'chat', 'chatComplete', 'bestOfN', 'selfConsistency', 'generateUntil'].includes(method) && o.maxTokens === undefined) o.maxTokens = 8;
  if (method === 'selfConsistency' && chance(0.9)) o.extract = o.extract ?? ((t) => t.length % 3);
  if (method === 'generateUntil' && chance(0.9)) o.verify = o.verify ?? (() => chance(0.5));
  return o;
}

function randomPrompt() {
  return pick([
    'Once upon a time', '', 'x\ufeffy', '\ud800', 'é🎉', 'a'.repeat(300), [1, 2, 3], [], [NaN], [1e9], [-1], hostile(),
  ]);
}

async function callOnce(model, method) {
  const opts = randomOptions(method);
  const msgs = [{ role: 'user', content: 'hi' }];
  const template = '{% for m in messages %}{{ m.content }}{% endfor %}';
  switch (method) {
    case 'loadModel': {
      const m = await loadModel(chance(0.5) ? MODEL : fs.readFileSync(MODEL), opts);
      await m.dispose();
      return;
    }
    case 'loadTokenizer': {
      const t = await loadTokenizer(chance(0.5) ? MODEL : fs.readFileSync(MODEL), opts);
      await t.countTokens('hello');
      await t.dispose();
      return;
    }
    case 'generate': { let k = 0; for await (const c of model.generate(randomPrompt(), opts)) { void c; if (++k > 30) break; } return; }
    case 'chat': { for await (const c of model.chat(msgs, { template, ...opts })) void c; return; }
    case 'chatComplete': return model.chatComplete(msgs, { template, ...opts });
    case 'applyChatTemplate': return model.applyChatTemplate(msgs, { template, ...opts });
    case 'tokenize': return model.tokenize(pick(['hello', '', 5, 'x\ufeff']), opts);
    case 'logits': return model.logits(pick([[1, 2], [], [NaN], 'x', [1e9]]), opts);
    case 'quantize': return model.quantize(pick(['q8_0', 'f16', 'nope', NaN]), { ...opts, outPath: undefined });
    default: return model[method](randomPrompt(), opts);
  }
}

function settledWithin(p, ms) {
  let timer;
  return Promise.race([
    p.then(() => 'ok', (e) => e),
    new Promise((r) => { timer = setTimeout(() => r('timeout'), ms); }),
  ]).finally(() => clearTimeout(timer));
}

const model = await loadModel(MODEL, { threads: 1, contextLength: 256 });
const greedy = { temperature: 0, repeatPenalty: 1, maxTokens: 12, ignoreEos: true };
const want = (await model.complete('Once upon a time', greedy)).tokens.join(',');
const methods = [...Object.keys(METHODS).filter((m) => m !== 'loadModel' && m !== 'loadTokenizer'), 'loadModel', 'loadTokenizer'];
const t0 = Date.now();
let calls = 0;
const codes = new Map();
while ((Date.now() - t0) / 1000 < seconds && findings.length === 0) {
  const method = chance(0.05) ? pick(['loadModel', 'loadTokenizer']) : pick(methods);
  const r = await settledWithin(callOnce(model, method), 60000);
  calls++;
  if (r === 'timeout') findings.push(`${method}: did not settle within 60 s (state ${state})`);
  else if (r !== 'ok') {
    const ok = (r instanceof WasmlmError && typeof r.code === 'string') || (r && r.message === MARK) ||
      (r && r.name === 'AbortError') || (r && r.name === 'TimeoutError');
    const key = r && (r.code || r.name);
    codes.set(key, (codes.get(key) || 0) + 1);
    if (!ok) findings.push(`${method}: rejected with ${r && r.name} (no code): ${r && r.stack || r}`);
  }
}
const after = (await model.complete('Once upon a time', greedy)).tokens.join(',');
if (after !== want) findings.push(`the model's greedy output changed: ${want} -> ${after}`);
await model.dispose();
console.log(`fuzz_options: ${calls} calls in ${((Date.now() - t0) / 1000).toFixed(1)} s, seed ${seed0}; rejections by code: ${JSON.stringify(Object.fromEntries(codes))}`);
if (findings.length) {
  console.log(`fuzz_options: FINDINGS (${findings.length}):\n` + findings.slice(0, 10).join('\n'));
  process.exit(1);
}
// no process.exit on success: the process must end by itself (nothing pending)
