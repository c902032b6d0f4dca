// Browsers: the chat-template renderer of one model's worker (web/worker/worker.js,
// op renderChat), in a worker of its own. Bundlers follow its `new Worker(new
// URL(...))` and give it its own bundle with @huggingface/jinja, so the
// model's worker bundle stays one file without code splitting (Vite's iife
// worker format) and Jinja is loaded only when a chat is rendered. Node
// renders in the model's worker itself (web/worker/template.js imported on demand).
import { renderChat } from './template.js';
import { templateErrorReply } from '../chat.js';

self.onmessage = (ev) => {
  const m = ev.data;
  let reply;
  try {
    reply = { id: m.id, prompt: renderChat(m.template, m.messages, m.options || {}) };
  } catch (e) {
    reply = { id: m.id, ...templateErrorReply(e) };
  }
  self.postMessage(reply);
};
