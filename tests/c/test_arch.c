/* Architecture tests: tiny synthetic models of each supported layout
 * (llama; Llama 3 style with rope_freqs.weight, computed llama3 RoPE
 * scaling and attention.key_length/value_length that differ from
 * n_embd/n_head; qwen2 with Q/K/V biases and NEOX RoPE), each checked
 * against an independent forward pass in double written from the math; and
 * the refusal of architectures and tensors the engine does not run. */
#include <stdint.h>
#include "tst.h"
#include "gguf_build.h"
#include "../../src/internal.h"

/* ---- building the variants ------------------------------------------------------ */

typedef struct arch_spec {
    const char *arch;          /* "llama" or "qwen2" */
    uint32_t key_len, val_len; /* 0 = n_embd / n_head */
    uint32_t n_rot;            /* 0 = key head size */
    float freq_base;
    int rope_tensor;    /* write rope_freqs.weight (divisors 1, 1.5, 2, ...) */
    int llama3_scaling; /* rope.scaling.type llama3 metadata (factor 8, low 1, high 4, orig 512) */
    int biases;         /* attn_q/k/v.bias (and attn_output.bias when 2) */
    int tied;
} arch_spec;

enum { D = 32,
       NL = 2,
       NH = 4,
       NKV = 2,
       NFF = 48 };

static void replace_f32(gb_file *f, const char *name, uint64_t ne0, uint64_t ne1, uint32_t *seed) {
    gb_tensor_remove(f, name);
    gb_f32_tensor(f, name, ne0, ne1, seed, 0, 1);
}

/* Renames every "llama." key to "<arch>." */
static void rename_arch_keys(gb_file *f, const char *arch) {
    for (int i = 0; i < f->n_kv; i++) {
        if (strncmp(f->kv[i].key, "llama.", 6) == 0) {
            char k[160];
            snprintf(k, sizeof k, "%s.%s", arch, f->kv[i].key + 6);
            snprintf(f->kv[i].key, sizeof f->kv[i].key, "%s", k);
        }
    }
    gb_set_str(f, "general.architecture", arch);
}

static unsigned char *build_variant(const arch_spec *a, size_t *size) {
    gb_file *f = malloc(sizeof *f);
    gb_llama p = { D, NL, NH, NKV, NFF, a->tied, 0, 77 };
    gb_tiny_llama(f, &p);
    uint32_t seed = 991;
    uint32_t hk = a->key_len ? a->key_len : D / NH, hv = a->val_len ? a->val_len : D / NH;
    uint32_t n_rot = a->n_rot ? a->n_rot : hk;
    char name[96];
    if (a->key_len || a->val_len) {
        gb_set_u32(f, "llama.attention.key_length", hk);
        gb_set_u32(f, "llama.attention.value_length", hv);
        for (uint32_t l = 0; l < NL; l++) {
            snprintf(name, sizeof name, "blk.%u.attn_q.weight", l);
            replace_f32(f, name, D, NH * hk, &seed);
            snprintf(name, sizeof name, "blk.%u.attn_k.weight", l);
            replace_f32(f, name, D, NKV * hk, &seed);
            snprintf(name, sizeof name, "blk.%u.attn_v.weight", l);
            replace_f32(f, name, D, NKV * hv, &seed);
            snprintf(name, sizeof name, "blk.%u.attn_output.weight", l);
            replace_f32(f, name, NH * hv, D, &seed);
        }
    }
    gb_set_u32(f, "llama.rope.dimension_count", n_rot);
    if (a->freq_base > 0) gb_set_f32(f, "llama.rope.freq_base", a->freq_base);
    if (a->rope_tensor) {
        float div[64];
        for (uint32_t i = 0; i < n_rot / 2; i++) div[i] = 1.0f + 0.5f * (float)i;
        uint64_t ne[1] = { n_rot / 2 };
        gb_tensor_add(f, "rope_freqs.weight", 0, 1, ne, div, n_rot / 2 * sizeof(float));
    }
    if (a->llama3_scaling) {
        gb_set_str(f, "llama.rope.scaling.type", "llama3");
        gb_set_f32(f, "llama.rope.scaling.factor", 8.0f);
        gb_set_f32(f, "llama.rope.scaling.low_freq_factor", 1.0f);
        gb_set_f32(f, "llama.rope.scaling.high_freq_factor", 4.0f);
        gb_set_u32(f, "llama.rope.scaling.original_context_length", 512);
    }
    if (a->biases) {
        for (uint32_t l = 0; l < NL; l++) {
            snprintf(name, sizeof name, "blk.%u.attn_q.bias", l);
            gb_f32_tensor(f, name, NH * hk, 0, &seed, 0, 1);
            snprintf(name, sizeof name, "blk.%u.attn_k.bias", l);
            gb_f32_tensor(f, name, NKV * hk, 0, &seed, 0, 1);
            snprintf(name, sizeof name, "blk.%u.attn_v.bias", l);
            gb_f32_tensor(f, name, NKV * hv, 0, &seed, 0, 1);
            if (a->biases == 2) {
                snprintf(name, sizeof name, "blk.%u.attn_output.bias", l);
                gb_f32_tensor(f, name, D, 0, &seed, 0, 1);
            }
        }
    }
    if (strcmp(a->arch, "llama")) rename_arch_keys(f, a->arch);
    unsigned char *bytes = gb_serialize(f, size);
    gb_free(f);
    free(f);
    return bytes;
}

