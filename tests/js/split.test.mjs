// Split GGUFs (issue #28): `wasmlm split` / `wasmlm merge` round trips, and
// the parts loaded from a Node path, from URLs (a local server on 127.0.0.1)
// and as Blobs/Files, each giving the very logits of the single file; every
// part missing, twice, out of order or of another split is refused naming it.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODEL_PATH, runCli } from './helpers.mjs';
import { withServer, serveFiles } from './servers.mjs';
import { loadModel } from '../../web/index.js';
import { parseSplitName, splitPartNames, splitPartUrls, checkSplitNames } from '../../web/split.js';
import { splitGguf, mergeGguf, parseSize, readGgufHeader } from '../../models/gguf-split.js';

const MODEL = fs.readFileSync(MODEL_PATH);
const TOKENS = [1, 403, 407, 261, 378];
const LONG = { timeout: 120000 };

const dirs = [];
function tmpdir() { const d = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-split-')); dirs.push(d); return d; }
test.after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });

/** stories260K copied into a fresh directory as NAME.gguf, split into parts of at most `max` bytes. */
function splitCopy(max, name = 'story') {
  const dir = tmpdir();
  const file = path.join(dir, `${name}.gguf`);
  fs.writeFileSync(file, MODEL);
  return { dir, file, ...splitGguf(file, max) };
}

/** Every logits row of TOKENS from a model source. */
async function logitsOf(source, options = {}) {
  const m = await loadModel(source, { threads: 1, ...options });
  try {
    return { rows: await m.logits(TOKENS, { all: true }), info: m.info };
  } finally {
    await m.dispose();
  }
}

let reference;
async function referenceRows() {
  reference = reference || (await logitsOf(MODEL_PATH)).rows;
  return reference;
}

function sameRows(a, b) {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) assert.deepEqual(Buffer.from(a[i].buffer), Buffer.from(b[i].buffer), `logits row ${i}`);
}

async function rejectsWith(p, code, ...patterns) {
  await assert.rejects(p, (e) => {
    assert.equal(e.code, code, `${e.code}: ${e.message}`);
    for (const re of patterns) assert.match(e.message, re);
    return true;
  });
}

/** Runs fn(url) with the files of `dir` served at /NAME (whole, no Range); `missing` names are 404. */
function withDir(dir, fn, { missing = new Set() } = {}) {
  const file = (p) => (missing.has(path.basename(p)) ? null : path.join(dir, path.basename(p)));
  return withServer(serveFiles(file, { ranges: false }), fn);
}

// ---- names and sizes ------------------------------------------------------------------

test('part names: parse, list, URLs; sizes with K/M/G', () => {
  assert.deepEqual(parseSplitName('/a/b/m-00002-of-00003.gguf'), { prefix: '/a/b/m', no: 2, count: 3 });
  assert.equal(parseSplitName('m.gguf'), null);
  assert.equal(parseSplitName('m-00001-of-00001.gguf'), null, 'a split of one part is a plain file');
  assert.deepEqual(splitPartNames('x/m-00001-of-00002.gguf'), ['x/m-00001-of-00002.gguf', 'x/m-00002-of-00002.gguf']);
  assert.throws(() => splitPartNames('m-00002-of-00003.gguf'), (e) => e.code === 'BAD_FILE' && /load the first part, m-00001-of-00003\.gguf/.test(e.message));
  assert.deepEqual(splitPartUrls('https://h/r/m-00001-of-00002.gguf?download=1'),
    ['https://h/r/m-00001-of-00002.gguf?download=1', 'https://h/r/m-00002-of-00002.gguf?download=1']);
  assert.equal(splitPartUrls('https://h/r/m.gguf'), null);
  assert.equal(parseSize('2G'), 2 * 1024 ** 3);
  assert.equal(parseSize('500M'), 500 * 1024 ** 2);
  assert.equal(parseSize('64k'), 65536);
  assert.equal(parseSize('1.5KiB'), 1536);
  assert.equal(parseSize('4096'), 4096);
  for (const bad of ['', '2X', '-1G', '0', 'G']) assert.throws(() => parseSize(bad), (e) => e.code === 'BAD_OPTION', bad);
});

// ---- split and merge --------------------------------------------------------------------

