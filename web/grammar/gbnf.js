// Grammars as data, printed as GBNF text. The JSON Schema converter
// (json-schema.js) and the regex converter (regex.js) build expressions of
// this small algebra; `Grammar` names rules, shares identical ones, drops
// alternatives that can never finish and prints the result. Everything works
// on Unicode code points: a character class is a set of code points, a
// literal a string of them.
//
// The printed text uses only this part of GBNF (docs/json-schema.md): one rule
// per line `name ::= body`, names of [a-z0-9-], `|`, `( )`, postfix `* + ?`,
// `{m}` `{m,}` `{m,n}`, string literals and character classes (ranges,
// leading `^` for negation) whose only escapes are \\ \" \[ \] \n \r \t
// \xHH \uHHHH \UHHHHHHHH. Output is ASCII: other code points are escaped.

// ---- sets of code points: sorted, disjoint, non-adjacent [lo, hi] pairs ------

export const MAX_CP = 0x10ffff;
/** Every code point that UTF-8 can carry (surrogates excluded). */
export const ANY = Object.freeze([[0, 0xd7ff], [0xe000, MAX_CP]]);

function normalize(ranges) {
  const rs = ranges.filter(([a, b]) => a <= b).map(([a, b]) => [a, b]).sort((x, y) => x[0] - y[0]);
  const out = [];
  for (const r of rs) {
    const last = out[out.length - 1];
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else out.push(r);
  }
  return out;
}

export const cs = {
  of: (...cps) => normalize(cps.map((c) => [c, c])),
  range: (a, b) => normalize([[a, b]]),
  from: (ranges) => normalize(ranges),
  union: (...sets) => normalize(sets.flat()),
  /** a minus b */
  minus(a, b) {
    const out = [];
    for (let [lo, hi] of a) {
      for (const [blo, bhi] of b) {
        if (bhi < lo || blo > hi) continue;
        if (blo > lo) out.push([lo, blo - 1]);
        lo = bhi + 1;
        if (lo > hi) break;
      }
      if (lo <= hi) out.push([lo, hi]);
    }
    return out;
  },
  intersect: (a, b) => cs.minus(a, cs.minus(a, b)),
  /** every UTF-8 code point not in a */
  complement: (a) => cs.minus(ANY, a),
  has: (a, cp) => a.some(([lo, hi]) => cp >= lo && cp <= hi),
  size: (a) => a.reduce((n, [lo, hi]) => n + hi - lo + 1, 0),
  isEmpty: (a) => a.length === 0,
  equal: (a, b) => a.length === b.length && a.every((r, i) => r[0] === b[i][0] && r[1] === b[i][1]),
};

// ---- expressions ---------------------------------------------------------------
// {t:'lit', s} a literal (a string, may be '' = the empty sequence)
// {t:'cls', set} one code point of a non-empty set
// {t:'ref', name} a rule
// {t:'seq', items} / {t:'alt', items} (alt with no items: matches nothing)
// {t:'rep', e, min, max} (max may be Infinity)

export const EPS = Object.freeze({ t: 'lit', s: '' });
export const NONE = Object.freeze({ t: 'alt', items: Object.freeze([]) });

export const lit = (s) => (s === '' ? EPS : { t: 'lit', s });
export const cls = (set) => (set.length === 0 ? NONE : set.length === 1 && set[0][0] === set[0][1] ? lit(String.fromCodePoint(set[0][0])) : { t: 'cls', set });
export const ref = (name) => ({ t: 'ref', name });
export const isNone = (e) => e.t === 'alt' && e.items.length === 0;
export const isEps = (e) => e.t === 'lit' && e.s === '';

export function seq(...parts) {
  const items = [];
  for (const p of parts.flat()) {
    if (isNone(p)) return NONE;
    if (isEps(p)) continue;
    for (const q of p.t === 'seq' ? p.items : [p]) {
      const last = items[items.length - 1];
      if (q.t === 'lit' && last && last.t === 'lit') items[items.length - 1] = lit(last.s + q.s);
      else items.push(q);
    }
  }
  if (items.length === 0) return EPS;
  return items.length === 1 ? items[0] : { t: 'seq', items };
}

