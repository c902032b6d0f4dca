// Chat templates rendered inside bounds (runs in the model's worker, op
// renderChat in web/worker/worker.js; the fuzz target fuzz/fuzz_template.mjs uses it
// directly). A model's tokenizer.chat_template is untrusted: it can loop,
// recurse and build strings and lists without end. @huggingface/jinja parses
// it; BoundedInterpreter, a subclass of its Interpreter, counts every step
// and checks the clock, caps range(), strings, lists and call depth, and
// looks at the arguments of the few operations that can allocate a lot in one
// step (indent, tojson, join, replace, split) before they run. Going past a
// bound throws WasmlmError TEMPLATE_LIMIT naming the limit; a template that
// does not parse or fails to render throws TEMPLATE_ERROR.
import { Template, Interpreter, Environment } from '@huggingface/jinja';
import { WasmlmError } from '../errors.js';
import { normalizeMessages, templateLimits } from '../chat.js';

// The runtime value classes are not exported by @huggingface/jinja: take
// their constructors from values it creates.
const probeEnv = new Environment();
const FunctionValue = probeEnv.set('f', () => null).constructor;

// Text appended by all blocks of one render (nested blocks count again, so
// this is a multiple of outputChars): bounds what one render can allocate.
const PRODUCED_FACTOR = 16;
// A synthetic AST node carrying an already evaluated value (see evaluateMemberExpression).
const VALUE_NODE = 'wasmlm:Value';
const compiled = new Map(); // template source -> parsed Template

function limitError(limits, name, what) {
  return new WasmlmError('TEMPLATE_LIMIT',
    `chat template went past its ${name} limit (${limits[name]}): ${what}; a trusted template may raise options.templateLimits.${name}`,
    { limit: name });
}

function shorten(s) { s = String(s); return s.length > 300 ? s.slice(0, 300) + '…' : s; }

/** Non-overlapping occurrences of `needle` in `s`, counting stops past `max`. */
function countUpTo(s, needle, max) {
  if (needle === '') return s.length + 1;
  let n = 0;
  for (let i = s.indexOf(needle); i >= 0 && n <= max; i = s.indexOf(needle, i + needle.length)) n++;
  return n;
}

/** Whitespace-separated words of `s` (Python's str.split()), counting stops past `max`. */
function countWordsUpTo(s, max) {
  let n = 0;
  const re = /\S+/g;
  while (n <= max && re.exec(s)) n++;
  return n;
}

const isString = (v) => typeof v.value === 'string';
const isNumber = (v) => v && typeof v.value === 'number';
const childrenOf = (v) => Array.isArray(v.value) ? v.value : v.value instanceof Map ? v.value : null;

class BoundedInterpreter extends Interpreter {
  constructor(env, limits) {
    super(env);
    this.limits = limits;
    this.steps = 0;
    this.deadline = performance.now() + limits.timeMs;
    this.calls = 0;            // function and macro calls in progress
    this.produced = 0;         // text appended by blocks, over the whole render
    this.sizes = new WeakMap(); // list/dict -> its measure (only those without a namespace: they cannot change)
    this.filter = null;        // {name, operand} of the filter whose arguments are being evaluated
  }

  tick() {
    if (++this.steps > this.limits.steps) throw limitError(this.limits, 'steps', 'too many interpreter steps (loop iterations, evaluations)');
    // the clock every 64 steps: cheap, and no single step runs long once values are bounded
    if ((this.steps & 63) === 0 && performance.now() > this.deadline) {
      throw limitError(this.limits, 'timeMs', `the render ran longer than ${this.limits.timeMs} ms`);
    }
  }

  evaluate(node, environment) {
    if (node && node.type === VALUE_NODE) return node.value;
    this.tick();
    const v = super.evaluate(node, environment);
    if (v) this.checkValue(v);
    return v;
  }

  evaluateBlock(statements, environment) {
    this.tick();
    const r = super.evaluateBlock(statements, environment);
    this.produced += r.value.length;
    if (r.value.length > this.limits.outputChars) throw limitError(this.limits, 'outputChars', `a block rendered ${r.value.length} characters`);
    if (this.produced > PRODUCED_FACTOR * this.limits.outputChars) {
      throw limitError(this.limits, 'outputChars', `the blocks rendered more than ${PRODUCED_FACTOR} times that many characters in all`);
    }
    return r;
  }

  /** Every value an evaluation returns: strings, and the text and items inside lists/dicts, stay within bounds. */
  checkValue(v) {
    if (isString(v)) {
      if (v.value.length > this.limits.outputChars) throw limitError(this.limits, 'outputChars', `a string of ${v.value.length} characters`);
    } else if (childrenOf(v)) {
      this.measure(v, 1, 0);
    }
  }

