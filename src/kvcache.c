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
    for (uint32_t j = 0; j < c->n_ctx; j++) {
        c->slot_pos[j] = -1;
        c->slot_seq[j] = 0;
    }
    for (uint32_t s = 0; s < WLM_MAX_SEQ; s++) c->seq_pos[s] = c->seq_next[s] = c->seq_floor[s] = 0;
    c->n_slots = 0;
    c->n_free = c->n_ctx;
    c->free_hint = 0;
    c->slid = 0;
    c->n_logits = 0;
    if (c->n_ring) {
        for (uint32_t j = 0; j < c->n_ctx; j++) c->slot_row[j] = -1;
        for (uint32_t r = 0; r < c->n_ring; r++) {
            c->row_slot[r] = -1;
            c->row_pos[r] = -1;
        }
    }
    c->ring_free = c->n_ring;
    c->ring_hand = 0;
}

/* slot j's ring row, if any, is free again */
static void row_release(wlm_ctx *c, uint32_t j) {
    if (!c->n_ring || c->slot_row[j] < 0) return;
    uint32_t r = (uint32_t)c->slot_row[j];
    c->row_slot[r] = -1;
    c->row_pos[r] = -1;
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
        if (b >= c->n_slots) return b; /* nothing is used from n_slots on */
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
            if (j >= c->n_ctx)
                for (j = c->free_hint; c->slot_seq[j] != 0; j++) {} /* the caller checked n_free > 0 */
        }
    }
    c->slot_seq[j] = 1ull << seq;
    c->slot_pos[j] = pos;
    c->n_free--;
    if (j == c->free_hint)
        while (++c->free_hint < c->n_ctx && c->slot_seq[c->free_hint] != 0) {}
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
    c->row_slot[r] = (int32_t)j;
    c->row_pos[r] = c->slot_pos[j];
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

/* A ring row for slot j: a free one, else the first row from the hand on
 * that no query sees any more (lo[s]: the first position sequence s
 * queries from now on). One always exists (the ring's size, above); were
 * the rule broken, the hand's row would be taken anyway, so that memory
 * stays in bounds, and the floors it raises refuse rewinds over it. */
static uint32_t ring_take(wlm_ctx *c, uint32_t j, const uint32_t *lo) {
    int32_t r = wlm_kv_take_row(c, j);
    if (r >= 0) return (uint32_t)r;
    uint32_t h = c->ring_hand, i = 0;
    while (i < c->n_ring && !row_unseen(c, h, lo)) {
        h = row_next(c, h);
        i++;
    }
    if (i == c->n_ring) h = c->ring_hand;
    row_drop(c, h);
    row_give(c, h, j);
    return h;
}

void wlm_kv_take_rows(wlm_ctx *c, uint32_t n) {
    if (!c->n_ring) return;
    uint32_t lo[WLM_MAX_SEQ];
    for (uint32_t s = 0; s < c->n_seq_max; s++) lo[s] = c->seq_pos[s];
    for (uint32_t t = 0; t < n; t++) lo[c->tok_seq[t]] = WLM_MIN(lo[c->tok_seq[t]], (uint32_t)c->tok_pos[t]);
    for (uint32_t t = 0; t < n; t++) c->tok_row[t] = ring_take(c, c->tok_slot[t], lo);
}

