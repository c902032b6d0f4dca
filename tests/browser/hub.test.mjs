// Hub ids in Chromium (issue #28): loadModel('hf:owner/repo:QUANT') from a
// page, against the hub imitation of tests/js/hub-server.mjs (listing,
// redirect to the "CDN", ETags). The model is kept in Cache Storage under
// its URL and ETag: the next load asks the server (HEAD) and reads the
// cached copy; a file changed on the hub (new ETag) is fetched again and the
// old copy dropped; with the hub gone the cached copy still loads. The page
// comes from another server (origin) than the hub, as it would in use.
// A gated repository (hubToken): the browser sends the token to the hub
// (after a CORS preflight) and, following the hub's redirect itself, drops it
// before the CDN, a third origin that logs every Authorization header it gets
// and must see none; the token is in no error, progress event, info or
// Cache Storage key.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openPage } from './browser.mjs';
import { hubServer } from '../js/hub-server.mjs';
import { listen } from '../js/servers.mjs';
import { makeModel } from '../../models/make-model.js';
import { splitGguf } from '../../models/gguf-split.js';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-hub-browser-'));
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 192, ctx: 256, vocab: 512 };
makeModel(path.join(DIR, 'v1.gguf'), SHAPE, 'f32', 1);
makeModel(path.join(DIR, 'v2.gguf'), SHAPE, 'f32', 2);

const SPLIT = splitGguf(path.join(DIR, 'v1.gguf'), 200000).parts;

const state = { repo: 'owner/repo', version: 1, cuts: 0, files: { 'tiny-F32.gguf': fs.readFileSync(path.join(DIR, 'v1.gguf')), 'other-Q8_0.gguf': Buffer.from('x') } };
let page, closePage, hub, log, base;

// the gated repository: its hub and its CDN, two more origins sharing one log
const TOKEN = 'hf_BrowserTokenThatMustNeverLeak42';
const gated = { repo: 'owner/gated', version: 1, cuts: 0, token: TOKEN, hop: true,
  files: { 'g-F32.gguf': fs.readFileSync(path.join(DIR, 'v1.gguf')), ...Object.fromEntries(SPLIT.map((p) => [path.basename(p).replace('v1', 'big-Q8_0'), fs.readFileSync(p)])) } };
const gatedLog = [];
let gatedHub, gatedCdn, gatedBase;

before(async () => {
  let server;
  ({ server, log } = hubServer(state));
  hub = await listen(server);
  base = hub.url;
  gatedHub = await listen(hubServer(gated, { log: gatedLog }).server);
  gatedCdn = await listen(hubServer(gated, { role: 'cdn', log: gatedLog }).server);
  gatedBase = gatedHub.url;
  gated.cdnUrl = gatedCdn.url;
  // the page from a server of its own (another origin than the hub's)
  ({ page, close: closePage } = await openPage());
});
after(async () => {
  await closePage?.();
  for (const s of [hub, gatedHub, gatedCdn]) await s?.close();
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
  await hub.close();
  const gone = await loadInPage('hf:owner/repo/tiny-F32.gguf');
  assert.equal(gone.code, undefined, gone.message);
  assert.equal(gone.fromCache, true);
});

/** loadModel(id, {hubUrl, hubToken}) in the page: {fromCache, vocab, progress, info, keys: [[url, headers]]} or {code, message, props}. */
const loadGated = (id, hubToken) => page.evaluate(async ([id, hubUrl, hubToken]) => {
  const { loadModel } = await import('/web/index.js');
  const progress = [];
  try {
    const m = await loadModel(id, { hubUrl, threads: 1, onProgress: (p) => progress.push(p), ...(hubToken ? { hubToken } : {}) });
    const out = { fromCache: !!m.info.fromCache, vocab: m.info.hparams.nVocab, info: JSON.stringify(m.info, (k, v) => (typeof v === 'bigint' ? String(v) : v)), progress: JSON.stringify(progress) };
    out.text = (await m.complete('Once', { maxTokens: 4, temperature: 0 })).text;
    await m.dispose();
    const store = await caches.open('wasmlm-models-v1');
    out.keys = [];
    for (const k of await store.keys()) {
      const res = await store.match(k, { ignoreVary: true });
      out.keys.push([k.url, [...k.headers], [...res.headers]]);
    }
    return out;
  } catch (e) {
    return { code: e.code, message: e.message, props: JSON.stringify({ ...e, cause: String(e.cause) }), stack: e.stack, progress: JSON.stringify(progress) };
  }
}, [id, gatedBase, hubToken]);