static wlm_model *load_bytes(const unsigned char *bytes, size_t size, unsigned char **keep, wlm_err *err) {
    *keep = tst_sys_copy(bytes, size);
    wlm_model *m = NULL;
    if (wlm_model_load(&m, *keep, size, err) != WLM_OK) {
        wlm_sys_free(*keep);
        *keep = NULL;
        return NULL;
    }
    return m;
}

/* ---- an independent forward pass in double ---------------------------------------- */

static const float *tdata(const wlm_model *m, const char *name) {
    const wlm_tensor *t = wlm_gguf_tensor(&m->g, name);
    if (!t || t->type != GGML_F32) return NULL;
    return (const float *)t->data;
}

/* y[r] = sum_i W[r][i] x[i] (+ b[r]); W stored row-major, rows of n_in */
static void mv(const float *W, const float *b, uint32_t n_out, uint32_t n_in, const double *x, double *y) {
    for (uint32_t r = 0; r < n_out; r++) {
        double s = 0;
        for (uint32_t i = 0; i < n_in; i++) s += (double)W[(size_t)r * n_in + i] * x[i];
        y[r] = s + (b ? b[r] : 0.0);
    }
}

static void rms(const double *x, const float *w, uint32_t n, double eps, double *out) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * sc * w[i];
}

/* Llama 3.1 frequency scaling, from its definition: wavelengths shorter than
 * orig/high keep their frequency, longer than orig/low are divided by the
 * factor, in between the frequency is blended linearly in orig/wavelength. */
static double llama3_scaled(double theta, double factor, double lo, double hi, double orig) {
    double wl = 2 * 3.14159265358979323846 / theta;
    if (wl < orig / hi) return theta;
    if (wl > orig / lo) return theta / factor;
    double sm = (orig / wl - lo) / (hi - lo);
    return (1 - sm) * theta / factor + sm * theta;
}

typedef struct ref_cfg {
    int neox, llama3;
    uint32_t hk, hv, n_rot;
    double base;
    const float *rope_div;
} ref_cfg;

