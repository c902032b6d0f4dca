/* llama / qwen2 / qwen3 / smollm3 / granite / gemma2 / gemma3 / phi3 decoders and the bert / nomic-bert encoders: hyper-parameters from GGUF metadata and the tensor map.
 * Every tensor the forward pass uses is looked up here, once, with its shape
 * and type checked, so the forward pass never meets a surprise. */
#include "model.h"
#include "kernels.h"
#include "wmath.h"

static const char *key(char *buf, const char *arch, uint32_t alen, const char *suffix) {
    wlm_fmt(buf, 128, "%.*s.%s", (int)alen, arch, suffix);
    return buf;
}

/* a weight type is usable when the kernel set the engine runs has a dot for it */
static int type_ok_for_matmul(uint32_t t) {
    return t < GGML_TYPE_COUNT && wlm_kernel_dot(wlm_kernels_best(), t) != 0;
}

/* ---- architectures ------------------------------------------------------------
 *
 * Supported: "llama" (Llama 1/2/3, TinyLlama, Mistral-style files written as
 * llama, SmolLM, ...), "qwen2" (Qwen1.5 / Qwen2 / Qwen2.5), "qwen3",
 * "smollm3", "granite" (Granite 3.x), "gemma2", "gemma3" and "phi3". All are the
 * same pre-norm decoder:
 * RMSNorm, Q/K/V/O projections with grouped-query attention, RoPE, a SwiGLU
 * feed-forward block and a final RMSNorm. They differ in:
 *   - RoPE convention: llama-like GGUF files (llama, smollm3, granite)
 *     rotate pairs (2i, 2i+1) (the converter permutes Q/K rows for it); the
 *     Qwen and Gemma families rotate pairs (i, i + n_rot/2) ("NEOX" style).
 *   - qwen2 has F32 biases on Q, K and V (blk.N.attn_q.bias, ...). Biases are
 *     accepted (optional) on every architecture, as is attn_output.bias.
 *   - qwen3 normalizes each head of Q and K by RMSNorm (blk.N.attn_q_norm,
 *     attn_k_norm, [head_dim]) before RoPE.
 *   - smollm3 leaves every 4th layer unrotated (layers 3, 7, 11, ...). Its
 *     GGUF files carry no key for it: the converter writes none and
 *     llama.cpp applies this fixed rule, so we do too.
 *   - granite scales the embeddings, each block's contribution to the
 *     residual stream, the attention scores and the logits by factors from
 *     its metadata (granite.embedding_scale, residual_scale,
 *     attention.scale, logit_scale).
 *   - gemma2 / gemma3 add post-attention/post-FFN norms, GeGLU, sliding-window
 *     layers, soft-capping (gemma2) and Q/K norms (gemma3): load_gemma_hparams.
 * "phi3" (Phi-3, Phi-3.5, Phi-4-mini) is the same decoder with NEOX RoPE and
 * two fused matrices: attn_qkv.weight holds the rows of Q, then K, then V;
 * ffn_up.weight (with no ffn_gate.weight) holds 2 n_ff rows, the gate's
 * first, then the up projection's. They are cut here into views of those
 * rows, so the forward pass sees the usual five matrices. Its LongRoPE
 * ("su") scaling comes as two tensors of per-frequency divisors,
 * rope_factors_short.weight for contexts up to
 * rope.scaling.original_context_length and rope_factors_long.weight beyond
 * it, with rope.scaling.attn_factor scaling cos and sin.
 * llama files may carry attention.sliding_window (Mistral-style): every
 * layer then attends to the last W positions only (gemma's window, read by
 * load_gemma_hparams, covers its sliding layers only: wlm_layer.swa).
 * Every tensor in the file must be one of the names below: anything else
 * (mixture-of-experts, extra norms) is refused by name rather than
 * silently ignored. */

typedef struct arch_info {
    const char *name;
    uint32_t id, rope_type;
} arch_info;
static const arch_info k_archs[] = {
    { "llama", WLM_ARCH_LLAMA, WLM_ROPE_NORM },
    { "qwen2", WLM_ARCH_QWEN2, WLM_ROPE_NEOX },
    { "qwen3", WLM_ARCH_QWEN3, WLM_ROPE_NEOX },
    { "smollm3", WLM_ARCH_SMOLLM3, WLM_ROPE_NORM },
    { "granite", WLM_ARCH_GRANITE, WLM_ROPE_NORM },
    { "gemma2", WLM_ARCH_GEMMA2, WLM_ROPE_NEOX },
    { "gemma3", WLM_ARCH_GEMMA3, WLM_ROPE_NEOX },
    { "phi3", WLM_ARCH_PHI3, WLM_ROPE_NEOX },
    { "bert", WLM_ARCH_BERT, WLM_ROPE_NORM },
    { "nomic-bert", WLM_ARCH_NOMIC_BERT, WLM_ROPE_NEOX },
};
#define N_ARCHS (sizeof k_archs / sizeof k_archs[0])
#define SUPPORTED_ARCHS "llama, qwen2, qwen3, smollm3, granite, gemma2, gemma3, phi3, bert, nomic-bert"
/* smollm3: a layer l has no RoPE when (l + 1) % 4 == 0 (no GGUF key says so) */
#define SMOLLM3_NO_ROPE_STEP 4

static const char *const k_global_tensors[] = { "token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight",
                                                "rope_factors_long.weight", "rope_factors_short.weight" };
static const char *const k_block_tensors[] = {
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_qkv.weight",
    "attn_output.weight",
    "attn_q.bias",
    "attn_k.bias",
    "attn_v.bias",
    "attn_output.bias",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
};
/* only in architectures with per-head Q/K norms (qwen3, gemma3) */
static const char *const k_qk_norm_tensors[] = { "attn_q_norm.weight", "attn_k_norm.weight" };
/* only in gemma2 / gemma3: the norms of the attention and FFN outputs */
static const char *const k_post_norm_tensors[] = { "post_attention_norm.weight", "post_ffw_norm.weight" };

/* the encoders' layout (load_encoder_tensors): token types, absolute
 * positions (bert), the embedding LayerNorm, post-norm blocks */
static const char *const k_enc_global_tensors[] = { "token_embd.weight", "token_types.weight", "position_embd.weight",
                                                    "token_embd_norm.weight", "token_embd_norm.bias" };
static const char *const k_enc_block_tensors[] = {
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_qkv.weight",
    "attn_output.weight",
    "attn_q.bias",
    "attn_k.bias",
    "attn_v.bias",
    "attn_qkv.bias",
    "attn_output.bias",
    "attn_output_norm.weight",
    "attn_output_norm.bias",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "ffn_up.bias",
    "ffn_down.bias",
    "layer_output_norm.weight",
    "layer_output_norm.bias",
};

