// JSON Schema -> GBNF grammar, for constrained decoding (`jsonSchema`,
// `json: true`). Pure JavaScript, no engine: the text it returns is what the
// grammar sampler compiles. The contract (docs/json-schema.md): every string
// the grammar accepts is JSON that validates against the schema. Where a
// keyword cannot be honoured exactly the grammar takes a safe subset (fixed
// property order, bounded whitespace and digit counts, no extra properties
// unless the schema asks for them); where even that is impossible the call
// fails with a BAD_SCHEMA error naming the keyword and its JSON Pointer.
import { WasmlmError, badOption, describe } from '../errors.js';
import { Grammar, cs, ANY, lit, cls, ref, seq, alt, rep, opt, EPS, NONE, isNone, print } from './gbnf.js';
import { parseRegex, splitAnchors, lengthRange, limitLength, regexToExpr, jsonChars, RegexError } from './regex.js';

/** Keywords that only annotate: accepted anywhere and ignored. */
export const ANNOTATION_KEYWORDS = Object.freeze(['title', 'description', '$schema', '$id', '$comment', 'examples', 'default',
  'deprecated', 'readOnly', 'writeOnly']);
const CONTAINERS = ['$defs', 'definitions'];
const TYPE_KEYWORDS = {
  object: ['properties', 'required', 'additionalProperties'],
  array: ['items', 'prefixItems', 'minItems', 'maxItems'],
  string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'],
};
/** Keywords that constrain the output. */
export const SUPPORTED_KEYWORDS = Object.freeze(['type', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', '$ref', ...CONTAINERS,
  ...Object.values(TYPE_KEYWORDS).flat()]);
const KNOWN = new Set([...SUPPORTED_KEYWORDS, ...ANNOTATION_KEYWORDS]);
const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'];
const IGNORED = new Set([...ANNOTATION_KEYWORDS, ...CONTAINERS]);

/** Formats, as regular expressions of the supported subset (each a subset of what validators accept). */
const DATE = '\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))' +
  '|(?:\\d\\d(?:[02468][48]|[13579][26]|[2468]0)|(?:[02468][048]|[13579][26])00)-02-29';
const TIME = '(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,9})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)';
const EMAIL_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
export const FORMATS = Object.freeze({
  date: `^(?:${DATE})$`,
  time: `^${TIME}$`,
  'date-time': `^(?:${DATE})T${TIME}$`,
  uuid: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
  email: `^${EMAIL_ATOM}(?:\\.${EMAIL_ATOM})*@(?:${LABEL}\\.)+${LABEL}$`,
});

// Lengths of the strings a validator may accept for each format (RFC 3339 /
// RFC 4122 / RFC 5321, and ajv-formats' wider forms: "urn:uuid:" prefixes,
// unbounded fractions of seconds). The oneOf check uses them for a branch the
// value must NOT match, where the grammar's narrower forms would not do.
const FORMAT_LENGTHS = { date: [10, 10], time: [9, Infinity], 'date-time': [20, Infinity], uuid: [36, 45], email: [3, Infinity] };

/** Significant digits of a number with bounds (see number()). */
const BOUNDED_SIGNIFICANT = 15;

/** Digits allowed where the schema sets no bound: the integer part of a number, its fraction, its exponent. */
export const NUMBER_LIMITS = Object.freeze({ intDigits: 16, fracDigits: 16, expDigits: 2 });

const DEFAULT_OPTIONS = Object.freeze({ whitespace: 'flexible', maxIndent: 24 });

/** An own property (a schema may name a property `constructor` or `__proto__`). */
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
/** Sets an own property, even one named `__proto__`. */
const put = (o, k, v) => Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const escPtr = (s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1');
const showPtr = (p) => (p === '' ? 'the root' : p);

export function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
}

function schemaError(path, keyword, reason) {
  return new WasmlmError('BAD_SCHEMA', `JSON Schema ${keyword ? `keyword "${keyword}" ` : ''}at ${showPtr(path)}: ${reason}`,
    { keyword: keyword ?? null, path });
}

