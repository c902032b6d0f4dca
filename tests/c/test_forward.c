/* Forward-pass tests: tiled attention against a plain softmax attention; the
 * engine's logits against llama.cpp's reference logits and greedy
 * generations; KV cache against recomputation; a small independent forward
 * pass in double (with an explicit attention mask) against the engine, for
 * the causal case and for the sliding window; context limits, truncation,
 * memory planning; and the accuracy of re-quantized models. */
#include <stdint.h>
#include "tst.h"
#include "../../src/internal.h"

/* ---- helpers ----------------------------------------------------------------- */

/* every kernel set of this build (scalar, and SIMD128 in wasm) */
#define SETS wlm_kernel_sets
#define N_SETS (int)wlm_kernel_set_count

typedef struct {
    unsigned char *bytes;
    wlm_model *m;
} tmodel;

/* Loads a GGUF held in wlm_sys_alloc memory (taken over by the tmodel). */
static int tm_load_bytes(tmodel *t, unsigned char *bytes, unsigned long long size) {
    wlm_err err = { 0 };
    t->bytes = bytes;
    t->m = NULL;
    if (wlm_model_load(&t->m, bytes, size, &err) != WLM_OK) {
        fprintf(stderr, "  model load: %s\n", err.msg);
        return 0;
    }
    return 1;
}

static int tm_load(tmodel *t) {
    unsigned long long size = 0;
    memset(t, 0, sizeof *t);
    unsigned char *b = tst_read_sys("models/stories260K.gguf", &size);
    return b && tm_load_bytes(t, b, size);
}

static void tm_free(tmodel *t) {
    wlm_model_free(t->m);
    wlm_sys_free(t->bytes);
    memset(t, 0, sizeof *t);
}

static wlm_ctx *new_ctx(wlm_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t kv, uint32_t policy, uint32_t keep, uint32_t all) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.kv_type = kv;
    p.full_policy = policy;
    p.n_keep = keep;
    p.logits_all = all;
    return tst_ctx_new(m, &p);
}

static int eval(wlm_ctx *c, const int32_t *t, uint32_t n) {
    wlm_err err = { 0 };
    wlm_status s = wlm_eval(c, t, n, &err);
    if (s != WLM_OK) fprintf(stderr, "  eval: %s\n", err.msg);
    return s == WLM_OK;
}

/* argmax, lowest id wins ties */
static int32_t argmax(const float *v, uint32_t n) {
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return (int32_t)b;
}

static double max_abs_diff_f(const float *a, const float *b, uint32_t n) {
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

/* ---- a tiny JSON reader: the numbers of the value of the k-th "key" ------------- */

static char *read_text(const char *rel) {
    unsigned long long n = 0;
    unsigned char *b = tst_read_file(tst_path(rel), &n);
    if (!b) {
        fprintf(stderr, "  cannot read %s\n", tst_path(rel));
        return NULL;
    }
    char *s = malloc(n + 1);
    memcpy(s, b, n);
    s[n] = 0;
    free(b);
    return s;
}

/* Returns the flattened numbers of the array value of the occurrence-th (0
 * based) member named `key`, or NULL. */
static double *json_numbers(const char *json, const char *key, int occurrence, int *count) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = json;
    for (;;) {
        p = strstr(p, pat);
        if (!p) return NULL;
        p += strlen(pat);
        const char *q = p;
        while (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t') q++;
        if (*q != ':') continue; /* a string value, not a key */
        if (occurrence-- > 0) continue;
        p = q + 1;
        break;
    }
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    if (*p != '[') return NULL;
    int cap = 1024, n = 0, depth = 0;
    double *v = malloc(sizeof(double) * cap);
    for (; *p; p++) {
        if (*p == '[') depth++;
        else if (*p == ']') {
            if (--depth == 0) break;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *end;
            double x = strtod(p, &end);
            if (n == cap) {
                cap *= 2;
                v = realloc(v, sizeof(double) * cap);
            }
            v[n++] = x;
            p = end - 1;
        }
    }
    *count = n;
    return v;
}

static int32_t *json_ids(const char *json, const char *key, int occurrence, int *count) {
    double *d = json_numbers(json, key, occurrence, count);
    if (!d) return NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (*count ? *count : 1));
    for (int i = 0; i < *count; i++) ids[i] = (int32_t)d[i];
    free(d);
    return ids;
}

/* ---- 5. tiled attention against plain attention ------------------------------ */

/* Plain attention in double: full score row, softmax with max subtraction,
 * weighted sum of the values. Slot j takes part when 0 <= pos_j <= qpos and
 * pos_j >= window_lo. Returns the number of slots used. */
static int naive_attention(const float *q, const float *K, const float *V, const int32_t *slot_pos, uint32_t n_slots,
                           int32_t qpos, int32_t window_lo, uint32_t hd, double scale, double *out) {
    double *s = malloc(sizeof(double) * (n_slots + 1));
    double mx = -INFINITY;
    int used = 0;
    for (uint32_t j = 0; j < n_slots; j++) {
        int32_t p = slot_pos[j];
        if (p < 0 || p > qpos || p < window_lo) {
            s[j] = NAN;
            continue;
        }
        double dot = 0;
        for (uint32_t i = 0; i < hd; i++) dot += (double)q[i] * K[(size_t)j * hd + i];
        s[j] = dot * scale;
        if (s[j] > mx) mx = s[j];
        used++;
    }
    double sum = 0;
    for (uint32_t i = 0; i < hd; i++) out[i] = 0;
    for (uint32_t j = 0; j < n_slots; j++) {
        if (s[j] != s[j]) continue;
        double e = exp(s[j] - mx);
        sum += e;
        for (uint32_t i = 0; i < hd; i++) out[i] += e * V[(size_t)j * hd + i];
    }
    if (sum > 0)
        for (uint32_t i = 0; i < hd; i++) out[i] /= sum;
    free(s);
    return used;
}