static int is_gemma(uint32_t arch) { return arch == WLM_ARCH_GEMMA2 || arch == WLM_ARCH_GEMMA3; }
static int is_encoder(uint32_t arch) { return arch == WLM_ARCH_BERT || arch == WLM_ARCH_NOMIC_BERT; }
static int has_qk_norm(uint32_t arch) { return arch == WLM_ARCH_QWEN3 || arch == WLM_ARCH_GEMMA3; }

/* 1 when `name` is a tensor of architecture arch's layout for a model of n_layer blocks */
static int tensor_known(const char *name, uint32_t len, uint32_t n_layer, uint32_t arch) {
    int enc = is_encoder(arch);
    const char *const *glob = enc ? k_enc_global_tensors : k_global_tensors;
    uint32_t n_glob = enc ? sizeof k_enc_global_tensors / sizeof k_enc_global_tensors[0] : sizeof k_global_tensors / sizeof k_global_tensors[0];
    for (uint32_t i = 0; i < n_glob; i++)
        if (wlm_str_is(name, len, glob[i])) return 1;
    if (len < 6 || !wlm_memeq(name, "blk.", 4)) return 0;
    uint32_t p = 4, l = 0, digits = 0;
    while (p < len && name[p] >= '0' && name[p] <= '9' && digits < 7) {
        l = l * 10 + (uint32_t)(name[p] - '0');
        p++;
        digits++;
    }
    if (!digits || p >= len || name[p] != '.' || l >= n_layer) return 0;
    p++;
    if (enc) {
        for (uint32_t i = 0; i < sizeof k_enc_block_tensors / sizeof k_enc_block_tensors[0]; i++)
            if (wlm_str_is(name + p, len - p, k_enc_block_tensors[i])) return 1;
        return 0;
    }
    for (uint32_t i = 0; i < sizeof k_block_tensors / sizeof k_block_tensors[0]; i++)
        if (wlm_str_is(name + p, len - p, k_block_tensors[i])) return 1;
    if (has_qk_norm(arch))
        for (uint32_t i = 0; i < 2; i++)
            if (wlm_str_is(name + p, len - p, k_qk_norm_tensors[i])) return 1;
    if (is_gemma(arch))
        for (uint32_t i = 0; i < 2; i++)
            if (wlm_str_is(name + p, len - p, k_post_norm_tensors[i])) return 1;
    return 0;
}

/* the first tensor of the file not in architecture arch's layout, or NULL */
static const wlm_tensor *first_unknown_tensor(const wlm_gguf *g, uint32_t n_layer, uint32_t arch) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!tensor_known(g->tensors[i].name, g->tensors[i].name_len, n_layer, arch)) return &g->tensors[i];
    return 0;
}

/* Finds a tensor, checks its shape (ne0, ne1; ne1 = 0 for vectors) and type. */
static wlm_status get_tensor(const wlm_model *m, const char *name, uint64_t ne0, uint64_t ne1, int required,
                             int matrix, const wlm_tensor **out, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    const wlm_tensor *t = wlm_gguf_tensor(g, name);
    *out = t;
    if (!t) {
        if (!required) return WLM_OK;
        const wlm_tensor *u = first_unknown_tensor(g, 1024, m->arch);
        if (u) return wlm_fail(err, WLM_ERR_FORMAT, "missing tensor %s (first unknown tensor: %.*s)", name, (int)WLM_MIN(u->name_len, 96u), u->name);
        return wlm_fail(err, WLM_ERR_FORMAT, "missing tensor %s", name);
    }
    uint64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return wlm_fail(err, WLM_ERR_FORMAT, "tensor %s has shape [%llu, %llu], expected [%llu, %llu]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)ne0, (unsigned long long)want1);
    int ok = matrix ? type_ok_for_matmul(t->type) : (t->type == GGML_F32);
    if (!ok) return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported tensor type %s in %s", wlm_type_name(t->type), name);
    return WLM_OK;
}

/* Gemma 2 / Gemma 3 (architectures "gemma2", "gemma3"): the same decoder
 * with NEOX RoPE plus
 *   - token embeddings scaled by sqrt(n_embd);
 *   - RMSNorm weights used as stored: Gemma computes x * (1 + w), and the
 *     GGUF converter writes 1 + w into the file (checked against llama.cpp
 *     on the same files: tools/xcheck/gemma2.mjs);
 *   - the outputs of attention and of the FFN normed (post_attention_norm,
 *     post_ffw_norm) before they join the residual stream;
 *   - GeGLU: gelu(gate) * up, GELU in its tanh form;
 *   - a sliding window (attention.sliding_window) on some layers: gemma2
 *     every other one from layer 0, gemma3 five of every six (layers 5, 11,
 *     ... are global); gemma3's sliding layers rotate with base 10000 and no
 *     scaling, its global ones with the file's rope.freq_base and scaling;
 *   - gemma2: attention scores and final logits soft-capped, s -> c tanh(s/c),
 *     with attn_logit_softcapping (default 50) and final_logit_softcapping
 *     (default 30); gemma3 has no soft-capping but per-head Q/K RMSNorm;
 *   - queries scaled by 1/sqrt(query_pre_attn_scalar). The converter writes
 *     no such key: that scalar is the key length, except in the 27B models
 *     (46 layers for gemma2, 62 for gemma3), where it is n_embd / n_head. */
static wlm_status load_gemma_hparams(wlm_model *m, const char *arch, uint32_t alen, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    wlm_hparams *hp = &m->hp;
    char kb[128];
    wlm_status s;
    int g2 = m->arch == WLM_ARCH_GEMMA2;
    m->embd_scale = wlm_sqrtf((float)hp->n_embd);
    m->ffn_gelu = 1;
    m->n_swa = g2 ? 4096 : 0;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.sliding_window"), 0, &m->n_swa, err))) return s;
    if (g2) {
        m->attn_softcap = 50.0f;
        m->final_softcap = 30.0f;
        if ((s = wlm_kv_f32(g, key(kb, arch, alen, "attn_logit_softcapping"), 0, &m->attn_softcap, err))) return s;
        if ((s = wlm_kv_f32(g, key(kb, arch, alen, "final_logit_softcapping"), 0, &m->final_softcap, err))) return s;
        if (!(m->attn_softcap >= 0) || !(m->final_softcap >= 0))
            return wlm_fail(err, WLM_ERR_FORMAT, "gemma2 soft-capping values must not be negative");
    } else {
        m->rope_base_swa = 10000.0f;
    }
    uint32_t big = g2 ? 46 : 62;
    float qpas = hp->n_layer == big ? (float)hp->n_embd / (float)hp->n_head : (float)hp->head_dim;
    m->attn_scale = 1.0f / wlm_sqrtf(qpas);
    return WLM_OK;
}

/* Embeddings (every architecture) and the encoders (bert, nomic-bert):
 *   <arch>.attention.causal  false: every token attends to its whole
 *                            sequence (default: false for the encoders,
 *                            true for the decoders);
 *   <arch>.pooling_type      0 none, 1 mean, 2 CLS, 3 last (4, rank, is a
 *                            classifier head: refused);
 *   <arch>.attention.layer_norm_epsilon  the encoders' LayerNorm epsilon
 *                            (default 1e-12, BERT's). */
static wlm_status load_embedding_hparams(wlm_model *m, const char *arch, uint32_t alen, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    char kb[128];
    wlm_status s;
    m->encoder = is_encoder(m->arch);
    m->causal = !m->encoder;
    if ((s = wlm_kv_bool(g, key(kb, arch, alen, "attention.causal"), &m->causal, err))) return s;
    m->causal = m->causal ? 1 : 0;
    m->pooling = WLM_POOLING_NONE;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "pooling_type"), 0, &m->pooling, err))) return s;
    if (m->pooling > WLM_POOLING_LAST)
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported %.*s.pooling_type %u (supported: 0 none, 1 mean, 2 cls, 3 last; 4 is a reranker's classifier head)",
                        (int)WLM_MIN(alen, 64u), arch, m->pooling);
    m->ln_eps = 1e-12f;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "attention.layer_norm_epsilon"), 0, &m->ln_eps, err))) return s;
    if (!(m->ln_eps >= 0) || m->ln_eps > 1.0f) return wlm_fail(err, WLM_ERR_FORMAT, "attention.layer_norm_epsilon must be in [0, 1]");
    return WLM_OK;
}