function jsonType(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeAccepts(types, v) {
  const t = jsonType(v);
  return types.includes(t) || (t === 'integer' && types.includes('number'));
}

const typeList = (t) => (t === undefined ? null : Array.isArray(t) ? t : [t]);

/** Code points in a string (JSON Schema lengths count these). */
const cpLength = (s) => [...s].length;

// ---- integers as digit strings ---------------------------------------------------

const DIGIT = cls(cs.range(0x30, 0x39));
const pow10 = (n) => 10n ** BigInt(n);

/** Decimal numerals of the same length n from x to y (strings, x <= y). */
function sameLength(x, y) {
  if (x.length === 0) return EPS;
  if (x === y) return lit(x);
  if (x[0] === y[0]) return seq(lit(x[0]), sameLength(x.slice(1), y.slice(1)));
  const n = x.length - 1;
  const lowFull = /^0*$/.test(x.slice(1));
  const highFull = /^9*$/.test(y.slice(1));
  const d0 = x.charCodeAt(0) + (lowFull ? 0 : 1);
  const d1 = y.charCodeAt(0) - (highFull ? 0 : 1);
  const parts = [];
  if (!lowFull) parts.push(seq(lit(x[0]), sameLength(x.slice(1), '9'.repeat(n))));
  if (d0 <= d1) parts.push(seq(cls(cs.range(d0, d1)), rep(DIGIT, n, n)));
  if (!highFull) parts.push(seq(lit(y[0]), sameLength('0'.repeat(n), y.slice(1))));
  return alt(parts);
}

/** Numerals without leading zeros for a..b (BigInt, 0 <= a <= b). */
function naturals(a, b) {
  const parts = [];
  const la = String(a).length;
  const lb = String(b).length;
  let full = null; // a run of lengths covered completely: [from, to]
  const flush = () => {
    if (full) parts.push(seq(cls(cs.range(0x31, 0x39)), rep(DIGIT, full[0] - 1, full[1] - 1)));
    full = null;
  };
  for (let len = la; len <= lb; len++) {
    const lo = len === 1 ? 0n : pow10(len - 1);
    const hi = pow10(len) - 1n;
    const x = a > lo ? a : lo;
    const y = b < hi ? b : hi;
    if (x > y) continue;
    if (len === 1 && x <= 1n && y === 9n) { // 1-9 starts a run of whole lengths
      if (x === 0n) parts.push(lit('0'));
      full = [1, 1];
      continue;
    }
    if (len > 1 && x === lo && y === hi) { full = full ? [full[0], len] : [len, len]; continue; }
    flush();
    parts.push(sameLength(String(x), String(y)));
  }
  flush();
  return alt(parts);
}

/** An interval of BigInts; null bounds are open-ended. */
const interval = (lo, hi) => ({ lo, hi });
function ivEmpty({ lo, hi }) { return lo !== null && hi !== null && lo > hi; }
function ivIntersect(a, b) {
  const lo = a.lo === null ? b.lo : b.lo === null ? a.lo : a.lo > b.lo ? a.lo : b.lo;
  const hi = a.hi === null ? b.hi : b.hi === null ? a.hi : a.hi < b.hi ? a.hi : b.hi;
  return interval(lo, hi);
}
/** a minus b, as up to two intervals. */
function ivMinus(a, b) {
  if (ivEmpty(a)) return [];
  const bi = ivIntersect(a, b);
  if (ivEmpty(bi)) return [a];
  const out = [];
  if (bi.lo !== null && (a.lo === null || a.lo < bi.lo)) out.push(interval(a.lo, bi.lo - 1n));
  if (bi.hi !== null && (a.hi === null || a.hi > bi.hi)) out.push(interval(bi.hi + 1n, a.hi));
  return out.filter((x) => !ivEmpty(x));
}

/** Numerals of magnitudes in the interval (lo >= 0); an open top stops at `digits` digits (or the bound's own length). */
function magnitudes(iv, digits) {
  if (ivEmpty(iv)) return NONE;
  const lo = iv.lo === null || iv.lo < 0n ? 0n : iv.lo;
  const hi = iv.hi === null ? (lo >= pow10(digits) ? pow10(String(lo).length) - 1n : pow10(digits) - 1n) : iv.hi;
  return lo > hi ? NONE : naturals(lo, hi);
}

/** Like magnitudes, one alternative per numeral length L, each followed by suffix(L). */
function magnitudesByLength(iv, digits, suffix) {
  if (ivEmpty(iv)) return NONE;
  const lo = iv.lo === null || iv.lo < 0n ? 0n : iv.lo;
  const hi = iv.hi === null ? (lo >= pow10(digits) ? pow10(String(lo).length) - 1n : pow10(digits) - 1n) : iv.hi;
  const parts = [];
  for (let len = String(lo).length; len <= String(hi).length; len++) {
    const x = len === 1 ? 0n : pow10(len - 1);
    const y = pow10(len) - 1n;
    const a = lo > x ? lo : x;
    const b = hi < y ? hi : y;
    if (a <= b) parts.push(seq(naturals(a, b), suffix(len)));
  }
  return alt(parts);
}

/** A fraction of 1..k digits that are not all zeros (without the point). */
function nonzeroDigits(k) {
  const nz = cls(cs.range(0x31, 0x39));
  return k <= 1 ? nz : alt(seq(nz, rep(DIGIT, 0, k - 1)), seq(lit('0'), nonzeroDigits(k - 1)));
}

/** Integers in [lo, hi] (BigInt or null). */
function integers(lo, hi, digits) {
  const neg = lo === null || lo < 0n ? magnitudes(interval(hi === null ? 1n : (-hi > 1n ? -hi : 1n), lo === null ? null : -lo), digits) : NONE;
  const pos = hi === null || hi >= 0n ? magnitudes(interval(lo === null || lo < 0n ? 0n : lo, hi), digits) : NONE;
  return alt(seq(lit('-'), neg), pos);
}

// ---- the converter ---------------------------------------------------------------

class Converter {
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.g = new Grammar();
    this.ptrOf = new Map(); // schema object -> its JSON Pointer in the document
    this.checked = new Set();
    this.refRules = new Map(); // target pointer -> rule name
    this.expanded = new Map(); // JSON text of a schema with $ref + siblings or allOf -> rule name
    this.walk(root, '', new Set());
  }

  walk(s, ptr, stack) {
    if (s === null || typeof s !== 'object') return;
    if (stack.has(s)) throw schemaError(ptr, null, 'the schema object contains itself (a cycle of JavaScript references; use $ref)');
    stack.add(s);
    if (!Array.isArray(s) && !this.ptrOf.has(s)) this.ptrOf.set(s, ptr);
    if (!Array.isArray(s)) {
      for (const k of ['properties', ...CONTAINERS]) {
        if (isObj(s[k])) for (const [name, sub] of Object.entries(s[k])) this.walk(sub, `${ptr}/${k}/${escPtr(name)}`, stack);
      }
      for (const k of ['items', 'additionalProperties']) if (s[k] !== undefined) this.walk(s[k], `${ptr}/${k}`, stack);
      for (const k of ['prefixItems', 'anyOf', 'oneOf', 'allOf', 'items']) {
        if (Array.isArray(s[k])) s[k].forEach((sub, i) => this.walk(sub, `${ptr}/${k}/${i}`, stack));
      }
    }
    stack.delete(s);
  }

  err(path, keyword, reason) { return schemaError(path, keyword, reason); }

  // ---- shapes of keyword values ----

  check(s, ptr) {
    if (s === true || s === false) return;
    if (!isObj(s)) throw this.err(ptr, null, `a schema must be an object or a boolean, got ${describe(s)}`);
    if (this.checked.has(s)) return;
    ptr = this.ptrOf.get(s) ?? ptr; // an object of the document is named by its own place
    const at = (k) => `${ptr}/${escPtr(k)}`;
    for (const k of Object.keys(s)) {
      if (!KNOWN.has(k)) {
        throw this.err(at(k), k, 'this keyword is not supported (docs/json-schema.md lists the supported keywords); ' +
          'an unsupported keyword is never ignored, since the output could then fail validation');
      }
    }
    const count = (k) => {
      if (s[k] !== undefined && !(Number.isSafeInteger(s[k]) && s[k] >= 0)) throw this.err(at(k), k, `must be a non-negative integer, got ${describe(s[k])}`);
    };
    ['minItems', 'maxItems', 'minLength', 'maxLength'].forEach(count);
    for (const k of TYPE_KEYWORDS.number) {
      if (s[k] === undefined) continue;
      if (typeof s[k] === 'boolean') throw this.err(at(k), k, 'a boolean here is draft-04 syntax; write the bound as a number (draft 6 and later)');
      if (typeof s[k] !== 'number' || !Number.isFinite(s[k])) throw this.err(at(k), k, `must be a finite number, got ${describe(s[k])}`);
    }
    if (s.type !== undefined) {
      const ts = typeList(s.type);
      if (ts.length === 0 || !ts.every((t) => TYPES.includes(t)) || new Set(ts).size !== ts.length) {
        throw this.err(at('type'), 'type', `must be one of ${TYPES.join(', ')} or a non-empty array of them without repeats, got ${describe(s.type)}`);
      }
    }
    for (const k of ['properties', ...CONTAINERS]) if (s[k] !== undefined && !isObj(s[k])) throw this.err(at(k), k, 'must be an object of schemas');
    if (s.required !== undefined && !(Array.isArray(s.required) && s.required.every((x) => typeof x === 'string'))) {
      throw this.err(at('required'), 'required', 'must be an array of property names');
    }
    if (Array.isArray(s.items)) throw this.err(at('items'), 'items', 'an array of schemas is the draft-07 tuple form; use prefixItems (2020-12)');
    for (const k of ['anyOf', 'oneOf', 'allOf', 'prefixItems']) {
      if (s[k] !== undefined && !(Array.isArray(s[k]) && (s[k].length > 0 || k === 'prefixItems'))) throw this.err(at(k), k, 'must be a non-empty array of schemas');
    }
    for (const k of ['pattern', 'format', '$ref']) if (s[k] !== undefined && typeof s[k] !== 'string') throw this.err(at(k), k, `must be a string, got ${describe(s[k])}`);
    if (s.enum !== undefined && !(Array.isArray(s.enum) && s.enum.length > 0)) throw this.err(at('enum'), 'enum', 'must be a non-empty array');
    for (const k of ['enum', 'const']) {
      if (s[k] === undefined) continue;
      const bad = findNonJson(s[k]);
      if (bad) throw this.err(at(k), k, `holds ${bad}, which is not a JSON value`);
    }
    this.checked.add(s);
  }

  // ---- references ----

  resolve(refText, path) {
    if (!refText.startsWith('#')) throw this.err(path, '$ref', `only references inside the schema ("#..." JSON Pointers) are supported, got ${describe(refText)}`);
    let frag;
    try { frag = decodeURIComponent(refText.slice(1)); } catch { throw this.err(path, '$ref', `${describe(refText)} is not a valid URI fragment`); }
    if (frag !== '' && !frag.startsWith('/')) throw this.err(path, '$ref', `${describe(refText)}: anchors ($anchor) are not supported; use a JSON Pointer such as "#/$defs/name"`);
    let node = this.root;
    for (const tok of frag === '' ? [] : frag.slice(1).split('/')) {
      const key = tok.replace(/~1/g, '/').replace(/~0/g, '~');
      if (node === null || typeof node !== 'object' || !Object.prototype.hasOwnProperty.call(node, key)) {
        throw this.err(path, '$ref', `${describe(refText)} does not resolve to anything in the schema`);
      }
      node = node[key];
    }
    if (node !== true && node !== false && !isObj(node)) throw this.err(path, '$ref', `${describe(refText)} points to ${describe(node)}, not a schema`);
    return { schema: node, ptr: this.ptrOf.get(node) ?? frag };
  }

  refExpr(refText, path) {
    const { schema, ptr } = this.resolve(refText, path);
    if (schema === true || schema === false) return this.convert(schema, ptr);
    if (this.refRules.has(ptr)) return ref(this.refRules.get(ptr));
    const name = this.g.reserve(hint(ptr));
    this.refRules.set(ptr, name);
    this.g.set(name, this.convert(schema, ptr));
    return ref(name);
  }

  // ---- allOf / $ref with other keywords: one merged schema ----

  /** The schemas whose conjunction `s` is: its own keywords, its $ref target's and its allOf branches' (recursively). */
  flatten(s, ptr, stack = new Set(), out = []) {
    if (s === true) return out;
    if (s === false) { out.push({ schema: false, ptr }); return out; }
    this.check(s, ptr);
    ptr = this.ptrOf.get(s) ?? ptr;
    if (stack.has(s)) throw this.err(ptr, s.$ref !== undefined ? '$ref' : 'allOf', 'allOf / $ref lead back to this same schema, so it has no finite expansion');
    stack.add(s);
    const own = {};
    for (const [k, v] of Object.entries(s)) if (k !== '$ref' && k !== 'allOf' && !IGNORED.has(k)) own[k] = v;
    if (Object.keys(own).length) out.push({ schema: own, ptr });
    const back = (target, path, keyword) => {
      if (stack.has(target)) throw this.err(path, keyword, 'allOf / $ref lead back to a schema being expanded, so it has no finite expansion');
    };
    if (s.$ref !== undefined) {
      const t = this.resolve(s.$ref, `${ptr}/$ref`);
      back(t.schema, `${ptr}/$ref`, '$ref');
      this.flatten(t.schema, t.ptr, stack, out);
    }
    if (s.allOf) s.allOf.forEach((b, i) => { back(b, `${ptr}/allOf/${i}`, 'allOf'); this.flatten(b, `${ptr}/allOf/${i}`, stack, out); });
    stack.delete(s);
    return out;
  }

  /** One schema (no $ref, no allOf) equivalent to `s`, or false when it admits nothing. */
  effective(s, ptr) {
    if (s === true || s === false) return s;
    this.check(s, ptr);
    if (s.$ref === undefined && s.allOf === undefined) return s;
    const parts = this.flatten(s, ptr);
    if (parts.some((p) => p.schema === false)) return false;
    return this.merge(parts, ptr);
  }

  merge(parts, ptr) {
    const out = {};
    const anyOfs = [];
    const oneOfs = [];
    const extra = []; // each part's additionalProperties other than true / absent
    const conflict = (k, why) => { throw this.err(`${ptr}/allOf`, 'allOf', `branches set "${k}" ${why}`); };
    for (const { schema: c } of parts) {
      for (const [k, v] of Object.entries(c)) {
        if (k === 'anyOf') { anyOfs.push(v); continue; }
        if (k === 'oneOf') { oneOfs.push(v); continue; }
        if (k === 'additionalProperties') { if (v !== true) extra.push({ v, props: c.properties ?? {} }); continue; }
        if (!has(out, k)) { out[k] = k === 'properties' ? { ...v } : k === 'required' ? [...v] : k === 'type' ? typeList(v) : v; continue; }
        switch (k) {
          case 'type': {
            const mine = typeList(v);
            const both = out.type.filter((t) => mine.includes(t)).concat(
              out.type.includes('number') && mine.includes('integer') && !out.type.includes('integer') ? ['integer'] : [],
              mine.includes('number') && out.type.includes('integer') && !mine.includes('integer') ? ['integer'] : []);
            out.type = [...new Set(both)];
            if (out.type.length === 0) throw this.err(`${ptr}/allOf`, 'allOf', 'branches allow no common type, so no value validates');
            break;
          }
          case 'enum': out.enum = out.enum.filter((x) => v.some((y) => deepEqual(x, y))); break;
          case 'const': if (!deepEqual(out.const, v)) throw this.err(`${ptr}/allOf`, 'allOf', 'branches set different "const" values, so no value validates'); break;
          case 'properties':
            for (const [name, sub] of Object.entries(v)) {
              put(out.properties, name, has(out.properties, name) && !deepEqual(out.properties[name], sub) ? { allOf: [out.properties[name], sub] } : sub);
            }
            break;
          case 'required': for (const n of v) if (!out.required.includes(n)) out.required.push(n); break;
          case 'items': if (!deepEqual(out.items, v)) out.items = { allOf: [out.items, v] }; break;
          case 'minItems': case 'minLength': case 'minimum': case 'exclusiveMinimum': out[k] = Math.max(out[k], v); break;
          case 'maxItems': case 'maxLength': case 'maximum': case 'exclusiveMaximum': out[k] = Math.min(out[k], v); break;
          default: if (!deepEqual(out[k], v)) conflict(k, 'to different values, which cannot be combined into one grammar');
        }
      }
    }
    if (has(out, 'const')) {
      out.enum = (out.enum ?? [out.const]).filter((x) => deepEqual(x, out.const));
      delete out.const;
    }
    if (out.enum && out.enum.length === 0) throw this.err(`${ptr}/allOf`, 'allOf', 'the branches\' enum / const values have nothing in common, so no value validates');
    // a part's additionalProperties applies to every property that part does not declare
    if (extra.length) {
      const props = out.properties ?? {};
      const names = [...new Set([...Object.keys(props), ...(out.required ?? [])])];
      for (const { v, props: own } of extra) {
        for (const name of names) {
          if (has(own, name)) continue;
          if (v === false) {
            if ((out.required ?? []).includes(name)) throw this.err(`${ptr}/allOf`, 'allOf', `property "${name}" is required by one branch and forbidden by another's additionalProperties: false`);
            put(props, name, false);
          } else put(props, name, has(props, name) ? { allOf: [props[name], v] } : v);
        }
      }
      out.properties = props;
      out.additionalProperties = extra.some((x) => x.v === false) ? false : extra.length === 1 ? extra[0].v : { allOf: extra.map((x) => x.v) };
    } else if (parts.some(({ schema }) => schema.additionalProperties === true)) out.additionalProperties = true;
    if (oneOfs.length > 1) throw this.err(`${ptr}/allOf`, 'allOf', 'several oneOf under one allOf are not supported');
    if (oneOfs.length) out.oneOf = oneOfs[0];
    if (anyOfs.length === 1) out.anyOf = anyOfs[0];
    else if (anyOfs.length > 1) {
      let combos = [[]];
      for (const list of anyOfs) combos = combos.flatMap((c) => list.map((b) => [...c, b]));
      if (combos.length > 256) throw this.err(`${ptr}/allOf`, 'allOf', `several anyOf under one allOf make ${combos.length} combinations (at most 256 are supported)`);
      out.anyOf = combos.map((c) => ({ allOf: c }));
    }
    this.checked.add(out);
    return out;
  }

  // ---- schemas to grammar ----

  convert(s, ptr) {
    if (s === true) return this.anyValue();
    if (s === false) return NONE;
    this.check(s, ptr);
    ptr = this.ptrOf.get(s) ?? ptr;
    const keys = Object.keys(s).filter((k) => !IGNORED.has(k));
    if (keys.length === 0) return this.anyValue();
    if (s.$ref !== undefined && keys.length === 1) return this.refExpr(s.$ref, `${ptr}/$ref`);
    if (s.$ref !== undefined || s.allOf !== undefined) {
      // a rule per expanded schema (by its text: merged copies of one schema share it),
      // so that recursion through $ref-with-siblings or allOf ends at the rule
      const key = JSON.stringify(s);
      if (this.expanded.has(key)) return ref(this.expanded.get(key));
      const name = this.g.reserve(hint(ptr));
      this.expanded.set(key, name);
      const m = this.effective(s, ptr);
      this.g.set(name, m === false ? NONE : this.convert(m, ptr));
      return ref(name);
    }
    if (s.anyOf !== undefined || s.oneOf !== undefined) return this.alternatives(s, ptr);
    if (s.enum !== undefined || s.const !== undefined) return this.values(s, ptr);
    return this.byType(s, ptr);
  }

  /** The branches of s's anyOf / oneOf, each joined with s's other keywords. */
  branches(s, ptr) {
    const key = s.oneOf !== undefined ? 'oneOf' : 'anyOf';
    const rest = {};
    for (const [k, v] of Object.entries(s)) if (k !== key && !IGNORED.has(k)) rest[k] = v;
    const plain = Object.keys(rest).length === 0;
    if (!plain) this.checked.add(rest);
    return s[key].map((b, i) => ({ schema: plain ? b : { allOf: [rest, b] }, ptr: plain ? (this.ptrOf.get(b) ?? `${ptr}/${key}/${i}`) : ptr }));
  }

  alternatives(s, ptr) {
    if (s.anyOf !== undefined && s.oneOf !== undefined) throw this.err(`${ptr}/oneOf`, 'oneOf', 'anyOf and oneOf in the same schema are not supported (nest one inside an allOf branch of the other)');
    const bs = this.branches(s, ptr);
    if (s.oneOf !== undefined) {
      for (let i = 0; i < bs.length; i++) {
        for (let j = i + 1; j < bs.length; j++) {
          if (this.mayOverlap(bs[i].schema, bs[j].schema) || this.mayOverlap(bs[j].schema, bs[i].schema)) {
            throw this.err(`${ptr}/oneOf`, 'oneOf', `branches ${i} and ${j} may both match one value. A grammar cannot keep oneOf's branches exclusive, ` +
              'so they must be provably disjoint (different types, different const / enum values, a required property whose schemas are disjoint, ' +
              'disjoint number ranges, lengths or item counts); otherwise use anyOf');
          }
        }
      }
    }
    return alt(bs.map((b) => this.convert(b.schema, b.ptr)));
  }

  values(s, ptr) {
    const simple = ['type', 'enum', 'const', ...TYPE_KEYWORDS.string, ...TYPE_KEYWORDS.number];
    for (const k of Object.keys(s)) {
      if (!IGNORED.has(k) && !simple.includes(k)) {
        throw this.err(`${ptr}/${escPtr(k)}`, k, 'beside enum / const only type and the string and number keywords are supported (list the allowed values instead)');
      }
    }
    let vals = s.enum ?? [s.const];
    if (s.enum !== undefined && s.const !== undefined) vals = vals.filter((v) => deepEqual(v, s.const));
    const types = typeList(s.type);
    if (types) vals = vals.filter((v) => typeAccepts(types, v));
    // the listed values are known: keep those the string / number keywords accept
    let re = null;
    if (s.pattern !== undefined) {
      try { re = new RegExp(s.pattern, 'u'); } catch (e) { throw this.err(`${ptr}/pattern`, 'pattern', `${describe(s.pattern)}: not a valid regular expression (${e.message})`); }
    }
    if (s.format !== undefined && !has(FORMATS, s.format)) throw this.err(`${ptr}/format`, 'format', `format ${describe(s.format)} is not supported (supported: ${Object.keys(FORMATS).join(', ')})`);
    const fmt = s.format !== undefined ? new RegExp(FORMATS[s.format], 'u') : null; // the grammar's own forms: a value kept here surely validates
    const lo = numLow(s);
    const hi = numHigh(s);
    vals = vals.filter((v) => {
      if (typeof v === 'string') {
        const n = cpLength(v);
        return n >= (s.minLength ?? 0) && n <= (s.maxLength ?? Infinity) && (!re || re.test(v)) && (!fmt || fmt.test(v));
      }
      if (typeof v === 'number') return (v > lo.v || (v === lo.v && !lo.ex)) && (v < hi.v || (v === hi.v && !hi.ex));
      return true;
    });
    if (vals.length === 0) throw this.err(`${ptr}/${s.enum !== undefined ? 'enum' : 'const'}`, s.enum !== undefined ? 'enum' : 'const', 'no listed value satisfies the schema\'s other keywords, so no value validates');
    return alt(vals.map((v) => this.valueExpr(v)));
  }

  /** Exactly this JSON value (its keys in their order), spaced by the whitespace policy. */
  valueExpr(v) {
    if (v === null || typeof v !== 'object') return lit(JSON.stringify(v));
    const W = this.ws();
    const items = Array.isArray(v) ? v.map((x) => this.valueExpr(x)) : Object.entries(v).map(([k, x]) => seq(lit(JSON.stringify(k) + ':'), W, this.valueExpr(x)));
    const [open, close] = Array.isArray(v) ? ['[', ']'] : ['{', '}'];
    if (items.length === 0) return seq(lit(open), W, lit(close));
    return seq(lit(open), W, items.flatMap((x, i) => (i ? [lit(','), W, x] : [x])), W, lit(close));
  }

  /** The JSON types a schema's grammar produces: its `type`, else those its keywords imply, else all. */
  producedTypes(s) {
    const ts = typeList(s.type);
    if (ts) return ts;
    const implied = Object.keys(TYPE_KEYWORDS).filter((t) => TYPE_KEYWORDS[t].some((k) => s[k] !== undefined));
    return implied.length ? implied : TYPES;
  }

  byType(s, ptr) {
    const types = this.producedTypes(s);
    if (types === TYPES) return this.anyValue();
    const parts = [];
    if (types.includes('object')) parts.push(this.object(s, ptr));
    if (types.includes('array')) parts.push(this.array(s, ptr));
    if (types.includes('string')) parts.push(this.string(s, ptr));
    if (types.includes('number')) parts.push(this.number(s, ptr, false));
    else if (types.includes('integer')) parts.push(this.number(s, ptr, true));
    if (types.includes('boolean')) parts.push(this.boolean());
    if (types.includes('null')) parts.push(this.null());
    return alt(parts);
  }

  // ---- the shared rules ----

  ws() {
    if (this.opts.whitespace === 'compact') return EPS;
    return this.g.named('ws', () => opt(alt(lit(' '), seq(lit('\n'), rep(cls(cs.of(0x20, 0x09)), 0, this.opts.maxIndent)))));
  }

  /** One code point inside a JSON string, in any of JSON's spellings (each unit is one code point: surrogate escapes come in pairs). */
  char() {
    return this.g.named('char', () => {
      const hex = cls(cs.from([[0x30, 0x39], [0x41, 0x46], [0x61, 0x66]]));
      const h = (set) => cls(cs.from(set));
      const bmp = alt(seq(h([[0x30, 0x39], [0x41, 0x43], [0x45, 0x46], [0x61, 0x63], [0x65, 0x66]]), rep(hex, 3, 3)),
        seq(h([[0x44, 0x44], [0x64, 0x64]]), h([[0x30, 0x37]]), rep(hex, 2, 2)));
      const high = seq(h([[0x44, 0x44], [0x64, 0x64]]), h([[0x38, 0x39], [0x41, 0x42], [0x61, 0x62]]), rep(hex, 2, 2));
      const low = seq(h([[0x44, 0x44], [0x64, 0x64]]), h([[0x43, 0x46], [0x63, 0x66]]), rep(hex, 2, 2));
      return alt(
        cls(cs.minus(ANY, cs.from([[0, 0x1f], [0x22, 0x22], [0x5c, 0x5c]]))),
        seq(lit('\\'), cls(cs.of(0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74))),
        seq(lit('\\u'), bmp),
        seq(lit('\\u'), high, lit('\\u'), low));
    });
  }

  /** One code point as JSON.stringify writes it (patterns, formats and extra keys use this one spelling). */
  plainChar() { return this.g.named('plain-char', () => jsonChars(ANY)); }

  string0() { return this.g.named('string', () => seq(lit('"'), rep(this.char(), 0), lit('"'))); }
  boolean() { return this.g.named('boolean', () => alt(lit('true'), lit('false'))); }
  null() { return this.g.named('null', () => lit('null')); }

  number0() {
    const { intDigits, fracDigits, expDigits } = NUMBER_LIMITS;
    return this.g.named('number', () => seq(opt(lit('-')), alt(lit('0'), seq(cls(cs.range(0x31, 0x39)), rep(DIGIT, 0, intDigits - 1))),
      opt(seq(lit('.'), rep(DIGIT, 1, fracDigits))), opt(seq(cls(cs.of(0x45, 0x65)), opt(cls(cs.of(0x2b, 0x2d))), rep(DIGIT, 1, expDigits)))));
  }

  integer0() { return this.g.named('integer', () => integers(null, null, NUMBER_LIMITS.intDigits)); }

  anyValue() {
    return this.g.named('value', () => alt(this.anyObject(), this.anyArray(), this.string0(), this.number0(), this.boolean(), this.null()));
  }

  anyObject() {
    return this.g.named('object', () => {
      const W = this.ws();
      const member = seq(this.string0(), lit(':'), W, this.anyValue());
      return seq(lit('{'), W, opt(seq(member, rep(seq(lit(','), W, member), 0), W)), lit('}'));
    });
  }

  anyArray() {
    return this.g.named('array', () => {
      const W = this.ws();
      const v = this.anyValue();
      return seq(lit('['), W, opt(seq(v, rep(seq(lit(','), W, v), 0), W)), lit(']'));
    });
  }

  // ---- objects ----

  object(s, ptr) {
    const props = s.properties ?? {};
    const required = [...new Set(s.required ?? [])];
    const addl = s.additionalProperties;
    if (s.properties === undefined && s.required === undefined && (addl === undefined || addl === true)) return this.anyObject();
    const W = this.ws();
    const members = [];
    for (const [name, sub] of Object.entries(props)) {
      const value = this.convert(sub, this.ptrOf.get(sub) ?? `${ptr}/properties/${escPtr(name)}`);
      const req = required.includes(name);
      if (isNone(value)) {
        if (req) throw this.err(`${ptr}/required`, 'required', `property "${name}" is required but its schema admits no value`);
        continue;
      }
      members.push({ name, value, req });
    }
    for (const name of required) {
      if (has(props, name)) continue;
      if (addl === false) throw this.err(`${ptr}/required`, 'required', `property "${name}" is required but not declared, and additionalProperties is false`);
      const value = addl === undefined || addl === true ? this.anyValue() : this.convert(addl, `${ptr}/additionalProperties`);
      if (isNone(value)) throw this.err(`${ptr}/required`, 'required', `property "${name}" is required but additionalProperties admits no value`);
      members.push({ name, value, req: true });
    }
    let extra = null;
    if (addl === true || isObj(addl)) {
      const value = addl === true ? this.anyValue() : this.convert(addl, this.ptrOf.get(addl) ?? `${ptr}/additionalProperties`);
      if (!isNone(value)) {
        const key = members.length ? seq(lit('"'), ref(this.g.define(`${hint(ptr)}-key`, this.keyNotIn(members.map((x) => x.name)))), lit('"')) : this.string0();
        extra = seq(key, lit(':'), W, value);
      }
    }
    const comma = seq(lit(','), W);
    const m = members.map((x) => seq(lit(JSON.stringify(x.name) + ':'), W, x.value));
    const n = m.length;
    const tails = new Array(n + 1);
    tails[n] = extra ? rep(seq(comma, extra), 0) : EPS;
    const firstReq = members.findIndex((x) => x.req);
    const starts = firstReq < 0 ? n : firstReq + 1;
    for (let i = n - 1; i >= 0; i--) {
      const one = seq(comma, m[i]);
      const t = seq(members[i].req ? one : opt(one), tails[i + 1]);
      // when the object may start at several members, each tail is used twice: give it a rule
      tails[i] = starts > 1 && i > 0 && print(t).length > 40 ? ref(this.g.define(`${hint(ptr)}-from-${i}`, t)) : t;
    }
    const firsts = [];
    for (let i = 0; i < n; i++) {
      firsts.push(seq(m[i], tails[i + 1]));
      if (members[i].req) break;
    }
    if (firstReq < 0 && extra) firsts.push(seq(extra, rep(seq(comma, extra), 0)));
    const body = alt(firsts);
    const obj = firstReq >= 0 ? seq(lit('{'), W, body, W, lit('}')) : seq(lit('{'), W, opt(seq(body, W)), lit('}'));
    return ref(this.g.define(hint(ptr), obj));
  }

  /** Key text (between the quotes) that is none of `names`, in plain spelling. */
  keyNotIn(names) {
    const root = { next: new Map(), end: false };
    for (const name of names) {
      let node = root;
      for (const ch of name) {
        const cp = ch.codePointAt(0);
        if (!node.next.has(cp)) node.next.set(cp, { next: new Map(), end: false });
        node = node.next.get(cp);
      }
      node.end = true;
    }
    const any = this.plainChar();
    const build = (node) => alt(
      node.end ? NONE : EPS,
      seq(jsonChars(cs.minus(ANY, cs.of(...node.next.keys()))), rep(any, 0)),
      [...node.next].map(([cp, child]) => seq(jsonChars(cs.of(cp)), build(child))));
    return build(root);
  }

  // ---- arrays ----

  array(s, ptr) {
    const prefix = (s.prefixItems ?? []).map((p, i) => this.convert(p, this.ptrOf.get(p) ?? `${ptr}/prefixItems/${i}`));
    const item = s.items === undefined ? this.anyValue() : this.convert(s.items, this.ptrOf.get(s.items) ?? `${ptr}/items`);
    const min = s.minItems ?? 0;
    let max = s.maxItems ?? Infinity;
    const dead = prefix.findIndex(isNone);
    if (dead >= 0) { max = Math.min(max, dead); prefix.length = dead; }
    if (isNone(item)) max = Math.min(max, prefix.length);
    if (min > max) {
      throw this.err(`${ptr}/minItems`, 'minItems', `at least ${min} items are required but at most ${max} can have a value (maxItems, prefixItems, items: false)`);
    }
    const W = this.ws();
    const comma = seq(lit(','), W);
    const elem = (k) => (k < prefix.length ? prefix[k] : item);
    const tail = (k) => {
      if (k >= max) return EPS;
      if (k >= prefix.length) return rep(seq(comma, item), Math.max(0, min - k), max - k);
      const one = seq(comma, elem(k), tail(k + 1));
      return k < min ? one : opt(one);
    };
    let arr;
    if (max === 0) arr = seq(lit('['), W, lit(']'));
    else {
      const body = seq(elem(0), tail(1));
      arr = min > 0 ? seq(lit('['), W, body, W, lit(']')) : seq(lit('['), W, opt(seq(body, W)), lit(']'));
    }
    return ref(this.g.define(hint(ptr), arr));
  }

  // ---- strings ----

  string(s, ptr) {
    const minL = s.minLength ?? 0;
    const maxL = s.maxLength ?? Infinity;
    if (minL > maxL) throw this.err(`${ptr}/minLength`, 'minLength', `minLength ${minL} is above maxLength ${maxL}, so no string validates`);
    if (s.format !== undefined && s.pattern !== undefined) throw this.err(`${ptr}/pattern`, 'pattern', 'pattern together with format is not supported');
    let source;
    let keyword;
    if (s.format !== undefined) {
      source = has(FORMATS, s.format) ? FORMATS[s.format] : undefined;
      keyword = 'format';
      if (!source) throw this.err(`${ptr}/format`, 'format', `format ${describe(s.format)} is not supported (supported: ${Object.keys(FORMATS).join(', ')})`);
    } else if (s.pattern !== undefined) { source = s.pattern; keyword = 'pattern'; }
    if (source === undefined) {
      if (minL === 0 && maxL === Infinity) return this.string0();
      return seq(lit('"'), rep(this.char(), minL, maxL), lit('"'));
    }
    const path = `${ptr}/${keyword}`;
    let branches;
    try { branches = splitAnchors(parseRegex(source)); } catch (e) {
      if (e instanceof RegexError) throw this.err(path, keyword, `${describe(source)}: ${e.message}`);
      throw e;
    }
    if (minL > 0 || maxL < Infinity) {
      branches = branches.map((b) => {
        if (!b.start || !b.end) throw this.err(path, keyword, 'minLength / maxLength with a pattern are supported only when the pattern is anchored (^...$)');
        const [a, z] = lengthRange(b.ast);
        if (z < minL || a > maxL) return null; // this alternative never has an allowed length
        if (a >= minL && z <= maxL) return b;
        const ast = limitLength(b.ast, minL, maxL);
        if (!ast) {
          throw this.err(path, keyword, `cannot be combined with minLength / maxLength: that works when the pattern is fixed-length parts around one repeated character class (as in ^[a-z]+$); put the length into the pattern instead`);
        }
        return { ...b, ast };
      }).filter(Boolean);
      if (branches.length === 0) throw this.err(path, keyword, 'no string it matches has a length within minLength / maxLength');
    }
    const any = this.plainChar();
    const content = alt(branches.map(({ ast, start, end }) => seq(start ? [] : [rep(any, 0)], regexToExpr(ast), end ? [] : [rep(any, 0)])));
    if (isNone(content)) throw this.err(path, keyword, 'matches no string (an empty class such as [])');
    if (keyword === 'format' && minL === 0 && maxL === Infinity) return this.g.named(s.format, () => seq(lit('"'), content, lit('"')));
    return ref(this.g.define(`${hint(ptr)}-${keyword}`, seq(lit('"'), content, lit('"'))));
  }

  // ---- numbers ----

  number(s, ptr, integer) {
    let lo = -Infinity;
    let loEx = false;
    let hi = Infinity;
    let hiEx = false;
    let loKey = 'minimum';
    let hiKey = 'maximum';
    if (s.minimum !== undefined) lo = s.minimum;
    if (s.exclusiveMinimum !== undefined && s.exclusiveMinimum >= lo) { lo = s.exclusiveMinimum; loEx = true; loKey = 'exclusiveMinimum'; }
    if (s.maximum !== undefined) hi = s.maximum;
    if (s.exclusiveMaximum !== undefined && s.exclusiveMaximum <= hi) { hi = s.exclusiveMaximum; hiEx = true; hiKey = 'exclusiveMaximum'; }
    const digits = NUMBER_LIMITS.intDigits;
    // beyond 2^53 JSON.parse rounds integers, so a numeral below an exclusive bound can parse to the bound
    for (const [v, ex, k] of [[lo, loEx, loKey], [hi, hiEx, hiKey]]) {
      if (ex && Math.abs(v) > 2 ** 53) throw this.err(`${ptr}/${k}`, k, `${v}: an exclusive bound beyond ±2^53 is not supported (numbers there are not exact); use an inclusive bound`);
    }
    if (integer) {
      if (lo === -Infinity && hi === Infinity) return this.integer0();
      const a = lo === -Infinity ? null : BigInt(loEx ? Math.floor(lo) + 1 : Math.ceil(lo));
      const b = hi === Infinity ? null : BigInt(hiEx ? Math.ceil(hi) - 1 : Math.floor(hi));
      if (a !== null && b !== null && a > b) throw this.err(`${ptr}/${loKey}`, loKey, `no integer lies between the bounds (${loKey} ${lo}, ${hiKey} ${hi})`);
      return ref(this.g.define(`${hint(ptr)}-int`, integers(a, b, digits)));
    }
    if (lo === -Infinity && hi === Infinity) return this.number0();
    for (const [v, k] of [[lo, loKey], [hi, hiKey]]) {
      if (Number.isFinite(v) && !Number.isInteger(v)) {
        throw this.err(`${ptr}/${k}`, k, `${v}: bounds of a "number" must be integers here (a grammar of decimal numerals is built from them); use "integer", or scale the value`);
      }
    }
    if (lo > hi || (lo === hi && (loEx || hiEx))) throw this.err(`${ptr}/${loKey}`, loKey, `no number lies between the bounds (${loKey} ${lo}, ${hiKey} ${hi})`);
    const L = lo === -Infinity ? null : BigInt(lo);
    const H = hi === Infinity ? null : BigInt(hi);
    const inLo = L === null ? null : loEx ? L + 1n : L; // smallest integer in the set
    const inHi = H === null ? null : hiEx ? H - 1n : H;
    const neg = (x) => (x === null ? null : -x);
    const max = (a, b) => (a === null ? b : b === null ? a : a > b ? a : b);
    // magnitudes m: "m" is the value m, "m.f" lies in [m, m+1); "-m" is -m, "-m.f" lies in (-(m+1), -m]
    const posOpen = interval(max(L, 0n), H === null ? null : H - 1n); // (m, m+1) inside the set
    const posIn = interval(max(inLo, 0n), inHi); // m itself inside
    const negOpen = interval(max(neg(H), 0n), L === null ? null : -L - 1n); // (-(m+1), -m) inside
    const negIn = interval(max(neg(inHi), 1n), neg(inLo)); // -m itself inside (m >= 1: "-0" is left to "0")
    // At most 15 significant digits (integer part + fraction): JSON.parse then
    // rounds a value by less than its distance to the nearest integer, so a
    // value inside (m, m+1) never becomes an excluded bound m or m+1.
    const fracMax = (len) => Math.min(NUMBER_LIMITS.fracDigits, BOUNDED_SIGNIFICANT - len);
    const frac = (len) => (fracMax(len) > 0 ? opt(seq(lit('.'), rep(DIGIT, 1, fracMax(len)))) : EPS);
    const zeros = (len) => opt(seq(lit('.'), rep(lit('0'), 1, Math.max(1, fracMax(len)))));
    const nonzero = (len) => (fracMax(len) > 0 ? seq(lit('.'), nonzeroDigits(fracMax(len))) : NONE);
    const side = (open, inside) => alt(
      magnitudesByLength(ivIntersect(open, inside), digits, frac),
      ivMinus(inside, open).map((iv) => magnitudesByLength(iv, digits, zeros)),
      ivMinus(open, inside).map((iv) => magnitudesByLength(iv, digits, nonzero)));
    return ref(this.g.define(`${hint(ptr)}-num`, alt(seq(lit('-'), side(negOpen, negIn)), side(posOpen, posIn))));
  }

  // ---- oneOf: proving branches disjoint ----

  /** Values of a schema that lists them all (enum, const, boolean, null), or null. */
  finiteValues(s) {
    let vals = null;
    if (s.enum !== undefined) vals = s.enum;
    if (s.const !== undefined) vals = (vals ?? [s.const]).filter((v) => deepEqual(v, s.const));
    const ts = typeList(s.type);
    if (vals) return ts ? vals.filter((v) => typeAccepts(ts, v)) : vals;
    if (ts && ts.every((t) => t === 'boolean' || t === 'null') && !Object.keys(s).some((k) => k !== 'type' && !IGNORED.has(k))) {
      return [...(ts.includes('boolean') ? [true, false] : []), ...(ts.includes('null') ? [null] : [])];
    }
    return null;
  }

  /**
   * Whether a string this converter produces for `g` might validate against
   * `a`. false is a proof that it cannot; true means "could not prove it".
   */
  mayOverlap(g, a, depth = 0) {
    if (depth > 8) return true;
    g = this.effective(g, '');
    a = this.effective(a, '');
    if (g === false || a === false) return false;
    if (g === true || a === true) return true;
    if (g.anyOf || g.oneOf) return this.branches(g, '').some((b) => this.mayOverlap(b.schema, a, depth + 1));
    if (a.anyOf || a.oneOf) return this.branches(a, '').some((b) => this.mayOverlap(g, b.schema, depth + 1));
    const gv = this.finiteValues(g);
    if (gv) return gv.some((v) => !this.rejects(a, v));
    const av = this.finiteValues(a);
    if (av) return av.some((v) => !this.rejects(g, v));
    const accepted = typeList(a.type) ?? TYPES;
    return this.producedTypes(g).some((t) => {
      const ok = accepted.includes(t) || (t === 'integer' && accepted.includes('number')) || (t === 'number' && accepted.includes('integer'));
      return ok && this.sameTypeOverlap(t, g, a, depth);
    });
  }

  sameTypeOverlap(t, g, a, depth) {
    switch (t) {
      case 'object': {
        const gp = g.properties ?? {};
        const ap = a.properties ?? {};
        const greq = g.required ?? [];
        const gExtra = g.additionalProperties === true || isObj(g.additionalProperties) ||
          (g.additionalProperties === undefined && g.properties === undefined && g.required === undefined);
        const gSchema = (p) => (has(gp, p) ? gp[p] : g.additionalProperties === undefined ? true : g.additionalProperties);
        const aSchema = (p) => (has(ap, p) ? ap[p] : a.additionalProperties === undefined ? true : a.additionalProperties);
        for (const p of greq) if (!this.mayOverlap(gSchema(p), aSchema(p), depth + 1)) return false;
        for (const p of a.required ?? []) if (!has(gp, p) && !greq.includes(p) && !gExtra) return false;
        return true;
      }
      case 'array': {
        const gmin = g.minItems ?? 0;
        const gPrefix = g.prefixItems ?? [];
        const gmax = Math.min(g.maxItems ?? Infinity, g.items === false ? gPrefix.length : Infinity);
        const aPrefix = a.prefixItems ?? [];
        const amax = Math.min(a.maxItems ?? Infinity, a.items === false ? aPrefix.length : Infinity);
        if (gmax < (a.minItems ?? 0) || gmin > amax) return false;
        for (let k = 0; k < gmin; k++) {
          const ge = k < gPrefix.length ? gPrefix[k] : g.items ?? true;
          const ae = k < aPrefix.length ? aPrefix[k] : a.items ?? true;
          if (!this.mayOverlap(ge, ae, depth + 1)) return false;
        }
        return true;
      }
      case 'string': {
        // lengths: what g's grammar produces (its own format forms) against what a accepts
        const [gmin, gmax] = stringLengths(g, g.format !== undefined && has(FORMATS, g.format) ? FORMATS[g.format] : g.pattern, null);
        const [amin, amax] = stringLengths(a, a.pattern, a.format !== undefined && has(FORMAT_LENGTHS, a.format) ? FORMAT_LENGTHS[a.format] : null);
        return !(gmax < amin || gmin > amax);
      }
      case 'integer': case 'number': {
        const [glo, ghi] = [numLow(g), numHigh(g)];
        const [alo, ahi] = [numLow(a), numHigh(a)];
        const below = (x, y) => x.v < y.v || (x.v === y.v && (x.ex || y.ex)); // every value under x's top is under y's bottom
        return !(below(ghi, alo) || below(ahi, glo));
      }
      default: return true;
    }
  }

  /** true only when `v` surely fails `s`. */
  rejects(s, v, depth = 0) {
    if (depth > 8) return false;
    s = this.effective(s, '');
    if (s === false) return true;
    if (s === true) return false;
    if (s.anyOf && s.anyOf.every((b) => this.rejects(b, v, depth + 1))) return true;
    if (s.oneOf && s.oneOf.every((b) => this.rejects(b, v, depth + 1))) return true;
    const ts = typeList(s.type);
    if (ts && !typeAccepts(ts, v)) return true;
    if (s.enum !== undefined && !s.enum.some((x) => deepEqual(x, v))) return true;
    if (s.const !== undefined && !deepEqual(s.const, v)) return true;
    if (typeof v === 'string') {
      const n = cpLength(v);
      if (n < (s.minLength ?? 0) || n > (s.maxLength ?? Infinity)) return true;
      if (s.pattern !== undefined) { try { if (!new RegExp(s.pattern, 'u').test(v)) return true; } catch { /* reported elsewhere */ } }
    } else if (typeof v === 'number') {
      const lo = numLow(s);
      const hi = numHigh(s);
      if (v < lo.v || (v === lo.v && lo.ex) || v > hi.v || (v === hi.v && hi.ex)) return true;
    } else if (Array.isArray(v)) {
      if (v.length < (s.minItems ?? 0) || v.length > (s.maxItems ?? Infinity)) return true;
      const prefix = s.prefixItems ?? [];
      if (v.some((x, k) => { const e = k < prefix.length ? prefix[k] : s.items; return e !== undefined && this.rejects(e, x, depth + 1); })) return true;
    } else if (isObj(v)) {
      if ((s.required ?? []).some((p) => !has(v, p))) return true;
      const props = s.properties ?? {};
      for (const [k, x] of Object.entries(v)) {
        const e = has(props, k) ? props[k] : s.additionalProperties;
        if (e !== undefined && this.rejects(e, x, depth + 1)) return true;
      }
    }
    return false;
  }
}

