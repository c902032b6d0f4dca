/* Saved state (src/kvcache.c, wlm_ctx_state_*) and vocabulary-only loads
 * (src/model.c wlm_model_load_vocab, src/gguf.c wlm_gguf_meta_bytes):
 *   - a generation saved, loaded into a new context (another length, the
 *     model loaded again) and continued gives the tokens and the very logits
 *     of the uninterrupted run: F32, Q8_0 and Q4_0 weights, F32 and F16
 *     caches, a slid ring (onFull 'slide'), a sequence of a forked set;
 *   - the size grows with the positions, not with the context length;
 *   - every truncation, a flipped byte, another version, another model,
 *     another KV type, a context too short, inconsistent counts behind a
 *     valid checksum are refused and change nothing;
 *   - a vocabulary-only load tokenizes as the vocabulary itself does, from
 *     exactly the bytes wlm_gguf_meta_bytes asks for, whose every answer on
 *     a shorter prefix is a true lower bound; it cannot run. */
#include <stdint.h>
#include <math.h>
#include "vocab_util.h"
#include "ring_check.h"

/* a model file: its bytes as written (bytes), the copy the model is loaded
 * from (work: wlm_model_load_inplace may rewrite it, as the JS engine does) */
typedef struct {
    unsigned char *bytes, *work;
    uint64_t size;
    wlm_model *m;
    int inplace;
} smodel;

static int st_open(smodel *t) {
    wlm_err err = { 0 };
    t->work = tst_sys_copy(t->bytes, t->size);
    if (!t->work) return 0;
    wlm_status st = t->inplace ? wlm_model_load_inplace(&t->m, t->work, t->size, &err) : wlm_model_load(&t->m, t->work, t->size, &err);
    if (st != WLM_OK) fprintf(stderr, "  load: %s\n", err.msg);
    return st == WLM_OK;
}

static int st_load(smodel *t) {
    unsigned long long size = 0;
    memset(t, 0, sizeof *t);
    t->bytes = tst_read_sys("models/stories260K.gguf", &size);
    t->size = size;
    return t->bytes && st_open(t);
}

/* the same model re-quantized to `type` (a new file: another fingerprint),
 * loaded in place when `inplace` (the SIMD builds repack Q4_0 into q4g) */
static int st_quantized(const smodel *src, uint32_t type, int inplace, smodel *out) {
    wlm_err err = { 0 };
    memset(out, 0, sizeof *out);
    out->inplace = inplace;
    if (wlm_quantize_size(src->m, type, &out->size, &err) != WLM_OK) return 0;
    out->bytes = wlm_sys_alloc(out->size);
    if (!out->bytes || wlm_quantize(src->m, type, out->bytes, out->size, NULL, 0, &err) != WLM_OK) return 0;
    return st_open(out);
}

/* the same file loaded again, the same way (a reload) */
static int st_reload(const smodel *src, smodel *out) {
    memset(out, 0, sizeof *out);
    out->bytes = tst_sys_copy(src->bytes, src->size);
    out->size = src->size;
    out->inplace = src->inplace;
    return out->bytes && st_open(out);
}

static void st_free(smodel *t) {
    wlm_model_free(t->m);
    wlm_sys_free(t->work);
    wlm_sys_free(t->bytes);
    memset(t, 0, sizeof *t);
}

static wlm_ctx *st_ctx(wlm_model *m, uint32_t n_ctx, uint32_t kv_type, uint32_t slide, uint32_t n_keep, uint32_t n_seq) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = 16;
    p.kv_type = kv_type;
    p.full_policy = slide;
    p.n_keep = n_keep;
    p.n_seq_max = n_seq;
    return tst_ctx_new(m, &p);
}

static void st_sampling(wlm_sampler_params *sp) {
    wlm_sampler_default_params(sp);
    sp->temperature = 0.9f;
    sp->top_k = 0;
    sp->top_p = 1;
    sp->min_p = 0;
    sp->repeat_penalty = 1.1f;
    sp->repeat_last_n = 16;
}

#define MAXTOK 256
typedef struct {
    int32_t ids[MAXTOK];
    uint32_t n;
} toks;

/* samples the next token of sequence 0 from the logits left by the last eval */
static int32_t st_sample(wlm_ctx *c, const toks *t, wlm_rng *rng) {
    wlm_sampler_params sp;
    st_sampling(&sp);
    int32_t tok = -1;
    float lp;
    wlm_err err = { 0 };
    uint32_t nh = t->n < 16 ? t->n : 16;
    if (wlm_sample(c, wlm_ctx_logits(c), &sp, t->ids + t->n - nh, nh, rng, &tok, &lp, &err) != WLM_OK) fprintf(stderr, "  sample: %s\n", err.msg);
    return tok;
}

/* a prompt evaluated, then `steps` tokens sampled; each but the last
 * evaluated (the last is pending, as a generation that ended leaves it) */
static int st_generate(wlm_ctx *c, toks *t, wlm_rng *rng, uint32_t steps) {
    static const char *text = "Once upon a time, there was a little dog named";
    wlm_err err = { 0 };
    if (wlm_tokenize(c->m, text, (uint32_t)strlen(text), WLM_TOK_ADD_BOS, t->ids, MAXTOK, &t->n, &err) != WLM_OK) return 0;
    if (wlm_eval(c, t->ids, t->n, &err) != WLM_OK) {
        fprintf(stderr, "  eval: %s\n", err.msg);
        return 0;
    }
    wlm_rng_seed(rng, 7);
    for (uint32_t i = 0; i < steps; i++) {
        int32_t tok = st_sample(c, t, rng);
        if (tok < 0) return 0;
        t->ids[t->n++] = tok;
        if (i + 1 < steps && wlm_eval(c, &tok, 1, &err) != WLM_OK) {
            fprintf(stderr, "  eval: %s\n", err.msg);
            return 0;
        }
    }
    return 1;
}

/* evaluates the pending tokens (past the cache's positions), then samples
 * `steps` more, keeping every logits row */
static int st_continue(wlm_ctx *c, toks *t, wlm_rng *rng, uint32_t steps, float *logits) {
    wlm_err err = { 0 };
    uint32_t nv = wlm_model_hparams(c->m)->n_vocab, pos = wlm_ctx_pos(c);
    if (pos < t->n && wlm_eval(c, t->ids + pos, t->n - pos, &err) != WLM_OK) {
        fprintf(stderr, "  eval: %s\n", err.msg);
        return 0;
    }
    for (uint32_t i = 0; i < steps; i++) {
        memcpy(logits + (size_t)i * nv, wlm_ctx_logits(c), sizeof(float) * nv);
        int32_t tok = st_sample(c, t, rng);
        if (tok < 0) return 0;
        t->ids[t->n++] = tok;
        if (wlm_eval(c, &tok, 1, &err) != WLM_OK) {
            fprintf(stderr, "  eval: %s\n", err.msg);
            return 0;
        }
    }
    return 1;
}

