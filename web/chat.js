// Chat prompts, caller side: validates messages and options and builds the
// request that the model's worker renders (web/worker/template.js, op renderChat).
// A chat template comes from the model file, so it is untrusted: it is never
// run on the caller's thread, and the worker renders it inside limits.
import { WasmlmError, badOption } from './errors.js';


/** Default bounds of one chat-template render (options.templateLimits overrides each). */
export const DEFAULT_TEMPLATE_LIMITS = Object.freeze({
  timeMs: 1000,             // wall time of one render
  steps: 2_000_000,         // interpreter steps: node evaluations and block runs (loop iterations)
  outputChars: 4 << 20,     // the rendered prompt, any one string, the text inside any one list/dict
  items: 100_000,           // items of any one list/dict, nested ones counted (range() included)
  depth: 64,                // macro calls in progress; nesting of lists/dicts
  templateChars: 1 << 20,   // length of the template source
});

/** options.templateLimits merged over the defaults; BAD_OPTION for an unknown name or a bad value. */
export function templateLimits(given) {
  if (given == null) return { ...DEFAULT_TEMPLATE_LIMITS };
  if (typeof given !== 'object' || Array.isArray(given)) throw badOption('templateLimits', given, 'an object like {timeMs, steps, outputChars, items, depth, templateChars}');
  const out = { ...DEFAULT_TEMPLATE_LIMITS };
  for (const [k, v] of Object.entries(given)) {
    if (!(k in DEFAULT_TEMPLATE_LIMITS)) throw badOption(`templateLimits.${k}`, v, `not a template limit (known: ${Object.keys(DEFAULT_TEMPLATE_LIMITS).join(', ')})`);
    if (v == null) continue;
    if (typeof v !== 'number' || !(v >= 1) || !Number.isFinite(v)) throw badOption(`templateLimits.${k}`, v, 'a finite number >= 1');
    out[k] = Math.floor(v);
  }
  return out;
}

/** Validates and normalises chat messages: [{role, content}] with string fields. */
export function normalizeMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new WasmlmError('BAD_OPTION', 'chat: messages must be a non-empty array of {role, content}', { option: 'messages' });
  }
  return messages.map((m, i) => {
    if (!m || typeof m !== 'object' || typeof m.role !== 'string' || m.role === '') {
      throw new WasmlmError('BAD_OPTION', `chat: message ${i} needs a string role`, { option: 'messages' });
    }
    if (m.content != null && typeof m.content !== 'string') {
      throw new WasmlmError('BAD_OPTION', `chat: message ${i} content must be a string`, { option: 'messages' });
    }
    return { ...m, content: m.content ?? '' };
  });
}

/**
 * The payload of the worker's renderChat op: the template, the normalised
 * messages and the render options with their limits. Everything in it must
 * cross to the worker by structured clone, so functions (or other values
 * that cannot be cloned) in messages or options.variables are a BAD_OPTION.
 */
export function renderRequest(template, messages, info, opts = {}) {
  const payload = {
    template,
    messages: normalizeMessages(messages),
    options: {
      bosToken: info.specialTokens?.bos ?? '', eosToken: info.specialTokens?.eos ?? '',
      addGenerationPrompt: opts.addGenerationPrompt !== false,
      variables: opts.variables ?? null,
      limits: templateLimits(opts.templateLimits),
    },
  };
  if (payload.options.variables !== null && (typeof payload.options.variables !== 'object' || Array.isArray(payload.options.variables))) {
    throw badOption('variables', payload.options.variables, 'an object of template variables');
  }
  for (const [name, value] of [['messages', payload.messages], ['variables', payload.options.variables]]) {
    try {
      structuredClone(value);
    } catch (e) {
      throw badOption(name, value, `plain data only (strings, numbers, booleans, null, arrays, objects): it is sent to the model's worker (${e.message})`);
    }
  }
  return payload;
}

/** A failed render as a reply ({error: {code, message, props}}) that keeps its code and limit across a worker boundary. */
export function templateErrorReply(e) {
  const code = e && typeof e.code === 'string' ? e.code : 'TEMPLATE_ERROR';
  const props = e && e.limit ? { limit: e.limit } : (e && e.option ? { option: e.option } : undefined);
  return { error: { code, message: (e && e.message) || String(e), props } };
}

/** The worker's renderChat reply as the prompt, or its failure as a WasmlmError. */
export function renderResult(reply) {
  if (reply && typeof reply.prompt === 'string') return reply.prompt;
  const e = (reply && reply.error) || { code: 'TEMPLATE_ERROR', message: 'chat template: the worker sent no prompt' };
  throw new WasmlmError(e.code, e.message, e.props);
}

/**
 * The generation options for a rendered chat prompt: special-token text is
 * parsed to ids, and BOS is added only when the model wants one and the
 * template did not already write it.
 */
export function chatGenerateOptions(prompt, info, options) {
  const bos = info.specialTokens && info.specialTokens.bos;
  const templateHasBos = !!bos && prompt.startsWith(bos);
  let addBos = options.addBos;
  if (addBos == null) addBos = info.hparams.addBos && !templateHasBos;
  else if (addBos && templateHasBos) addBos = false;
  const { template, messages, variables, addGenerationPrompt, templateLimits: _limits, ...rest } = options;
  return { ...rest, parseSpecial: true, addBos };
}

/** The template to use: options.template, else the model's own; a clear error when there is none. */
export function chatTemplateFor(info, options) {
  if (options && options.template != null) {
    if (typeof options.template !== 'string' || options.template === '') throw badOption('template', options.template, 'must be a non-empty string');
    return options.template;
  }
  if (info.chatTemplate) return info.chatTemplate;
  throw new WasmlmError('NO_CHAT_TEMPLATE', `model ${info.name ? `'${info.name}' ` : ''}has no chat template (tokenizer.chat_template is not in the file): pass one as options.template (CLI: --template FILE), or use generate() with your own prompt`);
}
