/* libFuzzer target: the sampler. The input gives the sampler parameters
 * (any float bits: NaN, Inf, negative, denormal), a seed, a history of
 * arbitrary token ids, with byte 33 set the presence / frequency
 * penalties, typical_p and up to 15 logit biases, and the logits (any float
 * bits, repeated to fill the vocabulary). Whatever they are, wlm_sample must either refuse with
 * WLM_ERR_ARG and a message or return a token in range whose logit is
 * usable (not NaN, not -inf); greedy must return the argmax; the
 * distribution API must return ids in range and probabilities in [0, 1]. */
#include "fuzz_common.h"
#include <math.h>

#define N_MODELS 2
static wlm_model *g_m[N_MODELS];
static wlm_ctx *g_c[N_MODELS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_m[0] = fz_model("micro-spm.gguf");
    g_m[1] = fz_model("tiny-bpe.gguf");
    for (int i = 0; i < N_MODELS; i++) {
        wlm_ctx_params p; wlm_ctx_default_params(&p); p.n_ctx = 8;
        wlm_err err;
        if (wlm_ctx_new(&g_c[i], g_m[i], &p, &err) != WLM_OK) { fprintf(stderr, "fuzz: ctx: %s\n", err.msg); exit(2); }
    }
    return 0;
}

static float rdf(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static uint32_t rdu(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

#define HDR 34

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < HDR) return 0;
    int which = data[0] % N_MODELS;
    wlm_ctx *c = g_c[which];
    uint32_t nv = wlm_model_hparams(g_m[which])->n_vocab;
    wlm_sampler_params sp;
    memset(&sp, 0, sizeof sp);
    sp.temperature = rdf(data + 1);
    sp.top_k = rdu(data + 5);
    sp.top_p = rdf(data + 9);
    sp.min_p = rdf(data + 13);
    sp.repeat_penalty = rdf(data + 17);
    sp.repeat_last_n = rdu(data + 21);
    uint64_t seed = rdu(data + 25);
    uint32_t n_hist = data[29] % 64;
    /* byte 30: 0-63 raw params; otherwise sane ones with some raw fields */
    if (data[30] >= 64) {
        if (!(sp.temperature >= 0 && sp.temperature < 100)) sp.temperature = (data[30] & 1) ? 0.0f : 0.8f;
        if (!(sp.top_p > 0 && sp.top_p <= 1)) sp.top_p = 0.95f;
        if (!(sp.min_p >= 0 && sp.min_p <= 1)) sp.min_p = 0.05f;
        if (!(sp.repeat_penalty > 0 && sp.repeat_penalty < 1e30f)) sp.repeat_penalty = 1.1f;
        sp.top_k %= nv + 8;
    }
    const uint8_t *p = data + HDR; size_t n = size - HDR;
    /* byte 33: penalties, typical_p (12 bytes) and (byte 33 >> 4) biases of 8 bytes */
    wlm_logit_bias bias[15];
    if (data[33] && n >= 12) {
        sp.presence_penalty = rdf(p); sp.frequency_penalty = rdf(p + 4); sp.typical_p = rdf(p + 8);
        p += 12; n -= 12;
        if (data[30] >= 64) {   /* sane ones */
            if (!(fabsf(sp.presence_penalty) <= 2)) sp.presence_penalty = 0.5f;
            if (!(fabsf(sp.frequency_penalty) <= 2)) sp.frequency_penalty = 0.25f;
            if (!(sp.typical_p >= 0 && sp.typical_p <= 1)) sp.typical_p = 0.9f;
        }
        uint32_t nb = data[33] >> 4;
        while (sp.n_biases < nb && n >= 8) {
            int32_t t; memcpy(&t, p, 4);
            bias[sp.n_biases].token = (data[31] & 2) ? t : (int32_t)((uint32_t)t % nv);
            bias[sp.n_biases].bias = rdf(p + 4);
            if (data[30] >= 64 && !(bias[sp.n_biases].bias == -INFINITY || fabsf(bias[sp.n_biases].bias) < 1e30f))
                bias[sp.n_biases].bias = -INFINITY;
            sp.n_biases++; p += 8; n -= 8;
        }
        sp.biases = bias;
    }
    int32_t hist[64];
    uint32_t nh = 0;
    while (nh < n_hist && n >= 4) { int32_t t; memcpy(&t, p, 4); hist[nh++] = (data[31] & 1) ? t : (int32_t)((uint32_t)t % (nv + 4)) - 2; p += 4; n -= 4; }
    float *logits = malloc(sizeof(float) * nv);
    size_t nf = n / 4;
    for (uint32_t i = 0; i < nv; i++) {
        if (nf) logits[i] = rdf(p + 4 * (i % nf));
        else logits[i] = (float)(i % 7);
        if (data[32] & 1) logits[i] += (float)(i % 13) * 0.25f; /* spread repeated patterns */
    }
    int any_usable = 0, banned_all = 0;
    for (uint32_t i = 0; i < nv; i++) if (!isnan(logits[i]) && logits[i] != -INFINITY) any_usable = 1;
    int sane_bias = 1;
    for (uint32_t i = 0; i < sp.n_biases; i++) {
        sane_bias &= bias[i].token >= 0 && (uint32_t)bias[i].token < nv && !isnan(bias[i].bias) && bias[i].bias != INFINITY;
        banned_all |= bias[i].bias < -1e30f;   /* a ban (or a bias that sinks a logit to -inf) may leave nothing */
    }
    wlm_rng r; wlm_rng_seed(&r, seed);
    int32_t tok = -7; float lp = 0; wlm_err err = { 0 };
    wlm_status s = wlm_sample(c, logits, &sp, hist, nh, &r, &tok, &lp, &err);
    if (s == WLM_OK) {
        FZ_ASSERT(tok >= 0 && (uint32_t)tok < nv, "token %d of %u", tok, nv);
        FZ_ASSERT(!isnan(logits[tok]) && logits[tok] != -INFINITY, "sampled token %d has logit %g", tok, (double)logits[tok]);
        for (uint32_t i = 0; i < sp.n_biases; i++)
            FZ_ASSERT(!(bias[i].token == tok && bias[i].bias == -INFINITY), "sampled token %d is banned", tok);
        FZ_ASSERT(!isnan(lp) && lp <= 0.0f, "logprob %g", (double)lp);
        if (sp.temperature == 0.0f && sp.repeat_penalty == 1.0f && sp.n_biases == 0 &&
            sp.presence_penalty == 0.0f && sp.frequency_penalty == 0.0f) {
            for (uint32_t i = 0; i < nv; i++) {
                float x = logits[i];
                if (isnan(x)) continue;
                FZ_ASSERT(!(x > logits[tok]) && !(x == logits[tok] && (int32_t)i < tok), "greedy picked %d (%g), %u has %g", tok, (double)logits[tok], i, (double)x);
            }
        }
    } else {
        FZ_ASSERT(s == WLM_ERR_ARG && err.msg[0], "status %d (%s)", (int)s, err.msg);
        FZ_ASSERT(!any_usable || banned_all || !sane_bias ||
                  !(sp.temperature >= 0 && sp.temperature < 1e30f && sp.top_p > 0 && sp.top_p <= 1 && sp.min_p >= 0 && sp.min_p <= 1 &&
                    sp.repeat_penalty > 0 && sp.repeat_penalty < 1e30f && fabsf(sp.presence_penalty) <= 1e6f &&
                    fabsf(sp.frequency_penalty) <= 1e6f && sp.typical_p >= 0 && sp.typical_p <= 1),
                  "valid input refused: %s", err.msg);
    }
    int32_t ids[16]; float probs[16];
    uint32_t k = wlm_sample_dist(c, logits, &sp, hist, nh, ids, probs, 16);
    FZ_ASSERT(k <= 16, "dist count %u", k);
    for (uint32_t i = 0; i < k; i++) {
        FZ_ASSERT(ids[i] >= 0 && (uint32_t)ids[i] < nv, "dist id %d", ids[i]);
        FZ_ASSERT(!isnan(logits[ids[i]]), "dist id %d has a NaN logit", ids[i]);
        FZ_ASSERT(!isnan(probs[i]) && !(probs[i] < 0.0f) && !(probs[i] > 1.0001f), "dist prob %g", (double)probs[i]);
    }
    free(logits);
    return 0;
}
