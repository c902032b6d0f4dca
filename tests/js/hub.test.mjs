// Hub ids (hf:OWNER/REPO...) and resumable downloads (issue #28), against a
// local server on 127.0.0.1 that imitates the hub: the tree listing (in
// pages, through the Link header), resolve URLs that redirect to a "CDN"
// path, ETags, Range / If-Range / If-None-Match, a connection cut mid-body
// and a file that changes (a new ETag). No network.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli, isError } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { parseHubId, pickFile, matchesQuant, hubBaseUrl, nextLink, isHubId } from '../../web/hub.js';
import { resolveHubModel, hubCacheName, downloadModel, sweepTempFiles, MAX_RESUMES, PARTIAL_DAYS } from '../../models/registry.js';
import { makeModel } from '../../models/make-model.js';
import { withHub, sha } from './hub-server.mjs';

const LONG = { timeout: 120000 };
const tmpdir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-hub-'));

// two versions of one model file (different weights, same shape)
const DIR = tmpdir();
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 192, ctx: 256, vocab: 512 };
makeModel(path.join(DIR, 'v1.gguf'), SHAPE, 'f32', 1);
makeModel(path.join(DIR, 'v2.gguf'), SHAPE, 'f32', 2);
const V1 = fs.readFileSync(path.join(DIR, 'v1.gguf'));
const V2 = fs.readFileSync(path.join(DIR, 'v2.gguf'));
assert.notEqual(sha(V1), sha(V2));

const cdnGets = (log) => log.filter((l) => l.path.startsWith('/cdn/'));

// ---- ids -----------------------------------------------------------------------

test('hub ids parse into owner, repo, revision and a file or a quantization; malformed ones are BAD_OPTION', () => {
  assert.deepEqual(parseHubId('hf:owner/repo/dir/model-Q4_K_M.gguf'),
    { owner: 'owner', repo: 'repo', revision: 'main', path: 'dir/model-Q4_K_M.gguf', quant: null, id: 'hf:owner/repo/dir/model-Q4_K_M.gguf' });
  assert.deepEqual(parseHubId('hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m'),
    { owner: 'Qwen', repo: 'Qwen2.5-0.5B-Instruct-GGUF', revision: 'main', path: null, quant: 'q4_k_m', id: 'hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m' });
  assert.equal(parseHubId('HF:a/b@v1.0:Q8_0').revision, 'v1.0');
  assert.equal(parseHubId('hf:a/b@refs%2Fpr%2F3/m.gguf').revision, 'refs/pr/3');
  const plain = parseHubId('hf:a/b');
  assert.equal(plain.path, null); assert.equal(plain.quant, null);
  assert.ok(isHubId('hf:x') && !isHubId('https://x') && !isHubId('model.gguf'));
  for (const bad of ['hf:', 'hf:owner', 'hf:owner/', 'hf:/repo', 'hf:owner/repo/', 'hf:owner/repo/../x.gguf', 'hf:owner/repo/a//b.gguf',
    'hf:owner/repo/readme.md', 'hf:owner/repo:', 'hf:owner/repo:Q4 K', 'hf:.x/repo', 'hf:owner/repo@/m.gguf', 'hf:owner/repo@a..b:Q4_0', 'hf:o/r/x.gguf?download=1']) {
    assert.throws(() => parseHubId(bad), isError('BAD_OPTION', /not a valid hub id/), bad);
  }
});

test('the demo URL field: a hub id passes through as the load source; its name comes from the id', () => {
  // web/demo/demo.js hands a string starting with hf: to loadModel unchanged, named by parseHubId
  const src = fs.readFileSync(new URL('../../web/demo/demo.js', import.meta.url), 'utf8');
  assert.match(src, /isHubId\(u\)/);
  const { repo, quant, path: p } = parseHubId('hf:owner/repo:Q4_K_M');
  assert.equal(`${repo}${quant ? ':' + quant : ''}${p ? '/' + p : ''}`, 'repo:Q4_K_M');
});