  /**
   * {items, chars, depth, fixed} of a list/dict, its nested values counted
   * each time they appear (a list holding itself twice, 30 levels deep, is
   * 2^30 items: that is what tojson would write). Stops at the first bound
   * passed. `fixed`: no namespace inside, so the measure can be kept.
   */
  measure(v, depth, seen) {
    const known = this.sizes.get(v);
    if (known) return known;
    const L = this.limits;
    if (depth > L.depth) throw limitError(L, 'depth', `lists/dicts nested more than ${L.depth} deep`);
    const kids = childrenOf(v);
    const m = { items: 0, chars: 0, depth: 1, fixed: v.type !== 'NamespaceValue' };
    const add = (c) => {
      m.items++;
      if (isString(c)) m.chars += c.value.length;
      else if (childrenOf(c)) {
        const cm = this.measure(c, depth + 1, seen + m.items);
        m.items += cm.items; m.chars += cm.chars;
        m.depth = Math.max(m.depth, cm.depth + 1);
        m.fixed &&= cm.fixed;
      }
      if (seen + m.items > L.items) throw limitError(L, 'items', `a list/dict of more than ${L.items} items, nested ones counted`);
      if (m.chars > L.outputChars) throw limitError(L, 'outputChars', `a list/dict holding more than ${L.outputChars} characters of text`);
    };
    if (Array.isArray(kids)) for (const c of kids) add(c);
    else for (const [k, c] of kids) { m.chars += k.length; add(c); }
    if (m.fixed) this.sizes.set(v, m);
    return m;
  }

  nested(run) {
    if (++this.calls > this.limits.depth) {
      this.calls--;
      throw limitError(this.limits, 'depth', `more than ${this.limits.depth} macro/function calls in progress (recursion)`);
    }
    try { return run(); } finally { this.calls--; }
  }

  evaluateCallExpression(expr, environment) { return this.nested(() => super.evaluateCallExpression(expr, environment)); }
  evaluateCallStatement(node, environment) { return this.nested(() => super.evaluateCallStatement(node, environment)); }

  applyFilter(operand, filterNode, environment) {
    const saved = this.filter;
    const name = filterNode.type === 'CallExpression' ? filterNode.callee.value : filterNode.value;
    this.filter = { name, operand };
    try { return super.applyFilter(operand, filterNode, environment); } finally { this.filter = saved; }
  }

  evaluateArguments(args, environment) {
    const filter = this.filter;
    this.filter = null; // calls inside the arguments are not the filter's own
    let r;
    try { r = super.evaluateArguments(args, environment); } finally { this.filter = filter; }
    if (filter) this.checkFilterArguments(filter, r[0], r[1]);
    return r;
  }

  /** indent, tojson(indent) and join(separator): the text they would write, bounded before they run. */
  checkFilterArguments({ name, operand }, args, kwargs) {
    const L = this.limits;
    let estimate = 0;
    if (name === 'indent' && isString(operand)) {
      const width = args[0] ?? kwargs.get('width');
      if (isNumber(width)) estimate = operand.value.length + Math.max(0, width.value) * (countUpTo(operand.value, '\n', L.outputChars) + 1);
    } else if (name === 'tojson' && childrenOf(operand)) {
      const indent = kwargs.get('indent');
      if (isNumber(indent)) {
        const m = this.measure(operand, 1, 0);
        estimate = m.chars + (m.items + 1) * (8 + Math.max(0, indent.value) * m.depth);
      }
    } else if (name === 'join') {
      const sep = args[0] ?? kwargs.get('separator');
      const parts = isString(operand) ? operand.value.length : Array.isArray(operand.value) ? operand.value.length : 0;
      if (sep && isString(sep)) estimate = parts * (sep.value.length + 1);
    }
    if (estimate > L.outputChars) throw limitError(L, 'outputChars', `the filter ${name} would write about ${estimate} characters`);
  }

  // s.replace(...) and s.split(...) on a string: wrapped so that their
  // result size is checked before they run. The object is evaluated once
  // and handed to the library's own member lookup as an evaluated node.
  evaluateMemberExpression(expr, environment) {
    const prop = !expr.computed && expr.property.type === 'Identifier' ? expr.property.value : null;
    if (prop !== 'replace' && prop !== 'split') return super.evaluateMemberExpression(expr, environment);
    const object = this.evaluate(expr.object, environment);
    const fn = super.evaluateMemberExpression({ ...expr, object: { type: VALUE_NODE, value: object } }, environment);
    if (!isString(object) || fn.type !== 'FunctionValue') return fn;
    const check = prop === 'replace' ? (a) => this.checkReplace(object.value, a) : (a) => this.checkSplit(object.value, a);
    return new FunctionValue((args, scope) => { check(args); return fn.value(args, scope); });
  }

