// JSON Schema -> GBNF (web/grammar/json-schema.js), checked against an
// independent GBNF recognizer / generator (gbnf-reference.mjs) and an
// independent JSON Schema validator (ajv 2020-12 + ajv-formats). The key
// property: every string the grammar produces is JSON that ajv accepts.
import test from 'node:test';
import assert from 'node:assert/strict';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { jsonSchemaToGbnf, jsonGrammar, FORMATS } from '../../web/grammar/json-schema.js';
import { WasmlmError } from '../../web/errors.js';
import { parseGbnf, Recognizer, Generator, rng } from './gbnf-reference.mjs';
import { CORPUS } from './fixtures/json-schemas.mjs';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const addFormats = addFormatsModule.default ?? addFormatsModule;

function newAjv() {
  // strict: a typo in a corpus schema is an error rather than an ignored keyword; ownProperties:
  // a property named like one of Object.prototype's (hasOwnProperty) is only the value's own
  const ajv = new Ajv2020({ strict: true, strictTypes: false, strictTuples: false, strictRequired: false, ownProperties: true });
  addFormats(ajv);
  return ajv;
}
const AJV = newAjv();

/** Python's json.dumps spacing: ", " and ": ". */
function spaced(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(spaced).join(', ') + ']';
  return '{' + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ': ' + spaced(x)).join(', ') + '}';
}

function deepFreeze(v) {
  if (v && typeof v === 'object') { Object.freeze(v); Object.values(v).forEach(deepFreeze); }
  return v;
}

const SAMPLES = 250;
const RECOGNIZED = 20;

// ---- the reference itself --------------------------------------------------------

test('reference: a multi-line arithmetic grammar with comments, recursion and classes', () => {
  const g = [
    '# arithmetic',
    'root ::= expr',
    'expr ::= term (("+" | "-") term)*   # sums',
    'term ::= factor (',
    '    ("*" | "/") factor',
    '  )*',
    'factor ::= num | "(" expr ")" | "-" factor',
    'num ::= [0-9]+ ("." [0-9]{1,3})?',
  ].join('\n');
  const r = new Recognizer(g);
  for (const s of ['1', '1+2*3', '(1+2)*3', '-(4.25/2)-1', '((1))']) assert.ok(r.accepts(s), s);
  for (const s of ['', '1+', '(1', '1.2345', '1..2', 'a', '1 + 2']) assert.ok(!r.accepts(s), s);
  const gen = new Generator(g, { seed: 3, maxDepth: 6 });
  const seen = new Set();
  for (let k = 0; k < 100; k++) {
    const s = gen.next();
    seen.add(s);
    assert.ok(r.accepts(s), s);
    assert.ok(!r.accepts(s + ')') && !r.accepts(s + '+'), s);
  }
  assert.ok(seen.size > 50 && [...seen].some((s) => s.includes('(')));
});

test('reference: escapes, negated classes, bounded repetition; left recursion is refused', () => {
  const r = new Recognizer('root ::= "\\"" [^"\\\\\\x00-\\x1F]{2,3} "\\u00e9\\U0001F600" [\\]\\[-]?\n');
  assert.ok(r.accepts('"abé😀'));
  assert.ok(r.accepts('"abcé😀]'));
  assert.ok(r.accepts('"中😀xé😀-'));
  assert.ok(!r.accepts('"aé😀'));
  assert.ok(!r.accepts('"abcdé😀'));
  assert.ok(!r.accepts('"a"bé😀'));
  assert.throws(() => new Recognizer('root ::= root "a" | "b"\n').accepts('ba'), /left recursion/);
  assert.throws(() => parseGbnf('root ::= missing\n'), /undefined rule/);
});

// ---- the corpus: soundness, examples, counter-examples ----------------------------------

test('corpus: at least 50 schemas, each valid / invalid example checked by ajv', () => {
  assert.ok(CORPUS.length >= 50, `${CORPUS.length} schemas`);
  for (const { name, schema, valid, invalid } of CORPUS) {
    const v = AJV.compile(schema);
    for (const x of valid) assert.ok(v(x), `${name}: ${JSON.stringify(x)} should be valid`);
    for (const x of invalid) assert.ok(!v(x), `${name}: ${JSON.stringify(x)} should be invalid`);
  }
});

for (const [index, entry] of CORPUS.entries()) {
  test(`corpus: ${entry.name}`, () => {
    const schema = deepFreeze(structuredClone(entry.schema)); // the converter must not touch its input
    const validate = AJV.compile(entry.schema);
    const text = jsonSchemaToGbnf(schema);
    const rec = new Recognizer(text);

    // (a) every generated string is JSON that validates
    const gen = new Generator(text, { seed: 1000 + index });
    const seen = new Set();
    for (let k = 0; k < SAMPLES; k++) {
      const s = gen.next();
      seen.add(s);
      let value;
      try { value = JSON.parse(s); } catch (e) { assert.fail(`not JSON: ${JSON.stringify(s)} (${e.message})`); }
      assert.ok(validate(value), `invalid output ${JSON.stringify(s)}: ${JSON.stringify(validate.errors)}`);
      if (k < RECOGNIZED) assert.ok(rec.accepts(s), `generated but not recognized: ${JSON.stringify(s)}`);
    }
    if (entry.valid.length > 1) assert.ok(seen.size > 1, 'the generator explored more than one string');

    // (b) the valid examples, compact, indented and Python-spaced (all within the whitespace policy)
    for (const x of entry.valid) {
      for (const s of [JSON.stringify(x), JSON.stringify(x, null, 2), JSON.stringify(x, null, '\t'), spaced(x)]) {
        assert.ok(rec.accepts(s), `valid example rejected: ${JSON.stringify(s)}`);
      }
    }
    // compact mode: the compact text only
    const compact = new Recognizer(jsonSchemaToGbnf(schema, { whitespace: 'compact' }));
    for (const x of entry.valid) {
      assert.ok(compact.accepts(JSON.stringify(x)), `compact: ${JSON.stringify(x)}`);
      if (spaced(x) !== JSON.stringify(x)) assert.ok(!compact.accepts(spaced(x)), `compact accepted spaces: ${spaced(x)}`);
    }

    // (c) the invalid examples are rejected however they are spaced
    for (const x of entry.invalid) {
      for (const s of [JSON.stringify(x), JSON.stringify(x, null, 2), spaced(x)]) assert.ok(!rec.accepts(s), `invalid example accepted: ${JSON.stringify(s)}`);
    }
  });
}

