// Tool calls (the OpenAI-style API of web/openai.js, caller side): the
// tools of a request checked, the tool-call format of a model family read
// from its chat template, the grammar that makes a model write calls in that
// format with arguments valid for each tool's parameter schema, the parser
// that turns the written calls into OpenAI tool_calls (incrementally, for
// streams), and the conversion of OpenAI messages (assistant tool_calls,
// role 'tool') to what chat templates expect.
//
// Two formats, as the models were trained on them (docs/openai.md):
//   hermes    Qwen2.5, Qwen3, Hermes and other templates that mention <tool_call>:
//             <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>, several
//             separated by "\n"
//   llama3    Llama 3.1 / 3.2 / 3.3 templates ("parameters" in their JSON call format):
//             the reply is {"name": "NAME", "parameters": ARGS}, one call
import { WasmlmError, badOption, describe } from './errors.js';
import { jsonSchemaToGbnf } from './grammar/json-schema.js';
import { lit, print } from './grammar/gbnf.js';

/**
 * The tool-call formats wasmlm knows. A call is open + name + mid + arguments
 * + close (several joined by sep when parallel); `marker` opens a call in
 * free output, anywhere, or with `leading` only as the reply's first text.
 */
export const TOOL_FORMATS = Object.freeze({
  hermes: Object.freeze({
    name: 'hermes', marker: '<tool_call>', leading: false, open: '<tool_call>\n{"name": "', mid: '", "arguments": ', close: '}\n</tool_call>',
    sep: '\n', parallel: true,
  }),
  llama3: Object.freeze({
    name: 'llama3', marker: '{', leading: true, open: '{"name": "', mid: '", "parameters": ', close: '}', sep: null, parallel: false,
  }),
});

/** The tool-call format a chat template teaches, or null when it shows none wasmlm knows. */
export function toolFormatOf(template) {
  if (typeof template !== 'string' || !/\btools\b/.test(template)) return null;
  if (template.includes('<tool_call>')) return TOOL_FORMATS.hermes;
  if (/"parameters"/.test(template) && template.includes('<|start_header_id|>')) return TOOL_FORMATS.llama3;
  return null;
}

const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const EMPTY_PARAMETERS = Object.freeze({ type: 'object', properties: {}, additionalProperties: false });

/** Only the keys `known` in object `v` at `where`; any other is BAD_OPTION naming it. */
export function onlyKeys(v, known, where, why = {}) {
  for (const k of Object.keys(v)) {
    if (known.includes(k)) continue;
    const reason = why[k] ? `: ${why[k]}` : ` (known: ${known.join(', ')})`;
    throw new WasmlmError('BAD_OPTION', `${where}.${k} is not supported${reason}`, { option: `${where}.${k}` });
  }
}

/**
 * OpenAI `tools` checked: [{type: 'function', function: {name, description?, parameters?, strict?}}].
 * Returns [{name, description, parameters, grammar}] where grammar is the
 * GBNF of the arguments (BAD_OPTION naming the tool when its schema cannot
 * be a grammar: docs/json-schema.md).
 */
