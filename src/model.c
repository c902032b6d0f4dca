/* llama architecture: hyper-parameters from GGUF metadata and the tensor map.
 * Every tensor the forward pass uses is looked up here, once, with its shape
 * and type checked, so the forward pass never meets a surprise. */
#include "internal.h"

static const char *key(char *buf, const char *arch, uint32_t alen, const char *suffix) {
    wlm_fmt(buf, 128, "%.*s.%s", (int)alen, arch, suffix);
    return buf;
}

static int type_ok_for_matmul(uint32_t t) {
    return t == GGML_F32 || t == GGML_F16 || t == GGML_BF16 || t == GGML_Q8_0 || t == GGML_Q4_0;
}

/* Finds a tensor, checks its shape (ne0, ne1; ne1 = 0 for vectors) and type. */
static wlm_status get_tensor(const wlm_gguf *g, const char *name, uint64_t ne0, uint64_t ne1, int required,
                             int matrix, const wlm_tensor **out, wlm_err *err) {
    const wlm_tensor *t = wlm_gguf_tensor(g, name);
    *out = t;
    if (!t) return required ? wlm_fail(err, WLM_ERR_FORMAT, "missing tensor %s", name) : WLM_OK;
    uint64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return wlm_fail(err, WLM_ERR_FORMAT, "tensor %s has shape [%llu, %llu], expected [%llu, %llu]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)ne0, (unsigned long long)want1);
    int ok = matrix ? type_ok_for_matmul(t->type) : (t->type == GGML_F32);
    if (!ok) return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported tensor type %s in %s", wlm_type_name(t->type), name);
    return WLM_OK;
}

static wlm_status load_hparams(wlm_model *m, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    wlm_hparams *hp = &m->hp;
    const char *arch; uint32_t alen; wlm_status s;
    char kb[128];
    if ((s = wlm_kv_str(g, "general.architecture", 1, &arch, &alen, err))) return s;
    if (!wlm_str_is(arch, alen, "llama"))
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported architecture '%.*s' (supported: llama)", (int)alen, arch);
    hp->n_ctx_train = 2048; hp->rope_freq_base = 10000.0f; hp->rms_eps = 1e-5f;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "embedding_length"), 1, &hp->n_embd, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "block_count"), 1, &hp->n_layer, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "feed_forward_length"), 1, &hp->n_ff, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.head_count"), 1, &hp->n_head, err))) return s;
    hp->n_head_kv = hp->n_head;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "attention.head_count_kv"), 0, &hp->n_head_kv, err))) return s;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "context_length"), 0, &hp->n_ctx_train, err))) return s;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "rope.freq_base"), 0, &hp->rope_freq_base, err))) return s;
    if ((s = wlm_kv_f32(g, key(kb, arch, alen, "attention.layer_norm_rms_epsilon"), 0, &hp->rms_eps, err))) return s;
    if (hp->n_embd == 0 || hp->n_embd > 65536) return wlm_fail(err, WLM_ERR_FORMAT, "embedding_length %u out of range", hp->n_embd);
    if (hp->n_layer == 0 || hp->n_layer > 1024) return wlm_fail(err, WLM_ERR_FORMAT, "block_count %u out of range", hp->n_layer);
    if (hp->n_ff == 0 || hp->n_ff > 1048576) return wlm_fail(err, WLM_ERR_FORMAT, "feed_forward_length %u out of range", hp->n_ff);
    if (hp->n_head == 0 || hp->n_head > hp->n_embd || hp->n_embd % hp->n_head)
        return wlm_fail(err, WLM_ERR_FORMAT, "head_count %u does not divide embedding_length %u", hp->n_head, hp->n_embd);
    if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv)
        return wlm_fail(err, WLM_ERR_FORMAT, "head_count_kv %u does not divide head_count %u", hp->n_head_kv, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    hp->n_rot = hp->head_dim;
    if ((s = wlm_kv_u32(g, key(kb, arch, alen, "rope.dimension_count"), 0, &hp->n_rot, err))) return s;
    if (hp->n_rot > hp->head_dim || (hp->n_rot & 1))
        return wlm_fail(err, WLM_ERR_FORMAT, "rope.dimension_count %u must be even and at most the head size %u", hp->n_rot, hp->head_dim);
    if (hp->n_ctx_train == 0) hp->n_ctx_train = 2048;
    if (!(hp->rope_freq_base > 0)) return wlm_fail(err, WLM_ERR_FORMAT, "rope.freq_base must be positive");
    if (!(hp->rms_eps >= 0)) return wlm_fail(err, WLM_ERR_FORMAT, "layer_norm_rms_epsilon must not be negative");
    return WLM_OK;
}

