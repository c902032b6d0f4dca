/* Byte-level BPE ("gpt2" tokenizer model) for GGUF vocabularies.
 *
 * Encoding of one text fragment (special tokens were split off before):
 *   1. pre-tokenization: the fragment is cut into words by the sequence of
 *      split patterns the vocabulary's tokenizer.ggml.pre names. Each
 *      pattern is applied to every piece the previous one produced; matches
 *      and the text between them both become pieces (as HF "Split" with
 *      behaviour "isolated" and llama.cpp do). The patterns are hand-written
 *      matchers over code points that follow the leftmost-first semantics of
 *      the published regular expressions (alternatives in order, greedy
 *      quantifiers with backtracking); they look at one piece only, so "$"
 *      and look-ahead stop at the piece's end;
 *   2. every byte of a word is one symbol: the token of the printable
 *      character GPT-2's byte-to-unicode table maps it to;
 *   3. adjacent symbols merge by tokenizer.ggml.merges rank, lowest rank
 *      first, leftmost on ties (a hash map (left id, right id) -> (rank,
 *      merged id) built at load time);
 *   4. with ignore_merges (Llama 3) a word that is itself a token is that
 *      token.
 *
 * Character classes (letters L*, numbers N*, punctuation P*, White_Space...)
 * come from the generated tables of unicode_tables.c. */
#include "vocab.h"
#include "unicode_tables.h"

/* ---- GPT-2 byte <-> code point mapping -------------------------------------- */

/* Printable bytes (33..126, 161..172, 174..255) stand for themselves; the 68
 * others get U+0100 + n, n counting them in byte order. */
uint32_t wlm_bpe_byte_to_cp(uint8_t b) {
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 256u + 33u + (b - 127u);
    if (b == 173) return 256u + 67u;
    return b;
}

int wlm_bpe_cp_to_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    uint32_t n = cp - 256;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(127 + n - 33);
    return 173;
}

static uint32_t utf8_put(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 63));
        o[2] = (uint8_t)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 63));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 63));
    o[3] = (uint8_t)(0x80 | (cp & 63));
    return 4;
}

