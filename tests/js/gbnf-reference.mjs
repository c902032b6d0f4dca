// A small, independent GBNF reference for tests: a parser of GBNF text, a
// recognizer that decides whether a string belongs to the grammar (memoized
// sets of end positions over code points: exact for any grammar without left
// recursion, which GBNF does not allow), and a seeded random generator of
// sentences (bounded depth: past it, every choice takes the shortest way out).
// It shares no code with web/grammar/, so it checks the converter's output
// rather than repeating its assumptions.

// ---- parsing ---------------------------------------------------------------------

/**
 * Parses GBNF text into {rules: Map(name -> expr)}. Expressions:
 * {type:'lit', cps}, {type:'cls', neg, ranges}, {type:'any'}, {type:'ref', name},
 * {type:'seq', items}, {type:'alt', items}, {type:'rep', e, min, max}.
 */
export function parseGbnf(text) {
  const src = [...text];
  let i = 0;
  const rules = new Map();
  const err = (msg) => { throw new Error(`gbnf: ${msg} at code point ${i}: ${JSON.stringify(src.slice(i, i + 20).join(''))}`); };
  const isName = (c) => c !== undefined && /[A-Za-z0-9_-]/.test(c);

  // spaces and comments; newlines too when `nl`
  function space(nl) {
    for (;;) {
      const c = src[i];
      if (c === ' ' || c === '\t' || (nl && (c === '\n' || c === '\r'))) i++;
      else if (c === '#') { while (i < src.length && src[i] !== '\n') i++; }
      else return;
    }
  }
  function name() {
    const start = i;
    while (isName(src[i])) i++;
    if (i === start) err('expected a rule name');
    return src.slice(start, i).join('');
  }
  function hexEscape(n) {
    const h = src.slice(i, i + n).join('');
    if (!/^[0-9A-Fa-f]+$/.test(h) || h.length !== n) err('bad hex escape');
    i += n;
    return parseInt(h, 16);
  }
  function char() {
    const c = src[i++];
    if (c === undefined) err('unexpected end');
    if (c !== '\\') return c.codePointAt(0);
    const e = src[i++];
    switch (e) {
      case 'n': return 10;
      case 'r': return 13;
      case 't': return 9;
      case '\\': case '"': case '[': case ']': return e.codePointAt(0);
      case 'x': return hexEscape(2);
      case 'u': return hexEscape(4);
      case 'U': return hexEscape(8);
    }
    return err(`unknown escape \\${e}`);
  }
  function primary() {
    const c = src[i];
    if (c === '"') {
      i++;
      const cps = [];
      while (src[i] !== '"') { if (i >= src.length) err('unterminated literal'); cps.push(char()); }
      i++;
      return { type: 'lit', cps };
    }
    if (c === '[') {
      i++;
      let neg = false;
      if (src[i] === '^') { neg = true; i++; }
      const ranges = [];
      while (src[i] !== ']') {
        if (i >= src.length) err('unterminated class');
        const a = char();
        if (src[i] === '-' && src[i + 1] !== ']') { i++; ranges.push([a, char()]); } else ranges.push([a, a]);
      }
      i++;
      return { type: 'cls', neg, ranges };
    }
    if (c === '(') {
      i++;
      space(true);
      const e = alternates(true);
      space(true);
      if (src[i] !== ')') err('expected )');
      i++;
      return e;
    }
    if (c === '.') { i++; return { type: 'any' }; }
    if (isName(c)) return { type: 'ref', name: name() };
    return err('expected an expression');
  }
  function postfix(e) {
    for (;;) {
      const c = src[i];
      if (c === '*') { i++; e = { type: 'rep', e, min: 0, max: Infinity }; }
      else if (c === '+') { i++; e = { type: 'rep', e, min: 1, max: Infinity }; }
      else if (c === '?') { i++; e = { type: 'rep', e, min: 0, max: 1 }; }
      else if (c === '{') {
        const m = /^\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}/.exec(src.slice(i, i + 40).join(''));
        if (!m) err('bad repetition');
        i += [...m[0]].length;
        const min = Number(m[1]);
        const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
        e = { type: 'rep', e, min, max };
      } else return e;
    }
  }
  function sequence(nested) {
    const items = [];
    for (;;) {
      space(nested);
      const c = src[i];
      if (c === undefined || c === '|' || c === ')' || c === '\n' || c === '\r') break;
      // the start of the next rule: `name ::=`
      if (!nested && isName(c)) {
        const save = i;
        name();
        space(false);
        const isRule = src.slice(i, i + 3).join('') === '::=';
        i = save;
        if (isRule) break;
      }
      items.push(postfix(primary()));
    }
    return items.length === 1 ? items[0] : { type: 'seq', items };
  }
  function alternates(nested) {
    const items = [sequence(nested)];
    while (src[i] === '|') { i++; space(true); items.push(sequence(nested)); }
    return items.length === 1 ? items[0] : { type: 'alt', items };
  }

  for (;;) {
    space(true);
    if (i >= src.length) break;
    const n = name();
    space(false);
    if (src.slice(i, i + 3).join('') !== '::=') err('expected ::=');
    i += 3;
    space(true);
    const body = alternates(false);
    if (rules.has(n)) err(`rule ${n} defined twice`);
    rules.set(n, body);
  }
  const check = (e) => {
    if (e.type === 'ref' && !rules.has(e.name)) throw new Error(`gbnf: undefined rule ${e.name}`);
    if (e.type === 'seq' || e.type === 'alt') e.items.forEach(check);
    if (e.type === 'rep') check(e.e);
  };
  rules.forEach(check);
  return { rules };
}

