/* An inference context (ctx.c: its memory plan; forward.c: the forward
 * pass; kvcache.c: sequences in the cache; sampler.c, speculative.c):
 * the KV cache, the scratch of a batch and the threads it runs on. */
#ifndef WLM_CTX_H
#define WLM_CTX_H

#include "model.h"
#include "kernels.h"
#include "threads.h"
#include "attention.h"

/* The keys and values of one layer: per KV head, one row per cache slot
 * (ring = 0) or per row of the window ring (ring = 1: a sliding-window
 * layer whose context keeps a ring, wlm_ctx.slot_row maps a slot to its
 * row); a row holds head_dim (keys) or head_dim_v (values) elements, F32 or
 * F16. Heads are head_stride (head_stride_v) elements apart. */
typedef struct wlm_kv_layer {
    void *k, *v;
    uint64_t head_stride, head_stride_v;
    uint32_t ring;
} wlm_kv_layer;

struct wlm_ctx {
    wlm_model *m;
    const wlm_kernels *k;
    wlm_ctx_params p;
    uint32_t n_ctx, n_batch;
    uint32_t slid; /* positions dropped by the sliding window (sequence 0) */
    /* sequences (src/kvcache.c): next position of each, and which sequences
     * use each cache slot (bit s of slot_seq[j]; 0 = the slot is free) */
    uint32_t n_seq_max, n_outputs;
    uint32_t seq_pos[WLM_MAX_SEQ];
    uint32_t seq_next[WLM_MAX_SEQ]; /* the slot after each sequence's highest slot (0: none) */
    uint64_t *slot_seq;
    uint32_t n_slots;   /* slots [0, n_slots) may be in use: attention scans these */
    uint32_t n_free;    /* free slots */
    uint32_t free_hint; /* no free slot below this one */
    /* the window ring (src/kvcache.c): the rows of the sliding-window layers
     * when they keep fewer rows than there are slots (n_ring > 0) */
    uint32_t n_ring;                 /* its rows; 0: every layer keeps a row per slot */
    int32_t *slot_row;               /* per slot: its ring row, -1: none (dropped: out of every window) */
    int32_t *row_slot;               /* per ring row: the slot it holds, -1: free */
    int32_t *row_pos;                /* per ring row: that slot's position (attention reads it by row) */
    uint32_t ring_free;              /* free ring rows */
    uint32_t ring_hand;              /* where the next search for a ring row starts */
    uint32_t seq_floor[WLM_MAX_SEQ]; /* the lowest position each sequence can be truncated to */
    /* the tokens of the chunk being evaluated: sequence, position, cache slot, ring row */
    uint32_t *tok_seq, *tok_slot;
    int32_t *tok_pos;
    uint32_t *tok_row;
    uint32_t *out_tok; /* chunk tokens whose logits are wanted, in order */
    uint32_t *att_run;
    int32_t *att_wpos; /* attention's runs of the chunk (forward.c, att_plan_runs) */
    wlm_kv_layer *kv;  /* per layer: where its keys and values are (wlm_kv_head) */
    int32_t *slot_pos; /* absolute position stored in each slot, -1 empty */
    /* scratch for a batch of up to n_batch tokens */
    float *x, *xb, *q, *kk, *vv, *att, *hb, *hb2;
    uint8_t *act, *act_k; /* quantized activations, n_batch rows: Q8_0 blocks, Q8_K blocks */
    uint64_t act_row_bytes;
    uint8_t *wrow;  /* per thread: one weight row unpacked for a batch (prefill) */
    uint8_t *act16; /* int8 activations widened to int16 + float scales (prefill) */
    uint64_t act16_row_bytes;
    uint64_t act8_off;   /* the i8x4 form of the same rows, at act16 + row * act16_row_bytes + act8_off */
    uint8_t *act_b;      /* a batch's input in the q4gb form (relaxed SIMD, q4g weights) */
    uint64_t wrow_bytes; /* bytes of one thread's wrow */
    wlm_pool *pool;
    uint32_t n_thr; /* threads running matmul/attention (1 = inline) */
    float *logits;
    uint32_t n_logits;
    float *att_tile;       /* one tile of scores per thread */
    uint32_t *att_idx;     /* the cache slots of that tile, per thread */
    float *att_kvt;        /* F16 caches: a tile of keys and values as floats, per thread (else NULL) */
    float *spec_q;         /* n_vocab: a dense draft distribution (wlm_spec_accept) */
    double *rope_freq;     /* n_rot/2 inverse frequencies base^(-2i/n_rot) */
    float *rope_cs;        /* cos/sin pairs for the position of each token of a chunk (n_rot floats apart) */
    double *rope_freq_swa; /* sliding-window layers with a RoPE base of their own (gemma3): their frequencies, else NULL */
    float *rope_cs_swa;    /* and their cos/sin pairs, as rope_cs (NULL when rope_freq_swa is) */
    /* sampler work space */
    int32_t *cand_id;
    float *cand_val;
    uint32_t *pen_count; /* n_vocab: a token's count in the penalty window, all zero between calls */
    void *sort_tmp;      /* 16 n_vocab bytes: the radix sorts of the candidates (top-k, typical) */
    void *mem;
    uint64_t mem_bytes;
};

