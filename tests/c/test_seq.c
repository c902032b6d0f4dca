/* Several sequences in one cache (src/kvcache.c, wlm_eval_batch) and the
 * speculative acceptance rule (src/speculative.c):
 *   - candidates forked from one prefilled prompt and decoded together in
 *     one batch per step give exactly the tokens and logits of running each
 *     alone (F32, Q8_0 and Q4_0 weights);
 *   - removed sequences free their slots, which are reused; side-by-side
 *     sequences fill blocks of slots of their own;
 *   - truncating a sequence and re-evaluating reproduces its logits;
 *   - a full cache fails without changing state; bad arguments are refused;
 *   - the acceptance rule emits tokens distributed as the target (chi-square)
 *     and, greedy, keeps exactly the argmax. */
#include <stdint.h>
#include <math.h>
#include "tst.h"
#include "../../src/internal.h"

typedef struct {
    unsigned char *bytes;
    wlm_model *m;
} smodel;

static int sm_load(smodel *t) {
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

/* the same model re-quantized to `type` */
static int sm_quantized(const smodel *src, uint32_t type, smodel *out) {
    wlm_err err = { 0 };
    uint64_t size = 0;
    memset(out, 0, sizeof *out);
    if (wlm_quantize_size(src->m, type, &size, &err) != WLM_OK) return 0;
    out->bytes = wlm_sys_alloc(size);
    if (!out->bytes || wlm_quantize(src->m, type, out->bytes, size, NULL, 0, &err) != WLM_OK) return 0;
    return wlm_model_load(&out->m, out->bytes, size, &err) == WLM_OK;
}

static void sm_free(smodel *t) {
    wlm_model_free(t->m);
    wlm_sys_free(t->bytes);
    memset(t, 0, sizeof *t);
}

static wlm_ctx *ctx_seq(wlm_model *m, uint32_t n_ctx, uint32_t n_seq, uint32_t n_out) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = 32;
    p.n_seq_max = n_seq;
    p.n_outputs = n_out;
    return tst_ctx_new(m, &p);
}

/* a 10-token prompt into sequence 0, forked to sequences 1..n_seq-1 */
static int prompt_forked(wlm_ctx *c, uint32_t n_seq) {
    static const int32_t p[10] = { 1, 20, 30, 40, 50, 60, 70, 80, 90, 100 };
    wlm_err err = { 0 };
    if (wlm_eval(c, p, 10, &err) != WLM_OK) {
        fprintf(stderr, "  eval: %s\n", err.msg);
        return 0;
    }
    for (uint32_t s = 1; s < n_seq; s++)
        if (wlm_seq_fork(c, 0, s, &err) != WLM_OK) {
            fprintf(stderr, "  fork: %s\n", err.msg);
            return 0;
        }
    return 1;
}

static uint32_t prompt_ids(const wlm_model *m, int32_t *ids, uint32_t cap) {
    const char *text = "Once upon a time, there was a little dog";
    uint32_t n = 0;
    wlm_err err = { 0 };
    if (wlm_tokenize(m, text, (uint32_t)strlen(text), WLM_TOK_ADD_BOS, ids, cap, &n, &err) != WLM_OK) return 0;
    return n;
}

static void sampling(wlm_sampler_params *sp, float temp) {
    wlm_sampler_default_params(sp);
    sp->temperature = temp;
    sp->top_k = 0;
    sp->top_p = 1;
    sp->min_p = 0;
    sp->repeat_penalty = 1;
}

#define NSEQ 4
#define STEPS 24

/* Decodes NSEQ candidates (seed i each) forked from one prompt, one batch per
 * step; then each alone in its own context; compares tokens and logits. */
