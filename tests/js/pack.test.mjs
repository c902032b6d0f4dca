// The npm package as a user gets it: `npm pack`, then the tarball installed
// into a fresh Node ESM app (a temp directory with its own package.json),
// where `import { loadModel } from 'wasmlm'` generates the reference greedy
// text, the `wasmlm` bin runs, and the exports map and types resolve.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { MODEL_PATH, MODELS, reference } from './helpers.mjs';
import { packOnce, npmInstall } from './pack.mjs';

test('npm pack: wasm, glue, types and registry ship; no models, tests or demo', () => {
  const p = packOnce();
  for (const f of ['web/index.js', 'web/worker/worker.js', 'web/worker/thread-worker.js', 'web/worker/engine.js', 'web/cache.js', 'web/cli/cli.js',
    'wasm/wasmlm.wasm', 'wasm/wasmlm-mt.wasm', 'wasm/wasmlm-cli.wasm', 'web/cli/wasi-cli.js', 'index.d.ts', 'models/registry.json', 'package.json', 'README.md']) {
    assert.ok(p.files.includes(f), `${f} is in the tarball`);
  }
  assert.deepEqual(p.files.filter((f) => /\.gguf$|^tests\/|^src\/|^web\/demo\//.test(f)), []);
  // eight engine builds (wasm32 and memory64, each 1 thread / threads, SIMD128 / relaxed) are most of it
  assert.ok(p.size < 2_000_000, `tarball is ${p.size} bytes`);
  console.log(`tarball ${path.basename(p.tarball)}: ${p.size} bytes packed, ${p.unpackedSize} unpacked, ${p.files.length} files`);
});

test('the tarball installs into a fresh Node ESM app that generates the reference text', async () => {
  const p = packOnce();
  const app = fs.mkdtempSync(path.join(p.dir, 'node-app-'));
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'node-app', private: true, type: 'module' }));
  npmInstall(app, [p.tarball]);
  const ref = reference().results[0];
  fs.writeFileSync(path.join(app, 'main.mjs'), `
import { loadModel, DEFAULT_SAMPLING, listCachedModels } from 'wasmlm';
import { resolveModel } from 'wasmlm/registry';
import pkg from 'wasmlm/package.json' with { type: 'json' };
const model = await loadModel(process.argv[2], { contextLength: 256 });
const r = await model.complete(${JSON.stringify(ref.prompt)}, { temperature: 0, repeatPenalty: 1, ignoreEos: true, maxTokens: 60 });
const viaRegistry = await resolveModel('stories260K');
console.log(JSON.stringify({ tokens: r.tokens, text: r.text, threads: model.threads, seed: DEFAULT_SAMPLING.seed,
  version: pkg.version, source: viaRegistry.source, cached: Array.isArray(await listCachedModels({ cacheDir: process.cwd() })) }));
await model.dispose();
`);
  const out = execFileSync(process.execPath, ['main.mjs', MODEL_PATH], {
    cwd: app, encoding: 'utf8', env: { ...process.env, WASMLM_MODELS: MODELS }, timeout: 120000,
  });
  const got = JSON.parse(out.trim().split('\n').pop());
  assert.deepEqual(got.tokens, ref.generated_token_ids.slice(0, 60));
  assert.ok(ref.generated_text.startsWith(got.text));
  assert.equal(got.seed, 0xC0FFEE);
  assert.equal(got.source, 'modelDir');
  assert.equal(got.cached, true);
  // the bin, as npx would run it
  const cli = execFileSync(path.join(app, 'node_modules', '.bin', 'wasmlm'),
    ['generate', '-m', 'stories260K', '-p', ref.prompt, '-n', '20', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos'],
    { cwd: app, encoding: 'utf8', env: { ...process.env, WASMLM_MODELS: MODELS }, timeout: 120000, stdio: ['ignore', 'pipe', 'pipe'] });
  assert.ok(cli.length > 10 && ref.generated_text.startsWith(cli), JSON.stringify(cli));
  // the WASI build's bin
  const wasi = execFileSync(path.join(app, 'node_modules', '.bin', 'wasmlm-wasi'),
    ['generate', '-m', MODEL_PATH, '-p', ref.prompt, '-n', '20', '--temp', '0', '--repeat-penalty', '1', '--ignore-eos'],
    { cwd: app, encoding: 'utf8', timeout: 120000, stdio: ['ignore', 'pipe', 'pipe'] });
  assert.equal(wasi, cli + '\n');
  // TypeScript consumers: the types entry resolves from the package
  const pkg = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', 'wasmlm', 'package.json'), 'utf8'));
  assert.equal(pkg.exports['.'].types, './index.d.ts');
  assert.ok(fs.statSync(path.join(app, 'node_modules', 'wasmlm', pkg.types)).size > 1000);
});

test('index.d.ts declares every export of the package entry', async () => {
  const mod = await import('../../web/index.js');
  const dts = fs.readFileSync(new URL('../../index.d.ts', import.meta.url), 'utf8');
  const missing = Object.keys(mod).filter((k) => k === 'default'
    ? !/^export default /m.test(dts)
    : !new RegExp(`^export (declare )?(function|const|class|let) ${k}\\b`, 'm').test(dts));
  assert.deepEqual(missing, [], 'exports without a declaration in index.d.ts');
});