test('a quantization picks its file: the non-split one, else the first part of a split set; none or several are clear errors', () => {
  const ref = (quant) => ({ owner: 'o', repo: 'r', revision: 'main', quant });
  const files = ['m-Q4_K_M.gguf', 'm.Q8_0.gguf', 'big/m-Q8_0-00002-of-00002.gguf', 'big/m-Q8_0-00001-of-00002.gguf',
    'x-Q4_K_M-00001-of-00002.gguf', 'x-Q4_K_M-00002-of-00002.gguf', 'mmproj-m-f16.gguf', 'm-f16.gguf', 'README.md', 'm-Q4_K.gguf']
    .map((p) => ({ path: p, size: 1, sha256: null }));
  assert.equal(pickFile(files, ref('Q4_K_M')).path, 'm-Q4_K_M.gguf'); // non-split beats the split set
  assert.equal(pickFile(files, ref('q4_k')).path, 'm-Q4_K.gguf'); // a whole token: Q4_K is not Q4_K_M
  assert.equal(pickFile(files, ref('F16')).path, 'm-f16.gguf'); // the vision projector is not a model
  assert.equal(pickFile(files.filter((f) => !f.path.startsWith('m')), ref('Q8_0')).path, 'big/m-Q8_0-00001-of-00002.gguf');
  assert.equal(pickFile(files, ref('Q8_0')).path, 'm.Q8_0.gguf');
  assert.throws(() => pickFile([...files, { path: 'n-Q8_0.gguf' }], ref('Q8_0')),
    isError('BAD_OPTION', /quantization Q8_0 matches several files in o\/r: m\.Q8_0\.gguf, n-Q8_0\.gguf, big\/m-Q8_0-00001-of-00002\.gguf; name one, e\.g\. hf:o\/r\/m\.Q8_0\.gguf/));
  assert.throws(() => pickFile([...files.filter((f) => !f.path.startsWith('m')), { path: 'y-Q8_0-00001-of-00003.gguf' }], ref('Q8_0')),
    isError('BAD_OPTION', /big\/m-Q8_0-00001-of-00002\.gguf, y-Q8_0-00001-of-00003\.gguf/), 'two split sets');
  assert.throws(() => pickFile(files, ref('IQ2_XS')),
    isError('NOT_FOUND', /no GGUF file of quantization IQ2_XS in o\/r: it has m-Q4_K_M\.gguf, m\.Q8_0\.gguf,.*mmproj-m-f16\.gguf/));
  assert.throws(() => pickFile(files, ref(null)), isError('BAD_OPTION', /the id matches several files/));
  assert.equal(pickFile([{ path: 'only.gguf' }, { path: 'mmproj.gguf' }], ref(null)).path, 'only.gguf');
  assert.ok(matchesQuant('dir/Q4_K_M/model.gguf', 'q4_k_m') && !matchesQuant('model-Q4_K_M.gguf', 'K_M'));
  assert.equal(nextLink('<https://h/api?cursor=2>; rel="next"', 'https://h/x'), 'https://h/api?cursor=2');
  assert.equal(nextLink('<https://h/p>; rel="prev"', 'https://h/x'), null);
});

test('hubUrl: the option, else WASMLM_HUB_URL, else huggingface.co; not http(s) is BAD_OPTION', () => {
  const saved = process.env.WASMLM_HUB_URL;
  try {
    delete process.env.WASMLM_HUB_URL;
    assert.equal(hubBaseUrl({}), 'https://huggingface.co');
    process.env.WASMLM_HUB_URL = 'http://mirror.local/hub/';
    assert.equal(hubBaseUrl({}), 'http://mirror.local/hub');
    assert.equal(hubBaseUrl({ hubUrl: 'http://127.0.0.1:1' }), 'http://127.0.0.1:1');
    assert.throws(() => hubBaseUrl({ hubUrl: 'ftp://x' }), isError('BAD_OPTION', /option hubUrl/));
  } finally {
    if (saved === undefined) delete process.env.WASMLM_HUB_URL; else process.env.WASMLM_HUB_URL = saved;
  }
});

// ---- loading by id -------------------------------------------------------------------

