// Chat: the GGUF's tokenizer.chat_template rendered with @huggingface/jinja,
// special tokens parsed to single ids, generation that stops on the model's
// end-of-generation tokens, and `wasmlm chat` driven through a stdin pipe.
// The models are synthetic: qwen2 style (ChatML, <|im_start|>/<|im_end|>
// control tokens, eos <|im_end|>) and Llama 3 style (BOS written by the
// template) and Phi-3 style (SentencePiece vocabulary with Phi-3's added
// tokens, eot <|end|>, Phi-3's own template). A "script" makes greedy decoding deterministic: after the
// generation prompt's last token the model says "Hi", "!", then the end token.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { makeModel } from '../../models/make-model.js';
import { loadModel } from '../../web/index.js';
import { CLI } from './helpers.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-chat-'));
const QWEN = path.join(DIR, 'qwen2-chat.gguf');
const LLAMA3 = path.join(DIR, 'llama3-chat.gguf');
const PLAIN = path.join(DIR, 'llama-plain.gguf');
const RANDOM = path.join(DIR, 'qwen2-random.gguf');
const PHI3 = path.join(DIR, 'phi3-chat.gguf');
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, ctx: 256, vocab: 320 };
const GREEDY = { temperature: 0, repeatPenalty: 1 };

makeModel(QWEN, SHAPE, 'f32', 11, { arch: 'qwen2', script: [['Ċ', 'Hi'], ['Hi', '!'], ['!', '<|im_end|>']] });
makeModel(LLAMA3, SHAPE, 'f32', 12, { arch: 'llama3', script: [['ĊĊ', 'Hello'], ['Hello', '!'], ['!', '<|eot_id|>']] });
makeModel(PLAIN, SHAPE, 'f32', 13, { arch: 'llama' });
makeModel(RANDOM, SHAPE, 'f32', 14, { arch: 'qwen2' });
makeModel(PHI3, SHAPE, 'f32', 15, { arch: 'phi3', script: [['<0x0A>', '\u2581h'], ['\u2581h', '<|end|>']] });

let qwen, llama3;
test.before(async () => { [qwen, llama3] = await Promise.all([loadModel(QWEN), loadModel(LLAMA3)]); });
test.after(async () => {
  await Promise.all([qwen?.dispose(), llama3?.dispose()]);
  fs.rmSync(DIR, { recursive: true, force: true });
});

const MSGS = [{ role: 'system', content: 'You are helpful' }, { role: 'user', content: 'Hello' }];

test('info exposes the chat template and the BOS/EOS token text', () => {
  assert.match(qwen.info.chatTemplate, /<\|im_start\|>/);
  assert.deepEqual(qwen.info.specialTokens, { bos: '<|endoftext|>', eos: '<|im_end|>' });
  assert.deepEqual(llama3.info.specialTokens, { bos: '<|begin_of_text|>', eos: '<|eot_id|>' });
});

test('ChatML: rendered prompt, special tokens parsed to single ids', async () => {
  const p = await qwen.applyChatTemplate(MSGS);
  assert.equal(p, '<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(await qwen.applyChatTemplate(MSGS, { addGenerationPrompt: false }),
    '<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n');
  const ids = await qwen.tokenize(p, { parseSpecial: true });
  const [imStart] = await qwen.tokenize('<|im_start|>', { parseSpecial: true });
  const [imEnd] = await qwen.tokenize('<|im_end|>', { parseSpecial: true });
  assert.ok(imStart >= 0 && imEnd >= 0 && imStart !== imEnd);
  assert.equal(ids.filter((t) => t === imStart).length, 3);
  assert.equal(ids.filter((t) => t === imEnd).length, 2);
  assert.equal(ids[0], imStart); // no BOS: the model does not add one
  // without parseSpecial the markers are plain text (many tokens, none of them the control ids)
  const plain = await qwen.tokenize(p);
  assert.ok(!plain.includes(imStart) && plain.length > ids.length);
});

test('chat streams the reply and stops on <|im_end|> (eos), not emitting it', async () => {
  const chunks = [];
  const it = qwen.chat(MSGS, GREEDY);
  let r;
  while (!(r = await it.next()).done) chunks.push(r.value);
  const result = r.value;
  assert.equal(chunks.map((c) => c.text).join(''), 'Hi!');
  assert.equal(result.text, 'Hi!');
  assert.equal(result.finishReason, 'stop');
  const [imEnd] = await qwen.tokenize('<|im_end|>', { parseSpecial: true });
  assert.ok(!result.tokens.includes(imEnd));
  const prompt = await qwen.tokenize(await qwen.applyChatTemplate(MSGS), { parseSpecial: true });
  assert.equal(result.stats.promptTokens, prompt.length);
  // ignoreEos: the end token is generated and generation goes on
  const more = await qwen.chatComplete(MSGS, { ...GREEDY, ignoreEos: true, maxTokens: 5 });
  assert.equal(more.tokens[2], imEnd);
  assert.equal(more.finishReason, 'length');
});

