// The demo server (web/demo/server.mjs) and the browser bench's server
// (bench/browser/server.mjs) against hostile requests: path traversal,
// symbolic links out of the model folder, files that are not models, files
// that cannot be read (mode 000, a FIFO, a directory, a dangling link, a
// file deleted while it is being served) and foreign Host headers (a
// DNS-rebinding page). Each must get a 4xx (or its file) and the server must
// stay up; ranges and HEAD must still work.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { spawn, execFileSync } from 'node:child_process';
import { startDemoServer } from '../../web/demo/server.mjs';
import { startServer } from '../../bench/browser/server.mjs';
import { ROOT } from './helpers.mjs';

const MODEL = Buffer.concat([Buffer.from('GGUF'), Buffer.alloc(4092, 7)]);   // the servers never parse it
const SECRET = 'SECRET-do-not-serve';
let tmp;

/** GET (or `method`) `p` on the server at `url` with raw headers (Host
 * included, which fetch cannot set; Host null: none): {status, headers, body}. */
function request(url, p, { method = 'GET', headers = {} } = {}) {
  const u = new URL(url);
  const setHost = headers.Host !== null;
  if (!setHost) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k !== 'Host'));
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: p, method, headers, setHost, timeout: 30000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${p}: no answer in 30 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** A model folder holding one model (tiny.gguf) and everything that must
 * not be served from it, plus a secret file next to it. */
function modelFolder(dir) {
  fs.mkdirSync(path.join(dir, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'tiny.gguf'), MODEL);
  fs.symlinkSync('tiny.gguf', path.join(dir, 'alias.gguf'));          // a link inside the folder: fine
  fs.writeFileSync(path.join(dir, '.env'), SECRET);
  fs.writeFileSync(path.join(dir, 'notes.txt'), SECRET);
  fs.writeFileSync(path.join(dir, '.hidden.gguf'), SECRET);
  fs.writeFileSync(path.join(dir, 'sub', 'inner.gguf'), SECRET);
  fs.writeFileSync(path.join(path.dirname(dir), 'secret.gguf'), SECRET);
  fs.symlinkSync('/etc/passwd', path.join(dir, 'passwd.gguf'));
  fs.symlinkSync('../secret.gguf', path.join(dir, 'outside.gguf'));
  fs.symlinkSync('missing.gguf', path.join(dir, 'dangling.gguf'));
  fs.mkdirSync(path.join(dir, 'dir.gguf'));
  execFileSync('mkfifo', [path.join(dir, 'fifo.gguf')]);
  fs.writeFileSync(path.join(dir, 'locked.gguf'), SECRET);
  fs.chmodSync(path.join(dir, 'locked.gguf'), 0o000);
  fs.writeFileSync(path.join(dir, 'gone.gguf'), MODEL);
}

// Names under the model URL prefix that must not be served, and why
const NOT_MODELS = {
  '.env': 'dot file', 'notes.txt': 'not a model', '.hidden.gguf': 'dot file', 'sub/inner.gguf': 'sub-folder',
  'passwd.gguf': 'link to /etc/passwd', 'outside.gguf': 'link out of the folder', 'dangling.gguf': 'dangling link',
  'dir.gguf': 'directory', 'fifo.gguf': 'FIFO', 'nothing.gguf': 'missing',
  '..%2fsecret.gguf': 'encoded traversal', '%2e%2e/secret.gguf': 'encoded dot segment', 'sub%2f..%2f..%2fsecret.gguf': 'encoded traversal',
  'tiny.gguf%00.txt': 'NUL byte',
};

/** Every name of NOT_MODELS under `prefix` gets a 4xx without the secret, and never hangs. */
async function assertNotServed(url, prefix) {
  for (const [name, why] of Object.entries(NOT_MODELS)) {
    const r = await request(url, prefix + name);
    assert.ok(r.status >= 400 && r.status < 500, `${prefix}${name} (${why}): HTTP ${r.status}`);
    assert.ok(!r.body.includes(SECRET) && !r.body.includes('root:'), `${prefix}${name} (${why}) leaked its content`);
  }
}

