/* WordPiece: the tokenizer of BERT-family GGUFs (tokenizer.ggml.model
 * "bert": all-MiniLM, bge, gte, nomic-embed, ...).
 *
 * How the GGUF stores the vocabulary: llama.cpp's converter rewrites
 * WordPiece's vocab.txt so that a piece that starts a word carries a
 * leading U+2581 ("▁") and a continuation piece loses its "##" prefix
 * ("play", "##ing" -> "▁play", "ing"); control tokens ([CLS], [SEP],
 * [UNK], [PAD], [MASK]) keep their text. So a word is matched as
 * "▁" + word against the pieces, greedily, longest piece first.
 *
 * Encoding of one text fragment (special tokens were split off before), as
 * BERT's basic tokenizer and WordPiece define it:
 *   1. normalization of each code point: with strip_accents, its canonical
 *      decomposition (Hangul syllables into their jamo) without the
 *      nonspacing marks (Mn); with lowercase, its simple lowercase mapping;
 *      NUL, U+FFFD and control/format/unassigned code points (category C)
 *      are dropped; bytes that are not valid UTF-8 are dropped too;
 *   2. words: White_Space separates words; a punctuation character
 *      (category P, or an ASCII symbol such as $ + < = > ^ ` | ~) and a CJK
 *      ideograph are words of their own;
 *   3. each word, "▁" + word, is cut from the left into the longest pieces
 *      of the vocabulary; when some position matches no piece, or the word
 *      has more than 100 characters (WordPiece's max_input_chars_per_word),
 *      the whole word becomes [UNK].
 * The normalizer's options come from tokenizer.ggml.normalizer.lowercase
 * (default true) and tokenizer.ggml.normalizer.strip_accents (default: the
 * lowercase value), as in HF's BertNormalizer. With add-special the text
 * is framed by [CLS] ... [SEP] (tokenizer.c).
 *
 * Where llama.cpp differs (checked against node-llama-cpp on synthetic
 * vocabularies, tools/xcheck/bert.mjs): it strips every mark (M), spacing
 * ones too, keeps only the leading jamo of a Hangul syllable, and has no
 * 100-character limit; the texts here follow BERT's own tokenizer there. */
#include "vocab.h"
#include "unicode_tables.h"

#define WPM_MAX_WORD_CHARS 100

static const uint8_t k_word_mark[3] = { 0xE2, 0x96, 0x81 }; /* U+2581 */

static wlm_status default_id(const wlm_gguf *g, const char *key, uint32_t n, int32_t fallback, int32_t *id, wlm_err *err) {
    if (*id >= 0) return WLM_OK;
    uint32_t v = 0xFFFFFFFFu;
    const wlm_kv *kv = wlm_gguf_find(g, key);
    if (kv) {
        wlm_status st = wlm_kv_u32(g, key, 1, &v, err);
        if (st) return st;
        if (v >= n) return wlm_fail(err, WLM_ERR_FORMAT, "%s = %u is out of range (the vocabulary has %u tokens)", key, v, n);
        *id = (int32_t)v;
        return WLM_OK;
    }
    *id = fallback >= 0 && (uint32_t)fallback < n ? fallback : -1;
    return WLM_OK;
}

wlm_status wlm_wpm_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err) {
    wlm_status st;
    /* [CLS] is the BOS of a bert vocabulary: tokenizer.ggml.bos_token_id,
     * else cls_token_id, else BERT's id 101; [SEP]: seperator_token_id
     * (the key's spelling) else 102; [UNK]: unknown_token_id else 100 */
    if ((st = default_id(g, "tokenizer.ggml.cls_token_id", v->n, 101, &v->bos, err))) return st;
    v->sep = -1;
    if ((st = default_id(g, "tokenizer.ggml.seperator_token_id", v->n, 102, &v->sep, err))) return st;
    if ((st = default_id(g, "tokenizer.ggml.unknown_token_id", v->n, 100, &v->unk, err))) return st;
    if (v->unk < 0)
        return wlm_fail(err, WLM_ERR_FORMAT, "a bert (WordPiece) vocabulary needs an unknown token: tokenizer.ggml.unknown_token_id is missing and id 100 is out of range");
    v->add_sep = 1;
    v->wpm_lower = 1;
    if ((st = wlm_kv_bool(g, "tokenizer.ggml.add_sep_token", &v->add_sep, err))) return st;
    if ((st = wlm_kv_bool(g, "tokenizer.ggml.normalizer.lowercase", &v->wpm_lower, err))) return st;
    v->wpm_lower = v->wpm_lower ? 1 : 0;
    v->wpm_strip = v->wpm_lower;
    if ((st = wlm_kv_bool(g, "tokenizer.ggml.normalizer.strip_accents", &v->wpm_strip, err))) return st;
    v->wpm_strip = v->wpm_strip ? 1 : 0;
    v->add_sep = v->add_sep ? 1 : 0;
    return WLM_OK;
}

