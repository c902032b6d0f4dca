#define _POSIX_C_SOURCE 199309L
/* Byte-level BPE tokenizer tests: llama.cpp's test vectors for the gpt-2,
 * deepseek-llm and falcon vocabularies (and llama-spm through the same
 * runner), pre-tokenizer splits, encode/decode round trips, special-token
 * parsing, EOG detection, hand-built vocabularies and malformed merges,
 * and the SentencePiece segment fast path against the unsplit algorithm. */
#include "vocab_util.h"
#include <time.h>

/* a vocabulary from ../shared/vocab by name (gpt-2, falcon, ...) */
static int bv_load(tvocab *t, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    return tv_load(t, rel);
}

static unsigned char *detok_all(const wlm_vocab *v, const int32_t *ids, uint32_t n, size_t *len) {
    size_t cap = 64, k = 0;
    unsigned char *b = malloc(cap);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t need = wlm_vocab_token_bytes(v, ids[i], NULL, 0);
        if (k + need + 1 > cap) {
            cap = (k + need + 1) * 2;
            b = realloc(b, cap);
        }
        k += wlm_vocab_token_bytes(v, ids[i], (char *)b + k, (uint32_t)(cap - k));
    }
    *len = k;
    return b;
}

/* ---- 1. test vectors ------------------------------------------------------------ */

static int run_vectors(const char *name, int *total_out) {
    tvocab t;
    int total = 0, pass = 0;
    *total_out = 0;
    if (!bv_load(&t, name)) {
        tv_free(&t);
        return -1;
    }
    char rel[256];
    unsigned long long ni = 0, no = 0;
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", name);
    char *inp = (char *)tst_read_file(tst_path(rel), &ni);
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", name);
    char *outp = (char *)tst_read_file(tst_path(rel), &no);
    if (!inp || !outp) {
        free(inp);
        free(outp);
        tv_free(&t);
        return -1;
    }
    outp = realloc(outp, no + 1);
    outp[no] = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep), ip = 0, op = 0;
    int32_t *expect = malloc(sizeof(int32_t) * (no + 1));
    while (ip < ni) {
        size_t e = ip;
        while (e + sl <= ni && memcmp(inp + e, sep, sl) != 0) e++;
        if (e + sl > ni) break;
        size_t le = op;
        while (le < no && outp[le] != '\n') le++;
        uint32_t ne = 0;
        char *q = outp + op;
        while (q < outp + le) {
            while (q < outp + le && (*q == ' ' || *q == '\r')) q++;
            if (q >= outp + le) break;
            expect[ne++] = (int32_t)strtol(q, &q, 10);
        }
        uint32_t n = 0;
        int32_t *got = tv_tokenize(&t.v, inp + ip, (uint32_t)(e - ip), 0, &n);
        int same = got && n == ne && (ne == 0 || memcmp(got, expect, ne * 4) == 0);
        total++;
        if (same) pass++;
        else {
            fprintf(stderr, "  %s vector %d mismatch: '%.*s'\n    got", name, total, (int)(e - ip), inp + ip);
            for (uint32_t i = 0; got && i < n; i++) fprintf(stderr, " %d", got[i]);
            fprintf(stderr, "\n    expected");
            for (uint32_t i = 0; i < ne; i++) fprintf(stderr, " %d", expect[i]);
            fputc('\n', stderr);
        }
        free(got);
        ip = e + sl;
        op = le + 1;
    }
    printf("  %s vectors: %d/%d pass (tokenizer.ggml.pre -> %s, %u merges used, %u skipped)\n", name, pass, total,
           t.v.kind == WLM_VOCAB_BPE ? wlm_pre_name(t.v.pre) : "(spm)", t.v.n_merges, t.v.n_merges_skipped);
    free(expect);
    free(inp);
    free(outp);
    tv_free(&t);
    *total_out = total;
    return pass;
}

