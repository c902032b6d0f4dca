// Where decode and prefill time goes, in Chromium and in native llama.cpp,
// on the same files: V8's sampling profiler in every worker of the page
// (the model's worker and its compute workers, through the DevTools
// protocol: Chromium started with --remote-debugging-port, flat sessions
// auto-attached to each worker) while wasmlm runs, and `perf record`
// (software clock) around llama-bench's matching test. Self time is summed by
// function (wasm functions carry their C names: the name section) and given
// as a share of the samples of the threads that ran the model.
// Writes bench/results/profile-<stamp>.json and .md.
//
// Decode: --tokens generated after a 1-token prompt; prefill: a 128-token
// prompt and one generated token (llama-bench: tg and pp tests).
//
//   node --experimental-websocket bench/profile-browser.mjs [--shapes s110m,tl1b]
//        [--types q4_0,q4_k_m,q8_0] [--threads 1,2] [--phases decode,prefill]
//        [--tokens 128] [--top 12] [--no-native]
// Needs Debian's chromium, playwright-core (sh tools/setup-browser.sh) and, for
// the native side, llama-bench (bench/llama-native.mjs) and perf. Not in CI.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { model as sharedModel, root, promptOf, benchArgs } from './common.mjs';
import { launchBench } from './browser/chromium.mjs';
import { prepareLlamaBench, hostCpu } from './llama-native.mjs';

const args = benchArgs();
const shapes = String(args.shapes || 's110m,tl1b').split(',');
const types = String(args.types || 'q4_0,q4_k_m,q8_0').split(',');
const threadCounts = String(args.threads || '1,2').split(',').map(Number);
const tokens = +(args.tokens || 128);
const phases = String(args.phases || 'decode,prefill').split(',');
const PROMPT = 128;
const top = +(args.top || 12);
const log = (...a) => console.error(...a);
if (typeof WebSocket === 'undefined') { console.error('run with node --experimental-websocket (Node 20) or Node >= 22'); process.exit(2); }

/** A DevTools protocol connection in flat mode: send(method, params, sessionId), events by method. */
async function cdpConnect(url) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = () => reject(new Error(`cannot connect to ${url}`)); });
  let next = 1;
  const waiting = new Map(), handlers = new Map();
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.id && waiting.has(m.id)) {
      const { resolve, reject } = waiting.get(m.id);
      waiting.delete(m.id);
      if (m.error) reject(new Error(`${m.error.message} (${m.error.code})`)); else resolve(m.result);
    } else if (m.method) for (const h of handlers.get(m.method) || []) h(m.params, m.sessionId);
  };
  return {
    send(method, params = {}, sessionId) {
      const id = next++;
      ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
    },
    on(method, fn) { handlers.set(method, [...(handlers.get(method) || []), fn]); },
    close() { ws.close(); },
  };
}

/** Self time by function of one V8 CPU profile, idle samples left out: {total ms, fns: [{name, ms}]}. */
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const ms = new Map();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const dt = (profile.timeDeltas[i] || 0) / 1000;
    const f = byId.get(id).callFrame;
    const name = f.functionName || (f.url ? `(anonymous ${path.basename(f.url)})` : '(program)');
    if (name === '(idle)') return;   // the thread waited for a message (before and after the run)
    ms.set(name, (ms.get(name) || 0) + dt);
    total += dt;
  });
  return { total, fns: [...ms].map(([name, t]) => ({ name, ms: t })) };
}

