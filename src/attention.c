/* Attention of queries over the KV cache: tile by tile of the slots a query
 * may see, with an online softmax, for one query (wlm_attention_tiled_kv)
 * or a block of queries sharing each tile (wlm_attention_block). The
 * forward pass (forward.c) hands out the items; this file is the math. */
#include "attention.h"
#include "wmath.h"

/* Attention of one query head over the cached keys/values, tile by tile with
 * an online softmax: for each tile of WLM_ATT_TILE slots compute the scores
 * s_j = q.k_j * scale, raise the running max m if needed (rescaling the
 * running sum and output by exp(m_old - m_new)), then add exp(s_j - m) and
 * exp(s_j - m) v_j. No n x n score matrix is ever formed: memory is one tile.
 * Slot j takes part when 0 <= slot_pos[j] <= qpos (causal mask).
 * (the mask's softcap, when set, caps each score first: att_tile_step) */
void wlm_attention_tiled(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                         int kv_f16, const int32_t *slot_pos, uint32_t n_slots, int32_t qpos,
                         int32_t window_lo, uint32_t hd, float scale, float *out, float *tile) {
    uint32_t idx[WLM_ATT_TILE];
    wlm_att_mask mask = { slot_pos, 0, 0, n_slots, qpos, window_lo, 0, 0, 0 };
    wlm_attention_tiled_kv(k, q, kc, vc, kv_f16, &mask, hd, hd, scale, out, tile, idx);
}

/* One tile of the online softmax for one query: the scores of the tn slots
 * idx[0..tn) of kc, the running max *m raised if needed (the running sum and
 * the output rescaled by exp(m_old - m_new)), then out += exp(s - m) v. */
static void att_tile_step(const wlm_kernels *k, const float *q, const void *kc, const void *vc, int kv_f16,
                          const uint32_t *idx, uint32_t tn, uint32_t hd_k, uint32_t hd, float scale,
                          float softcap, float *out, float *tile, float *m, float *sum) {
    k->att_scores(tn, hd_k, q, kc, kv_f16, idx, scale, tile);
    if (softcap > 0)
        for (uint32_t i = 0; i < tn; i++) tile[i] = wlm_softcap(tile[i], softcap);
    float tmax = -3.0e38f;
    for (uint32_t i = 0; i < tn; i++)
        if (tile[i] > tmax) tmax = tile[i];
    if (tmax > *m) {
        float corr = wlm_expf_fast(*m - tmax);
        *sum *= corr;
        k->scale(hd, corr, out);
        *m = tmax;
    }
    k->exp_shift(tn, tile, *m); /* the tile's weights exp(s - m) */
    float s = *sum;
    for (uint32_t i = 0; i < tn; i++) s += tile[i];
    *sum = s;
    k->att_accum(tn, hd, tile, vc, kv_f16, idx, out);
}

/* whether mk lets its query see slot i */
static int att_visible(const wlm_att_mask *mk, uint32_t i) {
    int32_t p = mk->slot_pos[i];
    return p >= 0 && p <= mk->qpos && p >= mk->window_lo && (!mk->slot_seq || (mk->slot_seq[i] & mk->seq_bit));
}

/* the next tile of the slots mk lets its query see, from slot *j on: their
 * rows in idx (the slots themselves, or their rows in mk->row_of), their
 * count returned (0: none left) */
static uint32_t att_next_tile(const wlm_att_mask *mk, uint32_t *j, uint32_t *idx) {
    uint32_t tn = 0, i = *j;
    if (mk->row_of) {
        for (; i < mk->n_slots && tn < WLM_ATT_TILE; i++)
            if (att_visible(mk, i) && mk->row_of[i] >= 0) idx[tn++] = (uint32_t)mk->row_of[i];
    } else {
        for (; i < mk->n_slots && tn < WLM_ATT_TILE; i++)
            if (att_visible(mk, i)) idx[tn++] = i;
    }
    *j = i;
    return tn;
}

/* wlm_attention_tiled with keys (and the query) of hd_k elements and values of hd_v.
 * A tile is the next WLM_ATT_TILE slots the query may see (slots it may
 * not see are skipped, not padded), so the result depends only on the
 * visible slots and their order, not on what lies between them. */