TEST(tokenizer_bpe_vectors) {
    static const char *const names[] = { "gpt-2", "deepseek-llm", "falcon", "llama-spm" };
    for (int i = 0; i < 4; i++) {
        int total = 0, pass = run_vectors(names[i], &total);
        CHECKF(pass >= 0, "%s: vocabulary or vectors missing", names[i]);
        CHECKF(total == 46 && pass == total, "%s: %d/%d", names[i], pass, total);
    }
}

/* ---- 2. loading ------------------------------------------------------------------- */

TEST(tokenizer_bpe_load) {
    tvocab t;
    REQUIRE(bv_load(&t, "gpt-2"));
    CHECK(t.v.kind == WLM_VOCAB_BPE && t.v.pre == WLM_PRE_GPT2);
    CHECK(t.v.n == 50257 && t.v.bos == 50256 && t.v.eos == 50256);
    CHECK(t.v.add_bos == 0 && t.v.add_space_prefix == 0 && t.v.add_eos == 0);
    CHECK(t.v.n_merges == 50000 && t.v.n_merges_skipped == 0);
    for (int b = 0; b < 256; b++) CHECK(t.v.byte_sym[b] >= 0);
    CHECK(wlm_vocab_find(&t.v, "\xc4\xa0the", 5) == t.v.byte_sym[' '] + 0 || wlm_vocab_find(&t.v, "\xc4\xa0the", 5) >= 0);
    tv_free(&t);

    REQUIRE(bv_load(&t, "deepseek-llm"));
    CHECK(t.v.pre == WLM_PRE_DEEPSEEK_LLM && t.v.add_bos == 1 && t.v.bos == 100000 && t.v.eos == 100001);
    CHECK(t.v.pad == 100001);
    tv_free(&t);
    REQUIRE(bv_load(&t, "falcon"));
    CHECK(t.v.pre == WLM_PRE_FALCON && t.v.eos == 11);
    tv_free(&t);
}

/* GPT-2's byte mapping: a bijection onto printable characters */
TEST(tokenizer_bpe_byte_map) {
    int seen[400] = { 0 };
    for (int b = 0; b < 256; b++) {
        uint32_t cp = wlm_bpe_byte_to_cp((uint8_t)b);
        CHECK(cp < 400);
        if (cp < 400) seen[cp]++;
        CHECK(wlm_bpe_cp_to_byte(cp) == b);
    }
    for (int c = 0; c < 400; c++) CHECK(seen[c] <= 1);
    CHECK(wlm_bpe_byte_to_cp(' ') == 0x120);  /* 'Ġ' */
    CHECK(wlm_bpe_byte_to_cp('\n') == 0x10A); /* 'Ċ' */
    CHECK(wlm_bpe_byte_to_cp('A') == 'A');
    CHECK(wlm_bpe_cp_to_byte(0x20) == -1 && wlm_bpe_cp_to_byte(0x144) == -1 && wlm_bpe_cp_to_byte(0xAD) == -1);
}

/* ---- 3. pre-tokenizers ------------------------------------------------------------- */

static int split_is(uint32_t pre, const char *text, const char *const *want, int nw) {
    uint32_t ends[256];
    uint32_t n = wlm_bpe_split(pre, (const uint8_t *)text, (uint32_t)strlen(text), ends, 256);
    int ok = (int)n == nw;
    uint32_t a = 0;
    for (int i = 0; ok && i < nw; i++) {
        size_t l = strlen(want[i]);
        if (ends[i] - a != l || memcmp(text + a, want[i], l) != 0) ok = 0;
        a = ends[i];
    }
    if (!ok) {
        fprintf(stderr, "  split(%s) of '%s':", wlm_pre_name(pre), text);
        a = 0;
        for (uint32_t i = 0; i < n && i < 256; i++) {
            fprintf(stderr, " [%.*s]", (int)(ends[i] - a), text + a);
            a = ends[i];
        }
        fputc('\n', stderr);
    }
    return ok;
}
#define SPLIT(pre, text, ...)                                            \
    do {                                                                 \
        static const char *const w_[] = { __VA_ARGS__ };                 \
        CHECK(split_is(pre, text, w_, (int)(sizeof w_ / sizeof w_[0]))); \
    } while (0)