test('split -> merge gives back the very bytes; every part within --max-size; tensors whole', () => {
  const s = splitCopy(400 * 1024);
  assert.equal(s.parts.length, 3);
  assert.equal(s.identical, true);
  assert.deepEqual(s.parts.map((p) => path.basename(p)), ['story-00001-of-00003.gguf', 'story-00002-of-00003.gguf', 'story-00003-of-00003.gguf']);
  for (const size of s.sizes) assert.ok(size <= 400 * 1024, `part of ${size} bytes`);
  const whole = readGgufHeader(s.file);
  const heads = s.parts.map((p) => readGgufHeader(p));
  assert.deepEqual(heads.flatMap((h) => h.tensors.map((t) => t.name)), whole.tensors.map((t) => t.name));
  // the first part carries the metadata; the others only the split keys
  assert.equal(heads[0].kv.length, whole.kv.length + 3);
  assert.deepEqual(heads[1].kv.map((e) => e.key), ['split.no', 'split.count', 'split.tensors.count']);
  const out = path.join(s.dir, 'merged.gguf');
  mergeGguf(s.parts[0], out);
  assert.ok(fs.readFileSync(out).equals(MODEL), 'merged bytes differ from the original');
});

test('a file whose tensors are not in table order: merge gives the same model, not the same bytes (and says so)', LONG, async () => {
  // stories260K with two same-size tensors' data swapped, and their offsets with them
  const h = readGgufHeader(MODEL_PATH);
  assert.equal(h.canonical, true);
  const [a, b] = h.tensors.flatMap((t, i) => h.tensors.slice(i + 1).filter((u) => u.nbytes === t.nbytes).map((u) => [t, u]))[0];
  const bytes = Buffer.from(MODEL);
  const offsetField = (t) => {   // in the tensor table: u64 name length, name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset
    const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(Buffer.byteLength(t.name)));
    const at = bytes.indexOf(Buffer.concat([len, Buffer.from(t.name)]), 24);
    assert.ok(at > 0);
    return at + 8 + Buffer.byteLength(t.name) + 4 + 8 * t.nDims + 4;
  };
  bytes.writeBigUInt64LE(BigInt(b.offset), offsetField(a));
  bytes.writeBigUInt64LE(BigInt(a.offset), offsetField(b));
  MODEL.copy(bytes, h.dataStart + b.offset, h.dataStart + a.offset, h.dataStart + a.offset + a.nbytes);
  MODEL.copy(bytes, h.dataStart + a.offset, h.dataStart + b.offset, h.dataStart + b.offset + b.nbytes);
  const dir = tmpdir();
  const file = path.join(dir, 'shuffled.gguf');
  fs.writeFileSync(file, bytes);
  assert.equal(readGgufHeader(file).canonical, false);
  sameRows((await logitsOf(file)).rows, await referenceRows());
  const cli = await runCli(['split', file, '--max-size', '500K']);
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(cli.stderr, /not laid out in table order: merging the parts gives the same model, not the same bytes/);
  const out = path.join(dir, 'merged.gguf');
  const m = await runCli(['merge', path.join(dir, 'shuffled-00001-of-00003.gguf'), out]);
  assert.equal(m.code, 0, m.stderr);
  assert.ok(!fs.readFileSync(out).equals(bytes));
  sameRows((await logitsOf(out)).rows, await referenceRows());
});

test('CLI: split and merge, their errors', LONG, async () => {
  const dir = tmpdir();
  const file = path.join(dir, 'm.gguf');
  fs.writeFileSync(file, MODEL);
  let r = await runCli(['split', file, '--max-size', '600K']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /m-00001-of-00002\.gguf: \d+ bytes/);
  // one tensor over the limit gets a part of its own, and the CLI says so
  r = await runCli(['split', file, '--max-size', '100K']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /alone (is|are) over --max-size/);
  assert.equal((await runCli(['split', file])).code, 2);
  r = await runCli(['split', file, '--max-size', '12Q']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--max-size: a size such as 2G/);
  r = await runCli(['split', path.join(dir, fs.readdirSync(dir).find((f) => /00001-of/.test(f))), '--max-size', '1M']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /already a part of a split GGUF/);
  const parts = splitGguf(file, 600 * 1024).parts;
  r = await runCli(['merge', parts[1], path.join(dir, 'x.gguf')]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /part 2 of 2 of a split GGUF: load the first part/);
  r = await runCli(['merge', parts[0], parts[1]]);
  assert.match(r.stderr, /the output .* is one of the parts/);
  fs.rmSync(parts[1]);
  r = await runCli(['merge', parts[0], path.join(dir, 'x.gguf')]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /split GGUF part 2 of 2 \(.*m-00002-of-00002\.gguf\) is missing/);
  assert.equal(fs.existsSync(path.join(dir, 'x.gguf')), false);
});