export function normalizeTools(tools) {
  if (!Array.isArray(tools) || tools.length === 0) throw badOption('tools', tools, 'a non-empty array of {type: \'function\', function: {name, description, parameters}}');
  if (tools.length > 128) throw badOption('tools', tools, 'at most 128 tools');
  const seen = new Set();
  return tools.map((t, i) => {
    const at = `tools[${i}]`;
    if (!isObj(t)) throw badOption(at, t, "an object {type: 'function', function: {...}}");
    onlyKeys(t, ['type', 'function'], at);
    if (t.type !== 'function') throw badOption(`${at}.type`, t.type, "must be 'function' (the only tool type a local model can call)");
    const f = t.function;
    if (!isObj(f)) throw badOption(`${at}.function`, f, 'an object {name, description?, parameters?, strict?}');
    onlyKeys(f, ['name', 'description', 'parameters', 'strict'], `${at}.function`);
    if (typeof f.name !== 'string' || !NAME_RE.test(f.name)) throw badOption(`${at}.function.name`, f.name, 'letters, digits, _ and -, 1 to 64 of them');
    if (seen.has(f.name)) throw badOption(`${at}.function.name`, f.name, 'must differ from the other tools\' names');
    seen.add(f.name);
    if (f.description != null && typeof f.description !== 'string') throw badOption(`${at}.function.description`, f.description, 'a string');
    if (f.strict != null && typeof f.strict !== 'boolean') throw badOption(`${at}.function.strict`, f.strict, 'true or false');
    if (f.parameters != null && !isObj(f.parameters)) throw badOption(`${at}.function.parameters`, f.parameters, 'a JSON Schema object');
    const parameters = f.parameters ?? EMPTY_PARAMETERS;
    if (parameters.type !== 'object') {
      throw badOption(`${at}.function.parameters`, parameters, "a JSON Schema with type 'object' (a call's arguments are a JSON object)");
    }
    let grammar;
    try {
      grammar = jsonSchemaToGbnf(parameters);
    } catch (e) {
      if (e instanceof WasmlmError && e.code === 'BAD_SCHEMA') {
        throw new WasmlmError('BAD_OPTION', `${at}.function.parameters: ${e.message}`, { option: `${at}.function.parameters`, cause: e });
      }
      throw e;
    }
    return { name: f.name, description: f.description ?? null, parameters, grammar };
  });
}

/** The tools as chat templates take them (OpenAI's shape, which the models' templates print with tojson). */
export function templateTools(list) {
  return list.map((t) => ({
    type: 'function',
    function: { name: t.name, ...(t.description != null ? { description: t.description } : {}), parameters: t.parameters },
  }));
}

// ---- grammars --------------------------------------------------------------------

/** Rule names of GBNF text (the names before `::=`). */
function ruleNames(gbnf) {
  const names = new Set();
  for (const m of gbnf.matchAll(/^([a-zA-Z][a-zA-Z0-9_-]*) ::=/gm)) names.add(m[1]);
  return names;
}

/**
 * GBNF text with every rule `x` renamed `prefix + x`: references are found
 * outside string literals and character classes, so text inside them stays.
 */
