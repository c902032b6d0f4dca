// The Qwen3 chat template (as Qwen3 GGUF files carry it: thinking blocks,
// tools) renders in a synthetic qwen3 model: the reasoning of earlier turns is
// dropped, the last turn's kept in a <think> block, enable_thinking=false
// pre-fills an empty one, tools are listed; <think> and </think> are single
// tokens; and a scripted reply streams through chat and stops on <|im_end|>.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeModel, CHAT_TEMPLATES } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-qwen3-chat-'));
const FILE = path.join(DIR, 'qwen3-chat.gguf');
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 256, vocab: 320 };
makeModel(FILE, SHAPE, 'f32', 27, { arch: 'qwen3', script: [['Ċ', 'Hi'], ['Hi', '!'], ['!', '<|im_end|>']] });

let m;
test.before(async () => { m = await loadModel(FILE); });
test.after(async () => { await m?.dispose(); fs.rmSync(DIR, { recursive: true, force: true }); });

test('the model carries the Qwen3 template', () => {
  assert.equal(m.info.chatTemplate, CHAT_TEMPLATES.qwen3);
  assert.equal(m.info.hparams.ropeType, 'neox');
});

test('Qwen3 template: system, user, generation prompt', async () => {
  const p = await m.applyChatTemplate([{ role: 'system', content: 'You are helpful' }, { role: 'user', content: 'Hello' }]);
  assert.equal(p, '<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n');
});

test('Qwen3 template: earlier reasoning is dropped, enable_thinking=false pre-fills an empty think block', async () => {
  const turns = [
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: '<think>\nthe user greets\n</think>\n\nHello!' },
    { role: 'user', content: 'How are you' },
  ];
  const p = await m.applyChatTemplate(turns, { variables: { enable_thinking: false } });
  assert.equal(p, '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n' +
    '<|im_start|>user\nHow are you<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  // without the variable: no think block is pre-filled
  assert.ok((await m.applyChatTemplate(turns)).endsWith('<|im_start|>assistant\n'));
});

test('Qwen3 template: the reasoning after the last user turn is kept (reasoning_content or inline)', async () => {
  const inline = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: '<think>\nplan\n</think>\n\nHello!' }];
  const want = '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nHello!<|im_end|>\n';
  assert.equal(await m.applyChatTemplate(inline, { addGenerationPrompt: false }), want);
  const field = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!', reasoning_content: 'plan' }];
  assert.equal(await m.applyChatTemplate(field, { addGenerationPrompt: false }), want);
});

test('Qwen3 template: tools are listed in the system turn, tool calls and responses render', async () => {
  const tools = [{ type: 'function', function: { name: 'get_time', parameters: {} } }];
  const turns = [
    { role: 'user', content: 'Time?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_time', arguments: { tz: 'UTC' } } }] },
    { role: 'tool', content: '12:00' },
  ];
  const p = await m.applyChatTemplate(turns, { variables: { tools } });
  assert.ok(p.startsWith('<|im_start|>system\n# Tools\n'), p);
  assert.match(p, /<tools>\n\{"type": ?"function", ?"function": ?\{"name": ?"get_time"/);
  assert.match(p, /<tool_call>\n\{"name": "get_time", "arguments": \{"tz": ?"UTC"\}\}\n<\/tool_call><\|im_end\|>\n/);
  assert.match(p, /<\|im_start\|>user\n<tool_response>\n12:00\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/);
});

test('<think> and </think> are single tokens; the scripted reply stops on <|im_end|>', async () => {
  const ids = await m.tokenize('<think>\n\n</think>', { parseSpecial: true });
  assert.equal(ids.length, 3);
  const r = await m.chatComplete([{ role: 'user', content: 'Hello' }], { temperature: 0, repeatPenalty: 1, maxTokens: 8 });
  assert.equal(r.text, 'Hi!');
  assert.equal(r.finishReason, 'stop');
});