uint32_t wlm_kv_slide_slot(const wlm_ctx *c, uint32_t pos) {
    uint32_t keep = c->p.n_keep, ring = c->n_ctx - keep;
    return pos < keep ? pos : keep + (pos - keep) % ring;
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
    wlm_err dummy;
    if (!err) err = &dummy;
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
        if (c->slot_pos[j] < (int32_t)pos) {
            next = j + 1;
            continue;
        }
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
    wlm_err dummy;
    if (!err) err = &dummy;
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
    wlm_err dummy;
    if (!err) err = &dummy;
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

/* ---- saved state: one sequence to bytes and back (wlm.h) ----------------------
 *
 * Header (ST_HDR bytes, little-endian):
 *    0 "WLMS"           4 u32 version        8 u64 total bytes
 *   16 u64 checksum: wlm_hash64 of every byte, these 8 read as zero
 *   24 u64 model fingerprint                32 u32 flags (bit 0: rng)
 *   36 u32 KV element type (WLM_KV_*)       40 u32 n_layer
 *   44 u32 n_head_kv     48 u32 head_dim    52 u32 head_dim_v
 *   56 u32 n_tokens      60 u32 n_pos       64 u32 n_rows
 *   68 u32 ring: n_ctx of a slid sequence's ring (0: not slid)
 *   72 u32 n_keep of that ring
 *   76 u32 floor: the lowest position the sequence can be rewound to
 *          (seq_floor; 0, or >= the window when the window ring dropped rows)
 *   80 u64 rng state     88 u64 rng inc
 * then i32 tokens[n_tokens], i32 positions[n_rows] (ascending), u32
 * rows[n_layer] (the rows each layer keeps: the last rows[l] positions), and
 * per layer its keys [rows][n_head_kv][head_dim] and values
 * [rows][n_head_kv][head_dim_v] in the cache's element type.
 *
 * Which rows: a layer without a window keeps every position's. A
 * sliding-window layer keeps those from floor - W + 1 on (every one when
 * floor is 0): the window ring may have dropped older ones (kvcache.c: a
 * dropped position p raises the floor to at least p + W, so every position
 * from floor - W + 1 on still has its row), no query after a rewind to the
 * floor or later sees them, and a row kept by chance below them is not
 * worth its bytes. So a state of a sequence far past the window holds, per
 * window layer, about as many rows as the ring did, whether the context
 * kept a ring or a row per slot (swa_full: the floor stays 0, so every
 * row). Loaded, the floor comes back with the rows, and a rewind after the
 * load goes exactly as deep as it could before the save; the rows go
 * wherever the loading context keeps them (its ring, or a row per slot),
 * so a state moves between windowCache 'window' and 'full' contexts: a ring
 * too small for all of them keeps the newest, dropping the others as
 * evaluation does (raising the floor). */

#define ST_HDR 96u
#define ST_FLAG_RNG 1u

/* whether layer l of c's model is a sliding-window layer */
static int st_window_layer(const wlm_ctx *c, uint32_t l) { return c->m->n_swa && c->m->layers[l].swa; }

/* the first position whose rows the window layers keep, for a floor */
static uint32_t st_window_from(const wlm_ctx *c, uint32_t floor) { return floor ? floor - c->m->n_swa + 1 : 0; }

static void slots_sift(uint32_t *s, const int32_t *pos, uint32_t n, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && pos[s[l]] > pos[s[w]]) w = l;
        if (r < n && pos[s[r]] > pos[s[w]]) w = r;
        if (w == i) return;
        uint32_t x = s[i];
        s[i] = s[w];
        s[w] = x;
        i = w;
    }
}

/* The cache slots of sequence seq, in position order (slots: room for
 * n_ctx); returns their count. A sequence's slots are nearly always
 * ascending in position already (a slid ring is not): then they are
 * heap-sorted. */
static uint32_t seq_slots(const wlm_ctx *c, uint32_t seq, uint32_t *slots) {
    uint64_t bit = 1ull << seq;
    uint32_t n = 0, sorted = 1;
    for (uint32_t j = 0; j < c->n_slots; j++) {
        if (!(c->slot_seq[j] & bit)) continue;
        if (n && c->slot_pos[j] < c->slot_pos[slots[n - 1]]) sorted = 0;
        slots[n++] = j;
    }
    if (!sorted) {
        for (uint32_t i = n / 2; i-- > 0;) slots_sift(slots, c->slot_pos, n, i);
        for (uint32_t end = n; end > 1; end--) {
            uint32_t x = slots[0];
            slots[0] = slots[end - 1];
            slots[end - 1] = x;
            slots_sift(slots, c->slot_pos, end - 1, 0);
        }
    }
    return n;
}

