/* Embeddings (src/embed.c) and the encoder architectures (bert,
 * nomic-bert) on tiny models built here: a batch of texts gives each text
 * the bits it gets alone; non-causal attention lets the first token see the
 * last, causal attention does not; a causal text split over passes gives
 * the bits of one pass; pooling and normalization; every refusal names
 * its cause. (The values themselves are checked against a plain
 * double-precision forward pass in tests/js/embed.test.mjs.) */
#include <stdint.h>
#include "tst.h"
#include "gguf_build.h"
#include "../../src/internal.h"

#define W "\xe2\x96\x81"
static const char *const k_pieces[] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", W "a", W "b", "a", "b", W "c", "c", W "." };
#define NV ((uint32_t)(sizeof k_pieces / sizeof k_pieces[0]))
enum { D = 32,
       NL = 2,
       NH = 4,
       NFF = 48,
       NCTX = 64 };

/* opts: the layout variations refused or tested */
enum { OPT_GATE_IN_BERT = 1,
       OPT_NO_OUT_NORM = 2,
       OPT_POOL_RANK = 4,
       OPT_POOL_CLS = 8,
       OPT_FUSED_BIAS = 16 };

static void tiny_bert(gb_file *f, int nomic, int opts) {
    gb_init(f);
    const char *a = nomic ? "nomic-bert" : "bert";
    char k[96];
    uint32_t seed = nomic ? 4242 : 777;
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", a, s), k)
    gb_set_str(f, "general.architecture", a);
    gb_set_u32(f, KEY("context_length"), NCTX);
    gb_set_u32(f, KEY("embedding_length"), D);
    gb_set_u32(f, KEY("block_count"), NL);
    gb_set_u32(f, KEY("feed_forward_length"), NFF);
    gb_set_u32(f, KEY("attention.head_count"), NH);
    gb_set_f32(f, KEY("attention.layer_norm_epsilon"), 1e-12f);
    gb_set_bool(f, KEY("attention.causal"), 0);
    if (opts & (OPT_POOL_RANK | OPT_POOL_CLS)) gb_set_u32(f, KEY("pooling_type"), opts & OPT_POOL_RANK ? 4 : 2);
    if (nomic) gb_set_f32(f, KEY("rope.freq_base"), 1000.0f);
#undef KEY
    gb_set_str(f, "tokenizer.ggml.model", "bert");
    gb_buf *b = gb_kv_set(f, "tokenizer.ggml.tokens", GB_ARRAY);
    gb_u32(b, GB_STRING);
    gb_u64(b, NV);
    for (uint32_t i = 0; i < NV; i++) gb_str(b, k_pieces[i]);
    b = gb_kv_set(f, "tokenizer.ggml.token_type", GB_ARRAY);
    gb_u32(b, GB_I32);
    gb_u64(b, NV);
    for (uint32_t i = 0; i < NV; i++) gb_u32(b, i < 5 ? 3 : 1);
    gb_set_u32(f, "tokenizer.ggml.token_type_count", 2);
    gb_set_u32(f, "tokenizer.ggml.unknown_token_id", 1);
    gb_set_u32(f, "tokenizer.ggml.cls_token_id", 2);
    gb_set_u32(f, "tokenizer.ggml.seperator_token_id", 3);
    char name[96];
    gb_f32_tensor(f, "token_embd.weight", D, NV, &seed, 0, 1);
    gb_f32_tensor(f, "token_types.weight", D, 2, &seed, 0, 1);
    if (!nomic) gb_f32_tensor(f, "position_embd.weight", D, NCTX, &seed, 0, 1);
    gb_f32_tensor(f, "token_embd_norm.weight", D, 0, &seed, 1.0f, 0);
    gb_f32_tensor(f, "token_embd_norm.bias", D, 0, &seed, 0, 1);
    for (uint32_t l = 0; l < NL; l++) {
        /* T() is a statement of its own, without a semicolon: kept as written */
        /* clang-format off */
#define T(suffix, n0, n1, fill, rnd) snprintf(name, sizeof name, "blk.%u." suffix, l); gb_f32_tensor(f, name, n0, n1, &seed, fill, rnd);
        if (nomic) {
            T("attn_qkv.weight", D, 3 * D, 0, 1)
            if (opts & OPT_FUSED_BIAS) { T("attn_qkv.bias", 3 * D, 0, 0, 1) }
        } else {
            T("attn_q.weight", D, D, 0, 1) T("attn_q.bias", D, 0, 0, 1)
            T("attn_k.weight", D, D, 0, 1) T("attn_k.bias", D, 0, 0, 1)
            T("attn_v.weight", D, D, 0, 1) T("attn_v.bias", D, 0, 0, 1)
        }
        T("attn_output.weight", D, D, 0, 1)
        if (!nomic) { T("attn_output.bias", D, 0, 0, 1) }
        T("attn_output_norm.weight", D, 0, 1.0f, 0) T("attn_output_norm.bias", D, 0, 0, 1)
        if (nomic || (opts & OPT_GATE_IN_BERT)) { T("ffn_gate.weight", D, NFF, 0, 1) }
        T("ffn_up.weight", D, NFF, 0, 1)
        T("ffn_down.weight", NFF, D, 0, 1)
        if (!nomic) { T("ffn_up.bias", NFF, 0, 0, 1) T("ffn_down.bias", D, 0, 0, 1) }
        if (!(opts & OPT_NO_OUT_NORM)) { T("layer_output_norm.weight", D, 0, 1.0f, 0) T("layer_output_norm.bias", D, 0, 0, 1) }
#undef T
        /* clang-format on */
    }
}

