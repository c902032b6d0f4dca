/* Sampling: turns logits into the next token.
 *
 * The pipeline, in this order (wlm_sample, wlm_sample_dist and
 * wlm_spec_accept all run it, so a speculative target follows exactly the
 * distribution plain sampling draws from):
 *   0. grammar mask: with wlm_sampler_params.allow set (a grammar's mask,
 *      a bitset over the vocabulary), a token outside it is removed before
 *      anything else (as a -inf logit), so no later stage sees it, no bias
 *      brings it back, and the distribution is renormalized over the rest.
 *   1. logit bias: each (token, bias) pair is added to the token's logit;
 *      a bias of -inf removes the token (it is never drawn, even greedily).
 *   2. penalties, over the last repeat_last_n tokens of the history: a
 *      token that occurs c > 0 times there has its logit l first divided by
 *      repeat_penalty (multiplied when l < 0), then reduced by
 *      presence_penalty + c * frequency_penalty (OpenAI's presence and
 *      frequency penalties; both float operations, in this order).
 *   3. temperature: probabilities softmax(l / T) (T = 0: greedy, the argmax
 *      of the logits after 0-2, lowest id on ties; 3-7 are skipped).
 *   4. top-k: the k most likely (larger logit, then lower id, first).
 *   5. typical: locally typical sampling (Meister et al. 2022): with H the
 *      entropy of the kept distribution, tokens are ranked by
 *      |-log p - H| (ties: more likely first) and the shortest prefix of
 *      that ranking whose mass reaches typical_p is kept, renormalized.
 *   6. top-p: the shortest most-likely-first prefix whose mass reaches p.
 *   7. min-p: drop tokens below min_p times the best probability.
 *   8. draw: u from the PCG32 stream, the first token (most likely first)
 *      whose cumulative probability exceeds u.
 * Temperature before the filters follows Hugging Face transformers (top-k,
 * top-p and min-p do not depend on where T sits; typical does). One seed
 * gives the same tokens on every platform. NaN and -inf logits are
 * excluded; +inf always wins; finite logits keep their values (the argmax
 * is the true argmax). The logprobs reported beside a token
 * (wlm_sample's *logprob, wlm_top_logprobs) are the model's own
 * distribution, before any of these stages.
 *
 * Cost per token: when stages 1-2 have nothing to do and top-k keeps fewer
 * than 256 (the defaults) or the draw is greedy, stages 0 and 4 run
 * together on the logits (top_k_direct: no copy of the vocabulary, a SIMD
 * scan for the few tokens that beat the worst kept one, or a sparse mask
 * read by its bits), and the same tokens come out in the same order as
 * through the general stages. What remains per token is then mostly the
 * reported logprob's normalizer: a max and a sum of exponentials over the
 * whole vocabulary (model_lse). */
#include "ctx.h"
#include "wmath.h"
#if WLM_SIMD128
#include "simd128.h"
#endif

/* The defaults of llama.cpp's common sampling parameters (penalties off),
 * which web/options.js repeats (tests/js/options.test.mjs holds them equal). */
void wlm_sampler_default_params(wlm_sampler_params *p) {
    wlm_memset(p, 0, sizeof *p);
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->typical_p = 1.0f;
}

void wlm_rng_seed(wlm_rng *r, uint64_t seed) {
    r->state = 0;
    r->inc = (seed << 1) | 1u;
    wlm_rng_u32(r);
    r->state += 0x853c49e6748fea9bull ^ seed;
    wlm_rng_u32(r);
}

uint32_t wlm_rng_u32(wlm_rng *r) {
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ull + r->inc;
    uint32_t xs = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    return (xs >> rot) | (xs << ((32 - rot) & 31));
}

float wlm_rng_float(wlm_rng *r) { return (float)(wlm_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

#define FLT_BIG 3.40282347e38f
/* a logit the sampler can not use: NaN or -inf (+inf is usable: it wins) */
static int excluded(float x) { return x != x || x == -__builtin_inff(); }

/* candidate a ranks before b: larger value, then smaller id */
static int before(const float *v, const int32_t *id, uint32_t a, uint32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && id[a] < id[b]);
}

static void swap(float *v, int32_t *id, uint32_t a, uint32_t b) {
    float tv = v[a];
    v[a] = v[b];
    v[b] = tv;
    int32_t ti = id[a];
    id[a] = id[b];
    id[b] = ti;
}

/* heap whose root is the worst candidate kept so far */
static void sift_down(float *v, int32_t *id, uint32_t n, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && before(v, id, w, l)) w = l;
        if (r < n && before(v, id, w, r)) w = r;
        if (w == i) return;
        swap(v, id, i, w);
        i = w;
    }
}

