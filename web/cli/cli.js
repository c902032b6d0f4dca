#!/usr/bin/env node
// The `wasmlm` command line (generate, chat, embed, info, quantize, tokenize, split, merge) over the JS API.
//
// Every flag that sets an API option is listed once in OPTION_FLAGS; its
// parsing, range check, default and help line come from web/options.js, so
// `wasmlm --help` is the reference (tests/js/cli.test.mjs checks it against
// the schema). generate writes exactly the generated continuation to stdout,
// streamed; statistics go to stderr.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import readline from 'node:readline';
import { loadModel, loadTokenizer, DEFAULT_SAMPLING } from '../index.js';
import { chatTemplateFor } from '../chat.js';
import { QUANT_TYPES } from '../protocol.js';
import { OPTIONS, METHODS, checkValue } from '../options.js';
import { resolveModel, isRegistryName, resolveHubModel } from '../../models/registry.js';
import { isHubId } from '../hub.js';
import { splitGguf, mergeGguf, parseSize } from '../../models/gguf-split.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const NATIVE_BIN = path.join(ROOT, 'build', 'wasmlm-native');

/**
 * CLI flags of API options: [option name in OPTIONS, flags, metavar]. Kind,
 * range, default and doc are the schema's; boolean options take no value.
 */
export const OPTION_FLAGS = [
  ['maxTokens', ['-n', '--max-tokens'], 'N'],
  ['temperature', ['--temp', '--temperature'], 'T'],
  ['topK', ['--top-k'], 'K'],
  ['topP', ['--top-p'], 'P'],
  ['minP', ['--min-p'], 'P'],
  ['typicalP', ['--typical', '--typical-p'], 'P'],
  ['repeatPenalty', ['--repeat-penalty'], 'R'],
  ['presencePenalty', ['--presence-penalty'], 'P'],
  ['frequencyPenalty', ['--frequency-penalty'], 'F'],
  ['repeatLastN', ['--repeat-last-n'], 'N'],
  ['seed', ['--seed'], 'S'],
  ['stop', ['--stop'], 'STR'],
  ['ignoreEos', ['--ignore-eos']],
  ['parseSpecial', ['--parse-special']],
  ['contextLength', ['--ctx'], 'N'],
  ['batchSize', ['--batch'], 'N'],
  ['kvType', ['--kv'], OPTIONS.kvType.values.join('|')],
  ['threads', ['-t', '--threads'], 'N'],
  ['hubToken', ['--hub-token'], 'TOKEN'],
  ['pooling', ['--pooling'], OPTIONS.pooling.values.join('|')],
];

// flags of the CLI itself (no API option behind them)
const CLI_VALUE_FLAGS = { '-m': 'model', '--model': 'model', '-p': 'prompt', '--prompt': 'prompt', '--system': 'system', '--template': 'template', '--max-size': 'maxSize' };
const CLI_BOOL_FLAGS = { '--native': 'native', '--json': 'json', '--no-bos': 'noBos', '--no-normalize': 'noNormalize', '-h': 'help', '--help': 'help' };

const VALUE_FLAGS = { ...CLI_VALUE_FLAGS };
const BOOL_FLAGS = { ...CLI_BOOL_FLAGS };
for (const [name, flags] of OPTION_FLAGS) for (const f of flags) (OPTIONS[name].kind === 'boolean' ? BOOL_FLAGS : VALUE_FLAGS)[f] = name;

/** One help line per option flag: flags, metavar, the schema's doc and default. */
function optionLines(names) {
  return OPTION_FLAGS.filter(([name]) => names.includes(name)).map(([name, flags, meta]) => {
    const o = OPTIONS[name];
    const head = `  ${flags.join(', ')}${meta ? ` ${meta}` : ''}`;
    let def = '';
    if (name === 'seed') def = ` (default ${o.default} = 0x${o.default.toString(16).toUpperCase()})`;
    else if (o.default !== undefined && o.kind !== 'boolean') def = ` (default ${o.default})`;
    const more = name === 'stop' ? ' (repeatable)' : '';
    return `${head.padEnd(30)} ${o.doc}${def}${more}`;
  });
}