/** Range, suffix range, unsatisfiable range and HEAD of the model at `p`. */
async function assertRangesAndHead(url, p) {
  const part = await request(url, p, { headers: { Range: 'bytes=0-3' } });
  assert.equal(part.status, 206);
  assert.equal(part.headers['content-range'], `bytes 0-3/${MODEL.length}`);
  assert.equal(part.body.toString('latin1'), 'GGUF');
  const tail = await request(url, p, { headers: { Range: 'bytes=-5' } });
  assert.equal(tail.status, 206);
  assert.deepEqual(tail.body, MODEL.subarray(-5));
  assert.equal((await request(url, p, { headers: { Range: `bytes=${MODEL.length}-` } })).status, 416);
  const head = await request(url, p, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers['content-length'], String(MODEL.length));
  assert.equal(head.headers['accept-ranges'], 'bytes');
  assert.equal(head.body.length, 0);
  const whole = await request(url, p);
  assert.deepEqual(whole.body, MODEL);
  assert.equal(whole.headers['cross-origin-embedder-policy'], 'require-corp');
}

/** Foreign Host headers get a 403; the loopback names with the port are served. */
async function assertHosts(url, port, p) {
  for (const h of [`evil.example:${port}`, 'evil.example', `localhost:${port + 1 > 65535 ? port - 1 : port + 1}`, `127.0.0.1.evil.example:${port}`, `localhost.:${port}`, null]) {
    const r = await request(url, p, { headers: { Host: h } });
    // no Host at all: Node's HTTP parser already answers 400
    assert.equal(r.status, h === null ? 400 : 403, `Host ${JSON.stringify(h)}: HTTP ${r.status}`);
    if (h !== null) assert.match(r.body.toString(), /^Host .* is not this server/);
  }
  for (const h of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
    assert.equal((await request(url, p, { headers: { Host: h } })).status, 200, `Host ${h}`);
  }
}

