/* The window ring (src/kvcache.c): sliding-window layers that keep their
 * keys and values in n_seq_max (W - 1) + n_batch rows compute the very
 * logits of the same layers keeping a row per slot (swa_full), bit for
 * bit, and a rewind the ring cannot serve is refused without changing
 * anything:
 *   - one sequence far past the window, prompts in chunks that cross the
 *     ring's end, then decoding; F32 and F16 caches; three layer patterns
 *     (gemma2: every other layer, a mix with one global layer, Mistral:
 *     every layer);
 *   - several sequences: forks, batches over them, removals and rewinds in
 *     a fixed random order, with the ring's own bookkeeping checked after
 *     every step;
 *   - the rewinds promised (into the last chunk, the last n_batch
 *     positions of one sequence) and the refusal past them;
 *   - the sliding context-full policy on top of the ring;
 *   - the memory plan of Gemma 2 2B and Gemma 3 1B at 8k positions: what
 *     wlm_ctx_bytes_needed saves is exactly the rows the ring does not keep.
 * The model is stories260K (5 layers) with the window set on chosen layers:
 * the ring depends only on which layers have a window, not on the rest of
 * the architecture (gemma2, gemma3 and Mistral-style files are compared the
 * same way in tests/js/swa.test.mjs). */
#include <stdint.h>
#include "tst.h"
#include "ring_check.h"

typedef struct {
    unsigned char *bytes;
    wlm_model *m;
} wmodel;

static int wm_load(wmodel *t) {
    unsigned long long size = 0;
    memset(t, 0, sizeof *t);
    t->bytes = tst_read_sys("models/stories260K.gguf", &size);
    if (!t->bytes) return 0;
    wlm_err err = { 0 };
    if (wlm_model_load(&t->m, t->bytes, size, &err) != WLM_OK) {
        fprintf(stderr, "  load: %s\n", err.msg);
        return 0;
    }
    return 1;
}

static void wm_free(wmodel *t) {
    wlm_model_free(t->m);
    wlm_sys_free(t->bytes);
}

enum { PAT_ALTERNATE,
       PAT_ONE_GLOBAL,
       PAT_ALL,
       N_PAT };
static const char *const PAT_NAME[N_PAT] = { "every other layer (gemma2)", "all but layer 3 (gemma3-like)", "every layer (Mistral)" };

/* a window of w positions on the layers of `pattern` */
static void set_window(wlm_model *m, uint32_t w, int pattern) {
    m->n_swa = w;
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        m->layers[l].swa = pattern == PAT_ALTERNATE ? l % 2 == 0 : pattern == PAT_ONE_GLOBAL ? l != 3
                                                                                             : 1;
}

static wlm_ctx *new_ctx(wlm_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq, uint32_t kv, uint32_t full,
                        uint32_t policy, uint32_t keep, uint32_t all) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_seq_max = n_seq;
    p.n_outputs = WLM_MAX(n_seq, 16u);
    p.kv_type = kv;
    p.swa_full = full;
    p.full_policy = policy;
    p.n_keep = keep;
    p.logits_all = all;
    return tst_ctx_new(m, &p);
}

/* whether the n_logits rows of a and b are the same bits */
static int same_logits(const wlm_ctx *a, const wlm_ctx *b, uint32_t V) {
    uint32_t n = wlm_ctx_n_logits(a);
    return n == wlm_ctx_n_logits(b) && memcmp(a->logits, b->logits, sizeof(float) * n * V) == 0;
}

/* Evaluates the same n tokens in a (the ring) and b (the full cache); with
 * `bad`, counts one more there when their logits differ. 0 (the message
 * printed) when an evaluation fails. */
static int eval_both(wlm_ctx *a, wlm_ctx *b, const int32_t *tok, uint32_t n, uint32_t V, uint32_t *bad) {
    wlm_err err = { 0 };
    if (wlm_eval(a, tok, n, &err) != WLM_OK || wlm_eval(b, tok, n, &err) != WLM_OK) {
        fprintf(stderr, "  eval of %u tokens: %s\n", n, err.msg);
        return 0;
    }
    if (bad) *bad += !same_logits(a, b, V);
    return 1;
}

static int32_t tok_at(uint32_t i, uint32_t V) { return (int32_t)((i * 2654435761u >> 7) % (V - 3)) + 3; }