TEST(tokenizer_bpe_pretokenizers) {
    const char *s = "Hello world 12345 don't\n\n  x";
    SPLIT(WLM_PRE_LLAMA3, s, "Hello", " world", " ", "123", "45", " don", "'t", "\n\n", " ", " x");
    SPLIT(WLM_PRE_QWEN2, s, "Hello", " world", " ", "1", "2", "3", "4", "5", " don", "'t", "\n\n", " ", " x");
    SPLIT(WLM_PRE_GPT2, s, "Hello", " world", " 12345", " don", "'t", "\n\n ", " x");
    SPLIT(WLM_PRE_STARCODER, s, "Hello", " world", " ", "1", "2", "3", "4", "5", " don", "'t", "\n\n ", " x");
    SPLIT(WLM_PRE_FALCON, "a+b==c 1234567", "a", "+", "b", "==", "c", " ", "123", "456", "7");
    /* case-insensitive contractions (Llama 3) but not for GPT-2 */
    SPLIT(WLM_PRE_LLAMA3, "I'VE", "I", "'VE");
    SPLIT(WLM_PRE_GPT2, "I'VE", "I", "'", "VE");
    /* trailing white space stays one piece; a space before a word joins it */
    SPLIT(WLM_PRE_GPT2, "a   b  ", "a", "  ", " b", "  ");
    /* DeepSeek-LLM: newlines alone, letters with one leading space, CJK runs, digit runs */
    SPLIT(WLM_PRE_DEEPSEEK_LLM, "Hi there\n\xe6\x88\x91\xe6\x83\xb3 42!", "Hi", " there", "\n", "\xe6\x88\x91\xe6\x83\xb3", " ", "42", "!");
    /* (\s?\p{P}+ does not take "=", a symbol: " =" stays between matches) */
    SPLIT(WLM_PRE_DEEPSEEK_CODER, "x1 = y22;", "x", "1", " =", " y", "2", "2", ";");
    /* invalid UTF-8 bytes are pieces of class "other" */
    SPLIT(WLM_PRE_GPT2, "a\xff\xfe b", "a", "\xff\xfe", " b");
}

/* ---- 4. round trips ------------------------------------------------------------------ */

static const char *const k_bpe_pieces[] = {
    "a",
    "b",
    "the",
    "Hello",
    " world",
    "W",
    "0",
    "1",
    "42",
    "3.14",
    " ",
    " ",
    "  ",
    "   ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    "!",
    "?",
    ",",
    ".",
    "'",
    "'s",
    "'ll",
    "\"",
    "(",
    ")",
    "-",
    "_",
    "/",
    "\\",
    "#",
    "@",
    "{",
    "}",
    "<|endoftext|>",
    "é",
    "ü",
    "ñ",
    "ß",
    "Führer",
    "naïve",
    "café",
    "ε",
    "Ω",
    "Привет",
    "мир",
    "中",
    "文",
    "日本語",
    "한국어",
    "ไทย",
    "עברית",
    "العربية",
    "हिन्दी",
    "∑",
    "∞",
    "€",
    "😀",
    "🦙",
    "👍🏽",
    "👨‍👩‍👧‍👦",
    "\xc2\xa0",
    "\xe3\x80\x80",
    "\x7f",
    "\x01",
    "\x00",
    "ø",
    "[PAD100015]",
    ">>TITLE<<",
};

