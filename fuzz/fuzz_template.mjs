#!/usr/bin/env node
// Fuzz target for chat-template rendering (web/worker/template.js) with its limits
// on: random templates from the Jinja grammar (loops, range() with big
// numbers, string operations, filters, macros and recursion, namespaces,
// set, if) rendered for FUZZ_SECONDS (default 30). A render may succeed or
// throw a WasmlmError (TEMPLATE_LIMIT / TEMPLATE_ERROR); anything else is a
// finding: another exception, a render running far past its time budget, or
// the rendering thread dying (out of memory, crash). The renders run in a
// worker thread with a heap cap, watched from here; a finding prints its
// seed and template and exits 1.
//
//   FUZZ_SECONDS=60 FUZZ_SEED=123 node fuzz/fuzz_template.mjs
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const LIMITS = { timeMs: 250 };     // the other limits at their defaults
const HANG_MS = 5000;               // a render silent this long past its budget is a hang
const HEAP_MB = 768;                // the rendering thread's heap cap

// ---- the generator ----------------------------------------------------------

function rng(seed) { // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generator(rand) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const chance = (p) => rand() < p;
  const int = () => pick([0, 1, 2, 3, 7, 10, 64, 1000, 65536, 100000, 2000000, 100000000, 2147483647, -1, -5]);
  const str = () => `'${pick(['', 'a', 'ab', 'x\\n', '<|im_start|>', ' ', 'é', 'aaaaaaaaaa', '{{', ','])}'`;
  const name = () => pick(['i', 'j', 's', 'x', 'm', 'ns.v', 'messages', 'loop.index', 'bos_token', 'add_generation_prompt']);
  const filters = [
    'length', 'upper', 'lower', 'title', 'trim', 'tojson', 'string', 'list', 'first', 'last', 'reverse', 'sort',
    'unique', 'join', 'items', 'int', 'float', 'abs', 'safe', 'indent',
    () => `tojson(indent=${int()})`, () => `indent(${int()})`, () => `join(${str()})`, () => `default(${str()})`,
    () => `replace(${str()}, ${str()})`, () => "map(attribute='content')", () => "selectattr('role', 'equalto', 'user')",
  ];
  const filter = () => { const f = pick(filters); return typeof f === 'function' ? f() : f; };

  function expr(d) {
    if (d <= 0) return pick([() => String(int()), str, name])();
    const e = () => expr(d - 1);
    return pick([
      () => String(int()), str, name,
      () => `(${e()} ${pick(['~', '+', '-', '*', '//', '%', '**', 'in', 'not in', '==', '<', 'and', 'or'])} ${e()})`,
      () => `${e()}|${filter()}`,
      () => `range(${pick([() => String(int()), () => `${int()}, ${int()}`, () => `${int()}, ${int()}, ${int()}`])()})`,
      () => `[${e()}, ${e()}]`, () => `{'k': ${e()}, ${str()}: ${e()}}`,
      () => `(${e()} if ${e()} else ${e()})`, () => `${e()} is ${pick(['defined', 'none', 'string', 'mapping', 'iterable'])}`,
      () => `${e()}[${pick(['0', '-1', '1:', '::-1', '"k"', '0:2'])}]`,
      () => `${e()}.${pick(['split(' + str() + ')', 'split()', 'replace(' + str() + ', ' + str() + ')', 'upper()', 'strip()', 'startswith(' + str() + ')', 'items()', 'keys()'])}`,
      () => `f(${e()})`, () => `namespace(v=${e()})`, () => `strftime_now('%Y')`,
    ])();
  }

  function stmt(d) {
    const e = () => expr(Math.min(d, 3));
    const body = () => block(d - 1);
    if (d <= 0) return pick([() => 'text', () => `{{ ${e()} }}`])();
    return pick([
      () => 'text ', () => `{{ ${e()} }}`,
      () => `{% for ${pick(['i', 'j', 'x'])} in ${pick([() => `range(${int()})`, () => 'messages', e])()} %}${body()}{% endfor %}`,
      () => `{% for m in messages %}${body()}{% endfor %}`,
      () => `{% if ${e()} %}${body()}{% else %}${body()}{% endif %}`,
      () => `{% set ${pick(['s', 'x', 'ns.v'])} = ${e()} %}`,
      () => `{% set s = s ~ s %}{% set s = s ~ s %}{% set s = s ~ s %}`,
      () => `{% set ns.v = ns.v ~ ns.v %}`, () => '{% set ns.v = [ns.v, ns.v] %}',
      () => `{% macro f(n) %}${body()}{{ f(n) if ${e()} else '' }}{% endmacro %}{{ f(${e()}) }}`,
      () => `{% filter ${pick(['upper', 'indent(' + int() + ')', 'trim'])} %}${body()}{% endfilter %}`,
      () => `{% for i in range(${int()}) %}{% for j in range(${int()}) %}${body()}{% endfor %}{% endfor %}`,
      () => pick(['{% break %}', '{% continue %}', '{{ raise_exception("stop") }}']),
    ])();
  }

  function block(d) {
    let out = '';
    for (let n = 1 + Math.floor(rand() * 3); n > 0; n--) out += stmt(d);
    return out;
  }

  return () => {
    let t = "{% set ns = namespace(v='ab') %}{% set s = 'xy' %}{% macro f(n) %}{{ n }}{% endmacro %}" + block(3);
    if (chance(0.05)) t = t.slice(0, Math.floor(rand() * t.length)); // a cut template: parse errors
    return t;
  };
}