/* log P(tok) under softmax(logits) at T = 1 (sampler.c): the vocabulary in
 * 32 fixed blocks, each by k->logit_max / k->sum_exp, blocks added in order;
 * wlm_ctx_token_logprob shares the blocks among c's threads, same value */
float wlm_token_logprob(const wlm_kernels *k, const float *logits, uint32_t n, int32_t tok);
/* the sampler's candidate order (sampler.c): keeps the best k (0 = all) of
 * v/id (ids ascending), larger value first, ties by smaller id; tmp (12 n
 * bytes, or NULL for the heap path) lets it radix-sort when k >= 256 */
uint32_t wlm_top_k_sorted(float *v, int32_t *id, uint32_t n, uint32_t k, void *tmp);
/* the first j in [i, n) with x[j] > thr, else n (sampler.c): the scalar
 * reference and the version the sampler uses (SIMD where built) */
uint32_t wlm_first_above_ref(const float *x, uint32_t i, uint32_t n, float thr);
uint32_t wlm_first_above(const float *x, uint32_t i, uint32_t n, float thr);
float wlm_ctx_token_logprob(wlm_ctx *c, const float *logits, uint32_t n, int32_t tok);
/* The first stages of the sampler (sampler.c): the usable tokens' logits
 * after the logit bias and the penalties, in cand_val / cand_id in ascending
 * id order; returns their count. sp must have passed the sampler's checks
 * (wlm_sample does them; tests call this to see the stages' exact values). */
uint32_t wlm_sample_logits(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                           const int32_t *hist, uint32_t n_hist);

/* forward.c: runs the n tokens whose sequence, position and cache slot are
 * in c->tok_seq/tok_pos/tok_slot (at most n_batch) and leaves each one's
 * final hidden state (decoders: after the final norm) in c->xb, n_embd
 * floats apart: no logits (embeddings, embed.c) */
void wlm_forward_hidden(wlm_ctx *c, const int32_t *tokens, uint32_t n);

/* ---- sequences in the cache (kvcache.c) ------------------------------------- */
void wlm_kv_reset(wlm_ctx *c);
/* slots a sequence fills before it takes another block (src/kvcache.c) */
#define WLM_KV_BLOCK 16u
/* takes a free slot (the caller checked c->n_free > 0) for seq at pos */
uint32_t wlm_kv_take(wlm_ctx *c, uint32_t seq, int32_t pos);
/* the sliding policy (WLM_FULL_SLIDE) overwrites slot j with position pos:
 * the ring row of its old position, if any, is released */
void wlm_kv_overwrite(wlm_ctx *c, uint32_t j, int32_t pos);
/* gives each of the n tokens of the chunk (c->tok_seq/tok_pos/tok_slot)
 * a ring row in c->tok_row, dropping rows that no query of the chunk or
 * after it can see (nothing to do without a ring) */
void wlm_kv_take_rows(wlm_ctx *c, uint32_t n);
/* the slot of position pos of the one sequence of a context sliding
 * (WLM_FULL_SLIDE): the first n_keep positions keep theirs, the others
 * share a ring of n_ctx - n_keep slots (before the first wrap, slot pos) */
uint32_t wlm_kv_slide_slot(const wlm_ctx *c, uint32_t pos);
/* gives slot j (which has none) a free ring row: its row, or -1 when none
 * is free or the context has no ring (a state being restored row by row) */
int32_t wlm_kv_take_row(wlm_ctx *c, uint32_t j);
/* Where the cache keeps what, for the forward pass and for anything that
 * reads or writes cache rows (a state serializer): layer l keeps slot j's
 * keys and values in row wlm_kv_row(c, l, j) of its wlm_kv_rows(c, l)
 * rows, -1 when it no longer does (a sliding-window layer's ring dropped a
 * position out of every sequence's window); wlm_kv_head gives the first
 * row of KV head h (values = 1: the value cache), rows head_dim (values:
 * head_dim_v) elements of the cache type apart. Slots in use are the j <
 * n_slots with slot_seq[j] != 0, at position slot_pos[j]. */
uint32_t wlm_kv_rows(const wlm_ctx *c, uint32_t l);
int32_t wlm_kv_row(const wlm_ctx *c, uint32_t l, uint32_t j);
void *wlm_kv_head(const wlm_ctx *c, uint32_t l, int values, uint32_t h);
/* rows the window ring of a context with these parameters has (0: none):
 * the plan's rule, src/kvcache.c explains it */
uint32_t wlm_kv_ring_rows(const wlm_model *m, const wlm_ctx_params *p);

#endif