TEST(forward_attention_tiled_vs_naive) {
    enum { MAXS = 200,
           MAXHD = 64 };
    float *K = malloc(4 * MAXS * MAXHD), *V = malloc(4 * MAXS * MAXHD), *q = malloc(4 * MAXHD);
    uint16_t *Kh = malloc(2 * MAXS * MAXHD), *Vh = malloc(2 * MAXS * MAXHD);
    int32_t *pos = malloc(4 * MAXS);
    float out[MAXHD], out_ref_set[MAXHD], tile[WLM_ATT_TILE];
    double ref[MAXHD];
    double worst = 0;
    int cases = 0;
    for (uint32_t len = 1; len <= MAXS; len++) {
        for (int variant = 0; variant < 6; variant++) {
            uint32_t hd = (variant & 1) ? 64 : (len % 3 == 0 ? 8 : 13);
            int f16 = (variant >> 1) & 1;
            int sharp = variant >= 4; /* large, increasing scores: the running max moves tile by tile */
            for (uint32_t i = 0; i < hd; i++) q[i] = tst_randf() * (sharp ? 4.0f : 1.0f);
            for (uint32_t j = 0; j < len; j++)
                for (uint32_t i = 0; i < hd; i++) {
                    float kv = tst_randf();
                    if (sharp) kv = q[i] * (float)j / (float)len * 3.0f + 0.1f * kv;
                    K[j * hd + i] = kv;
                    V[j * hd + i] = tst_randf() * 2.0f;
                }
            /* slot positions: in order (a fresh cache), or a rotated ring, with
             * some empty slots; the query position cuts some slots causally */
            uint32_t rot = (variant & 2) ? tst_rand() % len : 0;
            for (uint32_t j = 0; j < len; j++) pos[j] = (int32_t)((j + rot) % len);
            if (len > 3 && (tst_rand() & 1))
                for (uint32_t j = 0; j < len; j++)
                    if (tst_rand() % 5 == 0) pos[j] = -1;
            int32_t qpos = (int32_t)len - 1;
            if (len > 2 && variant % 3 == 1) qpos = (int32_t)(tst_rand() % len);
            int32_t wlo = (len > 8 && variant == 5) ? (int32_t)(tst_rand() % (len / 2)) : 0;
            float scale = 1.0f / sqrtf((float)hd);
            /* the cache the kernel reads: floats, or halves (the reference
             * then uses the same rounded values) */
            if (f16) {
                for (uint32_t i = 0; i < len * hd; i++) {
                    Kh[i] = wlm_f32_to_f16(K[i]);
                    Vh[i] = wlm_f32_to_f16(V[i]);
                    K[i] = wlm_f16_to_f32(Kh[i]);
                    V[i] = wlm_f16_to_f32(Vh[i]);
                }
            }
            int used = naive_attention(q, K, V, pos, len, qpos, wlo, hd, scale, ref);
            double vmax = 0;
            for (uint32_t i = 0; i < len * hd; i++) vmax = fmax(vmax, fabs(V[i]));
            for (int k = 0; k < N_SETS; k++) {
                for (uint32_t i = 0; i < hd; i++) out[i] = 12345.0f; /* must be overwritten */
                wlm_attention_tiled(SETS[k], q, f16 ? (const void *)Kh : K, f16 ? (const void *)Vh : V, f16, pos, len,
                                    qpos, wlo, hd, scale, out, tile);
                double err = 0;
                for (uint32_t i = 0; i < hd; i++) err = fmax(err, fabs(out[i] - ref[i]));
                if (used == 0) CHECKF(err == 0, "len=%u no slot used but output not zero", len);
                double rel = err / vmax;
                if (rel > worst) worst = rel;
                CHECKF(rel <= 1e-5, "%s len=%u hd=%u f16=%d qpos=%d wlo=%d: max err %.3g (rel %.3g)",
                       SETS[k]->name, len, hd, f16, qpos, wlo, err, rel);
                if (k == 0) memcpy(out_ref_set, out, hd * 4);
                else CHECKF(memcmp(out, out_ref_set, hd * 4) == 0, "%s differs from scalar at len=%u", SETS[k]->name, len);
                cases++;
            }
        }
    }
    printf("  %d cases, worst |tiled - naive| / max|v| = %.3g\n", cases, worst);
    free(K);
    free(V);
    free(q);
    free(Kh);
    free(Vh);
    free(pos);
}

/* wlm_attention_block (the queries of one KV head in one pass over its
 * tiles) against each query alone through wlm_attention_tiled_kv, bit for
 * bit, in every kernel set: F32 and F16 caches (the F16 one converted tile
 * by tile), key and value heads of different sizes, up to 70 queries (more
 * than one pass of WLM_ATT_MAXQ), positions ascending over the slots with
 * empty slots and other sequences' slots between them, query positions
 * anywhere from before the first slot to the last. */
TEST(forward_attention_block_equals_single_queries) {
    enum { MAXS = 300,
           HDK = 48,
           HDV = 40,
           MAXQ = 70 };
    float *K = malloc(4 * MAXS * HDK), *V = malloc(4 * MAXS * HDV), *Q = malloc(4 * MAXQ * HDK);
    uint16_t *Kh = malloc(2 * MAXS * HDK), *Vh = malloc(2 * MAXS * HDV);
    float *outb = malloc(4 * MAXQ * HDV), *outs = malloc(4 * HDV), *kvt = malloc(4 * 2 * WLM_ATT_TILE * HDK);
    int32_t pos[MAXS], qpos[MAXQ];
    uint64_t seq[MAXS];
    float tile[WLM_ATT_TILE];
    uint32_t idx[WLM_ATT_TILE];
    const float *qp[MAXQ];
    float *op[MAXQ];
    int cases = 0;
    for (int rep = 0; rep < 24; rep++) {
        uint32_t n = 1 + tst_rand() % MAXS, nq = 1 + tst_rand() % MAXQ, hdk = rep % 3 ? HDK : 16, hdv = rep % 3 ? HDV : 16;
        int32_t p = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t r = tst_rand() % 8;
            seq[j] = r == 0 ? 2 : 1;    /* another sequence's slot */
            pos[j] = r == 1 ? -1 : p++; /* an empty slot */
        }
        for (uint32_t i = 0; i < n * hdk; i++) {
            K[i] = tst_randf();
            Kh[i] = wlm_f32_to_f16(K[i]);
        }
        for (uint32_t i = 0; i < n * hdv; i++) {
            V[i] = tst_randf();
            Vh[i] = wlm_f32_to_f16(V[i]);
        }
        int32_t qmax = -1;
        for (uint32_t i = 0; i < nq; i++) {
            for (uint32_t d = 0; d < hdk; d++) Q[i * hdk + d] = tst_randf() * 3.0f;
            qpos[i] = (int32_t)(tst_rand() % (uint32_t)(p + 2)) - 1;
            if (qpos[i] > qmax) qmax = qpos[i];
            qp[i] = Q + i * hdk;
            op[i] = outb + i * hdv;
        }
        wlm_att_mask mk = { pos, seq, 1, n, qmax, 0, 0, 0, 0 };
        CHECK(wlm_att_ascending(&mk));
        for (int f16 = 0; f16 < 2; f16++)
            for (int k = 0; k < N_SETS; k++) {
                const void *kc = f16 ? (const void *)Kh : K, *vc = f16 ? (const void *)Vh : V;
                wlm_attention_block(SETS[k], nq, qp, op, qpos, kc, vc, f16, &mk, hdk, hdv, 0.3f, tile, idx, f16 ? kvt : 0);
                int bad = 0;
                for (uint32_t i = 0; i < nq; i++) {
                    wlm_att_mask one = mk;
                    one.qpos = qpos[i];
                    wlm_attention_tiled_kv(SETS[k], qp[i], kc, vc, f16, &one, hdk, hdv, 0.3f, outs, tile, idx);
                    if (memcmp(outs, op[i], hdv * 4)) bad++;
                }
                CHECKF(bad == 0, "%s f16=%d rep=%d: %d of %u queries differ", SETS[k]->name, f16, rep, bad, nq);
                cases++;
            }
    }
    /* slots out of position order are not a prefix for every query: reported */
    int32_t p2[3] = { 2, 0, 1 };
    wlm_att_mask mk2 = { p2, 0, 0, 3, 2, 0, 0, 0, 0 };
    CHECK(!wlm_att_ascending(&mk2));
    printf("  %d cases\n", cases);
    free(K);
    free(V);
    free(Q);
    free(Kh);
    free(Vh);
    free(outb);
    free(outs);
    free(kvt);
}

/* ---- 6. llama.cpp's reference logits ------------------------------------------- */