static size_t rand_bpe_text(unsigned char *buf, size_t max_pieces) {
    size_t n = 0, np = 1 + tst_rand() % max_pieces;
    for (size_t i = 0; i < np; i++) {
        const char *p = k_bpe_pieces[tst_rand() % (sizeof k_bpe_pieces / sizeof k_bpe_pieces[0])];
        size_t l = p[0] ? strlen(p) : 1; /* "\x00": one NUL byte */
        memcpy(buf + n, p, l);
        n += l;
    }
    return n;
}

static int roundtrip(const wlm_vocab *v, const unsigned char *s, size_t n, int flags) {
    uint32_t nt = 0;
    int32_t *ids = tv_tokenize(v, (const char *)s, (uint32_t)n, flags, &nt);
    if (!ids) return 0;
    size_t dl = 0;
    unsigned char *d = detok_all(v, ids, nt, &dl);
    int ok = dl == n && memcmp(d, s, n) == 0;
    /* the streaming detokenizer gives the same bytes for valid UTF-8 */
    wlm_detok st;
    wlm_detok_reset(&st);
    uint32_t dcap = 64 + v->max_len;
    char *piece = malloc(dcap);
    unsigned char *stream = malloc(n * 3 + 64);
    size_t ns = 0;
    for (uint32_t i = 0; i < nt; i++) {
        uint32_t w = wlm_vocab_detok_push(v, &st, ids[i], piece, dcap);
        memcpy(stream + ns, piece, w);
        ns += w;
    }
    uint32_t w = wlm_detok_flush(&st, piece, dcap);
    memcpy(stream + ns, piece, w);
    ns += w;
    if (!(flags & 4) && (ns != n || memcmp(stream, s, n) != 0)) ok = 0;
    free(piece);
    free(stream);
    free(d);
    free(ids);
    return ok;
}

TEST(tokenizer_bpe_roundtrip) {
    static const char *const names[] = { "gpt-2", "deepseek-llm", "falcon" };
    unsigned char buf[4096];
    for (int vi = 0; vi < 3; vi++) {
        tvocab t;
        if (!bv_load(&t, names[vi])) {
            tst_failed_checks++;
            tv_free(&t);
            continue;
        }
        int fails = 0, tried = 0;
        for (int it = 0; it < 400; it++) { /* valid UTF-8 from pieces of many scripts */
            size_t n = rand_bpe_text(buf, 40);
            if (!roundtrip(&t.v, buf, n, 0)) {
                if (fails++ < 3) fprintf(stderr, "  %s: round trip failed for '%.*s'\n", names[vi], (int)n, buf);
            }
            tried++;
        }
        /* random bytes (mostly invalid UTF-8): token bytes are exact. Only
         * bytes whose mapped character is a normal token: falcon lacks some
         * (03, 04, ..., C0, C1, F2, F5..FF: dropped, it has no unknown token)
         * and deepseek-llm has C0, C1, F5..FF only as user-defined tokens,
         * whose text ("ÿ") decodes verbatim (as llama.cpp does). */
        unsigned char ok_bytes[256];
        int n_ok = 0;
        for (int c = 0; c < 256; c++)
            if (t.v.byte_sym[c] >= 0 && t.v.type[t.v.byte_sym[c]] == WLM_TOK_NORMAL) ok_bytes[n_ok++] = (unsigned char)c;
        if (vi == 0) CHECK(n_ok == 256);
        for (int it = 0; it < 400; it++) {
            size_t n = tst_rand() % 48;
            for (size_t i = 0; i < n; i++) buf[i] = ok_bytes[tst_rand() % n_ok];
            if (!roundtrip(&t.v, buf, n, 4)) {
                if (fails++ < 3) fprintf(stderr, "  %s: byte round trip failed (%zu bytes)\n", names[vi], n);
            }
            tried++;
        }
        printf("  %s: %d round trips, %d failed\n", names[vi], tried, fails);
        CHECK(fails == 0);
        tv_free(&t);
    }
}

/* ---- 5. special tokens and EOG ---------------------------------------------------------- */