typedef struct loaded {
    wlm_model *m;
    unsigned char *bytes;
} loaded;

static wlm_status load_file(gb_file *f, loaded *L, wlm_err *err) {
    size_t size;
    unsigned char *bytes = gb_serialize(f, &size);
    L->bytes = tst_sys_copy(bytes, size);
    free(bytes);
    gb_free(f);
    L->m = NULL;
    wlm_status s = wlm_model_load(&L->m, L->bytes, size, err);
    if (s) {
        wlm_sys_free(L->bytes);
        L->bytes = NULL;
    }
    return s;
}
static void unload(loaded *L) {
    wlm_model_free(L->m);
    wlm_sys_free(L->bytes);
}

static wlm_ctx *new_ctx(wlm_model *m, uint32_t n_batch, uint32_t n_seq) {
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = NCTX;
    p.n_batch = n_batch;
    p.n_seq_max = n_seq;
    return tst_ctx_new(m, &p);
}

/* four texts of different lengths, [CLS] ... [SEP] as the tokenizer frames them */
static const int32_t k_texts[] = { 2, 5, 8, 3, /**/ 2, 9, 10, 6, 7, 11, 3, /**/ 2, 6, 3, /**/ 2, 5, 7, 7, 8, 9, 10, 11, 6, 5, 3 };
static const uint32_t k_lens[] = { 4, 7, 3, 11 };

static int embed(wlm_ctx *c, const int32_t *tok, const uint32_t *lens, uint32_t n, uint32_t pooling, uint32_t flags, float *out) {
    wlm_err err;
    wlm_status s = wlm_embed(c, tok, lens, n, pooling, flags, out, &err);
    if (s) fprintf(stderr, "  embed: %s\n", err.msg);
    return s == WLM_OK;
}

