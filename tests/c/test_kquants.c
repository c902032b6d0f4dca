/* Q4_1 / Q5_0 / Q5_1 / K-quant tests: every kernel set's dot equals the
 * scalar reference bit for bit (random blocks, extreme scales, every quant
 * value); the reference equals an independent implementation of the
 * documented order; dequantizers against blocks written by hand from the
 * format description; quantize -> dequantize error bounds; dot products vs
 * double; re-quantized stories260K loads and agrees with the original. */
#include <stdint.h>
#include "tst.h"
#include "gguf_build.h"
#include "../../src/internal.h"

/* every kernel set of this build (scalar, and SIMD128 in wasm) */
#define SETS wlm_kernel_sets
#define N_SETS (int)wlm_kernel_set_count

static uint32_t fbits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static int same_float(float a, float b) { return (a != a && b != b) || fbits(a) == fbits(b); }

static const uint32_t KTYPES[] = { GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K };
#define N_KTYPES (int)(sizeof KTYPES / sizeof KTYPES[0])
static wlm_dot_fn ref_dot(uint32_t t) {
    switch (t) {
    case GGML_Q4_1: return wlm_kq_dot_q4_1;
    case GGML_Q5_0: return wlm_kq_dot_q5_0;
    case GGML_Q5_1: return wlm_kq_dot_q5_1;
    case GGML_Q2_K: return wlm_kq_dot_q2_k;
    case GGML_Q3_K: return wlm_kq_dot_q3_k;
    case GGML_Q4_K: return wlm_kq_dot_q4_k;
    case GGML_Q5_K: return wlm_kq_dot_q5_k;
    default: return wlm_kq_dot_q6_k;
    }
}
static int is_k(uint32_t t) { return wlm_type(t)->block == 256; }

static int argmax(const float *v, uint32_t n);

/* ---- an independent decoder, written from the format description ------------- */

/* one block as the formula sees it: value_i = d*sc[j]*q_i - dmin*mn[j] (kind
 * MINUS), d*sc[j]*q_i (SYM) or d*q_i + dmin (PLUS; Q4_1/Q5_1: dmin = m),
 * j = i / sub */
enum { SYM,
       MINUS,
       PLUS };
typedef struct {
    int kind, nb, sub;
    int q[256];
    int sc[16], mn[16];
    float d, dmin;
} tblock;

static float th(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return wlm_f16_to_f32(h);
}

static void tdecode(uint32_t t, const uint8_t *b, tblock *o) {
    memset(o, 0, sizeof *o);
    switch (t) {
    case GGML_Q4_1:
    case GGML_Q5_1: {
        const uint8_t *qs = b + (t == GGML_Q4_1 ? 4 : 8), *qh = b + 4;
        o->kind = PLUS;
        o->nb = 32;
        o->sub = 32;
        o->d = th(b);
        o->dmin = th(b + 2);
        o->sc[0] = 1;
        for (int i = 0; i < 32; i++) {
            int v = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
            if (t == GGML_Q5_1) v += ((qh[i / 8] >> (i % 8)) & 1) * 16;
            o->q[i] = v;
        }
        break;
    }
    case GGML_Q5_0: {
        const uint8_t *qh = b + 2, *qs = b + 6;
        o->kind = SYM;
        o->nb = 32;
        o->sub = 32;
        o->d = th(b);
        o->sc[0] = 1;
        for (int i = 0; i < 32; i++) o->q[i] = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) + ((qh[i / 8] >> (i % 8)) & 1) * 16 - 16;
        break;
    }
    case GGML_Q2_K: {
        const uint8_t *sc = b, *qs = b + 16;
        o->kind = MINUS;
        o->nb = 256;
        o->sub = 16;
        o->d = th(b + 80);
        o->dmin = th(b + 82);
        for (int j = 0; j < 16; j++) {
            o->sc[j] = sc[j] & 15;
            o->mn[j] = sc[j] >> 4;
        }
        for (int i = 0; i < 256; i++) o->q[i] = (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        break;
    }
    case GGML_Q3_K: {
        const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
        o->kind = SYM;
        o->nb = 256;
        o->sub = 16;
        o->d = th(b + 108);
        for (int j = 0; j < 16; j++) {
            int low4 = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4, hi2 = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
            o->sc[j] = (low4 | hi2 << 4) - 32;
        }
        for (int i = 0; i < 256; i++) {
            int low = (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
            int hb = (hm[i % 32] >> (4 * (i / 128) + (i % 128) / 32)) & 1;
            o->q[i] = low - (hb ? 0 : 4);
        }
        break;
    }
    case GGML_Q4_K:
    case GGML_Q5_K: {
        const uint8_t *sc = b + 4, *qh = b + 16, *qs = t == GGML_Q4_K ? b + 16 : b + 48;
        o->kind = MINUS;
        o->nb = 256;
        o->sub = 32;
        o->d = th(b);
        o->dmin = th(b + 2);
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                o->sc[j] = sc[j] & 63;
                o->mn[j] = sc[j + 4] & 63;
            } else {
                o->sc[j] = (sc[j + 4] & 15) | (sc[j - 4] >> 6) << 4;
                o->mn[j] = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
            }
        }
        for (int i = 0; i < 256; i++) {
            int c = i / 64, u = (i % 64) / 32, l = i % 32;
            int v = (qs[32 * c + l] >> (4 * u)) & 15;
            if (t == GGML_Q5_K) v |= ((qh[l] >> (2 * c + u)) & 1) << 4;
            o->q[i] = v;
        }
        break;
    }
    default: { /* Q6_K */
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        o->kind = SYM;
        o->nb = 256;
        o->sub = 16;
        o->d = th(b + 208);
        for (int j = 0; j < 16; j++) o->sc[j] = sc[j];
        for (int i = 0; i < 256; i++) {
            int h = i / 128, k = (i % 128) / 32, l = i % 32;
            int low = (ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 15, high = (qh[32 * h + l] >> (2 * k)) & 3;
            o->q[i] = (low | high << 4) - 32;
        }
    }
    }
}