// ---- the rendering thread -----------------------------------------------------

async function renderLoop({ seed, seconds }) {
  const { renderChat } = await import('../web/worker/template.js');
  const { WasmlmError } = await import('../web/errors.js');
  const next = generator(rng(seed));
  const messages = [{ role: 'system', content: 'sys' }, { role: 'user', content: 'Hello' }, { role: 'assistant', content: 'Hi' }];
  const end = Date.now() + seconds * 1000;
  const counts = { ok: 0, TEMPLATE_LIMIT: 0, TEMPLATE_ERROR: 0 };
  for (let n = 0; Date.now() < end; n++) {
    const template = next();
    parentPort.postMessage({ type: 'start', n, template });
    const t0 = performance.now();
    try {
      renderChat(template, messages, { limits: LIMITS, bosToken: '<s>', eosToken: '</s>' });
      counts.ok++;
    } catch (e) {
      if (!(e instanceof WasmlmError) || !(e.code in counts)) {
        parentPort.postMessage({ type: 'finding', n, template, what: `not a WasmlmError TEMPLATE_*: ${e && e.stack || e}` });
        return;
      }
      counts[e.code]++;
    }
    const ms = performance.now() - t0;
    if (ms > LIMITS.timeMs + HANG_MS) {
      parentPort.postMessage({ type: 'finding', n, template, what: `the render took ${ms.toFixed(0)} ms (budget ${LIMITS.timeMs} ms)` });
      return;
    }
  }
  parentPort.postMessage({ type: 'done', counts });
}

// ---- the watchdog ---------------------------------------------------------------

function main() {
  const seconds = Number(process.env.FUZZ_SECONDS || 30);
  const seed = Number(process.env.FUZZ_SEED || Date.now() % 1e9);
  const w = new Worker(new URL(import.meta.url), {
    workerData: { seed, seconds }, resourceLimits: { maxOldGenerationSizeMb: HEAP_MB },
  });
  let current = null, lastStart = Date.now(), finished = false;
  const fail = (what) => {
    if (finished) return;
    finished = true;
    console.log(`fuzz_template: FINDING (seed ${seed}, template #${current && current.n}): ${what}`);
    if (current) console.log(`template:\n${current.template}`);
    w.terminate();
    process.exitCode = 1;
  };
  const watchdog = setInterval(() => {
    if (Date.now() - lastStart > LIMITS.timeMs + HANG_MS) fail(`a render hung for more than ${LIMITS.timeMs + HANG_MS} ms`);
  }, 250);
  w.on('message', (m) => {
    if (m.type === 'start') { current = m; lastStart = Date.now(); }
    else if (m.type === 'finding') { current = m; fail(m.what); }
    else if (m.type === 'done') {
      finished = true;
      const total = m.counts.ok + m.counts.TEMPLATE_LIMIT + m.counts.TEMPLATE_ERROR;
      console.log(`fuzz_template: ${total} templates in ${seconds} s (seed ${seed}): ${m.counts.ok} rendered, ` +
        `${m.counts.TEMPLATE_LIMIT} TEMPLATE_LIMIT, ${m.counts.TEMPLATE_ERROR} TEMPLATE_ERROR; no findings`);
    }
  });
  w.on('error', (e) => fail(`the rendering thread died: ${e && (e.code || '')} ${e && e.message}`));
  w.on('exit', (code) => {
    clearInterval(watchdog);
    if (!finished) fail(`the rendering thread exited (code ${code})`);
  });
}

if (isMainThread) main();
else renderLoop(workerData);