static void rope_head(double *v, const ref_cfg *c, int pos) {
    uint32_t half = c->n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        double th = pow(c->base, -2.0 * i / c->n_rot);
        if (c->rope_div) th /= c->rope_div[i];
        else if (c->llama3) th = llama3_scaled(th, 8, 1, 4, 512);
        double a = pos * th, co = cos(a), si = sin(a);
        uint32_t i0 = c->neox ? i : 2 * i, i1 = c->neox ? i + half : 2 * i + 1;
        double x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * co - x1 * si;
        v[i1] = x0 * si + x1 * co;
    }
}

/* logits of every position of tok[0..n), [n][n_vocab] */
static double *ref_forward(const wlm_model *m, const ref_cfg *c, const int32_t *tok, int n) {
    const wlm_hparams *hp = &m->hp;
    uint32_t d = hp->n_embd, nv = hp->n_vocab, nh = hp->n_head, nkv = hp->n_head_kv, ff = hp->n_ff;
    uint32_t hk = c->hk, hv = c->hv;
    double eps = hp->rms_eps;
    double *K = calloc((size_t)hp->n_layer * n * nkv * hk, sizeof(double));
    double *V = calloc((size_t)hp->n_layer * n * nkv * hv, sizeof(double));
    double *out = calloc((size_t)n * nv, sizeof(double));
    double *x = calloc(d, 8), *h = calloc(d, 8), *q = calloc(nh * hk, 8), *k = calloc(nkv * hk, 8), *v = calloc(nkv * hv, 8);
    double *att = calloc(nh * hv, 8), *o = calloc(d, 8), *g = calloc(ff, 8), *u = calloc(ff, 8), *sc = calloc(n, 8);
    const float *emb = tdata(m, "token_embd.weight");
    const float *W_out = tdata(m, "output.weight");
    if (!W_out) W_out = emb;
    char nm[96];
#define W(s) (snprintf(nm, sizeof nm, "blk.%u." s, l), tdata(m, nm))
    for (int p = 0; p < n; p++) {
        for (uint32_t i = 0; i < d; i++) x[i] = emb[(size_t)tok[p] * d + i];
        for (uint32_t l = 0; l < hp->n_layer; l++) {
            rms(x, W("attn_norm.weight"), d, eps, h);
            mv(W("attn_q.weight"), W("attn_q.bias"), nh * hk, d, h, q);
            mv(W("attn_k.weight"), W("attn_k.bias"), nkv * hk, d, h, k);
            mv(W("attn_v.weight"), W("attn_v.bias"), nkv * hv, d, h, v);
            for (uint32_t hh = 0; hh < nh; hh++) rope_head(q + hh * hk, c, p);
            for (uint32_t hh = 0; hh < nkv; hh++) rope_head(k + hh * hk, c, p);
            double *Kl = K + (size_t)l * n * nkv * hk, *Vl = V + (size_t)l * n * nkv * hv;
            memcpy(Kl + (size_t)p * nkv * hk, k, nkv * hk * 8);
            memcpy(Vl + (size_t)p * nkv * hv, v, nkv * hv * 8);
            for (uint32_t hq = 0; hq < nh; hq++) {
                uint32_t kh = hq / (nh / nkv);
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= p; j++) {
                    double s = 0;
                    for (uint32_t i = 0; i < hk; i++) s += q[hq * hk + i] * Kl[((size_t)j * nkv + kh) * hk + i];
                    sc[j] = s / sqrt((double)hk);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= p; j++) {
                    sc[j] = exp(sc[j] - mx);
                    sum += sc[j];
                }
                for (uint32_t i = 0; i < hv; i++) {
                    double a = 0;
                    for (int j = 0; j <= p; j++) a += sc[j] * Vl[((size_t)j * nkv + kh) * hv + i];
                    att[hq * hv + i] = a / sum;
                }
            }
            mv(W("attn_output.weight"), W("attn_output.bias"), d, nh * hv, att, o);
            for (uint32_t i = 0; i < d; i++) x[i] += o[i];
            rms(x, W("ffn_norm.weight"), d, eps, h);
            mv(W("ffn_gate.weight"), NULL, ff, d, h, g);
            mv(W("ffn_up.weight"), NULL, ff, d, h, u);
            for (uint32_t i = 0; i < ff; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            mv(W("ffn_down.weight"), NULL, d, ff, g, o);
            for (uint32_t i = 0; i < d; i++) x[i] += o[i];
        }
        rms(x, tdata(m, "output_norm.weight"), d, eps, h);
        mv(W_out, NULL, nv, d, h, out + (size_t)p * nv);
    }
#undef W
    free(K);
    free(V);
    free(x);
    free(h);
    free(q);
    free(k);
    free(v);
    free(att);
    free(o);
    free(g);
    free(u);
    free(sc);
    return out;
}

