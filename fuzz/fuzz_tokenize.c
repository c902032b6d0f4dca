/* libFuzzer target: the tokenizers. The first input byte picks a vocabulary
 * (SentencePiece, byte-level BPE or WordPiece, from tools/fuzz-seeds.mjs) and a mode:
 *   encode: the rest is text (arbitrary bytes, invalid UTF-8 included),
 *           tokenized with and without BOS / special-token parsing; every id
 *           must be in range and the buffer-too-small path must agree;
 *   decode: the rest is a list of arbitrary int32 ids (negative, huge),
 *           through wlm_token_bytes and the streaming detokenizer, whose
 *           output must always be valid UTF-8. */
#include "fuzz_common.h"

#define N_VOCABS 4
static wlm_model *g_m[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_m[0] = fz_model("micro-spm.gguf");
    g_m[1] = fz_model("tiny-bpe.gguf");
    g_m[2] = fz_model("tiny-qwen.gguf");
    g_m[3] = fz_model("tiny-bert.gguf");
    return 0;
}

static void decode(const wlm_model *m, const uint8_t *p, size_t n) {
    char out[4096];
    wlm_detok dt; wlm_detok_reset(&dt);
    for (size_t i = 0; i + 4 <= n; i += 4) {
        int32_t id; memcpy(&id, p + i, 4);
        if (i & 4) id %= 1024; /* half the ids near the vocabulary */
        uint32_t need = wlm_token_bytes(m, id, out, 8);
        if (need > 8) { uint32_t got = wlm_token_bytes(m, id, out, sizeof out); FZ_ASSERT(got == need || need > sizeof out, "token_bytes %u then %u", need, got); }
        (void)wlm_token_is_eog(m, id);
        uint32_t k = wlm_detok_push(m, &dt, id, out, sizeof out);
        FZ_ASSERT(k <= sizeof out, "detok wrote %u", k);
        FZ_ASSERT(fz_utf8_valid((const unsigned char *)out, k), "detok output is not valid UTF-8 (token %d)", id);
    }
    uint32_t k = wlm_detok_flush(&dt, out, sizeof out);
    FZ_ASSERT(fz_utf8_valid((const unsigned char *)out, k), "flush output is not valid UTF-8");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const wlm_model *m = g_m[(data[0] & 3) % N_VOCABS];
    uint32_t nv = wlm_model_hparams(m)->n_vocab;
    const uint8_t *p = data + 1; size_t n = size - 1;
    if (data[0] & 0x80) { decode(m, p, n); return 0; }
    /* exact-size heap copy of the text: over-reads are ASan errors */
    char *text = malloc(n ? n : 1);
    if (n) memcpy(text, p, n);
    int flags = (data[0] >> 2) & 3;
    uint32_t cap = (uint32_t)n * 2 + 8;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    uint32_t got = 0; wlm_err err = { 0 };
    wlm_status s = wlm_tokenize(m, text, (uint32_t)n, flags, ids, cap, &got, &err);
    FZ_ASSERT(s == WLM_OK, "tokenize of %zu bytes failed: %s", n, err.msg);
    FZ_ASSERT(got <= cap, "count %u over cap %u", got, cap);
    for (uint32_t i = 0; i < got; i++) FZ_ASSERT(ids[i] >= 0 && (uint32_t)ids[i] < nv, "id %d of %u", ids[i], nv);
    if (got > 1) { /* one slot short: must say so, with the same count */
        uint32_t need = 0;
        s = wlm_tokenize(m, text, (uint32_t)n, flags, ids, got - 1, &need, &err);
        FZ_ASSERT(s == WLM_ERR_ARG && need == got, "short buffer: status %d need %u (want %u)", (int)s, need, got);
    }
    /* decode what was encoded: complete UTF-8 out */
    s = wlm_tokenize(m, text, (uint32_t)n, flags, ids, cap, &got, &err);
    if (s == WLM_OK) decode(m, (const uint8_t *)ids, (size_t)got * 4);
    free(ids);
    free(text);
    return 0;
}