/* the activation of block b: int8 values and the scale as a float */
static void tact(uint32_t t, const uint8_t *x, uint32_t b, const int8_t **q, float *dx) {
    if (is_k(t)) {
        const block_q8_k *B = (const block_q8_k *)x + b;
        *q = B->qs;
        *dx = B->d;
    } else {
        const block_q8_0 *B = (const block_q8_0 *)x + b;
        *q = B->qs;
        *dx = wlm_f16_to_f32(B->d);
    }
}

/* the documented order: exact integer sums per block, then
 * r + ((d*dx)*s +/- (dmin*dx)*sm) or r + (d*dx)*s, block by block */
static float indep_dot(uint32_t t, uint32_t n, const uint8_t *w, const uint8_t *x, double *exact, double *mag) {
    const wlm_type_info *ti = wlm_type(t);
    float r = 0;
    double e = 0, m = 0;
    tblock B;
    for (uint32_t b = 0; b < n / ti->block; b++) {
        tdecode(t, w + (uint64_t)b * ti->block_bytes, &B);
        const int8_t *xq;
        float dx;
        tact(t, x, b, &xq, &dx);
        int32_t s = 0, sm = 0;
        for (int j = 0; j < B.nb / B.sub; j++) {
            int32_t sq = 0, sx = 0;
            for (int i = j * B.sub; i < (j + 1) * B.sub; i++) {
                sq += B.q[i] * xq[i];
                sx += xq[i];
            }
            s += B.sc[j] * sq;
            sm += (B.kind == PLUS ? 1 : B.mn[j]) * sx;
        }
        if (B.kind == SYM) r = r + (B.d * dx) * (float)s;
        else if (B.kind == MINUS) r = r + ((B.d * dx) * (float)s - (B.dmin * dx) * (float)sm);
        else r = r + ((B.d * dx) * (float)s + (B.dmin * dx) * (float)sm);
        for (int i = 0; i < B.nb; i++) {
            int j = i / B.sub;
            double a = (double)B.d * B.sc[j] * B.q[i] * dx * xq[i];
            double c = B.kind == MINUS ? -(double)B.dmin * B.mn[j] * dx * xq[i] : B.kind == PLUS ? (double)B.dmin * dx * xq[i]
                                                                                                 : 0;
            e += a + c;
            m += fabs(a) + fabs(c);
        }
    }
    if (exact) *exact = e;
    if (mag) *mag = m;
    return r;
}

/* ---- random blocks ---------------------------------------------------------------- */

static uint16_t rand_scale(void) {
    switch (tst_rand() % 10) {
    case 0: return 0x7bff;                                   /* 65504 */
    case 1: return 0x0001;                                   /* smallest subnormal */
    case 2: return (uint16_t)(tst_rand() % 0x400);           /* subnormal or zero */
    case 3: return 0xfbff;                                   /* -65504 */
    case 4: return (uint16_t)(tst_rand() & 0xffff) & 0xfbff; /* any finite */
    default: return wlm_f32_to_f16(ldexpf(tst_randf(), -(int)(tst_rand() % 12)));
    }
}
static float rand_fscale(void) {
    switch (tst_rand() % 8) {
    case 0: return 0.0f;
    case 1: return 1e-30f;
    case 2: return 3e30f;
    case 3: return -ldexpf(tst_randf(), -3);
    default: return ldexpf(tst_randf(), -(int)(tst_rand() % 12));
    }
}

/* random weight block: random bytes everywhere (every quant value, every
 * scale code), then the half fields replaced by random finite scales.
 * extreme: 1 all bits zero, 2 all bits one (quant fields). */
static void rand_wblock(uint32_t t, uint8_t *b, int extreme) {
    uint32_t nb = wlm_type(t)->block_bytes;
    for (uint32_t i = 0; i < nb; i++) b[i] = extreme == 1 ? 0 : extreme == 2 ? 0xff
                                                                             : (uint8_t)tst_rand();
    uint16_t d = rand_scale(), m = rand_scale();
    switch (t) {
    case GGML_Q4_1:
    case GGML_Q5_1:
    case GGML_Q4_K:
    case GGML_Q5_K:
        memcpy(b, &d, 2);
        memcpy(b + 2, &m, 2);
        break;
    case GGML_Q5_0: memcpy(b, &d, 2); break;
    case GGML_Q2_K:
        memcpy(b + 80, &d, 2);
        memcpy(b + 82, &m, 2);
        break;
    case GGML_Q3_K: memcpy(b + 108, &d, 2); break;
    case GGML_Q6_K: memcpy(b + 208, &d, 2); break;
    }
}