const char *wlm_arch_name(uint32_t arch) {
    for (uint32_t i = 0; i < N_ARCHS; i++)
        if (k_archs[i].id == arch) return k_archs[i].name;
    return "?";
}

static wlm_status load_hparams(wlm_model *m, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    wlm_hparams *hp = &m->hp;
    const char *arch;
    uint32_t alen;
    wlm_status s;
    char kb[128];
    if ((s = wlm_kv_str(g, "general.architecture", 1, &arch, &alen, err))) return s;
    const arch_info *ai = 0;
    for (uint32_t i = 0; i < N_ARCHS && !ai; i++)
        if (wlm_str_is(arch, alen, k_archs[i].name)) ai = &k_archs[i];
    if (!ai) {
        uint32_t n_layer = 0;
        (void)wlm_kv_u32(g, key(kb, arch, alen, "block_count"), 0, &n_layer, err);
        const wlm_tensor *u = first_unknown_tensor(g, n_layer ? n_layer : 1024, WLM_ARCH_LLAMA);
        if (u)
            return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported architecture '%.*s' (first unknown tensor: %.*s; supported: " SUPPORTED_ARCHS ")",
                            (int)WLM_MIN(alen, 64u), arch, (int)WLM_MIN(u->name_len, 96u), u->name);
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported architecture '%.*s' (supported: " SUPPORTED_ARCHS ")", (int)WLM_MIN(alen, 64u), arch);
    }
    m->arch = ai->id;
    hp->n_ctx_train = 2048;
    hp->rope_freq_base = 10000.0f;
    hp->rms_eps = is_gemma(ai->id) ? 1e-6f : 1e-5f;
    hp->rope_type = ai->rope_type;
    m->embd_scale = 1.0f;
    m->resid_scale = 1.0f;
    m->attn_scale = 0.0f;
    m->logit_scale = 1.0f;
    if (m->arch == WLM_ARCH_GRANITE) {
        if ((s = wlm_kv_f32(g, key(kb, arch, alen, "embedding_scale"), 0, &m->embd_scale, err))) return s;
        if ((s = wlm_kv_f32(g, key(kb, arch, alen, "residual_scale"), 0, &m->resid_scale, err))) return s;
        if ((s = wlm_kv_f32(g, key(kb, arch, alen, "attention.scale"), 0, &m->attn_scale, err))) return s;
        if ((s = wlm_kv_f32(g, key(kb, arch, alen, "logit_scale"), 0, &m->logit_scale, err))) return s;
        if (!(m->embd_scale > 0 && m->embd_scale < 1e6f) || !(m->resid_scale > 0 && m->resid_scale < 1e6f) ||
            !(m->attn_scale >= 0 && m->attn_scale < 1e6f) || !(m->logit_scale > 1e-6f && m->logit_scale < 1e6f))
            return wlm_fail(err, WLM_ERR_FORMAT, "granite multipliers (embedding_scale, residual_scale, attention.scale, logit_scale) must be positive and finite");
    }
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "embedding_length"), 1, &hp->n_embd, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "block_count"), 1, &hp->n_layer, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "feed_forward_length"), 1, &hp->n_ff, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.head_count"), 1, &hp->n_head, err))) return s;
    hp->n_head_kv = hp->n_head;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.head_count_kv"), 0, &hp->n_head_kv, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "context_length"), 0, &hp->n_ctx_train, err))) return s;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "rope.freq_base"), 0, &hp->rope_freq_base, err))) return s;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "attention.layer_norm_rms_epsilon"), 0, &hp->rms_eps, err))) return s;
    if ((s = load_embedding_hparams(m, arch, alen, err))) return s;
    if (hp->n_embd == 0 || hp->n_embd > 65536) return wlm_fail(err, WLM_ERR_FORMAT, "embedding_length %u out of range", hp->n_embd);
    if (hp->n_layer == 0 || hp->n_layer > 1024) return wlm_fail(err, WLM_ERR_FORMAT, "block_count %u out of range", hp->n_layer);
    if (hp->n_ff == 0 || hp->n_ff > 1048576) return wlm_fail(err, WLM_ERR_FORMAT, "feed_forward_length %u out of range", hp->n_ff);
    if (hp->n_head == 0 || hp->n_head > 4096) return wlm_fail(err, WLM_ERR_FORMAT, "head_count %u out of range", hp->n_head);
    /* head sizes: attention.key_length / value_length when given (they may
     * differ from n_embd / n_head), else n_embd / n_head */
    uint32_t kl = 0, vl = 0;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.key_length"), 0, &kl, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.value_length"), 0, &vl, err))) return s;
    if ((!kl || !vl) && hp->n_embd % hp->n_head)
        return wlm_fail(err, WLM_ERR_FORMAT, "head_count %u does not divide embedding_length %u (and attention.key_length/value_length are not given)", hp->n_head, hp->n_embd);
    if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv)
        return wlm_fail(err, WLM_ERR_FORMAT, "head_count_kv %u does not divide head_count %u", hp->n_head_kv, hp->n_head);
    hp->head_dim = kl ? kl : hp->n_embd / hp->n_head;
    hp->head_dim_v = vl ? vl : hp->n_embd / hp->n_head;
    if (hp->head_dim == 0 || hp->head_dim > 4096 || hp->head_dim_v == 0 || hp->head_dim_v > 4096)
        return wlm_fail(err, WLM_ERR_FORMAT, "attention head sizes %u (key) / %u (value) out of range", hp->head_dim, hp->head_dim_v);
    hp->n_rot = hp->head_dim;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "rope.dimension_count"), 0, &hp->n_rot, err))) return s;
    if (hp->n_rot > hp->head_dim || (hp->n_rot & 1))
        return wlm_fail(err, WLM_ERR_FORMAT, "rope.dimension_count %u must be even and at most the head size %u", hp->n_rot, hp->head_dim);
    if (hp->n_ctx_train == 0) hp->n_ctx_train = 2048;
    /* RoPE angles are pos * base^(-2i/n_rot) / divisor: a base below 1 or a
     * tiny divisor makes them astronomically large (no model has either) */
    if (!(hp->rope_freq_base >= 1.0f))
        return wlm_fail(err, WLM_ERR_FORMAT, "rope.freq_base must be positive (>= 1)");
    if (!(hp->rms_eps >= 0)) return wlm_fail(err, WLM_ERR_FORMAT, "layer_norm_rms_epsilon must not be negative");
    /* the chat template is rendered by the host (JS), but a template that is
     * not a string is a broken file: say so at load, not at the first chat */
    const char *tpl;
    uint32_t tpl_len;
    if ((s = wlm_kv_str(g, "tokenizer.chat_template", 0, &tpl, &tpl_len, err))) return s;

    /* RoPE scaling (rope.scaling.*): none, linear (all frequencies divided by
     * the factor) or llama3 (Llama 3.1+: low frequencies divided by the
     * factor, high ones kept, a smooth blend between, by wavelength). A
     * rope_freqs.weight tensor, when present, gives the divisors directly. */
    const char *st;
    uint32_t stlen;
    if ((s = wlm_kv_str(g, key(kb, arch, alen, "rope.scaling.type"), 0, &st, &stlen, err))) return s;
    m->rope_scaling = WLM_ROPE_SCALING_NONE;
    m->rope_scale_factor = 1.0f;
    m->rope_low_freq_factor = 1.0f;
    m->rope_high_freq_factor = 4.0f;
    m->rope_orig_ctx = m->arch == WLM_ARCH_PHI3 ? hp->n_ctx_train : 8192;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "rope.scaling.factor"), 0, &m->rope_scale_factor, err))) return s;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "rope.scaling.low_freq_factor"), 0, &m->rope_low_freq_factor, err))) return s;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "rope.scaling.high_freq_factor"), 0, &m->rope_high_freq_factor, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "rope.scaling.original_context_length"), 0, &m->rope_orig_ctx, err))) return s;
    /* phi3's LongRoPE divisors are tensors (load_tensors); a file may name
     * the scheme (longrope, su) without changing how it is read */
    int longrope = m->arch == WLM_ARCH_PHI3 && st && (wlm_str_is(st, stlen, "longrope") || wlm_str_is(st, stlen, "su"));
    m->rope_attn_factor = 1.0f;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "rope.scaling.attn_factor"), 0, &m->rope_attn_factor, err))) return s;
    if (!(m->rope_attn_factor > 0) || m->rope_attn_factor > 1e3f)
        return wlm_fail(err, WLM_ERR_FORMAT, "rope.scaling.attn_factor must be positive (at most 1000)");
    /* Mistral-style sliding-window attention: llama files (phi3's
     * attention.sliding_window is not applied by llama.cpp either, so it is
     * read for llama only) */
    m->n_swa = 0;
    if (m->arch == WLM_ARCH_LLAMA && (s = wlm_kv_u32(g, key(kb, arch, alen, "attention.sliding_window"), 0, &m->n_swa, err))) return s;
    if (st && !longrope && !wlm_str_is(st, stlen, "none")) {
        if (wlm_str_is(st, stlen, "linear")) m->rope_scaling = WLM_ROPE_SCALING_LINEAR;
        else if (wlm_str_is(st, stlen, "llama3")) m->rope_scaling = WLM_ROPE_SCALING_LLAMA3;
        else return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported rope.scaling.type '%.*s' (supported: none, linear, llama3)",
                             (int)WLM_MIN(stlen, 64u), st);
        if (!(m->rope_scale_factor >= 1e-4f)) return wlm_fail(err, WLM_ERR_FORMAT, "rope.scaling.factor must be positive (>= 1e-4)");
        if (m->rope_scaling == WLM_ROPE_SCALING_LLAMA3 &&
            (!(m->rope_low_freq_factor > 0) || !(m->rope_high_freq_factor > m->rope_low_freq_factor) || m->rope_orig_ctx == 0))
            return wlm_fail(err, WLM_ERR_FORMAT, "llama3 RoPE scaling needs 0 < low_freq_factor < high_freq_factor and original_context_length > 0");
        if (m->rope_scale_factor == 1.0f && m->rope_scaling == WLM_ROPE_SCALING_LINEAR) m->rope_scaling = WLM_ROPE_SCALING_NONE;
    }
    return is_gemma(m->arch) ? load_gemma_hparams(m, arch, alen, err) : WLM_OK;
}

