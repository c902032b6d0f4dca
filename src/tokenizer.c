/* Vocabulary loading for GGUF tokenizers ("llama" SentencePiece, "gpt2"
 * byte-level BPE encoded by tokenizer_bpe.c, "bert" WordPiece encoded by
 * tokenizer_wpm.c), the SentencePiece
 * encoder, special-token matching, end-of-generation ids, token-to-bytes
 * conversion and a streaming detokenizer that only ever emits valid UTF-8.
 *
 * Special tokens: before encoding, the text is cut at the texts of
 * user-defined tokens (always) and of control tokens (with
 * WLM_TOK_PARSE_SPECIAL), longest match first at each position; the pieces
 * between them are encoded on their own.
 *
 * Encoding:
 *   1. every ' ' becomes U+2581 ("▁"); with add_space_prefix one "▁" is put in
 *      front of non-empty text;
 *   2. the text is split into UTF-8 characters (a byte that does not start a
 *      complete, valid character is a symbol of its own);
 *   3. adjacent symbols are merged greedily: the pair whose concatenation is a
 *      vocabulary piece with the highest score goes first, the leftmost pair
 *      on ties. Candidate pairs wait in a max-heap and are checked again when
 *      they are popped (a neighbour may have changed meanwhile);
 *   4. each remaining symbol gives its piece id, or, when it is not a piece,
 *      one <0xNN> byte token per byte (unknown token if there is none).
 *   Fast path: when no piece contains "x▁" (x a character other than ▁), no
 *   merge can cross the boundary before a "▁" that follows a non-"▁", so the
 *   text is cut there and every segment is merged with its own small heap:
 *   the result is identical (merges inside a segment never depend on
 *   another segment, and leftmost order within a segment is preserved).
 *
 * Piece strings are not copied: they point into the GGUF bytes. */
#include "vocab.h"
#include "model.h"

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Number of bytes of the character a lead byte starts, 0 for a byte that can
 * never start a valid character (continuation bytes, C0, C1, F5..FF). */
static uint32_t utf8_lead_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;
    if (b < 0xE0) return 2;
    if (b < 0xF0) return 3;
    if (b < 0xF5) return 4;
    return 0;
}

/* Is `b` acceptable as continuation byte number `pos` (1..3) of a character
 * whose lead byte is `lead`? The second byte carries the restrictions that
 * rule out overlong forms, surrogates and values above U+10FFFF. */
static int utf8_cont_ok(uint8_t lead, uint32_t pos, uint8_t b) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (pos == 1) {
        if (lead == 0xE0) lo = 0xA0;
        else if (lead == 0xED) hi = 0x9F;
        else if (lead == 0xF0) lo = 0x90;
        else if (lead == 0xF4) hi = 0x8F;
    }
    return b >= lo && b <= hi;
}

/* Length of the valid character at s[0..n), or 0 when the bytes there are not
 * a complete valid character. */
static uint32_t utf8_valid_len(const uint8_t *s, uint64_t n) {
    uint32_t k = utf8_lead_len(s[0]);
    if (k == 0 || k > n) return 0;
    for (uint32_t i = 1; i < k; i++)
        if (!utf8_cont_ok(s[0], i, s[i])) return 0;
    return k;
}

/* ---- hashing ------------------------------------------------------------------ */

static uint32_t fnv1a(const uint8_t *s, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 16777619u;
    }
    return h;
}

int32_t wlm_vocab_find(const wlm_vocab *v, const char *s, uint32_t len) {
    if (!v || !v->hash || (len && !s)) return -1;
    if (len > v->max_len) return -1;
    uint32_t i = fnv1a((const uint8_t *)s, len) & v->hash_mask;
    for (;;) {
        uint32_t e = v->hash[i];
        if (e == 0) return -1;
        uint32_t id = e - 1;
        if (v->len[id] == len && wlm_memeq(v->text[id], s, len)) return (int32_t)id;
        i = (i + 1) & v->hash_mask;
    }
}

/* ---- loading ------------------------------------------------------------------ */

/* Parses "<0xNN>" (hex digits in either case); -1 when it is not one. */
static int parse_byte_piece(const char *s, uint32_t len) {
    if (len != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + d;
    }
    return v;
}

static const wlm_kv *find_array(const wlm_gguf *g, const char *key, uint32_t want_type,
                                uint32_t alt_type, wlm_err *err, wlm_status *st) {
    *st = WLM_OK;
    const wlm_kv *kv = wlm_gguf_find(g, key);
    if (!kv) return NULL;
    if (kv->type != GGUF_ARRAY) {
        *st = wlm_fail(err, WLM_ERR_FORMAT, "%s: expected an array (type %u), found type %u",
                       key, (unsigned)GGUF_ARRAY, kv->type);
        return NULL;
    }
    if (kv->arr_type != want_type && kv->arr_type != alt_type) {
        *st = wlm_fail(err, WLM_ERR_FORMAT, "%s: expected an array of type %u, found elements of type %u",
                       key, want_type, kv->arr_type);
        return NULL;
    }
    return kv;
}