static void rand_ablock(uint32_t t, uint8_t *x, uint32_t b, int extreme) {
    int8_t *q;
    int n = is_k(t) ? 256 : 32;
    if (is_k(t)) {
        block_q8_k *B = (block_q8_k *)x + b;
        B->d = rand_fscale();
        q = B->qs;
    } else {
        block_q8_0 *B = (block_q8_0 *)x + b;
        B->d = rand_scale();
        q = B->qs;
    }
    for (int i = 0; i < n; i++) {
        int v = (int)(tst_rand() % 256) - 128;
        if (extreme == 1) v = -128;
        else if (extreme == 2) v = 127;
        else if (extreme == 3) v = (i & 1) ? 127 : -128;
        if (is_k(t) && v == -128 && (tst_rand() & 1)) v = -127;
        q[i] = (int8_t)v;
    }
    if (is_k(t)) {
        block_q8_k *B = (block_q8_k *)x + b;
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += q[16 * j + i];
            B->bsums[j] = (int16_t)s;
        }
    }
}

/* ("kernels" in the name: the relaxed-SIMD run of the suite selects it) */
TEST(kquants_kernels_dot_bit_identical) {
    enum { MAXB = 12 };
    uint8_t *w = malloc(210 * MAXB * 8), *x = malloc(292 * MAXB * 8);
    static const uint32_t NB[] = { 1, 2, 3, 5, 8, 12 };
    int compared = 0;
    for (int ti = 0; ti < N_KTYPES; ti++) {
        uint32_t t = KTYPES[ti];
        const wlm_type_info *inf = wlm_type(t);
        uint32_t mult = is_k(t) ? 1 : 8; /* 32-block types: more blocks per row */
        CHECKF(wlm_kernel_dot(&wlm_kernels_scalar, t) == ref_dot(t), "scalar table entry for %s is not the reference", inf->name);
        for (int k = 0; k < N_SETS; k++) CHECKF(wlm_kernel_dot(SETS[k], t) != 0, "%s has no dot for %s", SETS[k]->name, inf->name);
        for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
            uint32_t nb = NB[si] * mult, n = nb * inf->block;
            for (int rep = 0; rep < 12; rep++) {
                for (uint32_t b = 0; b < nb; b++) {
                    rand_wblock(t, w + b * inf->block_bytes, rep < 2 ? 0 : rep < 6 ? (int)(tst_rand() % 3)
                                                                                   : 0);
                    rand_ablock(t, x, b, rep >= 2 && rep < 6 ? (int)(tst_rand() % 4) : 0);
                }
                float ref = ref_dot(t)(n, w, x);
                float ind = indep_dot(t, n, w, x, 0, 0);
                CHECKF(same_float(ref, ind), "%s nb=%u rep=%d reference %.9g, documented order %.9g", inf->name, nb, rep, ref, ind);
                for (int k = 0; k < N_SETS; k++) {
                    float got = wlm_kernel_dot(SETS[k], t)(n, w, x);
                    CHECKF(same_float(got, ref), "%s %s nb=%u rep=%d got %.9g (%08x) ref %.9g (%08x)", SETS[k]->name, inf->name, nb, rep,
                           got, fbits(got), ref, fbits(ref));
                    compared++;
                }
            }
        }
    }
    printf("  %d dot comparisons over %d kernel set(s)\n", compared, N_SETS);
    free(w);
    free(x);
}

/* The batched path (kq_rows: decode and prefill of K-quant weights) against
 * the reference row dot, bit for bit, for every kernel set: token counts that
 * take the decode kernels (1, 2) and the unpacked-block kernels (4-token
 * passes, tails, more than one 64-token tile), several rows, extreme blocks; and a
 * scratch too small refuses without writing. */
