// `npm run bench:browser`: wasmlm beside wllama (@wllama/wllama, llama.cpp
// compiled by emscripten; CPU only) in one headless Chromium page, on the same
// synthetic GGUF files, same thread count, same 128-token prompt, greedy, and
// beside native llama.cpp (llama-bench built for this machine:
// bench/llama-native.mjs) run on the same files between the page's runs.
// Both engines stay loaded for a configuration; timed runs alternate between
// them (ours first on even reps, wllama first on odd ones; llama-bench after
// both) after two warm-up runs each (wasm tier-up). Medians of --reps. A
// correctness run per configuration compares the greedy tokens (wllama with
// top-5 logprobs). Decode is also given as a share of the machine's
// streaming-read bandwidth (weight bytes a token reads x tok/s).
// Writes bench/results/browser-<stamp>.json and .md, and bench/results/browser-latest.md.
//
//   node bench/browser-bench.mjs [--shapes s110m,tl1b] [--types q4_0,q4_k_m,q8_0]   (f16 too: --types q4_0,f16)
//        [--threads 1,2] [--reps 3] [--max-tokens 64] [--prompt-tokens 128] [--quiet]
//        [--engines ours,wllama,llama-bench] [--no-build]
// Needs Debian's chromium and the devDependencies: sh tools/setup-browser.sh.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { model as sharedModel, promptOf, root, native, benchArgs, median } from './common.mjs';
import { launchBench } from './browser/chromium.mjs';
import { prepareLlamaBench, llamaBench, hostCpu, simdFlags, weightBytesPerToken } from './llama-native.mjs';

const args = benchArgs();
const shapes = String(args.shapes || 's110m,tl1b').split(',');
const types = String(args.types || 'q4_0,q4_k_m,q8_0').split(',');
const threadCounts = String(args.threads || '1,2').split(',').map(Number);
const reps = +(args.reps || 3);
const maxTokens = +(args['max-tokens'] || 64);
const promptTokens = +(args['prompt-tokens'] || 128);
const WARMUP = 2;
const engines = new Set(String(args.engines || 'ours,wllama,llama-bench').split(','));
for (const e of engines) if (!['ours', 'wllama', 'llama-bench'].includes(e)) { console.error(`--engines: unknown ${e} (ours, wllama, llama-bench)`); process.exit(2); }
const log = (...a) => { if (!args.quiet) console.error(...a); };


const model = (shape, type) => sharedModel(shape, type, log);


if (engines.has('wllama') && !fs.existsSync(path.join(root, 'node_modules', '@wllama', 'wllama', 'esm', 'index.js'))) {
  console.error('@wllama/wllama is not installed: run sh tools/setup-browser.sh'); process.exit(2);
}
for (const w of ['wasm/wasmlm.wasm', 'wasm/wasmlm-mt.wasm']) {
  if (!fs.existsSync(path.join(root, w))) { console.error(`${w} is missing: run make wasm`); process.exit(2); }
}

// prepare every file first (generation / quantization is not timed)
const configs = [];
for (const shape of shapes) for (const type of types) {
  const file = model(shape, type);
  const weightBytes = await weightBytesPerToken(file);
  for (const threads of threadCounts) configs.push({ shape, type, file, threads, weightBytes });
}

// native llama.cpp (built now if it must be) and the machine's streaming-read
// bandwidth by thread count, before the browser starts
let lb = { bin: null, why: 'not asked for (--engines)' };
if (engines.has('llama-bench')) lb = prepareLlamaBench({ log, build: !args['no-build'] });
log(lb.bin ? `llama-bench: ${lb.bin}${lb.commit ? ` (llama.cpp ${lb.commit})` : ''}` : `llama-bench not used: ${lb.why}`);
const bandwidth = {};
for (const t of threadCounts) {
  const r = fs.existsSync(native) ? spawnSync(native, ['bandwidth', String(t)], { encoding: 'utf8' }) : null;
  bandwidth[t] = r && r.status === 0 ? +r.stdout.trim() : null;
}
log('bandwidth GB/s', JSON.stringify(bandwidth));
let lbInfo = null;