/* Engine logits of every position, token by token (decode path) and as one
 * batch with logits_all (prefill path), against the reference. */
static double check_variant(const arch_spec *a, int kv_f16) {
    size_t size = 0;
    unsigned char *bytes = build_variant(a, &size), *keep = NULL;
    wlm_err err = { 0 };
    wlm_model *m = load_bytes(bytes, size, &keep, &err);
    free(bytes);
    if (!m) {
        fprintf(stderr, "  %s: load failed: %s\n", a->arch, err.msg);
        return INFINITY;
    }
    const wlm_hparams *hp = &m->hp;
    uint32_t hp_k = hp->head_dim, hp_v = hp->head_dim_v, hp_r = hp->n_rot;
    ref_cfg c = { hp->rope_type == WLM_ROPE_NEOX, a->llama3_scaling, hp->head_dim, hp->head_dim_v, hp->n_rot,
                  hp->rope_freq_base, a->rope_tensor ? tdata(m, "rope_freqs.weight") : NULL };
    const int32_t tok[] = { 1, 5, 8, 11, 3, 9, 15, 2, 7, 12, 4, 6 };
    const int n = (int)(sizeof tok / sizeof tok[0]);
    double *ref = ref_forward(m, &c, tok, n);
    double worst = 0;
    for (int mode = 0; mode < 2; mode++) {
        wlm_ctx_params p;
        wlm_ctx_default_params(&p);
        p.n_ctx = 32;
        p.n_batch = mode ? 5 : 1;
        p.logits_all = (uint32_t)mode;
        p.kv_type = kv_f16 ? WLM_KV_F16 : WLM_KV_F32;
        wlm_ctx *ctx = NULL;
        if (wlm_ctx_new(&ctx, m, &p, &err) != WLM_OK) {
            fprintf(stderr, "  ctx: %s\n", err.msg);
            worst = INFINITY;
            break;
        }
        if (mode == 0) {
            for (int t = 0; t < n; t++) {
                if (wlm_eval(ctx, &tok[t], 1, &err) != WLM_OK) {
                    worst = INFINITY;
                    break;
                }
                const float *lg = wlm_ctx_logits(ctx);
                for (uint32_t i = 0; i < hp->n_vocab; i++) {
                    double e = fabs(lg[i] - ref[(size_t)t * hp->n_vocab + i]);
                    if (e > worst || e != e) worst = e != e ? INFINITY : e;
                }
            }
        } else {
            /* chunks of 5: the last chunk holds tokens 10 and 11 */
            if (wlm_eval(ctx, tok, (uint32_t)n, &err) != WLM_OK) worst = INFINITY;
            uint32_t rows = wlm_ctx_n_logits(ctx);
            const float *lg = wlm_ctx_logits(ctx);
            for (uint32_t r = 0; r < rows; r++) {
                int t = n - (int)rows + (int)r;
                for (uint32_t i = 0; i < hp->n_vocab; i++) {
                    double e = fabs(lg[(size_t)r * hp->n_vocab + i] - ref[(size_t)t * hp->n_vocab + i]);
                    if (e > worst || e != e) worst = e != e ? INFINITY : e;
                }
            }
        }
        wlm_ctx_free(ctx);
    }
    free(ref);
    wlm_model_free(m);
    wlm_sys_free(keep);
    if (getenv("WLM_TEST_VERBOSE")) fprintf(stderr, "  %s k%u v%u rot%u: max |diff| %.3g\n", a->arch, hp_k, hp_v, hp_r, worst);
    return worst;
}