static void batched_vs_alone(wlm_model *m, const char *name) {
    uint32_t V = m->hp.n_vocab;
    int32_t prompt[64];
    uint32_t np = prompt_ids(m, prompt, 64);
    REQUIRE(np > 3);
    wlm_sampler_params sp;
    sampling(&sp, 0.9f);
    static int32_t tok_b[NSEQ][STEPS], tok_a[NSEQ][STEPS];
    float *lg_b = malloc(sizeof(float) * NSEQ * STEPS * V);
    REQUIRE(lg_b);
    wlm_err err = { 0 };

    wlm_ctx *c = ctx_seq(m, 256, NSEQ, NSEQ);
    REQUIRE(c);
    REQUIRE(wlm_eval(c, prompt, np, &err) == WLM_OK);
    uint32_t used_after_prompt = c->n_ctx - wlm_ctx_free_slots(c);
    CHECK(used_after_prompt == np);
    /* every candidate starts from the prompt's logits (row 0) */
    float *first = malloc(sizeof(float) * V);
    memcpy(first, wlm_ctx_logits(c), sizeof(float) * V);
    for (uint32_t s = 1; s < NSEQ; s++) REQUIRE(wlm_seq_fork(c, 0, s, &err) == WLM_OK);
    CHECK(c->n_ctx - wlm_ctx_free_slots(c) == np); /* shared, not copied */
    for (uint32_t s = 0; s < NSEQ; s++) CHECK(wlm_seq_pos(c, s) == np);
    wlm_rng rng[NSEQ];
    for (uint32_t s = 0; s < NSEQ; s++) wlm_rng_seed(&rng[s], 100 + s);
    for (int t = 0; t < STEPS; t++) {
        int32_t toks[NSEQ];
        uint32_t seqs[NSEQ];
        uint8_t want[NSEQ];
        for (uint32_t s = 0; s < NSEQ; s++) {
            const float *lg = t == 0 ? first : wlm_ctx_logits(c) + (size_t)s * V;
            if (t > 0) memcpy(lg_b + ((size_t)s * STEPS + t) * V, lg, sizeof(float) * V);
            REQUIRE(wlm_sample(c, lg, &sp, NULL, 0, &rng[s], &toks[s], NULL, &err) == WLM_OK);
            tok_b[s][t] = toks[s];
            seqs[s] = s;
            want[s] = 1;
        }
        if (t + 1 < STEPS) {
            REQUIRE(wlm_eval_batch(c, toks, seqs, want, NSEQ, &err) == WLM_OK);
            CHECK(wlm_ctx_n_logits(c) == NSEQ);
        }
    }
    CHECK(c->n_ctx - wlm_ctx_free_slots(c) == np + NSEQ * (STEPS - 1));
    /* candidates differ (different seeds), so the test compares real batches */
    int differ = 0;
    for (int t = 0; t < STEPS; t++)
        if (tok_b[0][t] != tok_b[1][t]) differ = 1;
    CHECK(differ);

    /* each alone */
    int same_tokens = 1;
    double worst = 0;
    for (uint32_t s = 0; s < NSEQ; s++) {
        wlm_ctx *a = ctx_seq(m, 256, 1, 1);
        REQUIRE(a);
        REQUIRE(wlm_eval(a, prompt, np, &err) == WLM_OK);
        wlm_rng r;
        wlm_rng_seed(&r, 100 + s);
        for (int t = 0; t < STEPS; t++) {
            const float *lg = wlm_ctx_logits(a);
            if (t > 0) {
                const float *b = lg_b + ((size_t)s * STEPS + t) * V;
                for (uint32_t i = 0; i < V; i++) worst = fmax(worst, fabs((double)lg[i] - b[i]));
            }
            REQUIRE(wlm_sample(a, lg, &sp, NULL, 0, &r, &tok_a[s][t], NULL, &err) == WLM_OK);
            if (tok_a[s][t] != tok_b[s][t]) same_tokens = 0;
            if (t + 1 < STEPS) REQUIRE(wlm_eval(a, &tok_a[s][t], 1, &err) == WLM_OK);
        }
        wlm_ctx_free(a);
    }
    printf("  %s: %d candidates x %d tokens, batched vs alone: tokens %s, max |logit diff| %.3g\n",
           name, NSEQ, STEPS, same_tokens ? "identical" : "DIFFER", worst);
    CHECKF(same_tokens, "%s: batched candidates differ from single runs", name);
    /* the attention tiles hold the same slots in the same order and the
     * batched matmul computes each dot as decode does: bit for bit equal */
    CHECKF(worst == 0.0, "%s: logits differ by %.3g", name, worst);

    /* removing candidates frees their slots; the survivor continues, its new
     * tokens go to reused slots below its own (order changes: tolerance) */
    for (uint32_t s = 1; s < NSEQ; s++) REQUIRE(wlm_seq_remove(c, s, &err) == WLM_OK);
    CHECK(c->n_ctx - wlm_ctx_free_slots(c) == np + (STEPS - 1));
    wlm_ctx *a = ctx_seq(m, 256, 1, 1);
    REQUIRE(a);
    REQUIRE(wlm_eval(a, prompt, np, &err) == WLM_OK);
    for (int t = 0; t + 1 < STEPS; t++) REQUIRE(wlm_eval(a, &tok_b[0][t], 1, &err) == WLM_OK);
    int32_t more[4] = { tok_b[0][STEPS - 1], 5, 6, 7 };
    double drift = 0;
    for (int k = 0; k < 4; k++) {
        REQUIRE(wlm_eval(c, &more[k], 1, &err) == WLM_OK);
        REQUIRE(wlm_eval(a, &more[k], 1, &err) == WLM_OK);
        for (uint32_t i = 0; i < V; i++) drift = fmax(drift, fabs((double)wlm_ctx_logits(c)[i] - wlm_ctx_logits(a)[i]));
    }
    CHECKF(drift < 1e-4, "%s: after removals, logits drift %.3g", name, drift);
    CHECK(wlm_seq_pos(c, 0) == np + STEPS - 1 + 4);
    wlm_ctx_free(a);
    wlm_ctx_free(c);
    free(first);
    free(lg_b);
}