TEST(forward_reference_logits) {
    char *json = read_text("reference/stories260K_logits.json");
    REQUIRE(json);
    int np = 0, ng = 0, nl = 0, nl32 = 0;
    int32_t *prompt = json_ids(json, "prompt_token_ids", 0, &np);
    int32_t *gen = json_ids(json, "generated_token_ids", 0, &ng);
    double *ref16 = json_numbers(json, "logits", 0, &nl);
    double *ref32 = json_numbers(json, "logits_kv_f32", 0, &nl32);
    free(json);
    tmodel t;
    if (!prompt || !gen || !ref16 || !ref32 || !tm_load(&t)) {
        CHECK(0);
        goto out;
    }
    uint32_t V = t.m->hp.n_vocab;
    CHECK(np == 5 && prompt[0] == 1 && prompt[1] == 403 && prompt[4] == 378);
    CHECK(ng == 16 && nl == 16 * (int)V && nl32 == 16 * (int)V && V == 512);
    if (ng != 16 || nl != 16 * (int)V || nl32 != 16 * (int)V) {
        tm_free(&t);
        goto out;
    }
    /* F32 cache: llama.cpp's F32-cache logits within 1e-4.
     * F16 cache: the engine stores K and V as halves and computes in f32;
     * llama.cpp's F16 path also rounds q (and, in its flash-attention path,
     * the output accumulator) to halves. Its `logits` are 0.0093 from its own
     * F32 run, and the engine's F16 run is 0.009 from them and 0.013 from
     * the F32 run: the 1e-3 target is out of reach without copying
     * llama.cpp's extra roundings. The exact F16-cache semantics are checked
     * against the double reference in forward_double_reference_causal;
     * here the bounds come from measurement, with margin. */
    for (int kv = 0; kv < 2; kv++) {
        const double *ref = kv == WLM_KV_F32 ? ref32 : ref16;
        double tol = kv == WLM_KV_F32 ? 1e-4 : 1.5e-2, worst = 0, worst32 = 0;
        wlm_ctx *c = new_ctx(t.m, 64, 64, (uint32_t)kv, WLM_FULL_ERROR, 0, 0);
        if (!c) {
            CHECK(0);
            continue;
        }
        int ok = eval(c, prompt, (uint32_t)np);
        for (int s = 0; s < 16 && ok; s++) {
            const float *lg = wlm_ctx_logits(c);
            CHECK(wlm_ctx_n_logits(c) == 1);
            double e = 0, e32 = 0;
            for (uint32_t i = 0; i < V; i++) {
                e = fmax(e, fabs(lg[i] - ref[(size_t)s * V + i]));
                e32 = fmax(e32, fabs(lg[i] - ref32[(size_t)s * V + i]));
            }
            worst = fmax(worst, e);
            worst32 = fmax(worst32, e32);
            CHECKF(e <= tol, "kv %s step %d: max |logit - llama.cpp| = %.3g", kv ? "f16" : "f32", s, e);
            CHECKF(argmax(lg, V) == gen[s], "step %d: argmax %d, reference %d", s, argmax(lg, V), gen[s]);
            if (s < 15) ok = eval(c, &gen[s], 1);
        }
        CHECK(ok);
        CHECK(wlm_ctx_pos(c) == 20);
        if (kv == WLM_KV_F16) CHECKF(worst32 <= 2.5e-2, "F16 cache vs llama.cpp F32-cache logits: %.3g", worst32);
        printf("  KV %s: max |logit - llama.cpp %s| over 16 steps = %.3g (tolerance %.1e); vs logits_kv_f32 %.3g\n",
               kv ? "F16" : "F32", kv ? "logits (F16 cache)" : "logits_kv_f32", worst, tol, worst32);
        wlm_ctx_free(c);
    }
    tm_free(&t);
out:
    free(prompt);
    free(gen);
    free(ref16);
    free(ref32);
}

/* ---- 7. greedy generation against llama.cpp ------------------------------------- */

/* Greedy from `prompt`, n new tokens; returns the number of tokens that
 * matched `want` before the first difference (n when all match). */
static int greedy_run(wlm_model *m, const int32_t *prompt, int np, const int32_t *want, int n, uint32_t n_batch, int *sample_agrees) {
    wlm_ctx *c = new_ctx(m, 256, n_batch, WLM_KV_F32, WLM_FULL_ERROR, 0, 0);
    if (!c) return -1;
    wlm_sampler_params sp;
    wlm_sampler_default_params(&sp);
    sp.temperature = 0;
    sp.repeat_penalty = 1;
    sp.top_k = 0;
    sp.top_p = 1;
    sp.min_p = 0;
    int matched = 0, first_bad = -1;
    *sample_agrees = 1;
    if (!eval(c, prompt, (uint32_t)np)) {
        wlm_ctx_free(c);
        return -1;
    }
    for (int s = 0; s < n; s++) {
        const float *lg = wlm_ctx_logits(c);
        int32_t tok = argmax(lg, m->hp.n_vocab), st = -1;
        wlm_err err = { 0 };
        if (wlm_sample(c, lg, &sp, NULL, 0, NULL, &st, NULL, &err) != WLM_OK || st != tok) *sample_agrees = 0;
        if (tok == want[s] && first_bad < 0) matched++;
        else if (first_bad < 0) first_bad = s;
        /* feed the reference token so one early slip does not hide the rest */
        if (s + 1 < n && !eval(c, &want[s], 1)) break;
    }
    wlm_ctx_free(c);
    return matched;
}

TEST(forward_greedy_matches_llama_cpp) {
    char *json = read_text("reference/stories260K_greedy.json");
    REQUIRE(json);
    tmodel t;
    if (!tm_load(&t)) {
        free(json);
        CHECK(0);
        return;
    }
    for (int r = 0; r < 2; r++) {
        int np = 0, ng = 0;
        int32_t *prompt = json_ids(json, "prompt_token_ids", r, &np);
        int32_t *gen = json_ids(json, "generated_token_ids", r, &ng);
        if (!prompt || !gen) {
            CHECK(0);
            free(prompt);
            free(gen);
            continue;
        }
        CHECK(ng == 200);
        CHECK(np >= 1 && prompt[0] == 1);
        static const uint32_t BATCH[] = { 64, 1 };
        for (int b = 0; b < 2; b++) {
            int agrees = 0;
            int matched = greedy_run(t.m, prompt, np, gen, ng, BATCH[b], &agrees);
            printf("  prompt %d (%d tokens), n_batch %u: %d/%d greedy tokens match llama.cpp\n", r, np, BATCH[b], matched, ng);
            CHECKF(matched == ng, "prompt %d n_batch %u: first difference at step %d", r, BATCH[b], matched);
            CHECKF(agrees, "wlm_sample (temperature 0) disagrees with argmax");
        }
        free(prompt);
        free(gen);
    }
    tm_free(&t);
    free(json);
}

/* ---- shared token sequence: prompt 0 and its greedy continuation ------------------- */

static int32_t *ref_sequence(int *n) {
    char *json = read_text("reference/stories260K_greedy.json");
    if (!json) return NULL;
    int np = 0, ng = 0;
    int32_t *prompt = json_ids(json, "prompt_token_ids", 0, &np);
    int32_t *gen = json_ids(json, "generated_token_ids", 0, &ng);
    free(json);
    if (!prompt || !gen) {
        free(prompt);
        free(gen);
        return NULL;
    }
    int32_t *seq = malloc(sizeof(int32_t) * (np + ng));
    memcpy(seq, prompt, sizeof(int32_t) * np);
    memcpy(seq + np, gen, sizeof(int32_t) * ng);
    *n = np + ng;
    free(prompt);
    free(gen);
    return seq;
}

/* ---- 8. KV cache against recomputation -------------------------------------------- */