// ---- numbers ----------------------------------------------------------------------

function integerText(lo, hi) {
  const s = { type: 'integer' };
  if (lo !== null) s.minimum = lo;
  if (hi !== null) s.maximum = hi;
  return jsonSchemaToGbnf(s);
}

test('integers: every range within [-130, 130] accepts exactly its members, in canonical form', () => {
  const r = rng(5);
  const bounds = [null, -130, -101, -100, -99, -11, -10, -9, -1, 0, 1, 9, 10, 11, 99, 100, 101, 129];
  const cases = [];
  for (const lo of bounds) for (const hi of bounds) if (lo === null || hi === null || lo <= hi) cases.push([lo, hi]);
  for (let k = 0; k < 40; k++) { const a = Math.floor(r() * 261) - 130; const b = a + Math.floor(r() * (131 - a)); cases.push([a, b]); }
  for (const [lo, hi] of cases) {
    const rec = new Recognizer(integerText(lo, hi));
    for (let n = -200; n <= 200; n++) {
      const inside = (lo === null || n >= lo) && (hi === null || n <= hi);
      assert.equal(rec.accepts(String(n)), inside, `[${lo}, ${hi}] ${n}`);
    }
    for (const s of ['-0', '00', '01', '+1', '1.0', '1e1', '']) assert.ok(!rec.accepts(s), `[${lo}, ${hi}] ${s}`);
  }
});

test('integers: exclusive and fractional bounds, large bounds, and the digit limit of open ranges', () => {
  const r = new Recognizer(jsonSchemaToGbnf({ type: 'integer', exclusiveMinimum: 2.5, exclusiveMaximum: 7 }));
  assert.deepEqual([2, 3, 6, 7].map((n) => r.accepts(String(n))), [false, true, true, false]);
  const big = new Recognizer(integerText(123456789012, 123456789999));
  for (const s of ['123456789012', '123456789500', '123456789999']) assert.ok(big.accepts(s), s);
  for (const s of ['123456789011', '123456790000', '12345678901']) assert.ok(!big.accepts(s), s);
  const open = new Recognizer(jsonSchemaToGbnf({ type: 'integer' }));
  assert.ok(open.accepts('9'.repeat(16)) && open.accepts('-' + '9'.repeat(16)));
  assert.ok(!open.accepts('1' + '0'.repeat(16)), 'an open range stops at 16 digits');
  const above = new Recognizer(integerText(10 ** 17, null));
  assert.ok(above.accepts(String(10 ** 17)) && above.accepts('999999999999999999') && !above.accepts('1' + '0'.repeat(18)));
});

test('numbers with integer bounds: random decimals accepted exactly when inside', () => {
  const r = rng(9);
  const ranges = [[0, 1, false, false], [-5, 5, true, true], [0, 100, true, false], [-3, null, false, false], [null, 0, false, true],
    [-1, 0, false, false], [-2, -1, true, true], [10, 12, false, true]];
  for (const [lo, hi, loEx, hiEx] of ranges) {
    const s = { type: 'number' };
    if (lo !== null) s[loEx ? 'exclusiveMinimum' : 'minimum'] = lo;
    if (hi !== null) s[hiEx ? 'exclusiveMaximum' : 'maximum'] = hi;
    const v = AJV.compile(s);
    const rec = new Recognizer(jsonSchemaToGbnf(s));
    const texts = [];
    for (let k = 0; k < 300; k++) {
      const whole = Math.floor(r() * 16) - 8;
      const frac = r() < 0.3 ? '' : '.' + String(Math.floor(r() * 1000)).padStart(1 + Math.floor(r() * 3), '0');
      texts.push(`${whole}${frac}`);
    }
    texts.push('0', '-0.5', '0.0', '1.000', '-1.000', '-0.000', '12', '-2.0001');
    for (const t of texts) {
      const accepted = rec.accepts(t);
      if (accepted) assert.ok(v(JSON.parse(t)), `${JSON.stringify(s)} accepted ${t}`);
      // every canonical decimal inside the range is accepted (not "-0", no exponent)
      else if (v(JSON.parse(t)) && !/^-0(\.0*)?$/.test(t)) assert.fail(`${JSON.stringify(s)} rejected ${t}`);
    }
  }
  assert.throws(() => jsonSchemaToGbnf({ type: 'number', minimum: 0.5 }), (e) => e.code === 'BAD_SCHEMA' && e.path === '/minimum');
});

// ---- formats -----------------------------------------------------------------------

