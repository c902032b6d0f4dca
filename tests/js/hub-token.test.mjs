// Access tokens for gated and private hub repositories: option hubToken, env
// WASMLM_HUB_TOKEN / HF_TOKEN, the CLI's --hub-token. Against the hub
// imitation of tests/js/hub-server.mjs with a gated repository (the listing
// and the resolve endpoint demand `Authorization: Bearer TOKEN`) and a CDN on
// another origin that logs every Authorization header it receives: it must
// never see one. The token must not appear in any error, console output,
// progress event, `info`, cache file name or record. No network.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import util from 'node:util';
import { runCli, isError } from './helpers.mjs';
import { loadModel } from '../../web/index.js';
import { hubAuth, resolveHubId } from '../../web/hub.js';
import { fetchChecked } from '../../web/net.js';
import { resolveHubModel } from '../../models/registry.js';
import { makeModel } from '../../models/make-model.js';
import { splitGguf } from '../../models/gguf-split.js';
import { withHub, sha } from './hub-server.mjs';
import { listen } from './servers.mjs';

const LONG = { timeout: 180000 };
const TOKEN = 'hf_TestTokenThatMustNeverLeak0123456789';
const tmpdir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-hubtoken-'));

const DIR = tmpdir();
const SHAPE = { dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 192, ctx: 256, vocab: 512 };
const WHOLE = path.join(DIR, 'm-F32.gguf');
makeModel(WHOLE, SHAPE, 'f32', 3);
const V1 = fs.readFileSync(WHOLE);
const SPLIT = splitGguf(WHOLE, 200000);
assert.ok(SPLIT.parts.length >= 3, `${SPLIT.parts.length} parts`);
const PARTS = Object.fromEntries(SPLIT.parts.map((p) => [path.basename(p), fs.readFileSync(p)]));

// the tests set the token env variables themselves
const ENV_KEYS = ['HF_TOKEN', 'WASMLM_HUB_TOKEN', 'WASMLM_HUB_URL'];
const savedEnv = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));
for (const k of ENV_KEYS) delete process.env[k];
test.after(() => { for (const [k, v] of Object.entries(savedEnv)) if (v === undefined) delete process.env[k]; else process.env[k] = v; });
async function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try { return await fn(); } finally { for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v; }
}

/** Everything console.* prints while fn runs (and fn's result). */
async function captureConsole(fn) {
  const out = [];
  const saved = {};
  for (const k of ['log', 'warn', 'error', 'info', 'debug']) { saved[k] = console[k]; console[k] = (...a) => out.push(util.format(...a)); }
  try { return { result: await fn(), out }; } finally { Object.assign(console, saved); }
}

/** Asserts that nothing reachable from `x` (an error with its causes, an object, a string) holds the token. */
function assertNoToken(x, what) {
  const text = typeof x === 'string' ? x : util.inspect(x, { depth: 20, showHidden: true, maxStringLength: Infinity, maxArrayLength: Infinity });
  assert.ok(!text.includes(TOKEN), `${what} holds the token`);
  assert.ok(!text.includes(TOKEN.slice(3, 20)), `${what} holds part of the token`);
}

/** Every file name and byte in a directory, as text. */
function dirText(dir) {
  return fs.readdirSync(dir).map((f) => `${f}\n${fs.readFileSync(path.join(dir, f), 'latin1')}`).join('\n');
}

/** The log's requests by role: listing and resolve URLs of the hub, and everything the CDN received. */
const hubRequests = (log) => log.filter((l) => l.role === 'hub' && l.method !== 'OPTIONS');
const cdnRequests = (log) => log.filter((l) => l.role === 'cdn');
function assertCdnSawNoToken(log) {
  const cdn = cdnRequests(log);
  assert.ok(cdn.length > 0, 'the CDN served the bytes');
  assert.deepEqual(cdn.filter((l) => l.authorization !== undefined).map((l) => `${l.method} ${l.path}: ${l.authorization}`), [],
    'no Authorization header at the CDN');
  assert.equal(log.filter((l) => l.role === 'hub' && l.path.startsWith('/cdn/')).length, 0, 'the bytes came from the CDN origin only');
}