TEST(forward_kv_cache_vs_recompute) {
    int n = 0;
    int32_t *seq = ref_sequence(&n);
    REQUIRE(seq && n >= 40);
    enum { T = 40 };
    tmodel t;
    if (!tm_load(&t)) {
        free(seq);
        CHECK(0);
        return;
    }
    uint32_t V = t.m->hp.n_vocab;
    for (int kv = 0; kv < 2; kv++) {
        /* A: one token at a time through the cache */
        float *stepwise = malloc(sizeof(float) * T * V);
        wlm_ctx *a = new_ctx(t.m, 64, 64, (uint32_t)kv, WLM_FULL_ERROR, 0, 0);
        REQUIRE(a);
        for (int i = 0; i < T; i++) {
            REQUIRE(eval(a, &seq[i], 1));
            memcpy(stepwise + (size_t)i * V, wlm_ctx_logits(a), sizeof(float) * V);
        }
        wlm_ctx_free(a);
        /* B: the whole prefix in one batch, logits for every position */
        wlm_ctx *b = new_ctx(t.m, 64, 64, (uint32_t)kv, WLM_FULL_ERROR, 0, 1);
        REQUIRE(b);
        REQUIRE(eval(b, seq, T));
        CHECK(wlm_ctx_n_logits(b) == T);
        double worst = 0;
        for (int i = 0; i < T; i++) {
            double e = max_abs_diff_f(wlm_ctx_logits(b) + (size_t)i * V, stepwise + (size_t)i * V, V);
            if (e > worst) worst = e;
            CHECKF(e <= 1e-5, "kv %d position %d: batch vs stepwise %.3g", kv, i, e);
        }
        wlm_ctx_free(b);
        /* C: chunks of 7; logits_all keeps the last chunk (40 = 5*7 + 5) */
        wlm_ctx *c = new_ctx(t.m, 64, 7, (uint32_t)kv, WLM_FULL_ERROR, 0, 1);
        REQUIRE(c);
        REQUIRE(eval(c, seq, T));
        CHECK(wlm_ctx_n_logits(c) == 5);
        double worst_c = 0;
        for (int i = 0; i < 5; i++) {
            double e = max_abs_diff_f(wlm_ctx_logits(c) + (size_t)i * V, stepwise + (size_t)(T - 5 + i) * V, V);
            worst_c = fmax(worst_c, e);
        }
        CHECKF(worst_c <= 1e-5, "kv %d chunked vs stepwise %.3g", kv, worst_c);
        wlm_ctx_free(c);
        printf("  KV %s: max |batch - stepwise| = %.3g, |chunked(7) - stepwise| = %.3g\n", kv ? "F16" : "F32", worst, worst_c);
        free(stepwise);
    }
    tm_free(&t);
    free(seq);
}

/* ---- 9. an independent forward pass in double ----------------------------------------
 *
 * Written from the math, reading the F32 weights directly:
 *   x = embedding row of the token
 *   per layer: h = rmsnorm(x) * attn_norm; q = Wq h, k = Wk h, v = Wv h;
 *     rotate the pairs (2i, 2i+1) of each head's first n_rot dims of q and k
 *     by angle pos * base^(-2i/n_rot);
 *     per query head: softmax(q.k_j / sqrt(head_dim)) over the keys j the
 *     mask allows, weighted sum of v_j (key/value head = head / group);
 *     x += Wo att;  h = rmsnorm(x) * ffn_norm;  x += Wdown(silu(Wgate h) * Wup h)
 *   logits = Wout (rmsnorm(x) * out_norm)
 * Positions are processed as a whole sequence; at every layer position p
 * attends to positions j with mask(p, j). K/V of a position never depend on
 * later positions, so this equals any cache that keeps the same positions. */

/* kind 0 causal, 1 sliding window; kv_f16 rounds each key and value to a
 * half as an F16 cache stores them */
typedef struct {
    int kind;
    int n_ctx, n_keep;
    int kv_f16;
} mask_spec;

static int mask_allows(const mask_spec *m, int p, int j) {
    if (j > p) return 0;
    if (m->kind == 0) return 1;
    int ring = m->n_ctx - m->n_keep;
    return j < m->n_keep || j > p - ring;
}

/* The weights as floats: F32 tensors directly, other types dequantized once
 * (wlm_dequantize_row is checked against hand-written blocks in
 * test_kernels.c) into a small cache that ref_forward frees. */
static struct {
    const wlm_tensor *t;
    float *f;
} g_wcache[64];
static int g_nw;
static const float *f32_tensor(const wlm_tensor *t) {
    if (t->type == GGML_F32) return (const float *)t->data;
    for (int i = 0; i < g_nw; i++)
        if (g_wcache[i].t == t) return g_wcache[i].f;
    if (g_nw == 64) return NULL;
    uint64_t cols = t->ne[0], rows = t->ne[1], row_bytes = t->nbytes / rows;
    float *f = malloc(sizeof(float) * cols * rows);
    for (uint64_t r = 0; r < rows; r++) wlm_dequantize_row(t->type, t->data + r * row_bytes, f + r * cols, (uint32_t)cols);
    g_wcache[g_nw].t = t;
    g_wcache[g_nw].f = f;
    g_nw++;
    return f;
}
static void wcache_free(void) {
    for (int i = 0; i < g_nw; i++) free(g_wcache[i].f);
    g_nw = 0;
}
static double to_half(double v) { return wlm_f16_to_f32(wlm_f32_to_f16((float)v)); }

/* y[r] = sum_i W[r][i] x[i]; W has `rows` rows of `cols` floats */
static void ref_matvec(const float *W, uint32_t rows, uint32_t cols, const double *x, double *y) {
    for (uint32_t r = 0; r < rows; r++) {
        double s = 0;
        for (uint32_t i = 0; i < cols; i++) s += (double)W[(size_t)r * cols + i] * x[i];
        y[r] = s;
    }
}

static void ref_rmsnorm(const double *x, const float *w, uint32_t n, double eps, double *out) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

static void ref_rope(double *v, uint32_t n_heads, uint32_t hd, uint32_t n_rot, double base, int pos) {
    for (uint32_t h = 0; h < n_heads; h++)
        for (uint32_t i = 0; i < n_rot / 2; i++) {
            double theta = pow(base, -2.0 * i / n_rot), a = pos * theta;
            double *x = v + h * hd, x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i] = x0 * cos(a) - x1 * sin(a);
            x[2 * i + 1] = x0 * sin(a) + x1 * cos(a);
        }
}