static uint8_t *st_save(wlm_ctx *c, uint32_t seq, const toks *t, const wlm_rng *rng, uint64_t *size) {
    *size = wlm_ctx_state_size(c, seq, t->n);
    uint8_t *b = malloc(*size ? *size : 1);
    uint64_t written = 0;
    wlm_err err = { 0 };
    if (!b || wlm_ctx_state_save(c, seq, t->ids, t->n, rng, b, *size, &written, &err) != WLM_OK || written != *size) {
        fprintf(stderr, "  save: %s\n", err.msg);
        free(b);
        return NULL;
    }
    return b;
}

#define GEN 12
#define MORE 20

/* generate GEN tokens, save, continue MORE in the same context (the
 * uninterrupted run); load into a new context of another length on a
 * reloaded model, continue MORE: same tokens, same logits bits */
static void roundtrip(smodel *sm, uint32_t kv_type, const char *name) {
    wlm_ctx *a = st_ctx(sm->m, 256, kv_type, WLM_FULL_ERROR, 0, 1);
    REQUIRE(a);
    toks ta;
    wlm_rng ra;
    REQUIRE(st_generate(a, &ta, &ra, GEN));
    uint64_t size = 0;
    uint8_t *state = st_save(a, 0, &ta, &ra, &size);
    REQUIRE(state);
    uint32_t nv = wlm_model_hparams(sm->m)->n_vocab;
    float *la = malloc(sizeof(float) * nv * MORE), *lb = malloc(sizeof(float) * nv * MORE);
    toks t_ref = ta;
    wlm_rng r_ref = ra;
    REQUIRE(st_continue(a, &t_ref, &r_ref, MORE, la));

    smodel re;
    REQUIRE(st_reload(sm, &re));
    CHECK(wlm_model_fingerprint(re.m) == wlm_model_fingerprint(sm->m) && wlm_model_fingerprint(sm->m) != 0);
    wlm_ctx *b = st_ctx(re.m, 96, kv_type, WLM_FULL_ERROR, 0, 1);
    REQUIRE(b);
    wlm_state_info info;
    wlm_err err = { 0 };
    memset(&info, 0xff, sizeof info);
    REQUIRE(wlm_ctx_state_load(b, 0, state, size, &info, &err) == WLM_OK);
    CHECK(info.n_tokens == ta.n && info.n_pos == ta.n - 1 && info.has_rng == 1);
    CHECK(info.rng.state == ra.state && info.rng.inc == ra.inc);
    CHECK(wlm_ctx_pos(b) == ta.n - 1 && wlm_ctx_n_logits(b) == 0);
    toks tb;
    tb.n = info.n_tokens;
    for (uint32_t i = 0; i < tb.n; i++) tb.ids[i] = (int32_t)wlm_rd32(state + info.tokens_offset + 4 * i);
    CHECK(tb.n == ta.n && memcmp(tb.ids, ta.ids, 4 * ta.n) == 0);
    wlm_rng rb = info.rng;
    REQUIRE(st_continue(b, &tb, &rb, MORE, lb));
    CHECKF(tb.n == t_ref.n && memcmp(tb.ids, t_ref.ids, 4 * tb.n) == 0, "%s: continued tokens differ", name);
    CHECKF(memcmp(la, lb, sizeof(float) * nv * MORE) == 0, "%s: continued logits differ", name);
    printf("  %s: %u tokens saved in %llu bytes, %d more identical\n", name, ta.n, (unsigned long long)size, MORE);
    free(la);
    free(lb);
    free(state);
    wlm_ctx_free(a);
    wlm_ctx_free(b);
    st_free(&re);
}

TEST(state_save_load_continues_exactly) {
    smodel sm, q8, q4;
    REQUIRE(st_load(&sm));
    roundtrip(&sm, WLM_KV_F32, "F32 weights, F32 cache");
    roundtrip(&sm, WLM_KV_F16, "F32 weights, F16 cache");
    REQUIRE(st_quantized(&sm, GGML_Q8_0, 0, &q8));
    roundtrip(&q8, WLM_KV_F32, "Q8_0 weights");
    REQUIRE(st_quantized(&sm, GGML_Q4_0, 1, &q4));
    roundtrip(&q4, WLM_KV_F16, "Q4_0 weights loaded in place, F16 cache");
    CHECK(wlm_model_fingerprint(q8.m) != wlm_model_fingerprint(sm.m));
    CHECK(wlm_model_fingerprint(q4.m) != wlm_model_fingerprint(q8.m));
    /* taken before the in-place repack: a plain load of the same bytes agrees */
    smodel q4plain = q4;
    q4plain.inplace = 0;
    q4plain.m = NULL;
    q4plain.work = NULL;
    REQUIRE(st_open(&q4plain));
    CHECK(wlm_model_fingerprint(q4plain.m) == wlm_model_fingerprint(q4.m));
    wlm_model_free(q4plain.m);
    wlm_sys_free(q4plain.work);
    st_free(&q4);
    st_free(&q8);
    st_free(&sm);
}

