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
 * profiles since); when no whole block is free, any free slot will do.
 *
 * The window ring. A sliding-window layer (wlm_layer.swa, window W =
 * n_swa) only ever reads the last W positions of a sequence, so it need
 * not keep a row per slot: it keeps its keys and values in a ring of
 * n_ring rows shared by every sliding-window layer, and slot j's row there
 * is slot_row[j] (-1: none). Slots stay what they are (the layers that see
 * everything keep a row per slot, and every position keeps its slot); only
 * the rows of the window layers are fewer. Attention still walks the
 * slots in slot order and reads each visible one's ring row, so a query
 * sees the same keys in the same order, and computes the same bits, as
 * with a row per slot.
 *
 * A ring row is dropped only when every sequence using its slot has moved
 * past it: position p of a slot of sequence s is seen by queries at
 * positions < p + W, so once the chunk being evaluated starts at or after
 * p + W for every such s, no query will see it again (unless s rewinds).
 * Rows are dropped lazily, when a new token finds no free row, so the ring
 * keeps what it can; until then rewinds cost nothing. A rewind of s to t
 * needs positions t - W + 1 .. t - 1: seq_floor[s] is the lowest t that
 * is still possible (the highest dropped position of s plus W), and a
 * deeper wlm_seq_truncate fails without changing anything.
 *
 * How many rows: before a chunk, sequence s needs its positions from
 * seq_pos[s] - W + 1 on (at most W - 1 rows), and the chunk adds at most
 * n_batch tokens, so n_seq_max (W - 1) + n_batch rows never run out. When
 * that is not fewer than n_ctx (or swa_full asks for it) there is no ring
 * and the window layers keep a row per slot. With one sequence, rows are
 * taken and dropped in position order (the search starts after the last
 * row taken, and a rewind frees the newest rows, just behind it), so the
 * ring holds the last n_ring positions: a rewind of up to n_batch
 * positions always succeeds. A rewind into a sequence's last chunk does
 * too (its rows were only dropped for queries before that chunk), until
 * other sequences' chunks drop more. */
#include "ctx.h"

uint32_t wlm_kv_ring_rows(const wlm_model *m, const wlm_ctx_params *p) {
    uint32_t any = 0;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) any |= m->layers[l].swa;
    if (!any || !m->n_swa || p->swa_full) return 0;
    uint64_t rows = (uint64_t)p->n_seq_max * (m->n_swa - 1) + p->n_batch;
    return rows < p->n_ctx ? (uint32_t)rows : 0;
}

void wlm_kv_reset(wlm_ctx *c) {
    for (uint32_t j = 0; j < c->n_ctx; j++) { c->slot_pos[j] = -1; c->slot_seq[j] = 0; }
    for (uint32_t s = 0; s < WLM_MAX_SEQ; s++) c->seq_pos[s] = c->seq_next[s] = c->seq_floor[s] = 0;
    c->n_slots = 0; c->n_free = c->n_ctx; c->free_hint = 0;
    c->slid = 0; c->n_logits = 0;
    if (c->n_ring) {
        for (uint32_t j = 0; j < c->n_ctx; j++) c->slot_row[j] = -1;
        for (uint32_t r = 0; r < c->n_ring; r++) { c->row_slot[r] = -1; c->row_pos[r] = -1; }
    }
    c->ring_free = c->n_ring; c->ring_hand = 0;
}

/* slot j's ring row, if any, is free again */
static void row_release(wlm_ctx *c, uint32_t j) {
    if (!c->n_ring || c->slot_row[j] < 0) return;
    uint32_t r = (uint32_t)c->slot_row[j];
    c->row_slot[r] = -1; c->row_pos[r] = -1;
    c->slot_row[j] = -1;
    c->ring_free++;
}

