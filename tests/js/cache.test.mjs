// The model cache API in Node: listCachedModels / deleteCachedModel /
// clearModelCache work on the registry's download cache directory (the
// browser side, Cache Storage, is tested in tests/browser/demo.test.mjs).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { listCachedModels, deleteCachedModel, clearModelCache, MODEL_CACHE } from '../../web/index.js';
import * as cacheModule from '../../web/cache.js';

test('Node cache directory: list with sizes, delete one, refuse paths outside, clear', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-cache-'));
  try {
    fs.writeFileSync(path.join(dir, 'alpha.gguf'), Buffer.alloc(1234));
    fs.writeFileSync(path.join(dir, 'beta.gguf'), Buffer.alloc(10));
    fs.writeFileSync(path.join(dir, 'beta.gguf.tmp-1-2'), Buffer.alloc(5));   // an unfinished download is not a model
    const list = (await listCachedModels({ cacheDir: dir })).sort((a, b) => a.name.localeCompare(b.name));
    assert.deepEqual(list.map((m) => [m.name, m.size, m.key]), [['alpha', 1234, path.join(dir, 'alpha.gguf')], ['beta', 10, path.join(dir, 'beta.gguf')]]);
    assert.ok(!Number.isNaN(Date.parse(list[0].cachedAt)));
    assert.equal(await deleteCachedModel(list[0].key, { cacheDir: dir }), true);
    assert.equal(await deleteCachedModel(list[0].key, { cacheDir: dir }), false);
    await assert.rejects(deleteCachedModel(path.join(os.tmpdir(), 'elsewhere.gguf'), { cacheDir: dir }), /not a cached model in/);
    await assert.rejects(deleteCachedModel(path.join(dir, 'beta.gguf.tmp-1-2'), { cacheDir: dir }), /not a cached model in/);
    assert.equal(await clearModelCache({ cacheDir: dir }), 1);
    assert.deepEqual(await listCachedModels({ cacheDir: dir }), []);
    assert.ok(fs.existsSync(path.join(dir, 'beta.gguf.tmp-1-2')), 'only models are deleted');
    assert.deepEqual(await listCachedModels({ cacheDir: path.join(dir, 'missing') }), []);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the browser cache is off in Node; the package entry re-exports the cache module', () => {
  assert.equal(cacheModule.modelCacheAvailable(), false);
  assert.equal(MODEL_CACHE, cacheModule.MODEL_CACHE);
  assert.equal(MODEL_CACHE, 'wasmlm-models-v1');
});