// Other work on the machine skews both engines (multi-threaded wllama
// badly): the busy CPU share (/proc/stat over 1 s, in cores) is measured
// before the run and before every configuration, while nothing of ours runs.
function cpuTimes() {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return { idle: f[3] + (f[4] || 0), total: f.reduce((a, b) => a + b, 0) };
  } catch { return null; }
}
async function busyCores(ms = 1000) {
  const a = cpuTimes();
  await new Promise((r) => setTimeout(r, ms));
  const b = cpuTimes();
  if (!a || !b || b.total === a.total) return null;
  return +((1 - (b.idle - a.idle) / (b.total - a.total)) * os.cpus().length).toFixed(2);
}
const busyStart = await busyCores();
if (busyStart > 0.3) log(`WARNING: ${busyStart} cores are busy before the run: other work is running, numbers will be noisy`);
const t0All = performance.now();
// a tl1b configuration takes minutes (wllama decodes it at a few tokens a second)
const { server, context, close: closeBrowser } = await launchBench(root, { name: 'browser bench', watchdogMinutes: 30 + 10 * configs.length });

const pageErrors = [];
let page;
async function openPage() {
  if (page) await page.close().catch(() => {});
  page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') { const t = m.text(); if (!/favicon|Failed to load resource/.test(t)) { pageErrors.push(t); log('[page]', m.type(), t); } } });
  page.on('pageerror', (e) => { pageErrors.push(String(e)); log('[pageerror]', e); });
  await page.goto(`${server.url}/bench/browser/index.html`);
  await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
}

