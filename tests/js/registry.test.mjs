// Registry resolution (modelDir, cache) and the download path against a
// local HTTP server on 127.0.0.1: never the network.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODELS, MODEL_PATH } from './helpers.mjs';
import { withServer, serveFiles } from './servers.mjs';
import { resolveModel, loadRegistry, isRegistryName } from '../../models/registry.js';
import { loadModel } from '../../web/index.js';

const SHA = '270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d';

function tmpdir() { return fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-reg-')); }

// the model at /m.gguf, whole (no Range)
const serveModel = serveFiles({ '/m.gguf': MODEL_PATH }, { ranges: false });

test('registry.json has stories260K with url, sha256, size, license', async () => {
  const reg = await loadRegistry();
  const e = reg.stories260K;
  assert.equal(e.url, 'https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf');
  assert.equal(e.sha256, SHA);
  assert.equal(e.size, 1185376);
  assert.equal(e.license, 'MIT');
  assert.ok(e.description);
  assert.equal(await isRegistryName('stories260K'), true);
  assert.equal(await isRegistryName('./stories260K.gguf'), false);
  assert.equal(await isRegistryName('nope'), false);
});

test('resolveModel: modelDir (option and WASMLM_MODELS) wins', async () => {
  const r = await resolveModel('stories260K', { modelDir: MODELS });
  assert.equal(r.path, path.join(MODELS, 'stories260K.gguf'));
  assert.equal(r.source, 'modelDir');
  const r2 = await resolveModel('stories260K');
  assert.equal(r2.source, 'modelDir');
});

test('resolveModel: unknown name gives a clear error', async () => {
  await assert.rejects(resolveModel('noSuchModel', { modelDir: MODELS }), /unknown model 'noSuchModel'.*stories260K/);
  await assert.rejects(resolveModel('../evil', {}), /invalid model name/);
});

test('resolveModel: download from a local server, sha256 verified, cached atomically', async () => {
  const cacheDir = tmpdir();
  await withServer(serveModel, async (base, served) => {
    const registry = { tiny: { url: `${base}/m.gguf`, sha256: SHA, size: 1185376 } };
    const progress = [];
    const r = await resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry, offline: false, onProgress: (p) => progress.push(p) });
    assert.equal(r.source, 'download');
    assert.equal(r.path, path.join(cacheDir, 'tiny.gguf'));
    assert.deepEqual(fs.readFileSync(r.path), fs.readFileSync(MODEL_PATH));
    assert.ok(progress.length > 0 && progress.at(-1).loaded === 1185376);
    assert.deepEqual(fs.readdirSync(cacheDir).sort(), ['tiny.gguf', 'tiny.gguf.json'], 'the model and its record; no temp files left behind');
    const rec = JSON.parse(fs.readFileSync(path.join(cacheDir, 'tiny.gguf.json'), 'utf8'));
    assert.deepEqual([rec.url, rec.size, rec.sha256], [`${base}/m.gguf`, 1185376, SHA]);
    // second time: from the cache, no request
    const before = served.requests;
    const r2 = await resolveModel('tiny', { modelDir: tmpdir(), cacheDir, registry, offline: false });
    assert.equal(r2.source, 'cache');
    assert.equal(served.requests, before);
    // offline with a cache hit still works; offline without one fails clearly
    await assert.rejects(resolveModel('tiny', { cacheDir: tmpdir(), registry, offline: true }), /not available offline/);
  });
});

test('resolveModel: sha256 mismatch is a clear error and leaves nothing in the cache', async () => {
  const cacheDir = tmpdir();
  await withServer(serveModel, async (base) => {
    const bad = 'ab'.repeat(32);
    const registry = { tiny: { url: `${base}/m.gguf`, sha256: bad, size: 1185376 } };
    await assert.rejects(resolveModel('tiny', { cacheDir, registry, offline: false }),
      (e) => /sha256 mismatch for model 'tiny'/.test(e.message) && e.message.includes(bad) && e.message.includes(SHA));
    assert.deepEqual(fs.readdirSync(cacheDir), []);
    // HTTP errors are reported with the status
    const reg404 = { tiny: { url: `${base}/missing.gguf`, sha256: SHA } };
    await assert.rejects(resolveModel('tiny', { cacheDir, registry: reg404, offline: false }), /HTTP 404/);
    assert.deepEqual(fs.readdirSync(cacheDir), []);
  });
});

test('loadModel: registry name through a local server download, and from a URL', async () => {
  const cacheDir = tmpdir();
  await withServer(serveModel, async (base) => {
    const registry = { tiny: { url: `${base}/m.gguf`, sha256: SHA, size: 1185376 } };
    const m = await loadModel('tiny', { modelDir: tmpdir(), cacheDir, registry, offline: false });
    assert.equal(m.info.hparams.nVocab, 512);
    await m.dispose();
    const progress = [];
    const m2 = await loadModel(`${base}/m.gguf`, { onProgress: (p) => progress.push(p) });
    assert.deepEqual(await m2.tokenize('Once upon a time'), [1, 403, 407, 261, 378]);
    assert.equal(progress.at(-1).loaded, 1185376);
    assert.equal(progress.at(-1).total, 1185376);
    await m2.dispose();
    await assert.rejects(loadModel(`${base}/missing.gguf`), /HTTP 404/);
  });
});
