// package.json `engines` states the Node versions where both `import` and
// `require('wasmlm')` work (require of an ES module: Node 20.19 and 22.12).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ROOT } from './helpers.mjs';

const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

/** Whether version `v` (x.y.z) is in a range made of `^a.b.c` and `>=a.b.c` alternatives. */
function satisfies(v, range) {
  const num = (s) => s.split('.').map(Number);
  const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
  const x = num(v);
  return range.split('||').some((alt) => {
    const m = alt.trim().match(/^(\^|>=)(\d+\.\d+\.\d+)$/);
    assert.ok(m, `range part '${alt.trim()}' is ^x.y.z or >=x.y.z`);
    const lo = num(m[2]);
    return cmp(x, lo) >= 0 && (m[1] === '>=' || x[0] === lo[0]);
  });
}

test('engines: the minimum is where require(esm) works; the README states the same', () => {
  const range = PKG.engines.node;
  assert.equal(range, '^20.19.0 || >=22.12.0');
  assert.ok(!satisfies('20.18.3', range) && !satisfies('21.7.3', range) && !satisfies('22.11.0', range));
  assert.ok(satisfies('20.19.0', range) && satisfies('22.12.0', range) && satisfies('24.0.0', range));
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  assert.match(readme, /Node 20\.19\+ or 22\.12\+/);
});

test('engines: this Node is in range, and both import and require load the package', { skip: !satisfies(process.versions.node, PKG.engines.node) && `Node ${process.versions.node} is outside ${PKG.engines.node}` }, async () => {
  const req = createRequire(path.join(ROOT, 'package.json'));
  assert.equal(typeof req('wasmlm').loadModel, 'function');
  assert.equal(typeof (await import('wasmlm')).loadModel, 'function');
});