/* Decodes the valid UTF-8 character at s[0..n): its length (0 if invalid). */
static uint32_t utf8_dec(const uint8_t *s, uint32_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    uint32_t k, c;
    if (b < 0xC2) return 0;
    else if (b < 0xE0) {
        k = 2;
        c = b & 0x1F;
    } else if (b < 0xF0) {
        k = 3;
        c = b & 0x0F;
    } else if (b < 0xF5) {
        k = 4;
        c = b & 0x07;
    } else return 0;
    if (k > n) return 0;
    for (uint32_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3Fu);
    }
    if ((k == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (k == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    *cp = c;
    return k;
}

uint32_t wlm_utf8_decode(const uint8_t *s, uint32_t n, uint32_t *cp) { return utf8_dec(s, n, cp); }
uint32_t wlm_utf8_put(uint32_t cp, uint8_t *o) { return utf8_put(cp, o); }

/* ---- pre-tokenizer names ------------------------------------------------------ */

static const struct {
    const char *name;
    uint32_t pre;
} k_pre_names[] = {
    { "default", WLM_PRE_DEFAULT },
    { "gpt-2", WLM_PRE_GPT2 },
    { "gpt2", WLM_PRE_GPT2 },
    { "mpt", WLM_PRE_GPT2 },
    { "olmo", WLM_PRE_GPT2 },
    { "jais", WLM_PRE_GPT2 },
    { "llama-bpe", WLM_PRE_LLAMA3 },
    { "llama3", WLM_PRE_LLAMA3 },
    { "llama-v3", WLM_PRE_LLAMA3 },
    { "dbrx", WLM_PRE_LLAMA3 },
    { "smaug-bpe", WLM_PRE_LLAMA3 },
    { "qwen2", WLM_PRE_QWEN2 },
    { "stablelm2", WLM_PRE_QWEN2 },
    { "deepseek-llm", WLM_PRE_DEEPSEEK_LLM },
    { "deepseek-coder", WLM_PRE_DEEPSEEK_CODER },
    { "falcon", WLM_PRE_FALCON },
    { "starcoder", WLM_PRE_STARCODER },
    { "refact", WLM_PRE_STARCODER },
    { "smollm", WLM_PRE_STARCODER },
    { "command-r", WLM_PRE_STARCODER },
    { "codeshell", WLM_PRE_STARCODER },
    { "exaone", WLM_PRE_STARCODER },
};

const char *wlm_pre_name(uint32_t pre) {
    for (uint32_t i = 0; i < sizeof k_pre_names / sizeof k_pre_names[0]; i++)
        if (k_pre_names[i].pre == pre) return k_pre_names[i].name;
    return "?";
}

/* ---- pre-tokenizer patterns ---------------------------------------------------- */

/* One pattern: the length of its match at position i of the piece [.., end)
 * (0 = no match there). *skip may be raised to the first position where a
 * match could start (lets patterns avoid rescanning long runs). */
typedef uint32_t (*pre_fn)(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip);

#define CAT(c) ((c)&WLM_UC_CAT_MASK)
#define IS_WS(c) (((c)&WLM_UC_WS) != 0)
#define IS_L(c) (CAT(c) == WLM_UC_L)
#define IS_N(c) (CAT(c) == WLM_UC_N)
#define IS_P(c) (CAT(c) == WLM_UC_P)
#define IS_OTHER(c) (!IS_WS(c) && !IS_L(c) && !IS_N(c)) /* [^\s\p{L}\p{N}] */

static uint32_t run_L(const uint8_t *cl, uint32_t i, uint32_t end) {
    while (i < end && IS_L(cl[i])) i++;
    return i;
}
static uint32_t run_N(const uint8_t *cl, uint32_t i, uint32_t end) {
    while (i < end && IS_N(cl[i])) i++;
    return i;
}
static uint32_t run_other(const uint8_t *cl, uint32_t i, uint32_t end) {
    while (i < end && IS_OTHER(cl[i])) i++;
    return i;
}
static uint32_t run_ws(const uint8_t *cl, uint32_t i, uint32_t end) {
    while (i < end && IS_WS(cl[i])) i++;
    return i;
}

/* 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive */
static uint32_t contraction(const uint32_t *cp, uint32_t i, uint32_t end, int ci) {
    if (cp[i] != '\'' || i + 1 >= end) return 0;
    uint32_t a = cp[i + 1];
    if (ci && a >= 'A' && a <= 'Z') a += 32;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= end) return 0;
    uint32_t b = cp[i + 2];
    if (ci && b >= 'A' && b <= 'Z') b += 32;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a white-space position: the run, minus its last
 * character when a non-space follows (that one then starts the next match). */
static uint32_t ws_tail(const uint8_t *cl, uint32_t i, uint32_t end) {
    uint32_t k = run_ws(cl, i, end);
    if (k == end || k - i == 1) return k - i;
    return k - i - 1;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (the variants without the final \s+ split identically: a lone white-space
 * character it would take is left between two matches, a piece of its own) */
static uint32_t pre_gpt2(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    uint32_t n = contraction(cp, i, end, 0);
    if (n) return n;
    uint32_t j = (cp[i] == ' ' && i + 1 < end) ? i + 1 : i;
    if (IS_L(cl[j])) return run_L(cl, j, end) - i;
    if (IS_N(cl[j])) return run_N(cl, j, end) - i;
    if (IS_OTHER(cl[j])) return run_other(cl, j, end) - i;
    if (IS_WS(cl[i])) return ws_tail(cl, i, end);
    return 0;
}

/* Llama 3 (cl100k-style), digit groups of up to `maxd`:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxd}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static uint32_t llama3_like(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t maxd) {
    uint32_t n = contraction(cp, i, end, 1);
    if (n) return n;
    uint32_t c = cp[i];
    if (IS_L(cl[i])) return run_L(cl, i, end) - i;
    if (c != '\r' && c != '\n' && !IS_N(cl[i]) && i + 1 < end && IS_L(cl[i + 1])) return run_L(cl, i + 1, end) - i;
    if (IS_N(cl[i])) {
        uint32_t k = i;
        while (k < end && k - i < maxd && IS_N(cl[k])) k++;
        return k - i;
    }
    uint32_t j = (c == ' ' && i + 1 < end) ? i + 1 : i;
    if (IS_OTHER(cl[j])) {
        uint32_t k = run_other(cl, j, end);
        while (k < end && (cp[k] == '\r' || cp[k] == '\n')) k++;
        return k - i;
    }
    if (IS_WS(cl[i])) {
        uint32_t k = run_ws(cl, i, end);
        for (uint32_t q = k; q > i; q--)
            if (cp[q - 1] == '\r' || cp[q - 1] == '\n') return q - i;
        if (k == end || k - i == 1) return k - i;
        return k - i - 1;
    }
    return 0;
}
static uint32_t pre_llama3(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return llama3_like(cp, cl, i, end, 3);
}
static uint32_t pre_qwen2(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return llama3_like(cp, cl, i, end, 1);
}

/* [\p{P}\$\+<=>\^~\|`]+ (falcon) and the same without '`' (default) */
static int is_punct_sym(uint32_t cp, uint8_t cl, int backtick) {
    return IS_P(cl) || cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' ||
        cp == '~' || cp == '|' || (backtick && cp == '`');
}
static uint32_t punct_run(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, int bt) {
    uint32_t k = i;
    while (k < end && is_punct_sym(cp[k], cl[k], bt)) k++;
    return k - i;
}
static uint32_t pre_punct_falcon(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return punct_run(cp, cl, i, end, 1);
}
static uint32_t pre_punct_default(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return punct_run(cp, cl, i, end, 0);
}
/* [0-9][0-9][0-9] */
static uint32_t pre_digits3(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    for (uint32_t k = 0; k < 3; k++)
        if (i + k >= end || cp[i + k] < '0' || cp[i + k] > '9') return 0;
    return 3;
}
/* \p{N} and \p{N}+ */
static uint32_t pre_num1(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return IS_N(cl[i]) ? 1 : 0;
}
static uint32_t pre_numrun(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return run_N(cl, i, end) - i;
}
/* [\r\n] */
static uint32_t pre_newline(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return (cp[i] == '\r' || cp[i] == '\n') ? 1 : 0;
}

/* \s?X+ for a class X */
typedef int (*cls_fn)(uint32_t cp, uint8_t cl);
static uint32_t opt_ws_run(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, cls_fn in) {
    uint32_t j = i;
    if (IS_WS(cl[i]) && i + 1 < end && in(cp[i + 1], cl[i + 1])) j = i + 1;
    if (!in(cp[j], cl[j])) return 0;
    while (j < end && in(cp[j], cl[j])) j++;
    return j - i;
}
static int c_dsk_letter(uint32_t cp, uint8_t cl) { return wlm_uc_in_pairs(wlm_uc_dsk_letters, wlm_uc_n_dsk_letters, cp); }
/* [!-/:-~！-／：-～‘-‟　-。] */
static int c_dsk_punct(uint32_t cp, uint8_t cl) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x7E) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
        (cp >= 0xFF1A && cp <= 0xFF5E) || (cp >= 0x2018 && cp <= 0x201F) || (cp >= 0x3000 && cp <= 0x3002);
}
/* [一-龥ࠀ-一가-퟿] */
static int c_cjk(uint32_t cp, uint8_t cl) {
    return (cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF);
}
static int c_letter(uint32_t cp, uint8_t cl) { return IS_L(cl); }
static int c_punct(uint32_t cp, uint8_t cl) { return IS_P(cl); }

static uint32_t pre_dsk_letters(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return opt_ws_run(cp, cl, i, end, c_dsk_letter);
}
static uint32_t pre_dsk_punct(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return opt_ws_run(cp, cl, i, end, c_dsk_punct);
}
static uint32_t pre_ws_letters(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return opt_ws_run(cp, cl, i, end, c_letter);
}
static uint32_t pre_ws_punct(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    return opt_ws_run(cp, cl, i, end, c_punct);
}
/* \s+$ (end of the piece) */
static uint32_t pre_ws_end(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    if (!IS_WS(cl[i])) return 0;
    uint32_t k = run_ws(cl, i, end);
    if (k == end) return k - i;
    *skip = k;
    return 0;
}
static uint32_t pre_cjk(const uint32_t *cp, const uint8_t *cl, uint32_t i, uint32_t end, uint32_t *skip) {
    uint32_t k = i;
    while (k < end && c_cjk(cp[k], cl[k])) k++;
    return k - i;
}

/* the pattern sequence of each pre-tokenizer */
static const pre_fn k_pre_seq[WLM_PRE_COUNT][6] = {
    [WLM_PRE_DEFAULT] = { pre_punct_default, pre_gpt2, pre_numrun, pre_digits3 },
    [WLM_PRE_GPT2] = { pre_gpt2 },
    [WLM_PRE_LLAMA3] = { pre_llama3 },
    [WLM_PRE_QWEN2] = { pre_qwen2 },
    [WLM_PRE_DEEPSEEK_LLM] = { pre_newline, pre_dsk_letters, pre_dsk_punct, pre_ws_end, pre_cjk, pre_numrun },
    [WLM_PRE_DEEPSEEK_CODER] = { pre_newline, pre_ws_letters, pre_ws_punct, pre_cjk, pre_num1 },
    [WLM_PRE_FALCON] = { pre_punct_falcon, pre_gpt2, pre_digits3 },
    [WLM_PRE_STARCODER] = { pre_num1, pre_gpt2 },
};

/* Cuts [0, n) into pieces: cut[i] = 1 where a piece starts (cut[n] = 1). */
static void pre_split(uint32_t pre, const uint32_t *cp, const uint8_t *cl, uint8_t *cut, uint32_t n) {
    for (uint32_t s = 0; s < 6 && k_pre_seq[pre][s]; s++) {
        pre_fn f = k_pre_seq[pre][s];
        for (uint32_t a = 0; a < n;) {
            uint32_t b = a + 1;
            while (!cut[b]) b++;
            for (uint32_t i = a; i < b;) {
                uint32_t skip = 0;
                uint32_t l = f(cp, cl, i, b, &skip);
                if (l) {
                    cut[i] = 1;
                    cut[i + l] = 1;
                    i += l;
                } else i = WLM_MAX(i + 1, skip);
            }
            a = b;
        }
    }
}

/* ---- merges --------------------------------------------------------------------- */

static inline uint32_t mg_hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key;
}

