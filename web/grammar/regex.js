// A subset of ECMAScript regular expressions (JSON Schema `pattern`, read as
// with the `u` flag, as validators do) turned into grammar expressions over
// the characters of a JSON string. The subset (docs/json-schema.md):
// literals and escapes (\t \n \v \f \r \0 \xHH \uHHHH \u{H…} \cX and escaped
// syntax characters), `.`, classes `[...]` / `[^...]` with ranges, \d \D \w
// \W \s \S, groups `( )` `(?: )` `(?<name> )`, alternation `|`, quantifiers
// `* + ? {m} {m,} {m,n}` (lazy forms match the same strings), and the anchors
// `^` `$` at the start / end of a top-level alternative. Anything else
// (backreferences, lookaround, \b, \p{…}, anchors elsewhere) is refused with
// a message saying which construct.
//
// A pattern matches anywhere in the string unless anchored, so an unanchored
// side gets "any characters" added.
import { cs, ANY, lit, cls, seq, alt, rep } from './gbnf.js';

export class RegexError extends Error {}

const DIGIT = cs.range(0x30, 0x39);
const WORD = cs.from([[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]]);
const SPACE = cs.from([[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a],
  [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]]);
const LINE_END = cs.of(0x0a, 0x0d, 0x2028, 0x2029);
const DOT = cs.minus(ANY, LINE_END);
const SYNTAX = '^$\\.*+?()[]{}|/';

// AST: {k:'set', set} {k:'seq', items} {k:'alt', items} {k:'rep', e, min, max} {k:'bol'} {k:'eol'}