/* Bytes from `p` to the end of the KV's value (0 if p is outside it). */
static uint64_t kv_remaining(const wlm_kv *kv, const uint8_t *p) {
    const uint8_t *end = kv->val + kv->val_bytes;
    if (!p || p < kv->val || p > end) return 0;
    return (uint64_t)(end - p);
}

static wlm_status load_id(const wlm_gguf *g, const char *key, uint32_t n, int32_t *out, wlm_err *err) {
    uint32_t id = 0xFFFFFFFFu;
    const wlm_kv *kv = wlm_gguf_find(g, key);
    *out = -1;
    if (!kv) return WLM_OK;
    if (kv->type == GGUF_I32) {
        int32_t s = (int32_t)wlm_rd32(kv->val);
        if (s == -1) return WLM_OK; /* -1: none */
        if (s < 0)
            return wlm_fail(err, WLM_ERR_FORMAT, "%s = %d is out of range (the vocabulary has %u tokens)", key, s, n);
        id = (uint32_t)s;
    } else {
        wlm_status st = wlm_kv_u32(g, key, 1, &id, err);
        if (st != WLM_OK) return st;
        if (id == 0xFFFFFFFFu) return WLM_OK; /* (uint32)-1: none */
    }
    if (id >= n)
        return wlm_fail(err, WLM_ERR_FORMAT, "%s = %u is out of range (the vocabulary has %u tokens)",
                        key, id, n);
    *out = (int32_t)id;
    return WLM_OK;
}

void wlm_vocab_free(wlm_vocab *v) {
    if (!v) return;
    if (v->mem) wlm_sys_free(v->mem);
    if (v->mem_sp) wlm_sys_free(v->mem_sp);
    if (v->mem_bpe) wlm_sys_free(v->mem_bpe);
    wlm_memset(v, 0, sizeof *v);
}

/* ---- special tokens, end of generation -------------------------------------------- */

static int is_special_type(uint8_t t) { return t == WLM_TOK_CONTROL || t == WLM_TOK_USER || t == WLM_TOK_UNKNOWN; }

/* Table of the tokens matched as whole strings in the text: user-defined
 * ones always, control (and unknown) ones with WLM_TOK_PARSE_SPECIAL. */
static wlm_status load_specials(wlm_vocab *v, wlm_err *err) {
    uint32_t ns = 0, nl = 0;
    for (uint32_t i = 0; i < v->n; i++)
        if (is_special_type(v->type[i]) && v->len[i]) ns++;
    if (ns == 0) return WLM_OK;
    uint32_t cap = 16;
    while (cap < 2 * ns) cap *= 2;
    uint64_t total = (uint64_t)cap * 4 + (uint64_t)ns * 4;
    uint8_t *mem = wlm_sys_alloc(total);
    if (!mem) return wlm_fail_nomem(err, "the special-token table", total);
    v->mem_sp = mem;
    v->sp_hash = (uint32_t *)mem;
    v->sp_lens = (uint32_t *)(mem + (uint64_t)cap * 4);
    v->sp_mask = cap - 1;
    for (uint32_t i = 0; i < v->n; i++) {
        if (!is_special_type(v->type[i]) || !v->len[i]) continue;
        uint32_t h = fnv1a((const uint8_t *)v->text[i], v->len[i]) & v->sp_mask;
        int dup = 0;
        for (;;) {
            uint32_t e = v->sp_hash[h];
            if (e == 0) break;
            if (v->len[e - 1] == v->len[i] && wlm_memeq(v->text[e - 1], v->text[i], v->len[i])) {
                dup = 1;
                break;
            }
            h = (h + 1) & v->sp_mask;
        }
        if (dup) continue; /* the first id of a repeated text wins */
        v->sp_hash[h] = i + 1;
        v->n_special++;
        v->sp_first[(uint8_t)v->text[i][0]] |= v->type[i] == WLM_TOK_USER ? 1 : 2;
        uint32_t l = v->len[i], k;
        for (k = 0; k < nl && v->sp_lens[k] != l; k++) {}
        if (k == nl) v->sp_lens[nl++] = l;
    }
    for (uint32_t a = 1; a < nl; a++) /* longest first */
        for (uint32_t b = a; b > 0 && v->sp_lens[b] > v->sp_lens[b - 1]; b--) {
            uint32_t t = v->sp_lens[b];
            v->sp_lens[b] = v->sp_lens[b - 1];
            v->sp_lens[b - 1] = t;
        }
    v->n_sp_lens = nl;
    return WLM_OK;
}