// ---- loading: Node paths ------------------------------------------------------------------

test('the first part of a split GGUF (a path) loads every part: the same logits as the single file', LONG, async () => {
  const s = splitCopy(400 * 1024);
  const seen = [];
  const { rows, info } = await logitsOf(s.parts[0], { onProgress: (p) => seen.push(p) });
  sameRows(rows, await referenceRows());
  assert.equal(info.parts, 3);
  assert.equal(info.fileSize, s.sizes.reduce((a, b) => a + b, 0));
  assert.deepEqual([...new Set(info.tensors.map((t) => t.part))], [0, 1, 2]);
  assert.equal(seen.at(-1).loaded, seen.at(-1).total);
  assert.equal(seen.at(-1).total, info.fileSize);
  // the CLI generates from it as from the single file
  const a = await runCli(['generate', '-m', s.parts[0], '-p', 'Once', '-n', '12', '--temp', '0']);
  const b = await runCli(['generate', '-m', s.file, '-p', 'Once', '-n', '12', '--temp', '0']);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(a.stdout, b.stdout);
});

test('paths: a missing part, a later part, parts out of order or of another split are refused naming them', LONG, async () => {
  const s = splitCopy(400 * 1024);
  await rejectsWith(loadModel(s.parts[1]), 'BAD_FILE', /part 2 of 3 of a split GGUF: load the first part, .*story-00001-of-00003\.gguf/);
  // parts out of order: the second and third swapped on disk
  const tmp = s.parts[1] + '.x';
  fs.renameSync(s.parts[1], tmp); fs.renameSync(s.parts[2], s.parts[1]); fs.renameSync(tmp, s.parts[2]);
  await rejectsWith(loadModel(s.parts[0]), 'BAD_FORMAT', /split parts out of order: place 2 holds part 3 of 3/);
  // a part of another split of the same file (cut elsewhere, also in 3 parts): its tensors do not add up or repeat
  const three = splitCopy(500 * 1024);
  assert.equal(three.parts.length, 3);
  const s2 = splitCopy(400 * 1024);
  fs.copyFileSync(three.parts[1], s2.parts[1]);
  await rejectsWith(loadModel(s2.parts[0]), 'BAD_FORMAT', /tensor .* is in split parts|parts hold \d+ tensors/);
  // a part of a split of another count, renamed into this one
  const other = splitCopy(600 * 1024);
  assert.equal(other.parts.length, 2);
  const s3 = splitCopy(400 * 1024);
  fs.copyFileSync(other.parts[1], s3.parts[2]);
  await rejectsWith(loadModel(s3.parts[0]), 'BAD_FORMAT', /part 3 belongs to another split GGUF: split\.count 2, the first part says 3/);
  // a missing part is named before anything is read
  fs.rmSync(s3.parts[1]);
  await rejectsWith(loadModel(s3.parts[0]), 'BAD_FILE', /split GGUF part 2 of 3 \(.*story-00002-of-00003\.gguf\) is missing/);
  // a part that is not a GGUF file
  const s4 = splitCopy(400 * 1024);
  fs.writeFileSync(s4.parts[2], 'PK\x03\x04 not a model');
  await rejectsWith(loadModel(s4.parts[0]), 'BAD_FILE', /split GGUF part 3 of 3 \(.*\): not a GGUF file/);
  // the first part alone, under another name: the engine says it has other parts
  const lone = path.join(s4.dir, 'lone.gguf');
  fs.copyFileSync(s4.parts[0], lone);
  await rejectsWith(loadModel(lone), 'BAD_FORMAT', /part 1 of a split GGUF of 3 parts: load it with the other parts/);
});

// ---- loading: URLs ------------------------------------------------------------------------

