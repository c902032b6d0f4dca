/* libFuzzer target: saved states (wlm_ctx_state_load), untrusted bytes
 * loaded into a context of a small model (tools/fuzz-seeds.mjs). The first
 * byte picks a mode and the target sequence:
 *   0: the rest is a state as it is (most fail the magic or the checksum);
 *   1: edits (u16 offset, u8 xor) to a valid state saved at start-up, whose
 *      checksum is then made right again, so the structural checks behind it
 *      are what refuses (or accepts) the result;
 *   2: the same on a state of a slid window (onFull 'slide'), loaded into a
 *      context with the same ring;
 *   3: the valid state cut at, or extended to, a length from the input.
 * Bit 3 of that byte (modes 0, 1, 3) uses a gemma2-style model instead (a
 * sliding window of 4 on its first layer) in a context with a window ring,
 * and a state saved past the window: its window layer holds fewer rows than
 * the other, and the header a rewind floor.
 * A refused state must leave the sequence as it was (positions, free slots)
 * with a message; an accepted one must give a sequence of the saved
 * positions that evaluates a token, and save back to the very same bytes. */
#include "fuzz_common.h"
#include "../src/base.h"

static wlm_model *g_m, *g_wm;
static wlm_ctx *g_plain, *g_slide, *g_win;
static uint8_t *g_state[3];
static uint64_t g_size[3];

static wlm_ctx *fz_ctx(wlm_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t slide, uint32_t n_seq) {
    wlm_ctx_params p; wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx; p.n_batch = n_batch; p.n_seq_max = n_seq;
    if (slide) { p.full_policy = WLM_FULL_SLIDE; p.n_keep = 2; }
    wlm_ctx *c = NULL; wlm_err err;
    if (wlm_ctx_new(&c, m, &p, &err) != WLM_OK) { fprintf(stderr, "fuzz: ctx: %s\n", err.msg); exit(2); }
    return c;
}

/* evaluates n tokens one by one into sequence 0 of c and saves it (with an rng) */
static uint8_t *fz_saved(wlm_ctx *c, wlm_model *m, uint32_t n, uint64_t *size) {
    int32_t toks[64]; wlm_err err;
    for (uint32_t i = 0; i < n; i++) {
        toks[i] = (int32_t)(1 + (i * 37) % (wlm_model_hparams(m)->n_vocab - 1));
        if (wlm_eval(c, &toks[i], 1, &err) != WLM_OK) { fprintf(stderr, "fuzz: eval: %s\n", err.msg); exit(2); }
    }
    toks[n] = 3;   /* one token not evaluated yet */
    wlm_rng r; wlm_rng_seed(&r, 5);
    *size = wlm_ctx_state_size(c, 0, n + 1);
    uint8_t *b = malloc(*size);
    uint64_t w;
    if (wlm_ctx_state_save(c, 0, toks, n + 1, &r, b, *size, &w, &err) != WLM_OK) { fprintf(stderr, "fuzz: save: %s\n", err.msg); exit(2); }
    wlm_ctx_reset(c);
    return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_m = fz_model("micro-spm.gguf");
    g_wm = fz_model("micro-swa.gguf");
    g_plain = fz_ctx(g_m, 32, 8, 0, 2);
    g_slide = fz_ctx(g_m, 16, 8, 1, 1);
    g_win = fz_ctx(g_wm, 32, 4, 0, 2);   /* a ring of 2 x 3 + 4 rows */
    if (!wlm_ctx_window_rows(g_win)) { fprintf(stderr, "fuzz: micro-swa.gguf has no window ring\n"); exit(2); }
    g_state[0] = fz_saved(g_plain, g_m, 12, &g_size[0]);
    g_state[1] = fz_saved(g_slide, g_m, 40, &g_size[1]);
    g_state[2] = fz_saved(g_win, g_wm, 20, &g_size[2]);
    return 0;
}

