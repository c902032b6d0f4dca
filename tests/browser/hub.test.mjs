// Hub ids in Chromium (issue #28): loadModel('hf:owner/repo:QUANT') from a
// page, against the hub imitation of tests/js/hub-server.mjs (listing,
// redirect to the "CDN", ETags). The model is kept in Cache Storage under
// its URL and ETag: the next load asks the server (HEAD) and reads the
// cached copy; a file changed on the hub (new ETag) is fetched again and the
// old copy dropped; with the hub gone the cached copy still loads. The page
// comes from another server (origin) than the hub, as it would in use.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launch, ROOT } from './browser.mjs';
import { hubServer } from '../js/hub-server.mjs';
import { makeModel } from '../../models/make-model.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-hub-browser-'));
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 192, ctx: 256, vocab: 512 };
makeModel(path.join(DIR, 'v1.gguf'), SHAPE, 'f32', 1);
makeModel(path.join(DIR, 'v2.gguf'), SHAPE, 'f32', 2);

const pageState = { root: ROOT, files: {} };
const state = { repo: 'owner/repo', version: 1, cuts: 0, files: { 'tiny-F32.gguf': fs.readFileSync(path.join(DIR, 'v1.gguf')), 'other-Q8_0.gguf': Buffer.from('x') } };
let browser, page, pages, server, log, base;

const listen = async (srv) => { await new Promise((r) => srv.listen(0, '127.0.0.1', r)); return `http://127.0.0.1:${srv.address().port}`; };
const close = (srv) => { srv?.closeAllConnections?.(); return new Promise((r) => (srv?.listening ? srv.close(r) : r())); };

before(async () => {
  ({ server, log } = hubServer(state));
  base = await listen(server);
  pages = hubServer(pageState).server;
  const pageUrl = await listen(pages);
  browser = await launch();
  page = await browser.context.newPage();
  await page.goto(`${pageUrl}/`);
});
after(async () => {
  await browser?.close();
  await close(server);
  await close(pages);
  fs.rmSync(DIR, { recursive: true, force: true });
});

/** loadModel(id) in the page; resolves {fromCache, nLayer, keys: [[url, etag]]} or {code, message}. */
const loadInPage = (id) => page.evaluate(async ([id, hubUrl]) => {
  const { loadModel } = await import('/web/index.js');
  try {
    const m = await loadModel(id, { hubUrl, threads: 1 });
    const out = { fromCache: !!m.info.fromCache, vocab: m.info.hparams.nVocab };
    await m.dispose();
    const store = await caches.open('wasmlm-models-v1');
    out.keys = (await store.keys()).map((k) => [k.url.replace(hubUrl, ''), k.headers.get('x-wasmlm-etag')]);
    return out;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
}, [id, base]);

test('a hub id loads in the browser; the cache is keyed by URL and ETag', async () => {
  const first = await loadInPage('hf:owner/repo:f32');
  assert.equal(first.code, undefined, first.message);
  assert.equal(first.fromCache, false);
  assert.equal(first.vocab, 512);
  assert.equal(first.keys.length, 1);
  assert.equal(first.keys[0][0], '/owner/repo/resolve/main/tiny-F32.gguf');
  assert.match(first.keys[0][1], /-1"$/);
  assert.ok(log.some((l) => l.path.startsWith('/api/models/owner/repo/tree/main')), 'the listing was read');

  log.length = 0;
  const again = await loadInPage('hf:owner/repo:F32');
  assert.equal(again.fromCache, true);
  assert.deepEqual(log.filter((l) => l.path.startsWith('/cdn/')).map((l) => l.method), ['HEAD'], 'one HEAD asks for the ETag, no body');

  // the file changes on the hub: a new ETag, fetched again, the old copy dropped
  state.files['tiny-F32.gguf'] = fs.readFileSync(path.join(DIR, 'v2.gguf'));
  state.version = 2;
  const changed = await loadInPage('hf:owner/repo:F32');
  assert.equal(changed.fromCache, false);
  assert.deepEqual(changed.keys.map((k) => k[1]).length, 1);
  assert.match(changed.keys[0][1], /-2"$/);

  const missing = await loadInPage('hf:owner/repo:Q2_K');
  assert.equal(missing.code, 'NOT_FOUND');
  assert.match(missing.message, /no GGUF file of quantization Q2_K in owner\/repo: it has tiny-F32\.gguf, other-Q8_0\.gguf/);

  // the hub is gone: a file id loads from the cache (the HEAD fails; the cached copy is used)
  await close(server);
  const gone = await loadInPage('hf:owner/repo/tiny-F32.gguf');
  assert.equal(gone.code, undefined, gone.message);
  assert.equal(gone.fromCache, true);
});