TEST(swa_ring_one_sequence_equals_full_cache) {
    wmodel t;
    REQUIRE(wm_load(&t));
    wlm_model *m = t.m;
    uint32_t V = m->hp.n_vocab;
    enum { W = 16,
           NB = 7,
           NCTX = 256,
           N = 200 };
    wlm_err err = { 0 };
    for (int pat = 0; pat < N_PAT; pat++)
        for (uint32_t kv = 0; kv < 2; kv++) {
            set_window(m, W, pat);
            /* logits_all: every token of a chunk compared, not only the last */
            wlm_ctx *a = new_ctx(m, NCTX, NB, 1, kv, 0, WLM_FULL_ERROR, 0, 1), *b = new_ctx(m, NCTX, NB, 1, kv, 1, WLM_FULL_ERROR, 0, 1);
            REQUIRE(a && b);
            CHECK(wlm_ctx_window_rows(a) == W - 1 + NB && wlm_ctx_window_rows(b) == 0);
            int32_t tok[N];
            for (uint32_t i = 0; i < N; i++) tok[i] = tok_at(i, V);
            /* a prompt of 40 (chunks of 7 wrap the 22-row ring), decoding to
             * 100, a second prompt of 33 in one call, decoding to the end */
            uint32_t bad = 0, evals = 0, i = 0;
            while (i < N) {
                uint32_t n = i == 0 ? 40 : i == 100 ? 33
                                                    : 1;
                REQUIRE(eval_both(a, b, tok + i, n, V, &bad));
                evals++;
                i += n;
            }
            CHECK(ring_consistent(a));
            CHECK(a->ring_free == 0); /* the ring went round many times */
            CHECKF(bad == 0, "%s, %s cache: %u of %u evaluations differ from the full cache",
                   PAT_NAME[pat], kv ? "F16" : "F32", bad, evals);
            /* and the window mattered: the same model without it differs */
            if (pat == PAT_ALL && kv == 0) {
                m->n_swa = 0;
                wlm_ctx *f = new_ctx(m, NCTX, NB, 1, kv, 0, WLM_FULL_ERROR, 0, 1);
                REQUIRE(f);
                REQUIRE(wlm_eval(f, tok, N, &err) == WLM_OK);
                CHECK(memcmp(f->logits + (size_t)(wlm_ctx_n_logits(f) - 1) * V, a->logits, sizeof(float) * V) != 0);
                wlm_ctx_free(f);
            }
            wlm_ctx_free(a);
            wlm_ctx_free(b);
        }
    wm_free(&t);
}