/* CJK Unified Ideographs and their extensions and compatibility blocks, as
 * BERT's tokenizer lists them (each is a word of its own) */
static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
        (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
        (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* a word of its own: punctuation (P) or an ASCII symbol (S) */
static int is_punct(uint32_t cp, uint32_t cl) {
    uint32_t cat = cl & WLM_UC_CAT_MASK;
    return cat == WLM_UC_P || (cp < 0x7F && cat == WLM_UC_S);
}

/* The word being built: "▁" then its normalized characters */
typedef struct wpm_word {
    uint8_t *b;
    uint32_t n, chars;
} wpm_word;

/* Greedy longest-match-first pieces of the word into o (the word is
 * "▁" + text; continuation pieces are stored without "##"); [UNK] when a
 * position matches nothing or the word is too long. Resets the word. */
static void flush_word(const wlm_vocab *v, wpm_word *w, wlm_tok_out *o) {
    if (w->n <= 3) return;
    uint32_t k0 = o->k;
    int ok = w->chars <= WPM_MAX_WORD_CHARS;
    for (uint32_t i = 0; ok && i < w->n;) {
        uint32_t j = WLM_MIN(w->n, i + v->max_len);
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = wlm_vocab_find(v, (const char *)w->b + i, j - i)) >= 0) break;
        if (id < 0) {
            ok = 0;
            break;
        }
        if (o->k < o->cap) o->out[o->k] = id;
        o->k++;
        i = j;
    }
    if (!ok) {
        o->k = k0;
        if (o->k < o->cap) o->out[o->k] = v->unk;
        o->k++;
    }
    w->n = 3;
    w->chars = 0;
}

static void word_add(wpm_word *w, uint32_t cp) {
    w->n += wlm_utf8_put(cp, w->b + w->n);
    w->chars++;
}

/* Hangul syllables: their jamo (Unicode's algorithmic decomposition) */
enum { HANGUL_S = 0xAC00,
       HANGUL_L = 0x1100,
       HANGUL_V = 0x1161,
       HANGUL_T = 0x11A7,
       HANGUL_NV = 21,
       HANGUL_NT = 28,
       HANGUL_N = 11172 };

wlm_status wlm_wpm_encode(const wlm_vocab *v, const uint8_t *text, uint32_t len, wlm_tok_out *o, wlm_err *err) {
    if (len == 0) return WLM_OK;
    /* a normalized character takes at most 3 bytes per input byte (Hangul:
     * three jamo of 3 bytes for 3 bytes; a case mapping at most 3 for 2),
     * plus the word mark */
    uint64_t cap = 3ull * len + 8;
    uint8_t *buf = wlm_sys_alloc(cap);
    if (!buf) return wlm_fail_nomem(err, "tokenize", cap);
    wpm_word w = { buf, 3, 0 };
    wlm_memcpy(buf, k_word_mark, 3);
    for (uint32_t i = 0; i < len;) {
        uint32_t cp, k = wlm_utf8_decode(text + i, len - i, &cp);
        if (k == 0) {
            i++;
            continue;
        } /* not valid UTF-8: dropped */
        i += k;
        uint32_t parts[3], np = 1;
        parts[0] = cp;
        if (v->wpm_strip) {
            if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_N) {
                uint32_t s = cp - HANGUL_S, t = s % HANGUL_NT;
                parts[0] = HANGUL_L + s / (HANGUL_NV * HANGUL_NT);
                parts[1] = HANGUL_V + (s % (HANGUL_NV * HANGUL_NT)) / HANGUL_NT;
                np = 2;
                if (t) parts[np++] = HANGUL_T + t;
            } else {
                parts[0] = wlm_uc_map(wlm_uc_nfd_base, wlm_uc_n_nfd_base, cp);
            }
        }
        for (uint32_t p = 0; p < np; p++) {
            uint32_t c = parts[p], cl = wlm_uc_class(c);
            if (cl & WLM_UC_WS) {
                flush_word(v, &w, o);
                continue;
            }
            if (c == 0 || c == 0xFFFD || (cl & WLM_UC_CAT_MASK) == WLM_UC_C) continue;
            if (v->wpm_strip && wlm_uc_in_pairs(wlm_uc_mn, wlm_uc_n_mn, c)) continue;
            if (v->wpm_lower) c = wlm_uc_map(wlm_uc_lower, wlm_uc_n_lower, c);
            if (is_punct(c, cl) || is_cjk(c)) {
                flush_word(v, &w, o);
                word_add(&w, c);
                flush_word(v, &w, o);
            } else {
                word_add(&w, c);
            }
        }
    }
    flush_word(v, &w, o);
    wlm_sys_free(buf);
    return WLM_OK;
}