/* A stable least-significant-digit radix sort of n (key, value) pairs by
 * ascending key: four passes of 8 bits, O(n). ka/va hold the input and,
 * after the four passes, the output; kb/vb are n entries of scratch. */
static void radix_sort(uint32_t *ka, uint32_t *va, uint32_t *kb, uint32_t *vb, uint32_t n) {
    uint32_t *src = ka, *dst = kb, *sv = va, *dv = vb;
    for (uint32_t shift = 0; shift < 32; shift += 8) {
        uint32_t cnt[256] = { 0 };
        for (uint32_t i = 0; i < n; i++) cnt[(src[i] >> shift) & 255]++;
        for (uint32_t j = 0, sum = 0; j < 256; j++) {
            uint32_t c = cnt[j];
            cnt[j] = sum;
            sum += c;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint32_t d = cnt[(src[i] >> shift) & 255]++;
            dst[d] = src[i];
            dv[d] = sv[i];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
        t = sv;
        sv = dv;
        dv = t;
    }
}

/* The n candidates sorted best first (larger value, then smaller id: the
 * ids come in ascending order and the sort is stable) by the radix sort:
 * O(n), where a heap sort of a whole vocabulary cost milliseconds a token in
 * wasm. Keys map floats to unsigned integers in descending order; -0 is
 * taken as +0, which compares equal to it. tmp: 12 n bytes. The same order
 * as the heap path, so the same tokens are sampled. */
static void sort_all(float *v, int32_t *id, uint32_t n, void *tmp) {
    uint32_t *ka = tmp, *kb = ka + n, *idb = kb + n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        __builtin_memcpy(&b, &v[i], 4);
        if (!(b << 1)) b = 0;
        ka[i] = ~((b >> 31) ? ~b : b ^ 0x80000000u);
    }
    radix_sort(ka, (uint32_t *)id, kb, idb, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = ~ka[i], b = (o >> 31) ? o ^ 0x80000000u : ~o;
        __builtin_memcpy(&v[i], &b, 4);
    }
}

/* Keeps the best k of the n candidates in v/id (ids ascending), sorted best
 * first; k = 0 means all. Many (k >= 256, with 12 n bytes of tmp): the
 * radix sort; few: a heap of the best k. */
uint32_t wlm_top_k_sorted(float *v, int32_t *id, uint32_t n, uint32_t k, void *tmp) {
    if (k == 0 || k > n) k = n;
    if (tmp && k >= 256) {
        sort_all(v, id, n, tmp);
        return k;
    }
    for (uint32_t i = k / 2; i-- > 0;) sift_down(v, id, k, i);
    for (uint32_t i = k; i < n; i++) {
        if (before(v, id, i, 0)) {
            v[0] = v[i];
            id[0] = id[i];
            sift_down(v, id, k, 0);
        }
    }
    /* heap sort: repeatedly move the worst to the end */
    for (uint32_t end = k; end > 1; end--) {
        swap(v, id, 0, end - 1);
        sift_down(v, id, end - 1, 0);
    }
    return k;
}

#define PENALTY_MAX 1e6f /* |presence|, |frequency|: c * f stays finite, so no inf - inf */