double wlm_rope_freq_divisor(const wlm_model *m, uint32_t i, double theta) {
    if (m->rope_freqs) return ((const float *)m->rope_freqs->data)[i];
    if (m->rope_scaling == WLM_ROPE_SCALING_LINEAR) return m->rope_scale_factor;
    if (m->rope_scaling != WLM_ROPE_SCALING_LLAMA3) return 1.0;
    /* wavelength of this frequency, in positions; thresholds from the
     * original context length */
    const double two_pi = 6.283185307179586476925;
    double wavelen = two_pi / theta, orig = (double)m->rope_orig_ctx;
    double lo = m->rope_low_freq_factor, hi = m->rope_high_freq_factor, f = m->rope_scale_factor;
    if (wavelen < orig / hi) return 1.0; /* high frequency: unchanged */
    if (wavelen > orig / lo) return f;   /* low frequency: divided by the factor */
    double smooth = (orig / wavelen - lo) / (hi - lo);
    /* new = (1 - smooth) * theta / f + smooth * theta  ->  divisor = theta / new */
    return 1.0 / ((1.0 - smooth) / f + smooth);
}

static wlm_status get_bias(const wlm_gguf *g, const char *name, uint64_t n, const wlm_tensor **out, wlm_err *err) {
    const wlm_tensor *t = wlm_gguf_tensor(g, name);
    *out = 0;
    if (!t) return WLM_OK;
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return wlm_fail(err, WLM_ERR_FORMAT, "tensor %s has shape [%llu, %llu], expected [%llu]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)n);
    if (t->type != GGML_F32) return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported tensor type %s in %s (biases must be F32)", wlm_type_name(t->type), name);
    *out = t;
    return WLM_OK;
}

/* *v = rows [r0, r0 + rows) of matrix t (a view: same type, same bytes) */
static const wlm_tensor *row_view(wlm_tensor *v, const wlm_tensor *t, uint64_t r0, uint64_t rows) {
    uint64_t rb = t->nbytes / t->ne[1];
    *v = *t;
    v->ne[1] = rows;
    v->data = t->data + r0 * rb;
    v->offset = t->offset + r0 * rb;
    v->nbytes = rows * rb;
    return v;
}

/* a per-frequency divisor tensor (rope_freqs, rope_factors_*): n positive floats */
static wlm_status get_divisors(const wlm_model *m, const char *name, uint32_t n, const wlm_tensor **out, wlm_err *err) {
    wlm_status s = get_tensor(m, name, n, 0, 0, 0, out, err);
    if (s || !*out) return s;
    const float *f = (const float *)(*out)->data;
    for (uint32_t i = 0; i < n; i++)
        if (!(f[i] >= 1e-4f) || f[i] > 1e30f)
            return wlm_fail(err, WLM_ERR_FORMAT, "%s[%u] must be a positive number (1e-4 to 1e30)", name, i);
    return WLM_OK;
}

const float *wlm_rope_factors(const wlm_model *m, uint32_t n_ctx) {
    const wlm_tensor *t = n_ctx > m->rope_orig_ctx ? m->rope_long : m->rope_short;
    return t ? (const float *)t->data : 0;
}

/* *v = elements [e0, e0 + n) of the F32 vector t (a view) */
static const wlm_tensor *vec_view(wlm_tensor *v, const wlm_tensor *t, uint64_t e0, uint64_t n) {
    *v = *t;
    v->ne[0] = n;
    v->data = t->data + e0 * 4;
    v->offset = t->offset + e0 * 4;
    v->nbytes = n * 4;
    return v;
}

/* bert / nomic-bert (llama.cpp's converter names; BERT's post-norm block):
 *   x = token_embd[t] + token_types[0] + position_embd[pos] (bert; nomic-bert
 *       rotates Q and K instead: NEOX RoPE with rope.freq_base)
 *   x = LayerNorm(x) (token_embd_norm weight, bias)
 *   per layer:  q, k, v = Wq x + bq, ... (attn_q/k/v, or the rows of attn_qkv
 *               in turn, biases when present); a = attention (every token
 *               of the text, attention.causal false); x = LayerNorm(x + Wo a
 *               + bo) (attn_output_norm); bert: h = gelu(Wup x + bup),
 *               nomic-bert: h = silu(Wgate x) * (Wup x); x = LayerNorm(x +
 *               Wdown h + bdown) (layer_output_norm)
 * No final norm and no output matrix: the last x is the hidden state that
 * embeddings pool. token_types (rows: tokenizer.ggml.token_type_count) is
 * optional; the text is token type 0 ("sentence A"). */
static wlm_status load_encoder_tensors(wlm_model *m, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    wlm_hparams *hp = &m->hp;
    uint64_t d = hp->n_embd, q_dim = (uint64_t)hp->n_head * hp->head_dim, kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t v_dim = (uint64_t)hp->n_head_kv * hp->head_dim_v, o_dim = (uint64_t)hp->n_head * hp->head_dim_v;
    int bert = m->arch == WLM_ARCH_BERT;
    wlm_status s;
    if ((s = get_tensor(m, "token_embd.weight", d, hp->n_vocab, 1, 1, &m->tok_embd, err))) return s;
    const wlm_tensor *tt = wlm_gguf_tensor(g, "token_types.weight");
    if (tt) {
        uint32_t n_types = (uint32_t)tt->ne[1];
        if ((s = wlm_kv_u32(g, "tokenizer.ggml.token_type_count", 0, &n_types, err))) return s;
        if (n_types == 0) return wlm_fail(err, WLM_ERR_FORMAT, "tokenizer.ggml.token_type_count is 0 but the file has token_types.weight");
        if ((s = get_tensor(m, "token_types.weight", d, n_types, 1, 1, &m->type_embd, err))) return s;
    }
    if (bert && (s = get_tensor(m, "position_embd.weight", d, hp->n_ctx_train, 1, 1, &m->pos_embd, err))) return s;
    if ((s = get_tensor(m, "token_embd_norm.weight", d, 0, 1, 0, &m->tok_norm, err))) return s;
    if ((s = get_tensor(m, "token_embd_norm.bias", d, 0, 1, 0, &m->tok_norm_b, err))) return s;
    hp->tied_output = 0;
    char name[96];
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        wlm_layer *L = &m->layers[l];
        wlm_tensor *views = m->views + 5 * l, *bviews = m->bias_views + 3 * l;
#define T(field, suffix, n0, n1, mat, req)           \
    wlm_fmt(name, sizeof name, "blk.%u." suffix, l); \
    if ((s = get_tensor(m, name, n0, n1, req, mat, &L->field, err))) return s;
#define B(field, suffix, n)                          \
    wlm_fmt(name, sizeof name, "blk.%u." suffix, l); \
    if ((s = get_bias(g, name, n, &L->field, err))) return s;
        wlm_fmt(name, sizeof name, "blk.%u.attn_qkv.weight", l);
        if (wlm_gguf_tensor(g, name)) { /* fused (nomic-bert): the rows of Q, K, V in turn */
            const wlm_tensor *qkv, *bqkv;
            if ((s = get_tensor(m, name, d, q_dim + kv_dim + v_dim, 1, 1, &qkv, err))) return s;
            L->wq = row_view(&views[0], qkv, 0, q_dim);
            L->wk = row_view(&views[1], qkv, q_dim, kv_dim);
            L->wv = row_view(&views[2], qkv, q_dim + kv_dim, v_dim);
            wlm_fmt(name, sizeof name, "blk.%u.attn_qkv.bias", l);
            if ((s = get_bias(g, name, q_dim + kv_dim + v_dim, &bqkv, err))) return s;
            if (bqkv) {
                L->bq = vec_view(&bviews[0], bqkv, 0, q_dim);
                L->bk = vec_view(&bviews[1], bqkv, q_dim, kv_dim);
                L->bv = vec_view(&bviews[2], bqkv, q_dim + kv_dim, v_dim);
            }
            static const char *const sep[6] = { "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias" };
            for (uint32_t i = 0; i < 6; i++) {
                wlm_fmt(name, sizeof name, "blk.%u.%s", l, sep[i]);
                if (wlm_gguf_tensor(g, name)) return wlm_fail(err, WLM_ERR_FORMAT, "both blk.%u.attn_qkv.weight and %s", l, name);
            }
        } else {
            T(wq, "attn_q.weight", d, q_dim, 1, 1)
            T(wk, "attn_k.weight", d, kv_dim, 1, 1)
            T(wv, "attn_v.weight", d, v_dim, 1, 1)
            B(bq, "attn_q.bias", q_dim)
            B(bk, "attn_k.bias", kv_dim)
            B(bv, "attn_v.bias", v_dim)
        }
        T(wo, "attn_output.weight", o_dim, d, 1, 1)
        B(bo, "attn_output.bias", d)
        T(ln_attn, "attn_output_norm.weight", d, 0, 0, 1)
        T(ln_attn_b, "attn_output_norm.bias", d, 0, 0, 1)
        if (!bert) { T(w_gate, "ffn_gate.weight", d, hp->n_ff, 1, 1) } /* nomic-bert: SwiGLU */
        T(w_up, "ffn_up.weight", d, hp->n_ff, 1, 1)
        B(b_up, "ffn_up.bias", hp->n_ff)
        T(w_down, "ffn_down.weight", hp->n_ff, d, 1, 1)
        B(b_down, "ffn_down.bias", d)
        T(ln_out, "layer_output_norm.weight", d, 0, 0, 1)
        T(ln_out_b, "layer_output_norm.bias", d, 0, 0, 1)
        L->no_rope = bert; /* bert: absolute positions, no RoPE */
#undef T
#undef B
    }
    /* refuse what this layout does not run (ffn_gate in bert, position_embd
     * in nomic-bert, classifier heads, ...) */
    const wlm_tensor *u = first_unknown_tensor(g, hp->n_layer, m->arch);
    if (!u && bert) {
        for (uint32_t l = 0; l < hp->n_layer && !u; l++) {
            wlm_fmt(name, sizeof name, "blk.%u.ffn_gate.weight", l);
            u = wlm_gguf_tensor(g, name);
        }
    }
    if (!u && !bert) u = wlm_gguf_tensor(g, "position_embd.weight");
    if (u)
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported tensor %.*s in this %s model (not part of the layout this engine runs)",
                        (int)WLM_MIN(u->name_len, 96u), u->name, wlm_arch_name(m->arch));
    return WLM_OK;
}