  checkReplace(s, args) {
    const [from, to, count] = args;
    if (!from || !to || !isString(from) || !isString(to)) return; // the library reports bad arguments
    let n = countUpTo(s, from.value, this.limits.outputChars);
    if (isNumber(count) && count.value >= 0) n = Math.min(n, count.value);
    const estimate = s.length + n * (to.value.length - from.value.length);
    if (estimate > this.limits.outputChars) throw limitError(this.limits, 'outputChars', `replace() would write about ${estimate} characters`);
  }

  checkSplit(s, args) {
    const sep = args[0];
    const L = this.limits;
    const n = sep && isString(sep) ? countUpTo(s, sep.value, L.items) + 1 : countWordsUpTo(s, L.items);
    if (n > L.items) throw limitError(L, 'items', `split() would make more than ${L.items} items`);
  }
}

/** range() as in Python, refusing up front to build more than limits.items numbers. */
function boundedRange(limits) {
  return (...a) => {
    if (a.length < 1 || a.length > 3 || a.some((x) => !Number.isInteger(x))) throw new Error('range() takes 1 to 3 integer arguments');
    const [start, stop, step] = a.length === 1 ? [0, a[0], 1] : [a[0], a[1], a[2] ?? 1];
    if (step === 0) throw new Error('range() step must not be zero');
    const count = Math.max(0, Math.ceil((stop - start) / step));
    if (count > limits.items) throw limitError(limits, 'items', `range() of ${count} numbers`);
    return Array.from({ length: count }, (_, i) => start + i * step);
  };
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const pad2 = (n) => String(n).padStart(2, '0');

/** strftime_now(format): the current local time; %Y %m %d %H %M %S %b %B %% (others are left as written). */
function strftimeNow(format) {
  const d = new Date();
  const parts = { Y: String(d.getFullYear()), m: pad2(d.getMonth() + 1), d: pad2(d.getDate()), H: pad2(d.getHours()),
    M: pad2(d.getMinutes()), S: pad2(d.getSeconds()), b: MONTHS[d.getMonth()].slice(0, 3), B: MONTHS[d.getMonth()], '%': '%' };
  return String(format ?? '').replace(/%([YmdHMSbB%])/g, (_, c) => parts[c]);
}

function globalsEnv(limits) {
  const env = new Environment();
  for (const [k, v] of [['true', true], ['false', false], ['none', null], ['True', true], ['False', false], ['None', null]]) env.set(k, v);
  env.set('raise_exception', (message) => { throw new Error(String(message)); });
  env.set('range', boundedRange(limits));
  env.set('strftime_now', strftimeNow);
  return env;
}

function parseTemplate(source, limits) {
  if (typeof source !== 'string' || source === '') throw new WasmlmError('TEMPLATE_ERROR', 'chat template must be a non-empty string');
  if (source.length > limits.templateChars) throw limitError(limits, 'templateChars', `the template is ${source.length} characters long`);
  let t = compiled.get(source);
  if (t) return t;
  try {
    t = new Template(source);
  } catch (e) {
    throw new WasmlmError('TEMPLATE_ERROR', `chat template does not parse: ${shorten(e && e.message)}`, { cause: e });
  }
  if (compiled.size >= 16) compiled.clear();
  compiled.set(source, t);
  return t;
}

/** A failure during the render as the package's error. */
function renderFailure(e, limits) {
  if (e instanceof WasmlmError) return e;
  const msg = shorten(e && e.message);
  if (e instanceof RangeError && /call stack/i.test(msg)) return limitError(limits, 'depth', 'the template nests too deep for the stack');
  if (e instanceof RangeError && /Invalid (string|array) length/i.test(msg)) return limitError(limits, 'outputChars', msg);
  return new WasmlmError('TEMPLATE_ERROR', `chat template failed to render: ${msg}`, { cause: e });
}

/**
 * Renders `messages` with a chat template inside `opts.limits`.
 * @param {string} source Jinja source (tokenizer.chat_template)
 * @param {Array<{role:string, content:string}>} messages
 * @param {{bosToken?:string, eosToken?:string, addGenerationPrompt?:boolean, variables?:object, limits?:object}} [opts]
 * @returns {string}
 */
export function renderChat(source, messages, opts = {}) {
  const limits = templateLimits(opts.limits);
  const template = parseTemplate(source, limits);
  const items = {
    ...(opts.variables || {}),
    messages: normalizeMessages(messages),
    add_generation_prompt: opts.addGenerationPrompt !== false,
    bos_token: opts.bosToken ?? '',
    eos_token: opts.eosToken ?? '',
  };
  try {
    const env = globalsEnv(limits);
    for (const [k, v] of Object.entries(items)) env.set(k, v);
    const out = new BoundedInterpreter(env, limits).run(template.parsed).value;
    if (out.length > limits.outputChars) throw limitError(limits, 'outputChars', `the prompt is ${out.length} characters long`);
    return out;
  } catch (e) {
    throw renderFailure(e, limits);
  }
}