export function alt(...parts) {
  const items = [];
  const seen = new Set();
  let optional = false;
  for (const p of parts.flat()) {
    for (const q of p.t === 'alt' ? p.items : [p]) {
      if (isEps(q)) { optional = true; continue; }
      const key = print(q);
      if (seen.has(key)) continue;
      seen.add(key);
      items.push(q);
    }
  }
  // one-code-point alternatives side by side become one class
  const merged = [];
  let chars = null;
  for (const q of items) {
    const set = q.t === 'cls' ? q.set : q.t === 'lit' && [...q.s].length === 1 ? cs.of(q.s.codePointAt(0)) : null;
    if (!set) { merged.push(q); continue; }
    if (chars) chars.set = cs.union(chars.set, set);
    else { chars = { t: 'cls', set }; merged.push(chars); }
  }
  for (let k = 0; k < merged.length; k++) if (merged[k] === chars) merged[k] = cls(chars.set);
  const body = merged.length === 0 ? null : merged.length === 1 ? merged[0] : { t: 'alt', items: merged };
  if (!body) return optional ? EPS : NONE;
  return optional ? rep(body, 0, 1) : body;
}

export function rep(e, min, max = Infinity) {
  if (max < min) return NONE;
  if (isNone(e)) return min === 0 ? EPS : NONE;
  if (isEps(e) || max === 0) return EPS;
  if (min === 1 && max === 1) return e;
  if (e.t === 'lit' && min === max && min <= 4 && [...e.s].length * min <= 16) return lit(e.s.repeat(min));
  // x? repeated stays x?, (x?){m,n} = x{0,n}
  if (e.t === 'rep' && e.min === 0 && e.max === 1) return rep(e.e, 0, max);
  return { t: 'rep', e, min, max };
}

export const opt = (e) => rep(e, 0, 1);

// ---- printing --------------------------------------------------------------------

function hex(n, w) { return n.toString(16).toUpperCase().padStart(w, '0'); }

function escapeCp(cp, inClass) {
  switch (cp) {
    case 0x5c: return '\\\\';
    case 0x22: return '\\"';
    case 0x0a: return '\\n';
    case 0x0d: return '\\r';
    case 0x09: return '\\t';
  }
  if (inClass) {
    if (cp === 0x5b) return '\\[';
    if (cp === 0x5d) return '\\]';
    if (cp === 0x2d || cp === 0x5e) return '\\x' + hex(cp, 2); // - ^
  }
  if (cp < 0x20 || cp === 0x7f) return '\\x' + hex(cp, 2);
  if (cp < 0x7f) return String.fromCodePoint(cp);
  return cp <= 0xffff ? '\\u' + hex(cp, 4) : '\\U' + hex(cp, 8);
}

function printClass(set) {
  // the shorter of the set and its complement (a negated class also matches
  // surrogates, which UTF-8 text cannot hold: the same set in practice)
  const comp = cs.complement(set);
  const neg = comp.length < set.length;
  const body = (neg ? comp : set).map(([a, b]) => {
    if (a === b) return escapeCp(a, true);
    if (b === a + 1) return escapeCp(a, true) + escapeCp(b, true);
    return escapeCp(a, true) + '-' + escapeCp(b, true);
  }).join('');
  return '[' + (neg ? '^' : '') + body + ']';
}

const PREC = { alt: 0, seq: 1, rep: 2, lit: 3, cls: 3, ref: 3 };

const printed = new WeakMap(); // expressions are never changed once built: their text is kept

/** GBNF text of one expression. */
export function print(e, outer = 0) {
  let s = printed.get(e);
  if (s === undefined) {
    s = printBare(e);
    printed.set(e, s);
  }
  return PREC[e.t] < outer ? '(' + s + ')' : s;
}

function printBare(e) {
  let s;
  switch (e.t) {
    case 'lit': s = '"' + (/^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/.test(e.s) ? e.s : [...e.s].map((c) => escapeCp(c.codePointAt(0), false)).join('')) + '"'; break;
    case 'cls': s = e.set.length === 1 && e.set[0][0] === e.set[0][1] ? print(lit(String.fromCodePoint(e.set[0][0]))) : printClass(e.set); break;
    case 'ref': s = e.name; break;
    case 'seq': s = e.items.map((x) => print(x, PREC.seq + 1)).join(' '); break;
    case 'alt': s = e.items.length ? e.items.map((x) => print(x, PREC.alt + 1)).join(' | ') : '[^\\x00-\\U0010FFFF]'; break;
    case 'rep': {
      const { min, max } = e;
      const suffix = min === 0 && max === Infinity ? '*' : min === 1 && max === Infinity ? '+' : min === 0 && max === 1 ? '?'
        : max === Infinity ? `{${min},}` : min === max ? `{${min}}` : `{${min},${max}}`;
      // a literal of several code points is one unit in GBNF; still, group it for readers
      const inner = e.e.t === 'lit' && [...e.e.s].length > 1 ? '(' + print(e.e) + ')' : print(e.e, PREC.rep + 1);
      s = inner + suffix;
      break;
    }
    default: throw new Error(`gbnf: unknown expression ${e.t}`);
  }
  return s;
}

