// The demo page's chat panel in headless Chromium: a synthetic qwen2 model
// with a ChatML template, two turns, a page reload (the conversation comes
// back from IndexedDB and model.loadState puts the cache back), a third turn
// that evaluates only the new messages; the three replies equal those of an
// uninterrupted run of the same turns in Node. Stop ends a reply, New chat
// forgets the conversation, and a model without a chat template says why
// chat is unavailable.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDemoServer } from '../../web/demo/server.mjs';
import { openPage, pressWhen } from './browser.mjs';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-demo-chat-'));
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 1024, vocab: 320 };
// 'a-chat' sorts first in the local folder, so the page loads it at start
const CHAT = path.join(DIR, 'a-chat.gguf');
makeModel(CHAT, SHAPE, 'f32', 21, { arch: 'qwen2' });
makeModel(path.join(DIR, 'b-plain.gguf'), SHAPE, 'f32', 22, { arch: 'llama' });

let server, page, close;
const errors = [];
const waitState = (states, timeout = 60000) =>
  page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

before(async () => {
  server = await startDemoServer({ modelsDir: DIR });
  ({ page, close } = await openPage({ server, errors, path: null }));
});
after(async () => {
  await close?.();
  fs.rmSync(DIR, { recursive: true, force: true });
});

async function sampling() {
  await page.fill('#temperature', '0.8');
  await page.fill('#repeat-penalty', '1');
  await page.fill('#max-tokens', '12');
  await page.fill('#seed', '5');
}

/** Sends a message from the chat panel; resolves with the reply, the stats and the options the page used. */
async function turn(text) {
  await page.fill('#chat-input', text);
  await page.click('#chat-send');
  await waitState(['done', 'stopped', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'done', await page.textContent('#chat-status'));
  // the state is saved after the reply (the Send button comes back once it is)
  await page.waitForFunction(() => !document.getElementById('chat-send').disabled);
  return page.evaluate(() => {
    const c = window.wasmlmDemo.state.chat;
    return { reply: c.messages.at(-1).content, stats: c.lastStats, options: c.lastOptions, saves: c.saves };
  });
}

const USER = ['Hello there', 'Tell me a story', 'And then?'];

test('two turns, a reload, a third turn: the conversation and its cache come back; the replies equal an uninterrupted Node run', async () => {
  await page.goto(`${server.url}/web/demo/`);
  await waitState(['ready'], 120000);
  assert.equal(await page.isDisabled('#chat-send'), false, await page.textContent('#chat-status'));
  await sampling();
  const t1 = await turn(USER[0]);
  const t2 = await turn(USER[1]);
  assert.equal(t2.saves, 2);
  assert.ok(t2.stats.reusedPromptTokens > 0, 'the second turn reused the first turn\'s cache');

  await page.reload();
  await waitState(['ready'], 120000);
  const restored = await page.evaluate(() => ({
    restored: window.wasmlmDemo.state.chat.restored,
    shown: [...document.querySelectorAll('#chat-log .msg')].map((li) => [li.classList.contains('user') ? 'user' : 'assistant', li.querySelector('.text').textContent]),
    status: document.getElementById('chat-status').textContent,
  }));
  assert.deepEqual(restored.shown, [['user', USER[0]], ['assistant', t1.reply], ['user', USER[1]], ['assistant', t2.reply]]);
  assert.ok(restored.restored && restored.restored.positions > 0, `restored: ${restored.status}`);
  assert.match(restored.status, /Restored the conversation \(4 messages/);
  await sampling();   // the controls start at their defaults after a reload
  const t3 = await turn(USER[2]);
  assert.deepEqual(t3.options, t1.options);

  // the same three turns without a reload, in Node
  const m = await loadModel(CHAT, { contextLength: 1024 });
  try {
    const messages = [];
    const want = [];
    for (const u of USER) {
      messages.push({ role: 'user', content: u });
      const r = await m.chatComplete(messages, t1.options);
      messages.push({ role: 'assistant', content: r.text });
      want.push(r);
    }
    assert.deepEqual([t1.reply, t2.reply, t3.reply], want.map((r) => r.text));
    assert.equal(t3.stats.promptTokens, want[2].stats.promptTokens);
    // after the reload, the third turn's prompt was evaluated from the end of the restored cache, as in one uninterrupted run
    assert.equal(t3.stats.reusedPromptTokens, want[2].stats.reusedPromptTokens);
    // (a page that had not loaded the state would have reused nothing: its context held the chart's text)
    assert.ok(t3.stats.reusedPromptTokens > 0 && t3.stats.reusedPromptTokens <= restored.restored.positions,
      `reused ${t3.stats.reusedPromptTokens} of ${t3.stats.promptTokens} prompt tokens after restoring ${restored.restored.positions} positions`);
  } finally { await m.dispose(); }
});

test('Stop ends a reply mid-stream; New chat forgets the conversation, also after a reload', async () => {
  await page.fill('#max-tokens', '600');
  await page.setChecked('#ignore-eos', true);
  await page.fill('#chat-input', 'A long answer, please');
  // this model writes the 600 tokens ~100 ms after the first one shows: the page presses Stop itself
  await pressWhen(page, '#chat-stop', () => document.body.dataset.state === 'chatting' &&
    document.querySelector('#chat-log .msg.assistant:last-child .text')?.textContent.length > 0);
  await page.click('#chat-send');
  await waitState(['stopped', 'done', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'stopped', await page.textContent('#chat-status'));
  assert.equal(await page.evaluate(() => window.pressedEnabled), true);
  const stoppedAfter = Number((await page.textContent('#chat-status')).match(/Stopped after (\d+) tokens/)?.[1]);
  assert.ok(stoppedAfter >= 1 && stoppedAfter < 600, `stopped after ${stoppedAfter} tokens`);
  await page.waitForFunction(() => !document.getElementById('chat-send').disabled);
  assert.equal(await page.evaluate(() => window.wasmlmDemo.state.chat.messages.length), 8);

  await page.click('#chat-new');
  await page.waitForFunction(() => document.getElementById('chat-status').textContent === 'New conversation');
  assert.equal(await page.locator('#chat-log .msg').count(), 0);
  await page.reload();
  await waitState(['ready'], 120000);
  assert.equal(await page.locator('#chat-log .msg').count(), 0);
  assert.equal(await page.evaluate(() => window.wasmlmDemo.state.chat.restored), null);
});

test('a model without a chat template: chat is unavailable and the panel says why', async () => {
  await page.selectOption('#model-select', 'local:b-plain.gguf');
  await page.click('#load-btn');
  await page.waitForFunction(() => document.getElementById('progress-text').textContent.startsWith('b-plain loaded'), null, { timeout: 60000 });
  await waitState(['ready']);
  assert.equal(await page.isDisabled('#chat-send'), true);
  assert.match(await page.textContent('#chat-status'), /Chat is unavailable: this model has no chat template/);
  assert.equal(await page.getAttribute('#chat-status', 'role'), 'status');
});

test('no page errors', () => {
  assert.deepEqual(errors, []);
});
