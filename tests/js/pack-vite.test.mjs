// The npm package in a fresh Vite app (vite 7, pinned): `npm pack`, a temp
// app with the tarball and vite installed from npm (the npm cache makes
// this fast and offline after the first time), `vite build`, and the built
// page served with COOP/COEP and opened in Debian's chromium, where it loads
// stories260K and generates the reference greedy tokens, with threads. The
// build prints no warnings about the package (no Node built-in is
// "externalized"), and a plain `vite` dev server either works or fails with
// a message that names the one setting to add.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync, spawn } from 'node:child_process';
import { MODEL_PATH, reference } from './helpers.mjs';
import { packOnce, npmInstall } from './pack.mjs';
import { startServer } from '../../bench/browser/server.mjs';
import { launch, watchPage } from '../browser/browser.mjs';

const VITE = '7.3.8';

test(`the tarball in a fresh Vite ${VITE} app: the built page generates in Chromium`, async () => {
  const p = packOnce();
  const app = fs.mkdtempSync(path.join(p.dir, 'vite-app-'));
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({
    name: 'vite-app', private: true, type: 'module', scripts: { build: 'vite build' },
  }));
  npmInstall(app, ['--save-exact', `vite@${VITE}`, p.tarball]);
  const ref = reference().results[0];
  fs.mkdirSync(path.join(app, 'public'));
  fs.copyFileSync(MODEL_PATH, path.join(app, 'public', 'stories260K.gguf'));
  fs.writeFileSync(path.join(app, 'index.html'), `<!doctype html>
<meta charset="utf-8"><title>wasmlm in vite</title>
<pre id="out"></pre>
<script type="module" src="/main.js"></script>
`);
  fs.writeFileSync(path.join(app, 'main.js'), `
import { loadModel } from 'wasmlm';
window.result = (async () => {
  const model = await loadModel('/stories260K.gguf', { contextLength: 256, cache: false });
  let text = '';
  for await (const c of model.generate(${JSON.stringify(ref.prompt)}, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 60 })) text += c.text;
  const r = await model.complete(${JSON.stringify(ref.prompt)}, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 60 });
  document.getElementById('out').textContent = text;
  const out = { tokens: r.tokens, text, threads: model.threads, simd: model.simd, isolated: crossOriginIsolated };
  await model.dispose();
  return out;
})().catch((e) => ({ error: String(e && e.stack || e) }));
`);
  const vite = path.join(app, 'node_modules', 'vite', 'bin', 'vite.js');
  const run = spawnSync(process.execPath, [vite, 'build'], { cwd: app, encoding: 'utf8', timeout: 120000 });
  const build = run.stdout + run.stderr;
  const dist = path.join(app, 'dist');
  assert.ok(fs.existsSync(path.join(dist, 'index.html')), build);
  assert.doesNotMatch(build, /externalized|warning/i, 'vite build warns about the package');
  const server = await startServer(dist, { allow: ['/'] });   // a build output: all of it is the app
  const browser = await launch();
  const errors = [];
  try {
    const page = await browser.context.newPage();
    watchPage(page, errors);
    await page.goto(`${server.url}/index.html`);
    const got = await page.evaluate(() => window.result);
    assert.equal(got.error, undefined, got.error);
    assert.deepEqual(got.tokens, ref.generated_token_ids.slice(0, 60));
    assert.ok(ref.generated_text.startsWith(got.text));
    assert.equal(got.isolated, true);
    assert.ok(got.threads > 1, `threads ${got.threads}`);
    assert.deepEqual(errors, []);

    // a plain dev server (no vite.config.js): generates, or says what to add
    const dev = await startViteDev(vite, app);
    try {
      const devPage = await browser.context.newPage();
      await devPage.goto(dev.url, { timeout: 60000 });
      const r = await devPage.evaluate(() => window.result);
      if (r.error) assert.match(r.error, /optimizeDeps: \{ exclude: \['wasmlm'\] \}/, r.error);
      else assert.deepEqual(r.tokens, ref.generated_token_ids.slice(0, 60));
    } finally {
      dev.stop();
    }
  } finally {
    await browser.close();
    await server.close();
  }
});

// `vite` (the dev server) on a free port; resolves when it listens (at most 60 s).
function startViteDev(vite, app) {
  const child = spawn(process.execPath, [vite, '--port', '0', '--strictPort', 'false', '--host', '127.0.0.1'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill(); reject(new Error(`vite dev did not start: ${out}`)); }, 60000);
    const onData = (d) => {
      out += d;
      // eslint-disable-next-line no-control-regex
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out.replace(/\x1b\[[0-9;]*m/g, ''));
      if (m) { clearTimeout(timer); resolve({ url: m[1], stop: () => child.kill() }); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`vite dev exited (${code}): ${out}`)); });
  });
}
