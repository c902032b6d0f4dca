// Chat prompts: renders a model's chat template (tokenizer.chat_template, a
// Jinja template) for a list of messages with @huggingface/jinja. The Jinja
// engine is imported lazily, on the first chat call, so loading a model and
// plain generation never need it.

import { WasmlmError } from './errors.js';

let jinjaPromise = null;
const templateCache = new Map(); // template source -> compiled Template

async function jinja() {
  if (!jinjaPromise) {
    jinjaPromise = import('@huggingface/jinja').catch((e) => {
      jinjaPromise = null;
      throw new Error(`chat templates need the package @huggingface/jinja (npm i @huggingface/jinja): ${e.message}`);
    });
  }
  return jinjaPromise;
}

/** Validates and normalises chat messages: [{role, content}] with string fields. */
export function normalizeMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new TypeError('chat: messages must be a non-empty array of {role, content}');
  }
  return messages.map((m, i) => {
    if (!m || typeof m !== 'object' || typeof m.role !== 'string' || m.role === '') {
      throw new TypeError(`chat: message ${i} needs a string role`);
    }
    if (m.content != null && typeof m.content !== 'string') {
      throw new TypeError(`chat: message ${i} content must be a string`);
    }
    return { ...m, content: m.content ?? '' };
  });
}

/**
 * Renders `messages` with a chat template.
 * @param {string} template Jinja source (tokenizer.chat_template)
 * @param {Array<{role:string, content:string}>} messages
 * @param {{bosToken?:string|null, eosToken?:string|null, addGenerationPrompt?:boolean, variables?:object}} [opts]
 * @returns {Promise<string>}
 */
export async function renderChat(template, messages, opts = {}) {
  if (typeof template !== 'string' || template === '') throw new TypeError('chat: template must be a non-empty string');
  const msgs = normalizeMessages(messages);
  const { Template } = await jinja();
  let t = templateCache.get(template);
  if (!t) {
    try {
      t = new Template(template);
    } catch (e) {
      throw new Error(`chat template does not parse: ${e.message}`);
    }
    if (templateCache.size > 16) templateCache.clear();
    templateCache.set(template, t);
  }
  try {
    return t.render({
      ...(opts.variables || {}),
      messages: msgs,
      add_generation_prompt: opts.addGenerationPrompt !== false,
      bos_token: opts.bosToken ?? '',
      eos_token: opts.eosToken ?? '',
    });
  } catch (e) {
    throw new Error(`chat template failed to render: ${e.message}`);
  }
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
  const { template, messages, variables, addGenerationPrompt, ...rest } = options;
  return { ...rest, parseSpecial: true, addBos };
}

/** The template to use: options.template, else the model's own; a clear error when there is none. */
export function chatTemplateFor(info, options) {
  if (options && options.template != null) {
    if (typeof options.template !== 'string' || options.template === '') throw new TypeError('chat: options.template must be a non-empty string');
    return options.template;
  }
  if (info.chatTemplate) return info.chatTemplate;
  throw new WasmlmError('NO_CHAT_TEMPLATE', `model ${info.name ? `'${info.name}' ` : ''}has no chat template (tokenizer.chat_template is not in the file): pass one as options.template (CLI: --template FILE), or use generate() with your own prompt`);
}
