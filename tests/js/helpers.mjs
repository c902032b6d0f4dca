// Shared paths and helpers for the JS tests (not a test file itself).
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SHARED = path.resolve(ROOT, process.env.WLM_SHARED || '../shared');
export const MODELS = path.join(SHARED, 'models');
export const REFERENCE = path.join(SHARED, 'reference');
export const MODEL_PATH = path.join(MODELS, 'stories260K.gguf');
export const CLI = path.join(ROOT, 'web', 'cli', 'cli.js');
export const NATIVE_BIN = path.join(ROOT, 'build', 'wasmlm-native');
export const hasNative = fs.existsSync(NATIVE_BIN);
export const NATIVE_SKIP = hasNative ? false : `build/wasmlm-native is missing (run 'make native'): native comparisons skipped`;

// Tests never touch the network: registry names resolve from the shared models folder.
if (!process.env.WASMLM_MODELS) process.env.WASMLM_MODELS = MODELS;
process.env.WASMLM_OFFLINE = '1';

export function reference() {
  return JSON.parse(fs.readFileSync(path.join(REFERENCE, 'stories260K_greedy.json'), 'utf8'));
}

/** Runs the CLI (node web/cli/cli.js ...); resolves {code, stdout, stderr}. */
export function runCli(args, { env = {}, timeout = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = [], err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('cli timed out: ' + args.join(' '))); }, timeout);
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
  });
}

/** Asserts a WasmlmError with `code` whose message matches every regexp (for assert.rejects). */
export function isError(code, ...patterns) {
  return (e) => {
    assert.equal(e.name, 'WasmlmError', e.stack);
    assert.equal(e.code, code, e.message);
    for (const p of patterns) assert.match(e.message, p);
    return true;
  };
}
