// make xcheck: every architecture cross-checked against llama.cpp
// (node-llama-cpp's prebuilt CPU build) on the project's synthetic GGUFs.
// Each file in tools/xcheck/ (lib/ holds the shared measure) exports
// `xcheck({llama, tmpDir}) -> {arch, cases: [{name, greedyEqual, ties,
// positions, maxKL, meanKL}]}`. A case passes when every prompt's
// greedy continuation equals llama.cpp's (up to a near-tie, see xcheck/lib/compare.mjs)
// and its largest teacher-forced KL(llama.cpp || wasmlm) is below MAX_KL.
// Embedding checks (xcheck/lib/embed.mjs) return {kind: 'embedding', cases:
// [{name, tokensEqual, minCosine, ...}]}: a case passes when tokenization
// agrees and every text's vector has a cosine of at least MIN_COSINE with
// llama.cpp's.
// Writes bench/results/xcheck.json and xcheck.md (with the date and host);
// given ARCH names (file names in tools/xcheck/), runs only those and keeps
// the other architectures' rows of the existing xcheck.json.
//
//   node tools/xcheck.mjs [ARCH ...]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIR = path.join(ROOT, 'tools', 'xcheck');
import { MAX_KL, TIE_REL, QUANT_SLACK, caseOk } from './xcheck/lib/compare.mjs';
import { MIN_COSINE } from './xcheck/lib/embed.mjs';

async function llamaCpp() {
  const { getLlama } = await import('node-llama-cpp');
  return getLlama({ gpu: false, build: 'never', logLevel: 'error' });
}

const greedyText = (c) => (c.greedyEqual ? 'yes' : 'no');

const isEmbedding = (r) => r.kind === 'embedding';

function judge(r) {
  for (const c of r.cases) {
    c.ok = isEmbedding(r) ? c.tokensEqual === true && c.minCosine >= (r.minCosineAllowed ?? MIN_COSINE)
      : caseOk(c, r.maxKLAllowed ?? MAX_KL);
  }
  r.ok = r.cases.length > 0 && r.cases.every((c) => c.ok);
  return r;
}

/** Runs one xcheck function in a fresh temporary folder. */
export async function runOne(fn, llama) {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-xcheck-'));
  try {
    return judge(await fn({ llama: llama || await llamaCpp(), tmpDir }));
  } finally { fs.rmSync(tmpDir, { recursive: true, force: true }); }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const only = process.argv.slice(2);
  const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.mjs'))
    .filter((f) => !only.length || only.includes(f.replace(/\.mjs$/, ''))).sort();
  const llama = await llamaCpp();
  const results = [];
  for (const f of files) {
    const { xcheck } = await import(pathToFileURL(path.join(DIR, f)).href);
    const r = await runOne(xcheck, llama);
    results.push(r);
    const line = (c) => (isEmbedding(r) ? `${c.name} tokens ${c.tokensEqual ? 'equal' : 'differ'}, min cosine ${c.minCosine.toFixed(8)}`
      : `${c.name} greedy ${greedyText(c)} (ties ${c.ties ?? 0}), max KL ${c.maxKL.toExponential(2)}`);
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.arch}: ${r.cases.map(line).join('; ')}`);
  }
  if (only.length) {   // the other architectures' rows stay as they were measured
    const file = path.join(ROOT, 'bench', 'results', 'xcheck.json');
    const old = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')).results : [];
    const fresh = new Set(results.map((r) => r.arch));
    results.unshift(...old.filter((r) => !fresh.has(r.arch)));
    results.sort((a, b) => (isEmbedding(a) - isEmbedding(b)) || a.arch.localeCompare(b.arch));
  }
  const host = `${os.cpus()[0]?.model || 'unknown CPU'}, ${os.cpus().length} cores`;
  const date = new Date().toISOString().slice(0, 10);
  const out = { date, host, maxKL: MAX_KL, tieRel: TIE_REL, minCosine: MIN_COSINE, results };
  fs.writeFileSync(path.join(ROOT, 'bench', 'results', 'xcheck.json'), JSON.stringify(out, null, 1) + '\n');
  const lines = [`# Cross-check against llama.cpp (${date}, ${host})`, '',
    'Written by `make xcheck` (tools/xcheck.mjs): synthetic GGUFs run by wasmlm and by node-llama-cpp on the same token ids.',
    `A case passes when greedy continuations are equal (a differing argmax where llama.cpp's top-2 gap is below ${TIE_REL} of its log-probability range counts as a tie) and the largest teacher-forced KL(llama.cpp ‖ wasmlm) is below ${MAX_KL}.`,
    'llama.cpp runs with F32 K/V caches and without flash attention, so both engines compute attention in F32 (tools/xcheck/lib/compare.mjs).',
    `Quantized cases (files written by \`wasmlm quantize\`, the same bytes for both): llama.cpp's x86 kernels round Q8 activations by other conventions than its reference code, which wasmlm follows, so the engines differ by rounding noise there; such a case passes when wasmlm's quantization error (mean KL from llama.cpp on the F32 file, same tokens) is at most ${QUANT_SLACK}× llama.cpp's own. Greedy agreement and KL are reported.`, '',
    '| arch | case | greedy equal | ties | positions | max KL | mean KL | quant. error: wasmlm / llama.cpp | ok |', '|---|---|---|---|---|---|---|---|---|'];
  for (const r of results.filter((x) => !isEmbedding(x))) for (const c of r.cases) {
    const q = c.quant ? `${c.quantKL.toExponential(2)} / ${c.quantKLRef.toExponential(2)}` : '';
    lines.push(`| ${r.arch} | ${c.name} | ${greedyText(c)} | ${c.ties ?? 0} | ${c.positions ?? c.greedyTokensCompared ?? ''} | ${c.maxKL.toExponential(2)} | ${c.meanKL.toExponential(2)} | ${q} | ${c.ok ? 'yes' : '**no**'} |`);
  }
  const emb = results.filter(isEmbedding);
  if (emb.length) {
    lines.push('', '## Embeddings', '',
      `node-llama-cpp's embedding context (the file's pooling_type) and \`model.embed\` (pooling 'model', not normalized) on the same framed token ids. A case passes when both tokenize every text alike (no special tokens) and every text's cosine is at least ${MIN_COSINE}.`, '',
      '| arch | case | pooling | texts | tokens equal | 1 − min cosine | 1 − mean cosine | ok |', '|---|---|---|---|---|---|---|---|');
    for (const r of emb) for (const c of r.cases) {
      lines.push(`| ${r.arch} | ${c.name} | ${c.pooling} | ${c.texts} | ${c.tokensEqual ? 'yes' : `**no** (${c.tokenMismatches})`} | ${(1 - c.minCosine).toExponential(2)} | ${(1 - c.meanCosine).toExponential(2)} | ${c.ok ? 'yes' : '**no**'} |`);
    }
  }
  fs.writeFileSync(path.join(ROOT, 'bench', 'results', 'xcheck.md'), lines.join('\n') + '\n');
  if (!results.every((r) => r.ok)) process.exit(1);
}
