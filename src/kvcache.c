/* Sequences in the KV cache.
 *
 * The cache is one pool of n_ctx slots (src/ctx.c plans it). Slot j
 * holds the keys and values of one position, slot_pos[j], for the set of
 * sequences in slot_seq[j] (bit s = sequence s). A sequence is just the set
 * of slots with its bit plus its next position seq_pos[s]:
 *
 *   fork(src, dst)      dst's bit is added to every slot of src: the prefix
 *                       is shared, not copied (a 500-token prompt forked to
 *                       8 candidates costs 8 bit operations per slot);
 *   remove(s)           s's bit is cleared; slots left with no sequence are
 *                       free again;
 *   truncate(s, pos)    s's bit is cleared on its slots at positions >= pos.
 *
 * Attention visits a query's slots in slot order and builds its tiles from
 * the slots the query may see (see wlm_attention_tiled_kv), so a sequence
 * whose positions sit in ascending slots computes exactly what it would
 * compute alone in the cache, however other sequences' slots are
 * interleaved with its own. Where new tokens go (wlm_kv_take) only decides
 * how the cache is read: a sequence fills blocks of WLM_KV_BLOCK slots of
 * its own, so that the keys and values of several sequences decoded side
 * by side (best-of-N, beams) are read in runs instead of one slot in
 * every N (attention: 12 % of a best-of-8 step of s110m before, 9-11 % in
 * profiles since); when no whole block is free, any free slot will do. */
#include "ctx.h"

void wlm_kv_reset(wlm_ctx *c) {
    for (uint32_t j = 0; j < c->n_ctx; j++) { c->slot_pos[j] = -1; c->slot_seq[j] = 0; }
    for (uint32_t s = 0; s < WLM_MAX_SEQ; s++) c->seq_pos[s] = c->seq_next[s] = 0;
    c->n_slots = 0; c->n_free = c->n_ctx; c->free_hint = 0;
    c->slid = 0; c->n_logits = 0;
}

static void slot_release(wlm_ctx *c, uint32_t j) {
    c->slot_pos[j] = -1;
    c->n_free++;
    if (j < c->free_hint) c->free_hint = j;
}

/* lowers n_slots past free slots at the top, so attention scans less */
static void shrink(wlm_ctx *c) {
    while (c->n_slots > 0 && c->slot_seq[c->n_slots - 1] == 0) c->n_slots--;
}

/* the first slot of the lowest block at or above slot `from` that no
 * sequence uses, or n_ctx */
static uint32_t free_block(const wlm_ctx *c, uint32_t from) {
    uint32_t b = (from + WLM_KV_BLOCK - 1) / WLM_KV_BLOCK * WLM_KV_BLOCK;
    for (; b + WLM_KV_BLOCK <= c->n_ctx; b += WLM_KV_BLOCK) {
        if (b >= c->n_slots) return b;   /* nothing is used from n_slots on */
        uint32_t i = 0;
        while (i < WLM_KV_BLOCK && c->slot_seq[b + i] == 0) i++;
        if (i == WLM_KV_BLOCK) return b;
    }
    return c->n_ctx;
}

/* A sequence's next token goes to the slot after its highest one while that
 * is free and inside the block; at a block's end (or when that slot is
 * taken) to the lowest wholly free block above it; failing that, to the
 * lowest free slot above its highest one, and only then to any free slot
 * (a sequence whose slots are then out of order still attends correctly,
 * in another summation order). */
uint32_t wlm_kv_take(wlm_ctx *c, uint32_t seq, int32_t pos) {
    uint32_t j = c->seq_next[seq];
    if (j >= c->n_ctx || c->slot_seq[j] != 0 || j % WLM_KV_BLOCK == 0) {
        j = free_block(c, j);
        if (j >= c->n_ctx) {
            j = WLM_MAX(c->seq_next[seq], c->free_hint);
            while (j < c->n_ctx && c->slot_seq[j] != 0) j++;
            if (j >= c->n_ctx) for (j = c->free_hint; c->slot_seq[j] != 0; j++) {}   /* the caller checked n_free > 0 */
        }
    }
    c->slot_seq[j] = 1ull << seq;
    c->slot_pos[j] = pos;
    c->n_free--;
    if (j == c->free_hint) while (++c->free_hint < c->n_ctx && c->slot_seq[c->free_hint] != 0) {}
    if (j + 1 > c->n_slots) c->n_slots = j + 1;
    c->seq_next[seq] = j + 1;
    return j;
}