test('a URL of the first part fetches every part in turn; a part the server lacks is BAD_FILE naming its URL', LONG, async () => {
  const s = splitCopy(400 * 1024);
  await withDir(s.dir, async (base) => {
    const seen = [];
    const { rows, info } = await logitsOf(`${base}/story-00001-of-00003.gguf`, { onProgress: (p) => seen.push(p) });
    sameRows(rows, await referenceRows());
    assert.equal(info.parts, 3);
    assert.equal(seen.at(-1).loaded, info.fileSize);
    await rejectsWith(loadModel(`${base}/story-00002-of-00003.gguf`), 'BAD_FILE', /load the first part/);
  });
  await withDir(s.dir, async (base) => {
    const url = `${base}/story-00003-of-00003.gguf`;
    await assert.rejects(loadModel(`${base}/story-00001-of-00003.gguf`), (e) => {
      assert.equal(e.code, 'BAD_FILE');
      assert.equal(e.part, 3);
      assert.equal(e.status, 404);
      assert.equal(e.url, url);
      assert.match(e.message, /split GGUF part 3 of 3 is missing: .*story-00003-of-00003\.gguf \(HTTP 404\)/);
      return true;
    });
  }, { missing: new Set(['story-00003-of-00003.gguf']) });
  // sha256 names one file: refused for parts
  await rejectsWith(loadModel('http://127.0.0.1:9/m-00001-of-00002.gguf', { sha256: 'a'.repeat(64) }), 'BAD_OPTION', /split GGUF/);
});

// ---- loading: Blobs and Files ---------------------------------------------------------------

test('Blobs/Files of every part, in order, load as one model; names out of order, twice, missing or foreign are refused first', LONG, async () => {
  const s = splitCopy(400 * 1024);
  const files = s.parts.map((p) => new File([fs.readFileSync(p)], path.basename(p)));
  sameRows((await logitsOf(files)).rows, await referenceRows());
  // nameless Blobs and buffers too (the engine checks split.no)
  const blobs = s.parts.map((p) => new Blob([fs.readFileSync(p)]));
  sameRows((await logitsOf([blobs[0], new Uint8Array(fs.readFileSync(s.parts[1])), blobs[2]])).rows, await referenceRows());
  await rejectsWith(loadModel([blobs[0], blobs[2], blobs[1]]), 'BAD_FORMAT', /split parts out of order: place 2 holds part 3 of 3/);
  await rejectsWith(loadModel([blobs[0], blobs[1]]), 'BAD_FORMAT', /only 2 given \(part 3 is missing\)/);
  await rejectsWith(loadModel([files[0], files[2], files[1]]), 'BAD_FILE', /out of order: place 2 holds story-00003-of-00003\.gguf, expected story-00002-of-00003\.gguf/);
  await rejectsWith(loadModel([files[0], files[1], files[1]]), 'BAD_FILE', /story-00002-of-00003\.gguf is given twice \(places 2 and 3\)/);
  await rejectsWith(loadModel([files[0], files[1]]), 'BAD_FILE', /part 3 of 3 is missing: story-00003-of-00003\.gguf/);
  await rejectsWith(loadModel([files[0], files[2]]), 'BAD_FILE', /part 2 of 3 is missing: story-00002-of-00003\.gguf/);
  await rejectsWith(loadModel([files[0]]), 'BAD_FILE', /part 2 of 3 is missing/);
  const foreign = new File([fs.readFileSync(s.parts[1])], 'other-00002-of-00003.gguf');
  await rejectsWith(loadModel([files[0], foreign, files[2]]), 'BAD_FILE', /other-00002-of-00003\.gguf belongs to another split GGUF than story-00001-of-00003\.gguf/);
  const four = new File([fs.readFileSync(s.parts[1])], 'story-00002-of-00004.gguf');
  await rejectsWith(loadModel([files[0], four, files[2]]), 'BAD_FILE', /belongs to another split GGUF .*4 parts, not 3/);
  await rejectsWith(loadModel([files[0], 'story-00002-of-00003.gguf']), 'BAD_OPTION', /source\[1\]/);
  await rejectsWith(loadModel([]), 'BAD_OPTION', /must not be empty/);
  // one plain file in an array is that file
  sameRows((await logitsOf([new File([MODEL], 'plain.gguf')])).rows, await referenceRows());
  assert.doesNotThrow(() => checkSplitNames(['a.gguf']));
});
