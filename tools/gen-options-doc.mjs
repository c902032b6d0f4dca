// Writes docs/options.md from the options schema (web/options.js): one table
// per public method, each option with its kind, default, range and doc line.
// `node tools/gen-options-doc.mjs` rewrites the file; `--check` exits 1 when
// the committed file differs (tests/js/options.test.mjs runs the check).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { METHODS, optionSpec, SAMPLING_PIPELINE } from '../web/options.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'docs', 'options.md');

const KIND_TEXT = {
  int: 'integer', number: 'number', boolean: 'boolean', string: 'string', function: 'function', signal: 'AbortSignal',
  object: 'plain object', logitBias: '{tokenId: bias} \\| [id or text, bias][]', seed: 'integer or bigint', stop: 'string or string[]', sha256: '64 hex digits',
  scorer: "'mean-logprob' \\| 'total-logprob' \\| function", draft: "Model \\| 'lookup'", feedback: 'boolean \\| function',
  wasm: 'Module \\| bytes \\| path \\| URL', hubToken: 'string (a secret)', grammar: 'string (GBNF)', json: "true \\| 'object' \\| false", jsonSchema: 'JSON Schema (object or boolean)', escalate: "('best-of-n' \\| 'tree')[]",
};

function kindOf(s) {
  if (s.kind === 'enum') return s.values.map((v) => `'${v}'`).join(' \\| ');
  if (s.kind === 'adaptiveN') return `{${s.adaptiveKeys.join(', ')}}`;
  return KIND_TEXT[s.kind] || s.kind;
}

function rangeOf(s) {
  if (s.kind !== 'int' && s.kind !== 'number') return '';
  const lo = s.min === undefined ? '' : (s.minExclusive ? `> ${s.min}` : `≥ ${s.min}`);
  const hi = s.max === undefined ? '' : `≤ ${s.max}`;
  return [lo, hi].filter(Boolean).join(', ');
}

function defaultOf(s) {
  if (s.required) return '(required)';
  if (s.default === undefined) return '';
  return typeof s.default === 'string' ? `'${s.default}'` : String(s.default);
}

export function render() {
  const lines = [
    '# Options',
    '',
    'Generated from `web/options.js` by `node tools/gen-options-doc.mjs`; do not edit by hand.',
    '',
    'Every method checks its options on the caller\'s thread before any work: an unknown key is an',
    'error naming the closest known key, a value of the wrong type or out of range is an error',
    'naming the option and what is allowed (`WasmlmError` with code `BAD_OPTION`). `null` and',
    '`undefined` mean "not given". Nothing is coerced or clamped.',
    '',
    '## Sampling',
    '',
    'Each generated token goes through these steps, in this order (`src/sampler.c`); `wlm_sample`,',
    'the distribution a speculative draft is checked against and `nextTokenDistribution` all use them (`nextTokenDistribution` takes no grammar: it starts at step 2).',
    '',
    ...SAMPLING_PIPELINE.map((step, i) => `${i + 1}. ${step}`),
    '',
  ];
  for (const [method, keys] of Object.entries(METHODS)) {
    lines.push(`## ${method}`, '', '| option | kind | default | range | what it does |', '|---|---|---|---|---|');
    for (const k of keys) {
      const s = optionSpec(k, method);
      lines.push(`| \`${k}\` | ${kindOf(s)} | ${defaultOf(s)} | ${rangeOf(s)} | ${s.doc.replace(/\|/g, '\\|')} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const text = render();
  if (process.argv.includes('--check')) {
    const now = fs.existsSync(OUT) ? fs.readFileSync(OUT, 'utf8') : '';
    if (now !== text) { console.error('docs/options.md is stale: run node tools/gen-options-doc.mjs'); process.exit(1); }
  } else {
    fs.writeFileSync(OUT, text);
    console.log(`wrote ${path.relative(ROOT, OUT)}`);
  }
}