static wlm_status load_tensors(wlm_model *m, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    wlm_hparams *hp = &m->hp;
    uint64_t d = hp->n_embd, q_dim = (uint64_t)hp->n_head * hp->head_dim, kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t v_dim = (uint64_t)hp->n_head_kv * hp->head_dim_v, o_dim = (uint64_t)hp->n_head * hp->head_dim_v;
    wlm_status s;
    if (m->encoder) return load_encoder_tensors(m, err);
    if ((s = get_tensor(m, "token_embd.weight", d, hp->n_vocab, 1, 1, &m->tok_embd, err))) return s;
    if ((s = get_tensor(m, "output_norm.weight", d, 0, 1, 0, &m->out_norm, err))) return s;
    if ((s = get_tensor(m, "output.weight", d, hp->n_vocab, 0, 1, &m->output, err))) return s;
    if ((s = get_divisors(m, "rope_freqs.weight", hp->n_rot / 2, &m->rope_freqs, err))) return s;
    if ((s = get_divisors(m, "rope_factors_long.weight", hp->n_rot / 2, &m->rope_long, err))) return s;
    if ((s = get_divisors(m, "rope_factors_short.weight", hp->n_rot / 2, &m->rope_short, err))) return s;
    if ((m->rope_long || m->rope_short) && (m->rope_freqs || m->rope_scaling != WLM_ROPE_SCALING_NONE))
        return wlm_fail(err, WLM_ERR_FORMAT, "rope_factors_long/short.weight together with another RoPE scaling (rope_freqs.weight or rope.scaling.type)");
    hp->rope_scaled = m->rope_freqs != 0 || m->rope_scaling != WLM_ROPE_SCALING_NONE || m->rope_long || m->rope_short;
    hp->tied_output = m->output == 0;
    if (!m->output) m->output = m->tok_embd;
    char name[96];
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        wlm_layer *L = &m->layers[l];
#define T(field, suffix, n0, n1, mat)                \
    wlm_fmt(name, sizeof name, "blk.%u." suffix, l); \
    if ((s = get_tensor(m, name, n0, n1, 1, mat, &L->field, err))) return s;
#define B(field, suffix, n)                          \
    wlm_fmt(name, sizeof name, "blk.%u." suffix, l); \
    if ((s = get_bias(g, name, n, &L->field, err))) return s;
        T(attn_norm, "attn_norm.weight", d, 0, 0)
        wlm_tensor *views = m->views + 5 * l;
        wlm_fmt(name, sizeof name, "blk.%u.attn_qkv.weight", l);
        if (wlm_gguf_tensor(g, name)) { /* fused: the rows of Q, K, V in turn */
            const wlm_tensor *qkv;
            if ((s = get_tensor(m, name, d, q_dim + kv_dim + v_dim, 1, 1, &qkv, err))) return s;
            static const char *const sep[3] = { "attn_q.weight", "attn_k.weight", "attn_v.weight" };
            for (uint32_t i = 0; i < 3; i++) {
                wlm_fmt(name, sizeof name, "blk.%u.%s", l, sep[i]);
                if (wlm_gguf_tensor(g, name)) return wlm_fail(err, WLM_ERR_FORMAT, "both blk.%u.attn_qkv.weight and %s", l, name);
            }
            L->wq = row_view(&views[0], qkv, 0, q_dim);
            L->wk = row_view(&views[1], qkv, q_dim, kv_dim);
            L->wv = row_view(&views[2], qkv, q_dim + kv_dim, v_dim);
        } else {
            T(wq, "attn_q.weight", d, q_dim, 1)
            T(wk, "attn_k.weight", d, kv_dim, 1)
            T(wv, "attn_v.weight", d, v_dim, 1)
        }
        T(wo, "attn_output.weight", o_dim, d, 1)
        B(bq, "attn_q.bias", q_dim)
        B(bk, "attn_k.bias", kv_dim)
        B(bv, "attn_v.bias", v_dim)
        B(bo, "attn_output.bias", d)
        T(ffn_norm, "ffn_norm.weight", d, 0, 0)
        wlm_fmt(name, sizeof name, "blk.%u.ffn_gate.weight", l);
        if (m->arch == WLM_ARCH_PHI3 && !wlm_gguf_tensor(g, name)) { /* fused: gate rows, then up rows */
            const wlm_tensor *gu;
            wlm_fmt(name, sizeof name, "blk.%u.ffn_up.weight", l);
            if ((s = get_tensor(m, name, d, 2ull * hp->n_ff, 1, 1, &gu, err))) return s;
            L->w_gate = row_view(&views[3], gu, 0, hp->n_ff);
            L->w_up = row_view(&views[4], gu, hp->n_ff, hp->n_ff);
        } else {
            T(w_gate, "ffn_gate.weight", d, hp->n_ff, 1)
            T(w_up, "ffn_up.weight", d, hp->n_ff, 1)
        }
        T(w_down, "ffn_down.weight", hp->n_ff, d, 1)
        if (has_qk_norm(m->arch)) { /* qwen3, gemma3 */
            T(q_norm, "attn_q_norm.weight", hp->head_dim, 0, 0)
            T(k_norm, "attn_k_norm.weight", hp->head_dim, 0, 0)
        }
        L->no_rope = m->arch == WLM_ARCH_SMOLLM3 && (l + 1) % SMOLLM3_NO_ROPE_STEP == 0;
        if (is_gemma(m->arch)) {
            T(post_attn_norm, "post_attention_norm.weight", d, 0, 0)
            T(post_ffn_norm, "post_ffw_norm.weight", d, 0, 0)
            L->swa = m->n_swa && (m->arch == WLM_ARCH_GEMMA2 ? l % 2 == 0 : l % 6 != 5);
        } else {
            L->swa = m->n_swa != 0; /* llama (Mistral-style): every layer; n_swa is 0 for the others */
        }
#undef T
#undef B
    }
    /* every required tensor is there: refuse any tensor we would ignore */
    const wlm_tensor *u = first_unknown_tensor(g, hp->n_layer, m->arch);
    if (u)
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported tensor %.*s in this %s model (not part of the layout this engine runs)",
                        (int)WLM_MIN(u->name_len, 96u), u->name, wlm_arch_name(m->arch));
    return WLM_OK;
}