TEST(swa_ring_rewinds_promised_and_refused) {
    wmodel t;
    REQUIRE(wm_load(&t));
    wlm_model *m = t.m;
    uint32_t V = m->hp.n_vocab;
    enum { W = 12,
           NB = 8,
           NCTX = 200 };
    set_window(m, W, PAT_ALTERNATE);
    wlm_err err = { 0 };
    wlm_ctx *a = new_ctx(m, NCTX, NB, 1, WLM_KV_F32, 0, WLM_FULL_ERROR, 0, 0), *b = new_ctx(m, NCTX, NB, 1, WLM_KV_F32, 1, WLM_FULL_ERROR, 0, 0);
    REQUIRE(a && b);
    REQUIRE(wlm_ctx_window_rows(a) == W - 1 + NB);
    int32_t tok[NCTX];
    for (uint32_t i = 0; i < NCTX; i++) tok[i] = tok_at(i + 7, V);
    /* 60 positions decoded one by one: the ring holds the last 19, so a
     * rewind of up to n_batch (8) positions is possible, 9 is not */
    for (uint32_t i = 0; i < 60; i++) REQUIRE(eval_both(a, b, &tok[i], 1, V, NULL));
    CHECK(a->seq_floor[0] == 60 - NB);
    uint32_t free_before = wlm_ctx_free_slots(a), ring_free = a->ring_free;
    CHECK(wlm_seq_truncate(a, 0, 60 - NB - 1, &err) == WLM_ERR_STATE);
    CHECKF(strstr(err.msg, "cannot rewind sequence 0 to 51: its sliding-window layers dropped the positions before 41, so 52 is the lowest") != NULL, "%s", err.msg);
    CHECK(wlm_ctx_truncate(a, 3, &err) == WLM_ERR_STATE);
    /* the refusal changed nothing */
    CHECK(wlm_seq_pos(a, 0) == 60 && wlm_ctx_free_slots(a) == free_before && a->ring_free == ring_free);
    REQUIRE(wlm_ctx_truncate(a, 60 - NB, &err) == WLM_OK && wlm_ctx_truncate(b, 60 - NB, &err) == WLM_OK);
    CHECK(ring_consistent(a));
    uint32_t bad = 0;
    for (uint32_t i = 60 - NB; i < 90; i++) REQUIRE(eval_both(a, b, &tok[i], 1, V, &bad));
    CHECKF(bad == 0, "after a rewind of n_batch: %u steps differ", bad);
    /* a chunk of 5 (a target's verification pass): a rewind into it, to its
     * first position, always works, the ring full or not */
    for (int round = 0; round < 6; round++) {
        uint32_t p0 = wlm_seq_pos(a, 0);
        REQUIRE(eval_both(a, b, &tok[p0], 5, V, NULL));
        uint32_t back = p0 + (uint32_t)round % 3; /* keep 0, 1 or 2 of the 5 */
        REQUIRE(wlm_ctx_truncate(a, back, &err) == WLM_OK && wlm_ctx_truncate(b, back, &err) == WLM_OK);
        REQUIRE(eval_both(a, b, &tok[back + 1], 1, V, NULL));
        CHECKF(same_logits(a, b, V), "round %d: after rewinding into the chunk", round);
        CHECK(ring_consistent(a));
    }
    /* a refused rewind falls back to evaluating again from 0: same logits as the full cache's rewind */
    uint32_t deep = 20, end = wlm_seq_pos(a, 0);
    CHECK(wlm_ctx_truncate(a, deep, &err) == WLM_ERR_STATE);
    REQUIRE(wlm_ctx_truncate(b, deep, &err) == WLM_OK);
    wlm_ctx_reset(a);
    CHECK(a->ring_free == a->n_ring && a->seq_floor[0] == 0);
    int32_t again[NCTX];
    for (uint32_t i = 0; i < deep; i++) again[i] = tok[i];
    for (uint32_t i = deep; i < end; i++) again[i] = tok_at(i + 1000, V); /* a different continuation */
    REQUIRE(wlm_eval(a, again, end, &err) == WLM_OK);
    REQUIRE(wlm_eval(b, again + deep, end - deep, &err) == WLM_OK);
    CHECK(same_logits(a, b, V));
    wlm_ctx_free(a);
    wlm_ctx_free(b);
    wm_free(&t);
}

/* Several sequences: a fixed random program of batches over sequences,
 * forks, removals and rewinds run on a ring context and a full one; every
 * evaluation's logits compared, the ring checked after every step. */
