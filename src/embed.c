/* Embeddings: texts -> one pooled vector each (wlm_embed).
 *
 * Texts are packed into forward passes in order: a pass takes up to n_batch
 * tokens (and no more than the cache has free slots) of up to n_seq_max
 * texts, each text a sequence of its own at positions 0, 1, ..., so that
 * attention never mixes two texts. The pass leaves every token's final
 * hidden state (wlm_forward_hidden: decoders after the final norm, encoders
 * the last layer's output), and each one is pooled into its text's row
 * right away: MEAN adds it (divided by the length once the text is done),
 * CLS keeps position 0's, LAST the last position's.
 *
 * A non-causal model (bert, nomic-bert) needs all of a text's tokens in one
 * pass (a token sees the tokens after it), so a text never straddles two
 * passes there and one longer than n_batch is refused. A causal model's text
 * may: its first part stays in the cache while the pass that holds the rest
 * runs, exactly as a long prompt is prefilled in chunks. At most one text
 * is open across passes, so the cache always has room for the rest of it.
 * No memory is allocated: pooling writes into the caller's rows, the
 * pass's bookkeeping uses the context's per-token arrays. */
#include "ctx.h"
#include "wmath.h"

uint32_t wlm_model_pooling(const wlm_model *m) {
    if (!m) return WLM_POOLING_NONE;
    if (m->pooling >= WLM_POOLING_MEAN && m->pooling <= WLM_POOLING_LAST) return m->pooling;
    return m->causal ? WLM_POOLING_LAST : WLM_POOLING_MEAN;
}

uint32_t wlm_model_causal(const wlm_model *m) { return m ? m->causal : 1; }

/* Divides a finished text's row (MEAN: by its length) and normalizes it. */
static void finish_row(float *row, uint32_t d, uint32_t len, uint32_t pooling, uint32_t flags) {
    if (pooling == WLM_POOLING_MEAN) {
        float inv = 1.0f / (float)len;
        for (uint32_t i = 0; i < d; i++) row[i] *= inv;
    }
    if (flags & WLM_EMBED_NORMALIZE) {
        double ss = 0;
        for (uint32_t i = 0; i < d; i++) ss += (double)row[i] * row[i];
        if (ss > 0) {
            float inv = (float)(1.0 / __builtin_sqrt(ss));
            for (uint32_t i = 0; i < d; i++) row[i] *= inv;
        }
    }
}

