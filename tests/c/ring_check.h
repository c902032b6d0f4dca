/* The window ring's bookkeeping (src/kvcache.c), checked by the window and
 * saved-state tests: maps consistent both ways, ring_free right, a row's
 * position its slot's, and every position a sequence may still see (from
 * seq_pos - W + 1 on) holding a row. A context without a ring passes. */
#ifndef RING_CHECK_H
#define RING_CHECK_H
#include "../../src/internal.h"

static inline int ring_consistent(const wlm_ctx *c) {
    if (!c->n_ring) return 1;
    uint32_t used = 0, W = c->m->n_swa;
    for (uint32_t r = 0; r < c->n_ring; r++) {
        int32_t j = c->row_slot[r];
        if (j < 0) continue;
        used++;
        if (c->slot_row[j] != (int32_t)r || c->slot_seq[j] == 0 || c->row_pos[r] != c->slot_pos[j]) return 0;
    }
    if (used != c->n_ring - c->ring_free) return 0;
    for (uint32_t j = 0; j < c->n_ctx; j++) {
        if (c->slot_row[j] >= 0 && c->row_slot[c->slot_row[j]] != (int32_t)j) return 0;
        if (!c->slot_seq[j]) {
            if (c->slot_row[j] >= 0) return 0;
            continue;
        }
        for (uint32_t s = 0; s < c->n_seq_max; s++)
            if ((c->slot_seq[j] >> s & 1) && (int64_t)c->slot_pos[j] + W > c->seq_pos[s] && c->slot_row[j] < 0) return 0;
    }
    return 1;
}

#endif