/* The fingerprint (wlm.h): metadata keys, types and values (split.* aside),
 * then per tensor its name, type and shape and three 32-byte samples of its
 * bytes (all of them when there are fewer than 96), read before any repack. */
static uint64_t model_fingerprint(const wlm_gguf *g) {
    uint64_t h = wlm_hash64(0, "wasmlm model fingerprint 1", 26);
    uint8_t w[8];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const wlm_kv *kv = &g->kv[i];
        if (kv->key_len >= 6 && wlm_memeq(kv->key, "split.", 6)) continue;
        h = wlm_hash64(h, kv->key, kv->key_len);
        wlm_wr32(w, kv->type);
        h = wlm_hash64(h, w, 4);
        h = wlm_hash64(h, kv->val, kv->val_bytes);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const wlm_tensor *t = &g->tensors[i];
        h = wlm_hash64(h, t->name, t->name_len);
        wlm_wr32(w, t->type);
        wlm_wr32(w + 4, t->n_dims);
        h = wlm_hash64(h, w, 8);
        for (uint32_t d = 0; d < 4; d++) {
            wlm_wr64(w, t->ne[d]);
            h = wlm_hash64(h, w, 8);
        }
        if (t->nbytes <= 96) {
            h = wlm_hash64(h, t->data, t->nbytes);
            continue;
        }
        h = wlm_hash64(h, t->data, 32);
        h = wlm_hash64(h, t->data + t->nbytes / 2 - 16, 32);
        h = wlm_hash64(h, t->data + t->nbytes - 32, 32);
    }
    return h;
}