static wlm_status load_tensors(wlm_model *m, wlm_err *err) {
    const wlm_gguf *g = &m->g;
    wlm_hparams *hp = &m->hp;
    uint64_t d = hp->n_embd, q_dim = (uint64_t)hp->n_head * hp->head_dim, kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    wlm_status s;
    if ((s = get_tensor(g, "token_embd.weight", d, hp->n_vocab, 1, 1, &m->tok_embd, err))) return s;
    if ((s = get_tensor(g, "output_norm.weight", d, 0, 1, 0, &m->out_norm, err))) return s;
    if ((s = get_tensor(g, "output.weight", d, hp->n_vocab, 0, 1, &m->output, err))) return s;
    hp->tied_output = m->output == 0;
    if (!m->output) m->output = m->tok_embd;
    char name[96];
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        wlm_layer *L = &m->layers[l];
#define T(field, suffix, n0, n1, mat) \
        wlm_fmt(name, sizeof name, "blk.%u." suffix, l); \
        if ((s = get_tensor(g, name, n0, n1, 1, mat, &L->field, err))) return s;
        T(attn_norm, "attn_norm.weight", d, 0, 0)
        T(wq, "attn_q.weight", d, q_dim, 1)
        T(wk, "attn_k.weight", d, kv_dim, 1)
        T(wv, "attn_v.weight", d, kv_dim, 1)
        T(wo, "attn_output.weight", q_dim, d, 1)
        T(ffn_norm, "ffn_norm.weight", d, 0, 0)
        T(w_gate, "ffn_gate.weight", d, hp->n_ff, 1)
        T(w_up, "ffn_up.weight", d, hp->n_ff, 1)
        T(w_down, "ffn_down.weight", hp->n_ff, d, 1)
#undef T
    }
    return WLM_OK;
}

wlm_status wlm_model_load(wlm_model **out, const uint8_t *data, uint64_t size, wlm_err *err) {
    wlm_err dummy; if (!err) err = &dummy;
    if (!out) return wlm_fail(err, WLM_ERR_ARG, "wlm_model_load: out is NULL");
    *out = 0;
    wlm_gguf g;
    wlm_status s = wlm_gguf_parse(&g, data, size, err);
    if (s) return s;
    wlm_model tmp; wlm_memset(&tmp, 0, sizeof tmp);
    tmp.g = g;
    if ((s = load_hparams(&tmp, err))) { wlm_gguf_free(&g); return s; }
    uint64_t bytes = sizeof(wlm_model) + 64 + (uint64_t)tmp.hp.n_layer * sizeof(wlm_layer);
    wlm_model *m = wlm_sys_alloc(bytes);
    if (!m) { wlm_gguf_free(&g); return wlm_fail(err, WLM_ERR_NOMEM, "needs %llu bytes of memory, limit %llu", (unsigned long long)bytes, (unsigned long long)wlm_sys_limit()); }
    *m = tmp;
    m->mem = m;
    m->layers = (wlm_layer *)((uint8_t *)m + WLM_ALIGN_UP(sizeof(wlm_model), 64));
    if ((s = wlm_vocab_load(&m->vocab, &m->g, err))) goto fail;
    m->hp.n_vocab = m->vocab.n;
    m->hp.bos_id = m->vocab.bos; m->hp.eos_id = m->vocab.eos; m->hp.unk_id = m->vocab.unk;
    m->hp.add_bos = m->vocab.add_bos; m->hp.add_space_prefix = m->vocab.add_space_prefix;
    if ((s = load_tensors(m, err))) goto fail;
    *out = m;
    return WLM_OK;
fail:
    wlm_model_free(m);
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
    if (i >= m->g.n_kv) { if (len) *len = 0; return 0; }
    if (len) *len = m->g.kv[i].key_len;
    return m->g.kv[i].key;
}
uint32_t wlm_meta_type(const wlm_model *m, uint32_t i) { return i < m->g.n_kv ? m->g.kv[i].type : 0xffffffffu; }
const uint8_t *wlm_meta_value(const wlm_model *m, uint32_t i, uint64_t *nbytes) {
    if (i >= m->g.n_kv) { if (nbytes) *nbytes = 0; return 0; }
    if (nbytes) *nbytes = m->g.kv[i].val_bytes;
    return m->g.kv[i].val;
}
uint32_t wlm_tensor_count(const wlm_model *m) { return (uint32_t)m->g.n_tensors; }
const char *wlm_tensor_name(const wlm_model *m, uint32_t i, uint32_t *len) {
    if (i >= m->g.n_tensors) { if (len) *len = 0; return 0; }
    if (len) *len = m->g.tensors[i].name_len;
    return m->g.tensors[i].name;
}
uint32_t wlm_tensor_type(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].type : 0xffffffffu; }
uint32_t wlm_tensor_ndims(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].n_dims : 0; }
uint64_t wlm_tensor_dim(const wlm_model *m, uint32_t i, uint32_t d) { return i < m->g.n_tensors && d < 4 ? m->g.tensors[i].ne[d] : 0; }
uint64_t wlm_tensor_offset(const wlm_model *m, uint32_t i) { return i < m->g.n_tensors ? m->g.tensors[i].offset : 0; }
