// Inference-time scaling in headless Chromium (part of `npm run bench:browser`):
// the ratios of bench/scaling.mjs, measured in a page (web/index.js, workers,
// Chromium's own V8 and its relaxed SIMD) instead of Node. Side by side in
// one page, interleaved, every mode run once at full length before the timed
// reps (V8 tiers up hot wasm functions on background threads), medians.
//   best-of-8 wall time / one generation's wall time (same length, s110m Q4_0)
//   speculative decoding: F16 target + Q4_0 draft of the same model, greedy, speedup at identical output
//   prompt lookup on a repetitive prompt, greedy, speedup at identical output
// Writes bench/results/browser-scaling.{json,md} (--out NAME: NAME.{json,md}).
//
//   node bench/browser-scaling.mjs [--shapes s110m,tl1b] [--reps 5] [--tokens 64] [--threads 2] [--quiet] [--out NAME]
// Needs Debian's chromium and playwright-core: sh tools/setup-browser.sh.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { model as sharedModel, root, scalingTable, scalingWorkloads, benchArgs, median } from './common.mjs';
import { launchBench } from './browser/chromium.mjs';

const args = benchArgs();
const reps = +(args.reps || 5);
const N = +(args.tokens || 64);
const threads = +(args.threads || 2);
const shapes = String(args.shapes || 's110m,tl1b').split(',');
const log = (...a) => { if (!args.quiet) console.error('[browser-scaling]', ...a); };

const W = scalingWorkloads(N);
// every file first (generation / quantization is not timed)
const url = (shape, type) => '/' + path.relative(root, sharedModel(shape, type, log)).split(path.sep).join('/');
const files = { best: url('s110m', 'q4_0') };
const specFiles = W.specCases(shapes).map((sc) => ({ ...sc, f16: url(sc.shape, 'f16'), draftUrl: url(sc.shape, sc.draft) }));

const { server, context, close: closeBrowser } = await launchBench(root, { name: 'browser scaling bench', watchdogMinutes: 40 });

const rows = [];
let env = null, build = null, browserVersion = null;
try {
  const page = await context.newPage();
  page.on('pageerror', (e) => log('[pageerror]', e));
  await page.goto(`${server.url}/bench/browser/index.html`);
  await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
  env = await page.evaluate(() => window.bench.env());
  browserVersion = context.browser()?.version() || env.userAgent.match(/Chrome\/([\d.]+)/)?.[1] || '?';
  if (!env.crossOriginIsolated) throw new Error('the page is not crossOriginIsolated: no threads');
  const load = (u, o) => page.evaluate(([u, o]) => window.bench.oursLoad(u, o), [u, o]);
  const loadDraft = (u, o) => page.evaluate(([u, o]) => window.bench.oursLoadDraft(u, o), [u, o]);
  const timed = (mode, p, o) => page.evaluate(([m, p, o]) => window.bench.oursTimed(m, p, o), [mode, p, o]);

  // ---- best-of-8 ----
  {
    const l = await load(files.best, { threads, contextLength: 1024, maxSequences: 8 });
    build = l.simd;
    const prompt = W.bestPrompt, o = W.bestOptions;
    await timed('single', prompt, o);
    await timed('best', prompt, { ...o, n: 8 });
    const one = [], eight = [];
    for (let r = 0; r < reps; r++) {
      one.push((await timed('single', prompt, o)).ms);
      const b = await timed('best', prompt, { ...o, n: 8 });
      if (b.lengths.some((n) => n !== N)) throw new Error('best-of-8 candidates of unequal length');
      eight.push(b.ms);
    }
    const row = { bench: 'best-of-8', model: 's110m Q4_0', threads, tokens: N, singleMs: median(one), bestOf8Ms: median(eight) };
    row.ratio = row.bestOf8Ms / row.singleMs;
    log(row); rows.push(row);
  }

  // ---- speculative decoding (F16 targets with their own Q4_0: scalingWorkloads) and prompt lookup ----
  const g = W.greedy;
  const cases = specFiles.map((sc) => ({ ...sc, bench: 'speculative', mode: 'draft', so: { ...g, draftTokens: W.specDraftTokens } }));
  if (shapes.includes('s110m')) cases.push({ bench: 'prompt-lookup', mode: 'lookup', shape: 's110m', f16: url('s110m', 'f16'), prompt: W.lookupPrompt,
    so: { ...g, draftTokens: W.lookupDraftTokens }, label: 's110m F16, repetitive prompt' });
  let loaded = null;
  for (const sc of cases) {
    if (loaded !== sc.f16) { await load(sc.f16, { threads, contextLength: 512 }); loaded = sc.f16; }
    if (sc.draftUrl) await loadDraft(sc.draftUrl, { threads, contextLength: 512 });
    const r = sc.shape.startsWith('tl1b') ? Math.max(1, Math.min(reps, 2)) : reps;
    await timed('single', sc.prompt, g);
    await timed(sc.mode, sc.prompt, sc.so);
    const plain = [], spec = [];
    let same = true, st = null;
    for (let i = 0; i < r; i++) {
      const a = await timed('single', sc.prompt, g);
      const b = await timed(sc.mode, sc.prompt, sc.so);
      plain.push(a.ms); spec.push(b.ms);
      if (a.tokens.join() !== b.tokens.join()) same = false;
      st = b.spec;
    }
    const row = { bench: sc.bench, model: sc.label, threads, tokens: N,
      plainMs: median(plain), specMs: median(spec), identical: same, acceptanceRate: st.acceptanceRate, tokensPerPass: st.tokensPerPass,
      ...(sc.target ? { target: sc.target } : {}), ...(sc.draftUrl ? { draftCost: st.draftCost, verifyCost: st.verifyCost } : {}) };
    row.speedup = row.plainMs / row.specMs;
    log(row); rows.push(row);
  }
  await page.evaluate(() => window.bench.oursDispose());
} finally {
  await closeBrowser();
}

const version = browserVersion;
let md = `# Inference-time scaling benchmark in Chromium\n\n${new Date().toISOString()} · ${os.cpus()[0].model} × ${os.cpus().length} · Chromium ${version} (headless) · wasm build ${build} · ${threads} threads · medians of ${reps} (tl1b: ${Math.max(1, Math.min(reps, 2))}), interleaved\n\n`;
md += scalingTable(rows);
md += '\nThe same modes, options and prompts as `bench/scaling.mjs` (Node), run by web/index.js in a crossOriginIsolated page (compute in its workers).\n';
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `${args.out || 'browser-scaling'}.json`), JSON.stringify({ machine: { cpu: os.cpus()[0].model, cores: os.cpus().length, chromium: version, simd: build }, rows }, null, 2));
fs.writeFileSync(path.join(root, 'bench', 'results', `${args.out || 'browser-scaling'}.md`), md);
console.log(md);
if (rows.some((r) => r.identical === false)) process.exitCode = 1;