/** The help text; `--native` appears only where this checkout has the native build (the npm package has none). */
export function usage({ native = fs.existsSync(NATIVE_BIN) } = {}) {
  const nat = native ? ' [--native]' : '';
  const sampling = OPTION_FLAGS.map(([n]) => n).filter((n) => !METHODS.loadModel.includes(n) && !METHODS.embed.includes(n));
  const loading = OPTION_FLAGS.map(([n]) => n).filter((n) => METHODS.loadModel.includes(n));
  const embedding = OPTION_FLAGS.map(([n]) => n).filter((n) => METHODS.embed.includes(n));
  return [
    'usage:',
    `  wasmlm generate -m MODEL -p PROMPT [sampling and loading options]${nat}`,
    '  wasmlm chat -m MODEL [--system TEXT] [--template FILE] [sampling and loading options]',
    '                  interactive, multi-turn, with the model\'s tokenizer.chat_template;',
    '                  Ctrl-C stops an answer; at the prompt Ctrl-C twice (or Ctrl-D) exits',
    `  wasmlm info MODEL [--json]${nat}`,
    `  wasmlm quantize IN OUT TYPE${nat}   (TYPE: ${Object.keys(QUANT_TYPES).join(' | ')})`,
    '  wasmlm tokenize -m MODEL -p TEXT [--no-bos] [--parse-special]   MODEL may hold a vocabulary only (ggml-vocab-*.gguf);',
    '                  only the file\'s metadata is read',
    '  wasmlm embed -m MODEL [-p TEXT ...] [--pooling P] [--no-normalize]   one JSON line per text',
    '                  ({index, text, embedding}); texts: each -p, else every non-empty line of stdin',
    '  wasmlm split IN --max-size SIZE   writes IN-00001-of-0000N.gguf ... beside IN (IN without .gguf),',
    '                  each at most SIZE (2G, 500M, 64K or bytes) unless one tensor is bigger; tensors stay whole',
    '  wasmlm merge FIRST OUT   joins the parts of a split GGUF, given its first part, into OUT',
    '',
    'MODEL: a .gguf path (the first part of a split GGUF loads every part), a URL, a registry name (stories260K),',
    '       or a hub id: hf:OWNER/REPO:Q4_K_M (the file of that quantization), hf:OWNER/REPO/PATH.gguf; @REVISION after REPO.',
    '',
    'sampling (generate, chat):',
    ...optionLines(sampling),
    'embed:',
    ...optionLines(embedding),
    `  ${'--no-normalize'.padEnd(28)} the pooled vectors as they are (the API's normalize: false; default: length 1)`,
    'loading:',
    ...optionLines(loading),
    ...(native ? ['', '--native (or WASMLM_NATIVE=1) runs this checkout\'s build/wasmlm-native with the same arguments.'] : []),
    'Env: WASMLM_MODELS (directory of NAME.gguf), WASMLM_CACHE (download cache), WASMLM_HUB_URL (hub for hf: ids),',
    '     HF_TOKEN (access token for gated / private repositories on huggingface.co), WASMLM_HUB_TOKEN (the same, any hub);',
    '     prefer these to --hub-token, which other users of the machine can see in the process list.',
  ].join('\n');
}

class UsageError extends Error {}

/** A flag's value as its option's kind, checked against the schema's range (errors name the flag). */
function optionValue(name, flag, raw) {
  const kind = OPTIONS[name].kind;
  if (kind === 'int' || kind === 'number') {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`option ${flag} needs a number, got '${raw}'`);
    return checkValue(name, n, undefined, flag);
  }
  if (kind === 'seed') {
    let v;
    try { v = BigInt(raw); } catch { throw new UsageError(`option ${flag} needs an integer, got '${raw}'`); }
    return checkValue(name, v, undefined, flag);
  }
  return checkValue(name, raw, undefined, flag);
}