const gated = (extra = {}) => ({ token: TOKEN, cdn: true, files: { 'tiny-F32.gguf': V1, 'README.md': Buffer.from('x') }, ...extra });

// ---- the option and the env ----------------------------------------------------------

test('hubToken: a malformed token is BAD_OPTION before any request, and the message never shows it', async () => {
  await withHub(gated(), async (hubUrl, log) => {
    const bad = ['', ' ', 'hf_has space', 'hf_tab\tx', 'hf_newline\n', `${TOKEN}\r\n`, 'hf_nonascii_é', 'x'.repeat(4097), 5, {}, ['hf_x']];
    for (const v of bad) {
      for (const call of [() => loadModel('hf:owner/repo:F32', { hubUrl, hubToken: v, cacheDir: tmpdir() }),
        () => loadModel('hf:owner/repo:F32', { hubUrl, hubToken: v, cache: false }), () => resolveHubId('hf:owner/repo:F32', { hubUrl, hubToken: v })]) {
        const e = await call().then(() => null, (err) => err);
        assert.ok(e, `${JSON.stringify(v)} refused`);
        isError('BAD_OPTION', /option hubToken: must be an access token: 1 to 4096 printable ASCII characters without spaces or control characters/)(e);
        if (typeof v === 'string' && v.length > 2) {
          assert.ok(!e.message.includes(v.trim().slice(0, 10)), `the message shows no part of ${JSON.stringify(v)}: ${e.message}`);
          assert.match(e.message, new RegExp(`got a string of ${v.length} characters \\(not shown\\)`));
        }
      }
    }
    assert.equal(log.length, 0, 'no request was made');
  });
});

test('hubAuth: the option, else WASMLM_HUB_TOKEN, else HF_TOKEN for huggingface.co only; empty env is unset; bad env is BAD_OPTION', async () => {
  const hf = 'https://huggingface.co', mirror = 'http://127.0.0.1:9';
  assert.deepEqual(hubAuth({}, hf), { origin: hf, token: null, from: null, hfTokenUnused: false });
  await withEnv({ HF_TOKEN: 'hf_fromHfEnv' }, async () => {
    assert.deepEqual(hubAuth({}, hf), { origin: hf, token: 'hf_fromHfEnv', from: 'HF_TOKEN', hfTokenUnused: false });
    assert.deepEqual(hubAuth({ hubUrl: 'https://huggingface.co/' }), { origin: hf, token: 'hf_fromHfEnv', from: 'HF_TOKEN', hfTokenUnused: false });
    // HF_TOKEN is huggingface.co's credential: not sent to a mirror or a test server
    assert.deepEqual(hubAuth({}, mirror), { origin: mirror, token: null, from: null, hfTokenUnused: true });
    await withEnv({ WASMLM_HUB_TOKEN: 'hf_fromOurEnv' }, async () => {
      assert.equal(hubAuth({}, hf).from, 'WASMLM_HUB_TOKEN');
      assert.equal(hubAuth({}, mirror).token, 'hf_fromOurEnv');
      assert.deepEqual(hubAuth({ hubToken: 'hf_option' }, mirror), { origin: mirror, token: 'hf_option', from: 'hubToken', hfTokenUnused: false });
    });
    await withEnv({ WASMLM_HUB_TOKEN: '' }, async () => assert.equal(hubAuth({}, hf).from, 'HF_TOKEN'));
  });
  await withEnv({ HF_TOKEN: 'hf_bad value' }, async () => {
    assert.throws(() => hubAuth({}, hf), (e) => isError('BAD_OPTION', /^env HF_TOKEN \(a hub access token\): must be an access token/, /got a string of 12 characters \(not shown\)/)(e) &&
      !e.message.includes('bad value') && e.env === 'HF_TOKEN');
    assert.equal(hubAuth({}, mirror).token, null, 'an HF_TOKEN that is not used is not checked');
  });
});

// ---- what goes over the wire -----------------------------------------------------------