test('formats: date accepts exactly the calendar dates ajv-formats accepts (leap years included)', () => {
  const rec = new Recognizer(jsonSchemaToGbnf({ type: 'string', format: 'date' }));
  const v = AJV.compile({ type: 'string', format: 'date' });
  let checked = 0;
  for (const y of ['0000', '1900', '1996', '1999', '2000', '2023', '2024', '2100', '2400', '9999']) {
    for (let m = 0; m <= 13; m++) {
      for (let d = 0; d <= 32; d++) {
        const s = `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
        assert.equal(rec.accepts(JSON.stringify(s)), v(s), s);
        checked++;
      }
    }
  }
  assert.equal(checked, 10 * 14 * 33);
});

test('formats: time, date-time, uuid and email outputs validate; common forms are accepted', () => {
  for (const [format, good, bad] of [
    ['time', ['09:05:00Z', '23:59:59.123456789-11:30', '00:00:00+00:00'], ['23:59:60Z', '9:05:00Z', '09:05Z', '09:05:00z']],
    ['date-time', ['1970-01-01T00:00:00Z', '2024-02-29T08:00:00.5+05:45'], ['1970-01-01t00:00:00Z', '1970-01-01T00:00:00']],
    ['uuid', ['f81d4fae-7dec-11d0-a765-00a0c91e6bf6'], ['F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6', 'urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6']],
    ['email', ['john.doe@example.com', 'x@a-b.c', 'user+mailbox/department=shipping@example.com'], ['john@example..com', 'john@.com', 'jo hn@x.io']],
  ]) {
    const schema = { type: 'string', format };
    const v = AJV.compile(schema);
    const text = jsonSchemaToGbnf(schema);
    const rec = new Recognizer(text);
    for (const s of good) assert.ok(rec.accepts(JSON.stringify(s)) && v(s), `${format} ${s}`);
    // rejected here; some (upper-case uuids, lower-case t/z, urn:uuid:) are valid for ajv but outside the grammar's subset
    for (const s of bad) assert.ok(!rec.accepts(JSON.stringify(s)), `${format} ${s}`);
    const gen = new Generator(text, { seed: 77 });
    for (let k = 0; k < 300; k++) { const s = JSON.parse(gen.next()); assert.ok(v(s), `${format}: ${s}`); }
  }
  assert.deepEqual(Object.keys(FORMATS).sort(), ['date', 'date-time', 'email', 'time', 'uuid']);
});

// ---- patterns ----------------------------------------------------------------------

test('patterns: the grammar accepts exactly what RegExp(pattern, "u").test accepts (differential)', () => {
  const patterns = ['^abc$', 'abc', '^a|b$', '^(a|bc)*d?$', '^[^a-c]{2,3}$', '^\\d+(\\.\\d{1,2})?$', '^\\w\\W\\s\\S$', '^.{0,3}$',
    '^[\\u00e0-\\u00ff]+$', '^😀+$', '^[😀-🙏]$', '^(?:x|y){2}$', '^(?<n>ab)+$', '^a+?b*?$', '^\\\\"$', '^[\\-\\]\\[]$', '^\\x41\\u{1F600}\\t$',
    'b{2,}', '^$', '^\\cJ$', '[^]', '^[^]$', '(a|)', '^\\u0000$', '^[\\s\\d]$', '^\\/\\.\\*\\+\\?\\(\\)\\{\\}\\|\\^\\$$'];
  const alphabet = ['a', 'b', 'c', 'd', 'x', 'y', '0', '7', '.', ' ', '\t', '\n', '"', '\\', '-', '[', ']', 'é', 'ÿ', '😀', '🙏', '\u0000', 'A', '_', '/'];
  const r = rng(11);
  for (const p of patterns) {
    const re = new RegExp(p, 'u');
    const text = jsonSchemaToGbnf({ type: 'string', pattern: p });
    const rec = new Recognizer(text);
    const strings = new Set(['']);
    for (let k = 0; k < 300; k++) {
      let s = '';
      const n = Math.floor(r() * 6);
      for (let j = 0; j < n; j++) s += alphabet[Math.floor(r() * alphabet.length)];
      strings.add(s);
    }
    const gen = new Generator(text, { seed: 12 });
    for (let k = 0; k < 100; k++) strings.add(JSON.parse(gen.next()));
    for (const s of strings) assert.equal(rec.accepts(JSON.stringify(s)), re.test(s), `${p} on ${JSON.stringify(s)}`);
  }
});

test('patterns: unsupported constructs are refused, naming the construct', () => {
  for (const [p, what] of [['(?=a)b', /lookaround/], ['(?<!a)b', /lookaround/], ['\\bword', /word boundary/], ['(a)\\1', /backreference/],
    ['a^b', /anchor \^/], ['x(^a)', /anchor \^/], ['(^a|b)c', /anchor \^/], ['\\p{L}', /property escape/], ['[', /not a valid regular expression/], ['^a$b', /anchor \$/]]) {
    assert.throws(() => jsonSchemaToGbnf({ type: 'string', pattern: p }), (e) => e.code === 'BAD_SCHEMA' && e.keyword === 'pattern' &&
      e.path === '/pattern' && what.test(e.message), p);
  }
});

test('patterns with minLength / maxLength: one repeated class is bounded; other shapes are refused', () => {
  const ok = { type: 'string', pattern: '^[A-Z]{2}-\\d+$', minLength: 5, maxLength: 7 };
  const rec = new Recognizer(jsonSchemaToGbnf(ok));
  const v = AJV.compile(ok);
  for (const s of ['AB-1', 'AB-12', 'AB-1234', 'AB-12345', 'ab-12']) assert.equal(rec.accepts(JSON.stringify(s)), v(s), s);
  assert.throws(() => jsonSchemaToGbnf({ type: 'string', pattern: '^(ab|c)+$', maxLength: 4 }), (e) => e.code === 'BAD_SCHEMA' && e.path === '/pattern');
  assert.throws(() => jsonSchemaToGbnf({ type: 'string', pattern: 'x', maxLength: 4 }), (e) => e.code === 'BAD_SCHEMA' && /anchored/.test(e.message));
  // an alternative whose lengths all fall outside is dropped
  const alt2 = new Recognizer(jsonSchemaToGbnf({ type: 'string', pattern: '^(?:abc|x)$', maxLength: 2 }));
  assert.ok(alt2.accepts('"x"') && !alt2.accepts('"abc"'));
});

// ---- whitespace, order, extras ------------------------------------------------------

test('whitespace: bounded (one space, or a newline and up to maxIndent spaces/tabs), only after { [ , : and before } ]', () => {
  const schema = { type: 'object', properties: { a: { type: 'array', items: { type: 'integer' } } }, required: ['a'] };
  const rec = new Recognizer(jsonSchemaToGbnf(schema));
  assert.ok(rec.accepts('{"a":[1,2]}'));
  assert.ok(rec.accepts('{ "a": [ 1, 2 ] }'));
  assert.ok(rec.accepts('{\n' + ' '.repeat(24) + '"a":\n\t[1,\n2\n]\n}'));
  for (const s of ['{\n' + ' '.repeat(25) + '"a":[1]}', '{"a":  [1]}', '{"a" :[1]}', '{"a":[1 ,2]}', ' {"a":[1]}', '{"a":[1]} ', '{\r\n"a":[1]}', '{\n\n"a":[1]}']) {
    assert.ok(!rec.accepts(s), JSON.stringify(s));
  }
  const narrow = new Recognizer(jsonSchemaToGbnf(schema, { maxIndent: 2 }));
  assert.ok(narrow.accepts('{\n  "a":[1]}') && !narrow.accepts('{\n   "a":[1]}'));
  const compact = new Recognizer(jsonSchemaToGbnf(schema, { whitespace: 'compact' }));
  assert.ok(compact.accepts('{"a":[1,2]}') && !compact.accepts('{"a": [1,2]}') && !compact.accepts('{"a":[1, 2]}'));
  assert.doesNotMatch(jsonSchemaToGbnf(schema, { whitespace: 'compact' }), /\bws\b/);
});

test('property order is the schema\'s; extra properties only where the schema allows them, after the declared ones', () => {
  const schema = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] };
  const v = AJV.compile(schema);
  const rec = new Recognizer(jsonSchemaToGbnf(schema));
  assert.ok(rec.accepts('{"a":1,"b":2}'));
  // valid JSON Schema instances outside the policy: another order, an extra property (additionalProperties absent)
  for (const s of ['{"b":2,"a":1}', '{"a":1,"b":2,"c":3}']) { assert.ok(v(JSON.parse(s))); assert.ok(!rec.accepts(s), s); }
  const open = new Recognizer(jsonSchemaToGbnf({ ...schema, additionalProperties: true }));
  assert.ok(open.accepts('{"a":1,"b":2,"c":3}') && !open.accepts('{"c":3,"a":1,"b":2}') && !open.accepts('{"a":1,"b":2,"a":3}'));
  // an extra key never repeats a declared name, whatever the prefix
  const typed = new Recognizer(jsonSchemaToGbnf({ ...schema, additionalProperties: { type: 'string' } }));
  for (const k of ['b', 'a']) assert.ok(!typed.accepts(`{"a":1,"b":2,"${k}":"x"}`), k);
  for (const k of ['', 'ab', 'ba', 'c', 'A', 'a\\n']) assert.ok(typed.accepts(`{"a":1,"b":2,"${k}":"x"}`), k);
});

test('strings: every JSON escape is accepted, one unit per code point; lone surrogate escapes are not', () => {
  const rec = new Recognizer(jsonSchemaToGbnf({ type: 'string', minLength: 2, maxLength: 2 }));
  for (const s of ['"\\u00e9\\uD83D\\uDE00"', '"\\/\\b"', '"😀é"', '"\\"\\\\"', '"\\u0041\\n"']) assert.ok(rec.accepts(s), s);
  for (const s of ['"\\uD83D\\uDE00"', '"\\uD83Dx"', '"\\uDE00\\uD83D"', '"a\nb"', '"\\x41b"', '"\\u12"']) assert.ok(!rec.accepts(s), s);
});

// ---- plain JSON mode -----------------------------------------------------------------

test('json mode: any JSON value / any JSON object; invalid JSON rejected', () => {
  const JSON_VALUE_GBNF = jsonGrammar();
  const JSON_OBJECT_GBNF = jsonGrammar({ object: true });
  assert.equal(JSON_VALUE_GBNF, jsonSchemaToGbnf({}));
  assert.equal(JSON_OBJECT_GBNF, jsonSchemaToGbnf({ type: 'object' }));
  const anyValue = new Recognizer(JSON_VALUE_GBNF);
  const anyObject = new Recognizer(JSON_OBJECT_GBNF);
  const r = rng(21);
  const randomValue = (d) => {
    const k = Math.floor(r() * (d > 3 ? 4 : 6));
    if (k === 0) return null;
    if (k === 1) return r() < 0.5;
    if (k === 2) return Math.round((r() - 0.5) * 10 ** Math.floor(r() * 12)) / (r() < 0.5 ? 1 : 1000);
    if (k === 3) return ['', 'plain', 'quote"back\\slash', 'ctl\u0001\u001f', 'ünï 中 😀', '\u2028'][Math.floor(r() * 6)];
    if (k === 4) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(d + 1));
    return Object.fromEntries(Array.from({ length: Math.floor(r() * 4) }, (_, i) => [`k${i}${'é'.repeat(i)}`, randomValue(d + 1)]));
  };
  for (let k = 0; k < 200; k++) {
    const x = randomValue(0);
    for (const s of [JSON.stringify(x), JSON.stringify(x, null, 2), spaced(x)]) {
      assert.ok(anyValue.accepts(s), s);
      assert.equal(anyObject.accepts(s), x !== null && typeof x === 'object' && !Array.isArray(x), s);
    }
  }
  for (const s of ['{"a":1,}', '[1,]', "{'a':1}", 'NaN', 'Infinity', '01', '1.', '.5', '+1', '"\\x41"', '"a\nb"', '{"a"}', '[1 2]', 'nul', 'True', '']) {
    assert.ok(!anyValue.accepts(s), JSON.stringify(s));
  }
  for (const text of [JSON_VALUE_GBNF, JSON_OBJECT_GBNF]) {
    const gen = new Generator(text, { seed: 4 });
    for (let k = 0; k < 200; k++) JSON.parse(gen.next());
  }
  const compact = jsonGrammar({ whitespace: 'compact' });
  assert.ok(new Recognizer(compact).accepts('{"a":[1,{"b":null}]}') && !new Recognizer(compact).accepts('{"a": 1}'));
});

// ---- the GBNF text -----------------------------------------------------------------------

test('GBNF text: one ASCII rule per line, names of [a-z0-9-], root first, every rule reached and productive', () => {
  for (const { schema } of CORPUS) {
    const text = jsonSchemaToGbnf(schema);
    assert.match(text, /^[\x20-\x7e\n]*$/);
    const lines = text.trimEnd().split('\n');
    assert.match(lines[0], /^root ::= /);
    for (const l of lines) assert.match(l, /^[a-z][a-z0-9-]* ::= \S/);
    const { rules } = parseGbnf(text);
    assert.equal(rules.size, lines.length);
    // no empty literal, no `.` (docs/json-schema.md: the GBNF it writes)
    const walk = (e) => {
      assert.ok(!(e.type === 'lit' && e.cps.length === 0) && e.type !== 'any', text);
      if (e.type === 'seq' || e.type === 'alt') e.items.forEach(walk);
      if (e.type === 'rep') walk(e.e);
    };
    rules.forEach(walk);
    // every rule can finish (no dead ends a sampler could walk into)
    const gen = new Generator(text);
    for (const name of rules.keys()) assert.ok(gen.height.get(name) < Infinity, name);
  }
});

// ---- errors ----------------------------------------------------------------------------------

function schemaError(schema, path, keyword, message) {
  assert.throws(() => jsonSchemaToGbnf(schema), (e) => {
    assert.ok(e instanceof WasmlmError);
    assert.equal(e.code, 'BAD_SCHEMA');
    assert.equal(e.path, path);
    assert.equal(e.keyword, keyword);
    assert.ok(e.message.includes(path === '' ? 'the root' : path), e.message);
    if (keyword) assert.ok(e.message.includes(`"${keyword}"`), e.message);
    if (message) assert.match(e.message, message);
    return true;
  });
}

test('errors: an unsupported keyword names itself and its JSON Pointer, at any depth', () => {
  schemaError({ type: 'object', minProperties: 1 }, '/minProperties', 'minProperties', /not supported/);
  schemaError({ type: 'number', multipleOf: 2 }, '/multipleOf', 'multipleOf');
  schemaError({ type: 'object', properties: { a: { type: 'object', properties: { b: { not: { type: 'null' } } } } } }, '/properties/a/properties/b/not', 'not');
  schemaError({ type: 'array', items: { type: 'array', contains: { type: 'integer' } } }, '/items/contains', 'contains');
  schemaError({ anyOf: [{ type: 'string' }, { type: 'object', patternProperties: { '^x': {} } }] }, '/anyOf/1/patternProperties', 'patternProperties');
  schemaError({ type: 'array', prefixItems: [{ type: 'string' }, { type: 'string', uniqueItems: true }] }, '/prefixItems/1/uniqueItems', 'uniqueItems');
  schemaError({ $defs: { x: { if: { type: 'string' } } }, $ref: '#/$defs/x' }, '/$defs/x/if', 'if');
  schemaError({ definitions: { 'a/b~c': { dependentRequired: {} } }, $ref: '#/definitions/a~1b~0c' }, '/definitions/a~1b~0c/dependentRequired', 'dependentRequired');
  schemaError({ properties: { 'odd/name': { 'x-vendor': 1 } } }, '/properties/odd~1name/x-vendor', 'x-vendor');
  schemaError({ allOf: [{ type: 'object' }, { unevaluatedProperties: false }] }, '/allOf/1/unevaluatedProperties', 'unevaluatedProperties');
  schemaError({ type: 'string', format: 'uri' }, '/format', 'format', /"uri" is not supported \(supported: date, time, date-time, uuid, email\)/);
  schemaError({ type: 'array', items: [{ type: 'string' }] }, '/items', 'items', /prefixItems/);
  schemaError({ type: 'number', exclusiveMinimum: true, minimum: 0 }, '/exclusiveMinimum', 'exclusiveMinimum', /draft-04/);
  schemaError({ type: 'float' }, '/type', 'type');
  schemaError({ $ref: 'other.json#/x' }, '/$ref', '$ref', /only references inside the schema/);
  schemaError({ $ref: '#/$defs/missing' }, '/$ref', '$ref', /does not resolve/);
  schemaError({ $ref: '#node' }, '/$ref', '$ref', /anchors/);
  schemaError({ oneOf: [{ type: 'string' }], anyOf: [{ type: 'string' }] }, '/oneOf', 'oneOf');
  schemaError({ enum: ['a', 'b'], properties: { a: {} } }, '/properties', 'properties', /beside enum/);
  schemaError({ enum: ['a', 'b'], format: 'hostname' }, '/format', 'format', /not supported/);
  schemaError({ type: 'string', pattern: '^a$', format: 'date' }, '/pattern', 'pattern');
  // inside anyOf / oneOf branches joined with their siblings, and allOf branches
  schemaError({ type: 'object', oneOf: [{ properties: { a: { const: 1 } }, required: ['a'] }, { minProperties: 1 }] }, '/oneOf/1/minProperties', 'minProperties');
  schemaError({ type: 'object', anyOf: [{ properties: { a: { not: {} } } }] }, '/anyOf/0/properties/a/not', 'not');
  schemaError({ allOf: [{ type: 'object' }, { properties: { b: { type: 'string', contentEncoding: 'base64' } } }] }, '/allOf/1/properties/b/contentEncoding', 'contentEncoding');
  schemaError('{"type":"string"}', '', null, /must be an object or a boolean/);
  // unused definitions do not constrain the output and are not read
  assert.doesNotThrow(() => jsonSchemaToGbnf({ $defs: { unused: { not: {} } }, type: 'string' }));
});

test('errors: schemas no value satisfies are refused, naming where', () => {
  schemaError({ type: 'integer', minimum: 5, maximum: 3 }, '/minimum', 'minimum', /no integer/);
  schemaError({ type: 'integer', exclusiveMinimum: 3, exclusiveMaximum: 4 }, '/exclusiveMinimum', 'exclusiveMinimum');
  schemaError({ type: 'string', minLength: 4, maxLength: 2 }, '/minLength', 'minLength');
  schemaError({ type: 'array', minItems: 3, maxItems: 2 }, '/minItems', 'minItems');
  schemaError({ type: 'array', prefixItems: [{ type: 'string' }], items: false, minItems: 2 }, '/minItems', 'minItems');
  schemaError({ properties: { a: false }, required: ['a'] }, '/required', 'required');
  schemaError({ properties: {}, required: ['a'], additionalProperties: false }, '/required', 'required');
  schemaError({ type: 'integer', enum: ['a', 'b'] }, '/enum', 'enum');
  schemaError({ enum: ['abc', 5], maxLength: 2, minimum: 6 }, '/enum', 'enum');
  schemaError({ allOf: [{ type: 'string' }, { type: 'integer' }] }, '/allOf', 'allOf', /no common type/);
  schemaError({ allOf: [{ properties: { a: { type: 'string' } }, additionalProperties: false }, { required: ['b'] }] }, '/allOf', 'allOf', /forbidden/);
  schemaError({ $defs: { n: { type: 'object', properties: { next: { $ref: '#/$defs/n' } }, required: ['next'] } }, $ref: '#/$defs/n' }, '', null, /\/\$defs\/n.*infinitely deep/);
  schemaError({ $ref: '#' }, '', null, /no finite JSON value/);
  schemaError({ type: 'object', properties: { a: { $ref: '#', required: ['a'] } }, required: ['a'] }, '', null, /no finite JSON value/);
  schemaError({ allOf: [{ $ref: '#' }] }, '/allOf/0/$ref', '$ref', /lead back/);
  schemaError({ $defs: { a: { allOf: [{ $ref: '#/$defs/b' }] }, b: { $ref: '#/$defs/a', type: 'string' } }, $ref: '#/$defs/a', type: 'string' }, '/$defs/b/$ref', '$ref', /lead back/);
  schemaError(false, '', null, /no finite JSON value/);
});

test('recursion through a $ref with sibling keywords, and through allOf, ends (regression: it expanded forever)', () => {
  for (const schema of [
    { $defs: { d: { type: 'object', properties: { x: { type: 'integer' }, more: { $ref: '#/$defs/d', required: ['x'] } } } }, $ref: '#/$defs/d' },
    { $defs: { a: { type: 'object', properties: { p: { $ref: '#/$defs/x' } } }, x: { allOf: [{ $ref: '#/$defs/a' }, { properties: { p: { type: 'object' }, n: { type: 'null' } } }] } }, $ref: '#/$defs/x' },
  ]) {
    const text = jsonSchemaToGbnf(schema);
    const v = AJV.compile(schema);
    const gen = new Generator(text, { seed: 2 });
    for (let k = 0; k < 100; k++) { const s = gen.next(); assert.ok(v(JSON.parse(s)), s); }
  }
});

test('$defs named like the built-in rules (string, value, ws, ...) keep their own rules (regression)', () => {
  const schema = {
    $defs: { string: { type: 'integer', minimum: 7 }, value: { const: 'v' }, ws: { type: 'null' }, char: { enum: [1] }, number: { type: 'boolean' } },
    type: 'object',
    properties: { a: { $ref: '#/$defs/string' }, v: { $ref: '#/$defs/value' }, w: { $ref: '#/$defs/ws' }, c: { $ref: '#/$defs/char' },
      n: { $ref: '#/$defs/number' }, b: { type: 'string' }, x: {}, y: { type: 'number' } },
    required: ['a', 'v', 'w', 'c', 'n', 'b', 'x', 'y'],
  };
  const v = AJV.compile(schema);
  const text = jsonSchemaToGbnf(schema);
  const rec = new Recognizer(text);
  assert.ok(rec.accepts('{"a":7,"v":"v","w":null,"c":1,"n":true,"b":"s","x":[1],"y":1.5}'));
  assert.ok(!rec.accepts('{"a":"s","v":"v","w":null,"c":1,"n":true,"b":"s","x":[1],"y":1.5}'));
  const gen = new Generator(text, { seed: 5 });
  for (let k = 0; k < 100; k++) { const s = gen.next(); assert.ok(v(JSON.parse(s)), s); }
});

test('property and format names of Object.prototype (constructor, toString, __proto__) are ordinary names (regression)', () => {
  for (const schema of [
    { type: 'object', properties: { a: { type: 'integer' } }, required: ['a', 'constructor'] },
    { type: 'object', properties: { toString: { type: 'string' }, ['__proto__']: { type: 'integer' } }, required: ['toString', '__proto__'] },
    { allOf: [{ type: 'object', properties: { constructor: { type: 'integer' } }, required: ['constructor'] }, { properties: { hasOwnProperty: { type: 'null' } }, additionalProperties: { type: 'integer' } }] },
    { oneOf: [{ type: 'object', properties: { valueOf: { const: 1 } }, required: ['valueOf'] }, { type: 'object', properties: { valueOf: { const: 2 } }, required: ['valueOf'] }] },
  ]) {
    const json = JSON.parse(JSON.stringify(schema)); // __proto__ as an own key, as JSON.parse makes it
    const v = AJV.compile(json);
    const text = jsonSchemaToGbnf(json);
    const gen = new Generator(text, { seed: 6 });
    for (let k = 0; k < 100; k++) { const s = gen.next(); assert.ok(v(JSON.parse(s)), `${JSON.stringify(json)}: ${s}`); }
  }
  // a merged "__proto__" property (ajv itself mishandles "__proto__" beside additionalProperties: checked by hand)
  const proto = new Recognizer(jsonSchemaToGbnf(JSON.parse('{"allOf":[{"properties":{"__proto__":{"type":"integer"}},"required":["__proto__"]},' +
    '{"properties":{"__proto__":{"minimum":3}},"additionalProperties":false}]}')));
  assert.ok(proto.accepts('{"__proto__":7}') && !proto.accepts('{"__proto__":2}') && !proto.accepts('{}') && !proto.accepts('{"__proto__":7.5}'));
  const protoExtra = new Recognizer(jsonSchemaToGbnf(JSON.parse('{"allOf":[{"properties":{"a":{"type":"null"}},"additionalProperties":{"type":"integer","maximum":2}},' +
    '{"properties":{"__proto__":{"minimum":1}},"required":["__proto__"]}]}')));
  assert.ok(protoExtra.accepts('{"__proto__":2}') && !protoExtra.accepts('{"__proto__":3}') && !protoExtra.accepts('{"__proto__":0}') && !protoExtra.accepts('{"a":null}'));
  schemaError({ type: 'string', format: 'constructor' }, '/format', 'format', /not supported/);
  schemaError({ enum: ['a'], format: 'toString' }, '/format', 'format', /not supported/);
});

test('recursion with a way out keeps only the finite alternatives', () => {
  // the self-referencing branch of the anyOf can never finish; the other one remains
  const text = jsonSchemaToGbnf({ $defs: { loop: { type: 'array', items: { $ref: '#/$defs/loop' }, minItems: 1 } }, anyOf: [{ $ref: '#/$defs/loop' }, { type: 'null' }] });
  assert.ok(new Recognizer(text).accepts('null'));
  assert.doesNotMatch(text, /loop/);
});

test('oneOf: overlapping branches are refused; provably disjoint ones are kept and their outputs validate', () => {
  for (const schema of [
    { oneOf: [{ type: 'integer' }, { type: 'number' }] },
    { oneOf: [{ type: 'string' }, { type: 'string', maxLength: 3 }] },
    { oneOf: [{ type: 'object', properties: { a: { type: 'string' } } }, { type: 'object', properties: { b: { type: 'string' } } }] },
    { oneOf: [{ type: 'object', properties: { t: { enum: ['a', 'b'] } }, required: ['t'] }, { type: 'object', properties: { t: { enum: ['b', 'c'] } }, required: ['t'] }] },
    { oneOf: [{ type: 'integer', maximum: 10 }, { type: 'integer', minimum: 10 }] },
    { oneOf: [{ enum: ['x', 1] }, { type: 'integer' }] },
    { oneOf: [{}, { type: 'null' }] },
    { properties: { v: { oneOf: [{ type: 'array' }, { type: 'array', maxItems: 1 }] } } },
  ]) {
    assert.throws(() => jsonSchemaToGbnf(schema), (e) => e.code === 'BAD_SCHEMA' && e.keyword === 'oneOf' && /may both match/.test(e.message), JSON.stringify(schema));
  }
  for (const schema of [
    { oneOf: [{ type: 'integer', maximum: 9 }, { type: 'integer', exclusiveMinimum: 9 }] },
    { oneOf: [{ type: 'string', maxLength: 2 }, { type: 'string', minLength: 3 }] },
    { oneOf: [{ type: 'array', maxItems: 1 }, { type: 'array', minItems: 2 }] },
    { oneOf: [{ type: 'string', format: 'date' }, { type: 'string', format: 'uuid' }] },
    { oneOf: [{ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, { type: 'object', properties: { b: { type: 'string' } }, required: ['b'], additionalProperties: false }] },
    { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'], oneOf: [{ properties: { kind: { const: 1 } }, required: ['kind'] }, { properties: { kind: { const: 2 } }, required: ['kind'] }] },
    { oneOf: [{ type: 'array', prefixItems: [{ const: 'a' }], minItems: 1 }, { type: 'array', prefixItems: [{ const: 'b' }], minItems: 1 }] },
  ]) {
    const v = AJV.compile(schema);
    const text = jsonSchemaToGbnf(schema);
    const gen = new Generator(text, { seed: 8 });
    for (let k = 0; k < 200; k++) { const s = gen.next(); assert.ok(v(JSON.parse(s)), `${JSON.stringify(schema)}: ${s}`); }
  }
});

// ---- random schemas --------------------------------------------------------------------

/** A random schema of supported keywords (and random combinations of them), with $defs that may recurse. */
function randomSchema(r) {
  const pick = (a) => a[Math.floor(r() * a.length)];
  const chance = (p) => r() < p;
  const int = (a, b) => a + Math.floor(r() * (b - a + 1));
  const NAMES = ['a', 'b', 'ab', 'c', 'kind'];
  const value = () => pick([null, true, int(-5, 5), 2.5, 'x', 'y', 'ab', '', 'é "q"', [int(0, 2)], { a: int(0, 1) }]);
  function schema(d) {
    const s = {};
    switch (int(0, d > 2 ? 7 : 13)) {
      case 0:
        s.type = 'string';
        if (chance(0.3)) s.pattern = pick(['^a+$', 'b', '^[a-c]{1,3}$', '^x|y$', '^"\\d*$', '^(?:ab|é)*$']);
        else if (chance(0.2)) s.format = pick(['date', 'uuid', 'email', 'time', 'date-time']);
        else {
          if (chance(0.4)) s.minLength = int(0, 3);
          if (chance(0.4)) s.maxLength = int(s.minLength ?? 0, 6);
        }
        break;
      case 1:
        s.type = 'integer';
        if (chance(0.5)) s[pick(['minimum', 'exclusiveMinimum'])] = int(-20, 5);
        if (chance(0.5)) s[pick(['maximum', 'exclusiveMaximum'])] = int(6, 30);
        break;
      case 2:
        s.type = 'number';
        if (chance(0.5)) s[pick(['minimum', 'exclusiveMinimum'])] = int(-3, 1);
        if (chance(0.5)) s[pick(['maximum', 'exclusiveMaximum'])] = int(2, 4);
        break;
      case 3: s.type = pick(['boolean', 'null', ['boolean', 'null'], ['string', 'integer'], ['number', 'array']]); break;
      case 4: s.enum = Array.from({ length: int(1, 4) }, value); if (chance(0.3)) s.type = pick(['string', 'integer', 'object']); break;
      case 5: s.const = value(); break;
      case 6: return pick([true, {}, { $ref: '#/$defs/d0' }, { $ref: '#/$defs/d1' }]);
      case 7: return { $ref: pick(['#/$defs/d0', '#/$defs/d1']), ...(chance(0.5) ? { type: 'object', required: [pick(NAMES)] } : {}) };
      case 8: case 9:
        if (chance(0.8)) s.type = 'object';
        s.properties = {};
        for (const n of NAMES) if (chance(0.4)) s.properties[n] = schema(d + 1);
        if (chance(0.7)) s.required = NAMES.filter(() => chance(0.3));
        if (chance(0.4)) s.additionalProperties = pick([true, false, { type: 'integer' }, schema(d + 1)]);
        break;
      case 10:
        s.type = 'array';
        if (chance(0.7)) s.items = schema(d + 1);
        if (chance(0.3)) s.prefixItems = [schema(d + 1)];
        if (chance(0.4)) s.minItems = int(0, 2);
        if (chance(0.4)) s.maxItems = int(s.minItems ?? 0, 3);
        break;
      case 11: case 12:
        s[pick(['anyOf', 'oneOf'])] = Array.from({ length: int(2, 3) }, () => schema(d + 1));
        if (chance(0.3)) s.type = pick(['object', 'string', 'integer']);
        break;
      case 13: s.allOf = Array.from({ length: int(2, 3) }, () => schema(d + 1)); break;
    }
    return s;
  }
  // d0 may recurse into itself; d1 does so only through optional places
  return { $defs: { d0: schema(1), d1: { type: 'object', properties: { v: schema(2), next: { $ref: '#/$defs/d1' } }, required: ['v'] } }, ...schema(0) };
}

// a longer hunt: WLM_SCHEMA_FUZZ=SEED:COUNT node --test tests/js/json-schema.test.mjs
const [FUZZ_SEED, FUZZ_COUNT] = (process.env.WLM_SCHEMA_FUZZ || '2024:250').split(':').map(Number);

test('random schemas (seeded): every output of an accepted schema validates; the others are BAD_SCHEMA errors', () => {
  const r = rng(FUZZ_SEED);
  let accepted = 0;
  for (let i = 0; i < FUZZ_COUNT; i++) {
    const schema = randomSchema(r);
    let text;
    try { text = jsonSchemaToGbnf(schema); } catch (e) {
      assert.equal(e.code, 'BAD_SCHEMA', `${JSON.stringify(schema)}: ${e.stack}`);
      continue;
    }
    let validate;
    // ajv overflows its stack on $ref cycles that make no progress (d0: {$ref: d0}, or d0: {anyOf: [{$ref: d0}, ...]}
    // checked against the same value): such schemas cannot be checked here
    const ajvLimit = (e) => { if (!(e instanceof RangeError)) throw e; };
    try { validate = AJV.compile(schema); validate(null); } catch (e) { ajvLimit(e); continue; }
    accepted++;
    const gen = new Generator(text, { seed: i, maxDepth: 8 });
    for (let k = 0; k < 20; k++) {
      const s = gen.next();
      let ok;
      try { ok = validate(JSON.parse(s)); } catch (e) { ajvLimit(e); break; }
      assert.ok(ok, `${JSON.stringify(schema)}\n${s}\n${JSON.stringify(validate.errors)}`);
    }
  }
  assert.ok(accepted > FUZZ_COUNT / 2, `${accepted} of ${FUZZ_COUNT} random schemas converted`);
});

test('numbers near exclusive bounds: no numeral parses onto the bound (15 significant digits); exclusive bounds past 2^53 refused', () => {
  const schema = { type: 'number', exclusiveMinimum: 1, exclusiveMaximum: 2 };
  const rec = new Recognizer(jsonSchemaToGbnf(schema));
  // regression: these are inside (1, 2) as decimals but JSON.parse rounds them to 1 and 2
  for (const t of ['1.0000000000000001', '1.99999999999999999', '1.000000000000000', '1']) assert.ok(!rec.accepts(t), t);
  for (const t of ['1.5', '1.00000000000001', '1.99999999999999']) assert.ok(rec.accepts(t), t);
  const v = AJV.compile(schema);
  const gen = new Generator(jsonSchemaToGbnf(schema), { seed: 3, maxRepeat: 20 });
  for (let k = 0; k < 500; k++) { const t = gen.next(); assert.ok(v(JSON.parse(t)), t); }
  const big = new Recognizer(jsonSchemaToGbnf({ type: 'number', exclusiveMinimum: 0 }));
  assert.ok(big.accepts('123456789012345') && !big.accepts('123456789012345.5') && big.accepts('12345678901234.5') && !big.accepts('12345678901234.55'));
  for (const s of [{ type: 'integer', exclusiveMaximum: 2 ** 60 }, { type: 'number', exclusiveMinimum: -(2 ** 54) }]) {
    assert.throws(() => jsonSchemaToGbnf(s), (e) => e.code === 'BAD_SCHEMA' && /2\^53/.test(e.message), JSON.stringify(s));
  }
  assert.doesNotThrow(() => jsonSchemaToGbnf({ type: 'integer', maximum: 2 ** 60 }));
});

test('options: unknown or out-of-range options are BAD_OPTION', () => {
  for (const opts of [{ whitespace: 'pretty' }, { maxIndent: -1 }, { maxIndent: 1.5 }, { indent: 2 }, 'compact']) {
    assert.throws(() => jsonSchemaToGbnf({}, opts), (e) => e.code === 'BAD_OPTION', JSON.stringify(opts));
    assert.throws(() => jsonGrammar(opts), (e) => e.code === 'BAD_OPTION', JSON.stringify(opts));
  }
  assert.throws(() => jsonGrammar({ object: 'yes' }), (e) => e.code === 'BAD_OPTION' && e.option === 'object');
});