/* of a sequence's n_rows rows, how many layer l keeps (the last ones):
 * n_win of them in a sliding-window layer, all in the others */
static uint32_t layer_rows(const wlm_ctx *c, uint32_t l, uint32_t n_rows, uint32_t n_win) {
    return st_window_layer(c, l) ? n_win : n_rows;
}

/* bytes of one row's keys and values (all heads) in one layer */
static uint64_t row_bytes(const wlm_ctx *c) {
    const wlm_hparams *hp = &c->m->hp;
    return (uint64_t)hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * (c->p.kv_type == WLM_KV_F16 ? 2 : 4);
}

/* the keys (values) of head h in row `row` of layer l */
static uint8_t *kv_at(const wlm_ctx *c, int values, uint32_t l, uint32_t h, uint32_t row) {
    const wlm_hparams *hp = &c->m->hp;
    uint64_t b = (uint64_t)(values ? hp->head_dim_v : hp->head_dim) * (c->p.kv_type == WLM_KV_F16 ? 2 : 4);
    return (uint8_t *)wlm_kv_head(c, l, values, h) + row * b;
}

/* the size of a state of n_tokens tokens and n_rows (<= n_ctx) rows, n_win
 * of them kept by the window layers: below 2^63 (tokens < 2^32, rows <=
 * 2^24, row bytes < 2^27, layers <= 1024) */
static uint64_t st_size(const wlm_ctx *c, uint64_t n_tokens, uint32_t n_rows, uint32_t n_win) {
    uint32_t n_layer = c->m->hp.n_layer;
    uint64_t size = ST_HDR + 4 * (n_tokens + n_rows + n_layer);
    for (uint32_t l = 0; l < n_layer; l++) size += (uint64_t)layer_rows(c, l, n_rows, n_win) * row_bytes(c);
    return size;
}

static uint64_t st_checksum(const uint8_t *d, uint64_t total) {
    static const uint8_t zero[8];
    uint64_t h = wlm_hash64(0, d, 16);
    h = wlm_hash64(h, zero, 8);
    return wlm_hash64(h, d + 24, total - 24);
}

/* a sequence's rows, and how many of them the window layers keep (*n_win) */
static uint32_t seq_row_count(const wlm_ctx *c, uint32_t seq, uint32_t *n_win) {
    uint64_t bit = 1ull << seq;
    uint32_t n = 0, w = 0, from = st_window_from(c, c->seq_floor[seq]);
    for (uint32_t j = 0; j < c->n_slots; j++)
        if (c->slot_seq[j] & bit) {
            n++;
            w += (uint32_t)c->slot_pos[j] >= from;
        }
    *n_win = w;
    return n;
}

uint64_t wlm_ctx_state_size(const wlm_ctx *c, uint32_t seq, uint32_t n_tokens) {
    if (!c || seq >= c->n_seq_max) return 0;
    uint32_t n_win, n_rows = seq_row_count(c, seq, &n_win);
    return st_size(c, n_tokens, n_rows, n_win);
}