TEST(swa_ring_several_sequences_equal_full_cache) {
    wmodel t;
    REQUIRE(wm_load(&t));
    wlm_model *m = t.m;
    uint32_t V = m->hp.n_vocab;
    enum { W = 10,
           NB = 8,
           NSEQ = 4,
           NCTX = 400,
           STEPS = 400 };
    wlm_err err = { 0 };
    for (int pat = 0; pat < N_PAT; pat += 2) {
        set_window(m, W, pat);
        wlm_ctx *a = new_ctx(m, NCTX, NB, NSEQ, WLM_KV_F32, 0, WLM_FULL_ERROR, 0, 0);
        wlm_ctx *b = new_ctx(m, NCTX, NB, NSEQ, WLM_KV_F32, 1, WLM_FULL_ERROR, 0, 0);
        REQUIRE(a && b);
        REQUIRE(wlm_ctx_window_rows(a) == NSEQ * (W - 1) + NB);
        uint32_t rng = 77 + (uint32_t)pat, n_eval = 0, n_fork = 0, n_remove = 0, n_rewind = 0, n_refused = 0, bad = 0, broken = 0;
#define RND(n) ((rng = rng * 1664525u + 1013904223u) >> 8) % (n)
        int32_t p0[30];
        for (uint32_t i = 0; i < 30; i++) p0[i] = tok_at(i, V);
        REQUIRE(eval_both(a, b, p0, 30, V, NULL));
        for (uint32_t step = 0; step < STEPS; step++) {
            uint32_t op = RND(10), s = RND(NSEQ);
            if (op < 6) {
                /* a batch of 1..12 tokens over random sequences (several chunks when > NB) */
                int32_t tok[12];
                uint32_t seq[12];
                uint8_t want[12];
                uint32_t n = 1 + RND(12);
                for (uint32_t i = 0; i < n; i++) {
                    tok[i] = tok_at(RND(100000), V);
                    seq[i] = RND(NSEQ);
                    want[i] = RND(2) || i + 1 == n;
                }
                wlm_status sa = wlm_eval_batch(a, tok, seq, want, n, &err), sb = wlm_eval_batch(b, tok, seq, want, n, &err);
                CHECK(sa == sb);
                if (sa == WLM_ERR_CONTEXT_FULL) { /* make room: drop a sequence */
                    for (uint32_t q = 0; q < NSEQ; q++)
                        if (wlm_seq_pos(a, q) > 80) {
                            wlm_seq_remove(a, q, &err);
                            wlm_seq_remove(b, q, &err);
                        }
                    continue;
                }
                REQUIRE(sa == WLM_OK);
                n_eval++;
                bad += !same_logits(a, b, V);
            } else if (op < 8) {
                uint32_t d = RND(NSEQ);
                REQUIRE(wlm_seq_fork(a, s, d, &err) == WLM_OK && wlm_seq_fork(b, s, d, &err) == WLM_OK);
                n_fork++;
            } else if (op < 9) {
                if (RND(3)) continue;
                REQUIRE(wlm_seq_remove(a, s, &err) == WLM_OK && wlm_seq_remove(b, s, &err) == WLM_OK);
                n_remove++;
            } else {
                uint32_t pos = wlm_seq_pos(a, s), back = RND(2) ? RND(NB + 1) : RND(3 * W);
                uint32_t to = pos > back ? pos - back : 0;
                wlm_status st = wlm_seq_truncate(a, s, to, &err);
                if (st == WLM_ERR_STATE) { /* only below the floor, and then b is left as a is */
                    CHECK(to < a->seq_floor[s]);
                    n_refused++;
                    continue;
                }
                REQUIRE(st == WLM_OK && wlm_seq_truncate(b, s, to, &err) == WLM_OK);
                n_rewind++;
            }
            broken += !ring_consistent(a);
            /* both caches place every token in the same slot */
            CHECK(wlm_ctx_free_slots(a) == wlm_ctx_free_slots(b));
        }
#undef RND
        printf("  %s: %u evaluations (%u differ), %u forks, %u removals, %u rewinds, %u refused; ring of %u rows, %u slots\n",
               PAT_NAME[pat], n_eval, bad, n_fork, n_remove, n_rewind, n_refused, wlm_ctx_window_rows(a), NCTX);
        CHECK(bad == 0);
        CHECK(broken == 0);
        CHECK(n_eval > 100 && n_fork > 20 && n_rewind > 10 && n_refused > 0);
        wlm_ctx_free(a);
        wlm_ctx_free(b);
    }
    wm_free(&t);
}

TEST(swa_ring_under_the_sliding_policy) {
    wmodel t;
    REQUIRE(wm_load(&t));
    wlm_model *m = t.m;
    uint32_t V = m->hp.n_vocab;
    enum { W = 12,
           NB = 8,
           NCTX = 48,
           N = 150 };
    set_window(m, W, PAT_ONE_GLOBAL);
    for (uint32_t keep = 0; keep <= 4; keep += 4) {
        wlm_ctx *a = new_ctx(m, NCTX, NB, 1, WLM_KV_F32, 0, WLM_FULL_SLIDE, keep, 0), *b = new_ctx(m, NCTX, NB, 1, WLM_KV_F32, 1, WLM_FULL_SLIDE, keep, 0);
        REQUIRE(a && b);
        CHECK(wlm_ctx_window_rows(a) == W - 1 + NB);
        int32_t tok[N];
        for (uint32_t i = 0; i < N; i++) tok[i] = tok_at(i + 3, V);
        uint32_t bad = 0;
        REQUIRE(eval_both(a, b, tok, 20, V, &bad));
        for (uint32_t i = 20; i < N; i++) REQUIRE(eval_both(a, b, &tok[i], 1, V, &bad));
        /* and a long batch in one call past the cache's end */
        wlm_ctx_reset(a);
        wlm_ctx_reset(b);
        REQUIRE(eval_both(a, b, tok, N, V, &bad));
        CHECK(ring_consistent(a));
        CHECKF(bad == 0, "n_keep %u: %u evaluations differ", keep, bad);
        wlm_ctx_free(a);
        wlm_ctx_free(b);
    }
    wm_free(&t);
}