TEST(kquants_kernels_rows_bit_identical) {
    static const uint32_t NB[] = { 1, 3, 8, 40 }, NT[] = { 1, 2, 3, 5, 9, 70 }; /* 70: past a 64-token tile */
    enum { ROWS = 3,
           MAXT = 70 };
    uint8_t *w = malloc(210 * 40 * ROWS), *x = malloc(292 * 40 * MAXT);
    float *y = malloc(4 * ROWS * MAXT);
    uint64_t scratch_bytes = 64 * 1024;
    void *scratch = aligned_alloc(64, scratch_bytes);
    int compared = 0, batched[GGML_TYPE_COUNT] = { 0 };
    for (int ti = 0; ti < N_KTYPES; ti++) {
        uint32_t t = KTYPES[ti];
        if (!is_k(t)) continue;
        const wlm_type_info *inf = wlm_type(t);
        for (unsigned si = 0; si < sizeof NB / sizeof NB[0]; si++) {
            uint32_t nb = NB[si], n = nb * 256, rb = nb * inf->block_bytes, xs = nb * 292;
            for (unsigned ni = 0; ni < sizeof NT / sizeof NT[0]; ni++) {
                uint32_t nt = NT[ni];
                int extreme = (int)(ni % 3);
                for (uint32_t r = 0; r < ROWS; r++)
                    for (uint32_t b = 0; b < nb; b++) rand_wblock(t, w + r * rb + b * inf->block_bytes, r == 0 ? extreme : 0);
                for (uint32_t k = 0; k < nt; k++)
                    for (uint32_t b = 0; b < nb; b++) rand_ablock(t, x + k * xs, b, k == 0 ? (int)(tst_rand() % 4) : 0);
                if (ni == 1 || ni == 4) { /* an infinite and a NaN weight scale (the kernels convert halves their own way) */
                    uint32_t off = t == GGML_Q6_K ? 208 : t == GGML_Q3_K ? 108
                        : t == GGML_Q2_K                                 ? 80
                                                                         : 0;
                    uint16_t hinf = ni == 1 ? 0x7c00 : 0xfc00, hnan = 0x7e01;
                    memcpy(w + 1 * rb + off, &hinf, 2);
                    memcpy(w + 2 * rb + (nb - 1) * inf->block_bytes + off, &hnan, 2);
                }
                for (int k = 0; k < N_SETS; k++) {
                    if (!SETS[k]->kq_rows) continue;
                    for (uint32_t i = 0; i < ROWS * MAXT; i++) y[i] = -1.0f;
                    if (!SETS[k]->kq_rows(t, n, w, rb, ROWS, x, xs, nt, y, ROWS, scratch, scratch_bytes)) continue;
                    batched[t]++;
                    for (uint32_t r = 0; r < ROWS; r++)
                        for (uint32_t tk = 0; tk < nt; tk++) {
                            float ref = ref_dot(t)(n, w + r * rb, x + tk * xs), got = y[tk * ROWS + r];
                            CHECKF(same_float(got, ref), "%s %s rows: n=%u tokens=%u row %u token %u got %.9g ref %.9g",
                                   SETS[k]->name, inf->name, n, nt, r, tk, got, ref);
                            compared++;
                        }
                    for (uint32_t i = ROWS * nt; i < ROWS * MAXT; i++) CHECKF(y[i] == -1.0f, "%s %s wrote past the batch", SETS[k]->name, inf->name);
                    /* too little scratch: refused (nothing written) or still exact */
                    for (uint32_t i = 0; i < ROWS * MAXT; i++) y[i] = -1.0f;
                    if (SETS[k]->kq_rows(t, n, w, rb, ROWS, x, xs, nt, y, ROWS, scratch, 16)) {
                        for (uint32_t i = 0; i < ROWS * nt; i++)
                            CHECKF(same_float(y[i], ref_dot(t)(n, w + (i % ROWS) * rb, x + (i / ROWS) * xs)), "%s %s small scratch", SETS[k]->name, inf->name);
                    } else {
                        for (uint32_t i = 0; i < ROWS * MAXT; i++) CHECKF(y[i] == -1.0f, "%s %s refused but wrote", SETS[k]->name, inf->name);
                    }
                }
            }
        }
    }
    /* every set has the batched path for the types of Q4_K_M files */
    CHECK(batched[GGML_Q4_K] >= N_SETS * 24 && batched[GGML_Q6_K] >= N_SETS * 24);
    CHECK(SETS[0]->kq_rows(GGML_Q8_0, 256, w, 34, 1, x, 292, 1, y, 1, scratch, scratch_bytes) == 0);
    printf("  %d batched outputs compared over %d kernel set(s)\n", compared, N_SETS);
    free(w);
    free(x);
    free(y);
    free(scratch);
}

/* A synthetic llama whose rows are multiples of 256, re-quantized to Q4_K_M
 * (Q4_K and Q6_K tensors, so the forward pass takes kq_rows): a prompt
 * evaluated in batches (prefill kernels) gives the logits of token-by-token
 * evaluation (decode kernels) bit for bit, then the same greedy steps; and
 * every kernel set of the build gives the same logits. */
TEST(kquants_kernels_q4_k_m_model_prefill_equals_decode) {
    gb_file *f = malloc(sizeof *f);
    gb_llama p = { 256, 2, 4, 2, 512, 0, 0, 5 };
    gb_tiny_llama(f, &p);
    size_t size;
    unsigned char *bytes = gb_serialize(f, &size);
    gb_free(f);
    free(f);
    unsigned char *data = tst_sys_copy(bytes, size);
    free(bytes);
    wlm_model *m;
    wlm_err err;
    REQUIRE(wlm_model_load(&m, data, size, &err) == WLM_OK);
    uint64_t qsize;
    REQUIRE(wlm_quantize_size(m, WLM_QUANT_Q4_K_M, &qsize, &err) == WLM_OK);
    uint8_t *q = wlm_sys_alloc(qsize);
    REQUIRE(q);
    REQUIRE(wlm_quantize(m, WLM_QUANT_Q4_K_M, q, qsize, 0, 0, &err) == WLM_OK);
    wlm_model *mq;
    REQUIRE(wlm_model_load(&mq, q, qsize, &err) == WLM_OK);
    int n_q4 = 0, n_q6 = 0;
    for (uint64_t i = 0; i < mq->g.n_tensors; i++) {
        n_q4 += mq->g.tensors[i].type == GGML_Q4_K;
        n_q6 += mq->g.tensors[i].type == GGML_Q6_K;
    }
    CHECKF(n_q4 >= 8 && n_q6 >= 2, "Q4_K_M model has %d Q4_K and %d Q6_K tensors", n_q4, n_q6);
    enum { T = 13,
           STEPS = 4 };
    static const int32_t prompt[T] = { 1, 6, 8, 11, 7, 9, 12, 10, 13, 6, 15, 8, 9 };
    uint32_t nv = wlm_model_hparams(mq)->n_vocab;
    float *ref = malloc(sizeof(float) * nv * (STEPS + 1));
    int runs = 0;
    for (int k = 0; k < N_SETS; k++)
        for (int batched = 1; batched >= 0; batched--) {
            wlm_ctx_params cp;
            wlm_ctx_default_params(&cp);
            cp.n_ctx = 64;
            cp.n_batch = 8;
            wlm_ctx *c;
            REQUIRE(wlm_ctx_new(&c, mq, &cp, &err) == WLM_OK);
            c->k = SETS[k];
            if (batched) REQUIRE(wlm_eval(c, prompt, T, &err) == WLM_OK); /* batches of 8 and 5 */
            else
                for (int i = 0; i < T; i++) REQUIRE(wlm_eval(c, &prompt[i], 1, &err) == WLM_OK);
            for (int s = 0; s <= STEPS; s++) {
                const float *l = wlm_ctx_logits(c);
                if (runs == 0) memcpy(ref + (uint64_t)s * nv, l, nv * sizeof(float));
                else CHECKF(memcmp(ref + (uint64_t)s * nv, l, nv * sizeof(float)) == 0, "%s, %s: step %d logits differ from %s batched",
                            SETS[k]->name, batched ? "batched" : "token by token", s, SETS[0]->name);
                if (s == STEPS) break;
                int32_t tok = argmax(l, nv);
                REQUIRE(wlm_eval(c, &tok, 1, &err) == WLM_OK);
            }
            wlm_ctx_free(c);
            runs++;
        }
    printf("  %d runs (%d kernel set(s) x batched / token by token) agree bit for bit; %d Q4_K + %d Q6_K tensors\n", runs, N_SETS, n_q4, n_q6);
    free(ref);
    wlm_model_free(mq);
    wlm_sys_free(q);
    wlm_model_free(m);
    wlm_sys_free(data);
}

