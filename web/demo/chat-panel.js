// The demo's chat panel: model.chat with the model's own chat template,
// multi-turn, streamed, with a Stop button. The conversation survives a page
// reload: after each turn the messages and model.saveState() go to
// IndexedDB under the model's identity; when the same model is loaded again
// they come back and model.loadState() puts the cache back, so the next turn
// evaluates only the new messages (its prompt starts with the saved tokens:
// prefix reuse). Other panels use the same context between turns (the
// next-token chart, generate), so the saved state is loaded again before
// every turn, not only after a reload.

const $ = (id) => document.getElementById(id);
const DB = 'wasmlm-demo-chat', STORE = 'sessions';

function openDb() {
  return new Promise((resolve, reject) => {
    const q = indexedDB.open(DB, 1);
    q.onupgradeneeded = () => q.result.createObjectStore(STORE);
    q.onsuccess = () => resolve(q.result);
    q.onerror = () => reject(q.error);
  });
}

/** One IndexedDB request on the sessions store; resolves with its result once the transaction commits. */
async function dbRun(mode, fn) {
  const db = await openDb();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const q = fn(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(q.result);
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  } finally { db.close(); }
}
const dbGet = (key) => dbRun('readonly', (s) => s.get(key));
const dbPut = (key, value) => dbRun('readwrite', (s) => s.put(value, key));
const dbDelete = (key) => dbRun('readwrite', (s) => s.delete(key));

/** The key a conversation is saved under: what identifies the model file and
 * the context its state needs (loadState checks the model's fingerprint too). */
export function sessionKey(info) {
  const hp = info.hparams || {};
  return ['chat', info.name || '', info.architecture || '', info.fileSize ?? '', hp.nVocab ?? '', info.context?.nCtx ?? info.context?.contextLength ?? ''].join('|');
}

/**
 * Wires the panel to the page: `page` = {state, settings(), updateButtons(),
 * setBodyState(s), showError(el, e)}. Returns {update(), modelLoaded()}:
 * update() sets the panel's buttons from the page's state; modelLoaded()
 * (awaited after each load) restores the model's saved conversation.
 */