/** perf's self-time shares of llama-bench's tg (decode) or pp (prefill) test: {speed, fns: [{name, share}]}. */
function nativeProfile(bin, file, threads, phase) {
  const data = path.join(os.tmpdir(), `wasmlm-perf-${process.pid}.data`);
  const rec = spawnSync('perf', ['record', '-e', 'cpu-clock', '-F', '2000', '-o', data, '--', bin, '-m', file, ...(phase === 'decode' ? ['-p', '0', '-n', String(tokens)] : ['-p', String(PROMPT), '-n', '0']), '-t', String(threads), '-r', '3', '-o', 'json'],
    { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (rec.status !== 0) return { error: (rec.stderr || '').trim().split('\n').slice(-3).join(' ') };
  const rep = spawnSync('perf', ['report', '-i', data, '--stdio', '--no-children', '--sort', 'symbol', '--percent-limit', '0.5'], { encoding: 'utf8', maxBuffer: 1 << 26 });
  fs.rmSync(data, { force: true });
  let speed = null;
  try { speed = JSON.parse(rec.stdout)[0]?.avg_ts ?? null; } catch { /* the table only */ }
  const fns = [];
  for (const line of rep.stdout.split('\n')) {
    const m = /^\s+([\d.]+)%\s+\[([.k])\]\s+(.+?)(\s{2,}.*)?$/.exec(line);
    if (m) fns.push({ name: m[2] === 'k' ? `${m[3]} (kernel)` : m[3], share: +m[1] / 100 });
  }
  return { speed, fns };
}

/**
 * Runs `run` with V8's sampling profiler on in every attached worker; the
 * shares are of the samples of the threads that ran the model (the model's
 * worker and its compute workers, not the page's other workers).
 */
async function profiled(cdp, workers, run) {
  for (const [s] of workers) {
    await cdp.send('Profiler.enable', {}, s);
    await cdp.send('Profiler.setSamplingInterval', { interval: 100 }, s);
    await cdp.send('Profiler.start', {}, s);
  }
  const r = await run();
  const sum = new Map();
  let total = 0, ran = 0;
  for (const [s, url] of workers) {
    const { profile } = await cdp.send('Profiler.stop', {}, s);
    await cdp.send('Profiler.disable', {}, s);
    if (!/\/(worker|thread-worker)\.js$/.test(url)) continue;
    ran++;
    const t = selfTimes(profile);
    total += t.total;
    for (const f of t.fns) sum.set(f.name, (sum.get(f.name) || 0) + f.ms);
  }
  const fns = [...sum].map(([name, ms]) => ({ name, share: ms / total })).sort((a, b) => b.share - a.share);
  return { r, fns, workers: ran };
}

const results = [];
let lb = { bin: null, why: 'not asked for (--no-native)' };
if (!args['no-native']) lb = prepareLlamaBench({ log, build: false });
if (!lb.bin) log(`native side skipped: ${lb.why}`);
const perfOk = lb.bin && spawnSync('perf', ['--version']).status === 0;

const { server, context, userDataDir, close } = await launchBench(root, { name: 'profile', args: ['--remote-debugging-port=0'] });
try {
  const page = await context.newPage();
  page.on('pageerror', (e) => log('[pageerror]', e));
  await page.goto(`${server.url}/bench/browser/index.html`);
  await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60000 });
  const [port, wsPath] = fs.readFileSync(path.join(userDataDir, 'DevToolsActivePort'), 'utf8').trim().split('\n');
  const cdp = await cdpConnect(`ws://127.0.0.1:${port}${wsPath}`);
  const workers = new Map();   // sessionId -> url
  cdp.on('Target.attachedToTarget', async ({ sessionId, targetInfo }) => {
    workers.set(sessionId, targetInfo.url);
    // the model's worker starts compute workers of its own: attach to those too
    await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true }, sessionId).catch(() => {});
  });
  cdp.on('Target.detachedFromTarget', ({ sessionId }) => workers.delete(sessionId));
  const { targetInfos } = await cdp.send('Target.getTargets');
  const target = targetInfos.find((t) => t.type === 'page' && t.url.includes('/bench/browser/'));
  const { sessionId: pageSession } = await cdp.send('Target.attachToTarget', { targetId: target.targetId, flatten: true });
  await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true }, pageSession);

  for (const shape of shapes) for (const type of types) for (const threads of threadCounts) {
    const file = sharedModel(shape, type, log);
    const url = '/' + path.relative(root, file).split(path.sep).join('/');
    log(`== ${shape} ${type} threads=${threads}`);
    await page.evaluate(([u, t]) => window.bench.oursLoad(u, { threads: t, contextLength: 512 }), [url, threads]);
    await new Promise((r) => setTimeout(r, 500));   // the compute workers attach
    for (const phase of phases) {
      const [prompt, n] = phase === 'decode' ? ['Once', tokens] : [promptOf(PROMPT), 1];
      const run = () => page.evaluate(([p, m]) => window.bench.oursRun(p, { maxTokens: m }), [prompt, n]);
      await run(); await run();   // tier-up
      const { r, fns, workers: ran } = await profiled(cdp, [...workers], run);
      const speed = phase === 'decode' ? r.decode : r.prefill;
      const row = { shape, type, threads, phase, speed, workers: ran, ours: fns.slice(0, top), native: null };
      if (perfOk) {
        const nat = nativeProfile(lb.bin, file, threads, phase);
        row.native = nat.error ? { error: nat.error } : { speed: nat.speed, fns: nat.fns.slice(0, top) };
      }
      results.push(row);
      const line = (fs6) => fs6.slice(0, 6).map((f) => `${f.name} ${(100 * f.share).toFixed(1)}%`).join(', ');
      log(`  ${phase}: ours ${speed?.toFixed(1)} tok/s: ${line(fns)}`);
      if (row.native?.fns) log(`  ${phase}: llama-bench ${row.native.speed?.toFixed(1)} tok/s: ${line(row.native.fns)}`);
    }
  }
  cdp.close();
} finally {
  await close();
}

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const cpu = hostCpu();
const out = { date: new Date().toISOString(), host: cpu, node: process.version, tokens, results };
const dir = path.join(root, 'bench', 'results');
fs.writeFileSync(path.join(dir, `profile-${stamp}.json`), JSON.stringify(out, null, 1) + '\n');
const pct = (x) => `${(100 * x).toFixed(1)} %`;
let md = `# Where decode and prefill time goes: wasmlm in Chromium, llama-bench natively\n\n${out.date} · ${cpu.model || os.cpus()[0].model} × ${os.cpus().length} · decode: ${tokens} tokens after a 1-token prompt; prefill: a ${PROMPT}-token prompt (llama-bench: tg${tokens}, pp${PROMPT}); greedy\n\n`;
md += 'Self time by function, as a share of the samples of the threads that ran the model (wasmlm: V8\'s sampling profiler at 100 µs in the model\'s worker and its compute workers, idle samples left out (a worker waiting for a message: the profiler starts before the run and stops after it), a pool thread waiting at a barrier counts where it waits; llama-bench: `perf record -e cpu-clock` of its tg or pp test, whole process).\n';
for (const r of results) {
  md += `\n## ${r.shape} ${r.type} ${r.phase}, ${r.threads} thread${r.threads > 1 ? 's' : ''}\n\nwasmlm ${r.speed?.toFixed(1)} tok/s`;
  if (r.native?.speed) md += ` · llama-bench ${r.native.speed.toFixed(1)} tok/s`;
  md += '\n\n| wasmlm function | share | llama-bench function | share |\n|---|---|---|---|\n';
  const n = r.native?.fns || [];
  for (let i = 0; i < Math.max(r.ours.length, n.length); i++) {
    const a = r.ours[i], b = n[i];
    md += `| ${a ? '`' + a.name + '`' : ''} | ${a ? pct(a.share) : ''} | ${b ? '`' + b.name + '`' : ''} | ${b ? pct(b.share) : ''} |\n`;
  }
  if (r.native?.error) md += `\nllama-bench profile failed: ${r.native.error}\n`;
}
fs.writeFileSync(path.join(dir, `profile-${stamp}.md`), md);
log(`wrote bench/results/profile-${stamp}.md`);
