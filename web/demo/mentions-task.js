// The built-in task of the spend/success plot (issue #32): "continue the
// story so that it mentions WORD", for a small story model (stories260K).
// A task is a story opening and a word; the verifier checks the
// continuation for the word (or its plural). Each method answers every task
// within its setting, and a point of the plot is (mean tokens generated per
// task, share of tasks answered with the word). Only counts, no timings: a
// seed gives the same tokens on every host, so the points are the same
// everywhere. Used by the demo page and by bench/deliberate.mjs; public API
// only.

export const MENTION_PROMPTS = Object.freeze(['Once upon a time', 'One day, Lily', 'Tom had a', 'The little bird',
  'Sue and her mom', 'Max was a big dog.', 'Anna wanted to', 'It was a sunny day.']);
export const MENTION_WORDS = Object.freeze(['ball', 'bird', 'cat', 'flower', 'tree', 'sun']);

/** The first `n` tasks {prompt, word, seed}, words varying fastest. */
export function mentionTasks(n = MENTION_PROMPTS.length * MENTION_WORDS.length) {
  const out = [];
  for (const prompt of MENTION_PROMPTS) for (const word of MENTION_WORDS) out.push({ prompt, word, seed: 100 + out.length });
  return out.slice(0, n);
}

/** Whether a text mentions the word (whole word, or its plural). */
export function mentions(word) {
  const re = new RegExp(`\\b${word}s?\\b`, 'i');
  return (text) => re.test(text);
}

/** The methods and their settings: [{method, setting, run(model, task, base) -> {ok, tokens}}]. */
export function mentionMethods({ quick = false } = {}) {
  const pick = (full, few) => (quick ? few : full);
  const list = [];
  list.push({
    method: 'greedy', setting: '', run: async (m, t, o) => {
      const r = await m.complete(t.prompt, { ...o, temperature: 0 });
      return { ok: mentions(t.word)(r.text), tokens: r.tokens.length };
    },
  });
  for (const n of pick([2, 4, 8, 16], [2, 8])) {
    list.push({
      method: 'best-of-N', setting: `N ${n}`, run: async (m, t, o) => {
        const ok = mentions(t.word);
        const r = await m.bestOfN(t.prompt, { ...o, n, scorer: (c) => (ok(c.text) ? 1 : 0) });
        return { ok: ok(r.best.text), tokens: r.stats.totalTokens };
      },
    });
  }
  for (const maxN of pick([4, 8, 16, 32], [8, 32])) {
    list.push({
      method: 'adaptive best-of-N', setting: `maxN ${maxN}`, run: async (m, t, o) => {
        const ok = mentions(t.word);
        const r = await m.bestOfN(t.prompt, { ...o, scorer: (c) => (ok(c.text) ? 1 : 0), adaptive: { minN: 2, batch: 2, maxN, target: 1 } });
        return { ok: ok(r.best.text), tokens: r.stats.totalTokens };
      },
    });
  }
  for (const [expand, keep] of pick([[2, 1], [4, 2], [8, 2], [8, 4]], [[4, 2], [8, 4]])) {
    list.push({
      method: 'tree search', setting: `${keep} x ${expand}`, run: async (m, t, o) => {
        const ok = mentions(t.word);
        const r = await m.treeSearch(t.prompt, {
          ...o, expand, keep, step: '.', maxSteps: 4, maxTokensPerStep: 16,
          score: (n) => (ok(n.pathText) ? 1 : 0) + n.pathLogprob / Math.max(n.pathTokens, 1) / 1000,
        });
        return { ok: ok(r.text), tokens: r.stats.tokens };
      },
    });
  }
  for (const budget of pick([100, 200, 400, 800, 1600], [200, 800])) {
    list.push({
      method: 'deliberate', setting: `budget ${budget}`, run: async (m, t, o) => {
        const ok = mentions(t.word);
        const r = await m.deliberate(t.prompt, { ...o, budget, verify: (a) => ok(a.text), step: '.', maxTokensPerStep: 16 });
        return { ok: ok(r.text), tokens: r.spent };
      },
    });
  }
  return list;
}

/** The sampling every method uses (the library's defaults but the answer length). */
export const MENTION_SAMPLING = Object.freeze({ maxTokens: 48 });

/**
 * Runs every method on every task: resolves with the points [{method,
 * setting, tasks, solved, success, tokens}] (tokens: mean per task).
 * onPoint(point) as each is done; `signal` stops between runs.
 */