/* rank and merged id of the pair (a, b); 0 when they do not merge */
static inline int mg_find(const wlm_vocab *v, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
    if (a < 0 || b < 0) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t h = mg_hash(key) & v->mg_mask;
    for (;;) {
        uint64_t k = v->mg_key[h];
        if (k == key) {
            *rank = v->mg_rank[h];
            *id = v->mg_id[h];
            return 1;
        }
        if (k == ~0ull) return 0;
        h = (h + 1) & v->mg_mask;
    }
}

static uint64_t kv_remaining(const wlm_kv *kv, const uint8_t *p) {
    const uint8_t *end = kv->val + kv->val_bytes;
    if (!p || p < kv->val || p > end) return 0;
    return (uint64_t)(end - p);
}

wlm_status wlm_bpe_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err) {
    wlm_status st;
    const char *pre = NULL;
    uint32_t pre_len = 0;
    if ((st = wlm_kv_str(g, "tokenizer.ggml.pre", 0, &pre, &pre_len, err)) != WLM_OK) return st;
    v->pre = WLM_PRE_DEFAULT; /* files written before tokenizer.ggml.pre existed */
    if (pre) {
        uint32_t i, n = sizeof k_pre_names / sizeof k_pre_names[0];
        for (i = 0; i < n; i++)
            if (wlm_str_is(pre, pre_len, k_pre_names[i].name)) break;
        if (i == n)
            return wlm_fail(err, WLM_ERR_UNSUPPORTED,
                            "unsupported pre-tokenizer tokenizer.ggml.pre = '%.*s' (supported: default, gpt-2, mpt, olmo, jais, "
                            "llama-bpe, llama3, dbrx, smaug-bpe, qwen2, stablelm2, deepseek-llm, deepseek-coder, falcon, "
                            "starcoder, refact, smollm, command-r, codeshell, exaone)",
                            (int)WLM_MIN(pre_len, 64u), pre);
        v->pre = k_pre_names[i].pre;
    }
    v->ignore_merges = v->pre == WLM_PRE_LLAMA3;

    const wlm_kv *km = wlm_gguf_find(g, "tokenizer.ggml.merges");
    if (!km) return wlm_fail(err, WLM_ERR_FORMAT, "missing tokenizer.ggml.merges (a gpt2 tokenizer needs its merge list)");
    if (km->type != GGUF_ARRAY || km->arr_type != GGUF_STRING)
        return wlm_fail(err, WLM_ERR_FORMAT, "tokenizer.ggml.merges: expected an array of strings");
    if (km->arr_n > (1u << 24))
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "tokenizer.ggml.merges has %llu entries (at most %u supported)",
                        (unsigned long long)km->arr_n, 1u << 24);
    uint32_t nm = (uint32_t)km->arr_n;
    uint32_t cap = 16;
    while (cap < nm + nm / 2) cap *= 2;
    uint64_t off_rank = (uint64_t)cap * 8;
    uint64_t off_id = WLM_ALIGN_UP(off_rank + (uint64_t)cap * 4, 64);
    uint64_t off_tmp = WLM_ALIGN_UP(off_id + (uint64_t)cap * 4, 64);
    uint64_t total = off_tmp + 2ull * v->max_len + 8;
    uint8_t *mem = wlm_sys_alloc(total);
    if (!mem) return wlm_fail_nomem(err, "the merge table", total);
    v->mem_bpe = mem;
    v->mg_key = (uint64_t *)mem;
    v->mg_rank = (uint32_t *)(mem + off_rank);
    v->mg_id = (int32_t *)(mem + off_id);
    v->mg_mask = cap - 1;
    wlm_memset(v->mg_key, 0xFF, (size_t)cap * 8);
    uint8_t *tmp = mem + off_tmp;

    const uint8_t *p = km->arr_data;
    for (uint32_t i = 0; i < nm; i++) {
        uint64_t rem = kv_remaining(km, p);
        if (rem < 8) return wlm_fail(err, WLM_ERR_TRUNCATED, "tokenizer.ggml.merges: entry %u runs past the array", i);
        uint64_t l = wlm_rd64(p);
        if (l > rem - 8)
            return wlm_fail(err, WLM_ERR_TRUNCATED, "tokenizer.ggml.merges: entry %u has length %llu, past the end of the array",
                            i, (unsigned long long)l);
        const uint8_t *s = p + 8;
        p += 8 + l;
        uint64_t sp = 1;
        while (sp + 1 < l && s[sp] != ' ') sp++;
        if (l < 3 || sp + 1 >= l)
            return wlm_fail(err, WLM_ERR_FORMAT, "tokenizer.ggml.merges[%u] = '%.*s' is not two tokens separated by a space",
                            i, (int)WLM_MIN(l, 64ull), (const char *)s);
        uint32_t la = (uint32_t)sp, lb = (uint32_t)(l - sp - 1);
        int32_t a = wlm_vocab_find(v, (const char *)s, la);
        int32_t b = wlm_vocab_find(v, (const char *)s + sp + 1, lb);
        int32_t c = -1;
        if (a >= 0 && b >= 0 && la + lb <= v->max_len) {
            wlm_memcpy(tmp, s, la);
            wlm_memcpy(tmp + la, s + sp + 1, lb);
            c = wlm_vocab_find(v, (const char *)tmp, la + lb);
        }
        if (c < 0) {
            v->n_merges_skipped++;
            continue;
        } /* can never apply to token symbols */
        uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        uint32_t h = mg_hash(key) & v->mg_mask;
        while (v->mg_key[h] != ~0ull && v->mg_key[h] != key) h = (h + 1) & v->mg_mask;
        if (v->mg_key[h] == key) continue; /* a repeated merge keeps its first (lowest) rank */
        v->mg_key[h] = key;
        v->mg_rank[h] = i;
        v->mg_id[h] = c;
        v->n_merges++;
    }

    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        uint32_t n = utf8_put(wlm_bpe_byte_to_cp((uint8_t)b), u);
        v->byte_sym[b] = wlm_vocab_find(v, (const char *)u, n);
    }
    return WLM_OK;
}

