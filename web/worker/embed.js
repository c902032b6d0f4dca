// Embeddings (wlm_embed, src/embed.c): texts -> one Float32Array each.
//
// A text is a string (tokenized as the model frames a text: BOS, and EOS
// when the file's add_eos_token says so; a bert vocabulary: [CLS] ... [SEP])
// or token ids (used as they are). Texts go to the engine in groups of up to
// GROUP; the engine packs a group into forward passes, each text a sequence
// of its own. Between groups the worker returns to its event loop, so an
// abort stops a long list within one group. The context grows when a text
// needs it: a longer cache, or (non-causal models, which see a whole text in
// one pass) a larger batch; every sequence is dropped (the cache is empty
// afterwards).
import { EngineError } from '../errors.js';
import { word } from './heap.js';

const GROUP = 64;           // WLM_MAX_SEQ: one group's texts may share a pass
const POOLING = { model: 0xFFFFFFFF, mean: 1, cls: 2, last: 3 };
export const POOLING_NAMES = ['none', 'mean', 'cls', 'last'];

/** The ids of one text: a string tokenized with the model's framing, or ids as given. */
export function embedIds(eng, text) {
  if (typeof text !== 'string') return Array.from(text, Number);
  const ids = eng.tokenize(text, eng.hparams.addBos, false);
  // tokenize(addBos: true) already appends EOS where add_eos_token is set
  if (!eng.hparams.addBos && eng.addEos && eng.hparams.eosId >= 0) ids.push(eng.hparams.eosId);
  return ids;
}

/**
 * Embeds `texts` in groups; a generator that yields after each group (the
 * worker checks for an abort there) and returns {vectors, tokens}.
 * @param {{pooling?: 'model'|'mean'|'cls'|'last', normalize?: boolean}} opts
 */
export function* embedTexts(eng, texts, opts = {}) {
  eng.requireModel();
  const pooling = POOLING[opts.pooling ?? 'model'];
  if (pooling === undefined) throw new EngineError(`pooling must be 'model', 'mean', 'cls' or 'last', got ${opts.pooling}`, 1);
  const flags = opts.normalize === false ? 0 : 1;   // WLM_EMBED_NORMALIZE
  const d = eng.hparams.nEmbd, vectors = [], counts = [];
  for (let g0 = 0; g0 < texts.length; g0 += GROUP) {
    const group = texts.slice(g0, g0 + GROUP).map((t) => embedIds(eng, t));
    const longest = group.reduce((m, ids) => Math.max(m, ids.length), 0);
    const total = group.reduce((s, ids) => s + ids.length, 0);
    // (decoders keep a row of logits per sequence: fewer of them; the sliding window is a one-sequence policy)
    const seqs = eng.onFull === 'slide' ? 1 : Math.min(group.length, eng.causal ? 8 : GROUP);
    eng.ensureContext({ nSeq: seqs, slots: longest, outputs: 1, batch: eng.causal ? 0 : longest });
    const tokP = eng.block('embedTok', Math.max(1, total) * 4);
    const lenP = eng.block('embedLen', group.length * 4);
    const outP = eng.block('embedOut', group.length * d * 4);
    const i32 = eng.i32;
    let at = word(tokP);
    group.forEach((ids, i) => {
      i32[word(lenP) + i] = ids.length;
      for (let j = 0; j < ids.length; j++) i32[at + j] = ids[j];
      at += ids.length;
    });
    eng.clearError();
    const st = eng.x.wlm_embed(eng.ctx, tokP, lenP, group.length, pooling, flags, outP, eng.at('err'));
    eng.seqs.clear();   // wlm_embed empties the cache: nothing is left to resume either
    eng.resumePoint = null;
    if (st !== 0) {
      const e = new EngineError('embed: ' + eng.errorMessage(st).replace(/^text (\d+)/, (_, i) => `text ${g0 + Number(i)}`), st);
      throw e;
    }
    const f32 = eng.f32;
    for (let i = 0; i < group.length; i++) vectors.push(f32.slice(word(outP) + i * d, word(outP) + (i + 1) * d));
    for (const ids of group) counts.push(ids.length);
    if (g0 + GROUP < texts.length) yield vectors.length;
  }
  return { vectors, tokens: counts };
}