/* logits (n x n_vocab doubles, malloc'd) for every position of tok[0..n) */
static double *ref_forward(const wlm_model *m, const int32_t *tok, int n, const mask_spec *mask) {
    const wlm_hparams *hp = &m->hp;
    uint32_t d = hp->n_embd, hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv, ff = hp->n_ff, V = hp->n_vocab;
    uint32_t qd = nh * hd, kvd = nkv * hd, group = nh / nkv;
    double eps = hp->rms_eps;
    if (!f32_tensor(m->tok_embd) || !f32_tensor(m->output)) return NULL;
    double *x = calloc((size_t)n * d, 8), *h = calloc(d > ff ? ff : d, 8), *hbuf = calloc(ff + d, 8);
    double *q = calloc((size_t)n * qd, 8), *k = calloc((size_t)n * kvd, 8), *v = calloc((size_t)n * kvd, 8);
    double *att = calloc(qd, 8), *tmp = calloc(d > qd ? d : qd, 8), *g = calloc(ff, 8), *u = calloc(ff, 8);
    double *sc = calloc(n, 8), *logits = calloc((size_t)n * V, 8);
    free(h);
    h = hbuf;
    for (int p = 0; p < n; p++)
        for (uint32_t i = 0; i < d; i++) x[(size_t)p * d + i] = f32_tensor(m->tok_embd)[(size_t)tok[p] * d + i];
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const wlm_layer *L = &m->layers[l];
        for (int p = 0; p < n; p++) {
            ref_rmsnorm(x + (size_t)p * d, f32_tensor(L->attn_norm), d, eps, h);
            ref_matvec(f32_tensor(L->wq), qd, d, h, q + (size_t)p * qd);
            ref_matvec(f32_tensor(L->wk), kvd, d, h, k + (size_t)p * kvd);
            ref_matvec(f32_tensor(L->wv), kvd, d, h, v + (size_t)p * kvd);
            ref_rope(q + (size_t)p * qd, nh, hd, hp->n_rot, hp->rope_freq_base, p);
            ref_rope(k + (size_t)p * kvd, nkv, hd, hp->n_rot, hp->rope_freq_base, p);
            if (mask->kv_f16)
                for (uint32_t i = 0; i < kvd; i++) {
                    k[(size_t)p * kvd + i] = to_half(k[(size_t)p * kvd + i]);
                    v[(size_t)p * kvd + i] = to_half(v[(size_t)p * kvd + i]);
                }
        }
        for (int p = 0; p < n; p++) {
            for (uint32_t hq = 0; hq < nh; hq++) {
                uint32_t hk = hq / group;
                const double *qv = q + (size_t)p * qd + hq * hd;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < n; j++) {
                    if (!mask_allows(mask, p, j)) continue;
                    double s = 0;
                    for (uint32_t i = 0; i < hd; i++) s += qv[i] * k[(size_t)j * kvd + hk * hd + i];
                    sc[j] = s / sqrt((double)hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                double *o = att + hq * hd;
                for (uint32_t i = 0; i < hd; i++) o[i] = 0;
                for (int j = 0; j < n; j++) {
                    if (!mask_allows(mask, p, j)) continue;
                    double e = exp(sc[j] - mx);
                    sum += e;
                    for (uint32_t i = 0; i < hd; i++) o[i] += e * v[(size_t)j * kvd + hk * hd + i];
                }
                for (uint32_t i = 0; i < hd; i++) o[i] /= sum;
            }
            ref_matvec(f32_tensor(L->wo), d, qd, att, tmp);
            for (uint32_t i = 0; i < d; i++) x[(size_t)p * d + i] += tmp[i];
            ref_rmsnorm(x + (size_t)p * d, f32_tensor(L->ffn_norm), d, eps, h);
            ref_matvec(f32_tensor(L->w_gate), ff, d, h, g);
            ref_matvec(f32_tensor(L->w_up), ff, d, h, u);
            for (uint32_t i = 0; i < ff; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            ref_matvec(f32_tensor(L->w_down), d, ff, g, tmp);
            for (uint32_t i = 0; i < d; i++) x[(size_t)p * d + i] += tmp[i];
        }
    }
    for (int p = 0; p < n; p++) {
        ref_rmsnorm(x + (size_t)p * d, f32_tensor(m->out_norm), d, eps, h);
        ref_matvec(f32_tensor(m->output), V, d, h, logits + (size_t)p * V);
    }
    free(x);
    free(h);
    free(q);
    free(k);
    free(v);
    free(att);
    free(tmp);
    free(g);
    free(u);
    free(sc);
    wcache_free();
    return logits;
}

static double max_abs_diff_fd(const float *a, const double *b, uint32_t n) {
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) m = d != d ? INFINITY : d;
    }
    return m;
}

TEST(forward_double_reference_causal) {
    int n = 0;
    int32_t *seq = ref_sequence(&n);
    REQUIRE(seq);
    enum { T = 48 };
    tmodel t;
    if (!tm_load(&t)) {
        free(seq);
        CHECK(0);
        return;
    }
    uint32_t V = t.m->hp.n_vocab;
    mask_spec causal = { 0, 0, 0, 0 };
    double *ref = ref_forward(t.m, seq, T, &causal);
    REQUIRE(ref);
    /* the reference itself against llama.cpp's F32-cache logits (positions
     * 4..19: last prompt token, then the 15 fed generated tokens) */
    char *json = read_text("reference/stories260K_logits.json");
    int nl = 0;
    double *lcpp = json ? json_numbers(json, "logits_kv_f32", 0, &nl) : NULL;
    free(json);
    if (lcpp && nl == 16 * (int)V) {
        double e = 0;
        for (int s = 0; s < 16; s++)
            for (uint32_t i = 0; i < V; i++) e = fmax(e, fabs(ref[(size_t)(4 + s) * V + i] - lcpp[(size_t)s * V + i]));
        printf("  double reference vs llama.cpp logits_kv_f32: max %.3g\n", e);
        CHECKF(e <= 1e-4, "double reference is %.3g away from llama.cpp", e);
    } else CHECK(0);
    free(lcpp);
    /* the engine, every position in one batch, against the reference */
    wlm_ctx *c = new_ctx(t.m, 64, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c);
    REQUIRE(eval(c, seq, T));
    double worst = 0;
    for (int p = 0; p < T; p++) {
        double e = max_abs_diff_fd(wlm_ctx_logits(c) + (size_t)p * V, ref + (size_t)p * V, V);
        worst = fmax(worst, e);
        CHECKF(e <= 1e-4, "position %d: engine vs double reference %.3g", p, e);
    }
    printf("  engine (F32 KV) vs double reference, %d positions: max %.3g\n", T, worst);
    wlm_ctx_free(c);
    free(ref);
    /* F16 cache against the reference with halved keys and values. This
     * cannot be tight: the reference's k and v (double) and the engine's
     * (float) differ by ~1e-7 relative, which flips a few of the ~15000
     * roundings to half, and this model is sensitive to single flips (a 1e-7
     * relative nudge before rounding moves the reference itself by up to
     * 0.0087). The exact F16 attention is checked in
     * forward_attention_tiled_vs_naive; here the bound is 2e-2 (measured
     * 0.0085), far below the O(1) changes a wrong cache entry causes. */
    mask_spec causal16 = { 0, 0, 0, 1 };
    ref = ref_forward(t.m, seq, T, &causal16);
    REQUIRE(ref);
    c = new_ctx(t.m, 64, 64, WLM_KV_F16, WLM_FULL_ERROR, 0, 1);
    REQUIRE(c);
    REQUIRE(eval(c, seq, T));
    worst = 0;
    for (int p = 0; p < T; p++) worst = fmax(worst, max_abs_diff_fd(wlm_ctx_logits(c) + (size_t)p * V, ref + (size_t)p * V, V));
    printf("  engine (F16 KV) vs double reference with half K/V: max %.3g\n", worst);
    CHECKF(worst <= 2e-2, "F16 cache vs reference with half K/V: %.3g", worst);
    wlm_ctx_free(c);
    free(ref);
    tm_free(&t);
    free(seq);
}