/* ---- blocks written by hand ---------------------------------------------------- */

static void put_h(uint8_t *p, float f) {
    uint16_t h = wlm_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* checks row `got` against expected values exp[], exactly (all values chosen
 * so the formula is exact in float) */
static int same_rows(const float *got, const float *exp, int n, const char *what) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (got[i] != exp[i]) {
            if (bad < 4) fprintf(stderr, "  %s[%d] = %.9g, expected %.9g\n", what, i, got[i], exp[i]);
            bad++;
        }
    return bad == 0;
}

TEST(kquants_dequant_hand_blocks) {
    uint8_t b[256];
    float got[256], exp[256];
    /* Q4_1: d = 0.5, m = -3; byte j = weight j (low nibble) + weight j+16 (high) */
    memset(b, 0, sizeof b);
    put_h(b, 0.5f);
    put_h(b + 2, -3.0f);
    for (int j = 0; j < 16; j++) {
        int lo = j, hi = 15 - j;
        b[4 + j] = (uint8_t)(lo | hi << 4);
        exp[j] = 0.5f * lo - 3;
        exp[j + 16] = 0.5f * hi - 3;
    }
    wlm_dequantize_row(GGML_Q4_1, b, got, 32);
    CHECK(same_rows(got, exp, 32, "q4_1"));
    /* literal bytes: d = 1 (3c00), m = 0.25 (3400), qs[0] = 0x5a: w0 = 10.25, w16 = 5.25 */
    memset(b, 0, sizeof b);
    b[0] = 0x00;
    b[1] = 0x3c;
    b[2] = 0x00;
    b[3] = 0x34;
    b[4] = 0x5a;
    wlm_dequantize_row(GGML_Q4_1, b, got, 32);
    CHECK(got[0] == 10.25f && got[16] == 5.25f && got[1] == 0.25f);

    /* Q5_0: d = 0.25; weight i: 5-bit value u_i = (7 i + 3) % 32, fifth bit = bit i of qh (LE) */
    memset(b, 0, sizeof b);
    put_h(b, 0.25f);
    for (int i = 0; i < 32; i++) {
        int u = (7 * i + 3) % 32;
        if (u & 16) b[2 + i / 8] |= (uint8_t)(1 << (i % 8));
        if (i < 16) b[6 + i] |= (uint8_t)(u & 15);
        else b[6 + i - 16] |= (uint8_t)((u & 15) << 4);
        exp[i] = 0.25f * (u - 16);
    }
    wlm_dequantize_row(GGML_Q5_0, b, got, 32);
    CHECK(same_rows(got, exp, 32, "q5_0"));

    /* Q5_1: d = 2, m = -40; same bit placement */
    memset(b, 0, sizeof b);
    put_h(b, 2.0f);
    put_h(b + 2, -40.0f);
    for (int i = 0; i < 32; i++) {
        int u = (11 * i + 5) % 32;
        if (u & 16) b[4 + i / 8] |= (uint8_t)(1 << (i % 8));
        if (i < 16) b[8 + i] |= (uint8_t)(u & 15);
        else b[8 + i - 16] |= (uint8_t)((u & 15) << 4);
        exp[i] = 2.0f * u - 40;
    }
    wlm_dequantize_row(GGML_Q5_1, b, got, 32);
    CHECK(same_rows(got, exp, 32, "q5_1"));

    /* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
     * weight i = 128h + 32k + l: bits 2k of qs[32h + l]; sub-block i/16 */
    memset(b, 0, sizeof b);
    put_h(b + 80, 0.5f);
    put_h(b + 82, 0.125f);
    for (int j = 0; j < 16; j++) b[j] = (uint8_t)(((j * 5 + 1) % 16) | ((15 - j) << 4));
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int i = 128 * h + 32 * k + l, q = (i * 3 + h) % 4, j = i / 16;
                b[16 + 32 * h + l] |= (uint8_t)(q << (2 * k));
                exp[i] = 0.5f * ((j * 5 + 1) % 16) * q - 0.125f * (15 - j);
            }
    wlm_dequantize_row(GGML_Q2_K, b, got, 256);
    CHECK(same_rows(got, exp, 256, "q2_k"));

    /* Q3_K: hmask[32], qs[64], scales[12], d. 6-bit scale s_j: low 4 bits in
     * byte j (j < 8) or the high nibble of byte j-8; top 2 bits in bits
     * 2*(j/4) of byte 8 + j%4. value = d * (s_j - 32) * q, q = low2 - 4 unless
     * the hmask bit (byte l, bit 4h + k) is set. */
    memset(b, 0, sizeof b);
    put_h(b + 108, 0.25f);
    for (int j = 0; j < 16; j++) {
        int s = (j * 13 + 7) % 64;
        if (j < 8) b[96 + j] |= (uint8_t)(s & 15);
        else b[96 + j - 8] |= (uint8_t)((s & 15) << 4);
        b[96 + 8 + j % 4] |= (uint8_t)((s >> 4) << (2 * (j / 4)));
    }
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int i = 128 * h + 32 * k + l, q = (i * 5 + 1) % 8 - 4, j = i / 16, s = (j * 13 + 7) % 64;
                int u = q + 4;
                b[32 + 32 * h + l] |= (uint8_t)((u & 3) << (2 * k));
                if (u >= 4) b[l] |= (uint8_t)(1 << (4 * h + k));
                exp[i] = 0.25f * (s - 32) * q;
            }
    wlm_dequantize_row(GGML_Q3_K, b, got, 256);
    CHECK(same_rows(got, exp, 256, "q3_k"));

    /* Q4_K / Q5_K: d, dmin, scales[12], (qh[32]), qs[128]. Scale/min of
     * sub-block j < 4: low 6 bits of bytes j / j+4; j >= 4: low nibble / high
     * nibble of byte j+4, top 2 bits in the top bits of bytes j-4 / j. */
    for (int five = 0; five < 2; five++) {
        memset(b, 0, sizeof b);
        put_h(b, 0.5f);
        put_h(b + 2, 0.25f);
        uint8_t *sc = b + 4, *qh = b + 16, *qs = five ? b + 48 : b + 16;
        int S[8] = { 1, 17, 63, 32, 5, 48, 63, 20 }, M[8] = { 0, 63, 7, 33, 50, 16, 1, 62 };
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                sc[j] |= (uint8_t)S[j];
                sc[j + 4] |= (uint8_t)M[j];
            } else {
                sc[j + 4] = (uint8_t)((S[j] & 15) | (M[j] & 15) << 4);
                sc[j - 4] |= (uint8_t)((S[j] >> 4) << 6);
                sc[j] |= (uint8_t)((M[j] >> 4) << 6);
            }
        }
        for (int i = 0; i < 256; i++) {
            int c = i / 64, u = (i % 64) / 32, l = i % 32, q = five ? (i * 7 + 3) % 32 : (i * 7 + 3) % 16;
            qs[32 * c + l] |= (uint8_t)((q & 15) << (4 * u));
            if (five && (q & 16)) qh[l] |= (uint8_t)(1 << (2 * c + u));
            exp[i] = 0.5f * S[i / 32] * q - 0.25f * M[i / 32];
        }
        wlm_dequantize_row(five ? GGML_Q5_K : GGML_Q4_K, b, got, 256);
        CHECK(same_rows(got, exp, 256, five ? "q5_k" : "q4_k"));
    }

    /* Q6_K: ql[128], qh[64], scales[16] (int8), d. weight 128h + 32k + l:
     * low 4 bits from ql[64h + l] (k=0), ql[64h+32+l] (k=1), their high
     * nibbles (k=2, 3); 2 high bits at bit 2k of qh[32h + l]; value d*sc*(q-32) */
    memset(b, 0, sizeof b);
    put_h(b + 208, 0.125f);
    for (int j = 0; j < 16; j++) b[192 + j] = (uint8_t)(int8_t)(j * 17 - 128);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int i = 128 * h + 32 * k + l, q = (i * 29 + 11) % 64;
                b[64 * h + (k & 1) * 32 + l] |= (uint8_t)((q & 15) << (k >= 2 ? 4 : 0));
                b[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
                exp[i] = 0.125f * (float)(int8_t)(int)((i / 16) * 17 - 128) * (q - 32);
            }
    wlm_dequantize_row(GGML_Q6_K, b, got, 256);
    CHECK(same_rows(got, exp, 256, "q6_k"));

    /* the dequantizers agree with the independent decoder on random blocks */
    for (int ti = 0; ti < N_KTYPES; ti++) {
        uint32_t t = KTYPES[ti];
        int bad = 0;
        for (int rep = 0; rep < 50; rep++) {
            rand_wblock(t, b, 0);
            tblock B;
            tdecode(t, b, &B);
            wlm_dequantize_row(t, b, got, (uint32_t)B.nb);
            for (int i = 0; i < B.nb; i++) {
                int j = i / B.sub;
                float want = B.kind == SYM ? (B.d * (float)B.sc[j]) * (float)B.q[i]
                    : B.kind == MINUS      ? (B.d * (float)B.sc[j]) * (float)B.q[i] - B.dmin * (float)B.mn[j]
                                           : B.d * (float)B.q[i] + B.dmin;
                if (!same_float(got[i], want)) bad++;
            }
        }
        CHECKF(bad == 0, "%s: %d values differ from the independent decoder", wlm_type_name(t), bad);
    }
}