/* ---- tests ------------------------------------------------------------------------ */

TEST(arch_llama_vs_double_reference) {
    arch_spec a = { "llama", 0, 0, 0, 0, 0, 0, 0, 0 };
    double e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "max |logit diff| %g", e);
    a.tied = 1;
    e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "tied: max |logit diff| %g", e);
}

TEST(arch_llama3_rope_freqs_and_head_sizes) {
    /* key heads of 12, value heads of 8 (n_embd / n_head = 8), rope on 12 dims, rope_freqs divisors */
    arch_spec a = { "llama", 12, 8, 0, 500000.0f, 1, 0, 0, 0 };
    double e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "max |logit diff| %g", e);
    /* partial rotation: 8 of 12 dims */
    a.n_rot = 8;
    e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "n_rot 8: max |logit diff| %g", e);
    /* f16 KV cache: looser */
    a.n_rot = 0;
    e = check_variant(&a, 1);
    CHECKF(e < 2e-3, "f16 KV: max |logit diff| %g", e);
}

TEST(arch_llama3_computed_scaling) {
    arch_spec a = { "llama", 12, 12, 0, 500000.0f, 0, 1, 0, 0 };
    double e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "max |logit diff| %g", e);
    /* the divisors the engine computed: unchanged, blended, divided */
    size_t size = 0;
    unsigned char *bytes = build_variant(&a, &size), *keep = NULL;
    wlm_err err = { 0 };
    wlm_model *m = load_bytes(bytes, size, &keep, &err);
    free(bytes);
    REQUIRE(m != NULL);
    CHECK(m->hp.rope_scaled == 1);
    int n_one = 0, n_eight = 0, n_mid = 0;
    for (uint32_t i = 0; i < m->hp.n_rot / 2; i++) {
        double th = pow(500000.0, -2.0 * i / m->hp.n_rot);
        double dv = wlm_rope_freq_divisor(m, i, th);
        double want = th / llama3_scaled(th, 8, 1, 4, 512);
        CHECKF(fabs(dv - want) < 1e-9, "divisor %u: %g vs %g", i, dv, want);
        if (dv == 1.0) n_one++;
        else if (dv == 8.0) n_eight++;
        else n_mid++;
    }
    CHECK(n_one >= 1 && n_eight >= 1 && n_mid >= 1);
    wlm_model_free(m);
    wlm_sys_free(keep);
}

TEST(arch_qwen2_biases_neox) {
    arch_spec a = { "qwen2", 0, 0, 0, 1000000.0f, 0, 0, 1, 0 };
    double e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "max |logit diff| %g", e);
    a.biases = 2; /* with attn_output.bias too */
    e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "with output bias: max |logit diff| %g", e);
    /* hparams report the convention */
    size_t size = 0;
    unsigned char *bytes = build_variant(&a, &size), *keep = NULL;
    wlm_err err = { 0 };
    wlm_model *m = load_bytes(bytes, size, &keep, &err);
    free(bytes);
    REQUIRE(m != NULL);
    CHECK(m->hp.rope_type == WLM_ROPE_NEOX);
    CHECK(m->layers[0].bq != NULL && m->layers[1].bv != NULL);
    wlm_model_free(m);
    wlm_sys_free(keep);
}