wlm_status wlm_embed(wlm_ctx *c, const int32_t *tokens, const uint32_t *n_tokens, uint32_t n_texts,
                     uint32_t pooling, uint32_t flags, float *out, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!c || (n_texts && (!tokens || !n_tokens || !out))) return wlm_fail(err, WLM_ERR_ARG, "wlm_embed: NULL argument");
    const wlm_model *m = c->m;
    if (pooling == WLM_POOLING_MODEL) pooling = wlm_model_pooling(m);
    if (pooling < WLM_POOLING_MEAN || pooling > WLM_POOLING_LAST)
        return wlm_fail(err, WLM_ERR_ARG, "wlm_embed: pooling %u is not one of MEAN (1), CLS (2), LAST (3) or WLM_POOLING_MODEL", pooling);
    if (flags & ~(uint32_t)WLM_EMBED_NORMALIZE) return wlm_fail(err, WLM_ERR_ARG, "wlm_embed: unknown flags 0x%x", flags & ~(uint32_t)WLM_EMBED_NORMALIZE);
    uint32_t d = m->hp.n_embd;
    /* check every text before running anything */
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_texts; i++) {
        uint32_t len = n_tokens[i];
        if (len == 0) return wlm_fail(err, WLM_ERR_ARG, "text %u has no tokens", i);
        if (len > c->n_ctx)
            return wlm_fail(err, WLM_ERR_ARG, "text %u has %u tokens, more than the context holds (%u)", i, len, c->n_ctx);
        if (m->pos_embd && len > m->pos_embd->ne[1])
            return wlm_fail(err, WLM_ERR_ARG, "text %u has %u tokens, more than the %llu positions of this %s model (context_length)",
                            i, len, (unsigned long long)m->pos_embd->ne[1], wlm_arch_name(m->arch));
        if (!m->causal && len > c->n_batch)
            return wlm_fail(err, WLM_ERR_ARG, "text %u has %u tokens, more than one batch of %u: a non-causal %s model sees a whole text in one pass (raise n_batch)",
                            i, len, c->n_batch, wlm_arch_name(m->arch));
        for (uint32_t j = 0; j < len; j++) {
            int32_t t = tokens[total + j];
            if (t < 0 || (uint32_t)t >= m->hp.n_vocab)
                return wlm_fail(err, WLM_ERR_ARG, "text %u: token id %d out of range (vocabulary has %u)", i, t, m->hp.n_vocab);
        }
        total += len;
    }
    wlm_memset(out, 0, (uint64_t)n_texts * d * 4);
    wlm_ctx_reset(c);
    uint64_t off = 0;           /* the first token not yet evaluated */
    uint32_t cur = 0, done = 0; /* the text it belongs to, and that text's tokens already evaluated */
    uint32_t open_seq = 0;      /* cur's sequence when done > 0 */
    while (cur < n_texts) {
        uint32_t room = WLM_MIN(c->n_batch, c->n_free), n = 0, n_seq = 0, next_seq = 0;
        if (room == 0) {
            wlm_ctx_reset(c);
            return wlm_fail(err, WLM_ERR_STATE, "wlm_embed: no free cache slot (internal)");
        }
        uint32_t i = cur, k = done;
        while (i < n_texts && n < room && n_seq < c->n_seq_max) {
            uint32_t rest = n_tokens[i] - k;
            if (!m->causal && rest > room - n) break; /* the whole text goes into the next pass */
            uint32_t take = WLM_MIN(rest, room - n), s;
            if (k > 0) s = open_seq;
            else {
                if (done > 0 && next_seq == open_seq) next_seq++;
                s = next_seq++;
            }
            /* each token's sequence, position and cache slot, as wlm_eval_batch
             * (forward.c) places a chunk's tokens: keep the two in step */
            for (uint32_t j = 0; j < take; j++, n++) {
                uint32_t pos = c->seq_pos[s]++;
                c->tok_seq[n] = s;
                c->tok_pos[n] = (int32_t)pos;
                c->tok_slot[n] = wlm_kv_take(c, s, (int32_t)pos);
                c->out_tok[n] = i; /* the text each token pools into */
            }
            n_seq++;
            if (take < rest) {
                k += take;
                open_seq = s;
                break;
            } /* continues in the next pass (causal) */
            i++;
            k = 0;
        }
        wlm_kv_take_rows(c, n); /* the window ring's rows (when there is one), as wlm_eval_batch */
        wlm_forward_hidden(c, tokens + off, n);
        for (uint32_t t = 0; t < n; t++) {
            uint32_t ti = c->out_tok[t], pos = (uint32_t)c->tok_pos[t];
            const float *h = c->xb + (uint64_t)t * d;
            float *row = out + (uint64_t)ti * d;
            if (pooling == WLM_POOLING_MEAN)
                for (uint32_t e = 0; e < d; e++) row[e] += h[e];
            else if ((pooling == WLM_POOLING_CLS && pos == 0) || (pooling == WLM_POOLING_LAST && pos + 1 == n_tokens[ti]))
                wlm_memcpy(row, h, (uint64_t)d * 4);
        }
        for (uint32_t t = cur; t < i; t++) finish_row(out + (uint64_t)t * d, d, n_tokens[t], pooling, flags);
        off += n;
        if (i < n_texts && k > 0) { /* text i stays open: drop the finished ones only */
            for (uint32_t s = 0; s < c->n_seq_max; s++)
                if (s != open_seq) wlm_seq_remove(c, s, 0);
        } else {
            wlm_ctx_reset(c);
        }
        cur = i;
        done = k;
    }
    wlm_ctx_reset(c);
    return WLM_OK;
}