/** [min, max] length of a schema's strings from minLength / maxLength, an anchored regex and known format lengths. */
function stringLengths(s, source, formatRange) {
  let lo = s.minLength ?? 0;
  let hi = s.maxLength ?? Infinity;
  if (formatRange) { lo = Math.max(lo, formatRange[0]); hi = Math.min(hi, formatRange[1]); }
  if (source !== undefined) {
    try {
      const bs = splitAnchors(parseRegex(source));
      if (bs.every((b) => b.start && b.end)) {
        const rs = bs.map((b) => lengthRange(b.ast));
        lo = Math.max(lo, Math.min(...rs.map((r) => r[0])));
        hi = Math.min(hi, Math.max(...rs.map((r) => r[1])));
      }
    } catch { /* the conversion reports a bad pattern */ }
  }
  return [lo, hi];
}

function numLow(s) {
  const m = s.minimum ?? -Infinity;
  const e = s.exclusiveMinimum ?? -Infinity;
  return e >= m ? { v: e, ex: e !== -Infinity } : { v: m, ex: false };
}
function numHigh(s) {
  const m = s.maximum ?? Infinity;
  const e = s.exclusiveMaximum ?? Infinity;
  return e <= m ? { v: e, ex: e !== Infinity } : { v: m, ex: false };
}