// Root ignores mode 000: the server then runs as `nobody`, for whom it is real.
const asRoot = process.getuid?.() === 0;
const nobody = asRoot ? (() => { try { return +execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' }); } catch { return null; } })() : null;
const MODE000_SKIP = process.platform === 'win32' ? 'no file modes on Windows'
  : asRoot && nobody == null ? 'running as root with no user "nobody": mode 000 is meaningless to root' : false;

/** Runs `node args` (as nobody when we are root) until it prints a URL;
 * resolves {url, child, exited()} where exited() tells whether it ended. */
function spawnServer(args, env = {}) {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(asRoot ? { uid: nobody, gid: nobody } : {}),
  });
  let out = '', err = '', code = null;
  child.on('exit', (c, sig) => { code = c ?? sig; });
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`no URL in 60 s: ${out} ${err}`)); }, 60000);
    child.stdout.on('data', () => {
      const m = /http:\/\/127\.0\.0\.1:\d+/.exec(out);
      if (m) { clearTimeout(timer); resolve({ url: m[0], child, exited: () => code !== null ? `exited (${code}): ${err}` : null }); }
    });
    child.on('exit', () => { clearTimeout(timer); reject(new Error(`server exited (${code}): ${err}`)); });
  });
}

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-servers-'));
  fs.chmodSync(tmp, 0o755);   // readable by `nobody` (the mode-000 tests)
  fs.mkdirSync(path.join(tmp, 'models'));
  modelFolder(path.join(tmp, 'models'));
  // a repository-like root for the bench server: its cache folder holds the same hostile files
  const bench = path.join(tmp, 'repo');
  fs.mkdirSync(path.join(bench, 'bench', 'browser'), { recursive: true });
  fs.mkdirSync(path.join(bench, 'bench', 'cache'));
  modelFolder(path.join(bench, 'bench', 'cache'));
  fs.mkdirSync(path.join(bench, '.git'));
  fs.writeFileSync(path.join(bench, '.git', 'config'), SECRET);
  fs.writeFileSync(path.join(bench, 'package.json'), SECRET);
  fs.writeFileSync(path.join(bench, 'bench', 'browser', 'server.mjs'), SECRET);
  for (const f of ['index.html', 'page.js']) fs.copyFileSync(path.join(ROOT, 'bench', 'browser', f), path.join(bench, 'bench', 'browser', f));
  fs.symlinkSync(path.join(ROOT, 'web'), path.join(bench, 'web'));   // allowed folders may be links (node_modules is one here)
  fs.symlinkSync('/etc', path.join(bench, 'web-etc'));
});
after(() => {
  for (const d of [path.join(tmp, 'models'), path.join(tmp, 'repo', 'bench', 'cache')]) fs.chmodSync(path.join(d, 'locked.gguf'), 0o600);
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('demo server: only regular *.gguf files directly in the model folder, links checked after realpath', async () => {
  const s = await startDemoServer({ modelsDir: path.join(tmp, 'models') });
  try {
    await assertNotServed(s.url, '/local-models/');
    for (const p of ['/local-models/../Makefile', '/local-models/%2e%2e/Makefile', '/web/%2e%2e/package.json', '/web/..%2fpackage.json', '/.git/config', '/wasm/..%2fMakefile', '/web/demo/..%2f..%2f..%2fMakefile', '/web/.%2fdemo%2f..%2f..%2fpackage.json']) {
      const r = await request(s.url, p);
      assert.ok(r.status === 403 || r.status === 404, `${p}: HTTP ${r.status}`);
    }
    // one dangling link, FIFO or directory must not break the list, and it lists only what is served
    const list = await request(s.url, '/local-models/index.json');
    assert.equal(list.status, 200, list.body.toString());
    const readable = asRoot ? ['locked.gguf'] : [];   // mode 000 stops only other users
    assert.deepEqual(JSON.parse(list.body).map((m) => m.file), ['alias.gguf', 'gone.gguf', ...readable, 'tiny.gguf']);
    assert.deepEqual((await request(s.url, '/local-models/alias.gguf')).body, MODEL);
    await assertRangesAndHead(s.url, '/local-models/tiny.gguf');
    assert.equal((await request(s.url, '/web/demo/')).status, 200);
  } finally {
    await s.close();
  }
});

test('demo server: a model deleted between its stat and its open costs one request, not the process', async () => {
  const dir = path.join(tmp, 'models');
  let hit = false;
  // runs after the handler's synchronous checks and before any asynchronous open it starts
  const onRequest = (m, u) => { if (u === '/local-models/gone.gguf') process.nextTick(() => { hit = true; fs.rmSync(path.join(dir, 'gone.gguf')); }); };
  const s = await startDemoServer({ modelsDir: dir, onRequest });
  try {
    const r = await request(s.url, '/local-models/gone.gguf');
    assert.ok(hit);
    // either the file was opened before it went (all of it), or a clean 404
    if (r.status === 200) assert.deepEqual(r.body, MODEL);
    else assert.equal(r.status, 404);
    await new Promise((res) => setTimeout(res, 200));
    assert.equal((await request(s.url, '/local-models/tiny.gguf')).status, 200, 'the server is still up');
  } finally {
    await s.close();
    fs.writeFileSync(path.join(dir, 'gone.gguf'), MODEL);
  }
});

test('demo server: foreign Host headers are refused; loopback names and --host are served', async () => {
  const s = await startDemoServer({ modelsDir: path.join(tmp, 'models') });
  try {
    await assertHosts(s.url, s.port, '/web/demo/');
    assert.equal((await request(s.url, '/local-models/tiny.gguf', { headers: { Host: `evil.example:${s.port}` } })).status, 403);
  } finally {
    await s.close();
  }
  // --host X: X is accepted too (127.0.0.2 is loopback on Linux)
  if (process.platform === 'linux') {
    const t = await startDemoServer({ host: '127.0.0.2', modelsDir: null });
    try {
      assert.equal((await request(t.url, '/web/demo/', { headers: { Host: `127.0.0.2:${t.port}` } })).status, 200);
      assert.equal((await request(t.url, '/web/demo/', { headers: { Host: `evil.example:${t.port}` } })).status, 403);
    } finally {
      await t.close();
    }
  }
  // a wildcard bind answers to the machine's own name too, still not to others
  const w = await startDemoServer({ host: '0.0.0.0', modelsDir: null });
  try {
    const url = `http://127.0.0.1:${w.port}`;
    assert.equal((await request(url, '/web/demo/', { headers: { Host: `${os.hostname()}:${w.port}` } })).status, 200);
    assert.equal((await request(url, '/web/demo/', { headers: { Host: `evil.example:${w.port}` } })).status, 403);
  } finally {
    await w.close();
  }
});

test('demo server: a mode-000 model gets a 403 and the process stays up', { skip: MODE000_SKIP }, async () => {
  const s = await spawnServer([path.join(ROOT, 'web', 'demo', 'server.mjs'), '--port', '0', '--models', path.join(tmp, 'models')]);
  try {
    const r = await request(s.url, '/local-models/locked.gguf');
    assert.equal(r.status, 403, r.body.toString());
    assert.ok(!r.body.includes(SECRET));
    await new Promise((res) => setTimeout(res, 200));
    assert.equal(s.exited(), null);
    assert.equal((await request(s.url, '/local-models/tiny.gguf')).status, 200);
  } finally {
    s.child.kill();
  }
});

test('bench server: serves what the bench page loads and nothing else of the repository', async () => {
  const s = await startServer(ROOT, { modelsDir: path.join(tmp, 'models') });
  try {
    const wllama = fs.existsSync(path.join(ROOT, 'node_modules', '@wllama', 'wllama', 'esm', 'index.js'));
    const needed = ['/bench/browser/index.html', '/bench/browser/page.js', '/web/index.js', '/web/worker/worker.js', '/wasm/wasmlm.wasm',
      '/models/registry.js', '/models/registry.json', '/bench/browser/',
      ...(wllama ? ['/node_modules/@wllama/wllama/esm/index.js', '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm'] : [])];
    for (const p of needed) {
      const r = await request(s.url, p, { method: 'HEAD' });
      assert.equal(r.status, 200, p);
      assert.equal(r.headers['cross-origin-opener-policy'], 'same-origin', p);
    }
    for (const p of ['/.git', '/.git/config', '/.git/HEAD', '/package.json', '/Makefile', '/README.md', '/src/wlm.h', '/bench/browser/server.mjs',
      '/bench/common.mjs', '/tests/js/helpers.mjs', '/node_modules/.package-lock.json', '/node_modules/playwright-core/package.json',
      '/node_modules/@wllama/wllama/package.json', '/web/../package.json', '/%2e%2e/%2e%2e/etc/passwd', '/web/%2e%2e/Makefile']) {
      const r = await request(s.url, p);
      assert.ok(r.status === 403 || r.status === 404, `${p}: HTTP ${r.status}`);
    }
    await assertRangesAndHead(s.url, '/bench/cache/tiny.gguf');
    await assertHosts(s.url, s.port, '/bench/browser/index.html');
  } finally {
    await s.close();
  }
});

test('bench server: traversal, links, non-model and unreadable files in its folders', async () => {
  const s = await startServer(path.join(tmp, 'repo'));
  try {
    await assertNotServed(s.url, '/bench/cache/');
    for (const p of ['/.git/config', '/package.json', '/bench/browser/server.mjs', '/web-etc/passwd', '/bench/cache/../../package.json']) {
      const r = await request(s.url, p);
      assert.ok(r.status === 403 || r.status === 404, `${p}: HTTP ${r.status}`);
      assert.ok(!r.body.includes(SECRET) && !r.body.includes('root:'), `${p} leaked`);
    }
    assert.equal((await request(s.url, '/web/index.js')).status, 200, 'an allowed folder that is a link is served');
    assert.deepEqual((await request(s.url, '/bench/cache/alias.gguf')).body, MODEL);
  } finally {
    await s.close();
  }
});

test('bench server: a mode-000 model gets a 403 and the process stays up', { skip: MODE000_SKIP }, async () => {
  const code = `import { startServer } from ${JSON.stringify(path.join(ROOT, 'bench', 'browser', 'server.mjs'))};
    const s = await startServer(process.env.BENCH_ROOT); console.log(s.url);`;
  const s = await spawnServer(['--input-type=module', '-e', code], { BENCH_ROOT: path.join(tmp, 'repo') });
  try {
    const r = await request(s.url, '/bench/cache/locked.gguf');
    assert.equal(r.status, 403, r.body.toString());
    await new Promise((res) => setTimeout(res, 200));
    assert.equal(s.exited(), null);
    assert.equal((await request(s.url, '/bench/cache/tiny.gguf')).status, 200);
  } finally {
    s.child.kill();
  }
});
