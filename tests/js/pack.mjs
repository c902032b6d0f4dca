// Shared by the npm package tests (not a test file itself): packs the
// repository once per process with `npm pack` into a temp directory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { ROOT } from './helpers.mjs';

let packed = null;

/** Runs `npm pack`; returns {tarball, size, unpackedSize, files, dir}. */
export function packOnce() {
  if (packed) return packed;
  for (const w of ['wasmlm.wasm', 'wasmlm-mt.wasm']) {
    if (!fs.existsSync(path.join(ROOT, 'wasm', w))) throw new Error(`wasm/${w} is missing: run 'make wasm' before packing`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-pack-'));
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const info = JSON.parse(out)[0];
  packed = { tarball: path.join(dir, info.filename), size: info.size, unpackedSize: info.unpackedSize, files: info.files.map((f) => f.path), dir };
  return packed;
}

/** `npm install` in `cwd`, preferring the npm cache (fast and offline once cached). */
export function npmInstall(cwd, args) {
  return execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--no-update-notifier', ...args],
    { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300000 });
}

process.on('exit', () => { if (packed) fs.rmSync(packed.dir, { recursive: true, force: true }); });