test('Node: the token goes along same-origin redirects and is dropped at the first hop to another origin, for good', async () => {
  const seen = [];
  const servers = [];
  const start = async (name, handler) => {
    const s = await listen((req, res) => { seen.push(`${name} ${req.url} ${req.headers.authorization || '-'}`); handler(req, res); });
    servers.push(s);
    return s;
  };
  const a = await start('A', (req, res) => {
    const to = { '/start': '/same', '/same': `${b.url}/x`, '/back': '/end' }[req.url];
    if (to) { res.writeHead(302, { location: to }); res.end(); return; }
    res.end('a');
  });
  const b = await start('B', (req, res) => { res.writeHead(307, { location: `${a.url}/back` }); res.end(); });
  // a fetch that follows redirects keeping every header: the token must still not leave A
  const leaky = async (url, init = {}) => {
    let res = await fetch(url, { ...init, redirect: 'manual' });
    for (let i = 0; init.redirect !== 'manual' && i < 10 && res.status >= 300 && res.status < 400; i++) {
      url = new URL(res.headers.get('location'), url).href;
      res = await fetch(url, { ...init, redirect: 'manual' });
    }
    return res;
  };
  try {
    for (const f of [globalThis.fetch, leaky]) {
      seen.length = 0;
      const { response, timer } = await fetchChecked(`${a.url}/start`, { fetch: f, auth: { origin: a.url, token: TOKEN } });
      timer.done();
      assert.equal(await response.text(), 'a');
      assert.deepEqual(seen, [`A /start Bearer ${TOKEN}`, `A /same Bearer ${TOKEN}`, 'B /x -', 'A /back -', 'A /end -'], f === leaky ? 'leaky fetch' : 'fetch');
    }
    // a URL of another origin never gets it
    seen.length = 0;
    const { response, timer } = await fetchChecked(`${b.url}/x`, { fetch: leaky, auth: { origin: a.url, token: TOKEN } });
    timer.done(); await response.text();
    assert.deepEqual(seen, ['B /x -', 'A /back -', 'A /end -']);
  } finally {
    for (const s of servers) await s.close();
  }
});

