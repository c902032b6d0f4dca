// The lint habits of eslint.config.js catch what they are meant to: a private
// member reached from outside its object, an unused variable.
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function lint(code) {
  let ESLint;
  try { ({ ESLint } = await import('eslint')); } catch { return null; }
  const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: path.join(ROOT, 'eslint.config.js') });
  const [r] = await eslint.lintText(code, { filePath: path.join(ROOT, 'web', 'lint-sample.js') });
  return r.messages.map((m) => `${m.ruleId}:${m.line}`);
}

test('lint: `model._client` from outside is an error; `this._x` and wasm `__heap_base` are not', async (t) => {
  const found = await lint([
    'export function f(model, exports) {',
    '  model._client.request("x");',
    '  return exports.__heap_base;',
    '}',
    'export class A { constructor() { this._x = 1; } get x() { return this._x; } }',
  ].join('\n'));
  if (found === null) return t.skip('eslint is not installed');
  assert.deepEqual(found, ['no-restricted-syntax:2']);
});

test('lint: an unused variable is an error; `_` draining an iterator is not', async (t) => {
  const found = await lint([
    'export async function f(it) {',
    '  const unused = 1;',
    '  for await (const _ of it) { /* drain */ }',
    '}',
  ].join('\n'));
  if (found === null) return t.skip('eslint is not installed');
  assert.deepEqual(found, ['no-unused-vars:2']);
});