/* Longest special token at text[pos..len) allowed by `mask` (1 user-defined,
 * 2 control); its id and length, or -1. */
static int32_t match_special(const wlm_vocab *v, const uint8_t *text, uint32_t pos, uint32_t len, uint32_t mask, uint32_t *mlen) {
    for (uint32_t k = 0; k < v->n_sp_lens; k++) {
        uint32_t l = v->sp_lens[k];
        if (l > len - pos) continue;
        uint32_t h = fnv1a(text + pos, l) & v->sp_mask;
        for (;;) {
            uint32_t e = v->sp_hash[h];
            if (e == 0) break;
            uint32_t id = e - 1;
            if (v->len[id] == l && __builtin_memcmp(v->text[id], text + pos, l) == 0) {
                uint32_t m = v->type[id] == WLM_TOK_USER ? 1 : 2;
                if (m & mask) {
                    *mlen = l;
                    return (int32_t)id;
                }
                break;
            }
            h = (h + 1) & v->sp_mask;
        }
    }
    return -1;
}

static const char *const k_eog_text[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "</s>", "<end_of_turn>" };

static void add_eog(wlm_vocab *v, int32_t id) {
    if (id < 0) return;
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return;
    if (v->n_eog < 16) v->eog[v->n_eog++] = id;
}

static void find_eog(wlm_vocab *v) {
    add_eog(v, v->eos);
    add_eog(v, v->eot);
    add_eog(v, v->eom);
    for (uint32_t k = 0; k < sizeof k_eog_text / sizeof k_eog_text[0]; k++) {
        uint32_t l = (uint32_t)wlm_strlen(k_eog_text[k]);
        for (uint32_t i = 0; i < v->n; i++)
            if (v->type[i] == WLM_TOK_CONTROL && v->len[i] == l && wlm_memeq(v->text[i], k_eog_text[k], l)) add_eog(v, (int32_t)i);
    }
}

int wlm_vocab_is_eog(const wlm_vocab *v, int32_t token) {
    if (!v || token < 0) return 0;
    for (uint32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == token) return 1;
    return 0;
}

WLM_API int wlm_token_is_eog(const wlm_model *m, int32_t token) {
    return m ? wlm_vocab_is_eog(&m->vocab, token) : 0;
}

/* SPM fast path condition: no piece has a "▁" preceded by something else
 * than "▁" (then no merge crosses a cut before such a "▁"). */
static uint32_t spm_split_safe(const wlm_vocab *v) {
    for (uint32_t i = 0; i < v->n; i++) {
        const uint8_t *p = (const uint8_t *)v->text[i];
        uint32_t n = v->len[i];
        for (uint32_t j = 1; j + 2 < n; j++) {
            if (p[j] != 0xE2 || p[j + 1] != 0x96 || p[j + 2] != 0x81) continue;
            if (j < 3 || p[j - 3] != 0xE2 || p[j - 2] != 0x96 || p[j - 1] != 0x81) return 0;
        }
    }
    return 1;
}