/* the same weights read as llama (pairs 2i, 2i+1) and as qwen2 (halves) give different logits */
TEST(arch_rope_convention_matters) {
    arch_spec a = { "llama", 0, 0, 0, 10000.0f, 0, 0, 1, 0 }, b = a;
    b.arch = "qwen2";
    size_t sa = 0, sb = 0;
    unsigned char *ba = build_variant(&a, &sa), *bb = build_variant(&b, &sb), *ka = NULL, *kb = NULL;
    wlm_err err = { 0 };
    wlm_model *ma = load_bytes(ba, sa, &ka, &err), *mb = load_bytes(bb, sb, &kb, &err);
    free(ba);
    free(bb);
    REQUIRE(ma && mb);
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = 16;
    wlm_ctx *ca = NULL, *cb = NULL;
    REQUIRE(wlm_ctx_new(&ca, ma, &p, &err) == WLM_OK && wlm_ctx_new(&cb, mb, &p, &err) == WLM_OK);
    const int32_t tok[] = { 1, 5, 8, 11, 3 };
    REQUIRE(wlm_eval(ca, tok, 5, &err) == WLM_OK && wlm_eval(cb, tok, 5, &err) == WLM_OK);
    double diff = 0;
    for (uint32_t i = 0; i < ma->hp.n_vocab; i++) diff = fmax(diff, fabs(wlm_ctx_logits(ca)[i] - wlm_ctx_logits(cb)[i]));
    CHECKF(diff > 1e-4, "llama vs qwen2 RoPE: logits differ by only %g", diff);
    wlm_ctx_free(ca);
    wlm_ctx_free(cb);
    wlm_model_free(ma);
    wlm_model_free(mb);
    wlm_sys_free(ka);
    wlm_sys_free(kb);
}

static void expect_refusal(gb_file *f, wlm_status code, const char *sub, const char *what) {
    size_t size = 0;
    unsigned char *bytes = gb_serialize(f, &size), *keep = tst_sys_copy(bytes, size);
    free(bytes);
    wlm_model *m = NULL;
    wlm_err err = { 0 };
    wlm_status s = wlm_model_load(&m, keep, size, &err);
    CHECKF(s == code, "%s: status %d, expected %d (%s)", what, s, code, err.msg);
    CHECKF(strstr(err.msg, sub) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, sub);
    wlm_model_free(m);
    wlm_sys_free(keep);
}

