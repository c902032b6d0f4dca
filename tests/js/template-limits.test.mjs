// Chat templates are untrusted (they come with the model file): they are
// rendered in the model's worker inside limits (web/worker/template.js). A template
// that loops, recurses or builds huge strings/lists fails with a
// WasmlmError TEMPLATE_LIMIT naming the limit, the caller's event loop stays
// responsive meanwhile, and the model keeps working. Also through
// `wasmlm chat`, and a short run of the template fuzz target.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { renderChat } from '../../web/worker/template.js';
import { CLI, ROOT } from './helpers.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-tpl-'));
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 256, vocab: 320 };
const MSGS = [{ role: 'user', content: 'Hello' }];
// the template: 2e6 empty iterations, then the first message
const LOOP = '{% for i in range(2000000) %}{% endfor %}{{ messages[0].content }}';
// no big range(): 1e10 iterations of small loops (only the step/time budget stops it)
const NESTED = '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ messages[0].content }}';
const GOOD = "{% for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}{{ 'assistant:' }}";
const HOSTILE = path.join(DIR, 'hostile.gguf');
makeModel(HOSTILE, SHAPE, 'f32', 21, { arch: 'llama', chatTemplate: LOOP });

let model;
test.before(async () => { model = await loadModel(HOSTILE); });
test.after(async () => {
  await model?.dispose();
  fs.rmSync(DIR, { recursive: true, force: true });
});

/** Runs `fn` while a 10 ms interval measures the caller's longest event-loop stall. */
async function withLoopWatch(fn) {
  let last = performance.now(), maxGap = 0;
  const timer = setInterval(() => { const t = performance.now(); maxGap = Math.max(maxGap, t - last); last = t; }, 10);
  try {
    const result = await fn().then((value) => ({ value }), (error) => ({ error }));
    return { ...result, maxGap: Math.max(maxGap, performance.now() - last) };
  } finally {
    clearInterval(timer);
  }
}

function assertLimit(e, limits) {
  assert.equal(e && e.name, 'WasmlmError', e && e.stack);
  assert.equal(e.code, 'TEMPLATE_LIMIT', e.message);
  assert.ok([].concat(limits).includes(e.limit), `limit ${e.limit}: ${e.message}`);
  assert.match(e.message, new RegExp(`${e.limit} limit .*templateLimits\\.${e.limit}`));
}

async function stillWorks() {
  const r = await model.complete('Once upon a time', { maxTokens: 4, temperature: 0, ignoreEos: true });
  assert.equal(r.tokens.length, 4);
  assert.equal(await model.applyChatTemplate(MSGS, { template: GOOD }), 'user: Hello\nassistant:');
}

test("the model's own looping template: TEMPLATE_LIMIT, the caller's event loop is not blocked, the model still works", async () => {
  const r = await withLoopWatch(() => model.chatComplete(MSGS, { maxTokens: 4 }));
  assertLimit(r.error, ['items', 'steps', 'timeMs']);
  assert.ok(r.maxGap < 500, `the caller's event loop stalled ${r.maxGap.toFixed(0)} ms`);
  await stillWorks();
});

test('loops without a big range(): stopped by the step or time budget, off the caller thread', async () => {
  for (const call of [
    () => model.applyChatTemplate(MSGS, { template: NESTED }),
    async () => { for await (const _ of model.chat(MSGS, { template: NESTED, maxTokens: 2 })) { /* none */ } },
  ]) {
    const r = await withLoopWatch(call);
    assertLimit(r.error, ['steps', 'timeMs']);
    assert.ok(r.maxGap < 500, `the caller's event loop stalled ${r.maxGap.toFixed(0)} ms`);
  }
  // each budget on its own, through options.templateLimits
  await assert.rejects(model.applyChatTemplate(MSGS, { template: NESTED, templateLimits: { steps: 5000, timeMs: 60000 } }),
    (e) => { assertLimit(e, 'steps'); return true; });
  await assert.rejects(model.applyChatTemplate(MSGS, { template: NESTED, templateLimits: { steps: 1e12, timeMs: 50 } }),
    (e) => { assertLimit(e, 'timeMs'); return true; });
  await stillWorks();
});

