/* libFuzzer target: grammars. The first input byte picks a vocabulary
 * (SentencePiece with byte fallback or byte-level BPE, from
 * tools/fuzz-seeds.mjs) and a chunk length; then GBNF text up to a NUL byte,
 * then bytes to read. Compiling either succeeds or fails with a "grammar:"
 * message (never a crash, never a hang: every size is bounded). A compiled
 * grammar then reads the bytes chunk by chunk; a refused chunk leaves the
 * state as it was; after each chunk the token mask must equal the direct
 * reference (every token's bytes run through the recognizer), and the
 * first allowed token must be accepted. */
#include "fuzz_common.h"
#include "../src/grammar.h"

#define N_VOCABS 2
static wlm_model *g_m[N_VOCABS];
static wlm_gvocab *g_v[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    g_m[0] = fz_model("micro-spm.gguf");
    g_m[1] = fz_model("tiny-qwen.gguf");
    for (int i = 0; i < N_VOCABS; i++) {
        wlm_err err = { 0 };
        if (wlm_gvocab_new(&g_v[i], g_m[i], &err) != WLM_OK) { fprintf(stderr, "fuzz: trie: %s\n", err.msg); exit(2); }
    }
    return 0;
}

static void check_mask(wlm_grammar *g, uint32_t s, uint32_t *ref) {
    const uint32_t *m = NULL; uint32_t n = 0; wlm_err err = { 0 };
    if (wlm_grammar_mask(g, s, 0, &m, &n, &err) != WLM_OK) { FZ_ASSERT(strstr(err.msg, "grammar"), "mask failed: %s", err.msg); return; }
    uint32_t nw = g->v->n_words, cfg = g->state[s];
    uint32_t *fast = malloc(4 * nw);
    memcpy(fast, m, 4 * nw);
    if (wlm_grammar_mask_direct(g, cfg, ref, &err) != WLM_OK) { free(fast); return; }
    for (uint32_t w = 0; w < nw; w++) FZ_ASSERT(fast[w] == ref[w], "mask word %u: fast %08x direct %08x", w, fast[w], ref[w]);
    /* the first allowed token that is not end-of-generation is accepted */
    for (uint32_t t = 0; t < g->v->n_vocab; t++) {
        int eog = 0;
        for (uint32_t e = 0; e < g->v->n_eog; e++) eog |= g->v->eog[e] == (int32_t)t;
        if (!(fast[t >> 5] >> (t & 31) & 1) || eog) continue;
        uint32_t c2;
        if (wlm_grammar_state_new(g, &c2, &err) != WLM_OK) break;
        wlm_grammar_state_copy(g, c2, s, &err);
        wlm_status st = wlm_grammar_accept(g, c2, (int32_t)t, &err);
        FZ_ASSERT(st == WLM_OK || strstr(err.msg, "more than"), "allowed token %u refused: %s", t, err.msg);
        wlm_grammar_state_free(g, c2);
        break;
    }
    free(fast);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int which = data[0] % N_VOCABS;
    uint32_t chunk = 1 + (data[0] >> 1) % 6;
    const uint8_t *text = data + 1, *nul = memchr(text, 0, size - 1);
    uint32_t len = nul ? (uint32_t)(nul - text) : (uint32_t)(size - 1);
    const uint8_t *rest = nul ? nul + 1 : data + size;
    uint32_t n_rest = (uint32_t)(data + size - rest);
    wlm_grammar *g = NULL; wlm_err err = { 0 };
    if (wlm_grammar_compile(&g, g_v[which], (const char *)text, len, &err) != WLM_OK) {
        FZ_ASSERT(err.code != WLM_OK && strncmp(err.msg, "grammar", 7) == 0, "compile failed without a grammar message: %s", err.msg);
        return 0;
    }
    uint32_t s, *ref = malloc(4 * g->v->n_words);
    FZ_ASSERT(wlm_grammar_state_new(g, &s, &err) == WLM_OK, "state: %s", err.msg);
    check_mask(g, s, ref);
    for (uint32_t i = 0, steps = 0; i < n_rest && steps < 24; i += chunk, steps++) {
        uint32_t k = WLM_MIN(chunk, n_rest - i), before = g->state[s];
        if (wlm_grammar_accept_bytes(g, s, (const char *)rest + i, k, &err) != WLM_OK) {
            FZ_ASSERT(g->state[s] == before, "a refused chunk changed the state");
            continue;
        }
        check_mask(g, s, ref);
    }
    free(ref);
    wlm_grammar_free(g);
    return 0;
}