test('a gated repository in the browser: the token goes to the hub only, never to the CDN on another origin, nor into the cache', async () => {
  const noToken = (x, what) => assert.ok(!JSON.stringify(x).includes(TOKEN) && !JSON.stringify(x).includes(TOKEN.slice(3, 20)), `${what} holds the token`);
  const hubReqs = () => gatedLog.filter((l) => l.role === 'hub' && l.method !== 'OPTIONS');
  const cdnReqs = () => gatedLog.filter((l) => l.role === 'cdn');

  // no token: UNAUTHORIZED, saying so and what to do in a browser
  const none = await loadGated('hf:owner/gated:F32');
  assert.equal(none.code, 'UNAUTHORIZED', none.message);
  assert.match(none.message, /^the listing of owner\/gated on http:\/\/127\.0\.0\.1:\d+: HTTP 401: no access token was sent, and the repository is gated or private \(or does not exist\): pass an access token in the option hubToken; a gated model also needs its licence accepted on http:\/\/127\.0\.0\.1:\d+\/owner\/gated$/);
  assert.equal(JSON.parse(none.props).tokenSent, false);
  const direct = await loadGated('hf:owner/gated/g-F32.gguf');
  assert.equal(direct.code, 'UNAUTHORIZED', direct.message);
  assert.match(direct.message, /^g-F32\.gguf in owner\/gated at revision main on .*: HTTP 401: no access token was sent/);

  // with the token: loads; the hub saw it on the listing, the resolve URL and its same-origin hop, the CDN never
  gatedLog.length = 0;
  const first = await loadGated('hf:owner/gated:F32', TOKEN);
  assert.equal(first.code, undefined, first.message);
  assert.equal(first.fromCache, false);
  assert.equal(first.vocab, 512);
  assert.ok(hubReqs().some((l) => l.path.startsWith('/api/models/owner/gated/tree/main')));
  assert.ok(hubReqs().some((l) => l.path === '/owner/gated/resolve/main/g-F32.gguf'));
  assert.ok(hubReqs().some((l) => l.path === '/owner/gated/hop/main/g-F32.gguf'));
  assert.deepEqual(hubReqs().filter((l) => l.authorization !== `Bearer ${TOKEN}`), [], 'every hub request carried the token');
  assert.ok(gatedLog.some((l) => l.role === 'hub' && l.method === 'OPTIONS'), 'the browser asked the hub first (CORS preflight)');
  assert.ok(cdnReqs().length > 0, 'the CDN served the bytes');
  assert.deepEqual(cdnReqs().filter((l) => l.authorization !== undefined), [], 'no Authorization header at the CDN');
  noToken([first.info, first.progress, first.keys], 'info, progress or a cache key');
  const key = first.keys.find((k) => k[0].endsWith('/owner/gated/resolve/main/g-F32.gguf'));
  assert.ok(key, 'cached under its resolve URL');
  assert.deepEqual(key[1].map(([h]) => h), ['x-wasmlm-etag'], 'the key is the URL and the ETag');

  // again: the HEAD asking for the ETag carries the token to the hub, not to the CDN
  gatedLog.length = 0;
  const again = await loadGated('hf:owner/gated:F32', TOKEN);
  assert.equal(again.fromCache, true, again.message);
  assert.equal(again.text, first.text);
  assert.deepEqual(cdnReqs().map((l) => [l.method, l.authorization]), [['HEAD', undefined]]);
  assert.ok(hubReqs().length > 0 && hubReqs().every((l) => l.authorization === `Bearer ${TOKEN}`));

  // a split GGUF of the gated repository: every part with the token at the hub, none at the CDN
  gatedLog.length = 0;
  const split = await loadGated('hf:owner/gated:Q8_0', TOKEN);
  assert.equal(split.code, undefined, split.message);
  assert.equal(split.text, first.text, 'the parts make the same model');
  assert.equal(hubReqs().filter((l) => l.path.includes('/resolve/')).length, SPLIT.length);
  assert.equal(cdnReqs().filter((l) => l.method === 'GET').length, SPLIT.length);
  assert.deepEqual(cdnReqs().filter((l) => l.authorization !== undefined), []);
  noToken([split.info, split.progress, split.keys], 'the split load');

  // the licence not accepted: 403, what to do
  gated.licence = false;
  try {
    const refused = await loadGated('hf:owner/gated/g-F32.gguf', TOKEN);
    assert.equal(refused.code, 'UNAUTHORIZED');
    assert.match(refused.message, /HTTP 403: the access token \(from hubToken\) was sent, but it gives no access to this repository: accept the model's licence on http:\/\/127\.0\.0\.1:\d+\/owner\/gated/);
    assert.equal(JSON.parse(refused.props).tokenSent, true);
    noToken(refused, 'the 403 error');
  } finally { gated.licence = true; }
  // a malformed token: BAD_OPTION, not echoed, nothing sent
  gatedLog.length = 0;
  const bad = await loadGated('hf:owner/gated:F32', 'hf_has a space');
  assert.equal(bad.code, 'BAD_OPTION');
  assert.match(bad.message, /^option hubToken: must be an access token.*got a string of 14 characters \(not shown\)$/);
  assert.equal(gatedLog.length, 0);
});