TEST(seq_batched_candidates_equal_single_runs) {
    smodel f32;
    REQUIRE(sm_load(&f32));
    batched_vs_alone(f32.m, "F32");
    static const struct {
        uint32_t type;
        const char *name;
    } Q[] = { { GGML_Q8_0, "Q8_0" }, { GGML_Q4_0, "Q4_0" } };
    for (unsigned i = 0; i < 2; i++) {
        smodel q;
        if (!sm_quantized(&f32, Q[i].type, &q)) {
            CHECKF(0, "quantize %s", Q[i].name);
            continue;
        }
        batched_vs_alone(q.m, Q[i].name);
        sm_free(&q);
    }
    sm_free(&f32);
}

TEST(seq_truncate_reeval_and_prefix_logits) {
    smodel sm;
    REQUIRE(sm_load(&sm));
    uint32_t V = sm.m->hp.n_vocab;
    int32_t p[64];
    uint32_t np = prompt_ids(sm.m, p, 64);
    wlm_err err = { 0 };
    wlm_ctx *c = ctx_seq(sm.m, 128, 2, 8);
    REQUIRE(c);
    /* logits for several positions of one sequence in one call (the target's
     * verification pass of speculative decoding) */
    uint8_t want[64] = { 0 };
    for (uint32_t i = np - 4; i < np; i++) want[i] = 1;
    REQUIRE(wlm_eval_batch(c, p, NULL, want, np, &err) == WLM_OK);
    REQUIRE(wlm_ctx_n_logits(c) == 4);
    float *rows = malloc(sizeof(float) * 4 * V);
    memcpy(rows, wlm_ctx_logits(c), sizeof(float) * 4 * V);
    /* rewind 3 positions and evaluate them again: same logits */
    REQUIRE(wlm_seq_truncate(c, 0, np - 3, &err) == WLM_OK);
    CHECK(wlm_seq_pos(c, 0) == np - 3);
    CHECK(wlm_ctx_free_slots(c) == 128 - (np - 3));
    uint8_t w3[3] = { 1, 1, 1 };
    REQUIRE(wlm_eval_batch(c, p + np - 3, NULL, w3, 3, &err) == WLM_OK);
    CHECK(memcmp(wlm_ctx_logits(c), rows + V, sizeof(float) * 3 * V) == 0);
    /* one at a time, from a fresh context: same rows */
    wlm_ctx *a = ctx_seq(sm.m, 128, 1, 1);
    REQUIRE(a);
    REQUIRE(wlm_eval(a, p, np - 4, &err) == WLM_OK);
    int same = 1;
    for (uint32_t i = 0; i < 4; i++) {
        REQUIRE(wlm_eval(a, &p[np - 4 + i], 1, &err) == WLM_OK);
        if (memcmp(wlm_ctx_logits(a), rows + (size_t)i * V, sizeof(float) * V) != 0) same = 0;
    }
    CHECK(same);
    /* truncating beyond the end is refused */
    CHECK(wlm_seq_truncate(c, 0, np + 5, &err) == WLM_ERR_ARG);
    CHECK(strstr(err.msg, "cannot truncate sequence 0") != NULL);
    wlm_ctx_free(a);
    wlm_ctx_free(c);
    free(rows);
    sm_free(&sm);
}