static wlm_status check_seq(const wlm_ctx *c, uint32_t seq, const char *what, wlm_err *err) {
    if (!c) return wlm_fail(err, WLM_ERR_ARG, "%s: NULL context", what);
    if (seq >= c->n_seq_max)
        return wlm_fail(err, WLM_ERR_ARG, "%s: sequence %u out of range (the context holds %u)", what, seq, c->n_seq_max);
    return WLM_OK;
}

wlm_status wlm_seq_truncate(wlm_ctx *c, uint32_t seq, uint32_t pos, wlm_err *err) {
    wlm_err dummy; if (!err) err = &dummy;
    wlm_status st = check_seq(c, seq, "wlm_seq_truncate", err);
    if (st) return st;
    if (pos > c->seq_pos[seq])
        return wlm_fail(err, WLM_ERR_ARG, "cannot truncate sequence %u to %u: it has %u positions", seq, pos, c->seq_pos[seq]);
    if (seq == 0 && c->slid && pos < c->seq_pos[0])
        return wlm_fail(err, WLM_ERR_STATE, "cannot rewind: positions already slid out of the window");
    uint64_t bit = 1ull << seq;
    uint32_t next = 0;
    for (uint32_t j = 0; j < c->n_slots; j++) {
        if (!(c->slot_seq[j] & bit)) continue;
        if (c->slot_pos[j] < (int32_t)pos) { next = j + 1; continue; }
        c->slot_seq[j] &= ~bit;
        if (!c->slot_seq[j]) slot_release(c, j);
    }
    shrink(c);
    c->seq_pos[seq] = pos;
    c->seq_next[seq] = next;
    c->n_logits = 0;
    return WLM_OK;
}

wlm_status wlm_seq_remove(wlm_ctx *c, uint32_t seq, wlm_err *err) {
    wlm_err dummy; if (!err) err = &dummy;
    wlm_status st = check_seq(c, seq, "wlm_seq_remove", err);
    if (st) return st;
    uint64_t bit = 1ull << seq;
    for (uint32_t j = 0; j < c->n_slots; j++) {
        if (!(c->slot_seq[j] & bit)) continue;
        c->slot_seq[j] &= ~bit;
        if (!c->slot_seq[j]) slot_release(c, j);
    }
    shrink(c);
    c->seq_pos[seq] = c->seq_next[seq] = 0;
    if (seq == 0) c->slid = 0;
    return WLM_OK;
}

wlm_status wlm_seq_fork(wlm_ctx *c, uint32_t src, uint32_t dst, wlm_err *err) {
    wlm_err dummy; if (!err) err = &dummy;
    wlm_status st = check_seq(c, src, "wlm_seq_fork", err);
    if (st || (st = check_seq(c, dst, "wlm_seq_fork", err))) return st;
    if (src == dst) return WLM_OK;
    if (src == 0 && c->slid)
        return wlm_fail(err, WLM_ERR_STATE, "cannot fork sequence 0: positions slid out of its window");
    wlm_seq_remove(c, dst, err);
    uint64_t sb = 1ull << src, db = 1ull << dst;
    for (uint32_t j = 0; j < c->n_slots; j++)
        if (c->slot_seq[j] & sb) c->slot_seq[j] |= db;
    c->seq_pos[dst] = c->seq_pos[src];
    c->seq_next[dst] = c->seq_next[src];
    return WLM_OK;
}

uint32_t wlm_seq_pos(const wlm_ctx *c, uint32_t seq) {
    return c && seq < c->n_seq_max ? c->seq_pos[seq] : 0;
}

uint32_t wlm_ctx_free_slots(const wlm_ctx *c) { return c ? c->n_free : 0; }