/** Parses argv (after the node and script entries) into {cmd, opts, positional}. */
export function parseArgs(argv) {
  const [cmd, ...rest] = argv;
  const opts = { stop: [] };
  const positional = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    let key = a, val;
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    if (eq > 0) { key = a.slice(0, eq); val = a.slice(eq + 1); }
    if (VALUE_FLAGS[key]) {
      const name = VALUE_FLAGS[key];
      if (val === undefined) {
        if (i + 1 >= rest.length) throw new UsageError(`option ${key} needs a value`);
        val = rest[++i];
      }
      if (name === 'stop') opts.stop.push(val);
      else if (name === 'prompt') { opts.prompt = val; (opts.prompts ||= []).push(val); }
      else opts[name] = OPTIONS[name] && !CLI_VALUE_FLAGS[key] ? optionValue(name, key, val) : val;
    } else if (BOOL_FLAGS[key]) {
      opts[BOOL_FLAGS[key]] = true;
    } else if (a.startsWith('-') && a !== '-' && !/^-\d/.test(a)) {
      throw new UsageError(`unknown option ${a}`);
    } else positional.push(a);
  }
  return { cmd, opts, positional };
}

/** A BAD_OPTION message in the CLI's words: the flag the user typed, not the API's option name. */
function flagMessage(e) {
  const flag = Object.keys(VALUE_FLAGS).filter((f) => f.startsWith('--') && VALUE_FLAGS[f] === e.option)[0];
  return flag ? e.message.replace(`option ${e.option}`, `option ${flag}`) : e.message;
}

/** Builds the native CLI's argument list (explicit values for every sampling default). */
export function nativeArgs(cmd, opts, positional, modelPath) {
  if (cmd === 'generate') {
    const s = { ...DEFAULT_SAMPLING, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) };
    const args = ['generate', '-m', modelPath, '-p', opts.prompt ?? '',
      '-n', String(s.maxTokens), '--temp', String(s.temperature), '--top-k', String(s.topK),
      '--top-p', String(s.topP), '--min-p', String(s.minP), '--typical', String(s.typicalP), '--repeat-penalty', String(s.repeatPenalty),
      '--presence-penalty', String(s.presencePenalty), '--frequency-penalty', String(s.frequencyPenalty),
      '--repeat-last-n', String(s.repeatLastN), '--seed', String(s.seed)];
    if (opts.contextLength != null) args.push('--ctx', String(opts.contextLength));
    if (opts.kvType) args.push('--kv', opts.kvType);
    if (opts.threads != null) args.push('--threads', String(opts.threads));
    if (opts.ignoreEos) args.push('--ignore-eos');
    return args;
  }
  if (cmd === 'info') return ['info', modelPath];
  if (cmd === 'quantize') return ['quantize', modelPath, positional[1], positional[2]];
  throw new UsageError(`--native does not support '${cmd}'`);
}

async function modelToPath(spec, opts) {
  if (await isRegistryName(spec)) {
    const r = await resolveModel(spec, { onProgress: progressPrinter('download') });
    return r.path;
  }
  if (isHubId(spec)) return (await resolveHubModel(spec, { onProgress: progressPrinter('download'), hubToken: opts.hubToken })).path;
  if (/^file:/i.test(spec)) return fileURLToPath(spec);
  if (/^https?:/i.test(spec)) throw new UsageError('--native needs a local file or a registry name, not a URL');
  return spec;
}

function progressPrinter(label) {
  if (!process.stderr.isTTY) return undefined;
  let last = 0;
  return ({ loaded, total }) => {
    const t = Date.now();
    if (t - last < 200 && loaded !== total) return;
    last = t;
    const pct = total ? ` ${(100 * loaded / total).toFixed(0)}%` : '';
    process.stderr.write(`\r${label}: ${(loaded / 1048576).toFixed(1)} MiB${pct}   ${loaded === total ? '\n' : ''}`);
  };
}

