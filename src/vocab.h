/* The vocabulary and its tokenizers (tokenizer.c: SentencePiece and the
 * shared core; tokenizer_bpe.c: byte-level BPE and pre-tokenizers;
 * tokenizer_wpm.c: WordPiece). */
#ifndef WLM_VOCAB_H
#define WLM_VOCAB_H

#include "gguf.h"

enum { WLM_TOK_NORMAL = 1,
       WLM_TOK_UNKNOWN = 2,
       WLM_TOK_CONTROL = 3,
       WLM_TOK_USER = 4,
       WLM_TOK_UNUSED = 5,
       WLM_TOK_BYTE = 6 };

typedef struct wlm_vocab {
    uint32_t n;
    const char **text;
    uint32_t *len; /* piece bytes (into the file) */
    float *score;
    uint8_t *type;
    uint32_t *hash;
    uint32_t hash_mask;    /* open addressing: id+1, 0 = empty */
    int32_t byte_tok[256]; /* <0xNN> token per byte, -1 if none */
    uint32_t max_len;
    int32_t bos, eos, unk;
    uint32_t add_bos, add_space_prefix;
    void *mem; /* one wlm_sys_alloc block for the arrays */
    /* ---- added with byte-level BPE support (tokenizer_bpe.c) ---- */
    uint32_t kind;         /* WLM_VOCAB_SPM or WLM_VOCAB_BPE */
    uint32_t pre;          /* BPE pre-tokenizer (WLM_PRE_*) */
    int32_t eot, eom, pad; /* -1 when absent */
    uint32_t add_eos;
    uint32_t spm_split; /* SPM: merges never cross "x|▁" (x != ▁) */
    /* special tokens (control/unknown and user-defined) matched as whole
     * strings before BPE: open-addressing hash of id+1 by text */
    uint32_t *sp_hash;
    uint32_t sp_mask, n_special;
    uint32_t *sp_lens;
    uint32_t n_sp_lens;    /* distinct lengths, longest first */
    uint8_t sp_first[256]; /* bit 0: a user-defined token starts with this byte, bit 1: a control one */
    int32_t eog[16];
    uint32_t n_eog; /* end-of-generation ids */
    /* BPE: merge table (left id, right id) -> (rank, merged id) */
    uint64_t *mg_key;
    uint32_t *mg_rank;
    int32_t *mg_id;
    uint32_t mg_mask, n_merges;
    int32_t byte_sym[256];     /* id of the mapped character of each byte, -1 if none */
    uint32_t ignore_merges;    /* a pre-token that is a whole token is used as is (Llama 3) */
    uint32_t n_merges_skipped; /* merges naming strings that are not tokens */
    void *mem_sp, *mem_bpe;    /* blocks for the special-token and BPE tables */
    /* ---- added with WordPiece support (tokenizer_wpm.c) ---- */
    int32_t sep; /* [SEP]: ends a text with add-special (bert); -1 when absent */
    uint32_t add_sep;
    uint32_t wpm_lower, wpm_strip; /* BERT normalizer: lowercase, strip accents */
} wlm_vocab;

enum { WLM_VOCAB_SPM = 0,
       WLM_VOCAB_BPE = 1,
       WLM_VOCAB_WPM = 2 };
enum { WLM_PRE_DEFAULT = 0,
       WLM_PRE_GPT2,
       WLM_PRE_LLAMA3,
       WLM_PRE_QWEN2,
       WLM_PRE_DEEPSEEK_LLM,
       WLM_PRE_DEEPSEEK_CODER,
       WLM_PRE_FALCON,
       WLM_PRE_STARCODER,
       WLM_PRE_COUNT };
/* internal tokenize flag (tests): SPM without the whitespace-segment fast path */
#define WLM_TOK_NO_SPLIT_ (1u << 30)

/* tokenizer_bpe.c: loads tokenizer.ggml.merges / .pre into v (tokens already
 * loaded); encodes one text fragment (no special tokens in it). */
wlm_status wlm_bpe_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err);
typedef struct wlm_tok_out {
    int32_t *out;
    uint32_t cap, k;
} wlm_tok_out;
wlm_status wlm_bpe_encode(const wlm_vocab *v, const uint8_t *text, uint32_t len, wlm_tok_out *o, wlm_err *err);
const char *wlm_pre_name(uint32_t pre);
/* Pre-tokenization only (tests): the byte offset where each word of text
 * ends, in order; returns the word count (entries past cap not written). */
uint32_t wlm_bpe_split(uint32_t pre, const uint8_t *text, uint32_t len, uint32_t *ends, uint32_t cap);
/* tokenizer_wpm.c: WordPiece settings (special ids, normalizer options) of
 * a "bert" vocabulary (tokens already loaded); encodes one fragment */
wlm_status wlm_wpm_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err);
wlm_status wlm_wpm_encode(const wlm_vocab *v, const uint8_t *text, uint32_t len, wlm_tok_out *o, wlm_err *err);
/* UTF-8 (tokenizer_bpe.c): the valid character at s[0..n) into *cp, its
 * length (0: not a valid character); cp's bytes into o, their count */
uint32_t wlm_utf8_decode(const uint8_t *s, uint32_t n, uint32_t *cp);
uint32_t wlm_utf8_put(uint32_t cp, uint8_t *o);
/* GPT-2 byte <-> printable code point mapping */
uint32_t wlm_bpe_byte_to_cp(uint8_t b);
int wlm_bpe_cp_to_byte(uint32_t cp); /* -1 when cp is not in the mapping */

/* Builds the vocab from tokenizer.ggml.* metadata; validates every id and
 * length against the file. Accepts tokenizer models "llama" (SentencePiece),
 * "gpt2" (byte-level BPE) and "bert" (WordPiece); refuses others by name. */
wlm_status wlm_vocab_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err);
void wlm_vocab_free(wlm_vocab *v);
int32_t wlm_vocab_find(const wlm_vocab *v, const char *s, uint32_t len);
/* The model-free cores of wlm_tokenize / wlm_token_bytes / wlm_detok_push */
/* flags: WLM_TOK_ADD_BOS (1, "add special": BOS, and EOS when the vocab
 * says add_eos_token), WLM_TOK_PARSE_SPECIAL (2) */
wlm_status wlm_vocab_tokenize(const wlm_vocab *v, const char *text, uint32_t len, int flags,
                              int32_t *out, uint32_t cap, uint32_t *n_out, wlm_err *err);
int wlm_vocab_is_eog(const wlm_vocab *v, int32_t token);
uint32_t wlm_vocab_token_bytes(const wlm_vocab *v, int32_t token, char *out, uint32_t cap);
uint32_t wlm_vocab_detok_push(const wlm_vocab *v, wlm_detok *d, int32_t token, char *out, uint32_t cap);

#endif