TEST(forward_sliding_window_vs_double_reference) {
    int n = 0;
    int32_t *seq = ref_sequence(&n);
    REQUIRE(seq);
    enum { T = 45,
           NCTX = 16 };
    tmodel t;
    if (!tm_load(&t)) {
        free(seq);
        CHECK(0);
        return;
    }
    uint32_t V = t.m->hp.n_vocab;
    for (int keep = 0; keep <= 1; keep++) {
        mask_spec win = { 1, NCTX, keep, 0 };
        double *ref = ref_forward(t.m, seq, T, &win);
        REQUIRE(ref);
        /* prompt as one batch, then one token at a time well past n_ctx */
        wlm_ctx *c = new_ctx(t.m, NCTX, 0, WLM_KV_F32, WLM_FULL_SLIDE, (uint32_t)keep, 0);
        REQUIRE(c);
        REQUIRE(eval(c, seq, 5));
        double worst = 0, worst_causal_gap = 0;
        mask_spec causal = { 0, 0, 0, 0 };
        double *full = ref_forward(t.m, seq, T, &causal);
        for (int p = 4; p < T; p++) {
            if (p > 4) REQUIRE(eval(c, &seq[p], 1));
            double e = max_abs_diff_fd(wlm_ctx_logits(c), ref + (size_t)p * V, V);
            worst = fmax(worst, e);
            CHECKF(e <= 1e-4, "n_keep %d position %d: engine vs windowed reference %.3g", keep, p, e);
            /* past the window the result must differ from full attention
             * (otherwise this test would not be testing the window) */
            if (p >= NCTX) worst_causal_gap = fmax(worst_causal_gap, max_abs_diff_fd(wlm_ctx_logits(c), full + (size_t)p * V, V));
        }
        CHECK(wlm_ctx_pos(c) == T);
        CHECKF(worst_causal_gap > 1e-2, "sliding window logits equal full attention (%.3g)", worst_causal_gap);
        /* truncation is refused once positions slid out */
        wlm_err err = { 0 };
        CHECK(wlm_ctx_truncate(c, 3, &err) == WLM_ERR_STATE);
        wlm_ctx_free(c);
        /* all T tokens in one call (chunks of n_ctx, then one by one) and
         * with a small n_batch: the last logits are the same */
        for (int nb = 0; nb < 2; nb++) {
            wlm_ctx *d = new_ctx(t.m, NCTX, nb ? 3 : 0, WLM_KV_F32, WLM_FULL_SLIDE, (uint32_t)keep, 0);
            REQUIRE(d);
            REQUIRE(eval(d, seq, T));
            double e = max_abs_diff_fd(wlm_ctx_logits(d), ref + (size_t)(T - 1) * V, V);
            CHECKF(e <= 1e-4, "n_keep %d one call (n_batch %d): %.3g", keep, nb ? 3 : 16, e);
            wlm_ctx_free(d);
        }
        /* F16 cache: same window, looser tolerance */
        wlm_ctx *h = new_ctx(t.m, NCTX, 0, WLM_KV_F16, WLM_FULL_SLIDE, (uint32_t)keep, 0);
        REQUIRE(h);
        REQUIRE(eval(h, seq, T));
        double eh = max_abs_diff_fd(wlm_ctx_logits(h), ref + (size_t)(T - 1) * V, V);
        CHECKF(eh <= 2e-2, "n_keep %d F16 cache: %.3g", keep, eh);
        wlm_ctx_free(h);
        printf("  sliding window n_ctx %d n_keep %d, %d positions: max |engine - reference| %.3g (F16 KV last %.3g); differs from full attention by %.3g\n",
               NCTX, keep, T, worst, eh, worst_causal_gap);
        free(ref);
        free(full);
    }
    tm_free(&t);
    free(seq);
}

TEST(forward_context_full_error) {
    int n = 0;
    int32_t *seq = ref_sequence(&n);
    REQUIRE(seq && n > 20);
    tmodel t;
    if (!tm_load(&t)) {
        free(seq);
        CHECK(0);
        return;
    }
    uint32_t V = t.m->hp.n_vocab;
    wlm_ctx *c = new_ctx(t.m, 16, 0, WLM_KV_F32, WLM_FULL_ERROR, 0, 0);
    REQUIRE(c);
    CHECK(wlm_ctx_n_ctx(c) == 16);
    REQUIRE(eval(c, seq, 10));
    REQUIRE(eval(c, seq + 10, 6));
    float *first = malloc(sizeof(float) * V);
    memcpy(first, wlm_ctx_logits(c), sizeof(float) * V);
    wlm_err err = { 0 };
    CHECK(wlm_eval(c, seq + 16, 1, &err) == WLM_ERR_CONTEXT_FULL);
    CHECKF(strstr(err.msg, "context full (16)") != NULL, "message: %s", err.msg);
    CHECK(wlm_ctx_pos(c) == 16);
    wlm_ctx_reset(c);
    CHECK(wlm_ctx_pos(c) == 0);
    /* asking for more than fits at once fails too, without side effects */
    memset(&err, 0, sizeof err);
    CHECK(wlm_eval(c, seq, 17, &err) == WLM_ERR_CONTEXT_FULL);
    CHECKF(strstr(err.msg, "context full (16)") != NULL, "message: %s", err.msg);
    CHECK(wlm_ctx_pos(c) == 0);
    REQUIRE(eval(c, seq, 16));
    CHECKF(memcmp(first, wlm_ctx_logits(c), sizeof(float) * V) == 0, "logits after reset differ from the first run");
    /* bad arguments */
    int32_t bad = (int32_t)V;
    memset(&err, 0, sizeof err);
    wlm_ctx_reset(c);
    CHECK(wlm_eval(c, &bad, 1, &err) == WLM_ERR_ARG);
    CHECK(strstr(err.msg, "out of range") != NULL);
    CHECK(wlm_eval(c, seq, 0, &err) == WLM_ERR_ARG);
    free(first);
    wlm_ctx_free(c);
    tm_free(&t);
    free(seq);
}

/* ---- 10. truncation and memory planning --------------------------------------------- */

TEST(forward_truncate_reeval) {
    int n = 0;
    int32_t *seq = ref_sequence(&n);
    REQUIRE(seq && n >= 60);
    tmodel t;
    if (!tm_load(&t)) {
        free(seq);
        CHECK(0);
        return;
    }
    uint32_t V = t.m->hp.n_vocab;
    for (int kv = 0; kv < 2; kv++) {
        /* run A: 30 tokens, rewind to 12, continue with a different suffix */
        int32_t suffix[14];
        for (int i = 0; i < 14; i++) suffix[i] = seq[40 + i];
        wlm_ctx *a = new_ctx(t.m, 64, 64, (uint32_t)kv, WLM_FULL_ERROR, 0, 0);
        REQUIRE(a);
        REQUIRE(eval(a, seq, 30));
        wlm_err err = { 0 };
        CHECK(wlm_ctx_truncate(a, 31, &err) == WLM_ERR_ARG);
        REQUIRE(wlm_ctx_truncate(a, 12, &err) == WLM_OK);
        CHECK(wlm_ctx_pos(a) == 12);
        REQUIRE(eval(a, suffix, 14));
        /* run B: fresh, the same 12 + 14 tokens */
        wlm_ctx *b = new_ctx(t.m, 64, 64, (uint32_t)kv, WLM_FULL_ERROR, 0, 0);
        REQUIRE(b);
        REQUIRE(eval(b, seq, 12));
        REQUIRE(eval(b, suffix, 14));
        double e = max_abs_diff_f(wlm_ctx_logits(a), wlm_ctx_logits(b), V);
        CHECKF(e == 0, "kv %d: truncated run differs from a fresh run by %.3g", kv, e);
        /* and a token at a time after the rewind */
        REQUIRE(wlm_ctx_truncate(a, 12, &err) == WLM_OK);
        for (int i = 0; i < 14; i++) REQUIRE(eval(a, &suffix[i], 1));
        e = max_abs_diff_f(wlm_ctx_logits(a), wlm_ctx_logits(b), V);
        CHECKF(e <= 1e-5, "kv %d: stepwise after truncate differs by %.3g", kv, e);
        /* rewinding to 0 is a reset */
        REQUIRE(wlm_ctx_truncate(a, 0, &err) == WLM_OK);
        REQUIRE(eval(a, seq, 12));
        REQUIRE(eval(a, suffix, 14));
        CHECK(max_abs_diff_f(wlm_ctx_logits(a), wlm_ctx_logits(b), V) == 0);
        wlm_ctx_free(a);
        wlm_ctx_free(b);
    }
    tm_free(&t);
    free(seq);
}