/** Parses `source`; throws RegexError naming the unsupported construct. */
export function parseRegex(source) {
  try { new RegExp(source, 'u'); } catch (e) { throw new RegexError(`not a valid regular expression (${e.message})`); }
  const cps = [...source];
  let i = 0;
  const peek = () => cps[i];
  const fail = (what) => { throw new RegexError(`${what} (at offset ${cps.slice(0, i).join('').length}) is not supported`); };

  function parseAlt() {
    const items = [parseSeq()];
    while (peek() === '|') { i++; items.push(parseSeq()); }
    return items.length === 1 ? items[0] : { k: 'alt', items };
  }
  function parseSeq() {
    const items = [];
    while (i < cps.length && peek() !== '|' && peek() !== ')') {
      const atom = parseQuant(parseAtom());
      // a group's sequence joins this one: (^a)b reads as ^ab
      if (atom.k === 'seq') items.push(...atom.items);
      else items.push(atom);
    }
    return items.length === 1 ? items[0] : { k: 'seq', items };
  }
  function parseQuant(atom) {
    const c = peek();
    let min, max;
    if (c === '*') { min = 0; max = Infinity; i++; }
    else if (c === '+') { min = 1; max = Infinity; i++; }
    else if (c === '?') { min = 0; max = 1; i++; }
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(cps.slice(i).join(''));
      if (!m) return atom; // RegExp already refused a lone '{' in u mode
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      i += m[0].length;
    } else return atom;
    if (atom.k === 'bol' || atom.k === 'eol') fail('a quantified anchor');
    if (peek() === '?') i++; // lazy: the same strings match
    return { k: 'rep', e: atom, min, max };
  }
  function parseAtom() {
    const c = cps[i++];
    switch (c) {
      case '^': return { k: 'bol' };
      case '$': return { k: 'eol' };
      case '.': return { k: 'set', set: DOT };
      case '[': return { k: 'set', set: parseClass() };
      case '(': {
        if (peek() === '?') {
          const next = cps.slice(i, i + 3).join('');
          if (next.startsWith('?:')) i += 2;
          else if (next.startsWith('?<') && next !== '?<=' && next !== '?<!') {
            while (cps[i] !== '>') i++;
            i++;
          } else { i--; fail('lookaround `(?' + next[1] + '`'); }
        }
        const e = parseAlt();
        i++; // ')'
        return e;
      }
      case '\\': return parseEscape(false);
      default: return { k: 'set', set: cs.of(c.codePointAt(0)) };
    }
  }
  function parseEscape(inClass) {
    const c = cps[i++];
    const one = (cp) => ({ k: 'set', set: cs.of(cp) });
    switch (c) {
      case 'd': return { k: 'set', set: DIGIT };
      case 'D': return { k: 'set', set: cs.complement(DIGIT) };
      case 'w': return { k: 'set', set: WORD };
      case 'W': return { k: 'set', set: cs.complement(WORD) };
      case 's': return { k: 'set', set: SPACE };
      case 'S': return { k: 'set', set: cs.complement(SPACE) };
      case 't': return one(9);
      case 'n': return one(10);
      case 'v': return one(11);
      case 'f': return one(12);
      case 'r': return one(13);
      case '0': return one(0);
      case 'c': return one(cps[i++].codePointAt(0) % 32);
      case 'x': { const cp = parseInt(cps.slice(i, i + 2).join(''), 16); i += 2; return one(cp); }
      case 'u': {
        if (peek() === '{') {
          const end = cps.indexOf('}', i);
          const cp = parseInt(cps.slice(i + 1, end).join(''), 16);
          i = end + 1;
          return one(cp);
        }
        let cp = parseInt(cps.slice(i, i + 4).join(''), 16);
        i += 4;
        // a surrogate pair written as two escapes is one code point in u mode
        if (cp >= 0xd800 && cp <= 0xdbff && cps[i] === '\\' && cps[i + 1] === 'u' && cps[i + 2] !== '{') {
          const lo = parseInt(cps.slice(i + 2, i + 6).join(''), 16);
          if (lo >= 0xdc00 && lo <= 0xdfff) { i += 6; cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00); }
        }
        if (cp >= 0xd800 && cp <= 0xdfff) { i -= 6; fail('a lone surrogate escape'); }
        return one(cp);
      }
      case 'b': if (inClass) return one(8); i -= 2; return fail('the word boundary \\b');
      case 'B': i -= 2; return fail('the assertion \\B');
      case 'p': case 'P': i -= 2; return fail('the Unicode property escape \\' + c);
      case 'k': i -= 2; return fail('the named backreference \\k');
      case '-': return one(0x2d); // only valid inside a class in u mode
      default:
        if (/[1-9]/.test(c)) { i -= 2; return fail('the backreference \\' + c); }
        if (SYNTAX.includes(c)) return one(c.codePointAt(0));
        i -= 2;
        return fail('the escape \\' + c);
    }
  }
  function parseClass() {
    let negate = false;
    if (peek() === '^') { negate = true; i++; }
    let set = [];
    const classAtom = () => {
      const c = cps[i++];
      if (c === '\\') return parseEscape(true).set;
      return cs.of(c.codePointAt(0));
    };
    while (peek() !== ']') {
      const a = classAtom();
      if (peek() === '-' && cps[i + 1] !== ']' && a.length === 1 && a[0][0] === a[0][1]) {
        const save = i;
        i++;
        const b = classAtom();
        if (b.length === 1 && b[0][0] === b[0][1]) { set = cs.union(set, cs.range(a[0][0], b[0][0])); continue; }
        i = save; // a class escape after '-' (not allowed in u mode; RegExp refused it already)
      }
      set = cs.union(set, a);
    }
    i++; // ']'
    set = cs.intersect(set, ANY);
    return negate ? cs.complement(set) : set;
  }

  const ast = parseAlt();
  if (i !== cps.length) fail('an unbalanced `)`');
  return ast;
}

/** The top-level alternatives with their anchors taken off: [{ast, start, end}]; anchors anywhere else are refused. */
export function splitAnchors(ast) {
  const branches = ast.k === 'alt' ? ast.items : [ast];
  return branches.map((b) => {
    let items = b.k === 'seq' ? [...b.items] : [b];
    let start = false;
    let end = false;
    while (items.length && items[0].k === 'bol') { start = true; items.shift(); }
    while (items.length && items[items.length - 1].k === 'eol') { end = true; items.pop(); }
    const check = (e) => {
      if (e.k === 'bol' || e.k === 'eol') throw new RegexError(`the anchor ${e.k === 'bol' ? '^' : '$'} is supported only at the start / end of the pattern or of a top-level alternative`);
      if (e.k === 'seq' || e.k === 'alt') e.items.forEach(check);
      if (e.k === 'rep') check(e.e);
    };
    items.forEach(check);
    return { ast: items.length === 1 ? items[0] : { k: 'seq', items }, start, end };
  });
}

/** [min, max] length in code points of the strings `ast` matches (max may be Infinity). */
export function lengthRange(ast) {
  switch (ast.k) {
    case 'set': return [1, 1];
    case 'bol': case 'eol': return [0, 0];
    case 'seq': return ast.items.map(lengthRange).reduce((a, b) => [a[0] + b[0], a[1] + b[1]], [0, 0]);
    case 'alt': {
      const rs = ast.items.map(lengthRange);
      return [Math.min(...rs.map((r) => r[0])), Math.max(...rs.map((r) => r[1]))];
    }
    case 'rep': {
      const [a, b] = lengthRange(ast.e);
      return [a * ast.min, b === 0 ? 0 : b * ast.max];
    }
  }
  throw new Error('regex: unknown node');
}