static void slot_release(wlm_ctx *c, uint32_t j) {
    row_release(c, j);
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

void wlm_kv_overwrite(wlm_ctx *c, uint32_t j, int32_t pos) {
    row_release(c, j);
    c->slot_pos[j] = pos;
}

/* whether no query of the chunk, or after it, sees ring row r: its position
 * p is below lo[s] - W + 1 for every sequence s using its slot (lo[s]: the
 * first position s queries from now on) */
static int row_unseen(const wlm_ctx *c, uint32_t r, const uint32_t *lo) {
    uint32_t j = (uint32_t)c->row_slot[r];
    uint64_t p = (uint64_t)c->slot_pos[j] + c->m->n_swa, seqs = c->slot_seq[j];
    for (uint32_t s = 0; seqs; s++, seqs >>= 1)
        if ((seqs & 1) && p > lo[s]) return 0;
    return 1;
}

/* drops ring row r: its slot's sequences can no longer rewind below its position + W */
static void row_drop(wlm_ctx *c, uint32_t r) {
    uint32_t j = (uint32_t)c->row_slot[r];
    uint32_t floor = (uint32_t)c->slot_pos[j] + c->m->n_swa;
    uint64_t seqs = c->slot_seq[j];
    for (uint32_t s = 0; seqs; s++, seqs >>= 1)
        if ((seqs & 1) && c->seq_floor[s] < floor) c->seq_floor[s] = floor;
    row_release(c, j);
}

static uint32_t row_next(const wlm_ctx *c, uint32_t r) { return r + 1 == c->n_ring ? 0 : r + 1; }

static void row_give(wlm_ctx *c, uint32_t r, uint32_t j) {
    c->row_slot[r] = (int32_t)j; c->row_pos[r] = c->slot_pos[j];
    c->slot_row[j] = (int32_t)r;
    c->ring_free--;
    c->ring_hand = row_next(c, r);
}

int32_t wlm_kv_take_row(wlm_ctx *c, uint32_t j) {
    if (!c->n_ring || !c->ring_free) return -1;
    uint32_t r = c->ring_hand;
    while (c->row_slot[r] >= 0) r = row_next(c, r);
    row_give(c, r, j);
    return (int32_t)r;
}

/* The next row: a free one, else the first row from the hand on that no
 * query sees any more. One always exists (the ring's size, above); were
 * the rule broken, the hand's row would be taken anyway, so that memory
 * stays in bounds, and the floors it raises refuse rewinds over it. */
void wlm_kv_take_rows(wlm_ctx *c, uint32_t n) {
    if (!c->n_ring) return;
    uint32_t lo[WLM_MAX_SEQ];
    for (uint32_t s = 0; s < c->n_seq_max; s++) lo[s] = c->seq_pos[s];
    for (uint32_t t = 0; t < n; t++) lo[c->tok_seq[t]] = WLM_MIN(lo[c->tok_seq[t]], (uint32_t)c->tok_pos[t]);
    for (uint32_t t = 0; t < n; t++) {
        int32_t r = wlm_kv_take_row(c, c->tok_slot[t]);
        if (r < 0) {
            uint32_t h = c->ring_hand, i = 0;
            while (i < c->n_ring && !row_unseen(c, h, lo)) { h = row_next(c, h); i++; }
            if (i == c->n_ring) h = c->ring_hand;
            row_drop(c, h);
            row_give(c, h, c->tok_slot[t]);
            r = (int32_t)h;
        }
        c->tok_row[t] = (uint32_t)r;
    }
}

uint32_t wlm_kv_rows(const wlm_ctx *c, uint32_t l) { return c->kv[l].ring ? c->n_ring : c->n_ctx; }

int32_t wlm_kv_row(const wlm_ctx *c, uint32_t l, uint32_t j) {
    if (j >= c->n_ctx || c->slot_pos[j] < 0) return -1;
    return c->kv[l].ring ? c->slot_row[j] : (int32_t)j;
}

void *wlm_kv_head(const wlm_ctx *c, uint32_t l, int values, uint32_t h) {
    const wlm_kv_layer *L = &c->kv[l];
    uint64_t esz = c->p.kv_type == WLM_KV_F16 ? 2 : 4;
    return (uint8_t *)(values ? L->v : L->k) + h * (values ? L->head_stride_v : L->head_stride) * esz;
}

uint32_t wlm_ctx_window_rows(const wlm_ctx *c) { return c ? c->n_ring : 0; }

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
    if (pos < c->seq_floor[seq] && pos < c->seq_pos[seq])
        return wlm_fail(err, WLM_ERR_STATE, "cannot rewind sequence %u to %u: its sliding-window layers dropped the "
                        "positions before %u, so %u is the lowest it can go to (evaluate again from 0, or plan with swa_full)",
                        seq, pos, c->seq_floor[seq] - c->m->n_swa + 1, c->seq_floor[seq]);
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
    c->seq_pos[seq] = c->seq_next[seq] = c->seq_floor[seq] = 0;
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
    c->seq_floor[dst] = c->seq_floor[src];
    return WLM_OK;
}

uint32_t wlm_seq_pos(const wlm_ctx *c, uint32_t seq) {
    return c && seq < c->n_seq_max ? c->seq_pos[seq] : 0;
}

uint32_t wlm_ctx_free_slots(const wlm_ctx *c) { return c ? c->n_free : 0; }