TEST(forward_memory_limit) {
    tmodel t;
    REQUIRE(tm_load(&t));
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = 128;
    uint64_t need = wlm_ctx_bytes_needed(t.m, &p);
    CHECK(need > 128ull * 5 * 32 * 4 * 2); /* at least the F32 KV cache */
    p.kv_type = WLM_KV_F16;
    CHECK(wlm_ctx_bytes_needed(t.m, &p) < need);
    p.kv_type = WLM_KV_F32;
    uint64_t old = wlm_sys_limit(), used = wlm_sys_in_use();
    wlm_sys_set_limit(used + 1000);
    wlm_ctx *c = (wlm_ctx *)1;
    wlm_err err = { 0 };
    wlm_status s = wlm_ctx_new(&c, t.m, &p, &err);
    wlm_sys_set_limit(old);
    CHECK(s == WLM_ERR_NOMEM);
    CHECK(c == NULL);
    /* the numbers agree with each other: N more bytes on top of X in use pass the limit M */
    char want[160];
    snprintf(want, sizeof want, "the context needs %llu more bytes of memory (%llu in use, limit %llu)",
             (unsigned long long)need, (unsigned long long)used, (unsigned long long)(used + 1000));
    CHECKF(strstr(err.msg, want) != NULL, "message '%s', expected '%s'", err.msg, want);
    /* exactly enough works */
    wlm_sys_set_limit(used + need);
    s = wlm_ctx_new(&c, t.m, &p, &err);
    wlm_sys_set_limit(old);
    CHECKF(s == WLM_OK, "%s", err.msg);
    if (s == WLM_OK) wlm_ctx_free(c);
    CHECK(wlm_sys_limit() == old);
    tm_free(&t);
}

/* Every NOMEM message has the same shape and its numbers agree: a small
 * block refused under a limit far above it said "needs 4368 bytes ... limit
 * 2000000" before; now N more bytes on top of X in use pass the limit M. */
static void check_nomem_numbers(const char *msg, const char *what) {
    unsigned long long n = 0, x = 0, lim = 0;
    const char *p = strstr(msg, what);
    CHECKF(p != NULL, "message '%s' does not name '%s'", msg, what);
    if (!p) return;
    int got = sscanf(p + strlen(what), " needs %llu more bytes of memory (%llu in use, limit %llu)", &n, &x, &lim);
    CHECKF(got == 3, "message '%s' is not 'needs N more bytes of memory (X in use, limit M)'", msg);
    CHECKF(n + x > lim, "message '%s': %llu + %llu does not pass the limit %llu", msg, n, x, lim);
}

TEST(sys_nomem_messages_agree) {
    tmodel t;
    REQUIRE(tm_load(&t));
    uint64_t old = wlm_sys_limit(), used = wlm_sys_in_use();
    wlm_err err = { 0 };
    /* a limit a few bytes above what is in use: tokenize's work block does not fit */
    wlm_sys_set_limit(used + 100);
    int32_t ids[64];
    uint32_t n_out = 0;
    const char *text = "Once upon a time there was a little girl who liked to play outside";
    wlm_status s = wlm_tokenize(t.m, text, (uint32_t)strlen(text), 0, ids, 64, &n_out, &err);
    wlm_sys_set_limit(old);
    CHECK(s == WLM_ERR_NOMEM);
    check_nomem_numbers(err.msg, "tokenize");
    /* the helper itself, under and over the limit */
    wlm_sys_set_limit(used + 1000);
    CHECK(wlm_fail_nomem(&err, "the test block", 5000) == WLM_ERR_NOMEM);
    check_nomem_numbers(err.msg, "the test block");
    CHECK(strstr(err.msg, "could not grow") == NULL);
    CHECK(wlm_fail_nomem(&err, "the test block", 10) == WLM_ERR_NOMEM);
    CHECKF(strstr(err.msg, "the memory could not grow") != NULL, "%s", err.msg);
    wlm_sys_set_limit(old);
    tm_free(&t);
}

/* ---- 11. re-quantized models ------------------------------------------------------------ */

static uint32_t tensor_type_of(const wlm_model *m, const char *name) {
    for (uint32_t i = 0; i < wlm_tensor_count(m); i++) {
        uint32_t len = 0;
        const char *nm = wlm_tensor_name(m, i, &len);
        if (len == strlen(name) && !memcmp(nm, name, len)) return wlm_tensor_type(m, i);
    }
    return 0xffffffffu;
}

/* F16 tensors are scanned at load (wlm_tensor.finite): every one of a
 * converted model is marked finite; one infinite half unmarks its tensor
 * only, and a decode step then still sees the infinity (non-finite logits,
 * as with the scalar kernels) instead of the finite value the fast
 * conversion would make of it */