export function prefixRules(gbnf, prefix) {
  const names = ruleNames(gbnf);
  let out = '', i = 0;
  const n = gbnf.length;
  while (i < n) {
    const c = gbnf[i];
    if (c === '"' || c === '[') {
      const end = c === '"' ? '"' : ']';
      let j = i + 1;
      while (j < n && gbnf[j] !== end) j += gbnf[j] === '\\' ? 2 : 1;
      out += gbnf.slice(i, j + 1);
      i = j + 1;
    } else if (c === '#') {
      const j = gbnf.indexOf('\n', i);
      i = j < 0 ? n : j;
    } else if (/[a-zA-Z]/.test(c)) {
      let j = i + 1;
      while (j < n && /[a-zA-Z0-9_-]/.test(gbnf[j])) j++;
      const word = gbnf.slice(i, j);
      out += names.has(word) ? prefix + word : word;
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

const q = (s) => print(lit(s));

/**
 * The grammar of tool calls in `format`: one call of one of `tools` (each
 * with its arguments' grammar), or with `parallel` (hermes) one or more
 * separated by the format's separator. `afterMarker`: the text starts just
 * after the format's marker (a call opened in free output, tool_choice 'auto').
 */
export function toolCallGrammar(format, tools, { parallel = true, afterMarker = false } = {}) {
  const rules = [];
  const alts = tools.map((t, i) => {
    rules.push(prefixRules(t.grammar, `t${i}-`).trimEnd());
    return `${q(t.name + format.mid)} t${i}-root`;
  });
  const body = `(${alts.join(' | ')}) ${q(format.close)}`;
  const head = format.open;
  if (!head.startsWith(format.marker)) throw new WasmlmError('INTERNAL', `tool format ${format.name}: its opening does not start with its marker`);
  const first = afterMarker ? head.slice(format.marker.length) : head;
  const many = parallel && format.parallel && format.sep !== null;
  return [
    `root ::= ${first ? q(first) + ' ' : ''}call-body${many ? ` (${q(format.sep)} call)*` : ''}`,
    ...(many ? [`call ::= ${q(head)} call-body`] : []),
    `call-body ::= ${body}`,
    ...rules,
  ].join('\n') + '\n';
}

/**
 * The grammar of a reply that may open a call in `format` without being
 * forced to, for formats whose marker must come first (llama3: a reply that
 * starts with "{" is a call): the marker alone, or any text not starting
 * with it. The generation ends right after the marker (nothing may follow
 * it in this grammar), and the call then continues under toolCallGrammar.
 */
export function leadingMarkerGrammar(format) {
  if ([...format.marker].length !== 1) throw new WasmlmError('INTERNAL', `tool format ${format.name}: a leading marker must be one character`);
  const hex = format.marker.codePointAt(0).toString(16).padStart(2, '0');
  return `root ::= (${q(format.marker)} | [^\\x${hex}] .*)?\n`;
}

// ---- parsing calls ------------------------------------------------------------------

/**
 * Reads the calls a model writes in `format` (text fed as it comes; the
 * text starts at a call's opening). Each push returns events
 * {type: 'call', index, name} (a call's name is complete) and
 * {type: 'arguments', index, text} (more of its arguments' JSON). The shape
 * is the grammar's, so text that departs from it is an INTERNAL error; text
 * that merely stops (maxTokens) leaves the last call unfinished.
 */
export class ToolCallParser {
  constructor(format) {
    this.f = format;
    this.calls = [];        // {name, arguments, done}
    this.state = 'open';
    this.buf = '';          // text of the part being matched (open, mid, close, sep)
    this.name = '';
    this.scan = null;       // the arguments' JSON scanner
  }

  /** @returns {Array<{type:'call', index:number, name:string} | {type:'arguments', index:number, text:string}>} */
  push(text) {
    const out = [];
    let i = 0;
    while (i < text.length) {
      switch (this.state) {
        case 'open': case 'mid': case 'close': case 'sep': {
          const want = this.state === 'open' ? this.f.open : this.state === 'mid' ? this.f.mid : this.state === 'close' ? this.f.close : this.f.sep;
          const take = Math.min(want.length - this.buf.length, text.length - i);
          this.buf += text.slice(i, i + take);
          i += take;
          if (!want.startsWith(this.buf)) this.fail(want);
          if (this.buf.length === want.length) {
            this.buf = '';
            if (this.state === 'open') { this.state = 'name'; this.name = ''; }
            else if (this.state === 'mid') { this.state = 'args'; this.scan = new JsonEnd(); }
            else if (this.state === 'close') { this.calls[this.calls.length - 1].done = true; this.state = this.f.sep !== null ? 'sep' : 'end'; }
            else this.state = 'open';
          }
          break;
        }
        case 'name': {
          const q2 = text.indexOf('"', i);
          const part = q2 < 0 ? text.slice(i) : text.slice(i, q2);
          this.name += part;
          i += part.length;
          if (q2 >= 0) {
            this.state = 'mid';
            if (!NAME_RE.test(this.name)) this.fail('a tool name');
            this.calls.push({ name: this.name, arguments: '', done: false });
            out.push({ type: 'call', index: this.calls.length - 1, name: this.name });
          }
          break;
        }
        case 'args': {
          const used = this.scan.feed(text, i);
          const part = text.slice(i, i + used);
          i += used;
          const call = this.calls[this.calls.length - 1];
          call.arguments += part;
          if (part) out.push({ type: 'arguments', index: this.calls.length - 1, text: part });
          if (this.scan.done) this.state = 'close';
          break;
        }
        default:
          this.fail('the end of the calls');
      }
    }
    return out;
  }

  fail(wanted) {
    throw new WasmlmError('INTERNAL', `tool calls: the model's text departs from the ${this.f.name} call format (expected ${wanted}); ` +
      'the output was constrained by its grammar, so this is a bug');
  }

  /** Whether the text read so far ends at a boundary between calls (nothing unfinished). */
  get complete() { return this.calls.length > 0 && (this.state === 'sep' || this.state === 'end') && this.buf === ''; }
}

/** Finds where a JSON value ends in text fed in pieces (strings and escapes followed; the value is an object or array). */
class JsonEnd {
  constructor() { this.depth = 0; this.started = false; this.inString = false; this.escape = false; this.done = false; }
  /** Consumes text[from...] up to the value's end; returns the count consumed. */
  feed(text, from) {
    let i = from;
    for (; i < text.length && !this.done; i++) {
      const c = text[i];
      if (this.inString) {
        if (this.escape) this.escape = false;
        else if (c === '\\') this.escape = true;
        else if (c === '"') this.inString = false;
      } else if (c === '"') this.inString = true;
      else if (c === '{' || c === '[') { this.depth++; this.started = true; }
      else if (c === '}' || c === ']') { this.depth--; if (this.started && this.depth === 0) this.done = true; }
    }
    return i - from;
  }
}

// ---- arguments: the small check ---------------------------------------------------

const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);
const typeFits = (t, v) => t === typeOf(v) || (t === 'number' && typeof v === 'number');

/**
 * Why `value` does not fit `schema`, or null. A small check of the common
 * keywords (type, enum, const, properties, required, additionalProperties
 * false, items, lengths and bounds), recursively; combinators and references
 * are not followed here. Constrained output already satisfies the whole
 * schema (the grammar guarantee of docs/json-schema.md); this is a second,
 * independent look at what it produced.
 */
export function argumentProblem(schema, value, path = '') {
  if (schema === true || schema == null) return null;
  if (schema === false) return `${path || 'the value'} is not allowed`;
  const at = path || 'the arguments';
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeFits(t, value))) return `${at} must be ${types.join(' or ')}, got ${typeOf(value)}`;
  }
  const json = (v) => JSON.stringify(v);
  if (schema.const !== undefined && json(schema.const) !== json(value)) return `${at} must be ${json(schema.const)}`;
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => json(e) === json(value))) return `${at} must be one of ${json(schema.enum)}`;
  if (typeof value === 'string') {
    const len = [...value].length;
    if (schema.minLength !== undefined && len < schema.minLength) return `${at} is shorter than ${schema.minLength}`;
    if (schema.maxLength !== undefined && len > schema.maxLength) return `${at} is longer than ${schema.maxLength}`;
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) return `${at} is below ${schema.minimum}`;
    if (schema.maximum !== undefined && value > schema.maximum) return `${at} is above ${schema.maximum}`;
    if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum) return `${at} is not above ${schema.exclusiveMinimum}`;
    if (typeof schema.exclusiveMaximum === 'number' && value >= schema.exclusiveMaximum) return `${at} is not below ${schema.exclusiveMaximum}`;
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) return `${at} has fewer than ${schema.minItems} items`;
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${at} has more than ${schema.maxItems} items`;
    if (isObj(schema.items)) {
      for (let k = 0; k < value.length; k++) {
        const p = argumentProblem(schema.items, value[k], `${at}[${k}]`);
        if (p) return p;
      }
    }
  }
  if (isObj(value)) {
    const props = isObj(schema.properties) ? schema.properties : {};
    for (const r of Array.isArray(schema.required) ? schema.required : []) {
      if (!Object.hasOwn(value, r)) return `${at} lacks the required property ${json(r)}`;
    }
    for (const [k, v] of Object.entries(value)) {
      if (Object.hasOwn(props, k)) {
        const p = argumentProblem(props[k], v, `${path ? path + '.' : ''}${k}`);
        if (p) return p;
      } else if (schema.additionalProperties === false) return `${at} has the property ${json(k)}, which its schema does not allow`;
    }
  }
  return null;
}

/**
 * Completed parser calls as OpenAI tool_calls, their arguments checked
 * against their tool's schema (a failure is INTERNAL: the grammar should
 * have prevented it). An unfinished last call (the generation stopped inside
 * it) keeps its partial arguments text, as a stream would have sent it.
 */
export function toolCallsOf(calls, tools, ids) {
  return calls.map((c, i) => {
    if (c.done) {
      const tool = tools.find((t) => t.name === c.name);
      if (!tool) throw new WasmlmError('INTERNAL', `tool calls: the model called ${describe(c.name)}, which is not a tool of the request`);
      let value;
      try { value = JSON.parse(c.arguments); } catch (e) {
        throw new WasmlmError('INTERNAL', `tool calls: the arguments of ${c.name} are not JSON (${e.message})`);
      }
      const problem = argumentProblem(tool.parameters, value);
      if (problem) throw new WasmlmError('INTERNAL', `tool calls: the arguments of ${c.name} do not fit its parameters: ${problem}`);
    }
    return { id: ids[i], type: 'function', function: { name: c.name, arguments: c.arguments } };
  });
}

// ---- messages to templates -------------------------------------------------------------

/**
 * OpenAI chat messages as chat templates take them: content parts joined to
 * text, an assistant's tool_calls with their arguments as objects (the
 * templates print them with tojson), a tool result's content as text.
 */
export function templateMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw badOption('messages', messages, 'a non-empty array of messages');
  return messages.map((m, i) => {
    const at = `messages[${i}]`;
    if (!isObj(m)) throw badOption(at, m, 'an object {role, content}');
    const role = m.role;
    const known = {
      system: ['role', 'content', 'name'], developer: ['role', 'content', 'name'], user: ['role', 'content', 'name'],
      assistant: ['role', 'content', 'name', 'tool_calls', 'refusal'], tool: ['role', 'content', 'tool_call_id'],
    }[role];
    if (!known) {
      const why = role === 'function' ? "role 'function' is the deprecated form of 'tool' (give tool results as {role: 'tool', tool_call_id, content})" : null;
      throw new WasmlmError('BAD_OPTION', `${at}.role: ${why || `one of 'system', 'developer', 'user', 'assistant', 'tool', got ${describe(role)}`}`, { option: `${at}.role` });
    }
    onlyKeys(m, known, at, {
      audio: 'audio input and output need a model with an audio encoder',
      function_call: 'the deprecated function_call: use tool_calls',
    });
    const out = { role: role === 'developer' ? 'system' : role, content: contentText(m.content, `${at}.content`, role) };
    if (m.name != null) {
      if (typeof m.name !== 'string') throw badOption(`${at}.name`, m.name, 'a string');
      out.name = m.name;
    }
    if (role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') throw badOption(`${at}.tool_call_id`, m.tool_call_id, 'the id of the call this message answers');
      out.tool_call_id = m.tool_call_id;
    }
    if (role === 'assistant' && m.tool_calls != null) {
      if (!Array.isArray(m.tool_calls)) throw badOption(`${at}.tool_calls`, m.tool_calls, 'an array of {id, type, function: {name, arguments}}');
      if (m.tool_calls.length) out.tool_calls = m.tool_calls.map((c, k) => templateCall(c, `${at}.tool_calls[${k}]`));
    }
    return out;
  });
}

function templateCall(c, at) {
  if (!isObj(c) || c.type !== 'function' || !isObj(c.function)) throw badOption(at, c, "an object {id, type: 'function', function: {name, arguments}}");
  onlyKeys(c, ['id', 'type', 'function'], at);
  const f = c.function;
  onlyKeys(f, ['name', 'arguments'], `${at}.function`);
  if (typeof f.name !== 'string' || f.name === '') throw badOption(`${at}.function.name`, f.name, 'a non-empty string');
  let args = f.arguments;
  if (typeof args === 'string') {
    try { args = JSON.parse(args); } catch {
      throw badOption(`${at}.function.arguments`, f.arguments, 'a JSON text (as a completion returned it)');
    }
  }
  if (!isObj(args)) throw badOption(`${at}.function.arguments`, f.arguments, 'a JSON object (or its text)');
  return { id: typeof c.id === 'string' ? c.id : '', type: 'function', function: { name: f.name, arguments: args } };
}

/** Message content as text: a string, null (no text), or an array of {type: 'text', text} parts. */
function contentText(content, at, role) {
  if (content == null) {
    if (role === 'assistant') return '';
    throw badOption(at, content, 'a string or an array of text parts');
  }
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p, k) => {
      if (!isObj(p)) throw badOption(`${at}[${k}]`, p, "a part {type: 'text', text}");
      if (p.type !== 'text') {
        throw new WasmlmError('BAD_OPTION', `${at}[${k}].type: ${describe(p.type)} parts are not supported: ` +
          'only text (images, audio and files need a model with an encoder for them, which wasmlm does not run)', { option: `${at}[${k}].type` });
      }
      onlyKeys(p, ['type', 'text'], `${at}[${k}]`);
      if (typeof p.text !== 'string') throw badOption(`${at}[${k}].text`, p.text, 'a string');
      return p.text;
    }).join('');
  }
  throw badOption(at, content, 'a string or an array of text parts');
}