/**
 * The anchored pattern limited to lengths [minLen, maxLen], when that can be
 * written by adjusting one quantifier: a sequence of fixed-length parts and
 * one repeated single character (`^[a-z]+$`, `^[A-Z][a-z0-9_]*$`,
 * `^\d{3}-\d+$`). Returns the new AST, or null.
 */
export function limitLength(ast, minLen, maxLen) {
  if (ast.k === 'alt') {
    // each alternative on its own; one whose lengths all fall outside is dropped
    const kept = [];
    for (const item of ast.items) {
      const [a, b] = lengthRange(item);
      if (b < minLen || a > maxLen) continue;
      const limited = limitLength(item, minLen, maxLen);
      if (!limited) return null;
      kept.push(limited);
    }
    return kept.length ? { k: 'alt', items: kept } : null;
  }
  const [lo, hi] = lengthRange(ast);
  if (lo >= minLen && hi <= maxLen) return ast;
  const items = ast.k === 'seq' ? ast.items : [ast];
  let fixed = 0;
  let varIndex = -1;
  for (let k = 0; k < items.length; k++) {
    const [a, b] = lengthRange(items[k]);
    if (a === b) { fixed += a; continue; }
    if (varIndex >= 0 || items[k].k !== 'rep' || items[k].e.k !== 'set') return null;
    varIndex = k;
  }
  if (varIndex < 0) return fixed >= minLen && fixed <= maxLen ? ast : null;
  const r = items[varIndex];
  const min = Math.max(r.min, minLen - fixed);
  const max = Math.min(r.max, maxLen - fixed);
  if (max < min) return null;
  const out = [...items];
  out[varIndex] = { k: 'rep', e: r.e, min, max };
  return { k: 'seq', items: out };
}

// ---- code points as they appear inside a JSON string ----------------------------

const SHORT_ESCAPES = new Map([[0x22, '"'], [0x5c, '\\'], [0x08, 'b'], [0x0c, 'f'], [0x0a, 'n'], [0x0d, 'r'], [0x09, 't']]);
const NEEDS_ESCAPE = cs.from([[0, 0x1f], [0x22, 0x22], [0x5c, 0x5c]]);

/**
 * One code point of `set` written inside a JSON string the way
 * JSON.stringify writes it: as itself, except `"` `\` and the controls
 * (\" \\ \b \f \n \r \t, others \u00xx in lower case).
 */
export function jsonChars(set) {
  const parts = [cls(cs.minus(set, NEEDS_ESCAPE))];
  const short = [];
  const byNibble = [[], []];
  for (const [a, b] of cs.intersect(set, NEEDS_ESCAPE)) {
    for (let cp = a; cp <= b; cp++) {
      if (SHORT_ESCAPES.has(cp)) short.push(SHORT_ESCAPES.get(cp).codePointAt(0));
      else byNibble[cp >> 4].push(cp & 15);
    }
  }
  if (short.length) parts.push(seq(lit('\\'), cls(cs.of(...short))));
  for (const hi of [0, 1]) {
    if (byNibble[hi].length) parts.push(seq(lit('\\u00' + hi), cls(cs.of(...byNibble[hi].map((n) => n.toString(16).codePointAt(0))))));
  }
  return alt(parts);
}

/** Grammar expression for the JSON string content (between the quotes) that the regex AST matches exactly. */
export function regexToExpr(ast, charExpr = jsonChars) {
  switch (ast.k) {
    case 'set': return charExpr(ast.set);
    case 'seq': return seq(ast.items.map((x) => regexToExpr(x, charExpr)));
    case 'alt': return alt(ast.items.map((x) => regexToExpr(x, charExpr)));
    case 'rep': return rep(regexToExpr(ast.e, charExpr), ast.min, ast.max);
  }
  throw new Error('regex: unexpected anchor');
}

/** Grammar expression for the JSON string content whose text the pattern `source` matches (search semantics, as `RegExp.test`). */
export function patternToExpr(source, anyChar) {
  const branches = splitAnchors(parseRegex(source));
  return alt(branches.map(({ ast, start, end }) => seq(
    start ? [] : [rep(anyChar, 0)],
    regexToExpr(ast),
    end ? [] : [rep(anyChar, 0)],
  )));
}