TEST(state_size_follows_positions_not_context) {
    smodel sm;
    REQUIRE(st_load(&sm));
    const wlm_hparams *hp = wlm_model_hparams(sm.m);
    uint64_t row = (uint64_t)hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * 4;
    uint64_t sizes[2][2];
    uint32_t lens[2] = { 64, 1024 };
    for (int k = 0; k < 2; k++) {
        wlm_ctx *c = st_ctx(sm.m, lens[k], WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
        REQUIRE(c);
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = 10 + i;
        wlm_err err = { 0 };
        REQUIRE(wlm_eval(c, ids, 10, &err) == WLM_OK);
        sizes[k][0] = wlm_ctx_state_size(c, 0, 10);
        REQUIRE(wlm_eval(c, ids + 10, 10, &err) == WLM_OK);
        sizes[k][1] = wlm_ctx_state_size(c, 0, 20);
        wlm_ctx_free(c);
    }
    CHECK(sizes[0][0] == sizes[1][0] && sizes[0][1] == sizes[1][1]);
    /* per position: its token, its position and one row of keys and values per layer */
    CHECKF(sizes[0][1] - sizes[0][0] == 10 * (8 + row), "%llu vs %llu", (unsigned long long)(sizes[0][1] - sizes[0][0]),
           (unsigned long long)(10 * (8 + row)));
    CHECK(sizes[0][0] == 96 + 4ull * (10 + 10 + hp->n_layer) + 10 * row);
    printf("  10 positions: %llu bytes in a context of 64 and of 1024\n", (unsigned long long)sizes[0][0]);
    st_free(&sm);
}

/* the checksum as the format defines it (src/kvcache.c), to forge consistent edits */
static void fix_checksum(uint8_t *d, uint64_t total) {
    static const uint8_t zero[8];
    uint64_t h = wlm_hash64(0, d, 16);
    h = wlm_hash64(h, zero, 8);
    wlm_wr64(d + 16, wlm_hash64(h, d + 24, total - 24));
}

/* a load that must fail with `want`, leaving sequence 0 of c as it was */
static void refused(wlm_ctx *c, const uint8_t *d, uint64_t n, wlm_status want, const char *needle, const char *what) {
    uint32_t pos = wlm_ctx_pos(c), free_slots = wlm_ctx_free_slots(c);
    wlm_err err = { 0 };
    wlm_status st = wlm_ctx_state_load(c, 0, d, n, NULL, &err);
    CHECKF(st == want, "%s: status %d (want %d): %s", what, st, want, err.msg);
    CHECKF(!needle || strstr(err.msg, needle), "%s: message '%s' lacks '%s'", what, err.msg, needle);
    CHECKF(wlm_ctx_pos(c) == pos && wlm_ctx_free_slots(c) == free_slots, "%s: the context changed", what);
}

TEST(state_refuses_bad_bytes_and_changes_nothing) {
    smodel sm, q8;
    REQUIRE(st_load(&sm));
    wlm_ctx *a = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(a);
    toks t;
    wlm_rng r;
    REQUIRE(st_generate(a, &t, &r, 6));
    uint64_t size = 0;
    uint8_t *s = st_save(a, 0, &t, &r, &size);
    REQUIRE(s);
    /* the target holds a sequence of its own, which a refused load must keep */
    wlm_ctx *c = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c);
    int32_t own[5] = { 1, 50, 60, 70, 80 };
    wlm_err err = { 0 };
    REQUIRE(wlm_eval(c, own, 5, &err) == WLM_OK);
    uint8_t *d = malloc(size + 8);
    /* every truncation */
    for (uint64_t n = 0; n < size; n++) {
        wlm_status st = wlm_ctx_state_load(c, 0, s, n, NULL, &err);
        if (st != WLM_ERR_TRUNCATED) {
            CHECKF(0, "cut at %llu: status %d: %s", (unsigned long long)n, st, err.msg);
            break;
        }
    }
    refused(c, s, 3, WLM_ERR_TRUNCATED, "cut short", "3 bytes");
    refused(c, s, size - 1, WLM_ERR_TRUNCATED, "cut short", "one byte short");
    CHECK(wlm_ctx_pos(c) == 5);
    /* trailing bytes */
    memcpy(d, s, size);
    memset(d + size, 0, 8);
    refused(c, d, size + 8, WLM_ERR_FORMAT, "extra bytes", "trailing bytes");
    /* not a state */
    memcpy(d, s, size);
    d[0] = 'X';
    refused(c, d, size, WLM_ERR_FORMAT, "not a wasmlm saved state", "magic");
    /* one flipped bit anywhere past the magic: the checksum */
    uint64_t at[] = { 5, 9, 17, 30, 40, 57, 61, 70, 85, 96, 100, size / 2, size - 1 };
    for (uint32_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        memcpy(d, s, size);
        d[at[i]] ^= 0x10;
        wlm_status want = at[i] < 8 ? WLM_ERR_UNSUPPORTED : at[i] < 16 ? WLM_ERR_TRUNCATED
                                                                       : WLM_ERR_FORMAT;
        char what[64];
        snprintf(what, sizeof what, "bit flip at %llu", (unsigned long long)at[i]);
        if (at[i] >= 8 && at[i] < 16) want = (d[at[i]] ^ 0x10) < d[at[i]] ? WLM_ERR_TRUNCATED : WLM_ERR_FORMAT;
        refused(c, d, size, want, NULL, what);
    }
    /* another version (checksum made consistent) */
    memcpy(d, s, size);
    wlm_wr32(d + 4, 2);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_UNSUPPORTED, "version 2", "version");
    /* inconsistent counts behind a valid checksum */
    memcpy(d, s, size);
    wlm_wr32(d + 64, wlm_rd32(d + 64) - 1);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "corrupt", "rows - 1");
    memcpy(d, s, size);
    wlm_wr32(d + 60, wlm_rd32(d + 56) + 1);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "corrupt", "positions > tokens");
    memcpy(d, s, size);
    wlm_wr32(d + 96, 100000);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "out of range", "token id");
    memcpy(d, s, size);
    wlm_wr32(d + 96 + 4 * t.n + 4, 7);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "holds position", "position");
    memcpy(d, s, size);
    wlm_wr64(d + 88, 2);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "increment", "even rng increment");
    memcpy(d, s, size);
    wlm_wr32(d + 76, 1);
    fix_checksum(d, size); /* a rewind floor, in a model without a window */
    refused(c, d, size, WLM_ERR_FORMAT, "no sliding-window layers", "floor without a window");
    memcpy(d, s, size);
    wlm_wr32(d + 32, 0);
    fix_checksum(d, size); /* no rng flag, rng bytes left */
    refused(c, d, size, WLM_ERR_FORMAT, "must be zero", "rng without its flag");
    memcpy(d, s, size);
    wlm_wr32(d + 68, 64);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "ring", "a ring on an unslid state");
    /* another model, another KV type, a context too short */
    REQUIRE(st_quantized(&sm, GGML_Q8_0, 0, &q8));
    wlm_ctx *cq = st_ctx(q8.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(cq);
    refused(cq, s, size, WLM_ERR_ARG, "another model", "another model");
    wlm_ctx *c16 = st_ctx(sm.m, 64, WLM_KV_F16, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c16);
    refused(c16, s, size, WLM_ERR_UNSUPPORTED, "f32 cache", "KV type");
    wlm_ctx *c8 = st_ctx(sm.m, 8, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c8);
    refused(c8, s, size, WLM_ERR_CONTEXT_FULL, "at least", "context too short");
    /* and a valid one loads over the target's own sequence */
    REQUIRE(wlm_ctx_state_load(c, 0, s, size, NULL, &err) == WLM_OK);
    CHECK(wlm_ctx_pos(c) == t.n - 1 && wlm_ctx_free_slots(c) == 64 - (t.n - 1));
    /* a state needs the token of every position it holds */
    uint64_t w;
    CHECK(wlm_ctx_state_save(a, 0, t.ids, 2, &r, d, size, &w, &err) == WLM_ERR_ARG);
    CHECK(wlm_ctx_state_save(a, 0, t.ids, t.n, &r, d, size - 1, &w, &err) == WLM_ERR_ARG && strstr(err.msg, "bytes"));
    free(d);
    free(s);
    wlm_ctx_free(a);
    wlm_ctx_free(c);
    wlm_ctx_free(cq);
    wlm_ctx_free(c16);
    wlm_ctx_free(c8);
    st_free(&q8);
    st_free(&sm);
}