function runNative(args) {
  if (!fs.existsSync(NATIVE_BIN)) {
    // the npm package ships the wasm engines only
    throw new UsageError(`--native runs ${NATIVE_BIN}, which is not there: it is built in a source checkout ('make native'), not shipped in the npm package`);
  }
  return new Promise((resolve, reject) => {
    const child = spawn(NATIVE_BIN, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code, sig) => resolve(sig ? 128 + (os.constants.signals[sig] || 1) : code ?? 1));
  });
}

function writeOut(s) {
  return new Promise((resolve) => { if (process.stdout.write(s)) resolve(); else process.stdout.once('drain', resolve); });
}

function fmtValue(v) {
  if (v && typeof v === 'object' && !Array.isArray(v) && 'arrayOf' in v) {
    return `[${v.head.map(fmtScalar).join(', ')}, ... (${v.count} ${v.arrayOf})]`;
  }
  if (Array.isArray(v)) return `[${v.map(fmtScalar).join(', ')}]`;
  return fmtScalar(v);
}
function fmtScalar(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > 200 ? v.slice(0, 200) + '...' : v);
  if (typeof v === 'bigint') return v.toString();
  if (v && typeof v === 'object') return fmtValue(v);
  return String(v);
}

export function formatInfo(info) {
  const lines = [];
  for (const [k, v] of Object.entries(info.metadata)) lines.push(`${k} = ${fmtValue(v)}`);
  lines.push('');
  const h = info.hparams;
  lines.push(`hparams: vocab ${h.nVocab}, ctx_train ${h.nCtxTrain}, embd ${h.nEmbd}, layers ${h.nLayer}, heads ${h.nHead} (kv ${h.nHeadKv}), head_dim ${h.headDim}${h.headDimV !== undefined && h.headDimV !== h.headDim ? ` (v ${h.headDimV})` : ''}, ff ${h.nFf}, rot ${h.nRot} ${h.ropeType || 'norm'}${h.ropeScaled ? ' scaled' : ''}, rope_base ${h.ropeFreqBase}, rms_eps ${h.rmsEps}, bos ${h.bosId}, eos ${h.eosId}`);
  lines.push(`params: ${info.paramCount}, file: ${info.fileSize} bytes`);
  lines.push('');
  lines.push(`${'tensor'.padEnd(32)} ${'type'.padEnd(6)} ${'shape'.padEnd(24)} offset`);
  for (const t of info.tensors) {
    lines.push(`${t.name.padEnd(32)} ${t.typeName.padEnd(6)} ${t.dims.join(' x ').padEnd(24)} ${t.offset}`);
  }
  return lines.join('\n') + '\n';
}

async function cmdGenerate(opts) {
  if (!opts.model) throw new UsageError('generate needs -m MODEL');
  const model = await loadModel(opts.model, {
    contextLength: opts.contextLength, batchSize: opts.batchSize, kvType: opts.kvType, threads: opts.threads, hubToken: opts.hubToken,
    onProgress: progressPrinter('loading'),
  });
  try {
    const gen = model.generate(opts.prompt ?? '', {
      maxTokens: opts.maxTokens, temperature: opts.temperature, topK: opts.topK, topP: opts.topP,
      minP: opts.minP, typicalP: opts.typicalP, repeatPenalty: opts.repeatPenalty, presencePenalty: opts.presencePenalty,
      frequencyPenalty: opts.frequencyPenalty, repeatLastN: opts.repeatLastN,
      seed: opts.seed, stop: opts.stop, ignoreEos: opts.ignoreEos, parseSpecial: opts.parseSpecial,
    });
    let r;
    while (!(r = await gen.next()).done) if (r.value.text) await writeOut(r.value.text);
    const s = r.value.stats;
    process.stderr.write(`\n[wasmlm] prompt ${s.promptTokens} tokens, ${s.prefillTokensPerSec.toFixed(1)} tok/s | ` +
      `generated ${s.generatedTokens} tokens, ${s.decodeTokensPerSec.toFixed(1)} tok/s | finish: ${r.value.finishReason}\n`);
  } finally {
    await model.dispose();
  }
  return 0;
}