/** A readable rule name from a schema pointer: "/properties/address/properties/street" -> "address-street". */
function hint(ptr) {
  const drop = new Set(['properties', '$defs', 'definitions', 'allOf']);
  const words = ptr.split('/').slice(1).map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'))
    .filter((t) => !drop.has(t)).map((t) => (t === 'items' || t === 'prefixItems' ? 'item' : t === 'additionalProperties' ? 'extra' : t));
  const name = words.slice(-3).join('-');
  return name === '' ? 'root-value' : name;
}

function findNonJson(v, seen = new Set()) {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return null;
  if (typeof v === 'number') return Number.isFinite(v) ? null : String(v);
  if (typeof v !== 'object') return describe(v);
  if (seen.has(v)) return 'a cycle';
  seen.add(v);
  if (!Array.isArray(v) && Object.getPrototypeOf(v) !== Object.prototype && Object.getPrototypeOf(v) !== null) return describe(v);
  for (const x of Object.values(v)) {
    const bad = findNonJson(x, seen);
    if (bad) return bad;
  }
  seen.delete(v);
  return null;
}

function checkOptions(opts) {
  if (opts === undefined || opts === null) return DEFAULT_OPTIONS;
  if (!isObj(opts)) throw badOption('options', opts, 'an object');
  for (const k of Object.keys(opts)) {
    if (!has(DEFAULT_OPTIONS, k)) throw badOption(k, opts[k], `unknown option (known: ${Object.keys(DEFAULT_OPTIONS).join(', ')})`);
  }
  const o = { ...DEFAULT_OPTIONS };
  for (const [k, v] of Object.entries(opts)) if (v !== undefined) o[k] = v;
  if (o.whitespace !== 'compact' && o.whitespace !== 'flexible') throw badOption('whitespace', o.whitespace, "'compact' or 'flexible'");
  if (!(Number.isInteger(o.maxIndent) && o.maxIndent >= 0 && o.maxIndent <= 256)) throw badOption('maxIndent', o.maxIndent, 'an integer in [0, 256]');
  return o;
}