/* the checksum as src/kvcache.c defines it */
static void fix_checksum(uint8_t *d, uint64_t n) {
    static const uint8_t zero[8];
    if (n < 96) return;
    uint64_t total = wlm_rd64(d + 8);
    if (total != n) return;
    uint64_t h = wlm_hash64(0, d, 16);
    h = wlm_hash64(h, zero, 8);
    wlm_wr64(d + 16, wlm_hash64(h, d + 24, n - 24));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] & 3;
    uint32_t seq = mode != 2 && (data[0] & 4) ? 1 : 0;
    int k = mode == 2 ? 1 : (data[0] & 8) ? 2 : 0;   /* the valid state edited, cut or extended */
    wlm_ctx *c = k == 1 ? g_slide : k == 2 ? g_win : g_plain;
    const uint8_t *p = data + 1; size_t n = size - 1;
    uint8_t *s; uint64_t len;
    if (mode == 0) {
        len = n; s = malloc(len ? len : 1);
        if (len) memcpy(s, p, len);
    } else if (mode == 3) {
        uint32_t want = 0;
        if (n >= 4) { memcpy(&want, p, 4); p += 4; n -= 4; }
        len = want % (g_size[k] + 64);
        s = malloc(len ? len : 1);
        for (uint64_t i = 0; i < len; i++) s[i] = i < g_size[k] ? g_state[k][i] : (n ? p[i % n] : 0);
    } else {
        len = g_size[k]; s = malloc(len);
        memcpy(s, g_state[k], len);
        for (size_t i = 0; i + 3 <= n; i += 3) {
            uint32_t at = (uint32_t)(p[i] | p[i + 1] << 8);
            /* half the edits in the header and the counts, where the checks are */
            at = (i / 3) & 1 ? at % len : at % (len < 160 ? len : 160);
            s[at] ^= p[i + 2];
        }
        fix_checksum(s, len);
    }
    /* the target sequence holds something of its own, which a refusal must keep */
    wlm_ctx_reset(c);
    int32_t own[3] = { 1, 7, 9 };
    uint32_t seqs[3] = { seq, seq, seq };
    wlm_err err = { 0 };
    FZ_ASSERT(wlm_eval_batch(c, own, seqs, NULL, 3, &err) == WLM_OK, "eval: %s", err.msg);
    uint32_t pos = wlm_seq_pos(c, seq), free_slots = wlm_ctx_free_slots(c);
    wlm_state_info info;
    err.msg[0] = 0;
    wlm_status st = wlm_ctx_state_load(c, seq, len ? s : NULL, len, &info, &err);
    if (st != WLM_OK) {
        FZ_ASSERT(err.msg[0] != 0 && memchr(err.msg, 0, sizeof err.msg), "refused (status %d) without a message", (int)st);
        FZ_ASSERT(wlm_seq_pos(c, seq) == pos && wlm_ctx_free_slots(c) == free_slots, "a refused state changed the context: %s", err.msg);
    } else {
        FZ_ASSERT(wlm_seq_pos(c, seq) == info.n_pos && info.n_pos <= info.n_tokens, "loaded %u positions of %u tokens, the sequence has %u",
                  info.n_pos, info.n_tokens, wlm_seq_pos(c, seq));
        FZ_ASSERT((uint64_t)info.tokens_offset + 4ull * info.n_tokens <= len, "tokens past the end of the state");
        FZ_ASSERT(!info.has_rng || (info.rng.inc & 1), "an even rng increment accepted");
        /* saved again: the very same bytes */
        int32_t *toks = malloc(4ull * info.n_tokens + 4);
        for (uint32_t i = 0; i < info.n_tokens; i++) toks[i] = (int32_t)wlm_rd32(s + info.tokens_offset + 4ull * i);
        uint64_t size2 = wlm_ctx_state_size(c, seq, info.n_tokens), w = 0;
        uint8_t *again = malloc(size2 ? size2 : 1);
        FZ_ASSERT(wlm_ctx_state_save(c, seq, toks, info.n_tokens, info.has_rng ? &info.rng : NULL, again, size2, &w, &err) == WLM_OK,
                  "a loaded state does not save: %s", err.msg);
        FZ_ASSERT(w == len && memcmp(again, s, len) == 0, "saved back as other bytes (%llu vs %llu)", (unsigned long long)w, (unsigned long long)len);
        free(again); free(toks);
        int32_t t = 5;
        if (mode == 2 || info.n_pos < 32) {
            wlm_status e = wlm_eval_batch(c, &t, &seq, NULL, 1, &err);
            FZ_ASSERT(e == WLM_OK || e == WLM_ERR_CONTEXT_FULL, "eval after a load: %s", err.msg);
        }
    }
    free(s);
    return 0;
}