test('a gated repository: no token, a refused token and an unaccepted licence are UNAUTHORIZED saying what to do; never the token', LONG, async () => {
  const state = gated();
  await withHub(state, async (hubUrl, log) => {
    const o = { hubUrl, cacheDir: tmpdir(), offline: false, threads: 1 };
    // no token
    let e = await loadModel('hf:owner/repo:F32', o).catch((x) => x);
    isError('UNAUTHORIZED', /^the listing of owner\/repo on http:\/\/127\.0\.0\.1:\d+: HTTP 401: no access token was sent, and the repository is gated or private \(or does not exist\): set an access token: the option hubToken \(CLI --hub-token\) or env WASMLM_HUB_TOKEN; a gated model also needs its licence accepted on http:\/\/127\.0\.0\.1:\d+\/owner\/repo$/)(e);
    assert.equal(e.tokenSent, false); assert.equal(e.tokenFrom, null); assert.equal(e.status, 401);
    assert.ok(hubRequests(log).length > 0 && hubRequests(log).every((l) => l.authorization === undefined));
    // a direct file id (the resolve endpoint), through the Node cache and streamed
    for (const x of [o, { hubUrl, cache: false }]) {
      e = await loadModel('hf:owner/repo/tiny-F32.gguf', x).catch((err) => err);
      isError('UNAUTHORIZED', /^tiny-F32\.gguf in owner\/repo at revision main on http:\/\/127\.0\.0\.1:\d+: HTTP 401: no access token was sent/)(e);
    }
    // HF_TOKEN is huggingface.co's: not sent here, and the message says so
    log.length = 0;
    e = await withEnv({ HF_TOKEN: TOKEN }, () => loadModel('hf:owner/repo:F32', o).catch((err) => err));
    isError('UNAUTHORIZED', /; HF_TOKEN is set, but it is sent to https:\/\/huggingface\.co only;/)(e);
    assert.ok(log.every((l) => l.authorization === undefined), 'HF_TOKEN went nowhere');
    assertNoToken(e, 'the error');
    // a token the hub refuses
    e = await loadModel('hf:owner/repo:F32', { ...o, hubToken: 'hf_wrongToken' }).catch((err) => err);
    isError('UNAUTHORIZED', /HTTP 401: the access token \(from hubToken\) was sent and refused: check that it is valid and not expired/)(e);
    assert.equal(e.tokenSent, true); assert.equal(e.tokenFrom, 'hubToken');
    assert.ok(!util.inspect(e, { depth: 20 }).includes('hf_wrongToken'));
    // the right token, the licence not accepted (403), from the env
    state.licence = false;
    e = await withEnv({ WASMLM_HUB_TOKEN: TOKEN }, () => loadModel('hf:owner/repo/tiny-F32.gguf', { hubUrl, cacheDir: tmpdir(), offline: false }).catch((err) => err));
    isError('UNAUTHORIZED', /HTTP 403: the access token \(from WASMLM_HUB_TOKEN\) was sent, but it gives no access to this repository: accept the model's licence on http:\/\/127\.0\.0\.1:\d+\/owner\/repo \(gated models\)/)(e);
    assert.equal(e.tokenFrom, 'WASMLM_HUB_TOKEN');
    assertNoToken(e, 'the 403 error');
    e = await loadModel('hf:owner/repo:F32', { hubUrl, cache: false, hubToken: TOKEN }).catch((err) => err);
    isError('UNAUTHORIZED', /HTTP 403/)(e);
    assertNoToken(e, 'the streamed 403 error');
    // a public repository of the same hub needs none: 404s stay NOT_FOUND
    await assert.rejects(loadModel('hf:owner/nope:F32', { ...o, hubToken: TOKEN }), isError('NOT_FOUND', /repository owner\/nope not found/));
    assertCdnSawNoToken([...log, { role: 'cdn', method: 'GET', path: '/none' }]);
  });
});

test('a gated repository loads with the token: the hub gets it on the listing, the resolve URL and its same-origin hop; the CDN never', LONG, async () => {
  await withHub(gated({ hop: true }), async (hubUrl, log, cdnUrl) => {
    assert.notEqual(new URL(cdnUrl).origin, new URL(hubUrl).origin);
    const cacheDir = tmpdir();
    const progress = [];
    const { result: m, out } = await captureConsole(() => loadModel('hf:owner/repo:F32', {
      hubUrl, cacheDir, offline: false, threads: 1, hubToken: TOKEN, onProgress: (p) => progress.push(p) }));
    const info = m.info;
    const text = (await m.complete('Once', { maxTokens: 4, temperature: 0 })).text;
    await m.dispose();
    const hub = hubRequests(log);
    assert.ok(hub.some((l) => l.path.startsWith('/api/models/owner/repo/tree/main')), 'the listing');
    assert.ok(hub.some((l) => l.path === '/owner/repo/resolve/main/tiny-F32.gguf'), 'the resolve URL');
    assert.ok(hub.some((l) => l.path === '/owner/repo/hop/main/tiny-F32.gguf'), 'the same-origin hop');
    assert.deepEqual(hub.filter((l) => l.authorization !== `Bearer ${TOKEN}`), [], 'every hub request carried the token');
    assertCdnSawNoToken(log);
    assertNoToken(info, 'info'); assertNoToken(progress, 'progress events'); assertNoToken(out.join('\n'), 'console output');
    assertNoToken(dirText(cacheDir), 'the cache directory');
    assert.equal(sha(fs.readFileSync(path.join(cacheDir, 'hf--owner--repo--main--tiny-F32.gguf'))), sha(V1));
    // again: a conditional request with the token at the hub, the CDN answers 304 without it
    log.length = 0;
    const r = await resolveHubModel('hf:owner/repo:F32', { hubUrl, cacheDir, offline: false, hubToken: TOKEN });
    assert.equal(r.source, 'cache');
    assert.deepEqual(cdnRequests(log).map((l) => [l.method, !!l.ifNoneMatch, l.authorization]), [['GET', true, undefined]]);
    assert.ok(hubRequests(log).every((l) => l.authorization === `Bearer ${TOKEN}`));
    // the cached copy is no way around the gate online: without the token the hub refuses
    await assert.rejects(resolveHubModel('hf:owner/repo/tiny-F32.gguf', { hubUrl, cacheDir, offline: false }), isError('UNAUTHORIZED', /no access token was sent/));
    // offline it is the user's own copy
    assert.equal((await resolveHubModel('hf:owner/repo/tiny-F32.gguf', { hubUrl, cacheDir, offline: true })).source, 'cache');
    // streamed (no Node cache): the same requests, the same output
    log.length = 0;
    const m2 = await withEnv({ WASMLM_HUB_TOKEN: TOKEN }, () => loadModel('hf:owner/repo:F32', { hubUrl, cache: false, threads: 1 }));
    assert.equal((await m2.complete('Once', { maxTokens: 4, temperature: 0 })).text, text);
    assertNoToken(m2.info, 'info (streamed)');
    await m2.dispose();
    assert.deepEqual(hubRequests(log).filter((l) => l.authorization !== `Bearer ${TOKEN}`), []);
    assertCdnSawNoToken(log);
  });
});

test('listing pages on another origin (Link rel="next") are read without the token', LONG, async () => {
  // the imitation's pages link to the CDN origin, which serves them ungated
  const state = gated({ files: { 'a.gguf': V1, 'b-F32.gguf': V1, 'c.txt': Buffer.from('x') } });
  await withHub(state, async (hubUrl, log, cdnUrl) => {
    state.linkBase = cdnUrl;
    const r = await resolveHubId('hf:owner/repo:F32', { hubUrl, hubToken: TOKEN });
    assert.equal(r.path, 'b-F32.gguf');
    const pages = log.filter((l) => l.path.startsWith('/api/models/owner/repo/tree/main'));
    assert.ok(pages.length >= 3);
    assert.deepEqual(pages.map((l) => [l.role, l.authorization]), [['hub', `Bearer ${TOKEN}`], ...pages.slice(1).map(() => ['cdn', undefined])]);
  });
});

// ---- split GGUFs in a gated repository ------------------------------------------------

test('a split GGUF in a gated repository: every part through the Node cache and streamed, the token to the hub only', LONG, async () => {
  const ref = await loadModel(WHOLE, { threads: 1 });
  const want = await ref.complete('Once upon', { maxTokens: 6, temperature: 0 });
  await ref.dispose();
  const state = { token: TOKEN, cdn: true, files: { ...PARTS, 'README.md': Buffer.from('x') } };
  const n = SPLIT.parts.length;
  await withHub(state, async (hubUrl, log) => {
    const cacheDir = tmpdir();
    const progress = [];
    // by quantization (the listing gives the parts' sizes) and by the first part's path (no listing)
    for (const [id, dir] of [['hf:owner/repo:F32', cacheDir], ['hf:owner/repo/m-F32-00001-of-0000' + n + '.gguf', tmpdir()]]) {
      log.length = 0;
      progress.length = 0;
      const m = await loadModel(id, { hubUrl, cacheDir: dir, offline: false, threads: 1, hubToken: TOKEN, onProgress: (p) => progress.push(p) });
      assert.deepEqual((await m.complete('Once upon', { maxTokens: 6, temperature: 0 })).tokens, want.tokens, id);
      await m.dispose();
      const resolves = hubRequests(log).filter((l) => l.path.includes('/resolve/'));
      assert.equal(resolves.length, n, `${id}: every part resolved`);
      assert.ok(hubRequests(log).every((l) => l.authorization === `Bearer ${TOKEN}`));
      assertCdnSawNoToken(log);
      assertNoToken(progress, 'progress'); assertNoToken(dirText(dir), 'the cache');
      const names = fs.readdirSync(dir).filter((f) => f.endsWith('.gguf')).sort();
      assert.deepEqual(names, SPLIT.parts.map((p) => `hf--owner--repo--main--${path.basename(p)}`), 'the parts sit side by side');
    }
    // the parts' download progress is one download of the whole
    const dl = progress.filter((p) => p.phase === 'download');
    assert.equal(dl.at(-1).loaded, Object.values(PARTS).reduce((a, b) => a + b.length, 0));
    // streamed (the browsers' path in Node)
    log.length = 0;
    const m = await loadModel('hf:owner/repo:F32', { hubUrl, cache: false, threads: 1, hubToken: TOKEN });
    assert.deepEqual((await m.complete('Once upon', { maxTokens: 6, temperature: 0 })).tokens, want.tokens);
    await m.dispose();
    assertCdnSawNoToken(log);
    assert.equal(cdnRequests(log).length, n);
    // without the token: UNAUTHORIZED, not a missing part
    await assert.rejects(loadModel('hf:owner/repo/m-F32-00001-of-0000' + n + '.gguf', { hubUrl, cache: false }),
      isError('UNAUTHORIZED', /m-F32-00001-of-0000\d\.gguf in owner\/repo at revision main on .*HTTP 401: no access token was sent/));
    // a part missing from the listing is named before any byte is fetched
    delete state.files[`m-F32-0000${n}-of-0000${n}.gguf`];
    log.length = 0;
    for (const o of [{ cacheDir: tmpdir() }, { cache: false }]) {
      await assert.rejects(loadModel('hf:owner/repo:F32', { hubUrl, threads: 1, hubToken: TOKEN, offline: false, ...o }),
        isError('BAD_FILE', new RegExp(`split GGUF part ${n} of ${n} is missing: m-F32-0000${n}-of-0000${n}\\.gguf is not in owner/repo`)));
    }
    assert.equal(cdnRequests(log).length, 0);
  });
});

// ---- the CLI --------------------------------------------------------------------------

test('the CLI: --hub-token and WASMLM_HUB_TOKEN open a gated repository; without one it says what to do; never prints the token', LONG, async () => {
  await withHub(gated(), async (hubUrl, log) => {
    const env = { WASMLM_HUB_URL: hubUrl, WASMLM_OFFLINE: '0', HF_TOKEN: '', WASMLM_HUB_TOKEN: '' };
    const runs = [];
    const run = async (args, extra = {}) => { const r = await runCli(args, { env: { ...env, WASMLM_CACHE: tmpdir(), ...extra } }); runs.push(r); return r; };
    let r = await run(['info', '-m', 'hf:owner/repo:F32', '--json', '--hub-token', TOKEN]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).hparams.nVocab, 512);
    r = await run(['tokenize', '-m', 'hf:owner/repo/tiny-F32.gguf', '-p', 'a', `--hub-token=${TOKEN}`]);
    assert.equal(r.code, 0, r.stderr);
    r = await run(['info', 'hf:owner/repo:F32'], { WASMLM_HUB_TOKEN: TOKEN });
    assert.equal(r.code, 0, r.stderr);
    if (fs.existsSync(new URL('../../build/wasmlm-native', import.meta.url))) {
      r = await run(['info', 'hf:owner/repo:F32', '--native', '--hub-token', TOKEN]);
      assert.equal(r.code, 0, r.stderr);
    }
    assert.ok(hubRequests(log).every((l) => l.authorization === `Bearer ${TOKEN}`));
    assertCdnSawNoToken(log);
    r = await run(['info', 'hf:owner/repo:F32']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error: the listing of owner\/repo on .*HTTP 401: no access token was sent.*--hub-token/);
    r = await run(['info', 'hf:owner/repo:F32', '--hub-token', 'hf_wrong']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /the access token \(from hubToken\) was sent and refused/);
    r = await run(['info', 'hf:owner/repo:F32', '--hub-token', `${TOKEN} x`]);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `error: option --hub-token: must be an access token: 1 to 4096 printable ASCII characters without spaces or control characters, got a string of ${TOKEN.length + 2} characters (not shown)\n`);
    r = await run(['info', 'hf:owner/repo:F32'], { WASMLM_HUB_TOKEN: `${TOKEN}\t` });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^error: env WASMLM_HUB_TOKEN \(a hub access token\): must be/);
    for (const x of runs) assertNoToken(x.stdout + x.stderr, `output of a CLI run (${x.stderr.slice(0, 60)})`);
    const help = await runCli(['--help']);
    assert.match(help.stdout, /--hub-token TOKEN +access token for gated or private repositories/);
    assert.match(help.stdout, /HF_TOKEN \(access token for gated \/ private repositories on huggingface\.co\), WASMLM_HUB_TOKEN/);
  });
});