/* ---- quantization ---------------------------------------------------------------- */

/* a weight-like random row: gaussian-ish with occasional outliers */
static void rand_row(float *x, uint32_t n, float scale) {
    for (uint32_t i = 0; i < n; i++) {
        float g = (tst_randf() + tst_randf() + tst_randf() + tst_randf()) * 0.866f;
        if (tst_rand() % 64 == 0) g *= 4;
        x[i] = g * scale;
    }
}

TEST(kquants_roundtrip_error) {
    enum { N = 4096 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    uint8_t *q = malloc(N * 2);
    /* relative RMS error bounds (measured values are printed) */
    static const struct {
        uint32_t t;
        double bound;
    } B[] = {
        { GGML_Q4_1, 0.10 },
        { GGML_Q5_0, 0.065 },
        { GGML_Q5_1, 0.05 },
        { GGML_Q2_K, 0.40 },
        { GGML_Q3_K, 0.20 },
        { GGML_Q4_K, 0.10 },
        { GGML_Q5_K, 0.05 },
        { GGML_Q6_K, 0.025 },
    };
    double rel[8];
    for (int bi = 0; bi < 8; bi++) {
        uint32_t t = B[bi].t;
        double se = 0, ss = 0;
        for (int rep = 0; rep < 4; rep++) {
            rand_row(x, N, rep == 3 ? 1e-3f : 0.02f);
            CHECK(wlm_quantize_row(t, x, q, N) == 1);
            wlm_dequantize_row(t, q, y, N);
            for (int i = 0; i < N; i++) {
                double e = (double)y[i] - x[i];
                se += e * e;
                ss += (double)x[i] * x[i];
            }
        }
        rel[bi] = sqrt(se / ss);
        CHECKF(rel[bi] < B[bi].bound, "%s: relative RMS error %.4f above %.4f", wlm_type_name(t), rel[bi], B[bi].bound);
        /* degenerate rows: zeros stay zero, constant rows stay close, no NaN */
        for (int i = 0; i < 512; i++) x[i] = 0;
        wlm_quantize_row(t, x, q, 512);
        wlm_dequantize_row(t, q, y, 512);
        int bad = 0;
        for (int i = 0; i < 512; i++)
            if (y[i] != 0) bad++;
        CHECKF(bad == 0, "%s: zero row not reproduced", wlm_type_name(t));
        for (int i = 0; i < 512; i++) x[i] = i % 2 ? -0.5f : 0.5f;
        x[7] = 1000.0f;
        x[300] = -3e4f;
        wlm_quantize_row(t, x, q, 512);
        wlm_dequantize_row(t, q, y, 512);
        bad = 0;
        for (int i = 0; i < 512; i++)
            if (!(fabsf(y[i]) < 4e4f)) bad++;
        CHECKF(bad == 0, "%s: outlier row produced non-finite or huge values", wlm_type_name(t));
    }
    printf("  relative RMS error:");
    for (int bi = 0; bi < 8; bi++) printf(" %s %.4f", wlm_type_name(B[bi].t), rel[bi]);
    printf("\n");
    /* more bits, less error */
    CHECK(rel[7] < rel[6] && rel[6] < rel[5] && rel[5] < rel[4] && rel[4] < rel[3]); /* Q6_K < Q5_K < Q4_K < Q3_K < Q2_K */
    CHECK(rel[2] < rel[0] && rel[1] < rel[0]);                                       /* Q5_x < Q4_1 */
    free(x);
    free(y);
    free(q);
}

TEST(kquants_q8_k_activations) {
    float x[512];
    block_q8_k y[2];
    rand_row(x, 512, 3.0f);
    x[5] = -100.0f;
    wlm_quantize_act(GGML_Q8_K, x, y, 512);
    for (int b = 0; b < 2; b++) {
        float amax = 0;
        for (int i = 0; i < 256; i++)
            if (fabsf(x[256 * b + i]) > amax) amax = fabsf(x[256 * b + i]);
        CHECK(y[b].d == amax / 127.0f);
        int bad = 0;
        for (int i = 0; i < 256; i++)
            if (fabs((double)y[b].d * y[b].qs[i] - x[256 * b + i]) > 0.5001 * y[b].d) bad++;
        CHECKF(bad == 0, "block %d: %d values off by more than half a step", b, bad);
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += y[b].qs[16 * j + i];
            CHECK(y[b].bsums[j] == s);
        }
    }
    CHECK(y[0].qs[5] == -127);
    CHECK(wlm_act_type(GGML_Q4_K) == GGML_Q8_K && wlm_act_type(GGML_Q6_K) == GGML_Q8_K && wlm_act_type(GGML_Q5_1) == GGML_Q8_0);
    CHECK(wlm_act_row_bytes(GGML_Q8_K, 512) == 584);
}