/* ---- BPE of one word ---------------------------------------------------------------- */

typedef struct {
    uint32_t rank, left;
    int32_t lid, rid;
} mgcand;

static inline int mc_before(const mgcand *a, const mgcand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}
static void mc_push(mgcand *h, uint32_t *n, mgcand x) {
    uint32_t i = (*n)++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!mc_before(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}
static mgcand mc_pop(mgcand *h, uint32_t *n) {
    mgcand top = h[0], x = h[--(*n)];
    uint32_t i = 0, m = *n;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && mc_before(&h[c + 1], &h[c])) c++;
        if (!mc_before(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = x;
    return top;
}

typedef struct bpe_work {
    int32_t *sid;     /* symbol ids */
    uint32_t *pr;     /* small words: rank of pair (j, j+1) */
    int32_t *nx, *pv; /* large words: links */
    mgcand *heap;
    uint8_t *mapped; /* mapped text of a word (ignore_merges lookup) */
} bpe_work;

static void put_id(wlm_tok_out *o, int32_t id) {
    if (o->k < o->cap) o->out[o->k] = id;
    o->k++;
}
static void put_sym(const wlm_vocab *v, wlm_tok_out *o, int32_t id) {
    if (id < 0) id = v->unk; /* a byte whose character is not in the vocabulary */
    if (id >= 0) put_id(o, id);
}

#define SMALL_WORD 48

static void bpe_word(const wlm_vocab *v, const uint8_t *w, uint32_t m, bpe_work *wk, wlm_tok_out *o) {
    if (v->ignore_merges && m > 1) {
        uint32_t t = 0;
        for (uint32_t j = 0; j < m; j++) t += utf8_put(wlm_bpe_byte_to_cp(w[j]), wk->mapped + t);
        int32_t id = wlm_vocab_find(v, (const char *)wk->mapped, t);
        if (id >= 0) {
            put_id(o, id);
            return;
        }
    }
    int32_t *sid = wk->sid;
    for (uint32_t j = 0; j < m; j++) sid[j] = v->byte_sym[w[j]];
    if (m <= SMALL_WORD) {
        /* few symbols: keep the pair ranks in an array, merge the best */
        uint32_t *pr = wk->pr, n = m;
        int32_t mid = -1;
        for (uint32_t j = 0; j + 1 < n; j++)
            if (!mg_find(v, sid[j], sid[j + 1], &pr[j], &mid)) pr[j] = 0xFFFFFFFFu;
        while (n > 1) {
            uint32_t best = 0;
            for (uint32_t j = 1; j + 1 < n; j++)
                if (pr[j] < pr[best]) best = j;
            if (pr[best] == 0xFFFFFFFFu) break;
            uint32_t r;
            mg_find(v, sid[best], sid[best + 1], &r, &mid);
            sid[best] = mid;
            for (uint32_t j = best + 1; j + 1 < n; j++) {
                sid[j] = sid[j + 1];
                pr[j] = pr[j + 1];
            }
            n--;
            if (best + 1 < n && !mg_find(v, sid[best], sid[best + 1], &pr[best], &mid)) pr[best] = 0xFFFFFFFFu;
            if (best > 0 && !mg_find(v, sid[best - 1], sid[best], &pr[best - 1], &mid)) pr[best - 1] = 0xFFFFFFFFu;
        }
        for (uint32_t j = 0; j < n; j++) put_sym(v, o, sid[j]);
        return;
    }
    /* many symbols: linked list and a heap of candidate pairs, re-checked
     * when popped (a neighbour may have merged meanwhile) */
    int32_t *nx = wk->nx, *pv = wk->pv;
    mgcand *heap = wk->heap;
    uint32_t nh = 0;
    for (uint32_t j = 0; j < m; j++) {
        nx[j] = j + 1 < m ? (int32_t)j + 1 : -1;
        pv[j] = (int32_t)j - 1;
    }
    for (uint32_t j = 0; j + 1 < m; j++) {
        mgcand c;
        int32_t mid = -1;
        if (mg_find(v, sid[j], sid[j + 1], &c.rank, &mid)) {
            c.left = j;
            c.lid = sid[j];
            c.rid = sid[j + 1];
            mc_push(heap, &nh, c);
        }
    }
    while (nh) {
        mgcand c = mc_pop(heap, &nh);
        int32_t l = (int32_t)c.left, r = nx[l];
        if (sid[l] != c.lid || r < 0 || sid[r] != c.rid) continue;
        uint32_t rank;
        int32_t mid = -1;
        mg_find(v, c.lid, c.rid, &rank, &mid);
        sid[l] = mid;
        sid[r] = -2; /* merged away */
        nx[l] = nx[r];
        if (nx[r] >= 0) pv[nx[r]] = l;
        mgcand d;
        if (pv[l] >= 0 && mg_find(v, sid[pv[l]], sid[l], &d.rank, &mid)) {
            d.left = (uint32_t)pv[l];
            d.lid = sid[pv[l]];
            d.rid = sid[l];
            mc_push(heap, &nh, d);
        }
        if (nx[l] >= 0 && mg_find(v, sid[l], sid[nx[l]], &d.rank, &mid)) {
            d.left = (uint32_t)l;
            d.lid = sid[l];
            d.rid = sid[nx[l]];
            mc_push(heap, &nh, d);
        }
    }
    for (int32_t j = 0; j >= 0; j = nx[j]) put_sym(v, o, sid[j]);
}

/* ---- one fragment -------------------------------------------------------------------- */

/* Decodes text[0..len) (len > 0) into code points and pre-tokenizes it:
 * on return off[] holds the byte offset of each code point (off[n] = len)
 * and cut[i] = 1 where a word starts; the count n is returned. `mem` holds
 * split_bytes(len) bytes. */
static uint64_t split_bytes(uint32_t len) {
    uint64_t n1 = (uint64_t)len + 1;
    return WLM_ALIGN_UP(WLM_ALIGN_UP(WLM_ALIGN_UP(n1 * 4, 64) + n1 * 4, 64) + n1, 64) + n1 + 1;
}
static uint32_t decode_split(uint32_t pre, const uint8_t *text, uint32_t len, uint8_t *mem, uint32_t **off_out, uint8_t **cut_out) {
    uint64_t n1 = (uint64_t)len + 1;
    uint64_t off_off = WLM_ALIGN_UP(n1 * 4, 64);
    uint64_t off_cl = WLM_ALIGN_UP(off_off + n1 * 4, 64);
    uint64_t off_cut = WLM_ALIGN_UP(off_cl + n1, 64);
    uint32_t *cp = (uint32_t *)mem, *off = (uint32_t *)(mem + off_off);
    uint8_t *cl = mem + off_cl, *cut = mem + off_cut;
    uint32_t n = 0;
    for (uint32_t i = 0; i < len;) {
        uint32_t c, k = utf8_dec(text + i, len - i, &c);
        if (k == 0) {
            c = 0x110000u + text[i];
            k = 1;
        } /* a byte outside valid UTF-8: class C, alone */
        cp[n] = c;
        off[n] = i;
        cl[n] = (uint8_t)wlm_uc_class(c);
        cut[n] = 0;
        n++;
        i += k;
    }
    off[n] = len;
    cp[n] = 0;
    cl[n] = 0;
    cut[0] = 1;
    cut[n] = 1;
    pre_split(pre, cp, cl, cut, n);
    *off_out = off;
    *cut_out = cut;
    return n;
}

uint32_t wlm_bpe_split(uint32_t pre, const uint8_t *text, uint32_t len, uint32_t *ends, uint32_t cap) {
    if (len == 0 || pre >= WLM_PRE_COUNT) return 0;
    uint8_t *mem = wlm_sys_alloc(split_bytes(len));
    if (!mem) return 0;
    uint32_t *off;
    uint8_t *cut;
    uint32_t n = decode_split(pre, text, len, mem, &off, &cut), k = 0;
    for (uint32_t i = 1; i <= n; i++) {
        if (!cut[i]) continue;
        if (k < cap) ends[k] = off[i];
        k++;
    }
    wlm_sys_free(mem);
    return k;
}

wlm_status wlm_bpe_encode(const wlm_vocab *v, const uint8_t *text, uint32_t len, wlm_tok_out *o, wlm_err *err) {
    if (len == 0) return WLM_OK;
    uint64_t total = split_bytes(len);
    uint8_t *mem = wlm_sys_alloc(total);
    if (!mem) return wlm_fail_nomem(err, "tokenize", total);
    uint32_t *off;
    uint8_t *cut;
    uint32_t n = decode_split(v->pre, text, len, mem, &off, &cut);

    uint32_t maxw = 0;
    for (uint32_t a = 0; a < n;) {
        uint32_t b = a + 1;
        while (!cut[b]) b++;
        maxw = WLM_MAX(maxw, off[b] - off[a]);
        a = b;
    }
    uint64_t mw = maxw + 1;
    uint64_t o_pr = WLM_ALIGN_UP(mw * 4, 64);
    uint64_t o_nx = WLM_ALIGN_UP(o_pr + mw * 4, 64);
    uint64_t o_pv = WLM_ALIGN_UP(o_nx + mw * 4, 64);
    uint64_t o_heap = WLM_ALIGN_UP(o_pv + mw * 4, 64);
    uint64_t o_map = WLM_ALIGN_UP(o_heap + 3 * mw * sizeof(mgcand), 64);
    uint64_t total2 = o_map + 2 * mw;
    uint8_t *mem2 = wlm_sys_alloc(total2);
    if (!mem2) {
        wlm_sys_free(mem);
        return wlm_fail_nomem(err, "tokenize", total2);
    }
    bpe_work wk = { (int32_t *)mem2, (uint32_t *)(mem2 + o_pr), (int32_t *)(mem2 + o_nx), (int32_t *)(mem2 + o_pv),
                    (mgcand *)(mem2 + o_heap), mem2 + o_map };
    for (uint32_t a = 0; a < n;) {
        uint32_t b = a + 1;
        while (!cut[b]) b++;
        bpe_word(v, text + off[a], off[b] - off[a], &wk, o);
        a = b;
    }
    wlm_sys_free(mem2);
    wlm_sys_free(mem);
    return WLM_OK;
}