test('chatComplete equals the streamed reply; multi-turn history renders every turn', async () => {
  const r = await qwen.chatComplete(MSGS, GREEDY);
  assert.equal(r.text, 'Hi!');
  const seen = [];
  const r2 = await qwen.chatComplete(MSGS, { ...GREEDY, onToken: (c) => seen.push(c.text) });
  assert.equal(seen.join(''), r2.text);
  const turns = [...MSGS, { role: 'assistant', content: r.text }, { role: 'user', content: 'How are you' }];
  const p = await qwen.applyChatTemplate(turns);
  assert.ok(p.includes('<|im_start|>assistant\nHi!<|im_end|>\n<|im_start|>user\nHow are you<|im_end|>\n<|im_start|>assistant\n'));
  assert.equal((await qwen.chatComplete(turns, GREEDY)).text, 'Hi!');
});

test('Phi-3 template: <|user|>/<|assistant|> turns ending in <|end|>, parsed to single ids; stops on <|end|>', async () => {
  const phi = await loadModel(PHI3);
  try {
    const p = await phi.applyChatTemplate(MSGS);
    assert.equal(p, '<|system|>\nYou are helpful<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n');
    assert.equal(await phi.applyChatTemplate(MSGS, { addGenerationPrompt: false }),
      '<|system|>\nYou are helpful<|end|>\n<|user|>\nHello<|end|>\n<|endoftext|>');
    const ids = await phi.tokenize(p, { parseSpecial: true });
    const id = async (t) => (await phi.tokenize(t, { parseSpecial: true, addBos: false }))[0];
    const [sys, user, asst, end] = [await id('<|system|>'), await id('<|user|>'), await id('<|assistant|>'), await id('<|end|>')];
    assert.equal(ids[0], sys); // no BOS (add_bos_token false)
    assert.equal(ids.filter((t) => t === user).length, 1);
    assert.equal(ids.filter((t) => t === asst).length, 1);
    assert.equal(ids.filter((t) => t === end).length, 2);
    const r = await phi.chatComplete(MSGS, GREEDY);
    assert.equal(r.text.trim(), 'h');
    assert.equal(r.finishReason, 'stop');
    assert.ok(!r.tokens.includes(end));
  } finally {
    await phi.dispose();
  }
});