const rows = [];
let env = null, browserVersion = null;
try {
  await openPage();
  await new Promise((r) => setTimeout(r, 2000)); // let the browser's start-up work settle before sampling the load
  env = await page.evaluate(() => window.bench.env());
  browserVersion = context.browser()?.version() || env.userAgent.match(/Chrome\/([\d.]+)/)?.[1];
  log(`chromium ${browserVersion} · crossOriginIsolated ${env.crossOriginIsolated} · hardwareConcurrency ${env.hardwareConcurrency}`);
  if (!env.crossOriginIsolated) log('WARNING: the page is not crossOriginIsolated: threads > 1 will fall back to 1');
  const prompt = promptOf(promptTokens);

  for (const c of configs) {
    const url = '/' + path.relative(root, c.file).split(path.sep).join('/');
    const size = fs.statSync(c.file).size;
    const row = { shape: c.shape, type: c.type, fileMB: +(size / 1e6).toFixed(1), weightMBPerToken: +(c.weightBytes / 1e6).toFixed(1), threads: c.threads, ours: {}, wllama: {}, llamaBench: null, agreement: null, errors: [], busyCoresBefore: await busyCores() };
    log(`\n== ${c.shape} ${c.type} threads=${c.threads}`);
    const ctxLen = Math.max(512, promptTokens + maxTokens + 16);
    const runOpts = { maxTokens };
    let oursOk = false, wlOk = false;
    if (engines.has('ours')) try {
      const l = await page.evaluate(([u, o]) => window.bench.oursLoad(u, o), [url, { threads: c.threads, contextLength: ctxLen }]);
      row.ours.loadMs = l.loadMs; row.ours.threadsUsed = l.threads; row.ours.simd = l.simd; oursOk = true;
    } catch (e) { row.errors.push('ours load: ' + e.message); log('ours load failed:', e.message); }
    if (engines.has('wllama')) try {
      const l = await page.evaluate(([u, o]) => window.bench.wllamaLoad(u, o), [url, { threads: c.threads, contextLength: ctxLen }]);
      row.wllama.loadMs = l.loadMs; row.wllama.threadsUsed = l.threads; row.wllama.multithread = l.multithread; wlOk = true;
    } catch (e) { row.errors.push('wllama load: ' + e.message); log('wllama load failed:', e.message); }
    const lbSamples = [];

    const runOurs = () => page.evaluate(([p, o]) => window.bench.oursRun(p, o), [prompt, runOpts]);
    const runWl = (extra = {}) => page.evaluate(([p, o]) => window.bench.wllamaRun(p, o), [prompt, { ...runOpts, ...extra }]);
    const samples = { ours: [], wllama: [] };
    const guard = async (who, fn) => {
      try { return await fn(); } catch (e) {
        row.errors.push(`${who}: ${e.message.split('\n')[0]}`); log(`${who} failed:`, e.message.split('\n')[0]);
        if (who.startsWith('ours')) oursOk = false; else wlOk = false;
        return null;
      }
    };
    for (let w = 0; w < WARMUP; w++) {
      if (oursOk) await guard('ours warm-up', runOurs);
      if (wlOk) await guard('wllama warm-up', runWl);
    }
    for (let r = 0; r < reps; r++) {
      const order = r % 2 === 0 ? ['ours', 'wllama'] : ['wllama', 'ours'];
      for (const who of order) {
        if (who === 'ours' && oursOk) {
          const s = await guard('ours', runOurs);
          if (s) {
            if (s.promptTokens !== promptTokens) row.errors.push(`ours: prompt is ${s.promptTokens} tokens, expected ${promptTokens}`);
            samples.ours.push(s);
          }
        } else if (who === 'wllama' && wlOk) {
          const s = await guard('wllama', runWl);
          if (s) {
            if (s.promptTokens !== promptTokens) row.errors.push(`wllama: prompt is ${s.promptTokens} tokens, expected ${promptTokens}`);
            if (s.cachedTokens) row.errors.push(`wllama: ${s.cachedTokens} prompt tokens came from its cache`);
            samples.wllama.push(s);
          }
        }
      }
      // native llama.cpp on the same file while the page is idle
      if (lb.bin) {
        try {
          const x = llamaBench(lb.bin, c.file, { threads: c.threads, prompt: promptTokens, gen: maxTokens });
          lbSamples.push(x); lbInfo = x.info;
        } catch (e) { row.errors.push('llama-bench: ' + e.message.split('\n')[0]); log('llama-bench failed:', e.message); }
      }
    }
    if (lbSamples.length) row.llamaBench = { prefill: median(lbSamples.map((x) => x.prefill)), decode: median(lbSamples.map((x) => x.decode)), samples: lbSamples.map((x) => ({ prefill: x.prefill, decode: x.decode })) };
    // decode reads (about) every weight byte once per token
    const share = (d) => (d && bandwidth[c.threads] ? +(c.weightBytes / 1e9 * d / bandwidth[c.threads]).toFixed(3) : null);
    for (const who of ['ours', 'wllama']) {
      const ss = samples[who];
      Object.assign(row[who], {
        prefill: median(ss.map((s) => s.prefill)),
        decode: median(ss.map((s) => s.decode)),
        wallMs: median(ss.map((s) => s.wallMs)),
        generated: median(ss.map((s) => s.generatedTokens)),
        samples: ss.map((s) => ({ prefill: s.prefill, decode: s.decode, wallMs: s.wallMs })),
      });
    }
    // correctness: greedy tokens of both engines on the same prompt. The
    // timed runs give wllama's text; the leading tokens of ours whose text is
    // a prefix of it agree. Token ids and top-5 logprobs come from one more
    // wllama run up to the first difference (logprobs cost wllama ~0.5 s a
    // token on a 32k vocab, so that run is kept short and never timed).
    const a = samples.ours[0], bt = samples.wllama[0];
    if (oursOk && wlOk && a && bt) {
      const cum = await guard('ours detokenize', () => page.evaluate((ids) => window.bench.oursPrefixTexts(ids), a.tokens));
      let n = 0;
      if (cum) while (n < a.tokens.length && bt.text.startsWith(cum[n])) n++;
      const of = Math.min(a.tokens.length, bt.generatedTokens ?? a.tokens.length);
      n = Math.min(n, of);
      const agr = { agree: n, of, by: 'text', oursHead: a.tokens.slice(0, 8) };
      const b = await guard('wllama logprobs run', () => runWl({ topLogprobs: 5, maxTokens: n < of ? n + 1 : 1 }));
      if (b && b.tokens) {
        agr.wllamaHead = b.tokens.slice(0, 8);
        let m = 0;
        while (m < b.tokens.length && a.tokens[m] === b.tokens[m]) m++;
        if (m < b.tokens.length) { agr.agree = m; agr.by = 'ids'; }  // ids are exact where the run reaches
        else if (n < of) agr.by = 'ids';
        if (agr.agree < of && b.top[agr.agree]) {
          // where they part: our token's rank and logprob gap in wllama's own top-5
          const cand = b.top[agr.agree];
          const k = cand.findIndex((t) => t.id === a.tokens[agr.agree]);
          agr.divergence = { at: agr.agree, ours: a.tokens[agr.agree], wllama: b.tokens[agr.agree], oursRankInWllamaTop5: k >= 0 ? k + 1 : null, gap: k >= 0 ? cand[0].logprob - cand[k].logprob : null };
        }
        // first generated position: wllama's top-5 next-token logprobs beside ours for the same ids
        const w0 = b.top[0] || [];
        const o0 = await guard('ours logits', () => page.evaluate(([p, ids]) => window.bench.oursFirstLogprobs(p, 5, ids), [prompt, w0.map((t) => t.id)]));
        if (o0 && w0.length) {
          const wIds = new Set(w0.map((t) => t.id));
          agr.first = {
            top5Overlap: o0.top.filter((t) => wIds.has(t.id)).length,
            maxAbsDiff: Math.max(...w0.map((t, k) => Math.abs(t.logprob - o0.at[k]))),
            wllamaTop5: w0, oursTop5: o0.top,
          };
        }
      }
      row.agreement = agr;
    }
    if (a) row.oursTokens = a.tokens;
    if (oursOk || row.ours.loadMs != null) await page.evaluate(() => window.bench.oursDispose()).catch(() => {});
    if (wlOk || row.wllama.loadMs != null) await page.evaluate(() => window.bench.wllamaExit()).catch(() => {});
    // a crashed wllama leaves its worker in a bad state: start the next configuration on a fresh page
    if (!wlOk || !oursOk) await openPage();
    row.bandwidthShare = { ours: share(row.ours.decode), wllama: share(row.wllama.decode), llamaBench: share(row.llamaBench?.decode) };
    rows.push(row);
    const { samples: _o, ...oursShort } = row.ours; const { samples: _w, ...wlShort } = row.wllama;
    log(JSON.stringify({ ...row, ours: oursShort, wllama: wlShort, llamaBench: row.llamaBench && { prefill: row.llamaBench.prefill, decode: row.llamaBench.decode }, oursTokens: undefined }));
  }
} finally {
  await closeBrowser();
}