/* onFull 'slide': a sequence past the ring, saved and continued in a
 * context with the same ring, equals the uninterrupted run; other contexts refuse it */
TEST(state_slid_ring_continues_in_the_same_ring) {
    smodel sm;
    REQUIRE(st_load(&sm));
    wlm_ctx *a = st_ctx(sm.m, 32, WLM_KV_F32, WLM_FULL_SLIDE, 4, 1);
    REQUIRE(a);
    toks ta;
    wlm_rng ra;
    REQUIRE(st_generate(a, &ta, &ra, 40)); /* ~ 12 prompt tokens + 40: slid by about 20 */
    REQUIRE(wlm_ctx_pos(a) > 32);
    uint64_t size = 0;
    uint8_t *s = st_save(a, 0, &ta, &ra, &size);
    REQUIRE(s);
    uint32_t nv = wlm_model_hparams(sm.m)->n_vocab;
    float *la = malloc(sizeof(float) * nv * MORE), *lb = malloc(sizeof(float) * nv * MORE);
    toks t_ref = ta;
    wlm_rng r_ref = ra;
    REQUIRE(st_continue(a, &t_ref, &r_ref, MORE, la));
    wlm_ctx *b = st_ctx(sm.m, 32, WLM_KV_F32, WLM_FULL_SLIDE, 4, 1);
    REQUIRE(b);
    wlm_state_info info;
    wlm_err err = { 0 };
    REQUIRE(wlm_ctx_state_load(b, 0, s, size, &info, &err) == WLM_OK);
    toks tb = ta;
    wlm_rng rb = info.rng;
    REQUIRE(st_continue(b, &tb, &rb, MORE, lb));
    CHECK(tb.n == t_ref.n && memcmp(tb.ids, t_ref.ids, 4 * tb.n) == 0);
    CHECK(memcmp(la, lb, sizeof(float) * nv * MORE) == 0);
    CHECK(wlm_ctx_truncate(b, 3, &err) == WLM_ERR_STATE); /* slid: no rewinding, as in the original */
    wlm_ctx *plain = st_ctx(sm.m, 256, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    wlm_ctx *longer = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_SLIDE, 4, 1);
    wlm_ctx *keep2 = st_ctx(sm.m, 32, WLM_KV_F32, WLM_FULL_SLIDE, 2, 1);
    REQUIRE(plain && longer && keep2);
    refused(plain, s, size, WLM_ERR_CONTEXT_FULL, "slid through a ring of 32", "slid into a plain context");
    refused(longer, s, size, WLM_ERR_CONTEXT_FULL, "onFull 'slide'", "slid into a longer ring");
    refused(keep2, s, size, WLM_ERR_CONTEXT_FULL, "nKeep 4", "slid into another n_keep");
    free(la);
    free(lb);
    free(s);
    wlm_ctx_free(a);
    wlm_ctx_free(b);
    wlm_ctx_free(plain);
    wlm_ctx_free(longer);
    wlm_ctx_free(keep2);
    st_free(&sm);
}

/* one sequence of a forked set (slots shared with the others, interleaved
 * by batched decoding) saved and loaded as sequence 0 of a fresh context,
 * and back as sequence 1 of a context whose sequence 0 stays as it was */