void wlm_attention_tiled_kv(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                            int kv_f16, const wlm_att_mask *mk, uint32_t hd_k, uint32_t hd,
                            float scale, float *out, float *tile, uint32_t *idx) {
    float m = -3.0e38f, sum = 0.0f;
    for (uint32_t i = 0; i < hd; i++) out[i] = 0.0f;
    uint32_t j = 0, tn;
    while ((tn = att_next_tile(mk, &j, idx)))
        att_tile_step(k, q, kc, vc, kv_f16, idx, tn, hd_k, hd, scale, mk->softcap, out, tile, &m, &sum);
    if (sum > 0) k->scale(hd, 1.0f / sum, out);
}

/* Whether the slots mk lets its query see hold ascending positions in slot
 * order: then what a query of the same sequence at an earlier position sees
 * is a prefix of them, and its tiles are the first ones of mk's query, the
 * last maybe cut short (wlm_attention_block relies on it). */
int wlm_att_ascending(const wlm_att_mask *mk) {
    int32_t last = -1;
    for (uint32_t i = 0; i < mk->n_slots; i++) {
        if (!att_visible(mk, i)) continue;
        if (mk->slot_pos[i] <= last) return 0;
        last = mk->slot_pos[i];
    }
    return 1;
}

/* Flash-attention order for nq queries that read one KV head of one
 * sequence (the query heads of a GQA group, and/or consecutive tokens):
 * tile by tile of the slots mk's query sees (mk->qpos = the largest of
 * qpos[]), every query takes the part of the tile it sees, so each tile of
 * keys and values is read from memory once for all of them and then from
 * the cache. Query i sees the slots with position <= qpos[i]; they must be a
 * prefix of mk's (wlm_att_ascending), so its tiles are the ones it would
 * take alone and every output equals wlm_attention_tiled_kv's bit for bit.
 * kvt (F16 caches; else NULL): room for one tile of keys and one of values
 * as floats (2 x WLM_ATT_TILE x max(hd_k, hd) floats): the tile is converted
 * once (exactly) and the queries run the F32 kernels on it, which take the
 * same operations in the same order as the F16 ones. */
void wlm_attention_block(const wlm_kernels *k, uint32_t nq, const float *const *q, float *const *out, const int32_t *qpos,
                         const void *kc, const void *vc, int kv_f16, const wlm_att_mask *mk, uint32_t hd_k, uint32_t hd,
                         float scale, float *tile, uint32_t *idx, float *kvt) {
    float m[WLM_ATT_MAXQ], sum[WLM_ATT_MAXQ];
    uint32_t iota[WLM_ATT_TILE];
    for (uint32_t i = 0; i < WLM_ATT_TILE; i++) iota[i] = i;
    float *kt = kvt, *vt = kvt ? kvt + (uint64_t)WLM_ATT_TILE * WLM_MAX(hd_k, hd) : 0;
    const int32_t *rpos = mk->row_of ? mk->row_pos : mk->slot_pos; /* the position of a row of idx */
    for (uint32_t q0 = 0; q0 < nq; q0 += WLM_ATT_MAXQ) {
        uint32_t q1 = WLM_MIN(nq, q0 + WLM_ATT_MAXQ);
        for (uint32_t i = q0; i < q1; i++) {
            m[i - q0] = -3.0e38f;
            sum[i - q0] = 0.0f;
            for (uint32_t d = 0; d < hd; d++) out[i][d] = 0.0f;
        }
        uint32_t j = 0, tn;
        while ((tn = att_next_tile(mk, &j, idx))) {
            const void *kk = kc, *vv = vc;
            const uint32_t *ix = idx;
            int f16 = kv_f16;
            if (kv_f16 && kvt) {
                for (uint32_t r = 0; r < tn; r++) {
                    k->cvt_f16(hd_k, (const uint16_t *)kc + (uint64_t)idx[r] * hd_k, kt + (uint64_t)r * hd_k);
                    k->cvt_f16(hd, (const uint16_t *)vc + (uint64_t)idx[r] * hd, vt + (uint64_t)r * hd);
                }
                kk = kt;
                vv = vt;
                ix = iota;
                f16 = 0;
            }
            for (uint32_t i = q0; i < q1; i++) {
                uint32_t n = 0; /* the tile's first n slots are the ones query i sees */
                while (n < tn && rpos[idx[n]] <= qpos[i]) n++;
                if (n) att_tile_step(k, q[i], kk, vv, f16, ix, n, hd_k, hd, scale, mk->softcap, out[i], tile, &m[i - q0], &sum[i - q0]);
            }
        }
        for (uint32_t i = q0; i < q1; i++)
            if (sum[i - q0] > 0) k->scale(hd, 1.0f / sum[i - q0], out[i]);
    }
}