test('loadModel(hf:owner/repo:QUANT) lists the repository (all pages), follows the redirect, caches by URL + ETag', LONG, async () => {
  const state = { files: { 'README.md': Buffer.from('x'), 'tiny-Q8_0.gguf': V2, 'tiny-F32.gguf': V1 } };
  await withHub(state, async (hubUrl, log) => {
    const cacheDir = tmpdir();
    const progress = [];
    const m = await loadModel('hf:owner/repo:f32', { hubUrl, cacheDir, offline: false, threads: 1, onProgress: (p) => progress.push(p) });
    await m.dispose();
    assert.ok(log.filter((l) => l.path.startsWith('/api/models/owner/repo/tree/main')).length >= 3, 'every page of the listing');
    const file = path.join(cacheDir, hubCacheName({ owner: 'owner', repo: 'repo', revision: 'main', path: 'tiny-F32.gguf' }) + '.gguf');
    assert.equal(sha(fs.readFileSync(file)), sha(V1));
    const rec = JSON.parse(fs.readFileSync(file + '.json', 'utf8'));
    assert.equal(rec.url, `${hubUrl}/owner/repo/resolve/main/tiny-F32.gguf`);
    assert.match(rec.etag, /-1"$/);
    assert.deepEqual(rec.hub, { owner: 'owner', repo: 'repo', revision: 'main', path: 'tiny-F32.gguf' });
    const dl = progress.filter((p) => p.phase === 'download');
    assert.equal(dl.at(-1).loaded, V1.length);
    assert.equal(dl.at(-1).total, V1.length);
    assert.ok(dl.every((p) => Number.isFinite(p.rate) && p.rate >= 0), 'progress reports a rate');
    assert.ok(progress.some((p) => !p.phase && p.loaded === V1.length && Number.isFinite(p.rate)), 'the load reports a rate too');
    // again: one conditional request, a 304, the cached copy
    log.length = 0;
    const r = await resolveHubModel('hf:owner/repo:F32', { hubUrl, cacheDir, offline: false });
    assert.equal(r.source, 'cache');
    assert.deepEqual(cdnGets(log).map((l) => l.ifNoneMatch), [rec.etag]);
    // the file changes on the hub (new ETag): fetched again
    state.files['tiny-F32.gguf'] = V2;
    state.version = 2;
    const r2 = await resolveHubModel('hf:owner/repo:F32', { hubUrl, cacheDir, offline: false });
    assert.equal(r2.source, 'download');
    assert.equal(sha(fs.readFileSync(file)), sha(V2));
    assert.match(JSON.parse(fs.readFileSync(file + '.json', 'utf8')).etag, /-2"$/);
    // offline: the cached copy, found from the records without a listing
    log.length = 0;
    const r3 = await resolveHubModel('hf:owner/repo:F32', { hubUrl, cacheDir, offline: true });
    assert.equal(r3.path, file);
    assert.equal(log.length, 0, 'no request offline');
    await assert.rejects(resolveHubModel('hf:owner/repo:Q8_0', { hubUrl, cacheDir, offline: true }), isError('NOT_FOUND', /no cached file of owner\/repo matches \(cached: tiny-F32\.gguf\)/));
    assert.deepEqual(fs.readdirSync(cacheDir).sort(), [path.basename(file), path.basename(file) + '.json'], 'no partial or lock files left');
  });
});

test('a direct file id loads; a missing repository, file or quantization is NOT_FOUND naming it', LONG, async () => {
  await withHub({ files: { 'a/tiny.gguf': V1, 'tiny-Q8_0.gguf': V2 } }, async (hubUrl) => {
    const m = await loadModel('hf:owner/repo/a/tiny.gguf', { hubUrl, cacheDir: tmpdir(), offline: false, threads: 1 });
    assert.equal(m.info.hparams.nLayer ?? 2, 2);
    await m.dispose();
    // streamed without the Node cache too (the browsers' path)
    const m2 = await loadModel('hf:owner/repo:Q8_0', { hubUrl, cache: false, threads: 1 });
    await m2.dispose();
    const o = { hubUrl, cacheDir: tmpdir(), offline: false };
    await assert.rejects(loadModel('hf:owner/nope:Q8_0', o), isError('NOT_FOUND', /repository owner\/nope not found on http:\/\/127\.0\.0\.1:\d+ \(HTTP 404\)/));
    await assert.rejects(loadModel('hf:owner/repo@dev:Q8_0', o), isError('NOT_FOUND', /owner\/repo@dev not found/));
    await assert.rejects(loadModel('hf:owner/repo:Q2_K', o), isError('NOT_FOUND', /no GGUF file of quantization Q2_K in owner\/repo: it has a\/tiny\.gguf, tiny-Q8_0\.gguf/));
    await assert.rejects(loadModel('hf:owner/repo/b/none.gguf', o), isError('NOT_FOUND', /b\/none\.gguf not found in owner\/repo at revision main/));
    await assert.rejects(loadModel('hf:owner/repo/b/none.gguf', { hubUrl, cache: false }), isError('NOT_FOUND', /b\/none\.gguf not found in owner\/repo/));
  });
});

// ---- resumable downloads -------------------------------------------------------------

test('a connection cut mid-body resumes with Range + If-Range and ends with the same bytes', LONG, async () => {
  await withHub({ files: { 'tiny.gguf': V1 }, cuts: 1, cutAt: 200000 }, async (hubUrl, log) => {
    const cacheDir = tmpdir();
    const progress = [];
    const r = await resolveHubModel('hf:owner/repo/tiny.gguf', { hubUrl, cacheDir, offline: false, onProgress: (p) => progress.push(p) });
    assert.equal(sha(fs.readFileSync(r.path)), sha(V1));
    const gets = cdnGets(log);
    assert.equal(gets.length, 2);
    assert.equal(gets[0].range, undefined);
    assert.match(gets[1].range, /^bytes=\d+-$/);
    const from = Number(/=(\d+)-/.exec(gets[1].range)[1]);
    assert.ok(from >= 1 && from <= 200000, `resumed at ${from}`);
    assert.match(gets[1].ifRange, /^"[0-9a-f]{16}-1"$/);
    assert.equal(progress.at(-1).loaded, V1.length);
    assert.ok(progress.some((p) => p.loaded > from), 'progress goes on from the resumed offset');
    assert.deepEqual(fs.readdirSync(cacheDir).filter((f) => /partial|lock|tmp/.test(f)), []);
  });
});

test('an interrupted download keeps its partial file; the next call asks only for the rest', LONG, async () => {
  await withHub({ files: { 'tiny.gguf': V1 }, cuts: MAX_RESUMES + 1, cutAt: 50000 }, async (hubUrl, log) => {
    const cacheDir = tmpdir();
    const o = { hubUrl, cacheDir, offline: false };
    await assert.rejects(resolveHubModel('hf:owner/repo/tiny.gguf', o), isError('NETWORK', /resolve\/main\/tiny\.gguf/));
    const partial = fs.readdirSync(cacheDir).find((f) => f.endsWith('.partial'));
    assert.ok(partial, 'a partial file stays');
    const have = fs.statSync(path.join(cacheDir, partial)).size;
    assert.ok(have >= (MAX_RESUMES + 1) * 1 && have < V1.length);
    log.length = 0;
    const r = await resolveHubModel('hf:owner/repo/tiny.gguf', o);
    assert.equal(sha(fs.readFileSync(r.path)), sha(V1));
    assert.deepEqual(cdnGets(log).map((l) => l.range), [`bytes=${have}-`]);
  });
});

test('partial downloads are swept only when abandoned: unlocked and untouched for PARTIAL_DAYS', async () => {
  const d = tmpdir();
  const old = (Date.now() - (PARTIAL_DAYS + 1) * 86400e3) / 1000;
  for (const n of ['a', 'b', 'c']) {
    fs.writeFileSync(path.join(d, `${n}.gguf.partial`), 'x');
    fs.writeFileSync(path.join(d, `${n}.gguf.partial.json`), '{}');
  }
  for (const n of ['a', 'b']) for (const f of [`${n}.gguf.partial`, `${n}.gguf.partial.json`]) fs.utimesSync(path.join(d, f), old, old);
  fs.writeFileSync(path.join(d, 'b.gguf.partial.lock'), String(process.pid)); // a download in progress
  assert.deepEqual((await sweepTempFiles(d)).sort(), ['a.gguf.partial', 'a.gguf.partial.json']);
  assert.deepEqual(fs.readdirSync(d).sort(), ['b.gguf.partial', 'b.gguf.partial.json', 'b.gguf.partial.lock', 'c.gguf.partial', 'c.gguf.partial.json']);
});

test('a partial file locked by a live download is left alone: this download goes to a temp file', LONG, async () => {
  await withHub({ files: { 'm.gguf': V1 } }, async (hubUrl, log) => {
    const d = tmpdir(), dest = path.join(d, 'm.gguf'), url = `${hubUrl}/owner/repo/resolve/main/m.gguf`;
    fs.writeFileSync(dest + '.partial', V1.subarray(0, 1000));
    fs.writeFileSync(dest + '.partial.json', JSON.stringify({ url, etag: `"${sha(V1).slice(0, 16)}-1"`, total: V1.length }));
    fs.writeFileSync(dest + '.partial.lock', String(process.pid)); // held by another download of this process
    await downloadModel('m', { url }, dest, {});
    assert.equal(sha(fs.readFileSync(dest)), sha(V1));
    assert.deepEqual(cdnGets(log).map((l) => l.range), [undefined], 'no resume of a file in use');
    assert.equal(fs.readFileSync(dest + '.partial').length, 1000, 'the other download\'s partial file is untouched');
    assert.ok(fs.existsSync(dest + '.partial.lock'));
    assert.deepEqual(fs.readdirSync(d).filter((f) => f.includes('.tmp-')), []);
  });
});

test('a 200 instead of a 206, a 206 of another ETag, or a changed file restart the download from byte 0', LONG, async () => {
  const dest = (d) => path.join(d, 'm.gguf');
  const half = (d, url, etag, bytes) => {
    fs.writeFileSync(dest(d) + '.partial', bytes.subarray(0, 300000));
    fs.writeFileSync(dest(d) + '.partial.json', JSON.stringify({ url, etag, total: bytes.length }));
  };
  // the server ignores Range: a 200 with the whole file
  await withHub({ files: { 'm.gguf': V1 }, ignoreRange: true }, async (hubUrl, log) => {
    const d = tmpdir(), url = `${hubUrl}/owner/repo/resolve/main/m.gguf`;
    half(d, url, `"${sha(V1).slice(0, 16)}-1"`, V1);
    await downloadModel('m', { url }, dest(d), {});
    assert.equal(sha(fs.readFileSync(dest(d))), sha(V1));
    assert.equal(cdnGets(log).length, 1, 'the 200 body was used, no second request');
    assert.ok(!fs.existsSync(dest(d) + '.partial'));
  });
  // a 206 whose ETag is not the one asked for: dropped, asked again whole
  await withHub({ files: { 'm.gguf': V1 }, rangeEtag: '"other"' }, async (hubUrl, log) => {
    const d = tmpdir(), url = `${hubUrl}/owner/repo/resolve/main/m.gguf`;
    half(d, url, `"${sha(V1).slice(0, 16)}-1"`, V1);
    await downloadModel('m', { url }, dest(d), {});
    assert.equal(sha(fs.readFileSync(dest(d))), sha(V1));
    assert.deepEqual(cdnGets(log).map((l) => l.range), ['bytes=300000-', undefined]);
  });
  // the file changed since the partial download (If-Range does not match): the server sends the new one whole
  await withHub({ files: { 'm.gguf': V2 }, version: 2 }, async (hubUrl, log) => {
    const d = tmpdir(), url = `${hubUrl}/owner/repo/resolve/main/m.gguf`;
    half(d, url, `"${sha(V1).slice(0, 16)}-1"`, V1);
    await downloadModel('m', { url }, dest(d), {});
    assert.equal(sha(fs.readFileSync(dest(d))), sha(V2), 'never a mix of two versions');
    assert.deepEqual(cdnGets(log).map((l) => l.range), ['bytes=300000-']);
  });
});

test('the CLI takes -m hf:... with WASMLM_HUB_URL', LONG, async () => {
  await withHub({ files: { 'tiny-F32.gguf': V1 } }, async (hubUrl) => {
    const cache = tmpdir();
    const r = await runCli(['info', '-m', 'hf:owner/repo:F32', '--json'], { env: { WASMLM_HUB_URL: hubUrl, WASMLM_CACHE: cache, WASMLM_OFFLINE: '0' } });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(fs.readdirSync(cache).some((f) => f.startsWith('hf--owner--repo--main--tiny-F32.gguf')));
  });
});