static int has_id(const int32_t *ids, uint32_t n, int32_t id) {
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

TEST(tokenizer_bpe_special) {
    tvocab t;
    REQUIRE(bv_load(&t, "gpt-2"));
    const char *s = "Hi<|endoftext|>there";
    uint32_t n = 0, n2 = 0;
    int32_t *a = tv_tokenize(&t.v, s, (uint32_t)strlen(s), 0, &n);
    int32_t *b = tv_tokenize(&t.v, s, (uint32_t)strlen(s), WLM_TOK_PARSE_SPECIAL, &n2);
    REQUIRE(a && b);
    CHECK(!has_id(a, n, 50256) && n > 3); /* plain text */
    CHECK(n2 == 3 && b[1] == 50256);      /* Hi, <|endoftext|>, there */
    int32_t *hi = tv_tokenize(&t.v, "Hi", 2, 0, &n);
    CHECK(n == 1 && b[0] == hi[0]);
    free(hi);
    /* decoding: the control token gives no bytes */
    size_t dl;
    unsigned char *d = detok_all(&t.v, b, n2, &dl);
    CHECK(dl == 7 && memcmp(d, "Hithere", 7) == 0);
    free(d);
    free(a);
    free(b);
    /* add-special flag: BOS when asked (gpt-2 has bos = eos = 50256), no EOS (add_eos_token unset) */
    a = tv_tokenize(&t.v, "x", 1, WLM_TOK_ADD_BOS, &n);
    CHECK(n == 2 && a[0] == 50256);
    free(a);
    /* EOG */
    CHECK(wlm_vocab_is_eog(&t.v, 50256));
    CHECK(!wlm_vocab_is_eog(&t.v, 0) && !wlm_vocab_is_eog(&t.v, -1));
    tv_free(&t);

    REQUIRE(bv_load(&t, "falcon"));
    s = ">>TITLE<<Falcon<|endoftext|>";
    a = tv_tokenize(&t.v, s, (uint32_t)strlen(s), WLM_TOK_PARSE_SPECIAL, &n);
    CHECK(a && n >= 3 && a[0] == 0 && a[n - 1] == 11);
    free(a);
    a = tv_tokenize(&t.v, s, (uint32_t)strlen(s), 0, &n);
    CHECK(a && !has_id(a, n, 0) && !has_id(a, n, 11));
    free(a);
    CHECK(wlm_vocab_is_eog(&t.v, 11) && !wlm_vocab_is_eog(&t.v, 0));
    tv_free(&t);

    /* deepseek: user-defined tokens match even without parse_special */
    REQUIRE(bv_load(&t, "deepseek-llm"));
    a = tv_tokenize(&t.v, "[PAD100015]", 11, 0, &n);
    CHECK(a && n == 1 && a[0] == 100015);
    free(a);
    a = tv_tokenize(&t.v, "x", 1, WLM_TOK_ADD_BOS, &n);
    CHECK(a && n == 2 && a[0] == 100000);
    free(a);
    CHECK(wlm_vocab_is_eog(&t.v, 100001));
    tv_free(&t);

    /* SentencePiece: control tokens with parse_special; the text after one gets its own space prefix */
    REQUIRE(bv_load(&t, "llama-spm"));
    s = "Hello<s>world</s>";
    uint32_t nh = 0, nw = 0;
    int32_t *h = tv_tokenize(&t.v, "Hello", 5, 0, &nh); /* "▁Hello" */
    int32_t *w = tv_tokenize(&t.v, "world", 5, 0, &nw); /* "▁world" */
    a = tv_tokenize(&t.v, s, (uint32_t)strlen(s), WLM_TOK_PARSE_SPECIAL, &n);
    CHECK(h && w && nh == 1 && nw == 1);
    CHECK(a && n == 4 && a[0] == h[0] && a[1] == 1 && a[2] == w[0] && a[3] == 2);
    free(a);
    free(h);
    free(w);
    a = tv_tokenize(&t.v, s, (uint32_t)strlen(s), 0, &n);
    CHECK(a && !has_id(a, n, 1) && !has_id(a, n, 2));
    free(a);
    CHECK(wlm_vocab_is_eog(&t.v, 2) && !wlm_vocab_is_eog(&t.v, 1));
    tv_free(&t);
}

/* ---- 6. hand-built vocabularies ----------------------------------------------------------- */

/* a 256-byte-character vocabulary plus a few merges and specials */
static wlm_status tiny_bpe(tvocab *t, const char *pre, const char *const *merges, uint32_t nm, wlm_err *err) {
    static char chars[256][4];
    const char *tok[256 + 8];
    int32_t types[256 + 8];
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = wlm_bpe_byte_to_cp((uint8_t)b);
        if (cp < 0x80) {
            chars[b][0] = (char)cp;
            chars[b][1] = 0;
        } else {
            chars[b][0] = (char)(0xC0 | (cp >> 6));
            chars[b][1] = (char)(0x80 | (cp & 63));
            chars[b][2] = 0;
        }
        tok[n] = chars[b];
        types[n++] = 1;
    }
    static const char *const extra[] = { "ab", "abc", "bc", "\xc4\xa0\x61", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|im" };
    static const int32_t extra_type[] = { 1, 1, 1, 1, 3, 3, 3, 4 };
    for (int i = 0; i < 8; i++) {
        tok[n] = extra[i];
        types[n++] = extra_type[i];
    }
    gbuf b;
    gb_begin(&b);
    gb_key(&b, "tokenizer.ggml.model", GGUF_STRING);
    gb_str(&b, "gpt2");
    if (pre) {
        gb_key(&b, "tokenizer.ggml.pre", GGUF_STRING);
        gb_str(&b, pre);
    }
    gb_strs(&b, "tokenizer.ggml.tokens", tok, n);
    gb_key(&b, "tokenizer.ggml.token_type", GGUF_ARRAY);
    gb_u32(&b, GGUF_I32);
    gb_u64(&b, n);
    gb_put(&b, types, 4 * n);
    gb_strs(&b, "tokenizer.ggml.merges", merges, nm);
    gb_key(&b, "tokenizer.ggml.eos_token_id", GGUF_U32);
    gb_u32(&b, 256 + 5);
    gb_key(&b, "tokenizer.ggml.bos_token_id", GGUF_U32);
    gb_u32(&b, 256 + 4);
    gb_key(&b, "tokenizer.ggml.eot_token_id", GGUF_U32);
    gb_u32(&b, 256 + 6);
    gb_key(&b, "tokenizer.ggml.add_eos_token", GGUF_BOOL);
    {
        unsigned char one = 1;
        gb_put(&b, &one, 1);
    }
    unsigned long long size;
    unsigned char *data = gb_end(&b, &size);
    memset(err, 0, sizeof *err);
    if (tv_load_bytes(t, data, size, err)) return WLM_OK;
    return err->code ? err->code : WLM_ERR_FORMAT;
}

TEST(tokenizer_bpe_tiny_vocab) {
    tvocab t;
    wlm_err err;
    /* "b c" has a lower rank than "a b": "abc" -> a + bc, then no "a bc" merge */
    static const char *const m1[] = { "b c", "a b", "ab c", "\xc4\xa0 a", "x y" };
    REQUIRE(tiny_bpe(&t, "gpt-2", m1, 5, &err) == WLM_OK);
    CHECK(t.v.n_merges == 4 && t.v.n_merges_skipped == 1); /* "xy" is not a token */
    uint32_t n = 0;
    int32_t *a = tv_tokenize(&t.v, "abc", 3, 0, &n);
    CHECK(a && n == 2 && a[0] == t.v.byte_sym['a'] && a[1] == 256 + 2);
    free(a);
    a = tv_tokenize(&t.v, "ab", 2, 0, &n);
    CHECK(a && n == 1 && a[0] == 256);
    free(a);
    a = tv_tokenize(&t.v, "x a", 3, 0, &n); /* " a" merges through Ġ a */
    CHECK(a && n == 2 && a[0] == t.v.byte_sym['x'] && a[1] == 256 + 3);
    free(a);
    /* add special: BOS first and EOS last (add_eos_token = true) */
    a = tv_tokenize(&t.v, "ab", 2, WLM_TOK_ADD_BOS, &n);
    CHECK(a && n == 3 && a[0] == 256 + 4 && a[1] == 256 && a[2] == 256 + 5);
    free(a);
    /* longest special first; user-defined "<|im" always, control ones only with parse_special */
    a = tv_tokenize(&t.v, "<|im_start|>ab<|im", 18, WLM_TOK_PARSE_SPECIAL, &n);
    CHECK(a && n == 3 && a[0] == 256 + 4 && a[1] == 256 && a[2] == 256 + 7);
    free(a);
    a = tv_tokenize(&t.v, "<|im_start|>", 12, 0, &n);
    CHECK(a && n >= 2 && a[0] == 256 + 7 && !has_id(a, n, 256 + 4));
    free(a);
    /* EOG: eos, eot, and control tokens named like end markers */
    CHECK(wlm_vocab_is_eog(&t.v, 256 + 5) && wlm_vocab_is_eog(&t.v, 256 + 6));
    CHECK(!wlm_vocab_is_eog(&t.v, 256 + 4) && !wlm_vocab_is_eog(&t.v, 256 + 7));
    tv_free(&t);

    /* long words go through the heap path: same result as the array path */
    REQUIRE(tiny_bpe(&t, NULL, m1, 5, &err) == WLM_OK); /* no tokenizer.ggml.pre: default */
    CHECK(t.v.pre == WLM_PRE_DEFAULT);
    char longw[301];
    for (int i = 0; i < 300; i++) longw[i] = "abcab"[i % 5];
    longw[300] = 0;
    a = tv_tokenize(&t.v, longw, 300, 0, &n);
    /* per "abcab": "b c" (rank 0) first, then "a b": a, bc, ab */
    static const int32_t want3[3] = { 'a', 256 + 2, 256 };
    int ok = a != NULL && n == 180;
    for (uint32_t i = 0; ok && i < n; i++) ok = a[i] == want3[i % 3];
    CHECK(ok);
    free(a);
    tv_free(&t);

    /* malformed merges name the entry; unknown pre-tokenizers are refused with the list */
    static const char *const m2[] = { "a b", "ab", "b c" };
    CHECK(tiny_bpe(&t, "gpt-2", m2, 3, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.merges[1]") != NULL, "%s", err.msg);
    tv_free(&t);
    static const char *const m3[] = { " ab", "b c" };
    CHECK(tiny_bpe(&t, "gpt-2", m3, 2, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.merges[0]") != NULL, "%s", err.msg);
    tv_free(&t);
    CHECK(tiny_bpe(&t, "klingon", m1, 5, &err) == WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "'klingon'") && strstr(err.msg, "llama-bpe") && strstr(err.msg, "deepseek-coder"), "%s", err.msg);
    tv_free(&t);
}

/* ---- 7. SPM segment fast path == whole-text algorithm ------------------------------------- */

TEST(tokenizer_spm_split_identical) {
    tvocab t;
    REQUIRE(bv_load(&t, "llama-spm"));
    CHECK(t.v.spm_split == 1);
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    int bad = 0, tried = 0;
    for (int it = 0; it < 300; it++) {
        size_t n = 0, np = 1 + tst_rand() % 400;
        for (size_t i = 0; i < np && n + 64 < cap; i++) {
            const char *p = k_bpe_pieces[tst_rand() % (sizeof k_bpe_pieces / sizeof k_bpe_pieces[0])];
            size_t l = p[0] ? strlen(p) : 1;
            memcpy(buf + n, p, l);
            n += l;
            if (tst_rand() % 3 == 0) { buf[n++] = ' '; }
            if (tst_rand() % 17 == 0) {
                memcpy(buf + n, "\xe2\x96\x81", 3);
                n += 3;
            } /* literal ▁ too */
        }
        uint32_t n1 = 0, n2 = 0;
        int32_t *a = tv_tokenize(&t.v, (const char *)buf, (uint32_t)n, 0, &n1);
        int32_t *b = tv_tokenize(&t.v, (const char *)buf, (uint32_t)n, (int)WLM_TOK_NO_SPLIT_, &n2);
        if (!a || !b || n1 != n2 || memcmp(a, b, n1 * 4) != 0) bad++;
        tried++;
        free(a);
        free(b);
    }
    printf("  %d random texts: segment path == whole-text path (%d differ)\n", tried, bad);
    CHECK(bad == 0);
    free(buf);
    tv_free(&t);
}

/* ---- 8. throughput (printed, never asserted) ------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(tokenizer_throughput) {
    static const char *const names[] = { "llama-spm", "gpt-2", "deepseek-llm", "falcon" };
#ifdef __wasm__
    /* small under wasm: Node 20's V8 crashes (GC during memory.grow) once a
     * wasi program's memory grows past ~60 MB, whatever the program does */
    size_t n = 0, cap = 256u << 10;
#else
    size_t n = 0, cap = 4u << 20;
#endif
    unsigned char *buf = malloc(cap + 256);
    /* mixed text: mostly English-like words, some punctuation, numbers, other scripts */
    static const char *const words[] = { "the", "of", "and", "tokenizer", "model", "inference", "WebAssembly", "is", "a",
                                         "fast", "engine", "running", "in", "browsers", "with", "SIMD", "kernels", "2024", "3.14", "(see", "below).",
                                         "Führer", "café", "Привет", "мир", "日本語の", "テキスト", "中文", "😀", "don't", "it's", "x+y=z;", "\n", "\n\n", "  " };
    while (n < cap) {
        const char *w = words[tst_rand() % (sizeof words / sizeof words[0])];
        size_t l = strlen(w);
        memcpy(buf + n, w, l);
        n += l;
        buf[n++] = ' ';
    }
    int32_t *out = malloc(sizeof(int32_t) * (n + 16));
    for (int i = 0; i < 4; i++) {
        tvocab t;
        if (!bv_load(&t, names[i])) {
            tv_free(&t);
            continue;
        }
        uint32_t nt = 0;
        wlm_err err;
        double t0 = now_s();
        wlm_status st = wlm_vocab_tokenize(&t.v, (const char *)buf, (uint32_t)n, 0, out, (uint32_t)n + 16, &nt, &err);
        double dt = now_s() - t0;
        CHECK(st == WLM_OK);
        printf("  %-12s %.1f MB of mixed text: %u tokens, %.2f MB/s\n", names[i], n / 1e6, nt, n / 1e6 / dt);
        if (i == 0) { /* the whole-text algorithm: same ids, slower */
            int32_t *out2 = malloc(sizeof(int32_t) * (n + 16));
            uint32_t nt2 = 0;
            t0 = now_s();
            st = wlm_vocab_tokenize(&t.v, (const char *)buf, (uint32_t)n, (int)WLM_TOK_NO_SPLIT_, out2, (uint32_t)n + 16, &nt2, &err);
            dt = now_s() - t0;
            CHECK(st == WLM_OK && nt2 == nt && memcmp(out, out2, 4ull * nt) == 0);
            printf("  %-12s (whole-text priority queue, for comparison) %.2f MB/s, same ids: %s\n", names[i], n / 1e6 / dt,
                   nt2 == nt && memcmp(out, out2, 4ull * nt) == 0 ? "yes" : "NO");
            free(out2);
        }
        tv_free(&t);
    }
    free(out);
    free(buf);
}
