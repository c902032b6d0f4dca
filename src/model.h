/* A loaded model (model.c): hyperparameters, architecture, RoPE scaling and
 * the weight tensors of every layer, all views into the GGUF bytes. */
#ifndef WLM_MODEL_H
#define WLM_MODEL_H

#include "gguf.h"
#include "vocab.h"

typedef struct wlm_layer {
    const wlm_tensor *attn_norm, *wq, *wk, *wv, *wo;
    const wlm_tensor *bq, *bk, *bv, *bo; /* optional F32 biases (qwen2 has q/k/v), NULL if absent */
    const wlm_tensor *ffn_norm, *w_gate, *w_up, *w_down;
    const wlm_tensor *q_norm, *k_norm; /* qwen3, gemma3: per-head RMSNorm weights [head_dim] of Q and K, else NULL */
    /* gemma2 / gemma3: norms of the attention and FFN outputs before they are
     * added to the residual, else NULL */
    const wlm_tensor *post_attn_norm, *post_ffn_norm;
    uint32_t no_rope; /* smollm3: 1 when this layer's Q and K are not rotated */
    uint32_t swa;     /* 1: a sliding-window layer (sees the last n_swa positions) */
    /* bert / nomic-bert (post-norm encoders, wlm_model.encoder): the
     * LayerNorms after attention (attn_output_norm) and after the FFN
     * (layer_output_norm), weight and bias each; the FFN's biases (bert).
     * NULL in the decoders */
    const wlm_tensor *ln_attn, *ln_attn_b, *ln_out, *ln_out_b;
    const wlm_tensor *b_up, *b_down;
} wlm_layer;

enum { WLM_ARCH_LLAMA = 0,
       WLM_ARCH_QWEN2 = 1,
       WLM_ARCH_QWEN3 = 2,
       WLM_ARCH_SMOLLM3 = 3,
       WLM_ARCH_GRANITE = 4,
       WLM_ARCH_GEMMA2 = 5,
       WLM_ARCH_GEMMA3 = 6,
       WLM_ARCH_PHI3 = 7,
       WLM_ARCH_BERT = 8,
       WLM_ARCH_NOMIC_BERT = 9 };
enum { WLM_ROPE_SCALING_NONE = 0,
       WLM_ROPE_SCALING_LINEAR = 1,
       WLM_ROPE_SCALING_LLAMA3 = 2 };

struct wlm_model {
    wlm_gguf g;
    wlm_hparams hp;
    uint32_t arch; /* WLM_ARCH_* */
    const wlm_tensor *tok_embd, *out_norm, *output;
    const wlm_tensor *rope_freqs; /* optional [n_rot/2] F32 divisors of the RoPE frequencies */
    /* rope.scaling.* metadata: used when rope_freqs is absent */
    uint32_t rope_scaling; /* WLM_ROPE_SCALING_* */
    float rope_scale_factor, rope_low_freq_factor, rope_high_freq_factor;
    uint32_t rope_orig_ctx;
    /* x = embed * embd_scale (granite: embedding_scale; gemma: sqrt(n_embd));
     * each block adds resid_scale * its output (granite); attention scores use
     * attn_scale instead of 1/sqrt(head_dim) when it is not 0 (granite:
     * attention.scale; gemma: 1/sqrt(query_pre_attn_scalar)); logits are
     * divided by logit_scale (granite). 1 (attn_scale: 0) elsewhere. */
    float embd_scale, resid_scale, attn_scale, logit_scale;
    /* phi3 LongRoPE: per-frequency divisors for contexts up to
     * rope_orig_ctx (short) and beyond it (long), and the factor that
     * scales RoPE's cos and sin (rope.scaling.attn_factor, 1 when absent) */
    const wlm_tensor *rope_long, *rope_short;
    float rope_attn_factor;
    /* gemma2 / gemma3 (0 for the others) */
    float attn_softcap, final_softcap; /* s -> cap * tanh(s / cap) on attention scores / logits; 0: none */
    /* attention.sliding_window: a query on a sliding-window layer
     * (wlm_layer.swa) sees the last n_swa positions, itself included; 0 = no
     * window. llama (Mistral-style): every layer; gemma2: even layers;
     * gemma3: five of every six */
    uint32_t n_swa;
    float rope_base_swa; /* RoPE base of the sliding-window layers (gemma3: 10000, unscaled); 0: same as the others */
    uint32_t ffn_gelu;   /* 1: GeGLU, gelu(gate) * up with tanh-approximated GELU; 0: SwiGLU */
    wlm_tensor *views;   /* fused tensors cut into Q/K/V and gate/up rows (phi3, nomic-bert) */
    /* encoders and embeddings (model.c: load_encoder_tensors; embed.c) */
    uint32_t encoder; /* 1: bert / nomic-bert: post-norm LayerNorm blocks, no output layer */
    uint32_t causal;  /* attention.causal: 0 = a token sees every position of its sequence */
    uint32_t pooling; /* pooling_type of the file (WLM_POOLING_*; NONE when absent) */
    float ln_eps;     /* attention.layer_norm_epsilon (encoders) */
    /* encoders: token-type row 0 and absolute positions added to the
     * embeddings (bert: position_embd; NULL without), then the embedding
     * LayerNorm (token_embd_norm weight and bias) */
    const wlm_tensor *type_embd, *pos_embd, *tok_norm, *tok_norm_b;
    wlm_tensor *bias_views; /* a fused attn_qkv.bias cut into Q/K/V parts (3 per layer) */
    wlm_layer *layers;
    wlm_vocab vocab;
    void *mem;
    uint32_t vocab_only;  /* wlm_model_load_vocab: metadata and vocabulary only, no layers */
    uint64_t fingerprint; /* wlm_model_fingerprint, computed at load (0 vocabulary-only) */
};

/* the GGUF general.architecture name of a WLM_ARCH_* value */
const char *wlm_arch_name(uint32_t arch);

/* The divisor of RoPE frequency i (0 <= i < n_rot/2) for model m: 1 without
 * scaling; rope_freqs.weight[i] when the file has it; otherwise computed
 * from rope.scaling.* (linear: the factor; llama3: by wavelength). */
double wlm_rope_freq_divisor(const wlm_model *m, uint32_t i, double theta);
/* phi3 LongRoPE: the divisors a context of n_ctx positions uses (the long
 * factors past rope.scaling.original_context_length), NULL without them */
const float *wlm_rope_factors(const wlm_model *m, uint32_t n_ctx);

/* repacks a loaded model's Q4_0 matrices into q4g (wlm_model_load_inplace
 * does it in the SIMD builds; tests call it to run the q4g paths anywhere) */
void wlm_model_repack_q4g(wlm_model *m);

#endif
