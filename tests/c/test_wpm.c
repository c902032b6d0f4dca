/* WordPiece (tokenizer.ggml.model "bert"): test vectors written from the
 * format. The vocabulary is stored as llama.cpp's converter writes it: word
 * starts with a leading U+2581, continuation pieces without "##", control
 * tokens as they are. Each vector states the BERT rule it checks. */
#include "vocab_util.h"

#define W "\xe2\x96\x81" /* U+2581 */

static const char *const k_pieces[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",                         /* 0-4 */
    W "the", W "un", "aff", "able", W "play", "ing", W "!", W ",", W ".", /* 5-13 */
    W "hello", W "world", W "cafe", W "a", "b", W "b",                    /* 14-19 */
    W "\xe4\xb8\xad", W "\xe5\x9b\xbd", W "$", "5", W "5", W "naive",     /* 20-25: 中 国 $ */
    W "\xe1\x84\x92", "\xe1\x85\xa1", "\xe1\x86\xab",                     /* 26-28: jamo ᄒ ᅡ ᆫ */
    W "caf\xc3\xa9", "a", W "Hello", W "playing", W "x",                  /* 29-33 */
};
#define NP ((uint32_t)(sizeof k_pieces / sizeof k_pieces[0]))

/* opts: bit 0 lowercase=false, bit 1 strip_accents=true written, bit 2 no
 * special-id keys (BERT's defaults apply: out of range here, so unk fails) */
static int bert_vocab(tvocab *t, int opts, wlm_err *err) {
    gbuf b;
    gb_begin(&b);
    gb_kv_str(&b, "tokenizer.ggml.model", "bert");
    gb_tokens(&b, k_pieces, NP);
    int32_t types[NP];
    for (uint32_t i = 0; i < NP; i++) types[i] = i < 5 ? 3 : 1;
    gb_types(&b, types, NP);
    if (!(opts & 4)) {
        gb_kv_u32(&b, "tokenizer.ggml.unknown_token_id", 1);
        gb_kv_u32(&b, "tokenizer.ggml.cls_token_id", 2);
        gb_kv_u32(&b, "tokenizer.ggml.seperator_token_id", 3);
        gb_kv_u32(&b, "tokenizer.ggml.padding_token_id", 0);
    }
    if (opts & 1) gb_kv_bool(&b, "tokenizer.ggml.normalizer.lowercase", 0);
    if (opts & 2) gb_kv_bool(&b, "tokenizer.ggml.normalizer.strip_accents", 1);
    unsigned long long size;
    unsigned char *data = gb_end(&b, &size);
    memset(err, 0, sizeof *err);
    return tv_load_bytes(t, data, size, err);
}

typedef struct {
    const char *text;
    int flags;
    int32_t ids[24];
    int n;
} wvec;

static void run_vectors(const tvocab *t, const wvec *v, int count, const char *what) {
    for (int i = 0; i < count; i++) {
        uint32_t n = 0;
        int32_t *out = tv_tokenize(&t->v, v[i].text, (uint32_t)strlen(v[i].text), v[i].flags, &n);
        if (!out) {
            CHECKF(0, "%s vector %d failed", what, i);
            continue;
        }
        int same = (int)n == v[i].n;
        for (int j = 0; same && j < v[i].n; j++) same = out[j] == v[i].ids[j];
        if (!same) {
            fprintf(stderr, "  %s vector %d \"%s\": got", what, i, v[i].text);
            for (uint32_t j = 0; j < n; j++) fprintf(stderr, " %d", out[j]);
            fprintf(stderr, "\n");
        }
        CHECK(same);
        free(out);
    }
}