wlm_status wlm_ctx_state_save(const wlm_ctx *c, uint32_t seq, const int32_t *tokens, uint32_t n_tokens,
                              const wlm_rng *rng, uint8_t *out, uint64_t cap, uint64_t *written, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (written) *written = 0;
    wlm_status st = check_seq(c, seq, "wlm_ctx_state_save", err);
    if (st) return st;
    if (!out || (n_tokens && !tokens)) return wlm_fail(err, WLM_ERR_ARG, "wlm_ctx_state_save: NULL argument");
    const wlm_hparams *hp = &c->m->hp;
    uint32_t n_pos = c->seq_pos[seq];
    if (n_tokens < n_pos)
        return wlm_fail(err, WLM_ERR_ARG, "sequence %u holds %u positions, but %u tokens were given (its tokens up to at least there)", seq, n_pos, n_tokens);
    for (uint32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return wlm_fail(err, WLM_ERR_ARG, "token %u of the state (%d) is out of range (vocabulary has %u)", i, tokens[i], hp->n_vocab);
    uint32_t n_win, n_rows = seq_row_count(c, seq, &n_win);
    uint64_t size = st_size(c, n_tokens, n_rows, n_win);
    if (cap < size) return wlm_fail(err, WLM_ERR_ARG, "the state needs %llu bytes, %llu given", (unsigned long long)size, (unsigned long long)cap);
    uint32_t *slots = wlm_sys_alloc((uint64_t)WLM_MAX(n_rows, 1u) * 4);
    if (!slots) return wlm_fail_nomem(err, "the saved state's row list", (uint64_t)n_rows * 4);
    seq_slots(c, seq, slots);
    /* every row the format promises is there (kvcache.c: the floor's rule) */
    for (uint32_t l = 0; l < hp->n_layer; l++)
        for (uint32_t i = n_rows - layer_rows(c, l, n_rows, n_win); i < n_rows; i++)
            if (wlm_kv_row(c, l, slots[i]) < 0) {
                wlm_sys_free(slots);
                return wlm_fail(err, WLM_ERR_STATE, "wlm_ctx_state_save: layer %u lost the row of position %d (above the floor %u): a bug",
                                l, c->slot_pos[slots[i]], c->seq_floor[seq]);
            }
    int slid = seq == 0 && c->slid;
    wlm_memset(out, 0, ST_HDR);
    wlm_memcpy(out, "WLMS", 4);
    wlm_wr32(out + 4, WLM_STATE_VERSION);
    wlm_wr64(out + 8, size);
    wlm_wr64(out + 24, c->m->fingerprint);
    wlm_wr32(out + 32, rng ? ST_FLAG_RNG : 0);
    wlm_wr32(out + 36, c->p.kv_type);
    wlm_wr32(out + 40, hp->n_layer);
    wlm_wr32(out + 44, hp->n_head_kv);
    wlm_wr32(out + 48, hp->head_dim);
    wlm_wr32(out + 52, hp->head_dim_v);
    wlm_wr32(out + 56, n_tokens);
    wlm_wr32(out + 60, n_pos);
    wlm_wr32(out + 64, n_rows);
    wlm_wr32(out + 68, slid ? c->n_ctx : 0);
    wlm_wr32(out + 72, slid ? c->p.n_keep : 0);
    wlm_wr32(out + 76, c->seq_floor[seq]);
    if (rng) {
        wlm_wr64(out + 80, rng->state);
        wlm_wr64(out + 88, rng->inc);
    }
    uint8_t *p = out + ST_HDR;
    for (uint32_t i = 0; i < n_tokens; i++, p += 4) wlm_wr32(p, (uint32_t)tokens[i]);
    for (uint32_t i = 0; i < n_rows; i++, p += 4) wlm_wr32(p, (uint32_t)c->slot_pos[slots[i]]);
    for (uint32_t l = 0; l < hp->n_layer; l++, p += 4) wlm_wr32(p, layer_rows(c, l, n_rows, n_win));
    uint64_t esz = c->p.kv_type == WLM_KV_F16 ? 2 : 4, kb = hp->head_dim * esz, vb = hp->head_dim_v * esz;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        uint32_t nl = layer_rows(c, l, n_rows, n_win);
        for (int values = 0; values < 2; values++)
            for (uint32_t i = n_rows - nl; i < n_rows; i++) {
                uint32_t row = (uint32_t)wlm_kv_row(c, l, slots[i]);
                for (uint32_t h = 0; h < hp->n_head_kv; h++) {
                    uint64_t b = values ? vb : kb;
                    wlm_memcpy(p, kv_at(c, values, l, h, row), b);
                    p += b;
                }
            }
    }
    wlm_sys_free(slots);
    wlm_wr64(out + 16, st_checksum(out, size));
    if (written) *written = size;
    return WLM_OK;
}

