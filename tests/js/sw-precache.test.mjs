// The demo's service worker must precache every module the page can import
// (a module missing from its list breaks the offline reload).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers.mjs';

function graph(start) {
  const seen = new Set();
  const todo = [start];
  while (todo.length) {
    const f = todo.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    const src = fs.readFileSync(f, 'utf8');
    // static imports and literal worker / module URLs relative to the file
    const re = /(?:import\s[^'"]*?from\s*|import\s*\(\s*|new URL\(\s*)['"](\.{1,2}\/[^'"]+\.js)['"]/g;
    for (const m of src.matchAll(re)) todo.push(path.resolve(path.dirname(f), m[1]));
  }
  return [...seen];
}

test('the demo service worker precaches every module of the page', () => {
  const sw = fs.readFileSync(path.join(ROOT, 'web/demo/sw.js'), 'utf8');
  const list = new Set([...sw.matchAll(/'(\/[^']+)'/g)].map((m) => m[1]));
  const files = graph(path.join(ROOT, 'web/demo/demo.js')).map((f) => '/' + path.relative(ROOT, f).split(path.sep).join('/'));
  assert.ok(files.includes('/web/index.js') && files.includes('/web/worker/worker.js') && files.includes('/web/worker/multi.js'));
  const missing = files.filter((f) => !list.has(f));
  assert.deepEqual(missing, [], `not precached by web/demo/sw.js: ${missing.join(', ')}`);
});