test('range(1e8), string doubling, macro recursion, huge output: TEMPLATE_LIMIT naming the limit', async () => {
  const doubling = "{% set s = 'ab' %}" + '{% set s = s ~ s %}'.repeat(40) + '{{ s }}';
  const cases = [
    ['{% for i in range(100000000) %}{% endfor %}{{ messages[0].content }}', 'items'],
    [doubling, 'outputChars'],
    ['{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}', 'depth'],
    ["{% for i in range(90000) %}{{ '" + 'x'.repeat(100) + "' }}{% endfor %}", 'outputChars'],
    ['{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns.a|tojson }}', 'items'],
    ["{{ 'a\\nb'|indent(500000000) }}", 'outputChars'],
  ];
  for (const [template, limit] of cases) {
    // a generous time budget, so that the limit under test is the one that stops it on a loaded machine
    await assert.rejects(model.applyChatTemplate(MSGS, { template, templateLimits: { timeMs: 60000 } }),
      (e) => { assertLimit(e, limit); return true; }, template.slice(0, 60));
  }
  await stillWorks();
});

test('template errors and options: TEMPLATE_ERROR, BAD_OPTION; limits can be raised for a trusted template', async () => {
  await assert.rejects(model.applyChatTemplate(MSGS, { template: '{% for %}' }),
    (e) => e.name === 'WasmlmError' && e.code === 'TEMPLATE_ERROR' && /does not parse/.test(e.message));
  await assert.rejects(model.applyChatTemplate(MSGS, { template: "{{ raise_exception('roles must alternate') }}" }),
    (e) => e.code === 'TEMPLATE_ERROR' && /failed to render: roles must alternate/.test(e.message));
  await assert.rejects(model.applyChatTemplate(MSGS, { template: GOOD, templateLimits: { stepz: 1 } }),
    (e) => e.code === 'BAD_OPTION' && /templateLimits\.stepz/.test(e.message));
  await assert.rejects(model.applyChatTemplate(MSGS, { template: GOOD, templateLimits: { timeMs: -1 } }),
    (e) => e.code === 'BAD_OPTION' && /templateLimits\.timeMs/.test(e.message));
  await assert.rejects(model.applyChatTemplate(MSGS, { template: GOOD, variables: { f: () => 1 } }),
    (e) => e.code === 'BAD_OPTION' && /option variables/.test(e.message));
  const loop = '{% for i in range(200000) %}{% endfor %}ok';
  await assert.rejects(model.applyChatTemplate(MSGS, { template: loop }), (e) => { assertLimit(e, 'items'); return true; });
  assert.equal(await model.applyChatTemplate(MSGS, { template: loop, templateLimits: { items: 300000, steps: 1e7, timeMs: 60000 } }), 'ok');
});

test('renderChat checks the size of indent, tojson, join, replace and split before they run', () => {
  const limits = { outputChars: 1000, items: 100 };
  const cases = [
    ["{{ '" + 'a\\n'.repeat(5) + "'|indent(2000) }}", 'outputChars'],
    ["{{ 'x'|indent(10) }}", null],
    ['{% set ns = namespace(a=[]) %}{% for i in range(30) %}{% set ns.a = [ns.a] %}{% endfor %}{{ ns.a|tojson(indent=40) }}', 'outputChars'],
    ["{{ range(50)|join('" + 'y'.repeat(50) + "') }}", 'outputChars'],
    ["{{ ('" + 'a'.repeat(500) + "').replace('a', 'bbb') }}", 'outputChars'],
    ["{{ ('" + 'a,'.repeat(200) + "').split(',')|length }}", 'items'],
    ["{{ ('" + 'a '.repeat(50) + "').split()|length }}", null],
  ];
  for (const [template, limit] of cases) {
    if (limit === null) { assert.equal(typeof renderChat(template, MSGS, { limits }), 'string'); continue; }
    assert.throws(() => renderChat(template, MSGS, { limits }), (e) => { assertLimit(e, limit); return true; }, template.slice(0, 60));
  }
});

test('wasmlm chat with a looping template prints the limit error and goes on to the next turn', async () => {
  const tpl = path.join(DIR, 'loop.jinja');
  fs.writeFileSync(tpl, NESTED);
  const child = spawn(process.execPath, [CLI, 'chat', '-m', HOSTILE, '--template', tpl, '-n', '2'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  child.stdin.end('Hello\nAgain\n');
  const code = await new Promise((resolve) => {
    const t = setTimeout(() => { child.kill('SIGKILL'); resolve('timeout'); }, 60000);
    child.on('close', (c) => { clearTimeout(t); resolve(c); });
  });
  assert.equal(code, 0, `exit ${code}; stderr=${stderr}`);
  assert.equal((stderr.match(/error: chat template went past its (steps|timeMs) limit/g) || []).length, 2, stderr);
  assert.ok(!/heap out of memory/i.test(stderr), stderr);
  assert.match(stdout, />/);
});

test('the template fuzz target runs clean for a few seconds', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'fuzz', 'fuzz_template.mjs')], {
    env: { ...process.env, FUZZ_SECONDS: '5' }, encoding: 'utf8', timeout: 120000,
  });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /fuzz_template: \d+ templates/);
});