async function cmdInfo(opts, positional) {
  const spec = positional[0] || opts.model;
  if (!spec) throw new UsageError('info needs MODEL');
  const model = await loadModel(spec, { contextLength: 16, hubToken: opts.hubToken });
  try {
    if (opts.json) {
      process.stdout.write(JSON.stringify(model.info, (k, v) => (typeof v === 'bigint' ? v.toString() : v), 2) + '\n');
    } else {
      await writeOut(formatInfo(model.info));
    }
  } finally {
    await model.dispose();
  }
  return 0;
}

async function cmdQuantize(opts, positional) {
  const [inp, out, type] = positional;
  if (!inp || !out || !type) throw new UsageError('quantize needs IN OUT TYPE');
  if (!Object.hasOwn(QUANT_TYPES, type)) throw new UsageError(`unknown type '${type}' (${Object.keys(QUANT_TYPES).join(', ')})`);
  const model = await loadModel(inp, { contextLength: 16, hubToken: opts.hubToken });
  try {
    const r = await model.quantize(type, { outPath: path.resolve(out) });
    await writeOut(r.report + (r.report.endsWith('\n') || !r.report ? '' : '\n'));
    await writeOut(`wrote ${out} (${r.size} bytes)\n`);
  } finally {
    await model.dispose();
  }
  return 0;
}

async function cmdTokenize(opts, positional) {
  const spec = opts.model || positional[0];
  if (!spec) throw new UsageError('tokenize needs -m MODEL');
  const tok = await loadTokenizer(spec, { hubToken: opts.hubToken });   // the vocabulary only: no weights are read
  try {
    const ids = await tok.tokenize(opts.prompt ?? positional[1] ?? '', { addBos: opts.noBos ? false : undefined, parseSpecial: opts.parseSpecial });
    await writeOut(JSON.stringify(ids) + '\n');
  } finally {
    await tok.dispose();
  }
  return 0;
}

async function readStdin() {
  const parts = [];
  for await (const chunk of process.stdin) parts.push(chunk);
  return Buffer.concat(parts).toString('utf8');
}

/** Embeddings: one JSON line {index, text, embedding} per text (each -p, else each non-empty stdin line). */
async function cmdEmbed(opts, positional) {
  const spec = opts.model || positional[0];
  if (!spec) throw new UsageError('embed needs -m MODEL');
  let texts = opts.prompts || [];
  if (!texts.length && !process.stdin.isTTY) texts = (await readStdin()).split(/\r?\n/).filter((l) => l.trim() !== '');
  if (!texts.length) throw new UsageError('embed needs texts: -p TEXT (repeatable) or lines on stdin');
  const model = await loadModel(spec, {
    contextLength: opts.contextLength, batchSize: opts.batchSize, kvType: opts.kvType, threads: opts.threads,
    onProgress: progressPrinter('loading'),
  });
  try {
    const t0 = performance.now();
    const vectors = await model.embed(texts, { pooling: opts.pooling, normalize: !opts.noNormalize });
    const ms = performance.now() - t0;
    for (let i = 0; i < texts.length; i++) await writeOut(JSON.stringify({ index: i, text: texts[i], embedding: Array.from(vectors[i]) }) + '\n');
    const e = model.info.embedding;
    process.stderr.write(`[wasmlm] ${texts.length} text${texts.length === 1 ? '' : 's'}, ${e.length} dims, pooling ${opts.pooling && opts.pooling !== 'model' ? opts.pooling : e.pooling}` +
      `${opts.noNormalize ? '' : ', normalized'} | ${(texts.length / (ms / 1000)).toFixed(1)} texts/s\n`);
  } finally {
    await model.dispose();
  }
  return 0;
}