TEST(wpm_vectors) {
    tvocab t;
    wlm_err err;
    REQUIRE(bert_vocab(&t, 0, &err));
    CHECK(t.v.kind == WLM_VOCAB_WPM && t.v.bos == 2 && t.v.sep == 3 && t.v.unk == 1 && t.v.add_bos == 1 && t.v.add_sep == 1);
    CHECK(t.v.wpm_lower == 1 && t.v.wpm_strip == 1);
    static const wvec v[] = {
        /* greedy longest match: "unaffable" = un ##aff ##able */
        { "unaffable", 0, { 6, 7, 8 }, 3 },
        /* the longest piece first: "playing" is one piece, "plays" is play + ?s -> [UNK] (no "s") */
        { "playing plays", 0, { 32, 1 }, 2 },
        /* lowercase, whitespace of every kind separates words */
        { "\tHello\n  WORLD \r", 0, { 14, 15 }, 2 },
        /* punctuation is a word of its own, wherever it is */
        { "hello,world!", 0, { 14, 12, 15, 11 }, 4 },
        /* ASCII symbols too ($), digits stay in words */
        { "$5", 0, { 22, 24 }, 2 },
        /* accents stripped after the canonical decomposition: é -> e, ï -> i
         * (precomposed and combining forms alike) */
        { "Caf\xc3\xa9 nai\xcc\x88ve", 0, { 16, 25 }, 2 },
        { "CAF\xc3\x89 NA\xc3\x8fVE", 0, { 16, 25 }, 2 },
        /* CJK ideographs are words of their own, even without spaces */
        { "\xe4\xb8\xad\xe5\x9b\xbd", 0, { 20, 21 }, 2 },
        /* control characters are dropped (inside a word they join its halves) */
        { "hel\x01lo", 0, { 14 }, 1 },
        /* invalid UTF-8 is dropped */
        { "wor\xffld", 0, { 15 }, 1 },
        /* a word whose remainder matches no piece becomes one [UNK] */
        { "the unafx the", 0, { 5, 1, 5 }, 3 },
        /* add special: [CLS] text [SEP] */
        { "the", WLM_TOK_ADD_BOS, { 2, 5, 3 }, 3 },
        { "", WLM_TOK_ADD_BOS, { 2, 3 }, 2 },
        { "", 0, { 0 }, 0 },
        /* Hangul syllables decompose into jamo (한 = ᄒ ᅡ ᆫ) */
        { "\xed\x95\x9c", 0, { 26, 27, 28 }, 3 },
        /* control-token text is text, unless special tokens are parsed */
        { "b[SEP]b", 0, { 19, 1, 1, 1, 19 }, 5 },
        { "b[SEP]b", WLM_TOK_PARSE_SPECIAL, { 19, 3, 19 }, 3 },
    };
    run_vectors(&t, v, (int)(sizeof v / sizeof v[0]), "default");

    /* WordPiece's 100-character limit: 100 a's are pieces, 101 are [UNK] */
    char word[128];
    memset(word, 'a', 101);
    word[101] = 0;
    uint32_t n = 0;
    int32_t *out = tv_tokenize(&t.v, word, 100, 0, &n);
    REQUIRE(out);
    CHECK(n == 100 && out[0] == 17 && out[1] == 30 && out[99] == 30);
    free(out);
    out = tv_tokenize(&t.v, word, 101, 0, &n);
    REQUIRE(out);
    CHECK(n == 1 && out[0] == 1);
    free(out);

    /* detokenization: word starts become spaces, continuations join */
    int32_t ids[] = { 2, 6, 7, 8, 12, 14, 3 };
    char s[64];
    wlm_detok d;
    wlm_detok_reset(&d);
    uint32_t k = 0;
    for (int i = 0; i < 7; i++) k += wlm_vocab_detok_push(&t.v, &d, ids[i], s + k, sizeof s - k);
    CHECKF(k == 18 && memcmp(s, " unaffable , hello", 18) == 0, "%.*s", (int)k, s);
    tv_free(&t);
}

TEST(wpm_normalizer_options) {
    tvocab t;
    wlm_err err;
    /* lowercase false: strip_accents follows it (false) */
    REQUIRE(bert_vocab(&t, 1, &err));
    CHECK(t.v.wpm_lower == 0 && t.v.wpm_strip == 0);
    static const wvec cased[] = {
        { "Hello hello", 0, { 31, 14 }, 2 },
        { "caf\xc3\xa9 cafe", 0, { 29, 16 }, 2 },
        { "\xed\x95\x9c", 0, { 1 }, 1 }, /* no decomposition: 한 is no piece */
    };
    run_vectors(&t, cased, 3, "cased");
    tv_free(&t);
    /* lowercase false, strip_accents true */
    REQUIRE(bert_vocab(&t, 3, &err));
    CHECK(t.v.wpm_lower == 0 && t.v.wpm_strip == 1);
    static const wvec strip[] = {
        { "caf\xc3\xa9 Hello", 0, { 16, 31 }, 2 },
    };
    run_vectors(&t, strip, 1, "strip");
    tv_free(&t);
    /* no unknown token: refused (a word that matches nothing needs one) */
    CHECK(!bert_vocab(&t, 4, &err));
    CHECKF(err.code == WLM_ERR_FORMAT && strstr(err.msg, "unknown token") != NULL, "%s", err.msg);
    tv_free(&t);
}