static void check_batch_equals_alone(int nomic) {
    gb_file *f = malloc(sizeof *f);
    tiny_bert(f, nomic, 0);
    loaded L;
    wlm_err err;
    REQUIRE(load_file(f, &L, &err) == WLM_OK);
    free(f);
    CHECK(wlm_model_causal(L.m) == 0 && wlm_model_pooling(L.m) == WLM_POOLING_MEAN);
    wlm_ctx *batch = new_ctx(L.m, 64, 4), *one = new_ctx(L.m, 16, 1), *two = new_ctx(L.m, 12, 2);
    REQUIRE(batch && one && two);
    static const uint32_t pools[3] = { WLM_POOLING_MEAN, WLM_POOLING_CLS, WLM_POOLING_LAST };
    for (int p = 0; p < 3; p++) {
        float all[4 * D], alone[4 * D], two_at_a_time[4 * D];
        REQUIRE(embed(batch, k_texts, k_lens, 4, pools[p], 0, all));
        uint32_t off = 0;
        for (int i = 0; i < 4; i++) {
            REQUIRE(embed(one, k_texts + off, &k_lens[i], 1, pools[p], 0, alone + i * D));
            off += k_lens[i];
        }
        /* n_batch 12, two sequences: the 11-token text gets a pass of its own */
        REQUIRE(embed(two, k_texts, k_lens, 4, pools[p], 0, two_at_a_time));
        CHECKF(memcmp(all, alone, sizeof all) == 0, "%s pooling %u: a batch differs from one text at a time", nomic ? "nomic-bert" : "bert", pools[p]);
        CHECKF(memcmp(all, two_at_a_time, sizeof all) == 0, "%s pooling %u: packing changes the vectors", nomic ? "nomic-bert" : "bert", pools[p]);
        double norm = 0;
        for (int e = 0; e < D; e++) norm += all[e] * all[e];
        CHECK(norm > 0.5 && isfinite(norm));
    }
    /* normalize: unit vectors in the direction of the raw ones */
    float raw[4 * D], unit[4 * D];
    REQUIRE(embed(batch, k_texts, k_lens, 4, WLM_POOLING_MEAN, 0, raw));
    REQUIRE(embed(batch, k_texts, k_lens, 4, WLM_POOLING_MEAN, WLM_EMBED_NORMALIZE, unit));
    for (int i = 0; i < 4; i++) {
        double n2 = 0, dot = 0, r2 = 0;
        for (int e = 0; e < D; e++) {
            n2 += unit[i * D + e] * unit[i * D + e];
            dot += unit[i * D + e] * raw[i * D + e];
            r2 += raw[i * D + e] * raw[i * D + e];
        }
        CHECKF(fabs(n2 - 1) < 1e-5 && fabs(dot / sqrt(r2) - 1) < 1e-5, "text %d: |v|^2 %g, cos %g", i, n2, dot / sqrt(r2));
    }
    /* a one-token text: mean, cls and last are that token's state */
    int32_t tok = 5;
    uint32_t len1 = 1;
    float mv[D], cv[D], lv[D];
    REQUIRE(embed(batch, &tok, &len1, 1, WLM_POOLING_MEAN, 0, mv));
    REQUIRE(embed(batch, &tok, &len1, 1, WLM_POOLING_CLS, 0, cv));
    REQUIRE(embed(batch, &tok, &len1, 1, WLM_POOLING_LAST, 0, lv));
    CHECK(memcmp(cv, lv, sizeof cv) == 0);
    for (int e = 0; e < D; e++) CHECK(fabsf(mv[e] - cv[e]) <= 1e-6f * fabsf(cv[e]) + 1e-7f);
    /* non-causal: the last token changes what the first one computes */
    int32_t t1[4] = { 2, 5, 6, 3 }, t2[4] = { 2, 5, 9, 3 };
    uint32_t len4 = 4;
    float c1[D], c2[D];
    REQUIRE(embed(batch, t1, &len4, 1, WLM_POOLING_CLS, 0, c1));
    REQUIRE(embed(batch, t2, &len4, 1, WLM_POOLING_CLS, 0, c2));
    CHECK(memcmp(c1, c2, sizeof c1) != 0);
    /* the context stays usable and empty */
    CHECK(wlm_ctx_free_slots(batch) == NCTX && wlm_seq_pos(batch, 0) == 0);
    wlm_ctx_free(batch);
    wlm_ctx_free(one);
    wlm_ctx_free(two);
    unload(&L);
}

TEST(embed_bert_batch_equals_alone) { check_batch_equals_alone(0); }
TEST(embed_nomic_bert_batch_equals_alone) { check_batch_equals_alone(1); }

/* a decoder: causal, last-token pooling by default; a text longer than
 * n_batch spans passes and gets the bits of one pass */
TEST(embed_decoder_causal_chunks) {
    gb_file *f = malloc(sizeof *f);
    gb_llama p = { D, NL, NH, 2, NFF, 0, 0, 99 };
    gb_tiny_llama(f, &p);
    loaded L;
    wlm_err err;
    REQUIRE(load_file(f, &L, &err) == WLM_OK);
    free(f);
    CHECK(wlm_model_causal(L.m) == 1 && wlm_model_pooling(L.m) == WLM_POOLING_LAST);
    int32_t toks[19] = { 1, 5, 8, 9, 10, 11, 12, 6, 7, 13, 14, 15, /**/ 1, 9, 9, 10, /**/ 1, 8, 12 };
    uint32_t lens[3] = { 12, 4, 3 };
    wlm_ctx *big = new_ctx(L.m, 64, 3), *small = new_ctx(L.m, 5, 2);
    REQUIRE(big && small);
    static const uint32_t pools[3] = { WLM_POOLING_MEAN, WLM_POOLING_CLS, WLM_POOLING_LAST };
    for (int k = 0; k < 3; k++) {
        float a[3 * D], b[3 * D];
        REQUIRE(embed(big, toks, lens, 3, pools[k], 0, a));
        REQUIRE(embed(small, toks, lens, 3, pools[k], 0, b));
        CHECKF(memcmp(a, b, sizeof a) == 0, "pooling %u: passes of 5 tokens differ from one pass", pools[k]);
    }
    /* causal: a later token does not change the first token's state, and the
     * last token's state is that of the logits' position */
    int32_t t1[4] = { 1, 5, 6, 7 }, t2[4] = { 1, 5, 6, 9 };
    uint32_t len4 = 4;
    float c1[D], c2[D], l1[D], l2[D];
    REQUIRE(embed(big, t1, &len4, 1, WLM_POOLING_CLS, 0, c1));
    REQUIRE(embed(big, t2, &len4, 1, WLM_POOLING_CLS, 0, c2));
    REQUIRE(embed(big, t1, &len4, 1, WLM_POOLING_LAST, 0, l1));
    REQUIRE(embed(big, t2, &len4, 1, WLM_POOLING_LAST, 0, l2));
    CHECK(memcmp(c1, c2, sizeof c1) == 0 && memcmp(l1, l2, sizeof l1) != 0);
    /* generation still works after embeddings (the cache was emptied) */
    CHECK(wlm_eval(big, t1, 4, &err) == WLM_OK && wlm_ctx_pos(big) == 4);
    /* the last hidden state times the output matrix gives the logits */
    const float *lg = wlm_ctx_logits(big);
    const float *wout = (const float *)L.m->output->data;
    double worst = 0;
    for (uint32_t v = 0; v < L.m->hp.n_vocab; v++) {
        double s = 0;
        for (int e = 0; e < D; e++) s += (double)wout[v * D + e] * l1[e];
        if (fabs(s - lg[v]) > worst) worst = fabs(s - lg[v]);
    }
    CHECKF(worst < 1e-4, "logits vs output . last hidden state: %g", worst);
    wlm_ctx_free(big);
    wlm_ctx_free(small);
    unload(&L);
}