TEST(seq_full_cache_and_bad_arguments) {
    smodel sm;
    REQUIRE(sm_load(&sm));
    wlm_err err = { 0 };
    wlm_ctx *c = ctx_seq(sm.m, 16, 3, 3);
    REQUIRE(c);
    REQUIRE(prompt_forked(c, 3));
    /* 6 free slots: two steps of 3 fit, the third does not */
    int32_t t3[3] = { 5, 6, 7 };
    uint32_t s3[3] = { 0, 1, 2 };
    uint8_t w3[3] = { 1, 1, 1 };
    REQUIRE(wlm_eval_batch(c, t3, s3, w3, 3, &err) == WLM_OK);
    REQUIRE(wlm_eval_batch(c, t3, s3, w3, 3, &err) == WLM_OK);
    CHECK(wlm_ctx_free_slots(c) == 0);
    CHECK(wlm_eval_batch(c, t3, s3, w3, 3, &err) == WLM_ERR_CONTEXT_FULL);
    CHECK(strstr(err.msg, "context full: 3 tokens need cache slots, 0 of 16 are free") != NULL);
    for (uint32_t s = 0; s < 3; s++) CHECK(wlm_seq_pos(c, s) == 12); /* unchanged */
    /* freeing one candidate makes room again */
    REQUIRE(wlm_seq_remove(c, 2, &err) == WLM_OK);
    CHECK(wlm_ctx_free_slots(c) == 2);
    REQUIRE(wlm_eval_batch(c, t3, s3, w3, 2, &err) == WLM_OK);
    /* bad arguments */
    uint32_t bad_seq[1] = { 3 };
    CHECK(wlm_eval_batch(c, t3, bad_seq, NULL, 1, &err) == WLM_ERR_ARG);
    CHECK(strstr(err.msg, "sequence 3 out of range (the context holds 3)") != NULL);
    CHECK(wlm_seq_fork(c, 0, 7, &err) == WLM_ERR_ARG);
    CHECK(wlm_seq_remove(c, 64, &err) == WLM_ERR_ARG);
    wlm_ctx_free(c);
    /* more rows of logits than planned */
    c = ctx_seq(sm.m, 64, 1, 2);
    REQUIRE(c);
    int32_t p[4] = { 1, 20, 30, 40 };
    uint8_t w[4] = { 1, 1, 1, 1 };
    CHECK(wlm_eval_batch(c, p, NULL, w, 4, &err) == WLM_ERR_ARG);
    CHECK(strstr(err.msg, "4 rows of logits asked for, the context keeps 2") != NULL);
    CHECK(wlm_seq_pos(c, 0) == 0);
    wlm_ctx_free(c);
    /* the sliding window is a one-sequence policy */
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    cp.n_ctx = 64;
    cp.n_seq_max = 2;
    cp.full_policy = WLM_FULL_SLIDE;
    CHECK(wlm_ctx_new(&c, sm.m, &cp, &err) == WLM_ERR_ARG);
    CHECK(strstr(err.msg, "sliding-window policy works with one sequence") != NULL);
    cp.full_policy = WLM_FULL_ERROR;
    cp.n_seq_max = 65;
    CHECK(wlm_ctx_new(&c, sm.m, &cp, &err) == WLM_ERR_ARG);
    sm_free(&sm);
}