TEST(state_of_one_sequence_among_several) {
    smodel sm;
    REQUIRE(st_load(&sm));
    wlm_ctx *a = st_ctx(sm.m, 128, WLM_KV_F32, WLM_FULL_ERROR, 0, 4);
    REQUIRE(a);
    int32_t prompt[8] = { 1, 403, 407, 261, 378, 30, 40, 50 };
    wlm_err err = { 0 };
    REQUIRE(wlm_eval(a, prompt, 8, &err) == WLM_OK);
    for (uint32_t s = 1; s < 4; s++) REQUIRE(wlm_seq_fork(a, 0, s, &err) == WLM_OK);
    toks t2;
    memcpy(t2.ids, prompt, sizeof prompt);
    t2.n = 8;
    for (int step = 0; step < 20; step++) {
        int32_t tk[4];
        uint32_t sq[4];
        for (uint32_t s = 0; s < 4; s++) {
            tk[s] = (int32_t)(100 + 7 * step + 13 * s) % 512;
            sq[s] = s;
        }
        REQUIRE(wlm_eval_batch(a, tk, sq, NULL, 4, &err) == WLM_OK);
        t2.ids[t2.n++] = tk[2];
    }
    /* the next token of sequence 2 in a, and after a reload in b */
    int32_t next = 77;
    uint32_t s2 = 2;
    uint64_t size = 0;
    uint8_t *st = st_save(a, 2, &t2, NULL, &size);
    REQUIRE(st);
    REQUIRE(wlm_eval_batch(a, &next, &s2, NULL, 1, &err) == WLM_OK);
    uint32_t nv = wlm_model_hparams(sm.m)->n_vocab;
    float *la = malloc(sizeof(float) * nv);
    memcpy(la, wlm_ctx_logits(a), sizeof(float) * nv);
    wlm_ctx *b = st_ctx(sm.m, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 2);
    REQUIRE(b);
    wlm_state_info info;
    REQUIRE(wlm_ctx_state_load(b, 0, st, size, &info, &err) == WLM_OK);
    CHECK(info.has_rng == 0 && info.n_pos == 28 && info.n_tokens == 28);
    REQUIRE(wlm_eval(b, &next, 1, &err) == WLM_OK);
    CHECK(memcmp(la, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    /* as sequence 1 beside an unrelated sequence 0, which keeps its logits */
    int32_t other[3] = { 1, 90, 91 };
    wlm_ctx_reset(b);
    REQUIRE(wlm_eval(b, other, 3, &err) == WLM_OK);
    float *l0 = malloc(sizeof(float) * nv);
    memcpy(l0, wlm_ctx_logits(b), sizeof(float) * nv);
    REQUIRE(wlm_ctx_state_load(b, 1, st, size, NULL, &err) == WLM_OK);
    uint32_t s1 = 1;
    REQUIRE(wlm_eval_batch(b, &next, &s1, NULL, 1, &err) == WLM_OK);
    CHECK(memcmp(la, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    REQUIRE(wlm_seq_truncate(b, 0, 2, &err) == WLM_OK);
    REQUIRE(wlm_eval(b, other + 2, 1, &err) == WLM_OK);
    CHECK(memcmp(l0, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    /* too little room beside what sequence 0 holds */
    wlm_ctx *small = st_ctx(sm.m, 30, WLM_KV_F32, WLM_FULL_ERROR, 0, 2);
    REQUIRE(small);
    REQUIRE(wlm_eval(small, other, 3, &err) == WLM_OK);
    CHECK(wlm_ctx_state_load(small, 1, st, size, NULL, &err) == WLM_ERR_CONTEXT_FULL && strstr(err.msg, "free"));
    CHECK(wlm_ctx_state_load(small, 2, st, size, NULL, &err) == WLM_ERR_ARG);
    free(la);
    free(l0);
    free(st);
    wlm_ctx_free(a);
    wlm_ctx_free(b);
    wlm_ctx_free(small);
    st_free(&sm);
}

/* ---- sliding-window layers and the window ring ------------------------------------
 *
 * stories260K with a window set on chosen layers, as tests/c/test_swa.c
 * does (the ring depends only on which layers have one): every other layer
 * (gemma2), all but one (gemma3-like), every layer (Mistral). */

enum { WPAT_ALTERNATE,
       WPAT_ONE_GLOBAL,
       WPAT_ALL,
       N_WPAT };
static const char *const WPAT_NAME[N_WPAT] = { "gemma2 (every other layer)", "gemma3-like (all but layer 3)", "Mistral (every layer)" };

static void st_set_window(wlm_model *m, uint32_t w, int pattern) {
    m->n_swa = w;
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        m->layers[l].swa = pattern == WPAT_ALTERNATE ? l % 2 == 0 : pattern == WPAT_ONE_GLOBAL ? l != 3
                                                                                               : 1;
}

/* a context; swa_full: the window layers keep a row per slot (windowCache 'full') */
static wlm_ctx *st_wctx(wlm_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t kv, uint32_t swa_full, uint32_t slide, uint32_t keep, uint32_t n_seq) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.kv_type = kv;
    p.swa_full = swa_full;
    p.full_policy = slide;
    p.n_keep = keep;
    p.n_seq_max = n_seq;
    return tst_ctx_new(m, &p);
}

/* loads `state` into sequence 0 of c and continues MORE sampled tokens:
 * the tokens and every logits row must be those of the uninterrupted run
 * (ref, lref); the state saved right after the load must be `same` (NULL:
 * not checked) */
static int st_resumes(wlm_ctx *c, const uint8_t *state, uint64_t size, const toks *saved, const toks *ref, const float *lref,
                      const uint8_t *same, uint64_t same_size, const char *what) {
    wlm_state_info info;
    wlm_err err = { 0 };
    if (wlm_ctx_state_load(c, 0, state, size, &info, &err) != WLM_OK) {
        CHECKF(0, "%s: load: %s", what, err.msg);
        return 0;
    }
    CHECKF(ring_consistent(c), "%s: the ring after the load", what);
    if (same) {
        uint64_t sz = 0;
        uint8_t *again = st_save(c, 0, saved, &info.rng, &sz);
        CHECKF(again && sz == same_size && memcmp(again, same, sz) == 0, "%s: saved back, %llu bytes differ from the %llu expected", what,
               (unsigned long long)sz, (unsigned long long)same_size);
        free(again);
    }
    uint32_t nv = wlm_model_hparams(c->m)->n_vocab;
    float *l = malloc(sizeof(float) * nv * MORE);
    toks t = *saved;
    wlm_rng r = info.rng;
    int ok = st_continue(c, &t, &r, MORE, l);
    CHECKF(ok && t.n == ref->n && memcmp(t.ids, ref->ids, 4 * t.n) == 0, "%s: resumed tokens differ", what);
    CHECKF(ok && memcmp(l, lref, sizeof(float) * nv * MORE) == 0, "%s: resumed logits differ", what);
    CHECKF(ring_consistent(c), "%s: the ring after resuming", what);
    free(l);
    return ok;
}

/* A generation far past the window (about 12 prompt tokens + 60 sampled,
 * a window of 8, a ring of 7 + n_batch 4 = 11 rows), saved from a ring
 * context: resumed after a reload into a ring context, a full one
 * (swa_full), a smaller ring, the sliding policy; the state of the same
 * generation in a full context resumed in a ring. Every resume equals the
 * uninterrupted run bit for bit; the floor comes back, so a rewind after
 * the load goes as deep as before the save and no deeper, and evaluates
 * what the full cache evaluates; the ring's state holds only the rows the
 * window layers keep, the full context's every row. */
#define W 8
#define WGEN 60
TEST(state_window_ring_resumes_exactly) {
    smodel sm, re;
    REQUIRE(st_load(&sm));
    REQUIRE(st_reload(&sm, &re));
    const wlm_hparams *hp = wlm_model_hparams(sm.m);
    uint32_t nv = hp->n_vocab;
    float *la = malloc(sizeof(float) * nv * MORE), *lx = malloc(sizeof(float) * nv);
    wlm_err err = { 0 };
    for (int pat = 0; pat < N_WPAT; pat++)
        for (uint32_t kv = 0; kv < 2; kv++) {
            st_set_window(sm.m, W, pat);
            st_set_window(re.m, W, pat);
            uint32_t n_win_layers = 0;
            for (uint32_t l = 0; l < hp->n_layer; l++) n_win_layers += sm.m->layers[l].swa;
            uint64_t row = (uint64_t)hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * (kv ? 2 : 4);
            char what[160];
            wlm_ctx *a = st_wctx(sm.m, 160, 4, kv, 0, WLM_FULL_ERROR, 0, 1), *f = st_wctx(sm.m, 160, 4, kv, 1, WLM_FULL_ERROR, 0, 1);
            REQUIRE(a && f);
            REQUIRE(wlm_ctx_window_rows(a) == W - 1 + 4 && wlm_ctx_window_rows(f) == 0);
            toks ta, tf;
            wlm_rng ra, rf;
            REQUIRE(st_generate(a, &ta, &ra, WGEN) && st_generate(f, &tf, &rf, WGEN));
            REQUIRE(ta.n == tf.n && memcmp(ta.ids, tf.ids, 4 * ta.n) == 0); /* the ring computes what the full cache does */
            uint32_t n_pos = wlm_ctx_pos(a), floor = a->seq_floor[0];
            /* one by one past the 11-row ring: it holds the last 11 positions, a rewind of 4 (n_batch) is the deepest */
            CHECKF(floor == n_pos - 4, "floor %u at %u positions", floor, n_pos);
            CHECK(f->seq_floor[0] == 0);
            uint64_t size = 0, fsize = 0;
            uint8_t *s = st_save(a, 0, &ta, &ra, &size), *sf = st_save(f, 0, &tf, &rf, &fsize);
            REQUIRE(s && sf);
            /* the ring's state: every position's row in the global layers, the window layers' from floor - W + 1 on */
            uint32_t n_win = n_pos - (floor - W + 1);
            CHECKF(n_win == W - 1 + 4, "%u window rows", n_win);
            uint64_t want = 96 + 4ull * (ta.n + n_pos + hp->n_layer) + ((uint64_t)(hp->n_layer - n_win_layers) * n_pos + (uint64_t)n_win_layers * n_win) * row;
            CHECKF(size == want, "%s: %llu bytes, expected %llu", WPAT_NAME[pat], (unsigned long long)size, (unsigned long long)want);
            CHECK(fsize == 96 + 4ull * (ta.n + n_pos + hp->n_layer) + (uint64_t)hp->n_layer * n_pos * row);
            printf("  %s, %s cache: %u positions saved in %llu bytes from the ring, %llu from the full cache\n", WPAT_NAME[pat],
                   kv ? "F16" : "F32", n_pos, (unsigned long long)size, (unsigned long long)fsize);
            /* a rewind below the floor is refused; note its message */
            char refusal[256];
            CHECK(wlm_ctx_truncate(a, floor - 1, &err) == WLM_ERR_STATE);
            snprintf(refusal, sizeof refusal, "%s", err.msg);
            /* the uninterrupted run */
            toks tref = ta;
            wlm_rng rref = ra;
            REQUIRE(st_continue(a, &tref, &rref, MORE, la));

            /* the reloaded model: a ring as the saver's; the bytes save back unchanged */
            wlm_ctx *b = st_wctx(re.m, 160, 4, kv, 0, WLM_FULL_ERROR, 0, 1);
            REQUIRE(b);
            snprintf(what, sizeof what, "%s, %s cache: ring -> ring", WPAT_NAME[pat], kv ? "F16" : "F32");
            st_resumes(b, s, size, &ta, &tref, la, s, size, what);
            /* a full context: the rows go to their slots, the floor comes back, the bytes too */
            wlm_ctx *bf = st_wctx(re.m, 100, 4, kv, 1, WLM_FULL_ERROR, 0, 1);
            REQUIRE(bf);
            snprintf(what, sizeof what, "%s, %s cache: ring -> full", WPAT_NAME[pat], kv ? "F16" : "F32");
            st_resumes(bf, s, size, &ta, &tref, la, s, size, what);
            /* the full context's state in a ring: the ring keeps the newest rows as an evaluation
             * would, ending with the saver's floor and the ring's very bytes */
            wlm_ctx *bw = st_wctx(re.m, 100, 4, kv, 0, WLM_FULL_ERROR, 0, 1);
            REQUIRE(bw);
            snprintf(what, sizeof what, "%s, %s cache: full -> ring", WPAT_NAME[pat], kv ? "F16" : "F32");
            st_resumes(bw, sf, fsize, &tf, &tref, la, s, size, what);
            /* a smaller ring (n_batch 2: 9 rows) keeps 9 of the 11 rows, raising the floor by 2 */
            wlm_ctx *small = st_wctx(re.m, 100, 2, kv, 0, WLM_FULL_ERROR, 0, 1);
            REQUIRE(small);
            REQUIRE(wlm_ctx_state_load(small, 0, s, size, NULL, &err) == WLM_OK);
            CHECK(small->seq_floor[0] == floor + 2 && ring_consistent(small));
            wlm_ctx_reset(small);
            snprintf(what, sizeof what, "%s, %s cache: ring -> smaller ring", WPAT_NAME[pat], kv ? "F16" : "F32");
            st_resumes(small, s, size, &ta, &tref, la, NULL, 0, what);

            /* rewinds after a load: as deep as before the save, with the same refusal, and to the
             * floor the same logits as the full cache rewound there */
            wlm_ctx *rw[2] = { st_wctx(re.m, 160, 4, kv, 0, WLM_FULL_ERROR, 0, 1), st_wctx(re.m, 160, 4, kv, 1, WLM_FULL_ERROR, 0, 1) };
            REQUIRE(rw[0] && rw[1]);
            REQUIRE(wlm_ctx_truncate(f, floor, &err) == WLM_OK);
            int32_t other[3] = { 41, 42, 43 };
            REQUIRE(wlm_eval(f, other, 3, &err) == WLM_OK);
            memcpy(lx, wlm_ctx_logits(f), sizeof(float) * nv);
            for (int k = 0; k < 2; k++) {
                REQUIRE(wlm_ctx_state_load(rw[k], 0, s, size, NULL, &err) == WLM_OK);
                CHECK(rw[k]->seq_floor[0] == floor);
                CHECK(wlm_ctx_truncate(rw[k], floor - 1, &err) == WLM_ERR_STATE);
                CHECKF(strcmp(err.msg, refusal) == 0, "'%s' vs '%s'", err.msg, refusal);
                REQUIRE(wlm_ctx_truncate(rw[k], floor, &err) == WLM_OK);
                REQUIRE(wlm_eval(rw[k], other, 3, &err) == WLM_OK);
                CHECKF(memcmp(lx, wlm_ctx_logits(rw[k]), sizeof(float) * nv) == 0, "%s: a rewind to the floor after a load into %s",
                       WPAT_NAME[pat], k ? "a full context" : "a ring");
            }
            free(s);
            free(sf);
            wlm_ctx_free(a);
            wlm_ctx_free(f);
            wlm_ctx_free(b);
            wlm_ctx_free(bf);
            wlm_ctx_free(bw);
            wlm_ctx_free(small);
            wlm_ctx_free(rw[0]);
            wlm_ctx_free(rw[1]);
        }
    free(la);
    free(lx);
    st_free(&re);
    st_free(&sm);
}

/* the sliding policy on top of the ring: a slid sequence with window
 * layers resumes exactly in the same ring, kept by a ring or by a row per
 * slot; the same bytes save back */
TEST(state_window_ring_under_the_sliding_policy) {
    smodel sm;
    REQUIRE(st_load(&sm));
    st_set_window(sm.m, W, WPAT_ONE_GLOBAL);
    uint32_t nv = wlm_model_hparams(sm.m)->n_vocab;
    float *la = malloc(sizeof(float) * nv * MORE);
    for (uint32_t full = 0; full < 2; full++) {
        wlm_ctx *a = st_wctx(sm.m, 32, 4, WLM_KV_F32, full, WLM_FULL_SLIDE, 4, 1);
        REQUIRE(a);
        CHECK(wlm_ctx_window_rows(a) == (full ? 0 : W - 1 + 4));
        toks ta;
        wlm_rng ra;
        REQUIRE(st_generate(a, &ta, &ra, 40));
        REQUIRE(wlm_ctx_pos(a) > 32 && a->slid);
        uint64_t size = 0;
        uint8_t *s = st_save(a, 0, &ta, &ra, &size);
        REQUIRE(s);
        toks tref = ta;
        wlm_rng rref = ra;
        REQUIRE(st_continue(a, &tref, &rref, MORE, la));
        for (uint32_t into = 0; into < 2; into++) {
            wlm_ctx *b = st_wctx(sm.m, 32, 4, WLM_KV_F32, into, WLM_FULL_SLIDE, 4, 1);
            REQUIRE(b);
            char what[96];
            snprintf(what, sizeof what, "slid, %s -> %s", full ? "full" : "ring", into ? "full" : "ring");
            st_resumes(b, s, size, &ta, &tref, la, into == full ? s : NULL, size, what);
            wlm_ctx_free(b);
        }
        free(s);
        wlm_ctx_free(a);
    }
    free(la);
    st_free(&sm);
}

/* One sequence of three decoded side by side in a ring, saved, loaded as
 * sequence 2 of a ring whose sequence 0 holds every row lazily (the load
 * drops the rows no query of sequence 0 sees any more, as an evaluation
 * does): the same next logits for both sequences as without the load. */
TEST(state_window_ring_beside_other_sequences) {
    smodel sm;
    REQUIRE(st_load(&sm));
    st_set_window(sm.m, W, WPAT_ALTERNATE);
    uint32_t nv = wlm_model_hparams(sm.m)->n_vocab;
    wlm_err err = { 0 };
    wlm_ctx *a = st_wctx(sm.m, 256, 4, WLM_KV_F32, 0, WLM_FULL_ERROR, 0, 3);
    REQUIRE(a);
    REQUIRE(wlm_ctx_window_rows(a) == 3 * (W - 1) + 4);
    int32_t prompt[8] = { 1, 403, 407, 261, 378, 30, 40, 50 };
    REQUIRE(wlm_eval(a, prompt, 8, &err) == WLM_OK);
    for (uint32_t s = 1; s < 3; s++) REQUIRE(wlm_seq_fork(a, 0, s, &err) == WLM_OK);
    toks t1;
    memcpy(t1.ids, prompt, sizeof prompt);
    t1.n = 8;
    for (int step = 0; step < 40; step++) {
        int32_t tk[3];
        uint32_t sq[3];
        for (uint32_t s = 0; s < 3; s++) {
            tk[s] = (int32_t)(100 + 7 * step + 13 * s) % 512;
            sq[s] = s;
        }
        REQUIRE(wlm_eval_batch(a, tk, sq, NULL, 3, &err) == WLM_OK);
        t1.ids[t1.n++] = tk[1];
    }
    CHECK(a->seq_floor[1] > 0 && ring_consistent(a));
    uint64_t size = 0;
    uint8_t *st = st_save(a, 1, &t1, NULL, &size);
    REQUIRE(st);
    int32_t next = 77;
    uint32_t s1 = 1, s2 = 2;
    REQUIRE(wlm_eval_batch(a, &next, &s1, NULL, 1, &err) == WLM_OK);
    float *la = malloc(sizeof(float) * nv), *l0 = malloc(sizeof(float) * nv);
    memcpy(la, wlm_ctx_logits(a), sizeof(float) * nv);
    /* sequence 0 of the target: 25 positions, the ring's 25 rows all its own */
    int32_t own[26];
    for (int i = 0; i < 26; i++) own[i] = (int32_t)(5 + 11 * i) % 500;
    wlm_ctx *ref = st_wctx(sm.m, 256, 4, WLM_KV_F32, 1, WLM_FULL_ERROR, 0, 1);
    REQUIRE(ref);
    REQUIRE(wlm_eval(ref, own, 26, &err) == WLM_OK);
    memcpy(l0, wlm_ctx_logits(ref), sizeof(float) * nv);
    wlm_ctx *b = st_wctx(sm.m, 256, 4, WLM_KV_F32, 0, WLM_FULL_ERROR, 0, 3);
    REQUIRE(b);
    REQUIRE(wlm_eval(b, own, 25, &err) == WLM_OK);
    CHECK(b->ring_free == 0 && b->seq_floor[0] == 0);
    REQUIRE(wlm_ctx_state_load(b, 2, st, size, NULL, &err) == WLM_OK);
    CHECK(ring_consistent(b));
    CHECK(b->seq_floor[2] == a->seq_floor[1]);
    CHECK(b->seq_floor[0] > 0); /* its oldest rows made way */
    REQUIRE(wlm_eval_batch(b, &next, &s2, NULL, 1, &err) == WLM_OK);
    CHECK(memcmp(la, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    REQUIRE(wlm_eval(b, own + 25, 1, &err) == WLM_OK);
    CHECK(memcmp(l0, wlm_ctx_logits(b), sizeof(float) * nv) == 0);
    CHECK(ring_consistent(b));
    free(la);
    free(l0);
    free(st);
    wlm_ctx_free(a);
    wlm_ctx_free(b);
    wlm_ctx_free(ref);
    st_free(&sm);
}

/* a floor a model's window cannot have made is refused, changing nothing */
TEST(state_window_floor_refused_when_impossible) {
    smodel sm;
    REQUIRE(st_load(&sm));
    st_set_window(sm.m, W, WPAT_ALL);
    wlm_ctx *a = st_wctx(sm.m, 128, 4, WLM_KV_F32, 0, WLM_FULL_ERROR, 0, 1);
    REQUIRE(a);
    toks t;
    wlm_rng r;
    REQUIRE(st_generate(a, &t, &r, 30));
    uint64_t size = 0;
    uint8_t *s = st_save(a, 0, &t, &r, &size);
    REQUIRE(s);
    uint32_t floor = a->seq_floor[0], n_pos = wlm_ctx_pos(a);
    REQUIRE(floor > W);
    wlm_ctx *c = st_wctx(sm.m, 128, 4, WLM_KV_F32, 0, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c);
    int32_t own[5] = { 1, 50, 60, 70, 80 };
    wlm_err err = { 0 };
    REQUIRE(wlm_eval(c, own, 5, &err) == WLM_OK);
    uint8_t *d = malloc(size);
    /* below the window, past the sequence's end */
    uint32_t bad[] = { 1, W - 1, n_pos + 1 };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(d, s, size);
        wlm_wr32(d + 76, bad[i]);
        fix_checksum(d, size);
        refused(c, d, size, WLM_ERR_FORMAT, "rewind floor", "an impossible floor");
    }
    /* another possible floor: its rows do not match the bytes */
    memcpy(d, s, size);
    wlm_wr32(d + 76, floor - 1);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "corrupt", "a floor one lower");
    memcpy(d, s, size);
    wlm_wr32(d + 76, 0);
    fix_checksum(d, size);
    refused(c, d, size, WLM_ERR_FORMAT, "corrupt", "no floor");
    CHECK(ring_consistent(c) && c->seq_floor[0] == 0);
    REQUIRE(wlm_ctx_state_load(c, 0, s, size, NULL, &err) == WLM_OK);
    free(d);
    free(s);
    wlm_ctx_free(a);
    wlm_ctx_free(c);
    st_free(&sm);
}
#undef W
#undef WGEN

/* ---- vocabulary-only loads ------------------------------------------------------- */

static const char *const k_vocabs[] = { "llama-spm", "gpt-2", "deepseek-llm", "falcon" };

TEST(vocab_only_load_tokenizes_as_the_vocabulary) {
    for (uint32_t k = 0; k < sizeof k_vocabs / sizeof k_vocabs[0]; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", k_vocabs[k]);
        tvocab ref;
        REQUIRE(tv_load(&ref, rel));
        unsigned long long size = 0, ni = 0;
        unsigned char *file = tst_read_file(tst_path(rel), &size);
        REQUIRE(file);
        unsigned char *bytes = tst_sys_copy(file, size);
        free(file);
        uint64_t meta = 0;
        wlm_err err = { 0 };
        REQUIRE(wlm_gguf_meta_bytes(bytes, size, &meta, &err) == WLM_OK);
        CHECKF(meta > 24 && meta <= size, "%s: meta %llu of %llu", k_vocabs[k], (unsigned long long)meta, size);
        /* exactly the metadata bytes are enough */
        wlm_model *m = NULL;
        REQUIRE(wlm_model_load_vocab(&m, bytes, meta, &err) == WLM_OK);
        CHECK(wlm_model_vocab_only(m) == 1 && wlm_model_fingerprint(m) == 0 && wlm_tensor_count(m) == 0);
        CHECK(wlm_model_hparams(m)->n_vocab == ref.v.n && wlm_model_hparams(m)->bos_id == ref.v.bos);
        wlm_ctx *c = NULL;
        CHECK(wlm_ctx_new(&c, m, NULL, &err) == WLM_ERR_STATE && strstr(err.msg, "vocabulary-only") && !c);
        uint64_t qs;
        CHECK(wlm_quantize_size(m, GGML_Q8_0, &qs, &err) == WLM_ERR_STATE);
        /* one byte less is not */
        wlm_model *m2 = NULL;
        CHECK(wlm_model_load_vocab(&m2, bytes, meta - 1, &err) == WLM_ERR_TRUNCATED && !m2);
        /* every test string: the same ids through the public API as through the vocabulary */
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", k_vocabs[k]);
        char *inp = (char *)tst_read_file(tst_path(rel), &ni);
        REQUIRE(inp);
        const char *sep = "\n__ggml_vocab_test__\n";
        size_t sl = strlen(sep), ip = 0;
        int n_same = 0, n_all = 0;
        while (ip < ni) {
            size_t e = ip;
            while (e + sl <= ni && memcmp(inp + e, sep, sl) != 0) e++;
            if (e + sl > ni) break;
            uint32_t na = 0, nb = 0, len = (uint32_t)(e - ip);
            int32_t *a = tv_tokenize(&ref.v, inp + ip, len, 0, &na);
            int32_t *b = malloc(sizeof(int32_t) * (3 * len + 8));
            wlm_status st = wlm_tokenize(m, inp + ip, len, 0, b, 3 * len + 8, &nb, &err);
            n_all++;
            n_same += a && st == WLM_OK && na == nb && (na == 0 || memcmp(a, b, 4 * na) == 0);
            free(a);
            free(b);
            ip = e + sl;
        }
        CHECKF(n_same == n_all && n_all == 46, "%s: %d of %d strings the same", k_vocabs[k], n_same, n_all);
        printf("  %s: metadata %llu of %llu bytes, %d strings tokenized alike\n", k_vocabs[k], (unsigned long long)meta, size, n_all);
        free(inp);
        wlm_model_free(m);
        wlm_sys_free(bytes);
        tv_free(&ref);
    }
}

/* A whole model loaded vocabulary-only from its metadata bytes alone; every
 * prefix's answer is a lower bound of those bytes and names more than it has */
TEST(vocab_only_from_a_model_prefix) {
    smodel sm;
    REQUIRE(st_load(&sm));
    uint64_t meta = 0;
    wlm_err err = { 0 };
    REQUIRE(wlm_gguf_meta_bytes(sm.bytes, sm.size, &meta, &err) == WLM_OK);
    CHECK(meta < sm.size / 4);
    uint64_t bad = 0, steps = 0;
    for (uint64_t n = 0; n < meta; n += 1 + n / 64, steps++) {
        uint64_t need = 0;
        wlm_status st = wlm_gguf_meta_bytes(sm.bytes, n, &need, &err);
        if (st != WLM_ERR_TRUNCATED || need <= n || need > meta) bad++;
    }
    CHECKF(bad == 0, "%llu of %llu prefixes answered wrongly", (unsigned long long)bad, (unsigned long long)steps);
    uint64_t need = 0;
    CHECK(wlm_gguf_meta_bytes((const uint8_t *)"GGUX", 4, &need, &err) == WLM_ERR_FORMAT && need == 0);
    CHECK(wlm_gguf_meta_bytes((const uint8_t *)"GG", 2, &need, &err) == WLM_ERR_TRUNCATED && need == 24);
    wlm_model *v = NULL;
    REQUIRE(wlm_model_load_vocab(&v, sm.bytes, meta, &err) == WLM_OK);
    const char *text = "Once upon a time, there was a little dog named Sam. </s> <s>";
    int32_t a[64], b[64];
    uint32_t na = 0, nb = 0;
    for (int flags = 0; flags < 4; flags++) {
        CHECK(wlm_tokenize(sm.m, text, (uint32_t)strlen(text), flags, a, 64, &na, &err) == WLM_OK);
        CHECK(wlm_tokenize(v, text, (uint32_t)strlen(text), flags, b, 64, &nb, &err) == WLM_OK);
        CHECK(na == nb && memcmp(a, b, 4 * na) == 0);
    }
    const wlm_hparams *hv = wlm_model_hparams(v), *hm = wlm_model_hparams(sm.m);
    CHECK(hv->n_vocab == hm->n_vocab && hv->eos_id == hm->eos_id && hv->add_bos == hm->add_bos && hv->n_ctx_train == hm->n_ctx_train);
    CHECK(hv->n_layer == 0 && wlm_meta_count(v) == wlm_meta_count(sm.m));
    wlm_detok d;
    char out[128];
    wlm_detok_reset(&d);
    uint32_t k = 0;
    for (uint32_t i = 0; i < na; i++) k += wlm_detok_push(v, &d, a[i], out + k, (uint32_t)sizeof out - k);
    CHECK(k > 10 && memcmp(out, " Once upon", 10) == 0);
    wlm_model_free(v);
    st_free(&sm);
}