TEST(kquants_dot_vs_double) {
    enum { N = 2048 };
    float *w = malloc(N * 4), *xf = malloc(N * 4);
    uint8_t *wq = malloc(N * 2), *xq = malloc(N * 2);
    for (int ti = 0; ti < N_KTYPES; ti++) {
        uint32_t t = KTYPES[ti];
        double worst = 0;
        for (int rep = 0; rep < 6; rep++) {
            rand_row(w, N, 0.02f);
            rand_row(xf, N, 1.5f);
            wlm_quantize_row(t, w, wq, N);
            wlm_quantize_act(wlm_act_type(t), xf, xq, N);
            double exact, mag;
            float ref = ref_dot(t)(N, wq, xq);
            indep_dot(t, N, wq, xq, &exact, &mag);
            double err = fabs(ref - exact), bound = (N / wlm_type(t)->block + 4) * 0x1p-22 * mag + 1e-30;
            CHECKF(err <= bound, "%s rep %d: dot %.9g, double %.12g, |err| %.3g > %.3g", wlm_type_name(t), rep, ref, exact, err, bound);
            if (mag > 0 && err / mag > worst) worst = err / mag;
            /* the whole path vs the float dot of the dequantized rows */
            float *wd = malloc(N * 4), *xd = malloc(N * 4);
            wlm_dequantize_row(t, wq, wd, N);
            wlm_dequantize_row(wlm_act_type(t), xq, xd, N);
            if (wlm_act_type(t) == GGML_Q8_0)
                for (int b = 0; b < N / 32; b++)
                    for (int i = 0; i < 32; i++)
                        xd[32 * b + i] = wlm_f16_to_f32(((block_q8_0 *)xq)[b].d) * ((block_q8_0 *)xq)[b].qs[i];
            double dd = 0;
            for (int i = 0; i < N; i++) dd += (double)wd[i] * xd[i];
            CHECKF(fabs(ref - dd) <= 1e-5 * mag + 1e-30, "%s: dot %.9g vs dequantized %.9g", wlm_type_name(t), ref, dd);
            /* and the quantized dot stays near the float dot of the originals */
            double of = 0, om = 0;
            for (int i = 0; i < N; i++) {
                of += (double)w[i] * xf[i];
                om += fabs((double)w[i] * xf[i]);
            }
            CHECKF(fabs(ref - of) <= 0.25 * om, "%s: dot %.6g far from float dot %.6g (sum |wx| %.6g)", wlm_type_name(t), ref, of, om);
            free(wd);
            free(xd);
        }
        printf("  %s: worst |dot - double| / sum|terms| = %.3g\n", wlm_type_name(t), worst);
    }
    free(w);
    free(xf);
    free(wq);
    free(xq);
}