/**
 * What Ctrl-C does in `wasmlm chat`, as a pure step for tests: while an answer
 * is generated it stops that answer; at the prompt the first one warns and a
 * second in a row exits (a line typed in between starts over), as in Node's REPL.
 * Returns [action, next state]; action is 'stop', 'warn' or 'exit'.
 */
export function chatInterrupt({ answering, armed }) {
  if (answering) return ['stop', { answering, armed: false }];
  if (armed) return ['exit', { answering, armed }];
  return ['warn', { answering, armed: true }];
}

/**
 * Interactive chat: reads user turns line by line from stdin, streams each
 * answer, keeps the whole conversation as context (chatInterrupt: Ctrl-C;
 * the end of stdin ends the session).
 */
async function cmdChat(opts) {
  if (!opts.model) throw new UsageError('chat needs -m MODEL');
  const template = opts.template ? fs.readFileSync(opts.template, 'utf8') : undefined;
  const model = await loadModel(opts.model, {
    contextLength: opts.contextLength, batchSize: opts.batchSize, kvType: opts.kvType, threads: opts.threads, hubToken: opts.hubToken,
    onProgress: progressPrinter('loading'),
  });
  const tty = !!(process.stdin.isTTY && process.stdout.isTTY);
  let rl = null;
  let answering = null; // AbortController of the answer being generated
  let closed = false;
  let armed = false;     // Ctrl-C was pressed once at the prompt
  const onSigint = () => {
    let action;
    [action, { armed }] = chatInterrupt({ answering: !!answering, armed });
    if (action === 'stop') answering.abort();
    else if (action === 'warn') {
      process.stderr.write('\n(press Ctrl-C again or Ctrl-D to exit)\n');
      if (rl && !closed) rl.prompt();
    } else {
      closed = true;
      if (rl) rl.close();
    }
  };
  process.on('SIGINT', onSigint);     // pipes: the signal itself
  try {
    chatTemplateFor(model.info, { template }); // no template: fail before the first prompt
    rl = readline.createInterface({ input: process.stdin, output: process.stdout, terminal: tty, prompt: '> ' });
    rl.on('SIGINT', onSigint);          // terminal: readline sees Ctrl-C as a key
    rl.on('close', () => { closed = true; });
    const history = opts.system ? [{ role: 'system', content: opts.system }] : [];
    const sampling = {
      maxTokens: opts.maxTokens, temperature: opts.temperature, topK: opts.topK, topP: opts.topP,
      minP: opts.minP, typicalP: opts.typicalP, repeatPenalty: opts.repeatPenalty, presencePenalty: opts.presencePenalty,
      frequencyPenalty: opts.frequencyPenalty, repeatLastN: opts.repeatLastN,
      seed: opts.seed, stop: opts.stop, ignoreEos: opts.ignoreEos,
    };
    if (tty) process.stderr.write(`[wasmlm] chatting with ${model.info.name || opts.model}: Ctrl-C stops an answer; at the prompt Ctrl-C twice (or Ctrl-D) exits\n`);
    rl.prompt();
    for await (const line of rl) {
      armed = false;
      const text = line.trim();
      if (text === '') { if (!closed) rl.prompt(); continue; }
      history.push({ role: 'user', content: text });
      answering = new AbortController();
      let answer = '';
      try {
        for (;;) {
          try {
            for await (const c of model.chat(history, { ...sampling, template, signal: answering.signal })) {
              if (c.text) { answer += c.text; await writeOut(c.text); }
            }
            break;
          } catch (e) {
            // the conversation outgrew the context: forget the oldest exchange and retry
            const first = history.findIndex((m) => m.role !== 'system');
            if (e && e.code === 'CONTEXT_FULL' && answer === '' && first >= 0 && history.length - first > 1) {
              history.splice(first, 2);
              continue;
            }
            throw e;
          }
        }
      } catch (e) {
        if (!(e && e.name === 'AbortError')) {
          answering = null;
          history.pop();
          process.stderr.write(`\nerror: ${e && e.message || e}\n`);
          if (!closed) rl.prompt();
          continue;
        }
        process.stderr.write('\n[stopped]');
      }
      answering = null;
      history.push({ role: 'assistant', content: answer });
      await writeOut('\n');
      if (!closed) rl.prompt();
    }
  } finally {
    process.removeListener('SIGINT', onSigint);
    if (rl) rl.close();
    await model.dispose();
  }
  if (tty) process.stdout.write('\n');
  return 0;
}

