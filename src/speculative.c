/* Speculative sampling: the acceptance rule that makes a cheap draft's
 * proposals come out distributed exactly as the target model's own samples.
 *
 * The draft drew x from q. With p the target's distribution at the same
 * position (same penalty/temperature/filters as wlm_sample):
 *   accept x with probability min(1, p(x) / q(x));
 *   on rejection draw from r = max(0, p - q) / sum(max(0, p - q)).
 * For any token y: P(emit y) = q(y) min(1, p(y)/q(y)) + P(reject) r(y)
 *   = min(q(y), p(y)) + max(0, p(y) - q(y)) = p(y).
 * Greedy decoding is the special case p = one-hot(argmax): the draft token is
 * kept exactly when it is the target's argmax. */
#include "ctx.h"

wlm_status wlm_spec_accept(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                           const int32_t *history, uint32_t n_history, int32_t x,
                           const int32_t *q_ids, const float *q_probs, uint32_t q_n,
                           wlm_rng *rng, int32_t *token, int32_t *accepted, float *logprob,
                           wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!c || !logits || !sp || !token || !accepted || (q_n && (!q_ids || !q_probs)))
        return wlm_fail(err, WLM_ERR_ARG, "wlm_spec_accept: NULL argument");
    uint32_t nv = c->m->hp.n_vocab;
    if (x < 0 || (uint32_t)x >= nv)
        return wlm_fail(err, WLM_ERR_ARG, "draft token %d out of range (vocabulary has %u)", x, nv);
    if (q_n > nv) return wlm_fail(err, WLM_ERR_ARG, "draft distribution has %u entries, vocabulary %u", q_n, nv);
    for (uint32_t i = 0; i < q_n; i++) {
        if (q_ids[i] < 0 || (uint32_t)q_ids[i] >= nv)
            return wlm_fail(err, WLM_ERR_ARG, "draft distribution: token id %d out of range", q_ids[i]);
        if (!(q_probs[i] >= 0.0f && q_probs[i] <= 1.0001f))
            return wlm_fail(err, WLM_ERR_ARG, "draft distribution: probability %g of token %d is not in [0, 1]",
                            (double)q_probs[i], q_ids[i]);
    }
    if (sp->temperature > 0.0f && !rng) return wlm_fail(err, WLM_ERR_ARG, "wlm_spec_accept: sampling needs an rng");
    /* p: the target's filtered distribution, sparse and sorted, in cand_id/cand_val */
    uint32_t k = wlm_sample_dist(c, logits, sp, history, n_history, c->cand_id, c->cand_val, nv);
    if (k == 0) {
        wlm_status st = wlm_sample(c, logits, sp, history, n_history, rng, token, logprob, err);
        return st ? st : wlm_fail(err, WLM_ERR_ARG, "no finite logits to sample from");
    }
    float px = 0.0f;
    for (uint32_t i = 0; i < k; i++)
        if (c->cand_id[i] == x) {
            px = c->cand_val[i];
            break;
        }
    float *q = c->spec_q; /* dense q, all zero between calls */
    for (uint32_t i = 0; i < q_n; i++) q[q_ids[i]] += q_probs[i];
    float qx = q[x];
    int32_t out;
    if (sp->temperature == 0.0f) {
        *accepted = x == c->cand_id[0];
        out = c->cand_id[0];
    } else {
        float u = wlm_rng_float(rng);
        *accepted = qx > 0.0f ? u * qx < px : px > 0.0f;
        if (*accepted) {
            out = x;
        } else {
            double z = 0;
            for (uint32_t i = 0; i < k; i++) {
                float r = c->cand_val[i] - q[c->cand_id[i]];
                if (r > 0) z += r;
            }
            float v = wlm_rng_float(rng);
            out = c->cand_id[k - 1];
            if (z > 1e-12) {
                double target = v * z, cum = 0;
                for (uint32_t i = 0; i < k; i++) {
                    float r = c->cand_val[i] - q[c->cand_id[i]];
                    if (r <= 0) continue;
                    cum += r;
                    out = c->cand_id[i];
                    if (target < cum) break;
                }
            } else { /* p == q where it matters: draw from p */
                double cum = 0;
                for (uint32_t i = 0; i < k; i++) {
                    cum += c->cand_val[i];
                    if (v < cum) {
                        out = c->cand_id[i];
                        break;
                    }
                }
            }
        }
    }
    for (uint32_t i = 0; i < q_n; i++) q[q_ids[i]] = 0.0f;
    *token = out;
    if (logprob) *logprob = wlm_ctx_token_logprob(c, logits, nv, out);
    return WLM_OK;
}
