/* Attention over the KV cache (attention.c): one query or a block of
 * queries over the visible slots, tile by tile with an online softmax. */
#ifndef WLM_ATTENTION_H
#define WLM_ATTENTION_H

#include "kernels.h"

#define WLM_ATT_TILE 64
#define WLM_ATT_QB 8    /* tokens of one sequence whose queries share a pass over the cache */
#define WLM_ATT_MAXQ 64 /* queries one wlm_attention_block pass holds */

/* attention of one query head over cache slots (used by forward and tests) */
void wlm_attention_tiled(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                         int kv_f16, const int32_t *slot_pos, uint32_t n_slots, int32_t qpos,
                         int32_t window_lo, uint32_t head_dim, float scale, float *out, float *tile);
/* Which slots a query sees: slot j when 0 <= slot_pos[j] <= qpos,
 * slot_pos[j] >= window_lo and (slot_seq == NULL or slot_seq[j] & seq_bit).
 * `idx` is room for WLM_ATT_TILE slot indices. softcap > 0: every score s
 * becomes softcap * tanh(s / softcap) before the softmax (gemma2).
 * row_of (NULL: row j is slot j): the keys and values of slot j are at row
 * row_of[j] of kc/vc (a window ring; -1: not kept, never visible), and
 * row_pos[r] is the position of row r. */
typedef struct wlm_att_mask {
    const int32_t *slot_pos;
    const uint64_t *slot_seq;
    uint64_t seq_bit;
    uint32_t n_slots;
    int32_t qpos, window_lo;
    float softcap;
    const int32_t *row_of, *row_pos;
} wlm_att_mask;
/* the same with key/query heads of hd_k and value heads of hd_v elements */
void wlm_attention_tiled_kv(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                            int kv_f16, const wlm_att_mask *mask, uint32_t hd_k, uint32_t hd_v,
                            float scale, float *out, float *tile, uint32_t *idx);

/* nq queries on one KV head of one sequence in one pass over its tiles
 * (attention.c explains); their outputs equal wlm_attention_tiled_kv's */
void wlm_attention_block(const wlm_kernels *k, uint32_t nq, const float *const *q, float *const *out, const int32_t *qpos,
                         const void *kc, const void *vc, int kv_f16, const wlm_att_mask *mask, uint32_t hd_k, uint32_t hd_v,
                         float scale, float *tile, uint32_t *idx, float *kvt);
/* whether the slots mask lets its query see hold ascending positions */
int wlm_att_ascending(const wlm_att_mask *mask);

#endif
