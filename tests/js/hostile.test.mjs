// The hostile GGUF corpus (tools/make-hostile.mjs) through the wasm build:
// loadModel on each file rejects with the same clear message the native C
// test checks (tests/c/test_hostile.c), the worker survives to report it,
// and the files that load generate. A chat template that is not valid Jinja
// loads (completion works) and chat rejects naming the template.
import test from 'node:test';
import assert from 'node:assert/strict';
import { hostileCases, STATUS } from '../../tools/make-hostile.mjs';
import { loadModel } from '../../web/index.js';

const cases = hostileCases();

test('hostile corpus: every broken file is refused with its own message (wasm)', async () => {
  assert.ok(cases.length >= 50, `${cases.length} cases`);
  const seen = new Map();
  for (const c of cases.filter((x) => x.status !== STATUS.OK)) {
    await assert.rejects(loadModel(c.bytes, { contextLength: 32 }), (e) => {
      assert.ok(e.message.includes(c.message), `${c.name}: '${e.message}' lacks '${c.message}'`);
      assert.equal(e.status, c.status, `${c.name}: status ${e.status} (${e.message})`);
      return true;
    }, c.name);
    seen.set(c.name, true);
  }
  assert.ok(seen.size >= 45);
});

test('hostile corpus: the valid base files load and generate', async () => {
  for (const c of cases.filter((x) => x.status === STATUS.OK && x.name.startsWith('valid'))) {
    const m = await loadModel(c.bytes, { contextLength: 32 });
    try {
      const r = await m.complete('Hello', { maxTokens: 4, temperature: 0, ignoreEos: true });
      assert.equal(r.tokens.length, 4, c.name);
    } finally { await m.dispose(); }
  }
});

test('a chat template that is not valid Jinja: the model loads, chat rejects naming the template', async () => {
  const c = cases.find((x) => x.name === 'chat-template-invalid');
  const m = await loadModel(c.bytes, { contextLength: 64 });
  try {
    assert.match(m.info.chatTemplate, /\{% for message/);
    const r = await m.complete('Hello', { maxTokens: 3, temperature: 0, ignoreEos: true });
    assert.equal(r.tokens.length, 3);
    const msgs = [{ role: 'user', content: 'Hi' }];
    await assert.rejects(m.applyChatTemplate(msgs), /chat template does not parse/);
    await assert.rejects(m.chatComplete(msgs, { maxTokens: 3 }), /chat template does not parse/);
    await assert.rejects(async () => { for await (const _ of m.chat(msgs, { maxTokens: 3 })) { /* nothing */ } }, /chat template does not parse/);
    // an explicit, valid template still works on the same model
    const ok = await m.applyChatTemplate(msgs, { template: '{% for m in messages %}{{ m.content }}{% endfor %}' });
    assert.equal(ok, 'Hi');
  } finally { await m.dispose(); }
});