test('Llama 3 template: BOS written by the template is not doubled; stops on <|eot_id|>', async () => {
  const p = await llama3.applyChatTemplate(MSGS);
  assert.ok(p.startsWith('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful<|eot_id|>'));
  assert.ok(p.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\n'));
  const bos = llama3.info.hparams.bosId;
  const r = await llama3.chatComplete(MSGS, GREEDY);
  assert.equal(r.text, 'Hello!');
  assert.equal(r.finishReason, 'stop');
  const ids = await llama3.tokenize(p, { parseSpecial: true, addBos: false });
  assert.equal(ids[0], bos);
  assert.equal(ids.filter((t) => t === bos).length, 1);
  assert.equal(r.stats.promptTokens, ids.length); // one BOS, from the template
  // a template without BOS: the model's add_bos_token adds it
  const tpl = "{% for m in messages %}{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content + '<|eot_id|>' }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}";
  const r2 = await llama3.chatComplete(MSGS, { ...GREEDY, template: tpl });
  assert.equal(r2.stats.promptTokens, ids.length);
  assert.equal(r2.text, 'Hello!');
});

test('no template: a clear error; options.template overrides', async () => {
  const m = await loadModel(PLAIN);
  try {
    await assert.rejects(m.chatComplete(MSGS), (e) => {
      assert.equal(e.code, 'NO_CHAT_TEMPLATE');
      assert.match(e.message, /has no chat template.*options\.template/);
      return true;
    });
    await assert.rejects(async () => { for await (const _ of m.chat(MSGS)) { /* none */ } }, /has no chat template/);
    const tpl = "{% for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}";
    assert.equal(await m.applyChatTemplate(MSGS, { template: tpl }), 'system: You are helpful\nuser: Hello\nassistant:');
    const r = await m.chatComplete(MSGS, { template: tpl, maxTokens: 4, ...GREEDY });
    assert.equal(r.tokens.length, 4);
    await assert.rejects(m.applyChatTemplate([], { template: tpl }), /non-empty array/);
    await assert.rejects(m.applyChatTemplate(MSGS, { template: '{% for %}' }), /does not parse/);
  } finally {
    await m.dispose();
  }
});

test('chat can be aborted with a signal', async () => {
  const m = await loadModel(RANDOM, { contextLength: 256 });
  try {
    const ac = new AbortController();
    let n = 0;
    await assert.rejects(async () => {
      for await (const c of m.chat(MSGS, { ignoreEos: true, maxTokens: 200, signal: ac.signal })) {
        if (++n === 3) ac.abort();
        assert.equal(typeof c.text, 'string');
      }
    }, { name: 'AbortError' });
    assert.ok(n >= 3 && n < 200);
  } finally {
    await m.dispose();
  }
});

// ---- the CLI --------------------------------------------------------------------

function startChat(args) {
  const child = spawn(process.execPath, [CLI, 'chat', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const io = { child, stdout: '', stderr: '' };
  child.stdout.on('data', (d) => { io.stdout += d; });
  child.stderr.on('data', (d) => { io.stderr += d; });
  io.exited = new Promise((resolve) => child.on('close', (code) => resolve(code)));
  io.waitFor = async (pred, ms = 30000) => {
    const end = Date.now() + ms;
    while (!pred(io)) {
      if (Date.now() > end) throw new Error(`timeout; stdout=${JSON.stringify(io.stdout.slice(-300))} stderr=${JSON.stringify(io.stderr)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return io;
}

test('wasmlm chat: multi-turn through a stdin pipe, streamed, stops on <|im_end|>', async () => {
  const io = startChat(['-m', QWEN, '--temp', '0', '--system', 'You are helpful']);
  io.child.stdin.write('Hello\n');
  await io.waitFor((s) => (s.stdout.match(/Hi!\n/g) || []).length >= 1);
  io.child.stdin.write('How are you\n');
  io.child.stdin.end();
  const code = await io.exited;
  assert.equal(code, 0, io.stderr);
  assert.equal((io.stdout.match(/Hi!\n/g) || []).length, 2);
  assert.ok(!io.stdout.includes('<|im_end|>'));
});

test('wasmlm chat: Ctrl-C (SIGINT) stops the answer; at the prompt one warns, a second exits', async () => {
  const io = startChat(['-m', RANDOM, '--ignore-eos', '-n', '200000', '--ctx', '200000']);
  await io.waitFor((s) => s.stdout.includes('> '));
  io.child.stdin.write('Hello\n');
  const before = io.stdout.length;
  await io.waitFor((s) => s.stdout.length > before + 20);
  io.child.kill('SIGINT');
  await io.waitFor((s) => s.stderr.includes('[stopped]'));
  assert.equal(io.child.exitCode, null, 'still running after the first Ctrl-C');
  io.child.kill('SIGINT');
  await io.waitFor((s) => s.stderr.includes('press Ctrl-C again or Ctrl-D to exit'));
  assert.equal(io.child.exitCode, null, 'still running after one Ctrl-C at the prompt');
  io.child.kill('SIGINT');
  const code = await io.exited;
  assert.equal(code, 0, io.stderr);
});

test('wasmlm chat without a template fails with a clear message', async () => {
  const io = startChat(['-m', PLAIN]);
  io.child.stdin.end('Hello\n');
  const code = await io.exited;
  assert.equal(code, 1);
  assert.match(io.stderr, /has no chat template.*--template FILE/);
});

test("Gemma's chat template renders in a synthetic gemma3 model: turns as <start_of_turn>user/model, control tokens single ids, <end_of_turn> ends generation", async () => {
  const file = path.join(DIR, 'gemma3-chat.gguf');
  makeModel(file, { ...SHAPE, layers: 1 }, 'f32', 15, { arch: 'gemma3' });
  const m = await loadModel(file);
  try {
    const msgs = [{ role: 'user', content: 'Hello ' }, { role: 'assistant', content: 'Hi' }, { role: 'user', content: 'How are you' }];
    const p = await m.applyChatTemplate(msgs);
    assert.equal(p, '<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi<end_of_turn>\n<start_of_turn>user\nHow are you<end_of_turn>\n<start_of_turn>model\n');
    const ids = await m.tokenize(p, { parseSpecial: true, addBos: false });
    assert.equal(ids[0], 2);   // <bos>
    assert.equal(ids.filter((t) => t === 4).length, 4);   // <start_of_turn>
    assert.equal(ids.filter((t) => t === 5).length, 3);   // <end_of_turn>
    // the template refuses a system turn, as Gemma's does
    await assert.rejects(m.applyChatTemplate([{ role: 'system', content: 'x' }, ...msgs]), /System role not supported/);
  } finally {
    await m.dispose();
  }
});