function inClass(e, cp) {
  const hit = e.ranges.some(([a, b]) => cp >= a && cp <= b);
  return e.neg ? !hit : hit;
}

// ---- recognizing ------------------------------------------------------------------

/** A recognizer for one grammar: `accepts(text, root = 'root')`. */
export class Recognizer {
  constructor(grammar) {
    this.rules = typeof grammar === 'string' ? parseGbnf(grammar).rules : grammar.rules;
  }

  accepts(text, root = 'root') {
    this.input = [...text].map((c) => c.codePointAt(0));
    this.memo = new Map();
    return this.ends({ type: 'ref', name: root }, 0).has(this.input.length);
  }

  ends(e, pos) {
    const inp = this.input;
    switch (e.type) {
      case 'lit': {
        for (let k = 0; k < e.cps.length; k++) if (inp[pos + k] !== e.cps[k]) return new Set();
        return new Set([pos + e.cps.length]);
      }
      case 'cls': return pos < inp.length && inClass(e, inp[pos]) ? new Set([pos + 1]) : new Set();
      case 'any': return pos < inp.length ? new Set([pos + 1]) : new Set();
      case 'ref': {
        const key = e.name + ':' + pos;
        const had = this.memo.get(key);
        if (had === null) throw new Error(`gbnf: left recursion through ${e.name}`);
        if (had) return had;
        this.memo.set(key, null);
        const out = this.ends(this.rules.get(e.name), pos);
        this.memo.set(key, out);
        return out;
      }
      case 'seq': {
        let cur = new Set([pos]);
        for (const item of e.items) {
          const next = new Set();
          for (const p of cur) for (const q of this.ends(item, p)) next.add(q);
          cur = next;
          if (cur.size === 0) break;
        }
        return cur;
      }
      case 'alt': {
        const out = new Set();
        for (const item of e.items) for (const q of this.ends(item, pos)) out.add(q);
        return out;
      }
      case 'rep': {
        const out = new Set();
        if (e.min === 0) out.add(pos);
        let cur = new Set([pos]);
        const seenAfterMin = new Set(e.min === 0 ? [pos] : []);
        for (let k = 1; k <= e.max && cur.size; k++) {
          const next = new Set();
          for (const p of cur) for (const q of this.ends(e.e, p)) next.add(q);
          if (k >= e.min) {
            // past the minimum, a position reached again adds nothing new
            for (const q of [...next]) { if (seenAfterMin.has(q)) next.delete(q); else { seenAfterMin.add(q); out.add(q); } }
          }
          cur = next;
        }
        return out;
      }
    }
    throw new Error('gbnf: unknown expression ' + e.type);
  }
}