// ---- a grammar: named rules ------------------------------------------------------

const NAME_OK = /^[a-z][a-z0-9-]*$/;

/** A rule name from any text: lower case letters, digits and '-'. */
export function ruleName(text) {
  const s = String(text).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  return NAME_OK.test(s) ? s : 'r' + (s ? '-' + s : '');
}

export class Grammar {
  constructor() {
    this.rules = new Map(); // name -> expression (null while being built)
    this.byBody = new Map(); // printed body -> name, for sharing
    this.builtins = new Map(); // hint of a constant rule -> its name
  }

  /** A fresh name from a hint (its first use keeps the hint as is). */
  reserve(hint) {
    const base = ruleName(hint);
    let name = base;
    for (let i = 2; this.rules.has(name); i++) name = `${base}-${i}`;
    this.rules.set(name, null);
    return name;
  }

  /** Gives a reserved rule its body. */
  set(name, e) {
    this.rules.set(name, e);
    return name;
  }

  /** A rule for `e`, shared with an existing rule of the same body. */
  define(hint, e) {
    const key = print(e);
    const had = this.byBody.get(key);
    if (had) return had;
    const name = this.set(this.reserve(hint), e);
    this.byBody.set(key, name);
    return name;
  }

  /**
   * A constant rule (such as `ws`), defined by `build()` on first use under
   * `hint`, or a variant of it when a rule of that name already exists.
   */
  named(hint, build) {
    if (!this.builtins.has(hint)) {
      const name = this.reserve(hint);
      this.builtins.set(hint, name);
      this.set(name, build());
    }
    return ref(this.builtins.get(hint));
  }

  /**
   * Drops what can never finish: a rule whose every alternative needs an
   * unfinishable rule matches nothing, alternatives using it are removed, and
   * rules `root` no longer reaches are left out. Returns the names of the
   * rules that match nothing (for the caller's error message).
   */
  prune(root = 'root') {
    const productive = new Set();
    const can = (e) => {
      switch (e.t) {
        case 'lit': case 'cls': return true;
        case 'ref': return productive.has(e.name);
        case 'seq': return e.items.every(can);
        case 'alt': return e.items.some(can);
        case 'rep': return e.min === 0 || can(e.e);
      }
      return false;
    };
    for (let changed = true; changed;) {
      changed = false;
      for (const [name, e] of this.rules) if (!productive.has(name) && e && can(e)) { productive.add(name); changed = true; }
    }
    const dead = [...this.rules.keys()].filter((n) => !productive.has(n));
    const strip = (e) => {
      switch (e.t) {
        case 'ref': return productive.has(e.name) ? e : NONE;
        case 'seq': return seq(e.items.map(strip));
        case 'alt': return alt(e.items.map(strip));
        case 'rep': return rep(strip(e.e), e.min, e.max);
        default: return e;
      }
    };
    for (const [name, e] of this.rules) this.rules.set(name, productive.has(name) ? strip(e) : NONE);
    // keep what root reaches, in order of first use
    const reached = new Set();
    const visit = (e) => {
      if (e.t === 'ref') { if (!reached.has(e.name)) { reached.add(e.name); visit(this.rules.get(e.name)); } }
      else if (e.t === 'seq' || e.t === 'alt') e.items.forEach(visit);
      else if (e.t === 'rep') visit(e.e);
    };
    visit(ref(root));
    for (const name of [...this.rules.keys()]) if (!reached.has(name)) this.rules.delete(name);
    return dead;
  }

  /** A rule whose body is only another rule, used nowhere else, takes that rule's body. */
  foldAliases() {
    const uses = new Map();
    const visit = (e) => {
      if (e.t === 'ref') uses.set(e.name, (uses.get(e.name) || 0) + 1);
      else if (e.t === 'seq' || e.t === 'alt') e.items.forEach(visit);
      else if (e.t === 'rep') visit(e.e);
    };
    for (const e of this.rules.values()) visit(e);
    for (const [name, e] of this.rules) {
      if (e && e.t === 'ref' && e.name !== name && uses.get(e.name) === 1 && this.rules.has(e.name)) {
        this.rules.set(name, this.rules.get(e.name));
        this.rules.delete(e.name);
      }
    }
  }

  /** GBNF text, `root` first. */
  toString(root = 'root') {
    const names = [root, ...[...this.rules.keys()].filter((n) => n !== root)];
    return names.map((n) => `${n} ::= ${print(this.rules.get(n))}`).join('\n') + '\n';
  }
}