/**
 * GBNF text (start rule `root`) whose every sentence is JSON that validates
 * against `schema` (JSON Schema 2020-12, the subset in docs/json-schema.md).
 * @param {object|boolean} schema
 * @param {{whitespace?: 'flexible'|'compact', maxIndent?: number}} [options]
 *   whitespace 'flexible' (default): after `{ [ , :` and before `} ]` either
 *   nothing, one space, or a newline and up to maxIndent (24) spaces / tabs;
 *   'compact': none.
 * @returns {string}
 * @throws {WasmlmError} BAD_SCHEMA naming the keyword and its JSON Pointer; BAD_OPTION for options
 */
export function jsonSchemaToGbnf(schema, options) {
  const opts = checkOptions(options);
  if (schema !== true && schema !== false && !isObj(schema)) throw schemaError('', null, `a schema must be an object or a boolean, got ${describe(schema)}`);
  const c = new Converter(schema, opts);
  const g = c.g;
  g.rules.set('root', null);
  c.refRules.set('', 'root');
  g.set('root', c.convert(schema, ''));
  const dead = g.prune('root');
  if (dead.includes('root')) {
    const named = [...c.refRules].filter(([, n]) => dead.includes(n) && n !== 'root').map(([p]) => showPtr(p));
    throw schemaError('', null, 'no finite JSON value validates against this schema' +
      (named.length ? ` (${named.join(', ')} can only be satisfied by an infinitely deep value: recursion with no way out)` : ''));
  }
  g.foldAliases();
  return g.toString();
}

const jsonGrammars = new Map();

/**
 * The plain JSON mode grammars (`json: true`): any JSON value, or with
 * `object: true` any JSON object; same whitespace options as
 * jsonSchemaToGbnf. Built on first use and kept.
 */
export function jsonGrammar(options = {}) {
  if (options === null || typeof options !== 'object') throw badOption('options', options, 'an object');
  const { object = false, ...rest } = options;
  if (typeof object !== 'boolean') throw badOption('object', object, 'true or false');
  const o = checkOptions(rest);
  const key = `${object}:${o.whitespace}:${o.maxIndent}`;
  if (!jsonGrammars.has(key)) jsonGrammars.set(key, jsonSchemaToGbnf(object ? { type: 'object' } : true, o));
  return jsonGrammars.get(key);
}