// ---- generating --------------------------------------------------------------------

/** A seeded PRNG (mulberry32): () -> [0, 1). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// code points tried first when a class is sampled: ASCII, Latin-1, Greek, CJK,
// emoji, a combining mark, line/paragraph separators, controls, the JSON specials
const POOL = [...Array.from({ length: 128 }, (_, k) => k), 0xa0, 0xe9, 0xfc, 0xdf, 0x3b1, 0x3c9, 0x416, 0x5d0, 0x627, 0x4e2d, 0x6587,
  0x3042, 0xac00, 0x1f600, 0x1f680, 0x20ac, 0x2028, 0x2029, 0x301, 0xfeff, 0x10ffff];

function sampleClass(e, random) {
  if (!e.neg && random() < 0.7) {
    const [a, b] = e.ranges[Math.floor(random() * e.ranges.length)];
    for (let t = 0; t < 20; t++) {
      const cp = a + Math.floor(random() * (b - a + 1));
      if (cp < 0xd800 || cp > 0xdfff) return cp;
    }
  }
  const fits = POOL.filter((cp) => inClass(e, cp));
  if (fits.length) return fits[Math.floor(random() * fits.length)];
  for (let t = 0; t < 1000; t++) {
    const cp = Math.floor(random() * 0x110000);
    if ((cp < 0xd800 || cp > 0xdfff) && inClass(e, cp)) return cp;
  }
  throw new Error('gbnf: could not sample a class');
}

/** Random sentences of a grammar: `next()` -> string. */
export class Generator {
  constructor(grammar, { seed = 1, maxDepth = 10, maxRepeat = 6 } = {}) {
    this.rules = typeof grammar === 'string' ? parseGbnf(grammar).rules : grammar.rules;
    this.random = rng(seed);
    this.maxDepth = maxDepth;
    this.maxRepeat = maxRepeat;
    // the fewest rule expansions needed to finish each rule
    this.height = new Map([...this.rules.keys()].map((n) => [n, Infinity]));
    for (let changed = true; changed;) {
      changed = false;
      for (const [n, e] of this.rules) {
        const h = this.h(e);
        if (h < this.height.get(n)) { this.height.set(n, h); changed = true; }
      }
    }
  }

  h(e) {
    switch (e.type) {
      case 'ref': return 1 + this.height.get(e.name);
      case 'seq': return e.items.reduce((m, x) => Math.max(m, this.h(x)), 0);
      case 'alt': return e.items.reduce((m, x) => Math.min(m, this.h(x)), Infinity);
      case 'rep': return e.min === 0 ? 0 : this.h(e.e);
      default: return 0;
    }
  }

  next(root = 'root') {
    const out = [];
    this.gen({ type: 'ref', name: root }, 0, out);
    return String.fromCodePoint(...out);
  }

  gen(e, depth, out) {
    const r = this.random;
    const deep = depth > this.maxDepth;
    switch (e.type) {
      case 'lit': out.push(...e.cps); return;
      case 'cls': out.push(sampleClass(e, r)); return;
      case 'any': out.push(sampleClass({ neg: true, ranges: [] }, r)); return;
      case 'ref': this.gen(this.rules.get(e.name), depth + 1, out); return;
      case 'seq': for (const x of e.items) this.gen(x, depth, out); return;
      case 'alt': {
        const ok = e.items.filter((x) => this.h(x) < Infinity);
        let pick;
        if (deep) pick = ok.reduce((a, b) => (this.h(b) < this.h(a) ? b : a));
        else pick = ok[Math.floor(r() * ok.length)];
        this.gen(pick, depth, out);
        return;
      }
      case 'rep': {
        let n = e.min;
        if (!deep) {
          const roll = r();
          if (roll < 0.15 && e.max !== Infinity) n = e.max; // the upper bound itself
          else if (roll < 0.3) n = e.min;
          else n = e.min + Math.floor(r() * (this.maxRepeat + 1));
          n = Math.min(n, e.max);
        }
        for (let k = 0; k < n; k++) this.gen(e.e, depth + 1, out);
        return;
      }
    }
    throw new Error('gbnf: unknown expression ' + e.type);
  }
}