/* Where new tokens go: candidates decoded side by side each fill blocks of
 * WLM_KV_BLOCK slots of their own, in ascending order (so each reads its
 * keys in runs), the prompt's slots shared; a truncated sequence goes on in
 * the slots it freed; a cache too full for whole blocks still takes every
 * free slot (seq_full_cache_and_bad_arguments). */
TEST(seq_slots_in_blocks_per_sequence) {
    smodel sm;
    REQUIRE(sm_load(&sm));
    wlm_err err = { 0 };
    wlm_ctx *c = ctx_seq(sm.m, 256, 4, 4);
    REQUIRE(c);
    REQUIRE(prompt_forked(c, 4));
    int32_t t4[4] = { 5, 6, 7, 8 };
    uint32_t s4[4] = { 0, 1, 2, 3 };
    for (int step = 0; step < 20; step++) REQUIRE(wlm_eval_batch(c, t4, s4, NULL, 4, &err) == WLM_OK);
    for (uint32_t s = 0; s < 4; s++) {
        int32_t last = -1;
        uint32_t runs = 0, own = 0, prev = 0;
        for (uint32_t j = 0; j < c->n_slots; j++) {
            if (!(c->slot_seq[j] & (1ull << s))) continue;
            CHECKF(c->slot_pos[j] == last + 1, "seq %u: slot %u holds position %d after %d", s, j, c->slot_pos[j], last);
            last = c->slot_pos[j];
            if (c->slot_pos[j] >= 10) {
                own++;
                if (own == 1 || j != prev + 1) runs++;
                prev = j;
            }
        }
        CHECK(own == 20 && last == 29);
        CHECKF(runs <= 3, "seq %u: its 20 slots in %u runs", s, runs); /* the prompt block's rest, then whole blocks */
    }
    CHECK(c->n_slots <= 10 + 4 * 32);
    /* seq 2 truncated to 15: its next tokens take the slots it freed */
    uint32_t before = wlm_ctx_free_slots(c), slots = c->n_slots;
    REQUIRE(wlm_seq_truncate(c, 2, 15, &err) == WLM_OK);
    CHECK(wlm_ctx_free_slots(c) == before + 15);
    uint32_t two = 2;
    for (int i = 0; i < 15; i++) REQUIRE(wlm_eval_batch(c, t4, &two, NULL, 1, &err) == WLM_OK);
    CHECK(wlm_ctx_free_slots(c) == before && c->n_slots == slots);
    wlm_ctx_free(c);
    sm_free(&sm);
}

/* The emitted token of wlm_spec_accept, drawn many times with x ~ q, must
 * follow the target's filtered distribution p (chi-square), for q far from p. */