wlm_status wlm_vocab_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err) {
    wlm_status st;
    if (!v || !g) return wlm_fail(err, WLM_ERR_ARG, "wlm_vocab_load: NULL argument");
    wlm_memset(v, 0, sizeof *v);
    v->bos = v->eos = v->unk = v->eot = v->eom = v->pad = -1;

    const char *model = NULL;
    uint32_t model_len = 0;
    st = wlm_kv_str(g, "tokenizer.ggml.model", 0, &model, &model_len, err);
    if (st != WLM_OK) return st;
    if (!model) return wlm_fail(err, WLM_ERR_FORMAT, "missing tokenizer.ggml.model (no vocabulary in this file)");
    if (wlm_str_is(model, model_len, "llama")) v->kind = WLM_VOCAB_SPM;
    else if (wlm_str_is(model, model_len, "gpt2")) v->kind = WLM_VOCAB_BPE;
    else if (wlm_str_is(model, model_len, "bert")) v->kind = WLM_VOCAB_WPM;
    else
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "unsupported tokenizer model '%.*s' (supported: 'llama' SentencePiece, 'gpt2' byte-level BPE, 'bert' WordPiece)",
                        (int)WLM_MIN(model_len, 64u), model);

    const wlm_kv *ktok = find_array(g, "tokenizer.ggml.tokens", GGUF_STRING, GGUF_STRING, err, &st);
    if (st != WLM_OK) return st;
    if (!ktok) return wlm_fail(err, WLM_ERR_FORMAT, "missing tokenizer.ggml.tokens");
    const wlm_kv *kscore = find_array(g, "tokenizer.ggml.scores", GGUF_F32, GGUF_F32, err, &st);
    if (st != WLM_OK) return st;
    const wlm_kv *ktype = find_array(g, "tokenizer.ggml.token_type", GGUF_I32, GGUF_U32, err, &st);
    if (st != WLM_OK) return st;

    uint64_t n64 = ktok->arr_n;
    if (n64 == 0) return wlm_fail(err, WLM_ERR_FORMAT, "tokenizer.ggml.tokens is empty");
    if (n64 > (1u << 26))
        return wlm_fail(err, WLM_ERR_UNSUPPORTED, "tokenizer.ggml.tokens has %llu tokens (at most %u supported)",
                        (unsigned long long)n64, 1u << 26);
    uint32_t n = (uint32_t)n64;
    if (kscore && kscore->arr_n != n64)
        return wlm_fail(err, WLM_ERR_FORMAT, "tokenizer.ggml.scores has %llu entries but tokenizer.ggml.tokens has %u",
                        (unsigned long long)kscore->arr_n, n);
    if (ktype && ktype->arr_n != n64)
        return wlm_fail(err, WLM_ERR_FORMAT, "tokenizer.ggml.token_type has %llu entries but tokenizer.ggml.tokens has %u",
                        (unsigned long long)ktype->arr_n, n);
    if (kscore && kv_remaining(kscore, kscore->arr_data) < (uint64_t)n * 4)
        return wlm_fail(err, WLM_ERR_TRUNCATED, "tokenizer.ggml.scores runs past its value");
    if (ktype && kv_remaining(ktype, ktype->arr_data) < (uint64_t)n * 4)
        return wlm_fail(err, WLM_ERR_TRUNCATED, "tokenizer.ggml.token_type runs past its value");

    uint32_t hcap = 16;
    while (hcap < 2 * n) hcap *= 2;

    uint64_t off_text = 0;
    uint64_t off_len = WLM_ALIGN_UP(off_text + (uint64_t)n * sizeof(const char *), 64);
    uint64_t off_score = WLM_ALIGN_UP(off_len + (uint64_t)n * 4, 64);
    uint64_t off_hash = WLM_ALIGN_UP(off_score + (uint64_t)n * 4, 64);
    uint64_t off_type = WLM_ALIGN_UP(off_hash + (uint64_t)hcap * 4, 64);
    uint64_t total = off_type + n;
    uint8_t *mem = wlm_sys_alloc(total);
    if (!mem) return wlm_fail_nomem(err, "the vocabulary", total);
    v->mem = mem;
    v->n = n;
    v->text = (const char **)(mem + off_text);
    v->len = (uint32_t *)(mem + off_len);
    v->score = (float *)(mem + off_score);
    v->hash = (uint32_t *)(mem + off_hash);
    v->type = mem + off_type;
    v->hash_mask = hcap - 1;

    /* pieces: u64 length + bytes each, walked against the KV's extent */
    const uint8_t *p = ktok->arr_data;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t rem = kv_remaining(ktok, p);
        if (rem < 8) {
            st = wlm_fail(err, WLM_ERR_TRUNCATED, "tokenizer.ggml.tokens: token %u runs past the array", i);
            goto fail;
        }
        uint64_t l = wlm_rd64(p);
        if (l > rem - 8) {
            st = wlm_fail(err, WLM_ERR_TRUNCATED, "tokenizer.ggml.tokens: token %u has length %llu, past the end of the array",
                          i, (unsigned long long)l);
            goto fail;
        }
        if (l > 65536) {
            st = wlm_fail(err, WLM_ERR_UNSUPPORTED, "tokenizer.ggml.tokens: token %u is %llu bytes long", i, (unsigned long long)l);
            goto fail;
        }
        v->text[i] = (const char *)(p + 8);
        v->len[i] = (uint32_t)l;
        if (v->len[i] > v->max_len) v->max_len = v->len[i];
        p += 8 + l;
    }
    for (uint32_t i = 0; i < n; i++) {
        v->score[i] = kscore ? wlm_rdf32(kscore->arr_data + (uint64_t)i * 4) : 0.0f;
        if (ktype) {
            int32_t t = (int32_t)wlm_rd32(ktype->arr_data + (uint64_t)i * 4);
            v->type[i] = (uint8_t)((t >= 0 && t <= 255) ? t : 0);
        } else {
            v->type[i] = parse_byte_piece(v->text[i], v->len[i]) >= 0 ? WLM_TOK_BYTE : WLM_TOK_NORMAL;
        }
    }

    /* piece -> id; a repeated piece maps to its last id */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = fnv1a((const uint8_t *)v->text[i], v->len[i]) & v->hash_mask;
        for (;;) {
            uint32_t e = v->hash[h];
            if (e == 0) {
                v->hash[h] = i + 1;
                break;
            }
            uint32_t j = e - 1;
            if (v->len[j] == v->len[i] && wlm_memeq(v->text[j], v->text[i], v->len[i])) {
                v->hash[h] = i + 1;
                break;
            }
            h = (h + 1) & v->hash_mask;
        }
    }

    for (int b = 0; b < 256; b++) v->byte_tok[b] = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (v->type[i] != WLM_TOK_BYTE) continue;
        int b = parse_byte_piece(v->text[i], v->len[i]);
        if (b >= 0 && v->byte_tok[b] < 0) v->byte_tok[b] = (int32_t)i;
    }

    if ((st = load_id(g, "tokenizer.ggml.bos_token_id", n, &v->bos, err)) != WLM_OK) goto fail;
    if ((st = load_id(g, "tokenizer.ggml.eos_token_id", n, &v->eos, err)) != WLM_OK) goto fail;
    if ((st = load_id(g, "tokenizer.ggml.unknown_token_id", n, &v->unk, err)) != WLM_OK) goto fail;
    if ((st = load_id(g, "tokenizer.ggml.eot_token_id", n, &v->eot, err)) != WLM_OK) goto fail;
    if ((st = load_id(g, "tokenizer.ggml.eom_token_id", n, &v->eom, err)) != WLM_OK) goto fail;
    if ((st = load_id(g, "tokenizer.ggml.padding_token_id", n, &v->pad, err)) != WLM_OK) goto fail;
    /* SentencePiece vocabularies add BOS and a space prefix unless told
     * otherwise; byte-level BPE ones (GPT-2 style) do neither by default;
     * WordPiece ones frame a text as [CLS] ... [SEP] */
    v->add_bos = v->kind != WLM_VOCAB_BPE;
    v->add_space_prefix = v->kind == WLM_VOCAB_SPM;
    v->add_eos = 0;
    if ((st = wlm_kv_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) != WLM_OK) goto fail;
    if ((st = wlm_kv_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) != WLM_OK) goto fail;
    if ((st = wlm_kv_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)) != WLM_OK) goto fail;
    v->add_bos = v->add_bos ? 1 : 0;
    v->add_eos = v->add_eos ? 1 : 0;
    v->add_space_prefix = v->add_space_prefix ? 1 : 0;

    if ((st = load_specials(v, err)) != WLM_OK) goto fail;
    find_eog(v);
    v->sep = -1;
    if (v->kind == WLM_VOCAB_WPM && (st = wlm_wpm_load(v, g, err)) != WLM_OK) goto fail;
    if (v->kind == WLM_VOCAB_BPE) {
        if ((st = wlm_bpe_load(v, g, err)) != WLM_OK) goto fail;
    } else if (v->kind == WLM_VOCAB_SPM) {
        v->spm_split = spm_split_safe(v);
    }
    return WLM_OK;

