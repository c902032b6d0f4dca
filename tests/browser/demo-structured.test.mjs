// The demo page's structured-output mode in headless Chromium with
// stories260K: with a JSON Schema in the editor, the output is JSON that
// parses, follows the schema (an enum, a required integer in its range) and
// is shown pretty-printed; a schema with a keyword the converter does not
// support shows an error naming the keyword; text that is not JSON is an
// error too; with the mode off the page generates plain text again.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startDemoServer } from '../../web/demo/server.mjs';
import { openPage, MODELS, MODEL_PATH } from './browser.mjs';

let server, page, close;
const errors = [];
const waitState = (states, timeout = 60000) =>
  page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

before(async () => {
  assert.ok(fs.existsSync(MODEL_PATH), `${MODEL_PATH} is missing (set WASMLM_MODELS or WLM_SHARED)`);
  server = await startDemoServer({ modelsDir: MODELS });
  ({ page, close } = await openPage({ server, errors, path: '/web/demo/' }));
  await page.selectOption('#model-select', 'local:stories260K.gguf');
  await waitState(['ready'], 120000);
  if (!(await page.evaluate(() => window.wasmlmDemo.state.modelLabel === 'stories260K'))) {
    await page.click('#load-btn');
    await page.waitForFunction(() => window.wasmlmDemo.state.modelLabel === 'stories260K' && document.body.dataset.state === 'ready', null, { timeout: 60000 });
  }
});
after(async () => {
  await close?.();
});

const SCHEMA = {
  type: 'object',
  properties: {
    mood: { enum: ['happy', 'sad', 'sleepy'] },
    age: { type: 'integer', minimum: 1, maximum: 99 },
  },
  required: ['mood', 'age'],
  additionalProperties: false,
};

async function run(schemaText, seed) {
  await page.fill('#schema', schemaText);
  await page.fill('#seed', String(seed));
  await page.click('#generate');
  await waitState(['done', 'error', 'stopped']);
  return page.evaluate(() => ({
    state: document.body.dataset.state,
    gen: document.querySelector('#output .gen').textContent,
    json: document.getElementById('output').dataset.json,
    stats: document.getElementById('stats').textContent,
  }));
}

test('structured output: JSON that parses and follows the schema, pretty-printed, for several seeds', async () => {
  await page.fill('#prompt', 'Lily was');
  await page.fill('#temperature', '1');
  await page.fill('#max-tokens', '200');
  assert.equal(await page.isHidden('#schema'), true);
  await page.setChecked('#structured', true);
  assert.equal(await page.isVisible('#schema'), true);
  for (const seed of [1, 2, 3]) {
    const r = await run(JSON.stringify(SCHEMA, null, 2), seed);
    assert.equal(r.state, 'done', r.stats);
    assert.equal(r.json, 'valid', r.stats);
    const v = JSON.parse(r.gen);
    assert.deepEqual(Object.keys(v).sort(), ['age', 'mood']);
    assert.ok(SCHEMA.properties.mood.enum.includes(v.mood), r.gen);
    assert.ok(Number.isInteger(v.age) && v.age >= 1 && v.age <= 99, r.gen);
    assert.equal(r.gen, JSON.stringify(v, null, 2), 'shown pretty-printed');
  }
});

test('an unsupported schema keyword is an error naming it; text that is not JSON is an error', async () => {
  const bad = await run(JSON.stringify({ type: 'object', minProperties: 1 }), 4);
  assert.equal(bad.state, 'error');
  assert.match(bad.stats, /minProperties/);
  assert.equal(await page.getAttribute('#stats', 'role'), 'status');
  const notJson = await run('{ "type": "object", }', 4);
  assert.equal(notJson.state, 'error');
  assert.match(notJson.stats, /the JSON Schema is not JSON/);
  // the model stays usable, and with the mode off the output is plain text
  await page.setChecked('#structured', false);
  await page.fill('#max-tokens', '20');
  await page.click('#generate');
  await waitState(['done']);
  assert.equal(await page.evaluate(() => document.getElementById('output').dataset.json), undefined);
});

test('no page errors', () => {
  // the two refused schemas were reported by the page itself (console.error of showError)
  assert.deepEqual(errors.filter((e) => !/BAD_SCHEMA|minProperties|is not JSON/.test(e)), []);
});