export async function spendSuccess(model, { tasks = mentionTasks(), methods = mentionMethods(), onPoint, signal } = {}) {
  const points = [];
  for (const me of methods) {
    let solved = 0, tokens = 0;
    for (const t of tasks) {
      if (signal && signal.aborted) throw Object.assign(new Error('stopped'), { name: 'AbortError' });
      const r = await me.run(model, t, { ...MENTION_SAMPLING, seed: t.seed, signal });
      if (r.ok) solved++;
      tokens += r.tokens;
    }
    const p = { method: me.method, setting: me.setting, tasks: tasks.length, solved, success: solved / tasks.length, tokens: tokens / tasks.length };
    points.push(p);
    if (onPoint) onPoint(p, points);
  }
  return points;
}

const COLORS = { greedy: '#444', 'best-of-N': '#1f77b4', 'adaptive best-of-N': '#2ca02c', 'tree search': '#d62728', deliberate: '#9467bd' };
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** The plot as SVG text: success rate against mean tokens per task (log scale), a line per method. */
export function spendSuccessSvg(points, { width = 640, height = 360, title = 'Success against tokens spent' } = {}) {
  const L = 56, R = 170, T = 28, B = 44, w = width - L - R, h = height - T - B;
  const xs = points.map((p) => Math.max(p.tokens, 1));
  const lo = Math.log10(Math.min(...xs, 10)), hi = Math.log10(Math.max(...xs, 100));
  const x = (v) => L + ((Math.log10(Math.max(v, 1)) - lo) / (hi - lo || 1)) * w;
  const y = (s) => T + (1 - s) * h;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${L}" y="16" font-size="13">${esc(title)}</text>`];
  for (let i = 0; i <= 4; i++) {
    const s = i / 4;
    out.push(`<line x1="${L}" x2="${L + w}" y1="${y(s)}" y2="${y(s)}" stroke="#ddd"/>`, `<text x="${L - 6}" y="${y(s) + 4}" text-anchor="end">${Math.round(s * 100)} %</text>`);
  }
  for (let e = Math.ceil(lo); e <= Math.floor(hi); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (Math.log10(v) < lo || Math.log10(v) > hi) continue;
      out.push(`<line x1="${x(v)}" x2="${x(v)}" y1="${T}" y2="${T + h}" stroke="#eee"/>`, `<text x="${x(v)}" y="${T + h + 14}" text-anchor="middle">${v}</text>`);
    }
  }
  out.push(`<text x="${L + w / 2}" y="${height - 8}" text-anchor="middle">tokens generated per task (log scale)</text>`,
    `<text transform="translate(14 ${T + h / 2}) rotate(-90)" text-anchor="middle">tasks solved</text>`,
    `<rect x="${L}" y="${T}" width="${w}" height="${h}" fill="none" stroke="#888"/>`);
  const methods = [...new Set(points.map((p) => p.method))];
  const series = methods.map((me) => ({ me, c: COLORS[me] || '#000', ps: points.filter((p) => p.method === me).sort((a, b) => a.tokens - b.tokens) }));
  for (const { c, ps } of series) {
    if (ps.length > 1) out.push(`<polyline fill="none" stroke="${c}" stroke-width="2" points="${ps.map((p) => `${x(p.tokens).toFixed(1)},${y(p.success).toFixed(1)}`).join(' ')}"/>`);
  }
  // the points over every line; a method of one point (greedy) last and larger, so that none hides it
  for (const { me, c, ps } of [...series].sort((a, b) => b.ps.length - a.ps.length)) {
    for (const p of ps) {
      out.push(`<circle cx="${x(p.tokens).toFixed(1)}" cy="${y(p.success).toFixed(1)}" r="${ps.length > 1 ? 3.5 : 5}" fill="${c}" stroke="white" data-method="${esc(me)}" data-setting="${esc(p.setting)}">` +
        `<title>${esc(`${me} ${p.setting}: ${p.solved}/${p.tasks}, ${p.tokens.toFixed(0)} tokens`)}</title></circle>`);
    }
  }
  series.forEach(({ me, c }, i) => {
    const ly = T + 10 + i * 18;
    out.push(`<rect x="${L + w + 14}" y="${ly - 8}" width="12" height="4" fill="${c}"/>`, `<text x="${L + w + 32}" y="${ly - 3}">${esc(me)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

/** The points as a markdown table. */
export function spendSuccessTable(points) {
  let md = '| method | setting | tokens per task | solved | success |\n|---|---|---|---|---|\n';
  for (const p of points) md += `| ${p.method} | ${p.setting || '-'} | ${p.tokens.toFixed(1)} | ${p.solved} / ${p.tasks} | ${(p.success * 100).toFixed(0)} % |\n`;
  return md;
}