fail:
    wlm_vocab_free(v);
    return st;
}

/* ---- encoding ------------------------------------------------------------------ */

typedef struct sym {
    uint32_t off, len; /* span in the normalized text; len 0 = merged away */
    int32_t prev, next;
} sym;

typedef struct bigram {
    float score;
    uint32_t left, size; /* left symbol index, byte length of the pair */
} bigram;

/* max-heap order: higher score first, then the leftmost pair */
static int bg_before(const bigram *a, const bigram *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

static void heap_push(bigram *h, uint32_t *n, bigram x) {
    uint32_t i = (*n)++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!bg_before(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static bigram heap_pop(bigram *h, uint32_t *n) {
    bigram top = h[0];
    bigram x = h[--(*n)];
    uint32_t i = 0, m = *n;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && bg_before(&h[c + 1], &h[c])) c++;
        if (!bg_before(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = x;
    return top;
}

static void try_pair(const wlm_vocab *v, const uint8_t *txt, const sym *s, int32_t l,
                     bigram *heap, uint32_t *nh) {
    if (l < 0 || s[l].next < 0) return;
    uint32_t size = s[l].len + s[s[l].next].len;
    if (size > v->max_len) return;
    int32_t id = wlm_vocab_find(v, (const char *)txt + s[l].off, size);
    if (id < 0) return;
    bigram b = { v->score[id], (uint32_t)l, size };
    heap_push(heap, nh, b);
}

static inline void emit(wlm_tok_out *o, int32_t id) {
    if (o->k < o->cap) o->out[o->k] = id;
    o->k++;
}

static int is_lower_block_at(const uint8_t *p, uint64_t i, uint64_t n) {
    return i + 2 < n && p[i] == 0xE2 && p[i + 1] == 0x96 && p[i + 2] == 0x81;
}

/* Merges the symbols of one segment (linked first..-1) with the heap. */
static void spm_merge(const wlm_vocab *v, const uint8_t *txt, sym *s, uint32_t first, uint32_t last, bigram *heap) {
    uint32_t nh = 0;
    for (uint32_t i = first; i < last; i++) try_pair(v, txt, s, (int32_t)i, heap, &nh);
    while (nh) {
        bigram b = heap_pop(heap, &nh);
        sym *l = &s[b.left];
        if (l->len == 0 || l->next < 0) continue;
        sym *r = &s[l->next];
        if (r->len == 0 || l->len + r->len != b.size) continue;
        /* merge r into l */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = (int32_t)b.left;
        try_pair(v, txt, s, l->prev, heap, &nh);
        try_pair(v, txt, s, (int32_t)b.left, heap, &nh);
    }
}

/* SentencePiece encoding of one fragment (no special tokens in it). */
static wlm_status spm_encode(const wlm_vocab *v, const uint8_t *in, uint32_t len, int prefix, int split,
                             wlm_tok_out *o, wlm_err *err) {
    if (len == 0) return WLM_OK;
    uint64_t n_space = 0;
    for (uint32_t i = 0; i < len; i++) n_space += in[i] == ' ';
    uint64_t tlen = (uint64_t)len + 2 * n_space + (prefix ? 3 : 0);
    uint64_t max_sym = (uint64_t)len + 1;
    uint64_t off_sym = WLM_ALIGN_UP(tlen, 64);
    uint64_t total = off_sym + max_sym * sizeof(sym);
    uint8_t *mem = wlm_sys_alloc(total);
    if (!mem) return wlm_fail_nomem(err, "tokenize", total);
    uint8_t *txt = mem;
    sym *s = (sym *)(mem + off_sym);

    /* normalize: spaces -> U+2581, optional leading U+2581 */
    uint64_t t = 0;
    if (prefix) {
        txt[t++] = 0xE2;
        txt[t++] = 0x96;
        txt[t++] = 0x81;
    }
    for (uint32_t i = 0; i < len; i++) {
        if (in[i] == ' ') {
            txt[t++] = 0xE2;
            txt[t++] = 0x96;
            txt[t++] = 0x81;
        } else txt[t++] = in[i];
    }

    /* one symbol per UTF-8 character; bytes outside valid characters alone.
     * With `split`, the links are cut before a "▁" that follows a non-"▁". */
    uint32_t ns = 0, seg_start = 0, max_seg = 0;
    int prev_lb = 0;
    for (uint64_t i = 0; i < tlen;) {
        uint32_t cl = utf8_valid_len(txt + i, tlen - i);
        if (cl == 0) cl = 1;
        int lb = cl == 3 && is_lower_block_at(txt, i, tlen);
        if (split && lb && !prev_lb && ns > 0) {
            s[ns - 1].next = -1;
            max_seg = WLM_MAX(max_seg, ns - seg_start);
            seg_start = ns;
        }
        s[ns].off = (uint32_t)i;
        s[ns].len = cl;
        s[ns].prev = ns == seg_start ? -1 : (int32_t)ns - 1;
        s[ns].next = (int32_t)ns + 1;
        ns++;
        prev_lb = lb;
        i += cl;
    }
    s[ns - 1].next = -1;
    max_seg = WLM_MAX(max_seg, ns - seg_start);

    uint64_t hbytes = 3ull * max_seg * sizeof(bigram);
    bigram *heap = wlm_sys_alloc(hbytes);
    if (!heap) {
        wlm_sys_free(mem);
        return wlm_fail_nomem(err, "tokenize", hbytes);
    }
    for (uint32_t first = 0; first < ns;) {
        uint32_t last = first;
        while (s[last].next >= 0) last = (uint32_t)s[last].next; /* before merging: consecutive */
        spm_merge(v, txt, s, first, last, heap);
        for (int32_t i = (int32_t)first; i >= 0; i = s[i].next) {
            int32_t id = wlm_vocab_find(v, (const char *)txt + s[i].off, s[i].len);
            if (id >= 0) {
                emit(o, id);
                continue;
            }
            for (uint32_t j = 0; j < s[i].len; j++) {
                int32_t bt = v->byte_tok[txt[s[i].off + j]];
                if (bt < 0) bt = v->unk;
                if (bt >= 0) emit(o, bt);
            }
        }
        first = last + 1;
    }
    wlm_sys_free(heap);
    wlm_sys_free(mem);
    return WLM_OK;
}

static wlm_status encode_text(const wlm_vocab *v, const uint8_t *text, uint32_t len, int flags,
                              wlm_tok_out *o, wlm_err *err) {
    if (len == 0) return WLM_OK;
    if (v->kind == WLM_VOCAB_BPE) return wlm_bpe_encode(v, text, len, o, err);
    if (v->kind == WLM_VOCAB_WPM) return wlm_wpm_encode(v, text, len, o, err);
    int split = v->spm_split && !((uint32_t)flags & WLM_TOK_NO_SPLIT_);
    int prefix = v->add_space_prefix && !((uint32_t)flags & WLM_TOK_NO_SPACE_PREFIX);
    return spm_encode(v, text, len, prefix, split, o, err);
}

wlm_status wlm_vocab_tokenize(const wlm_vocab *v, const char *text, uint32_t len, int flags,
                              int32_t *out, uint32_t cap, uint32_t *n_out, wlm_err *err) {
    wlm_tok_out o = { out, cap, 0 };
    if (n_out) *n_out = 0;
    if (!v || !v->hash) return wlm_fail(err, WLM_ERR_STATE, "tokenize: no vocabulary loaded");
    if (len && !text) return wlm_fail(err, WLM_ERR_ARG, "tokenize: text is NULL");
    if (cap && !out) return wlm_fail(err, WLM_ERR_ARG, "tokenize: output buffer is NULL");
    if (len > (1u << 28)) return wlm_fail(err, WLM_ERR_ARG, "tokenize: text of %u bytes is too long", len);

    int add_special = ((uint32_t)flags & WLM_TOK_ADD_BOS) != 0;
    uint32_t mask = ((uint32_t)flags & WLM_TOK_PARSE_SPECIAL) ? 3u : 1u;
    if (add_special && v->bos >= 0) emit(&o, v->bos);

    const uint8_t *in = (const uint8_t *)text;
    uint32_t seg = 0;
    /* every text fragment (the first, and each one after a special token)
     * is encoded as a text of its own: with add_space_prefix it gets a "▁"
     * (unless WLM_TOK_NO_SPACE_PREFIX) */
    wlm_status st;
    if (v->n_special) {
        for (uint32_t pos = 0; pos < len;) {
            uint32_t ml = 0;
            int32_t id = (v->sp_first[in[pos]] & mask) ? match_special(v, in, pos, len, mask, &ml) : -1;
            if (id < 0) {
                pos++;
                continue;
            }
            if (pos > seg) {
                if ((st = encode_text(v, in + seg, pos - seg, flags, &o, err)) != WLM_OK) return st;
            }
            emit(&o, id);
            pos += ml;
            seg = pos;
        }
    }
    if (len > seg) {
        if ((st = encode_text(v, in + seg, len - seg, flags, &o, err)) != WLM_OK) return st;
    }
    if (add_special && v->add_eos && v->eos >= 0) emit(&o, v->eos);
    if (add_special && v->kind == WLM_VOCAB_WPM && v->add_sep && v->sep >= 0) emit(&o, v->sep);

    if (n_out) *n_out = o.k;
    if (o.k > cap) return wlm_fail(err, WLM_ERR_ARG, "token buffer too small: %u tokens needed, capacity %u", o.k, cap);
    return WLM_OK;
}

WLM_API wlm_status wlm_tokenize(const wlm_model *m, const char *text, uint32_t len, int flags,
                                int32_t *out, uint32_t cap, uint32_t *n_out, wlm_err *err) {
    if (!m) {
        if (n_out) *n_out = 0;
        return wlm_fail(err, WLM_ERR_ARG, "tokenize: model is NULL");
    }
    return wlm_vocab_tokenize(&m->vocab, text, len, flags, out, cap, n_out, err);
}

/* ---- decoding ------------------------------------------------------------------ */

/* Output buffer that only ever receives whole characters. */
typedef struct bytesink {
    char *out;
    uint32_t cap, n;
} bytesink;

/* How a token's piece turns into bytes. */
enum { PIECE_SPM = 0,
       PIECE_BPE = 1,
       PIECE_RAW = 2 };

static int token_piece(const wlm_vocab *v, int32_t token, const uint8_t **p, uint32_t *n, int *is_byte, int *mode) {
    *is_byte = 0;
    *mode = PIECE_SPM;
    if (!v || token < 0 || (uint32_t)token >= v->n) return 0;
    uint8_t t = v->type[token];
    if (t == WLM_TOK_CONTROL || t == WLM_TOK_UNKNOWN) return 0;
    if (t == WLM_TOK_BYTE) {
        int b = parse_byte_piece(v->text[token], v->len[token]);
        if (b >= 0) {
            *is_byte = 1;
            *n = (uint32_t)b;
            return 1;
        }
    }
    *p = (const uint8_t *)v->text[token];
    *n = v->len[token];
    if (v->kind == WLM_VOCAB_BPE) *mode = t == WLM_TOK_USER ? PIECE_RAW : PIECE_BPE;
    return 1;
}

static int is_lower_block(const uint8_t *p, uint32_t i, uint32_t n) {
    return i + 2 < n && p[i] == 0xE2 && p[i + 1] == 0x96 && p[i + 2] == 0x81;
}

/* The next byte of a piece at p[*i..n): "▁" is a space (SPM); a character of
 * the GPT-2 byte mapping is its byte (BPE); anything else is copied. */
static uint8_t piece_byte(const uint8_t *p, uint32_t n, uint32_t *i, int mode) {
    if (mode == PIECE_SPM && is_lower_block(p, *i, n)) {
        *i += 3;
        return ' ';
    }
    if (mode == PIECE_BPE && p[*i] >= 0x80) {
        uint32_t k = utf8_valid_len(p + *i, n - *i);
        if (k == 2) {
            int b = wlm_bpe_cp_to_byte(((uint32_t)(p[*i] & 0x1F) << 6) | (p[*i + 1] & 0x3Fu));
            if (b >= 0) {
                *i += 2;
                return (uint8_t)b;
            }
        }
    } else if (mode == PIECE_BPE) {
        int b = wlm_bpe_cp_to_byte(p[*i]);
        if (b >= 0) {
            *i += 1;
            return (uint8_t)b;
        }
    }
    return p[(*i)++];
}

uint32_t wlm_vocab_token_bytes(const wlm_vocab *v, int32_t token, char *out, uint32_t cap) {
    const uint8_t *p = 0;
    uint32_t n = 0;
    int is_byte, mode;
    if (!token_piece(v, token, &p, &n, &is_byte, &mode)) return 0;
    if (is_byte) {
        if (cap >= 1 && out) out[0] = (char)n;
        return 1;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n;) {
        uint8_t c = piece_byte(p, n, &i, mode);
        if (k < cap && out) out[k] = (char)c;
        k++;
    }
    return k; /* when k > cap: the count needed, only cap bytes written */
}

WLM_API uint32_t wlm_token_bytes(const wlm_model *m, int32_t token, char *out, uint32_t cap) {
    return m ? wlm_vocab_token_bytes(&m->vocab, token, out, cap) : 0;
}

WLM_API void wlm_detok_reset(wlm_detok *d) {
    if (d) wlm_memset(d, 0, sizeof *d);
}

/* Writes `n` bytes of one whole character, or nothing when it does not fit
 * (the output stays valid UTF-8 either way). */
static void put_char(bytesink *o, const uint8_t *c, uint32_t n) {
    if (!o->out || o->n + n > o->cap) {
        o->cap = o->n;
        return;
    } /* full: drop the rest */
    for (uint32_t i = 0; i < n; i++) o->out[o->n + i] = (char)c[i];
    o->n += n;
}

static const uint8_t k_fffd[3] = { 0xEF, 0xBF, 0xBD };

/* Feeds one byte to the UTF-8 state machine. d->pending always holds a valid
 * but incomplete character prefix (at most 3 bytes). */
static void detok_byte(wlm_detok *d, bytesink *o, uint8_t b) {
    if (d->n_pending > 3 || (d->n_pending && utf8_lead_len(d->pending[0]) <= d->n_pending)) {
        put_char(o, k_fffd, 3); /* a state no push leaves behind (struct not reset) */
        d->n_pending = 0;
    }
    if (d->n_pending) {
        uint8_t lead = d->pending[0];
        if (utf8_cont_ok(lead, d->n_pending, b)) {
            d->pending[d->n_pending++] = b;
            if (d->n_pending == utf8_lead_len(lead)) {
                put_char(o, d->pending, d->n_pending);
                d->n_pending = 0;
            }
            return;
        }
        /* the held prefix can never complete: one U+FFFD for it, then `b` anew */
        put_char(o, k_fffd, 3);
        d->n_pending = 0;
    }
    uint32_t k = utf8_lead_len(b);
    if (k == 1) put_char(o, &b, 1);
    else if (k == 0) put_char(o, k_fffd, 3);
    else {
        d->pending[0] = b;
        d->n_pending = 1;
    }
}

uint32_t wlm_vocab_detok_push(const wlm_vocab *v, wlm_detok *d, int32_t token, char *out, uint32_t cap) {
    bytesink o = { out, out ? cap : 0, 0 };
    const uint8_t *p = 0;
    uint32_t n = 0;
    int is_byte, mode;
    if (!d) return 0;
    if (!token_piece(v, token, &p, &n, &is_byte, &mode)) return 0;
    if (is_byte) {
        detok_byte(d, &o, (uint8_t)n);
        return o.n;
    }
    for (uint32_t i = 0; i < n;) detok_byte(d, &o, piece_byte(p, n, &i, mode));
    return o.n;
}

WLM_API uint32_t wlm_detok_push(const wlm_model *m, wlm_detok *d, int32_t token, char *out, uint32_t cap) {
    return m ? wlm_vocab_detok_push(&m->vocab, d, token, out, cap) : 0;
}

WLM_API uint32_t wlm_detok_flush(wlm_detok *d, char *out, uint32_t cap) {
    bytesink o = { out, out ? cap : 0, 0 };
    if (!d) return 0;
    if (d->n_pending) put_char(&o, k_fffd, 3);
    d->n_pending = 0;
    return o.n;
}