static wlm_status check_params(const wlm_sampler_params *sp, uint32_t n_vocab, wlm_err *err) {
    if (!(sp->temperature >= 0) || !wlm_isfinite(sp->temperature))
        return wlm_fail(err, WLM_ERR_ARG, "temperature must be a finite number >= 0");
    if (!(sp->top_p >= 0 && sp->top_p <= 1)) return wlm_fail(err, WLM_ERR_ARG, "top_p must be in [0, 1]");
    if (!(sp->min_p >= 0 && sp->min_p <= 1)) return wlm_fail(err, WLM_ERR_ARG, "min_p must be in [0, 1]");
    if (!(sp->repeat_penalty > 0) || !wlm_isfinite(sp->repeat_penalty))
        return wlm_fail(err, WLM_ERR_ARG, "repeat_penalty must be a finite number > 0");
    if (!(sp->presence_penalty >= -PENALTY_MAX && sp->presence_penalty <= PENALTY_MAX))
        return wlm_fail(err, WLM_ERR_ARG, "presence_penalty must be in [-1e6, 1e6]");
    if (!(sp->frequency_penalty >= -PENALTY_MAX && sp->frequency_penalty <= PENALTY_MAX))
        return wlm_fail(err, WLM_ERR_ARG, "frequency_penalty must be in [-1e6, 1e6]");
    if (!(sp->typical_p >= 0 && sp->typical_p <= 1)) return wlm_fail(err, WLM_ERR_ARG, "typical_p must be in [0, 1]");
    if (sp->n_biases && !sp->biases) return wlm_fail(err, WLM_ERR_ARG, "%u logit biases but no array", sp->n_biases);
    for (uint32_t i = 0; i < sp->n_biases; i++) {
        int32_t t = sp->biases[i].token;
        float b = sp->biases[i].bias;
        if (t < 0 || (uint32_t)t >= n_vocab)
            return wlm_fail(err, WLM_ERR_ARG, "logit bias %u: token id %d out of range (vocabulary has %u)", i, t, n_vocab);
        if (b != b || b == __builtin_inff())
            return wlm_fail(err, WLM_ERR_ARG, "logit bias %u (token %d): the bias must be finite or -inf", i, t);
    }
    return WLM_OK;
}

#define PENALIZED 0xffffffffu /* pen_count mark: a usable token the penalties changed */

/* Stages 0-2: c->cand_val/cand_id get the logits of the usable tokens
 * after the mask, the bias and the penalties, in ascending id order; returns
 * their count. A token is usable when it is allowed (sp->allow) and its
 * biased logit is neither NaN nor -inf; a penalty may then take a usable
 * logit to -inf (an overflow), and it stays a candidate. pen_count counts
 * each token of the window, then marks the tokens the penalties changed, and
 * is cleared before returning. */
uint32_t wlm_sample_logits(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                           const int32_t *hist, uint32_t n_hist) {
    uint32_t n = c->m->hp.n_vocab, usable = 0;
    float *v = c->cand_val;
    int32_t *id = c->cand_id;
    uint32_t *cnt = c->pen_count;
    const uint32_t *allow = sp->allow;
    for (uint32_t i = 0; i < n; i++) {
        float x = allow && !((allow[i >> 5] >> (i & 31)) & 1) ? -__builtin_inff() : logits[i];
        usable += !excluded(x);
        v[i] = x;
        id[i] = (int32_t)i;
    }
    for (uint32_t i = 0; i < sp->n_biases; i++) {
        int32_t t = sp->biases[i].token;
        float b = sp->biases[i].bias;
        v[t] = b == -__builtin_inff() ? b : v[t] + b; /* -inf + b: a masked token stays out */
    }
    int penalize = sp->repeat_penalty != 1.0f || sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f;
    uint32_t from = n_hist > sp->repeat_last_n ? n_hist - sp->repeat_last_n : 0;
    if (!penalize || !hist) from = n_hist; /* an empty window */
    for (uint32_t i = from; i < n_hist; i++)
        if (hist[i] >= 0 && (uint32_t)hist[i] < n) cnt[hist[i]]++;
    for (uint32_t i = from; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || (uint32_t)t >= n || cnt[t] == 0 || cnt[t] == PENALIZED) continue;
        float x = v[t];
        if (excluded(x)) {
            cnt[t] = 0;
            continue;
        }
        if (sp->repeat_penalty != 1.0f) x = x > 0 ? x / sp->repeat_penalty : x * sp->repeat_penalty;
        if (sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f)
            x -= (float)cnt[t] * sp->frequency_penalty + sp->presence_penalty;
        v[t] = x;
        cnt[t] = PENALIZED;
    }
    uint32_t k = n;
    if (usable < n || sp->n_biases) { /* drop the excluded tokens so later stages skip them */
        k = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (excluded(v[i]) && cnt[i] != PENALIZED) continue;
            v[k] = v[i];
            id[k] = id[i];
            k++;
        }
    }
    for (uint32_t i = from; i < n_hist; i++)
        if (hist[i] >= 0 && (uint32_t)hist[i] < n) cnt[hist[i]] = 0;
    return k;
}