/* ---- the memory plan --------------------------------------------------------- */

typedef struct {
    const char *name;
    uint32_t vocab, embd, ff, layers, heads, kv_heads, head_dim, window;
    int gemma3;
} shape;

/* Published shapes (the models' config files): Gemma 2 2B and Gemma 3 1B. */
static const shape SHAPES[] = {
    { "Gemma 2 2B", 256000, 2304, 9216, 26, 8, 4, 256, 4096, 0 },
    { "Gemma 3 1B", 262144, 1152, 6912, 26, 4, 1, 256, 512, 1 },
};

/* the plan of a model of this shape: only hyper-parameters and which
 * layers have a window enter wlm_ctx_bytes_needed */
static uint64_t plan_bytes(const shape *s, wlm_layer *layers, uint32_t n_ctx, uint32_t n_seq, uint32_t kv, uint32_t full) {
    wlm_model m;
    memset(&m, 0, sizeof m);
    m.hp.n_vocab = s->vocab;
    m.hp.n_ctx_train = 8192;
    m.hp.n_embd = s->embd;
    m.hp.n_ff = s->ff;
    m.hp.n_layer = s->layers;
    m.hp.n_head = s->heads;
    m.hp.n_head_kv = s->kv_heads;
    m.hp.head_dim = m.hp.head_dim_v = m.hp.n_rot = s->head_dim;
    m.n_swa = s->window;
    m.rope_base_swa = s->gemma3 ? 10000.0f : 0;
    for (uint32_t l = 0; l < s->layers; l++) {
        memset(&layers[l], 0, sizeof layers[l]);
        layers[l].swa = s->gemma3 ? l % 6 != 5 : l % 2 == 0;
    }
    m.layers = layers;
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_seq_max = n_seq;
    p.kv_type = kv;
    p.swa_full = full;
    return wlm_ctx_bytes_needed(&m, &p);
}

TEST(swa_ring_memory_plan_gemma_shapes) {
    wlm_layer layers[64];
    const double MiB = 1024.0 * 1024.0;
    printf("  | model | KV | sequences | context | full cache: context block | window ring rows | window: context block | saved |\n");
    for (unsigned i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const shape *s = &SHAPES[i];
        uint32_t n_swa_layers = 0;
        for (uint32_t l = 0; l < s->layers; l++) n_swa_layers += s->gemma3 ? l % 6 != 5 : l % 2 == 0;
        static const uint32_t cfg[][3] = { { 8192, 1, WLM_KV_F32 }, { 8192, 1, WLM_KV_F16 }, { 8192, 4, WLM_KV_F16 } };
        for (unsigned k = 0; k < 3; k++) {
            uint32_t n_ctx = cfg[k][0], n_seq = cfg[k][1], kv = cfg[k][2];
            uint64_t full = plan_bytes(s, layers, n_ctx, n_seq, kv, 1), win = plan_bytes(s, layers, n_ctx, n_seq, kv, 0);
            uint64_t rows = (uint64_t)n_seq * (s->window - 1) + 64; /* n_batch 64 by default */
            if (rows >= n_ctx) rows = 0;
            /* the saving is exactly the rows not kept, minus the ring's maps
             * (a row per slot, two per ring row, 64-byte aligned) */
            uint64_t esz = kv == WLM_KV_F16 ? 2 : 4;
            uint64_t kv_saved = rows ? (uint64_t)n_swa_layers * (n_ctx - rows) * s->kv_heads * 2 * s->head_dim * esz : 0;
            uint64_t maps = rows ? WLM_ALIGN_UP((uint64_t)n_ctx * 4 + rows * 8, 64) : 0;
            CHECKF(full - win == kv_saved - maps, "%s: saved %llu, expected %llu", s->name,
                   (unsigned long long)(full - win), (unsigned long long)(kv_saved - maps));
            printf("  | %s | %s | %u | %u | %.1f MiB | %llu | %.1f MiB | %.1f MiB (%.0f %%) |\n", s->name, kv ? "F16" : "F32", n_seq, n_ctx,
                   full / MiB, (unsigned long long)rows, win / MiB, (full - win) / MiB, 100.0 * (double)(full - win) / (double)full);
        }
    }
}