export function setupChatPanel(page) {
  const el = {
    log: $('chat-log'), input: $('chat-input'), send: $('chat-send'), stop: $('chat-stop'), clear: $('chat-new'),
    status: $('chat-status'), form: $('chat-form'),
  };
  const { state } = page;
  // messages: [{role, content}] of the conversation; bytes: its saved state; key: where it is saved
  const chat = { messages: [], bytes: null, key: null, available: false, restored: null, lastStats: null, lastOptions: null, saves: 0 };
  state.chat = chat;

  function status(text, err = false) {
    el.status.textContent = text;
    el.status.classList.toggle('err', err);
  }

  function bubble(m) {
    const li = document.createElement('li');
    li.className = `msg ${m.role}`;
    const who = document.createElement('span');
    who.className = 'who';
    who.textContent = m.role === 'user' ? 'You' : 'Model';
    const text = document.createElement('div');
    text.className = 'text';
    text.textContent = m.content;
    li.append(who, text);
    el.log.append(li);
    el.log.scrollTop = el.log.scrollHeight;
    return text;
  }
  function redraw() {
    el.log.textContent = '';
    for (const m of chat.messages) bubble(m);
  }

  async function save() {
    chat.bytes = await state.model.saveState();
    await dbPut(chat.key, { messages: chat.messages, state: chat.bytes, savedAt: Date.now() });
    chat.saves++;
  }

  async function send() {
    const text = el.input.value.trim();
    if (!state.model || state.busy || !chat.available || !text) return;
    const model = state.model;
    const ac = new AbortController();
    state.abort = ac; state.busy = 'chat';
    page.setBodyState('chatting');
    page.updateButtons();
    el.log.setAttribute('aria-live', 'off');   // no announcement per token; the status line says when the reply is done
    chat.messages.push({ role: 'user', content: text });
    bubble(chat.messages.at(-1));
    el.input.value = '';
    const reply = { role: 'assistant', content: '' };
    const out = bubble(reply);
    status('Thinking…');
    let n = 0, pending = '', frame = 0;
    const paint = () => { frame = 0; out.append(pending); pending = ''; el.log.scrollTop = el.log.scrollHeight; };
    try {
      // the context may hold another panel's text since the last turn: put the conversation's cache back
      if (chat.bytes) await model.loadState(chat.bytes);
      const o = page.settings();
      chat.lastOptions = o;
      const it = model.chat(chat.messages, { ...o, signal: ac.signal });
      let result;
      for (;;) {
        const r = await it.next();
        if (r.done) { result = r.value; break; }
        n++;
        reply.content += r.value.text;
        pending += r.value.text;
        if (!frame) frame = requestAnimationFrame(paint);
      }
      const st = result.stats;
      chat.lastStats = st;
      chat.messages.push(reply);
      status(`${st.generatedTokens} tokens · ${st.decodeTokensPerSec.toFixed(1)} tokens/s · prompt ${st.promptTokens} tokens, ` +
        `${st.reusedPromptTokens} of them from the cache · ${result.finishReason}` +
        (result.finishReason === 'context' ? ': the conversation fills the context, New chat starts over' : ''));
      page.setBodyState('done');
    } catch (e) {
      if (e.name === 'AbortError') {
        chat.messages.push(reply);   // the part that arrived stays in the conversation (and in the cache)
        status(`Stopped after ${n} tokens`);
        page.setBodyState('stopped');
      } else {
        chat.messages.pop();   // the user's message had no reply: it goes back to the input
        el.input.value = text;
        redraw();
        page.showError(el.status, e);
        page.setBodyState('error');
      }
    } finally {
      if (frame) cancelAnimationFrame(frame);
      out.textContent = reply.content;
      el.log.setAttribute('aria-live', 'polite');
      if (chat.messages.at(-1) === reply && state.model === model) {
        try { await save(); } catch (e) { page.showError(el.status, new Error(`the conversation could not be saved: ${e.message}`)); }
      }
      state.abort = null; state.busy = null;
      page.updateButtons();
    }
  }

  async function newChat() {
    if (state.busy) return;
    chat.messages = []; chat.bytes = null; chat.restored = null;
    redraw();
    if (chat.key) await dbDelete(chat.key).catch((e) => console.warn('chat:', e.message));
    status('New conversation');
    el.input.focus();
  }

  /** After a model loads: chat is available with a chat template; its saved conversation comes back. */
  async function modelLoaded() {
    const model = state.model;
    chat.messages = []; chat.bytes = null; chat.restored = null; chat.lastStats = null;
    chat.available = !!model && !!model.info.chatTemplate && model.info.embedding?.causal !== false;
    chat.key = model ? sessionKey(model.info) : null;
    redraw();
    update();
    if (!model) return;
    if (!chat.available) {
      status(model.info.embedding?.causal === false
        ? 'Chat is unavailable: an embedding model does not generate text.'
        : 'Chat is unavailable: this model has no chat template (tokenizer.chat_template is not in the file), so there is no way to know how it expects a conversation to be written. Use Generate with your own prompt.', true);
      return;
    }
    let saved = null;
    try { saved = await dbGet(chat.key); } catch (e) { console.warn('chat: saved conversations unavailable:', e.message); }
    if (!saved || state.model !== model) { status('Chat with the model, using its own chat template.'); return; }
    try {
      const r = await model.loadState(saved.state);
      chat.messages = saved.messages; chat.bytes = saved.state; chat.restored = { positions: r.positions, tokens: r.tokens.length };
      redraw();
      status(`Restored the conversation (${saved.messages.length} messages, ${r.positions} positions of cache): the next turn continues it.`);
    } catch (e) {
      await dbDelete(chat.key).catch(() => {});
      status(`The saved conversation could not be restored (${e.message}); starting a new one.`, true);
    }
  }

  el.form.addEventListener('submit', (e) => { e.preventDefault(); send(); });
  el.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(); }
  });
  el.stop.addEventListener('click', () => { if (state.busy === 'chat') state.abort?.abort(); });
  el.clear.addEventListener('click', newChat);

  function update() {
    const ready = !!state.model && !state.busy && chat.available;
    el.send.disabled = !ready;
    el.input.disabled = !!state.model && !chat.available;
    el.clear.disabled = !!state.busy;
    el.stop.disabled = state.busy !== 'chat';
  }
  return { update, modelLoaded };
}