TEST(arch_refusals_name_the_problem) {
    gb_file *f = malloc(sizeof *f);
    gb_llama p = { D, 1, NH, NKV, NFF, 0, 0, 3 };
    /* an architecture we do not run: named, with its first unknown tensor */
    gb_tiny_llama(f, &p);
    rename_arch_keys(f, "falcon");
    uint64_t ne1[1] = { D };
    gb_tensor_add(f, "blk.0.attn_norm.bias", 0, 1, ne1, NULL, (size_t)D * 4);
    expect_refusal(f, WLM_ERR_UNSUPPORTED, "unsupported architecture 'falcon' (first unknown tensor: blk.0.attn_norm.bias", "falcon");
    gb_free(f);
    /* phi3 with a fused QKV matrix of the wrong height (Q + K + V rows = D + 2 * kv) */
    gb_tiny_llama(f, &p);
    rename_arch_keys(f, "phi3");
    gb_tensor_remove(f, "blk.0.attn_q.weight");
    gb_tensor_remove(f, "blk.0.attn_k.weight");
    gb_tensor_remove(f, "blk.0.attn_v.weight");
    uint64_t ne[2] = { D, 3 * D };
    gb_tensor_add(f, "blk.0.attn_qkv.weight", 0, 2, ne, NULL, (size_t)D * 3 * D * 4);
    expect_refusal(f, WLM_ERR_FORMAT, "tensor blk.0.attn_qkv.weight has shape [32, 96], expected [32, 64]", "phi3 qkv");
    gb_free(f);
    /* an unknown architecture whose tensors all look familiar */
    gb_tiny_llama(f, &p);
    rename_arch_keys(f, "mystery");
    expect_refusal(f, WLM_ERR_UNSUPPORTED, "unsupported architecture 'mystery' (supported: llama, qwen2, qwen3, smollm3, granite, gemma2, gemma3, phi3, bert, nomic-bert)", "mystery");
    gb_free(f);
    /* a llama file with mixture-of-experts tensors */
    gb_tiny_llama(f, &p);
    uint64_t ne2[2] = { D, 4 };
    gb_tensor_add(f, "blk.0.ffn_gate_inp.weight", 0, 2, ne2, NULL, (size_t)D * 4 * 4);
    expect_refusal(f, WLM_ERR_UNSUPPORTED, "unsupported tensor blk.0.ffn_gate_inp.weight", "moe");
    gb_free(f);
    /* a block past block_count */
    gb_tiny_llama(f, &p);
    uint64_t ne3[1] = { D };
    gb_tensor_add(f, "blk.1.attn_norm.weight", 0, 1, ne3, NULL, (size_t)D * 4);
    expect_refusal(f, WLM_ERR_UNSUPPORTED, "unsupported tensor blk.1.attn_norm.weight", "extra block");
    gb_free(f);
    /* rope_freqs of the wrong length; a non-positive divisor */
    gb_tiny_llama(f, &p);
    uint64_t ne4[1] = { 3 };
    float bad[4] = { 1, 1, 1, 0 };
    gb_tensor_add(f, "rope_freqs.weight", 0, 1, ne4, bad, 12);
    expect_refusal(f, WLM_ERR_FORMAT, "tensor rope_freqs.weight has shape [3, 1], expected [4", "rope_freqs shape");
    gb_tensor_remove(f, "rope_freqs.weight");
    ne4[0] = 4;
    gb_tensor_add(f, "rope_freqs.weight", 0, 1, ne4, bad, 16);
    expect_refusal(f, WLM_ERR_FORMAT, "rope_freqs.weight[3] must be a positive number", "rope_freqs value");
    gb_free(f);
    /* RoPE scaling we do not implement */
    gb_tiny_llama(f, &p);
    gb_set_str(f, "llama.rope.scaling.type", "yarn");
    expect_refusal(f, WLM_ERR_UNSUPPORTED, "unsupported rope.scaling.type 'yarn'", "yarn");
    gb_free(f);
    /* a bias of the wrong size, a bias that is not F32 */
    gb_tiny_llama(f, &p);
    gb_tensor_add(f, "blk.0.attn_k.bias", 0, 1, ne3, NULL, (size_t)D * 4);
    expect_refusal(f, WLM_ERR_FORMAT, "tensor blk.0.attn_k.bias has shape [32, 1], expected [16]", "bias shape");
    gb_free(f);
    gb_tiny_llama(f, &p);
    gb_tensor_add(f, "blk.0.attn_q.bias", 1, 1, ne3, NULL, (size_t)D * 2);
    expect_refusal(f, WLM_ERR_UNSUPPORTED, "unsupported tensor type F16 in blk.0.attn_q.bias", "bias type");
    gb_free(f);
    /* key_length given: shapes follow it */
    gb_tiny_llama(f, &p);
    gb_set_u32(f, "llama.attention.key_length", 16);
    expect_refusal(f, WLM_ERR_FORMAT, "tensor blk.0.attn_q.weight has shape [32, 32], expected [32, 64]", "key_length");
    gb_free(f);
    free(f);
}