/* ---- whole models ----------------------------------------------------------------- */

static int argmax(const float *v, uint32_t n) {
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = (int)i;
    return b;
}

/* stories260K (rows of 64 and 172) re-quantized in memory to each 32-block
 * type and to Q4_K_M (whose K types fall back to 32-block types: no row is a
 * multiple of 256): loads, evaluates, and mostly agrees with the original */
TEST(kquants_stories260k_requantized) {
    unsigned long long size;
    unsigned char *file = tst_read_file(tst_path("models/stories260K.gguf"), &size);
    if (!file) {
        printf("  skipped: no stories260K.gguf\n");
        return;
    }
    unsigned char *data = tst_sys_copy(file, size);
    free(file);
    wlm_model *m;
    wlm_err err;
    REQUIRE(wlm_model_load(&m, data, size, &err) == WLM_OK);
    enum { T = 24 };
    int32_t seq[T];
    seq[0] = 1;
    /* the original's greedy sequence */
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    cp.n_ctx = 64;
    wlm_ctx *c;
    REQUIRE(wlm_ctx_new(&c, m, &cp, &err) == WLM_OK);
    uint32_t nv = wlm_model_hparams(m)->n_vocab;
    for (int i = 0; i + 1 < T; i++) {
        REQUIRE(wlm_eval(c, &seq[i], 1, &err) == WLM_OK);
        seq[i + 1] = argmax(wlm_ctx_logits(c), nv);
    }
    wlm_ctx_free(c);
    static const uint32_t TYPES[] = { GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, WLM_QUANT_Q4_K_M, WLM_QUANT_Q5_K_M };
    for (unsigned ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        uint64_t qsize;
        REQUIRE(wlm_quantize_size(m, TYPES[ti], &qsize, &err) == WLM_OK);
        uint8_t *q = wlm_sys_alloc(qsize);
        REQUIRE(q);
        CHECKF(wlm_quantize(m, TYPES[ti], q, qsize, 0, 0, &err) == WLM_OK, "type %u: %s", TYPES[ti], err.msg);
        wlm_model *mq;
        if (wlm_model_load(&mq, q, qsize, &err) != WLM_OK) {
            CHECKF(0, "type %u does not load: %s", TYPES[ti], err.msg);
            wlm_sys_free(q);
            continue;
        }
        REQUIRE(wlm_ctx_new(&c, mq, &cp, &err) == WLM_OK);
        int agree = 0;
        for (int i = 0; i + 1 < T; i++) {
            REQUIRE(wlm_eval(c, &seq[i], 1, &err) == WLM_OK);
            agree += argmax(wlm_ctx_logits(c), nv) == seq[i + 1];
        }
        printf("  type %u: greedy top-1 agreement %d/%d\n", TYPES[ti], agree, T - 1);
        CHECKF(agree >= (T - 1) * 2 / 3, "type %u: only %d/%d top-1 agreement", TYPES[ti], agree, T - 1);
        wlm_ctx_free(c);
        wlm_model_free(mq);
        wlm_sys_free(q);
    }
    wlm_model_free(m);
    wlm_sys_free(data);
}