TEST(embed_refusals) {
    gb_file *f = malloc(sizeof *f);
    loaded L;
    wlm_err err;
    /* a bert layout with a gate: refused by name */
    tiny_bert(f, 0, OPT_GATE_IN_BERT);
    CHECK(load_file(f, &L, &err) == WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "blk.0.ffn_gate.weight") && strstr(err.msg, "bert"), "%s", err.msg);
    /* a missing norm */
    tiny_bert(f, 1, OPT_NO_OUT_NORM);
    CHECK(load_file(f, &L, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "missing tensor blk.0.layer_output_norm.weight") != NULL, "%s", err.msg);
    /* rank pooling (a reranker's classifier) */
    tiny_bert(f, 0, OPT_POOL_RANK);
    CHECK(load_file(f, &L, &err) == WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "pooling_type 4") != NULL, "%s", err.msg);
    /* an unknown architecture names what is supported, encoders included */
    tiny_bert(f, 0, 0);
    gb_set_str(f, "general.architecture", "jina-bert-v2");
    CHECK(load_file(f, &L, &err) == WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "unsupported architecture 'jina-bert-v2'") && strstr(err.msg, "bert, nomic-bert"), "%s", err.msg);
    /* the file's pooling type; a fused Q/K/V bias */
    tiny_bert(f, 1, OPT_POOL_CLS | OPT_FUSED_BIAS);
    REQUIRE(load_file(f, &L, &err) == WLM_OK);
    CHECK(wlm_model_pooling(L.m) == WLM_POOLING_CLS && L.m->layers[1].bk && L.m->layers[1].bk->ne[0] == D);
    CHECK(((const float *)L.m->layers[1].bv->data)[0] == ((const float *)L.m->layers[1].bq->data)[2 * D]);
    unload(&L);

    tiny_bert(f, 0, 0);
    REQUIRE(load_file(f, &L, &err) == WLM_OK);
    free(f);
    wlm_ctx *c = new_ctx(L.m, 8, 2);
    REQUIRE(c);
    int32_t toks[12] = { 2, 5, 6, 7, 8, 9, 10, 11, 5, 6, 7, 3 };
    uint32_t lens[2] = { 3, 9 };
    float out[2 * D];
    /* no logits from an encoder */
    CHECK(wlm_eval(c, toks, 3, &err) == WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "no output layer") && strstr(err.msg, "wlm_embed"), "%s", err.msg);
    /* a text longer than one batch: non-causal needs it whole */
    CHECK(wlm_embed(c, toks, lens, 2, WLM_POOLING_MODEL, 0, out, &err) == WLM_ERR_ARG);
    CHECKF(strstr(err.msg, "text 1 has 9 tokens") && strstr(err.msg, "n_batch"), "%s", err.msg);
    lens[1] = 0;
    CHECK(wlm_embed(c, toks, lens, 2, WLM_POOLING_MODEL, 0, out, &err) == WLM_ERR_ARG);
    CHECKF(strstr(err.msg, "text 1 has no tokens") != NULL, "%s", err.msg);
    lens[1] = 2;
    toks[4] = 99;
    CHECK(wlm_embed(c, toks, lens, 2, WLM_POOLING_MODEL, 0, out, &err) == WLM_ERR_ARG);
    CHECKF(strstr(err.msg, "text 1: token id 99 out of range") != NULL, "%s", err.msg);
    toks[4] = 8;
    CHECK(wlm_embed(c, toks, lens, 2, 5, 0, out, &err) == WLM_ERR_ARG);
    CHECK(wlm_embed(c, toks, lens, 2, WLM_POOLING_NONE, 0, out, &err) == WLM_ERR_ARG);
    CHECK(wlm_embed(c, toks, lens, 2, WLM_POOLING_MEAN, 6, out, &err) == WLM_ERR_ARG);
    CHECK(wlm_embed(c, toks, lens, 2, WLM_POOLING_MEAN, 0, out, &err) == WLM_OK);
    CHECK(wlm_embed(c, toks, lens, 0, WLM_POOLING_MEAN, 0, NULL, &err) == WLM_OK);
    wlm_ctx_free(c);
    /* a context longer than bert's positions: a longer text is refused, not
     * read past position_embd */
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    cp.n_ctx = 2 * NCTX;
    cp.n_batch = 2 * NCTX;
    REQUIRE(wlm_ctx_new(&c, L.m, &cp, &err) == WLM_OK);
    int32_t many[NCTX + 1];
    for (int i = 0; i <= NCTX; i++) many[i] = 5;
    uint32_t n_many = NCTX + 1;
    CHECK(wlm_embed(c, many, &n_many, 1, WLM_POOLING_MEAN, 0, out, &err) == WLM_ERR_ARG);
    CHECKF(strstr(err.msg, "text 0 has 65 tokens, more than the 64 positions of this bert model") != NULL, "%s", err.msg);
    n_many = NCTX;
    CHECK(wlm_embed(c, many, &n_many, 1, WLM_POOLING_MEAN, 0, out, &err) == WLM_OK);
    wlm_ctx_free(c);
    unload(&L);
}