uint64_t wlm_model_fingerprint(const wlm_model *m) { return m ? m->fingerprint : 0; }
uint32_t wlm_model_vocab_only(const wlm_model *m) { return m ? m->vocab_only : 0; }

wlm_status wlm_model_load_vocab(wlm_model **out, const uint8_t *data, uint64_t size, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out) return wlm_fail(err, WLM_ERR_ARG, "wlm_model_load_vocab: out is NULL");
    *out = 0;
    wlm_gguf g;
    wlm_status s = wlm_gguf_parse_meta(&g, data, size, err);
    if (s) return s;
    wlm_model *m = wlm_sys_alloc(sizeof(wlm_model));
    if (!m) {
        wlm_gguf_free(&g);
        return wlm_fail_nomem(err, "the model tables", sizeof(wlm_model));
    }
    wlm_memset(m, 0, sizeof *m);
    m->g = g;
    m->mem = m;
    m->vocab_only = 1;
    const char *s_val;
    uint32_t s_len;
    /* as load_hparams: a chat template that is not a string is a broken file */
    if ((s = wlm_kv_str(&m->g, "tokenizer.chat_template", 0, &s_val, &s_len, err))) goto fail;
    if ((s = wlm_vocab_load(&m->vocab, &m->g, err))) goto fail;
    m->hp.n_vocab = m->vocab.n;
    m->hp.bos_id = m->vocab.bos;
    m->hp.eos_id = m->vocab.eos;
    m->hp.unk_id = m->vocab.unk;
    m->hp.add_bos = m->vocab.add_bos;
    m->hp.add_space_prefix = m->vocab.add_space_prefix;
    /* the training context when the file names an architecture and says it (else 0) */
    const char *arch;
    uint32_t alen;
    wlm_err ignored;
    if (wlm_kv_str(&m->g, "general.architecture", 0, &arch, &alen, &ignored) == WLM_OK && arch && alen <= 64) {
        char kb[128];
        (void)wlm_kv_u32(&m->g, key(kb, arch, alen, "context_length"), 0, &m->hp.n_ctx_train, &ignored);
    }
    *out = m;
    return WLM_OK;
fail:
    wlm_model_free(m);
    return s;
}

wlm_status wlm_model_load(wlm_model **out, const uint8_t *data, uint64_t size, wlm_err *err) {
    const uint8_t *d[1] = { data };
    uint64_t z[1] = { size };
    return wlm_model_load_parts(out, d, z, 1, err);
}

/* Marks each F16 tensor whose halves are all finite (wlm_tensor.finite):
 * its products then skip the per-row check for infinities and NaNs, which
 * weights never change. One pass over the F16 bytes at load (a loop clang
 * vectorises). */
static void mark_finite_f16(wlm_gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        wlm_tensor *t = &g->tensors[i];
        if (t->type != GGML_F16 || ((uintptr_t)t->data & 1)) continue; /* (odd address: unmarked, the kernels check) */
        const uint16_t *h = (const uint16_t *)t->data;
        uint16_t mx = 0;
        for (uint64_t k = 0; k < t->nbytes / 2; k++) {
            uint16_t a = h[k] & 0x7fff;
            mx = a > mx ? a : mx;
        }
        t->finite = mx < 0x7c00;
    }
}