TEST(spec_accept_follows_target_distribution) {
    smodel sm;
    REQUIRE(sm_load(&sm));
    uint32_t V = sm.m->hp.n_vocab;
    wlm_err err = { 0 };
    wlm_ctx *c = ctx_seq(sm.m, 64, 1, 1);
    REQUIRE(c);
    int32_t p1[3] = { 1, 400, 30 }, p2[3] = { 1, 100, 7 };
    float *lt = malloc(sizeof(float) * V), *ld = malloc(sizeof(float) * V);
    REQUIRE(wlm_eval(c, p1, 3, &err) == WLM_OK);
    memcpy(lt, wlm_ctx_logits(c), sizeof(float) * V);
    wlm_ctx_reset(c);
    REQUIRE(wlm_eval(c, p2, 3, &err) == WLM_OK);
    memcpy(ld, wlm_ctx_logits(c), sizeof(float) * V);
    wlm_sampler_params sp;
    sampling(&sp, 1.3f);
    sp.top_k = 12;
    int32_t pid[12], qid[12];
    float pp[12], qp[12];
    uint32_t kp = wlm_sample_dist(c, lt, &sp, NULL, 0, pid, pp, 12);
    uint32_t kq = wlm_sample_dist(c, ld, &sp, NULL, 0, qid, qp, 12);
    REQUIRE(kp == 12 && kq == 12);
    int overlap = 0;
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 12; j++)
            if (pid[i] == qid[j]) overlap++;
    printf("  target and draft top-12 share %d tokens\n", overlap);
    CHECK(overlap < 12); /* the draft really differs */
    const int N = 40000;
    int counts[12] = { 0 }, outside = 0, acc = 0;
    wlm_rng rng;
    wlm_rng_seed(&rng, 7);
    for (int n = 0; n < N; n++) {
        /* x ~ q */
        float u = wlm_rng_float(&rng), cum = 0;
        int32_t x = qid[kq - 1];
        for (uint32_t i = 0; i < kq; i++) {
            cum += qp[i];
            if (u < cum) {
                x = qid[i];
                break;
            }
        }
        int32_t tok = -1, a = 0;
        REQUIRE(wlm_spec_accept(c, lt, &sp, NULL, 0, x, qid, qp, kq, &rng, &tok, &a, NULL, &err) == WLM_OK);
        acc += a;
        int k = -1;
        for (int i = 0; i < 12; i++)
            if (pid[i] == tok) k = i;
        if (k < 0) outside++;
        else counts[k]++;
    }
    double chi2 = 0;
    for (int i = 0; i < 12; i++) {
        double e = pp[i] * N;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    printf("  speculative sampling: acceptance %.3f, chi-square vs target %.2f (df 11, 0.1%% critical 31.3)\n", (double)acc / N, chi2);
    CHECK(outside == 0);
    CHECKF(chi2 < 31.3, "chi-square %.2f", chi2);
    CHECK(acc > 0 && acc < N);
    /* the draft's own distribution would fail the same test */
    double chi2q = 0;
    for (int i = 0; i < 12; i++) {
        double e = pp[i] * N, o = 0;
        for (int j = 0; j < 12; j++)
            if (qid[j] == pid[i]) o = qp[j] * N;
        chi2q += (o - e) * (o - e) / e;
    }
    CHECK(chi2q > 1000);
    /* prompt lookup: a one-hot draft */
    int32_t x = pid[3];
    float one = 1.0f;
    int hits = 0;
    for (int n = 0; n < 4000; n++) {
        int32_t tok, a;
        REQUIRE(wlm_spec_accept(c, lt, &sp, NULL, 0, x, &x, &one, 1, &rng, &tok, &a, NULL, &err) == WLM_OK);
        hits += a;
        CHECK(a ? tok == x : tok != x);
    }
    CHECKF(fabs(hits / 4000.0 - pp[3]) < 0.03, "one-hot draft accepted %.3f, p(x) %.3f", hits / 4000.0, pp[3]);
    /* greedy: accepted exactly when x is the argmax */
    wlm_sampler_params g;
    sampling(&g, 0);
    int32_t best = pid[0], tok, a;
    float lp = 0;
    sp.top_k = 0;
    int32_t am = 0;
    for (uint32_t i = 1; i < V; i++)
        if (lt[i] > lt[am]) am = (int32_t)i;
    REQUIRE(wlm_spec_accept(c, lt, &g, NULL, 0, am, &am, &one, 1, NULL, &tok, &a, &lp, &err) == WLM_OK);
    CHECK(a == 1 && tok == am && lp < 0);
    int32_t other = am == 5 ? 6 : 5;
    REQUIRE(wlm_spec_accept(c, lt, &g, NULL, 0, other, &other, &one, 1, NULL, &tok, &a, NULL, &err) == WLM_OK);
    CHECK(a == 0 && tok == am);
    (void)best;
    /* bad input */
    CHECK(wlm_spec_accept(c, lt, &g, NULL, 0, (int32_t)V, &am, &one, 1, NULL, &tok, &a, NULL, &err) == WLM_ERR_ARG);
    float badp = 2.0f;
    CHECK(wlm_spec_accept(c, lt, &sp, NULL, 0, am, &am, &badp, 1, &rng, &tok, &a, NULL, &err) == WLM_ERR_ARG);
    CHECK(strstr(err.msg, "not in [0, 1]") != NULL);
    free(lt);
    free(ld);
    wlm_ctx_free(c);
    sm_free(&sm);
}