TEST(arch_memory_plan_uses_head_sizes) {
    /* a model with value heads twice the key heads needs more V cache than K cache */
    arch_spec a = { "llama", 8, 16, 0, 0, 0, 0, 0, 0 };
    size_t size = 0;
    unsigned char *bytes = build_variant(&a, &size), *keep = NULL;
    wlm_err err = { 0 };
    wlm_model *m = load_bytes(bytes, size, &keep, &err);
    free(bytes);
    REQUIRE(m != NULL);
    CHECK(m->hp.head_dim == 8 && m->hp.head_dim_v == 16);
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = 64;
    uint64_t need = wlm_ctx_bytes_needed(m, &p);
    /* K: 2 layers x 2 kv heads x 64 x 8 x 4 bytes; V: x 16 */
    CHECK(need >= (uint64_t)NL * NKV * 64 * (8 + 16) * 4);
    wlm_ctx *c = NULL;
    REQUIRE(wlm_ctx_new(&c, m, &p, &err) == WLM_OK);
    CHECK(c->kv[0].head_stride == 64 * 8 && c->kv[0].head_stride_v == 64 * 16);
    wlm_ctx_free(c);
    wlm_model_free(m);
    wlm_sys_free(keep);
    double e = check_variant(&a, 0);
    CHECKF(e < 1e-4, "max |logit diff| %g", e);
}

/* GQA groups through the attention items (forward.c attention_step, attention.c wlm_attention_block):
 * 8 query heads a KV head, and 66 on one KV head (wider than one pass of
 * WLM_ATT_MAXQ queries). A prompt as one batch, whose queries of up to
 * WLM_ATT_QB tokens share a pass over the cache, gives the logits decoding
 * it token by token gives, bit for bit: F32 and F16 caches, 1 and 2 threads. */
TEST(arch_gqa_groups_batch_equals_decode) {
    static const uint32_t shapes[][3] = { { 64, 16, 2 }, { 132, 66, 1 } }; /* n_embd, n_head, n_head_kv */
    enum { T = 21 };
    for (int si = 0; si < 2; si++) {
        gb_file *f = malloc(sizeof *f);
        gb_llama p = { shapes[si][0], 2, shapes[si][1], shapes[si][2], 48, 0, 0, 5 };
        gb_tiny_llama(f, &p);
        size_t size = 0;
        unsigned char *bytes = gb_serialize(f, &size), *keep = NULL;
        gb_free(f);
        free(f);
        wlm_err err = { 0 };
        wlm_model *m = load_bytes(bytes, size, &keep, &err);
        free(bytes);
        REQUIRE(m != NULL);
        uint32_t V = m->hp.n_vocab;
        int32_t tok[T];
        for (int i = 0; i < T; i++) tok[i] = (int32_t)((i * 7 + 3) % V);
        float *step = malloc(sizeof(float) * T * V);
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t th = 1; th <= 2; th++) {
                wlm_ctx_params cp;
                wlm_ctx_default_params(&cp);
                cp.n_ctx = 64;
                cp.kv_type = kv ? WLM_KV_F16 : WLM_KV_F32;
                cp.n_threads = th;
                wlm_ctx *a = NULL, *b = NULL;
                cp.n_batch = 1;
                REQUIRE(wlm_ctx_new(&a, m, &cp, &err) == WLM_OK);
                for (int i = 0; i < T; i++) {
                    REQUIRE(wlm_eval(a, &tok[i], 1, &err) == WLM_OK);
                    memcpy(step + (size_t)i * V, wlm_ctx_logits(a), sizeof(float) * V);
                }
                cp.n_batch = T;
                cp.logits_all = 1;
                REQUIRE(wlm_ctx_new(&b, m, &cp, &err) == WLM_OK);
                REQUIRE(wlm_eval(b, tok, T, &err) == WLM_OK);
                REQUIRE(wlm_ctx_n_logits(b) == T);
                int bad = 0;
                for (int i = 0; i < T; i++) bad += memcmp(wlm_ctx_logits(b) + (size_t)i * V, step + (size_t)i * V, sizeof(float) * V) != 0;
                CHECKF(bad == 0, "%u heads on %u KV heads, kv %s, %u threads: %d of %d positions differ",
                       shapes[si][1], shapes[si][2], kv ? "f16" : "f32", th, bad, T);
                wlm_ctx_free(a);
                wlm_ctx_free(b);
            }
        free(step);
        wlm_model_free(m);
        wlm_sys_free(keep);
    }
}
