/* Tokenizer tests: llama.cpp's SentencePiece test vectors, the stories260K
 * vocabulary, a naive reference BPE, byte-exact round trips, the streaming
 * detokenizer's UTF-8 guarantees and malformed vocabularies. */

#include "vocab_util.h"

/* ---- helpers ----------------------------------------------------------------- */

/* Independent UTF-8 reference: decodes the code point of a k-byte sequence
 * and checks it is in range for k. */
static int ref_seq_len(unsigned char b) {
    if ((b & 0x80) == 0) return 1;
    if ((b & 0xE0) == 0xC0) return 2;
    if ((b & 0xF0) == 0xE0) return 3;
    if ((b & 0xF8) == 0xF0) return 4;
    return 0;
}
static int ref_valid_full(const unsigned char *s, int k) {
    static const unsigned min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    unsigned cp = k == 1 ? s[0] : k == 2 ? (s[0] & 0x1Fu)
        : k == 3                         ? (s[0] & 0x0Fu)
                                         : (s[0] & 0x07u);
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return 1;
}
/* is s[0..m) (m < k) the start of some valid k-byte sequence? */
static int ref_valid_prefix(const unsigned char *s, int m, int k) {
    for (int fill = 0x80; fill <= 0xBF; fill += 0x3F) {
        unsigned char tmp[4];
        for (int i = 0; i < k; i++) tmp[i] = i < m ? s[i] : (unsigned char)fill;
        if (ref_valid_full(tmp, k)) return 1;
    }
    return 0;
}
/* Length of the valid character at s, 0 if none (complete characters only). */
static int ref_char_len(const unsigned char *s, size_t n) {
    int k = ref_seq_len(s[0]);
    if (k == 0 || (size_t)k > n) return 0;
    return ref_valid_full(s, k) ? k : 0;
}
/* Replaces each maximal invalid subpart with U+FFFD (Unicode "best practice"). */
static size_t ref_sanitize(const unsigned char *s, size_t n, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int k = ref_char_len(s + i, n - i);
        if (k) {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
            continue;
        }
        int kk = ref_seq_len(s[i]);
        size_t m = 1;
        if (kk > 1)
            while (m < (size_t)kk && i + m < n && ref_valid_prefix(s + i, (int)m + 1, kk)) m++;
        if (kk > 1 && !ref_valid_prefix(s + i, 1, kk)) m = 1;
        out[o++] = 0xEF;
        out[o++] = 0xBF;
        out[o++] = 0xBD;
        i += m;
    }
    return o;
}
static int ref_is_valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = ref_char_len(s + i, n - i);
        if (!k) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* Naive reference SentencePiece BPE: rescans every adjacent pair after each
 * merge (O(n^2)), picks the highest score, leftmost on ties. */
static uint32_t ref_tokenize(const wlm_vocab *v, const unsigned char *s, size_t len, int32_t *out) {
    unsigned char *t = malloc(len * 3 + 4);
    size_t tl = 0;
    if (len && v->add_space_prefix) {
        t[tl++] = 0xE2;
        t[tl++] = 0x96;
        t[tl++] = 0x81;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            t[tl++] = 0xE2;
            t[tl++] = 0x96;
            t[tl++] = 0x81;
        } else t[tl++] = s[i];
    }
    size_t *st = malloc(sizeof(size_t) * (tl + 1)), *ln = malloc(sizeof(size_t) * (tl + 1));
    size_t ns = 0;
    for (size_t i = 0; i < tl;) {
        int k = ref_char_len(t + i, tl - i);
        if (!k) k = 1;
        st[ns] = i;
        ln[ns] = (size_t)k;
        ns++;
        i += (size_t)k;
    }
    for (;;) {
        long best = -1;
        float bs = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            int32_t id = wlm_vocab_find(v, (const char *)t + st[i], (uint32_t)(ln[i] + ln[i + 1]));
            if (id < 0) continue;
            if (best < 0 || v->score[id] > bs) {
                best = (long)i;
                bs = v->score[id];
            }
        }
        if (best < 0) break;
        ln[best] += ln[best + 1];
        memmove(st + best + 1, st + best + 2, sizeof(size_t) * (ns - best - 2));
        memmove(ln + best + 1, ln + best + 2, sizeof(size_t) * (ns - best - 2));
        ns--;
    }
    uint32_t n = 0;
    for (size_t i = 0; i < ns; i++) {
        int32_t id = wlm_vocab_find(v, (const char *)t + st[i], (uint32_t)ln[i]);
        if (id >= 0) {
            out[n++] = id;
            continue;
        }
        for (size_t j = 0; j < ln[i]; j++) {
            int32_t b = v->byte_tok[t[st[i] + j]];
            if (b < 0) b = v->unk;
            if (b >= 0) out[n++] = b;
        }
    }
    free(t);
    free(st);
    free(ln);
    return n;
}