/* The first j in [i, n) with x[j] > thr, else n (a NaN is never above).
 * The scalar reference; wlm_first_above gives the same answer, skipping
 * sixteen entries at a time with SIMD where the build has it. */
uint32_t wlm_first_above_ref(const float *x, uint32_t i, uint32_t n, float thr) {
    for (; i < n; i++)
        if (x[i] > thr) return i;
    return n;
}

uint32_t wlm_first_above(const float *x, uint32_t i, uint32_t n, float thr) {
#if WLM_SIMD128
    v128_t t = wasm_f32x4_splat(thr);
    for (; i + 16 <= n; i += 16) {
        v128_t a = wasm_v128_or(wasm_f32x4_gt(wasm_v128_load(x + i), t), wasm_f32x4_gt(wasm_v128_load(x + i + 4), t));
        v128_t b = wasm_v128_or(wasm_f32x4_gt(wasm_v128_load(x + i + 8), t), wasm_f32x4_gt(wasm_v128_load(x + i + 12), t));
        if (wasm_v128_any_true(wasm_v128_or(a, b))) break; /* the reference finds which one */
    }
#endif
    return wlm_first_above_ref(x, i, n, thr);
}

static int allowed(const uint32_t *allow, uint32_t t) { return !allow || ((allow[t >> 5] >> (t & 31)) & 1); }

/* Stages 0-2 and 4 at once when stages 1-2 have nothing to do (no logit
 * bias, an empty penalty window) and top-k keeps a few (k < 256): the best
 * k usable allowed tokens straight from the logits, sorted best first, with
 * no copy of the vocabulary. The same tokens in the same order as stages
 * 0-2 then wlm_top_k_sorted: ids are visited in ascending order, so a token
 * enters the heap exactly when it beats the worst kept one (a tie never
 * does: the kept one has the smaller id). A mask with few tokens is read
 * by its set bits; otherwise the logits are scanned for values above the
 * worst kept one (wlm_first_above), which after the first few hundred
 * tokens almost none are. Returns the count kept (0: no usable token). */
static uint32_t top_k_direct(wlm_ctx *c, const float *logits, const uint32_t *allow, uint32_t k) {
    uint32_t n = c->m->hp.n_vocab, m = 0;
    float *v = c->cand_val;
    int32_t *id = c->cand_id;
    if (allow) {
        uint32_t nw = (n + 31) / 32, count = 0;
        for (uint32_t w = 0; w < nw; w++) count += (uint32_t)__builtin_popcount(allow[w]);
        if (count <= n / 8) { /* few allowed: gather them, then the heap */
            for (uint32_t w = 0; w < nw; w++)
                for (uint32_t b = allow[w]; b; b &= b - 1) {
                    uint32_t t = w * 32 + (uint32_t)__builtin_ctz(b);
                    if (t < n && !excluded(logits[t])) {
                        v[m] = logits[t];
                        id[m] = (int32_t)t;
                        m++;
                    }
                }
            return m ? wlm_top_k_sorted(v, id, m, k, NULL) : 0;
        }
    }
    uint32_t i = 0;
    for (; i < n && m < k; i++) { /* the first k usable allowed tokens fill the heap */
        if (!allowed(allow, i) || excluded(logits[i])) continue;
        v[m] = logits[i];
        id[m] = (int32_t)i;
        m++;
    }
    if (m < k) return m ? wlm_top_k_sorted(v, id, m, m, NULL) : 0;
    for (uint32_t j = k / 2; j-- > 0;) sift_down(v, id, k, j);
    for (;; i++) { /* v[0], id[0]: the worst kept */
        i = wlm_first_above(logits, i, n, v[0]);
        if (i >= n) break;
        if (allowed(allow, i)) {
            v[0] = logits[i];
            id[0] = (int32_t)i;
            sift_down(v, id, k, 0);
        }
    }
    return wlm_top_k_sorted(v, id, k, k, NULL); /* sorts the heap */
}