wlm_status wlm_model_load_parts(wlm_model **out, const uint8_t *const *data, const uint64_t *sizes, uint32_t n_parts, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out) return wlm_fail(err, WLM_ERR_ARG, "wlm_model_load: out is NULL");
    *out = 0;
    wlm_gguf g;
    wlm_status s = wlm_gguf_parse_parts(&g, data, sizes, n_parts, err);
    if (s) return s;
    wlm_model tmp;
    wlm_memset(&tmp, 0, sizeof tmp);
    tmp.g = g;
    if ((s = load_hparams(&tmp, err))) {
        wlm_gguf_free(&g);
        return s;
    }
    uint64_t layers_bytes = WLM_ALIGN_UP((uint64_t)tmp.hp.n_layer * sizeof(wlm_layer), 64);
    uint64_t bytes = sizeof(wlm_model) + 64 + layers_bytes + (uint64_t)tmp.hp.n_layer * 8 * sizeof(wlm_tensor);
    wlm_model *m = wlm_sys_alloc(bytes);
    if (!m) {
        wlm_gguf_free(&g);
        return wlm_fail_nomem(err, "the model tables", bytes);
    }
    *m = tmp;
    m->mem = m;
    m->layers = (wlm_layer *)((uint8_t *)m + WLM_ALIGN_UP(sizeof(wlm_model), 64));
    m->views = (wlm_tensor *)((uint8_t *)m->layers + layers_bytes);
    m->bias_views = m->views + 5 * (uint64_t)tmp.hp.n_layer;
    if ((s = wlm_vocab_load(&m->vocab, &m->g, err))) goto fail;
    m->hp.n_vocab = m->vocab.n;
    m->hp.bos_id = m->vocab.bos;
    m->hp.eos_id = m->vocab.eos;
    m->hp.unk_id = m->vocab.unk;
    m->hp.add_bos = m->vocab.add_bos;
    m->hp.add_space_prefix = m->vocab.add_space_prefix;
    mark_finite_f16(&m->g); /* (before load_tensors: the views it makes copy the flag) */
    if ((s = load_tensors(m, err))) goto fail;
    m->fingerprint = model_fingerprint(&m->g);
    *out = m;
    return WLM_OK;
fail:
    wlm_model_free(m);
    return s;
}

/* Rewrites the Q4_0 matrices into the q4g form. Only matrices that are
 * multiplied and nothing else: the token embeddings are read row by row
 * (and may be the output matrix too). */
static void repack_matrix(const wlm_model *m, const wlm_tensor *ct) {
    wlm_tensor *t = (wlm_tensor *)ct; /* the model owns its tensor table */
    if (!t || t->type != GGML_Q4_0 || t->q4g || t == m->tok_embd || t->ne[0] % 32) return;
    uint64_t rb = t->ne[0] / 32 * sizeof(block_q4_0);
    void (*repack)(uint8_t *, uint32_t) = wlm_kernels_best()->q4g_from_q4_0;
    for (uint64_t r = 0; r < t->nbytes / rb; r++) repack((uint8_t *)t->data + r * rb, (uint32_t)t->ne[0]);
    t->q4g = 1;
}

void wlm_model_repack_q4g(wlm_model *m) {
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const wlm_layer *L = &m->layers[l];
        const wlm_tensor *ws[] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
        for (uint32_t i = 0; i < 7; i++) repack_matrix(m, ws[i]);
    }
    repack_matrix(m, m->output); /* (skipped when tied: it is tok_embd; encoders have none) */
}

wlm_status wlm_model_load_inplace(wlm_model **out, uint8_t *data, uint64_t size, wlm_err *err) {
    uint8_t *d[1] = { data };
    uint64_t z[1] = { size };
    return wlm_model_load_parts_inplace(out, d, z, 1, err);
}

wlm_status wlm_model_load_parts_inplace(wlm_model **out, uint8_t *const *data, const uint64_t *sizes, uint32_t n_parts, wlm_err *err) {
    wlm_status s = wlm_model_load_parts(out, (const uint8_t *const *)data, sizes, n_parts, err);
    /* the SIMD builds; the scalar kernels would gain nothing */
    if (s == WLM_OK && wlm_kernels_best()->act_q4g) wlm_model_repack_q4g(*out);
    return s;
}

void wlm_model_free(wlm_model *m) {
    if (!m) return;
    wlm_vocab_free(&m->vocab);
    wlm_gguf_free(&m->g);
    wlm_sys_free(m->mem);
}

const wlm_hparams *wlm_model_hparams(const wlm_model *m) { return &m->hp; }

/* ---- metadata / tensor table access (for `info`) ---------------------------- */

uint32_t wlm_meta_count(const wlm_model *m) { return (uint32_t)m->g.n_kv; }
const char *wlm_meta_key(const wlm_model *m, uint32_t i, uint32_t *len) {
    if (i >= m->g.n_kv) {
        if (len) *len = 0;
        return 0;
    }
    if (len) *len = m->g.kv[i].key_len;
    return m->g.kv[i].key;
}
uint32_t wlm_meta_type(const wlm_model *m, uint32_t i) { return i < m->g.n_kv ? m->g.kv[i].type : 0xffffffffu; }
const uint8_t *wlm_meta_value(const wlm_model *m, uint32_t i, uint64_t *nbytes) {
    if (i >= m->g.n_kv) {
        if (nbytes) *nbytes = 0;
        return 0;
    }
    if (nbytes) *nbytes = m->g.kv[i].val_bytes;
    return m->g.kv[i].val;
}
uint32_t wlm_tensor_count(const wlm_model *m) { return (uint32_t)m->g.n_tensors; }
const char *wlm_tensor_name(const wlm_model *m, uint32_t i, uint32_t *len) {
    if (i >= m->g.n_tensors) {
        if (len) *len = 0;
        return 0;
    }
    if (len) *len = m->g.tensors[i].name_len;
    return m->g.tensors[i].name;
}
uint32_t wlm_tensor_type(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].type : 0xffffffffu; }
uint32_t wlm_tensor_ndims(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].n_dims : 0; }
uint64_t wlm_tensor_dim(const wlm_model *m, uint32_t i, uint32_t d) { return i < m->g.n_tensors && d < 4 ? m->g.tensors[i].ne[d] : 0; }
uint64_t wlm_tensor_offset(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].offset : 0; }
uint32_t wlm_tensor_part(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].part : 0; }
uint32_t wlm_model_n_parts(const wlm_model *m) { return m->g.n_parts; }
