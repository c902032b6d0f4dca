// The demo server (web/demo/server.mjs): isolation headers on every
// response, only the package's public files and the model folder served,
// byte ranges, the local model list.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startDemoServer } from '../../web/demo/server.mjs';
import { MODELS, MODEL_PATH } from './helpers.mjs';

test('demo server: COOP/COEP, MIME types, public paths only, ranges, model list', async () => {
  const s = await startDemoServer({ modelsDir: MODELS });
  try {
    const get = (p, init) => fetch(s.url + p, { redirect: 'manual', ...init });
    const root = await get('/');
    assert.equal(root.status, 302);
    assert.equal(root.headers.get('location'), '/web/demo/');
    const page = await get('/web/demo/');
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cross-origin-opener-policy'), 'same-origin');
    assert.equal(page.headers.get('cross-origin-embedder-policy'), 'require-corp');
    assert.match(page.headers.get('content-type'), /^text\/html/);
    assert.match(await page.text(), /<title>wasmlm demo/);
    assert.equal((await get('/wasm/wasmlm.wasm')).headers.get('content-type'), 'application/wasm');
    assert.match((await get('/web/index.js')).headers.get('content-type'), /^text\/javascript/);
    assert.equal((await get('/web/demo/sw.js')).headers.get('service-worker-allowed'), '/');
    for (const p of ['/src/wlm.h', '/package.json', '/.git/config', '/Makefile', '/web/../Makefile', '/%2e%2e/Makefile', '/local-models/../Makefile']) {
      const r = await get(p);
      assert.ok(r.status === 404 || r.status === 403, `${p}: HTTP ${r.status}`);
      assert.equal(r.headers.get('cross-origin-embedder-policy'), 'require-corp');
    }
    const list = await (await get('/local-models/index.json')).json();
    const entry = list.find((m) => m.name === 'stories260K');
    assert.equal(entry.size, fs.statSync(MODEL_PATH).size);
    const part = await get('/local-models/stories260K.gguf', { headers: { Range: 'bytes=0-3' } });
    assert.equal(part.status, 206);
    assert.equal(Buffer.from(await part.arrayBuffer()).toString('latin1'), 'GGUF');
    assert.equal((await get('/local-models/nothing.gguf')).status, 404);
    // chat templates in an unbundled page: @huggingface/jinja at /vendor/jinja.js, template.js importing it from there
    const jinja = await get('/vendor/jinja.js');
    assert.equal(jinja.status, 200);
    assert.match(jinja.headers.get('content-type'), /^text\/javascript/);
    assert.equal(jinja.headers.get('cross-origin-embedder-policy'), 'require-corp');
    assert.match(await jinja.text(), /export\s*\{[^}]*\bTemplate\b/);
    const tpl = await get('/web/worker/template.js');
    assert.equal(tpl.status, 200);
    assert.match(tpl.headers.get('content-type'), /^text\/javascript/);
    assert.equal(tpl.headers.get('cross-origin-opener-policy'), 'same-origin');
    const src = await tpl.text();
    assert.match(src, /from '\/vendor\/jinja\.js'/);
    assert.doesNotMatch(src, /'@huggingface\/jinja'/);
    for (const p of ['/vendor/', '/vendor/other.js', '/node_modules/@huggingface/jinja/dist/index.js']) assert.equal((await get(p)).status, 404, p);
  } finally {
    await s.close();
  }
  const bare = await startDemoServer({ modelsDir: null });
  try {
    assert.deepEqual(await (await fetch(bare.url + '/local-models/index.json')).json(), []);
    assert.equal((await fetch(bare.url + '/local-models/x.gguf')).status, 404);
  } finally {
    await bare.close();
  }
});