TEST(forward_f16_weights_marked_finite_at_load) {
    tmodel f32;
    REQUIRE(tm_load(&f32));
    wlm_err err = { 0 };
    uint64_t size = 0;
    REQUIRE(wlm_quantize_size(f32.m, GGML_F16, &size, &err) == WLM_OK);
    unsigned char *buf = wlm_sys_alloc(size), *bad = wlm_sys_alloc(size);
    REQUIRE(buf && bad);
    char report[8192];
    REQUIRE(wlm_quantize(f32.m, GGML_F16, buf, size, report, sizeof report, &err) == WLM_OK);
    memcpy(bad, buf, size);
    tmodel good, inf;
    REQUIRE(tm_load_bytes(&good, buf, size));
    const wlm_tensor *q = good.m->layers[0].wq;
    REQUIRE(q && q->type == GGML_F16);
    uint32_t n_f16 = 0, marked = 0;
    for (uint64_t i = 0; i < good.m->g.n_tensors; i++) {
        n_f16 += good.m->g.tensors[i].type == GGML_F16;
        marked += good.m->g.tensors[i].type == GGML_F16 && good.m->g.tensors[i].finite;
    }
    CHECKF(n_f16 > 10 && marked == n_f16, "%u of %u F16 tensors marked finite", marked, n_f16);
    CHECK(q->finite && good.m->layers[0].w_down->finite);
    /* +infinity in row 3 of blk.0.attn_q.weight */
    ((uint16_t *)(bad + (q->data - buf)))[3 * q->ne[0] + 5] = 0x7c00;
    REQUIRE(tm_load_bytes(&inf, bad, size));
    CHECK(!inf.m->layers[0].wq->finite && inf.m->layers[0].wk->finite && inf.m->layers[1].wq->finite);
    uint32_t V = inf.m->hp.n_vocab;
    int32_t tok[2] = { 1, 42 };
    int nonfinite[2] = { 0, 0 };
    for (int set = 0; set < 2; set++) {
        wlm_ctx *c = new_ctx(inf.m, 64, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 0);
        REQUIRE(c);
        if (set) c->k = &wlm_kernels_scalar;
        REQUIRE(eval(c, tok, 1) && eval(c, tok + 1, 1)); /* one token a step: the small-batch F16 kernel */
        for (uint32_t i = 0; i < V; i++) nonfinite[set] += !isfinite(wlm_ctx_logits(c)[i]);
        wlm_ctx_free(c);
    }
    CHECKF(nonfinite[0] == (int)V && nonfinite[1] == (int)V, "non-finite logits: %d (best kernels), %d (scalar) of %u",
           nonfinite[0], nonfinite[1], V);
    /* a batch of 5 (the panel path, tokens times 2^112 on marked rows):
     * the planted infinity shows, and the good model's logits at every
     * position are the double reference's on the same halves */
    int32_t five[5] = { 1, 42, 7, 300, 99 };
    wlm_ctx *c = new_ctx(inf.m, 64, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 0);
    REQUIRE(c && eval(c, five, 5));
    int nf = 0;
    for (uint32_t i = 0; i < V; i++) nf += !isfinite(wlm_ctx_logits(c)[i]);
    CHECKF(nf == (int)V, "batch of 5 with an infinite half: %d of %u logits non-finite", nf, V);
    wlm_ctx_free(c);
    mask_spec causal = { 0, 0, 0, 0 };
    double *ref = ref_forward(good.m, five, 5, &causal);
    c = new_ctx(good.m, 64, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
    REQUIRE(ref && c && eval(c, five, 5));
    double e = 0;
    for (int p = 0; p < 5; p++) e = fmax(e, max_abs_diff_fd(wlm_ctx_logits(c) + (size_t)p * V, ref + (size_t)p * V, V));
    CHECKF(e <= 1e-4, "F16 batch of 5 vs the double reference: %.3g", e);
    wlm_ctx_free(c);
    free(ref);
    tm_free(&inf);
    tm_free(&good);
    tm_free(&f32);
}

TEST(forward_quantized_models_accuracy) {
    int n = 0;
    int32_t *seq = ref_sequence(&n); /* 5 prompt + 200 greedy tokens */
    REQUIRE(seq && n == 205);
    tmodel f32;
    if (!tm_load(&f32)) {
        free(seq);
        CHECK(0);
        return;
    }
    uint32_t V = f32.m->hp.n_vocab;
    const int np = 5, steps = 200;
    /* the F32 model's logits at every step (teacher-forced on the reference) */
    float *base = malloc(sizeof(float) * steps * V);
    wlm_ctx *c = new_ctx(f32.m, 256, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 0);
    REQUIRE(c);
    REQUIRE(eval(c, seq, np));
    for (int s = 0; s < steps; s++) {
        memcpy(base + (size_t)s * V, wlm_ctx_logits(c), sizeof(float) * V);
        if (s + 1 < steps) REQUIRE(eval(c, &seq[np + s], 1));
    }
    wlm_ctx_free(c);
    static const struct {
        uint32_t type;
        const char *name;
        double max_err;
        double min_agree;
    } Q[] = {
        /* bounds from measurement (F16 0.0113 / 200 of 200, Q8_0 0.45 /
         * 199 of 200, Q4_0 8.7 / 171 of 200), with margin */
        { GGML_F16, "F16", 2.5e-2, 1.0 },
        { GGML_Q8_0, "Q8_0", 1.0, 0.95 },
        { GGML_Q4_0, "Q4_0", 15.0, 0.70 },
    };
    for (unsigned qi = 0; qi < sizeof Q / sizeof Q[0]; qi++) {
        wlm_err err = { 0 };
        uint64_t size = 0;
        REQUIRE(wlm_quantize_size(f32.m, Q[qi].type, &size, &err) == WLM_OK);
        unsigned char *buf = wlm_sys_alloc(size);
        REQUIRE(buf);
        char report[8192];
        wlm_status st = wlm_quantize(f32.m, Q[qi].type, buf, size, report, sizeof report, &err);
        CHECKF(st == WLM_OK, "%s: %s", Q[qi].name, err.msg);
        if (st != WLM_OK) {
            wlm_sys_free(buf);
            continue;
        }
        tmodel qm;
        if (!tm_load_bytes(&qm, buf, size)) {
            CHECK(0);
            wlm_sys_free(buf);
            continue;
        }
        /* what was converted and what was kept */
        CHECK(tensor_type_of(qm.m, "blk.0.attn_q.weight") == Q[qi].type);
        CHECK(tensor_type_of(qm.m, "output.weight") == Q[qi].type);
        CHECK(tensor_type_of(qm.m, "blk.4.ffn_gate.weight") == Q[qi].type);
        CHECK(tensor_type_of(qm.m, "blk.0.attn_norm.weight") == GGML_F32);
        uint32_t down = tensor_type_of(qm.m, "blk.0.ffn_down.weight");
        if (Q[qi].type == GGML_F16) CHECK(down == GGML_F16);
        else {
            CHECKF(down == GGML_F32, "%s: ffn_down (rows of 172) has type %u", Q[qi].name, down);
            CHECK(strstr(report, "blk.0.ffn_down.weight: kept F32 (row length is not a multiple of the block)") != NULL);
        }
        /* same input tokens, compare logits and top-1 with F32 */
        wlm_ctx *qc = new_ctx(qm.m, 256, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 0);
        REQUIRE(qc);
        REQUIRE(eval(qc, seq, np));
        double worst = 0, sum_err = 0;
        int agree = 0, valid = 1;
        int32_t free_run[200];
        for (int s = 0; s < steps; s++) {
            const float *lg = wlm_ctx_logits(qc);
            double e = max_abs_diff_f(lg, base + (size_t)s * V, V);
            worst = fmax(worst, e);
            sum_err += e;
            int32_t a = argmax(lg, V);
            if (a == argmax(base + (size_t)s * V, V)) agree++;
            if (a < 0 || (uint32_t)a >= V || !isfinite(lg[a])) valid = 0;
            if (s + 1 < steps) REQUIRE(eval(qc, &seq[np + s], 1));
        }
        /* free-running greedy from the prompt: valid tokens, and how long it
         * follows the F32 continuation */
        wlm_ctx_reset(qc);
        REQUIRE(eval(qc, seq, np));
        int same_prefix = 0, diverged = 0;
        for (int s = 0; s < steps; s++) {
            free_run[s] = argmax(wlm_ctx_logits(qc), V);
            if (free_run[s] < 0 || (uint32_t)free_run[s] >= V) valid = 0;
            if (!diverged && free_run[s] == seq[np + s]) same_prefix++;
            else diverged = 1;
            if (s + 1 < steps) REQUIRE(eval(qc, &free_run[s], 1));
        }
        wlm_ctx_free(qc);
        double agreement = (double)agree / steps;
        printf("  %-5s (%llu bytes): max |logit - F32| %.4g, mean of per-step max %.4g, top-1 agreement %d/%d = %.3f, "
               "free-running greedy matches F32 for %d tokens\n",
               Q[qi].name, (unsigned long long)size, worst, sum_err / steps, agree, steps, agreement, same_prefix);
        CHECK(valid);
        CHECKF(worst <= Q[qi].max_err, "%s: max logit error %.4g > %.4g", Q[qi].name, worst, Q[qi].max_err);
        CHECKF(agreement >= Q[qi].min_agree, "%s: top-1 agreement %.3f < %.3f", Q[qi].name, agreement, Q[qi].min_agree);
        if (Q[qi].type == GGML_F16) {
            CHECK(same_prefix == steps);
            /* F16 weights keep float activations: the engine must match the
             * double reference run on the same (half) weights */
            mask_spec causal = { 0, 0, 0, 0 };
            double *ref = ref_forward(qm.m, seq, 40, &causal);
            wlm_ctx *rc = new_ctx(qm.m, 64, 64, WLM_KV_F32, WLM_FULL_ERROR, 0, 1);
            if (ref && rc && eval(rc, seq, 40)) {
                double e = 0;
                for (int p = 0; p < 40; p++) e = fmax(e, max_abs_diff_fd(wlm_ctx_logits(rc) + (size_t)p * V, ref + (size_t)p * V, V));
                printf("  F16 weights: engine vs double reference on the same half weights: max %.3g\n", e);
                CHECKF(e <= 1e-4, "F16 model vs reference %.3g", e);
            } else CHECK(0);
            wlm_ctx_free(rc);
            free(ref);
        }
        tm_free(&qm);
    }
    free(base);
    tm_free(&f32);
    free(seq);
}