static wlm_status slid_elsewhere(wlm_err *err, uint32_t ring, uint32_t keep) {
    return wlm_fail(err, WLM_ERR_CONTEXT_FULL, "the state's sequence slid through a ring of %u positions (%u kept): it continues only in a "
                                               "context of that length with onFull 'slide' and nKeep %u",
                    ring, keep, keep);
}

wlm_status wlm_ctx_state_load(wlm_ctx *c, uint32_t seq, const uint8_t *d, uint64_t size,
                              wlm_state_info *info, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_status st = check_seq(c, seq, "wlm_ctx_state_load", err);
    if (st) return st;
    if (!d && size) return wlm_fail(err, WLM_ERR_ARG, "wlm_ctx_state_load: NULL data");
    if (size < 4 ? !wlm_memeq(d, "WLMS", size) : !wlm_memeq(d, "WLMS", 4))
        return wlm_fail(err, WLM_ERR_FORMAT, "not a wasmlm saved state (it does not start with WLMS)");
    if (size < ST_HDR)
        return wlm_fail(err, WLM_ERR_TRUNCATED, "saved state cut short: %llu bytes, its header alone has %u", (unsigned long long)size, ST_HDR);
    uint32_t version = wlm_rd32(d + 4);
    if (version != WLM_STATE_VERSION)
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "saved state version %u: this engine reads version %u", version, WLM_STATE_VERSION);
    uint64_t total = wlm_rd64(d + 8);
    if (total < ST_HDR) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: it declares %llu bytes, less than its header", (unsigned long long)total);
    if (size < total)
        return wlm_fail(err, WLM_ERR_TRUNCATED, "saved state cut short: %llu of its %llu bytes", (unsigned long long)size, (unsigned long long)total);
    if (size > total)
        return wlm_fail(err, WLM_ERR_FORMAT, "saved state followed by %llu extra bytes (it has %llu)", (unsigned long long)(size - total), (unsigned long long)total);
    if (st_checksum(d, total) != wlm_rd64(d + 16)) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: its checksum does not match its bytes");
    /* the bytes are as a writer wrote them: now whether they fit this model and context */
    const wlm_hparams *hp = &c->m->hp;
    uint64_t fp = wlm_rd64(d + 24);
    if (fp != c->m->fingerprint)
        return wlm_fail(err, WLM_ERR_ARG, "the state was saved from another model (fingerprint %llx; this model's is %llx)",
                        (unsigned long long)fp, (unsigned long long)c->m->fingerprint);
    uint32_t flags = wlm_rd32(d + 32), kv_type = wlm_rd32(d + 36);
    if (wlm_rd32(d + 40) != hp->n_layer || wlm_rd32(d + 44) != hp->n_head_kv || wlm_rd32(d + 48) != hp->head_dim || wlm_rd32(d + 52) != hp->head_dim_v)
        return wlm_fail(err, WLM_ERR_ARG, "the state's cache shape (%u layers, %u KV heads of %u/%u) is not this model's (%u, %u of %u/%u)",
                        wlm_rd32(d + 40), wlm_rd32(d + 44), wlm_rd32(d + 48), wlm_rd32(d + 52), hp->n_layer, hp->n_head_kv, hp->head_dim, hp->head_dim_v);
    if (kv_type != c->p.kv_type)
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "the state holds a %s cache, this context's is %s (create it with that KV type)",
                        kv_type == WLM_KV_F16 ? "f16" : kv_type == WLM_KV_F32 ? "f32"
                                                                              : "?",
                        c->p.kv_type == WLM_KV_F16 ? "f16" : "f32");
    if (flags & ~ST_FLAG_RNG) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: unknown flags %x", flags);
    uint32_t n_tokens = wlm_rd32(d + 56), n_pos = wlm_rd32(d + 60), n_rows = wlm_rd32(d + 64);
    uint32_t ring = wlm_rd32(d + 68), keep = wlm_rd32(d + 72), floor = wlm_rd32(d + 76);
    wlm_rng rng = { wlm_rd64(d + 80), wlm_rd64(d + 88) };
    if ((flags & ST_FLAG_RNG) && !(rng.inc & 1)) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: the sampler stream's increment is even");
    if (!(flags & ST_FLAG_RNG) && (rng.state || rng.inc))
        return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: bytes that must be zero are not");
    if (n_pos > n_tokens || n_rows > n_pos)
        return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: %u tokens, %u positions, %u rows", n_tokens, n_pos, n_rows);
    /* a floor exists only where the window layers dropped a position p (it is then p + W, at most the sequence's end) */
    int windowed = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) windowed |= st_window_layer(c, l);
    if (floor && (!windowed || floor < c->m->n_swa || floor > n_pos))
        return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: a rewind floor of %u in a sequence of %u positions (%s)", floor, n_pos,
                        windowed ? "a floor is 0 or from the window on, up to the sequence's end" : "this model has no sliding-window layers");
    if (n_rows > c->n_ctx) {
        if (ring) return slid_elsewhere(err, ring, keep);
        return wlm_fail(err, WLM_ERR_CONTEXT_FULL, "the state holds %u positions, this context has room for %u (make the context at least %u long)",
                        n_rows, c->n_ctx, n_rows);
    }
    if (total < ST_HDR + 4ull * ((uint64_t)n_tokens + n_rows + hp->n_layer))
        return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: %llu bytes cannot hold %u tokens and %u rows", (unsigned long long)total, n_tokens, n_rows);
    const uint8_t *tok = d + ST_HDR, *posv = tok + 4ull * n_tokens, *rows = posv + 4ull * n_rows;
    if (ring == 0) {
        /* every position 0 .. n_pos-1, in order */
        if (n_rows != n_pos || keep) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: %u positions, %u rows", n_pos, n_rows);
        for (uint32_t i = 0; i < n_rows; i++)
            if (wlm_rd32(posv + 4ull * i) != i) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: row %u holds position %u", i, wlm_rd32(posv + 4ull * i));
    } else {
        /* a slid sequence (onFull 'slide'): the first `keep` positions and the
         * last ring - keep ones, in the ring's slots: only the same ring takes them */
        if (keep >= ring || n_rows != ring || n_pos <= ring)
            return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: a ring of %u slots (%u kept) with %u rows of %u positions", ring, keep, n_rows, n_pos);
        for (uint32_t i = 0; i < n_rows; i++) {
            uint32_t want = i < keep ? i : n_pos - n_rows + i;
            if (wlm_rd32(posv + 4ull * i) != want) return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: row %u holds position %u", i, wlm_rd32(posv + 4ull * i));
        }
    }
    /* the window layers' rows: the positions from the floor's on (ascending, so the last ones) */
    uint32_t from = st_window_from(c, floor), n_win = 0;
    for (uint32_t i = 0; i < n_rows; i++) n_win += wlm_rd32(posv + 4ull * i) >= from;
    if (total != st_size(c, n_tokens, n_rows, n_win))
        return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: %llu bytes, its counts make %llu", (unsigned long long)total,
                        (unsigned long long)st_size(c, n_tokens, n_rows, n_win));
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (wlm_rd32(rows + 4ull * l) != layer_rows(c, l, n_rows, n_win))
            return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: layer %u has %u rows, expected %u", l, wlm_rd32(rows + 4ull * l),
                            layer_rows(c, l, n_rows, n_win));
    for (uint32_t i = 0; i < n_tokens; i++)
        if (wlm_rd32(tok + 4ull * i) >= hp->n_vocab)
            return wlm_fail(err, WLM_ERR_FORMAT, "corrupt saved state: token %u (%d) is out of range (vocabulary has %u)", i, (int32_t)wlm_rd32(tok + 4ull * i), hp->n_vocab);
    if (ring && (seq != 0 || c->p.full_policy != WLM_FULL_SLIDE || c->n_ctx != ring || c->p.n_keep != keep)) return slid_elsewhere(err, ring, keep);
    /* room: the free slots plus those only this sequence holds now (the
     * window ring always has room: wlm_kv_ring_rows, and rows no query
     * sees any more make way as in an evaluation) */
    uint64_t bit = 1ull << seq;
    uint32_t own = 0;
    for (uint32_t j = 0; j < c->n_slots; j++) own += c->slot_seq[j] == bit;
    if (n_rows > c->n_free + own)
        return wlm_fail(err, WLM_ERR_CONTEXT_FULL, "the state needs %u cache slots, %u are free (other sequences hold the rest)", n_rows, c->n_free + own);

    uint32_t *slots = wlm_sys_alloc((uint64_t)WLM_MAX(n_rows, 1u) * 4);
    if (!slots) return wlm_fail_nomem(err, "the saved state's row list", (uint64_t)n_rows * 4);
    /* valid: the sequence becomes the saved one, its positions in the slots
     * the evaluation would have given them (wlm_kv_take, or the sliding
     * ring's), then its window rows in ascending order through the ring */
    wlm_seq_remove(c, seq, err);
    if (ring) {
        for (uint32_t j = 0; j < c->n_ctx; j++) {
            c->slot_seq[j] = 1;
            c->slot_pos[j] = -1;
        }
        for (uint32_t i = 0; i < n_rows; i++) {
            uint32_t pos = wlm_rd32(posv + 4ull * i);
            slots[i] = wlm_kv_slide_slot(c, pos);
            c->slot_pos[slots[i]] = (int32_t)pos;
        }
        c->n_free = 0;
        c->n_slots = c->n_ctx;
        c->free_hint = c->n_ctx;
        c->seq_next[0] = c->n_ctx;
        c->slid = n_pos - c->n_ctx;
    } else {
        for (uint32_t i = 0; i < n_rows; i++) slots[i] = wlm_kv_take(c, seq, (int32_t)i);
    }
    c->seq_pos[seq] = n_pos;
    c->seq_floor[seq] = floor;
    c->n_logits = 0;
    if (c->n_ring) {
        uint32_t lo[WLM_MAX_SEQ];
        for (uint32_t s = 0; s < c->n_seq_max; s++) lo[s] = c->seq_pos[s];
        for (uint32_t i = n_rows - n_win; i < n_rows; i++) ring_take(c, slots[i], lo);
    }
    uint64_t esz = c->p.kv_type == WLM_KV_F16 ? 2 : 4, kb = hp->head_dim * esz, vb = hp->head_dim_v * esz;
    const uint8_t *p = rows + 4ull * hp->n_layer;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        uint32_t nl = layer_rows(c, l, n_rows, n_win);
        for (int values = 0; values < 2; values++)
            for (uint32_t i = n_rows - nl; i < n_rows; i++) {
                int32_t row = wlm_kv_row(c, l, slots[i]); /* -1: a row a smaller ring dropped again */
                for (uint32_t h = 0; h < hp->n_head_kv; h++) {
                    uint64_t b = values ? vb : kb;
                    if (row >= 0) wlm_memcpy(kv_at(c, values, l, h, (uint32_t)row), p, b);
                    p += b;
                }
            }
    }
    wlm_sys_free(slots);
    if (info) {
        info->n_tokens = n_tokens;
        info->n_pos = n_pos;
        info->tokens_offset = ST_HDR;
        info->has_rng = (flags & ST_FLAG_RNG) != 0;
        info->rng = info->has_rng ? rng : (wlm_rng){ 0, 0 };
    }
    return WLM_OK;
}