/* random text from pieces of many scripts */
static const char *const k_pieces[] = {
    "a",
    "b",
    "e",
    "t",
    "h",
    "the",
    "ing",
    "Hello",
    "world",
    "W",
    "Q",
    "z",
    "0",
    "1",
    "42",
    "3.14",
    " ",
    " ",
    " ",
    "  ",
    "   ",
    "\n",
    "\n\n",
    "\t",
    " \n",
    "!",
    "?",
    ",",
    ".",
    "'",
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
    "<s>",
    "</s>",
    "<0x41>",
    "▅",
    "é",
    "à",
    "ü",
    "ñ",
    "ç",
    "Ø",
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
    "字",
    "日本語",
    "한국어",
    "ไทย",
    "עברית",
    "العربية",
    "हिन्दी",
    "∑",
    "∞",
    "≠",
    "€",
    "£",
    "😀",
    "🦙",
    "🎉",
    "𝔘",
    "𠀀",
    "👍🏽",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈",
    "❤️",
    "\xc2\xa0",
    "\xe3\x80\x80",
    "\x7f",
    "\x01",
};
static size_t rand_text(unsigned char *buf, size_t max_pieces) {
    size_t n = 0, np = 1 + tst_rand() % max_pieces;
    for (size_t i = 0; i < np; i++) {
        const char *p = k_pieces[tst_rand() % (sizeof k_pieces / sizeof k_pieces[0])];
        size_t l = strlen(p);
        memcpy(buf + n, p, l);
        n += l;
    }
    return n;
}
static int has_lower_block(const unsigned char *s, size_t n) {
    for (size_t i = 0; i + 2 < n; i++)
        if (s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) return 1;
    return 0;
}

/* ---- 1. llama.cpp test vectors ---------------------------------------------- */

