// The npm package in a fresh Vite app (vite 7, pinned): `npm pack`, a temp
// app with the tarball and vite installed from npm (the npm cache makes
// this fast and offline after the first time), `vite build`, and the built
// page served with COOP/COEP and opened in Debian's chromium, where it loads
// stories260K and generates the reference greedy tokens, with threads.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
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
  const build = execFileSync(process.execPath, [path.join(app, 'node_modules', 'vite', 'bin', 'vite.js'), 'build'],
    { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 });
  const dist = path.join(app, 'dist');
  assert.ok(fs.existsSync(path.join(dist, 'index.html')), build);
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
  } finally {
    await browser.close();
    await server.close();
  }
});