/* wlm_quantize on a bert: matrices become Q8_0, the tables added to the
 * embeddings (position_embd, token_types) keep their type as llama.cpp's
 * quantizer keeps them; the quantized model embeds close to the original */
TEST(embed_bert_quantized) {
    gb_file *f = malloc(sizeof *f);
    tiny_bert(f, 0, 0);
    loaded L;
    wlm_err err;
    REQUIRE(load_file(f, &L, &err) == WLM_OK);
    free(f);
    uint64_t size = 0;
    REQUIRE(wlm_quantize_size(L.m, GGML_Q8_0, &size, &err) == WLM_OK);
    uint8_t *q = wlm_sys_alloc(size);
    REQUIRE(q && wlm_quantize(L.m, GGML_Q8_0, q, size, NULL, 0, &err) == WLM_OK);
    wlm_model *mq = NULL;
    REQUIRE(wlm_model_load(&mq, q, size, &err) == WLM_OK);
    const wlm_tensor *tt = wlm_gguf_tensor(&mq->g, "token_types.weight"), *pe = wlm_gguf_tensor(&mq->g, "position_embd.weight");
    const wlm_tensor *wq = wlm_gguf_tensor(&mq->g, "blk.1.attn_q.weight"), *emb = wlm_gguf_tensor(&mq->g, "token_embd.weight");
    REQUIRE(tt && pe && wq && emb);
    CHECK(tt->type == GGML_F32 && pe->type == GGML_F32 && wq->type == GGML_Q8_0 && emb->type == GGML_Q8_0);
    wlm_ctx *a = new_ctx(L.m, 64, 4), *b = new_ctx(mq, 64, 4);
    REQUIRE(a && b);
    float va[4 * D], vb[4 * D];
    REQUIRE(embed(a, k_texts, k_lens, 4, WLM_POOLING_MEAN, WLM_EMBED_NORMALIZE, va));
    REQUIRE(embed(b, k_texts, k_lens, 4, WLM_POOLING_MEAN, WLM_EMBED_NORMALIZE, vb));
    for (int i = 0; i < 4; i++) {
        double dot = 0;
        for (int e = 0; e < D; e++) dot += (double)va[i * D + e] * vb[i * D + e];
        CHECKF(dot > 0.999, "text %d: cosine %g between F32 and Q8_0", i, dot);
    }
    wlm_ctx_free(a);
    wlm_ctx_free(b);
    wlm_model_free(mq);
    wlm_sys_free(q);
    unload(&L);
}