TEST(tokenizer_llama_spm_vectors) {
    tvocab t;
    if (!tv_load(&t, "vocab/ggml-vocab-llama-spm.gguf")) {
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    CHECK(t.v.n == 32000);
    CHECK(t.v.bos == 1 && t.v.eos == 2 && t.v.unk == 0);
    CHECK(t.v.add_bos == 1 && t.v.add_space_prefix == 1);
    for (int b = 0; b < 256; b++) CHECK(t.v.byte_tok[b] == 3 + b);

    unsigned long long ni = 0, no = 0;
    char *inp = (char *)tst_read_file(tst_path("vocab/ggml-vocab-llama-spm.gguf.inp"), &ni);
    char *outp = (char *)tst_read_file(tst_path("vocab/ggml-vocab-llama-spm.gguf.out"), &no);
    REQUIRE(inp && outp);
    outp = realloc(outp, no + 1);
    outp[no] = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    size_t ip = 0, op = 0;
    int total = 0, pass = 0;
    while (ip < ni) {
        size_t e = ip;
        while (e + sl <= ni && memcmp(inp + e, sep, sl) != 0) e++;
        if (e + sl > ni) break;
        /* expected line */
        size_t le = op;
        while (le < no && outp[le] != '\n') le++;
        int32_t expect[1024];
        uint32_t ne = 0;
        char *q = outp + op;
        while (q < outp + le) {
            while (q < outp + le && *q == ' ') q++;
            if (q >= outp + le) break;
            expect[ne++] = (int32_t)strtol(q, &q, 10);
        }
        uint32_t n = 0;
        int32_t *got = tv_tokenize(&t.v, inp + ip, (uint32_t)(e - ip), 0, &n);
        int same = got && n == ne && (ne == 0 || memcmp(got, expect, ne * 4) == 0);
        total++;
        if (same) pass++;
        else {
            fprintf(stderr, "  vector %d mismatch: '%.*s' got", total, (int)(e - ip), inp + ip);
            for (uint32_t i = 0; got && i < n; i++) fprintf(stderr, " %d", got[i]);
            fprintf(stderr, " expected");
            for (uint32_t i = 0; i < ne; i++) fprintf(stderr, " %d", expect[i]);
            fputc('\n', stderr);
        }
        free(got);
        ip = e + sl;
        op = le + 1;
    }
    printf("  llama-spm vectors: %d/%d pass\n", pass, total);
    CHECK(total == 46);
    CHECK(pass == total);
    free(inp);
    free(outp);
    tv_free(&t);
}

/* ---- 2. stories260K ------------------------------------------------------------- */

TEST(tokenizer_stories260k) {
    tvocab t;
    if (!tv_load(&t, "models/stories260K.gguf")) {
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    CHECK(t.v.n == 512);
    CHECK(t.v.add_bos == 1);
    int32_t out[16];
    uint32_t n = 0;
    wlm_err err = { 0 };
    const char *s = "Once upon a time";
    CHECK(wlm_vocab_tokenize(&t.v, s, (uint32_t)strlen(s), 1, out, 16, &n, &err) == WLM_OK);
    int32_t want[] = { 1, 403, 407, 261, 378 };
    CHECK(n == 5 && memcmp(out, want, sizeof want) == 0);
    CHECK(wlm_vocab_tokenize(&t.v, "", 0, 1, out, 16, &n, &err) == WLM_OK);
    CHECK(n == 1 && out[0] == 1);
    CHECK(wlm_vocab_tokenize(&t.v, "", 0, 0, out, 16, &n, &err) == WLM_OK);
    CHECK(n == 0);
    CHECK(wlm_vocab_tokenize(&t.v, NULL, 0, 1, out, 16, &n, &err) == WLM_OK && n == 1);
    /* WLM_TOK_NO_SPACE_PREFIX: text that continues other text gets no "▁"
     * in front, so " Once upon" gives what "Once upon" gives with the
     * prefix, and "Once" alone another piece than "▁Once" */
    int32_t a[16], b2[16];
    uint32_t na = 0, nb = 0;
    CHECK(wlm_vocab_tokenize(&t.v, " Once upon", 10, WLM_TOK_NO_SPACE_PREFIX, a, 16, &na, &err) == WLM_OK);
    CHECK(wlm_vocab_tokenize(&t.v, "Once upon", 9, 0, b2, 16, &nb, &err) == WLM_OK);
    CHECK(na == 2 && nb == 2 && memcmp(a, b2, 8) == 0 && a[0] == 403 && a[1] == 407);
    CHECK(wlm_vocab_tokenize(&t.v, "Once", 4, WLM_TOK_NO_SPACE_PREFIX, a, 16, &na, &err) == WLM_OK);
    CHECK(na >= 1 && a[0] != 403);

    /* too small a buffer: the count needed, nothing written past cap */
    int32_t small[3] = { -7, -7, -7 };
    CHECK(wlm_vocab_tokenize(&t.v, s, (uint32_t)strlen(s), 1, small, 2, &n, &err) == WLM_ERR_ARG);
    CHECK(n == 5);
    CHECK(strstr(err.msg, "token buffer too small") != NULL);
    CHECK(small[0] == 1 && small[1] == 403 && small[2] == -7);
    CHECK(wlm_vocab_tokenize(&t.v, s, (uint32_t)strlen(s), 1, NULL, 0, &n, &err) == WLM_ERR_ARG && n == 5);

    /* token bytes */
    char b[64];
    CHECK(wlm_vocab_token_bytes(&t.v, 1, b, sizeof b) == 0); /* <s> */
    CHECK(wlm_vocab_token_bytes(&t.v, 2, b, sizeof b) == 0); /* </s> */
    CHECK(wlm_vocab_token_bytes(&t.v, 0, b, sizeof b) == 0); /* <unk> */
    CHECK(wlm_vocab_token_bytes(&t.v, -1, b, sizeof b) == 0);
    CHECK(wlm_vocab_token_bytes(&t.v, 512, b, sizeof b) == 0);
    CHECK(wlm_vocab_token_bytes(&t.v, 3 + 0x41, b, sizeof b) == 1 && b[0] == 'A');
    uint32_t l = wlm_vocab_token_bytes(&t.v, 403, b, sizeof b);
    CHECK(l == 5 && memcmp(b, " Once", 5) == 0);
    CHECK(wlm_vocab_token_bytes(&t.v, 403, b, 2) == 5); /* needed count */
    CHECK(wlm_vocab_find(&t.v, "\xe2\x96\x81Once", 7) == 403);
    CHECK(wlm_vocab_find(&t.v, "no such piece", 13) == -1);
    tv_free(&t);
}

/* ---- 3. reference BPE, round trips, detok ----------------------------------- */

TEST(tokenizer_matches_naive_bpe) {
    tvocab t;
    if (!tv_load(&t, "vocab/ggml-vocab-llama-spm.gguf")) {
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    unsigned char buf[4096];
    int32_t ref[4096 * 3];
    int bad = 0;
    for (int it = 0; it < 300; it++) {
        size_t n;
        if (it % 3 == 2) { /* raw bytes, often invalid UTF-8 */
            n = tst_rand() % 40;
            for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(tst_rand() % 4 ? tst_rand() : (unsigned char)" a\xe2\x96"[tst_rand() % 4]);
        } else n = rand_text(buf, 30);
        uint32_t ng = 0;
        int32_t *got = tv_tokenize(&t.v, (const char *)buf, (uint32_t)n, 0, &ng);
        uint32_t nr = ref_tokenize(&t.v, buf, n, ref);
        if (!got || ng != nr || (nr && memcmp(got, ref, nr * 4))) {
            if (bad++ < 3) fprintf(stderr, "  mismatch with naive BPE for '%.*s'\n", (int)n, buf);
        }
        free(got);
    }
    CHECK(bad == 0);
    tv_free(&t);
}

static void roundtrip_checks(const wlm_vocab *v, const unsigned char *s, size_t n, int *fails) {
    uint32_t nt = 0;
    int32_t *ids = tv_tokenize(v, (const char *)s, (uint32_t)n, 1, &nt);
    if (!ids) {
        (*fails)++;
        return;
    }
    size_t cap = n * 3 + 64;
    unsigned char *cat = malloc(cap), *stream = malloc(cap * 2 + 256), *san = malloc(n * 3 + 16);
    size_t nc = 0, ns = 0;
    int ok = nt >= 1 && ids[0] == v->bos;
    wlm_detok d;
    wlm_detok_reset(&d);
    uint32_t dcap = 64 + v->max_len;
    char *piece = malloc(dcap);
    for (uint32_t i = 0; i < nt; i++) {
        if (i > 0) nc += wlm_vocab_token_bytes(v, ids[i], (char *)cat + nc, (uint32_t)(cap - nc));
        uint32_t w = wlm_vocab_detok_push(v, &d, ids[i], piece, dcap);
        if (!ref_is_valid_utf8((unsigned char *)piece, w)) ok = 0;
        memcpy(stream + ns, piece, w);
        ns += w;
    }
    uint32_t w = wlm_detok_flush(&d, piece, dcap);
    memcpy(stream + ns, piece, w);
    ns += w;
    if (d.n_pending) ok = 0;
    /* token bytes: the input byte-exactly, after the one added space */
    if (n == 0) ok = ok && nc == 0;
    else ok = ok && nc == n + 1 && cat[0] == ' ' && memcmp(cat + 1, s, n) == 0;
    /* streaming: the same text with invalid subparts replaced by U+FFFD */
    if (n) {
        san[0] = ' ';
        size_t nsan = 1 + ref_sanitize(s, n, san + 1);
        ok = ok && ns == nsan && memcmp(stream, san, ns) == 0;
        if (ref_is_valid_utf8(s, n)) ok = ok && ns == n + 1 && memcmp(stream + 1, s, n) == 0;
    }
    if (!ok) {
        if (*fails < 3) fprintf(stderr, "  round trip failed for '%.*s' (%zu bytes)\n", (int)n, s, n);
        (*fails)++;
    }
    free(ids);
    free(cat);
    free(stream);
    free(san);
    free(piece);
}

TEST(tokenizer_roundtrip_text) {
    tvocab t;
    if (!tv_load(&t, "vocab/ggml-vocab-llama-spm.gguf")) {
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    unsigned char buf[8192];
    int fails = 0, tried = 0;
    for (int it = 0; it < 500; it++) {
        size_t n = rand_text(buf, 60);
        if (has_lower_block(buf, n)) continue;
        CHECK(ref_is_valid_utf8(buf, n));
        roundtrip_checks(&t.v, buf, n, &fails);
        tried++;
    }
    const char *fixed[] = { "", " ", "  ", "\n", " leading", "trailing ", " both ", "\xf0\x9f\xa6\x99",
                            "👨‍👩‍👧‍👦 family", "日本語のテキスト", "e\xcc\x81" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        roundtrip_checks(&t.v, (const unsigned char *)fixed[i], strlen(fixed[i]), &fails);
        tried++;
    }
    printf("  %d text round trips, %d failed\n", tried, fails);
    CHECK(fails == 0);
    tv_free(&t);
}

TEST(tokenizer_roundtrip_bytes) {
    tvocab t;
    if (!tv_load(&t, "vocab/ggml-vocab-llama-spm.gguf")) {
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    unsigned char buf[512];
    int fails = 0, tried = 0;
    static const unsigned char special[] = { 0xC0, 0xC1, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0x80, 0xBF, 0xA0, 0x9F, 0x90, 0x8F, 0x20, 0x41 };
    for (int it = 0; it < 1000; it++) {
        size_t n = tst_rand() % 64;
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)(it % 2 ? special[tst_rand() % sizeof special] : tst_rand());
        if (has_lower_block(buf, n)) continue;
        roundtrip_checks(&t.v, buf, n, &fails);
        tried++;
    }
    /* a few hand-picked invalid sequences */
    const char *fixed[] = { "\xed\xa0\x80", "\xe0\x80\xaf", "\xf4\x90\x80\x80", "\xf0\x9f\x98", "a\xe2\x96", "\xc3",
                            "\xf8\x88\x80\x80\x80", "\xe2\x28\xa1", "\xf0\x9f\x98\x80\x80", "\xfe\xff" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        roundtrip_checks(&t.v, (const unsigned char *)fixed[i], strlen(fixed[i]), &fails);
        tried++;
    }
    printf("  %d byte round trips, %d failed\n", tried, fails);
    CHECK(fails == 0);
    tv_free(&t);
}

static void feed(const wlm_vocab *v, wlm_detok *d, int32_t id, const char *want, uint32_t wn) {
    char out[128];
    uint32_t w = wlm_vocab_detok_push(v, d, id, out, sizeof out);
    CHECKF(w == wn && memcmp(out, want, wn) == 0, "token %d gave %u bytes, want %u", id, w, wn);
}

TEST(tokenizer_detok_stream) {
    tvocab t;
    if (!tv_load(&t, "vocab/ggml-vocab-llama-spm.gguf")) {
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    const wlm_vocab *v = &t.v;
    wlm_detok d;
    wlm_detok_reset(&d);
    char out[128];
    /* a 4-byte emoji split over byte tokens is held until complete */
    feed(v, &d, v->byte_tok[0xF0], "", 0);
    CHECK(d.n_pending == 1);
    feed(v, &d, v->byte_tok[0x9F], "", 0);
    feed(v, &d, v->byte_tok[0xA6], "", 0);
    CHECK(d.n_pending == 3);
    feed(v, &d, v->byte_tok[0x99], "\xf0\x9f\xa6\x99", 4);
    CHECK(d.n_pending == 0);
    /* control tokens give nothing and do not disturb the held bytes */
    feed(v, &d, v->byte_tok[0xE4], "", 0);
    feed(v, &d, 1, "", 0);
    feed(v, &d, 2, "", 0);
    feed(v, &d, v->byte_tok[0xB8], "", 0);
    feed(v, &d, v->byte_tok[0xAD], "\xe4\xb8\xad", 3);
    /* an incomplete character followed by ASCII: U+FFFD then the text */
    feed(v, &d, v->byte_tok[0xE4], "", 0);
    int32_t hello = wlm_vocab_find(v, "\xe2\x96\x81Hello", 8);
    CHECK(hello >= 0);
    feed(v, &d, hello, "\xef\xbf\xbd Hello", 9);
    /* a lone continuation byte, an invalid lead and an overlong lead */
    feed(v, &d, v->byte_tok[0x80], "\xef\xbf\xbd", 3);
    feed(v, &d, v->byte_tok[0xFF], "\xef\xbf\xbd", 3);
    feed(v, &d, v->byte_tok[0xC0], "\xef\xbf\xbd", 3);
    /* surrogate: ED A0 is never valid -> FFFD for ED, FFFD for A0 */
    feed(v, &d, v->byte_tok[0xED], "", 0);
    feed(v, &d, v->byte_tok[0xA0], "\xef\xbf\xbd\xef\xbf\xbd", 6);
    /* flush of a held prefix */
    feed(v, &d, v->byte_tok[0xF0], "", 0);
    feed(v, &d, v->byte_tok[0x9F], "", 0);
    CHECK(wlm_detok_flush(&d, out, sizeof out) == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0);
    CHECK(d.n_pending == 0);
    CHECK(wlm_detok_flush(&d, out, sizeof out) == 0);
    /* out-of-range ids give nothing */
    feed(v, &d, -5, "", 0);
    feed(v, &d, (int32_t)v->n, "", 0);

    /* random token sequences: every push is valid UTF-8 */
    uint32_t dcap = 64 + v->max_len;
    char *buf = malloc(dcap);
    int bad = 0;
    for (int it = 0; it < 200; it++) {
        wlm_detok_reset(&d);
        for (int i = 0; i < 50; i++) {
            int32_t id;
            unsigned r = tst_rand() % 4;
            if (r == 0) id = v->byte_tok[tst_rand() & 255];
            else if (r == 1) id = v->byte_tok[0x80 + (tst_rand() & 127)];
            else id = (int32_t)(tst_rand() % (v->n + 4)) - 2;
            uint32_t w = wlm_vocab_detok_push(v, &d, id, buf, dcap);
            if (w > dcap || !ref_is_valid_utf8((unsigned char *)buf, w)) bad++;
            if (d.n_pending > 3) bad++;
        }
        uint32_t w = wlm_detok_flush(&d, buf, dcap);
        if (!ref_is_valid_utf8((unsigned char *)buf, w)) bad++;
    }
    CHECK(bad == 0);
    free(buf);
    tv_free(&t);
}

/* ---- hand-built vocabularies ---------------------------------------------------- */

static const char *const k_small_tok[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "aa", "b", "\xe2\x96\201b", "<0x61>", "<0x0A>" };
static const float k_small_score[] = { 0, 0, 0, -1, -2, -3, -2, -1, 0, 0 };
static const int32_t k_small_type[] = { 2, 3, 3, 1, 1, 1, 1, 1, 6, 6 };

static wlm_status small_vocab(tvocab *t, int variant, wlm_err *err) {
    gbuf b;
    gb_begin(&b);
    uint32_t n = 10;
    gb_kv_str(&b, "tokenizer.ggml.model", variant == 3 ? "t5" : variant == 7 ? "gpt2"
                                                                             : "llama");
    gb_tokens(&b, k_small_tok, n);
    gb_scores(&b, k_small_score, variant == 1 ? n - 1 : n);
    gb_types(&b, k_small_type, variant == 4 ? n + 1 - 1 - 2 : n);
    gb_kv_u32(&b, "tokenizer.ggml.bos_token_id", variant == 2 ? 10 : 1);
    gb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    gb_kv_u32(&b, "tokenizer.ggml.unknown_token_id", variant == 5 ? 99 : 0);
    if (variant == 6) {
        gb_kv_bool(&b, "tokenizer.ggml.add_space_prefix", 0);
        gb_kv_bool(&b, "tokenizer.ggml.add_bos_token", 0);
    }
    unsigned long long size;
    unsigned char *data = gb_end(&b, &size);
    memset(err, 0, sizeof *err);
    if (tv_load_bytes(t, data, size, err)) return WLM_OK;
    return err->code ? err->code : WLM_ERR_FORMAT;
}

TEST(tokenizer_small_vocab_merges) {
    tvocab t;
    wlm_err err;
    REQUIRE(small_vocab(&t, 0, &err) == WLM_OK);
    CHECK(t.v.byte_tok['a'] == 8 && t.v.byte_tok['\n'] == 9 && t.v.byte_tok['b'] == -1);
    int32_t out[32];
    uint32_t n = 0;
    /* "▁aaa": "aa" pairs tie, the leftmost merges first */
    CHECK(wlm_vocab_tokenize(&t.v, "aaa", 3, 1, out, 32, &n, &err) == WLM_OK);
    CHECK(n == 4 && out[0] == 1 && out[1] == 3 && out[2] == 5 && out[3] == 4);
    /* "▁b" (-1) beats "aa" (-3) ... and spaces become ▁ */
    CHECK(wlm_vocab_tokenize(&t.v, "b aab", 5, 0, out, 32, &n, &err) == WLM_OK);
    CHECK(n == 4 && out[0] == 7 && out[1] == 3 && out[2] == 5 && out[3] == 6);
    /* characters that are not pieces: byte tokens, else unk per byte */
    CHECK(wlm_vocab_tokenize(&t.v, "\nz\xc3\xa9", 4, 0, out, 32, &n, &err) == WLM_OK);
    CHECK(n == 5 && out[0] == 3 && out[1] == 9 && out[2] == 0 && out[3] == 0 && out[4] == 0);
    /* byte tokens decode to their byte, ▁ to a space */
    char s[8];
    CHECK(wlm_vocab_token_bytes(&t.v, 8, s, 8) == 1 && s[0] == 'a');
    CHECK(wlm_vocab_token_bytes(&t.v, 7, s, 8) == 2 && memcmp(s, " b", 2) == 0);
    tv_free(&t);

    REQUIRE(small_vocab(&t, 6, &err) == WLM_OK);
    CHECK(t.v.add_bos == 0 && t.v.add_space_prefix == 0);
    CHECK(wlm_vocab_tokenize(&t.v, "aaa", 3, 1, out, 32, &n, &err) == WLM_OK);
    CHECK(n == 3 && out[0] == 1 && out[1] == 5 && out[2] == 4);
    tv_free(&t);
}

TEST(tokenizer_bad_vocab) {
    tvocab t;
    wlm_err err;
    CHECK(small_vocab(&t, 1, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.scores has 9 entries") && strstr(err.msg, "tokens has 10"), "%s", err.msg);
    tv_free(&t);
    CHECK(small_vocab(&t, 2, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.bos_token_id") && strstr(err.msg, "10") && strstr(err.msg, "out of range"), "%s", err.msg);
    tv_free(&t);
    CHECK(small_vocab(&t, 3, &err) == WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "unsupported tokenizer model 't5'") && strstr(err.msg, "'bert' WordPiece") != NULL, "%s", err.msg);
    tv_free(&t);
    CHECK(small_vocab(&t, 7, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.merges") != NULL, "%s", err.msg);
    tv_free(&t);
    CHECK(small_vocab(&t, 4, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "token_type has 8 entries") && strstr(err.msg, "tokens has 10"), "%s", err.msg);
    tv_free(&t);
    CHECK(small_vocab(&t, 5, &err) == WLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.unknown_token_id") != NULL, "%s", err.msg);
    tv_free(&t);

    /* the real gpt-2 vocabulary loads (byte-level BPE) */
    unsigned long long size = 0;
    unsigned char *file = tst_read_file(tst_path("vocab/ggml-vocab-gpt-2.gguf"), &size);
    if (file) {
        CHECKF(tv_load_bytes(&t, file, size, &err), "%s", err.msg);
        tv_free(&t);
    }

    /* no tokenizer at all */
    gbuf b;
    gb_begin(&b);
    gb_kv_str(&b, "general.name", "x");
    file = gb_end(&b, &size);
    CHECK(!tv_load_bytes(&t, file, size, &err));
    CHECKF(strstr(err.msg, "tokenizer.ggml.model") != NULL, "%s", err.msg);
    tv_free(&t);
}