// the same model at different thread counts must give the same tokens (bit-identical engine)
for (const r of rows) {
  const same = rows.find((q) => q !== r && q.shape === r.shape && q.type === r.type && q.oursTokens && r.oursTokens);
  if (same) r.oursTokensSameAcrossThreads = same.oursTokens.length === r.oursTokens.length && same.oursTokens.every((t, i) => t === r.oursTokens[i]);
}

const totalS = (performance.now() - t0All) / 1000;
const f = (x) => (x == null ? '—' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) + '×' : '—');
const host = hostCpu();
const cpu = host.model;
const machine = {
  cpu, cores: os.cpus().length, cpuFlags: host.flags, memGB: +(os.totalmem() / 2 ** 30).toFixed(1), os: `${os.type()} ${os.release()}`,
  node: process.version, chromium: browserVersion, userAgent: env?.userAgent,
  crossOriginIsolated: env?.crossOriginIsolated, hardwareConcurrency: env?.hardwareConcurrency, jspi: env?.jspi,
  busyCoresBefore: busyStart, busyCoresMax: Math.max(busyStart ?? 0, ...rows.map((r) => r.busyCoresBefore ?? 0)),
  wllama: engines.has('wllama') ? JSON.parse(fs.readFileSync(path.join(root, 'node_modules/@wllama/wllama/package.json'), 'utf8')).version : null,
  bandwidthGBs: bandwidth,
  llamaBench: lb.bin ? { commit: lb.commit || lbInfo?.build_commit || null, info: lbInfo } : { why: lb.why },
};
const pct = (x) => (x == null ? '—' : Math.round(x * 100) + ' %');
let md = `# wasmlm in Chromium, beside wllama and native llama.cpp\n\n${new Date().toISOString()} · ${cpu} × ${machine.cores} (${simdFlags(host.flags).join(' ') || 'flags unknown'}) · ${machine.memGB} GiB · Chromium ${browserVersion} (headless, Debian) · crossOriginIsolated: ${env?.crossOriginIsolated} · wllama ${machine.wllama ?? '—'} · llama-bench ${lb.bin ? `(llama.cpp ${machine.llamaBench.commit ?? '?'}, Release, GGML_NATIVE=ON)` : `not run (${lb.why})`} · Node ${process.version} · medians of ${reps} (after ${WARMUP} warm-up runs each) · ${totalS.toFixed(0)} s · other load: ${machine.busyCoresMax} cores at most (sampled before each configuration)\n\n`;
if (machine.busyCoresMax > 0.3) md += `**Warning:** other work was running on the machine (up to ${machine.busyCoresMax} busy cores between configurations): these numbers are noisy. Rows: ${rows.filter((r) => r.busyCoresBefore > 0.3).map((r) => `${r.shape} ${r.type} ${r.threads}t (${r.busyCoresBefore})`).join(', ')}.\n\n`;
md += '| model | type | MB | threads (ours/wllama) | prefill tok/s ours · wllama · llama-bench | decode tok/s ours · wllama · llama-bench | ours ÷ llama-bench prefill · decode | ours ÷ wllama prefill · decode | weights MB/token | share of bandwidth ours · wllama · llama-bench | load ms ours · wllama | run ms ours · wllama | greedy agree |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n';
for (const r of rows) {
  const a = r.agreement;
  let agree = '—';
  if (a) {
    agree = `${a.agree}/${a.of}`;
    if (a.divergence) agree += a.divergence.oursRankInWllamaTop5 ? ` (then ours = wllama's #${a.divergence.oursRankInWllamaTop5}, Δlogp ${a.divergence.gap.toFixed(4)})` : ' (then ours ∉ wllama top-5)';
    if (a.first) agree += `; 1st step top-5 ${a.first.top5Overlap}/5 shared, max \\|Δlogp\\| ${a.first.maxAbsDiff.toFixed(4)}`;
  }
  if (r.errors.length) agree += ` ⚠ ${r.errors.length} error(s)`;
  const L = r.llamaBench || {}, bs = r.bandwidthShare || {};
  md += `| ${r.shape} | ${r.type} | ${r.fileMB} | ${r.threads} (${r.ours.threadsUsed ?? '—'}/${r.wllama.threadsUsed ?? '—'}) | ${f(r.ours.prefill)} · ${f(r.wllama.prefill)} · ${f(L.prefill)} | ${f(r.ours.decode)} · ${f(r.wllama.decode)} · ${f(L.decode)} | ${ratio(r.ours.prefill, L.prefill)} · ${ratio(r.ours.decode, L.decode)} | ${ratio(r.ours.prefill, r.wllama.prefill)} · ${ratio(r.ours.decode, r.wllama.decode)} | ${r.weightMBPerToken} | ${pct(bs.ours)} · ${pct(bs.wllama)} · ${pct(bs.llamaBench)} | ${f(r.ours.loadMs)} · ${f(r.wllama.loadMs)} | ${f(r.ours.wallMs)} · ${f(r.wllama.wallMs)} | ${agree} |\n`;
}
// 2 threads against 1, ours and llama-bench's
const sp = [];
for (const r of rows) {
  const one = rows.find((q) => q.shape === r.shape && q.type === r.type && q.threads === 1);
  if (!one || r.threads === 1) continue;
  sp.push(`| ${r.shape} | ${r.type} | ${r.threads} | ${ratio(r.ours.decode, one.ours.decode)} · ${ratio(r.ours.prefill, one.ours.prefill)} | ${ratio(r.llamaBench?.decode, one.llamaBench?.decode)} · ${ratio(r.llamaBench?.prefill, one.llamaBench?.prefill)} | ${ratio(r.wllama.decode, one.wllama.decode)} · ${ratio(r.wllama.prefill, one.wllama.prefill)} |`);
}
if (sp.length) md += `\nThreads ÷ 1 thread, decode · prefill:\n\n| model | type | threads | ours | llama-bench | wllama |\n|---|---|---|---|---|---|\n${sp.join('\n')}\n`;
md += `\nSame page, same GGUF file, same thread count, same ${promptTokens}-token prompt (text; both tokenizers give ${promptTokens} tokens with BOS), greedy, ${maxTokens} generated tokens (EOS ignored). ` +
  'prefill/decode tok/s: as each engine reports them (wasmlm `stats`, wllama `timings` of llama-server, llama-bench its pp/tg); run ms: the whole completion call as seen by the page (message passing included); ratios > 1 mean wasmlm is faster. ' +
  `wasmlm: default batch (64), F32 KV cache, build ${[...new Set(rows.map((r) => r.ours.simd).filter(Boolean))].join('/') || '?'} (\`wasm/wasmlm[-mt][-relaxed].wasm\`, picked by web/index.js). ` +
  'wllama: `createCompletion` (raw), `n_gpu_layers: 0`, `cache_prompt: false`, default batch, F16 KV cache, its memory64 + JSPI build. ' +
  `llama-bench: native, built for this machine (bench/llama-native.mjs), run once per rep while the page is idle: prefill = pp${promptTokens}, decode = tg${maxTokens} at depth ${promptTokens}, its defaults otherwise (F16 KV cache). ` +
  `weights MB/token: the bytes of every weight matrix a decode step reads (all tensors but the token embeddings); share of bandwidth = weights MB/token × decode tok/s ÷ the machine's streaming-read bandwidth, ${JSON.stringify(bandwidth)} GB/s by thread count (build/wasmlm-native bandwidth). ` +
  'greedy agree: leading generated tokens that are equal (random-weight models have near-tied logits, so quantized kernels that round differently may part early; the note gives where our token ranks in wllama\'s top-5 at that point and its logprob gap), then, for the first generated position, how many of wllama\'s top-5 next tokens are in ours and the largest logprob difference over wllama\'s top-5.\n';
const errs = rows.filter((r) => r.errors.length);
if (errs.length) md += '\n## Errors\n\n' + errs.map((r) => `- ${r.shape} ${r.type} ${r.threads}t: ${r.errors.join('; ')}`).join('\n') + '\n';
const diffThreads = rows.filter((r) => r.oursTokensSameAcrossThreads === false);
md += `\nwasmlm tokens identical across thread counts: ${diffThreads.length ? 'NO (' + diffThreads.map((r) => `${r.shape} ${r.type} ${r.threads}t`).join(', ') + ')' : 'yes'}.\n`;

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench', 'results', `browser-${stamp}.json`), JSON.stringify({
  machine, settings: { shapes, types, threads: threadCounts, reps, warmup: WARMUP, maxTokens, promptTokens }, seconds: totalS,
  rows: rows.map(({ oursTokens, ...r }) => r), pageErrors,
}, null, 2));
fs.writeFileSync(path.join(root, 'bench', 'results', `browser-${stamp}.md`), md);
fs.writeFileSync(path.join(root, 'bench', 'results', 'browser-latest.md'), md);
console.log(md);
process.exit(engines.has('ours') && rows.some((r) => r.ours.decode == null) ? 1 : 0);