/* The candidates of stages 0-2 (ascending ids), or, when top_k_direct
 * applies, already cut to the best top_k (1 when greedy) and sorted. */
static uint32_t candidates(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                           const int32_t *hist, uint32_t n_hist) {
    uint32_t k = sp->temperature == 0.0f ? 1 : sp->top_k;
    int penalize = sp->repeat_penalty != 1.0f || sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f;
    int window = penalize && hist && n_hist && sp->repeat_last_n;
    if (!sp->n_biases && !window && k >= 1 && k < 256) return top_k_direct(c, logits, sp->allow, k);
    return wlm_sample_logits(c, logits, sp, hist, n_hist);
}

static uint32_t argmax(const float *v, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* Stage 5 on the k candidates v/id (sorted best first, probabilities in v
 * summing to 1; s[i] = log p[i] + log_z, the scaled logit difference the
 * probability came from, log_z = log of the sum that normalized them).
 * Keeps the typical set in place, renormalized, and returns its size.
 * tmp: 16 k bytes. */
static uint32_t typical(float *v, int32_t *id, const float *s, double log_z, uint32_t k, float mass, void *tmp) {
    /* H = sum p (-log p), -log p = log_z - s */
    double h = 0;
    for (uint32_t i = 0; i < k; i++)
        if (v[i] > 0.0f) h += (double)v[i] * (log_z - (double)s[i]);
    uint32_t *key = tmp, *idx = key + k, *kb = idx + k, *ib = kb + k;
    for (uint32_t i = 0; i < k; i++) {
        /* |-log p - H| as a float >= 0, whose bits order as the values do;
         * a probability that underflowed to 0 ranks last */
        float d = v[i] > 0.0f ? (float)__builtin_fabs((log_z - (double)s[i]) - h) : __builtin_inff();
        __builtin_memcpy(&key[i], &d, 4);
        idx[i] = i;
    }
    radix_sort(key, idx, kb, ib, k); /* stable: ties keep the more likely first */
    double cum = 0;
    uint32_t keep = k;
    for (uint32_t j = 0; j < k; j++) {
        cum += v[idx[j]];
        if (cum >= mass) {
            keep = j + 1;
            break;
        }
    }
    uint8_t *in = (uint8_t *)kb; /* the kept ones, by place */
    for (uint32_t i = 0; i < k; i++) in[i] = 0;
    for (uint32_t j = 0; j < keep; j++) in[idx[j]] = 1;
    uint32_t m = 0;
    double sum = 0;
    for (uint32_t i = 0; i < k; i++)
        if (in[i]) {
            v[m] = v[i];
            id[m] = id[i];
            sum += v[m];
            m++;
        }
    for (uint32_t i = 0; i < m; i++) v[i] = (float)(v[i] / sum);
    return m;
}

/* Stages 3-7: temperature, top-k, typical, top-p, min-p. Leaves the
 * surviving candidates sorted best first in cand_id with probabilities in
 * cand_val (summing to 1) and returns their count. */
static uint32_t filtered_dist(wlm_ctx *c, const wlm_sampler_params *sp, uint32_t n) {
    float *v = c->cand_val;
    int32_t *id = c->cand_id;
    float inv_t = 1.0f / sp->temperature;
    uint32_t k = wlm_top_k_sorted(v, id, n, sp->top_k, c->sort_tmp);
    int typ = sp->typical_p > 0.0f && sp->typical_p < 1.0f;
    /* typical needs each scaled difference: kept in the last 4 k bytes of
     * sort_tmp, which typical() reads before its sort writes there */
    float *sdiff = (float *)c->sort_tmp + 3 * (uint64_t)k;
    /* scale the difference to the best, never the logit itself: v * inv_t
     * overflows to inf for huge logits when T < 1,
     * and inf - inf would make every probability NaN. Candidates equal to the
     * best get 1 without arithmetic: with a denormal temperature inv_t is
     * inf and 0 * inf is NaN; after a huge penalty the best may be -inf. */
    float top = v[0];
    double sum = 0;
    for (uint32_t i = 0; i < k; i++) {
        float d = v[i] == top ? 0.0f : (v[i] - top) * inv_t;
        float p = v[i] == top ? 1.0f : wlm_expf(d);
        if (typ) sdiff[i] = d;
        v[i] = p;
        sum += p;
    }
    for (uint32_t i = 0; i < k; i++) v[i] = (float)(v[i] / sum);
    if (typ) k = typical(v, id, sdiff, wlm_log(sum), k, sp->typical_p, c->sort_tmp);
    if (sp->top_p < 1.0f) {
        double cum = 0;
        uint32_t keep = k;
        for (uint32_t i = 0; i < k; i++) {
            cum += v[i];
            if (cum >= sp->top_p) {
                keep = i + 1;
                break;
            }
        }
        k = keep;
    }
    if (sp->min_p > 0.0f) {
        float lim = v[0] * sp->min_p;
        uint32_t keep = 1;
        while (keep < k && v[keep] >= lim) keep++;
        k = keep;
    }
    sum = 0;
    for (uint32_t i = 0; i < k; i++) sum += v[i];
    for (uint32_t i = 0; i < k; i++) v[i] = (float)(v[i] / sum);
    return k;
}

/* log P(tok) under softmax(logits), with the sampler's view of the logits:
 * NaN and -inf are excluded, +inf counts as the largest float, so the
 * result is always <= 0 (a huge logit can not give a positive logprob: the
 * max's own term exp(0) is exactly 1, so the sum is >= 1 and its log >= 0).
 * The vocabulary is cut into LP_BLOCKS fixed blocks: the maximum and the
 * sum of exp(logit - max) are taken block by block with the kernel set's
 * logit_max and sum_exp (float exp, fixed order: the same bits in every
 * build), and the block sums added in order, so the context's threads can
 * share the blocks and the result is the same at any thread count. */
#define LP_BLOCKS 32
#define LP_MIN_PARALLEL 8192 /* a smaller vocabulary is not worth waking the threads */

static float lp_value(float x) { return x > FLT_BIG ? FLT_BIG : x; }

typedef struct lp_job {
    const wlm_kernels *k;
    const float *logits;
    uint32_t n;
    wlm_pool *pool;
    float bmax[LP_BLOCKS];
    double bsum[LP_BLOCKS];
} lp_job;

static void lp_blocks(void *arg, uint32_t tid, uint32_t nth) {
    lp_job *j = arg;
    uint32_t bs = (j->n + LP_BLOCKS - 1) / LP_BLOCKS, b0, b1;
    wlm_split(LP_BLOCKS, tid, nth, &b0, &b1);
    for (uint32_t b = b0; b < b1; b++) {
        uint32_t i0 = WLM_MIN(j->n, b * bs), i1 = WLM_MIN(j->n, (b + 1) * bs);
        j->bmax[b] = i1 > i0 ? j->k->logit_max(i1 - i0, j->logits + i0) : -__builtin_inff();
    }
    wlm_pool_barrier(j->pool, nth);
    float m = -__builtin_inff();
    for (uint32_t b = 0; b < LP_BLOCKS; b++)
        if (j->bmax[b] > m) m = j->bmax[b];
    for (uint32_t b = b0; b < b1; b++) {
        uint32_t i0 = WLM_MIN(j->n, b * bs), i1 = WLM_MIN(j->n, (b + 1) * bs);
        j->bsum[b] = i1 > i0 ? j->k->sum_exp(i1 - i0, j->logits + i0, m) : 0.0;
    }
}

/* The normalizer of the model's distribution: log P(x) = (lp_value(x) - m) - log_s */
static void model_lse(const wlm_kernels *k, wlm_pool *pool, uint32_t nth, const float *logits, uint32_t n,
                      float *m_out, float *log_s) {
    lp_job j;
    j.k = k;
    j.logits = logits;
    j.n = n;
    j.pool = pool;
    wlm_pool_run(pool, lp_blocks, &j, pool && n >= LP_MIN_PARALLEL ? nth : 1);
    float m = -__builtin_inff();
    double s = 0;
    for (uint32_t b = 0; b < LP_BLOCKS; b++) {
        if (j.bmax[b] > m) m = j.bmax[b];
        s += j.bsum[b];
    }
    *m_out = m;
    *log_s = (float)wlm_log(s);
}

static float model_logprob(const wlm_kernels *k, wlm_pool *pool, uint32_t nth, const float *logits, uint32_t n, int32_t tok) {
    float x = logits[tok];
    if (excluded(x)) return -__builtin_inff();
    float m, log_s;
    model_lse(k, pool, nth, logits, n, &m, &log_s);
    return (lp_value(x) - m) - log_s;
}

wlm_status wlm_sample(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                      const int32_t *history, uint32_t n_history, wlm_rng *rng,
                      int32_t *token, float *logprob, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_status s;
    if (!c || !logits || !sp || !token) return wlm_fail(err, WLM_ERR_ARG, "wlm_sample: NULL argument");
    uint32_t n = c->m->hp.n_vocab;
    if ((s = check_params(sp, n, err))) return s;
    uint32_t m = candidates(c, logits, sp, history, n_history);
    if (m == 0) return wlm_fail(err, WLM_ERR_ARG, sp->allow ? "no allowed token has a finite logit" : "no finite logits to sample from");
    int32_t tok;
    if (sp->temperature == 0.0f) {
        tok = c->cand_id[argmax(c->cand_val, m)];
    } else {
        if (!rng) return wlm_fail(err, WLM_ERR_ARG, "wlm_sample: sampling needs an rng");
        uint32_t k = filtered_dist(c, sp, m);
        float u = wlm_rng_float(rng), cum = 0;
        tok = c->cand_id[k - 1];
        for (uint32_t i = 0; i < k; i++) {
            cum += c->cand_val[i];
            if (u < cum) {
                tok = c->cand_id[i];
                break;
            }
        }
    }
    *token = tok;
    if (logprob) *logprob = model_logprob(c->k, c->pool, c->n_thr, logits, n, tok);
    return WLM_OK;
}

uint32_t wlm_sample_dist(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                         const int32_t *history, uint32_t n_history, int32_t *ids, float *probs, uint32_t cap) {
    if (!c || !logits || !sp || check_params(sp, c->m->hp.n_vocab, 0) || cap == 0) return 0;
    uint32_t m = candidates(c, logits, sp, history, n_history);
    if (m == 0) return 0;
    if (sp->temperature == 0.0f) {
        ids[0] = c->cand_id[argmax(c->cand_val, m)];
        probs[0] = 1.0f;
        return 1;
    }
    uint32_t k = filtered_dist(c, sp, m);
    if (k > cap) k = cap;
    for (uint32_t i = 0; i < k; i++) {
        ids[i] = c->cand_id[i];
        probs[i] = c->cand_val[i];
    }
    return k;
}

uint32_t wlm_top_logprobs(wlm_ctx *c, const float *logits, uint32_t n, int32_t *ids, float *logprobs) {
    if (!c || !logits || !ids || !logprobs || n == 0) return 0;
    uint32_t nv = c->m->hp.n_vocab, usable = 0;
    float *v = c->cand_val;
    int32_t *id = c->cand_id;
    for (uint32_t i = 0; i < nv; i++)
        if (!excluded(logits[i])) {
            v[usable] = logits[i];
            id[usable] = (int32_t)i;
            usable++;
        }
    if (usable == 0) return 0;
    /* the sampler's own order: the heap for a few, the radix sort for many */
    uint32_t k = wlm_top_k_sorted(v, id, usable, n < usable ? n : usable, c->sort_tmp);
    float m, log_s;
    model_lse(c->k, c->pool, c->n_thr, logits, nv, &m, &log_s);
    for (uint32_t i = 0; i < k; i++) {
        ids[i] = id[i];
        logprobs[i] = (lp_value(logits[id[i]]) - m) - log_s;
    }
    return k;
}

/* log P(tok) under softmax(logits) at T = 1 (speculative.c reports it too) */
float wlm_token_logprob(const wlm_kernels *k, const float *logits, uint32_t n, int32_t tok) {
    return model_logprob(k, 0, 1, logits, n, tok);
}
/* the same value on the context's threads */
float wlm_ctx_token_logprob(wlm_ctx *c, const float *logits, uint32_t n, int32_t tok) {
    return model_logprob(c->k, c->pool, c->n_thr, logits, n, tok);
}