function cmdSplit(opts, positional) {
  if (positional.length !== 1) throw new UsageError('split needs IN (one GGUF file) and --max-size SIZE');
  if (opts.maxSize === undefined) throw new UsageError('split needs --max-size SIZE (e.g. 2G)');
  const r = splitGguf(positional[0], parseSize(opts.maxSize));
  r.parts.forEach((p, i) => process.stderr.write(`${p}: ${r.sizes[i]} bytes\n`));
  if (r.oversized.length) process.stderr.write(`note: ${r.oversized.join(', ')} alone ${r.oversized.length > 1 ? 'are' : 'is'} over --max-size: each has a part of its own\n`);
  if (!r.identical) process.stderr.write('note: the tensors of the input are not laid out in table order: merging the parts gives the same model, not the same bytes\n');
  return 0;
}

function cmdMerge(positional) {
  if (positional.length !== 2) throw new UsageError('merge needs FIRST (the first part: NAME-00001-of-0000N.gguf) and OUT');
  const r = mergeGguf(positional[0], positional[1]);
  process.stderr.write(`${positional[1]}: ${r.size} bytes from ${r.parts.length} parts\n`);
  return 0;
}

export async function main(argv) {
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) { process.stderr.write(`error: ${e.message}\n${usage()}\n`); return 2; }
    if (e && e.code === 'BAD_OPTION') { process.stderr.write(`error: ${e.message}\n`); return 2; }
    throw e;
  }
  const { cmd, opts, positional } = parsed;
  if (!cmd || opts.help || cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(usage() + '\n');
    return cmd ? 0 : 2;
  }
  try {
    const native = opts.native || process.env.WASMLM_NATIVE === '1';
    if (native) {
      const spec = cmd === 'generate' ? opts.model : positional[0];
      if (!spec) throw new UsageError(`${cmd} needs a model`);
      return await runNative(nativeArgs(cmd, opts, positional, await modelToPath(spec, opts)));
    }
    switch (cmd) {
      case 'generate': return await cmdGenerate(opts);
      case 'info': return await cmdInfo(opts, positional);
      case 'quantize': return await cmdQuantize(opts, positional);
      case 'tokenize': return await cmdTokenize(opts, positional);
      case 'embed': return await cmdEmbed(opts, positional);
      case 'chat': return await cmdChat(opts);
      case 'split': return cmdSplit(opts, positional);
      case 'merge': return cmdMerge(positional);
      default: throw new UsageError(`unknown command '${cmd}'`);
    }
  } catch (e) {
    if (e instanceof UsageError) { process.stderr.write(`error: ${e.message}\n${usage()}\n`); return 2; }
    if (e && e.code === 'BAD_OPTION') { process.stderr.write(`error: ${flagMessage(e)}\n`); return 2; }
    process.stderr.write(`error: ${e && e.message || e}\n`);
    return 1;
  }
}

const invokedDirectly = (() => {
  try { return fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url); } catch { return false; }
})();
if (invokedDirectly) {
  // a closed pipe (wasmlm generate ... | head) ends the program quietly
  process.stdout.on('error', (e) => { if (e.code === 'EPIPE') process.exit(0); throw e; });
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
}
