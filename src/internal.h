/* Internal structures of the engine, shared by the files of src/. */
#ifndef WLM_INTERNAL_H
#define WLM_INTERNAL_H

#include "base.h"
#include "ggml_types.h"
#include "wlm.h"

/* ---- GGUF ---------------------------------------------------------------- */

enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_TYPE_COUNT = 13
};

typedef struct wlm_kv {
    const char *key; uint32_t key_len;
    uint32_t type;            /* GGUF value type */
    const uint8_t *val;       /* raw encoding in the file */
    uint64_t val_bytes;
    /* for arrays: element type, count, pointer to first element */
    uint32_t arr_type; uint64_t arr_n; const uint8_t *arr_data;
} wlm_kv;

typedef struct wlm_tensor {
    const char *name; uint32_t name_len;
    uint32_t type, n_dims;
    uint64_t ne[4];           /* ne[0] = row length (contiguous) */
    uint64_t offset;          /* absolute offset in the file */
    uint64_t nbytes;
    const uint8_t *data;      /* view into the file bytes */
    uint32_t q4g;             /* Q4_0 rows repacked in place into the q4g form (wlm_model_load_inplace) */
} wlm_tensor;

typedef struct wlm_gguf {
    const uint8_t *data; uint64_t size;
    uint32_t version, alignment;
    uint64_t n_kv, n_tensors, data_offset;
    wlm_kv *kv; wlm_tensor *tensors;
    void *mem;                /* the block holding kv[] and tensors[] */
} wlm_gguf;

wlm_status wlm_gguf_parse(wlm_gguf *g, const uint8_t *data, uint64_t size, wlm_err *err);
void wlm_gguf_free(wlm_gguf *g);
const wlm_kv *wlm_gguf_find(const wlm_gguf *g, const char *key);
wlm_tensor *wlm_gguf_tensor(const wlm_gguf *g, const char *name);
/* Typed getters: WLM_OK and *out set; a missing key leaves *out alone and
 * returns WLM_OK when `required` is 0; a wrong type is always an error. */
wlm_status wlm_kv_u32(const wlm_gguf *g, const char *key, int required, uint32_t *out, wlm_err *err);
wlm_status wlm_kv_f32(const wlm_gguf *g, const char *key, int required, float *out, wlm_err *err);
wlm_status wlm_kv_bool(const wlm_gguf *g, const char *key, uint32_t *out, wlm_err *err);
/* String value: pointer into the file and its length; NULL when absent. */
wlm_status wlm_kv_str(const wlm_gguf *g, const char *key, int required, const char **s, uint32_t *len, wlm_err *err);
int wlm_str_is(const char *s, uint32_t len, const char *lit);

/* ---- vocabulary ----------------------------------------------------------- */

enum { WLM_TOK_NORMAL = 1, WLM_TOK_UNKNOWN = 2, WLM_TOK_CONTROL = 3, WLM_TOK_USER = 4,
       WLM_TOK_UNUSED = 5, WLM_TOK_BYTE = 6 };

typedef struct wlm_vocab {
    uint32_t n;
    const char **text; uint32_t *len;   /* piece bytes (into the file) */
    float *score; uint8_t *type;
    uint32_t *hash; uint32_t hash_mask; /* open addressing: id+1, 0 = empty */
    int32_t byte_tok[256];              /* <0xNN> token per byte, -1 if none */
    uint32_t max_len;
    int32_t bos, eos, unk;
    uint32_t add_bos, add_space_prefix;
    void *mem;                          /* one wlm_sys_alloc block for the arrays */
    /* ---- added with byte-level BPE support (tokenizer_bpe.c) ---- */
    uint32_t kind;                      /* WLM_VOCAB_SPM or WLM_VOCAB_BPE */
    uint32_t pre;                       /* BPE pre-tokenizer (WLM_PRE_*) */
    int32_t eot, eom, pad;              /* -1 when absent */
    uint32_t add_eos;
    uint32_t spm_split;                 /* SPM: merges never cross "x|▁" (x != ▁) */
    /* special tokens (control/unknown and user-defined) matched as whole
     * strings before BPE: open-addressing hash of id+1 by text */
    uint32_t *sp_hash; uint32_t sp_mask, n_special;
    uint32_t *sp_lens; uint32_t n_sp_lens; /* distinct lengths, longest first */
    uint8_t sp_first[256];              /* bit 0: a user-defined token starts with this byte, bit 1: a control one */
    int32_t eog[16]; uint32_t n_eog;    /* end-of-generation ids */
    /* BPE: merge table (left id, right id) -> (rank, merged id) */
    uint64_t *mg_key; uint32_t *mg_rank; int32_t *mg_id; uint32_t mg_mask, n_merges;
    int32_t byte_sym[256];              /* id of the mapped character of each byte, -1 if none */
    uint32_t ignore_merges;             /* a pre-token that is a whole token is used as is (Llama 3) */
    uint32_t n_merges_skipped;          /* merges naming strings that are not tokens */
    void *mem_sp, *mem_bpe;             /* blocks for the special-token and BPE tables */
} wlm_vocab;

enum { WLM_VOCAB_SPM = 0, WLM_VOCAB_BPE = 1 };
enum { WLM_PRE_DEFAULT = 0, WLM_PRE_GPT2, WLM_PRE_LLAMA3, WLM_PRE_QWEN2, WLM_PRE_DEEPSEEK_LLM,
       WLM_PRE_DEEPSEEK_CODER, WLM_PRE_FALCON, WLM_PRE_STARCODER, WLM_PRE_COUNT };
/* internal tokenize flag (tests): SPM without the whitespace-segment fast path */
#define WLM_TOK_NO_SPLIT_ (1u << 30)

/* tokenizer_bpe.c: loads tokenizer.ggml.merges / .pre into v (tokens already
 * loaded); encodes one text fragment (no special tokens in it). */
wlm_status wlm_bpe_load(wlm_vocab *v, const wlm_gguf *g, wlm_err *err);
typedef struct wlm_tok_out { int32_t *out; uint32_t cap, k; } wlm_tok_out;
wlm_status wlm_bpe_encode(const wlm_vocab *v, const uint8_t *text, uint32_t len, wlm_tok_out *o, wlm_err *err);
const char *wlm_pre_name(uint32_t pre);
/* Pre-tokenization only (tests): the byte offset where each word of text
 * ends, in order; returns the word count (entries past cap not written). */
uint32_t wlm_bpe_split(uint32_t pre, const uint8_t *text, uint32_t len, uint32_t *ends, uint32_t cap);
/* GPT-2 byte <-> printable code point mapping */
uint32_t wlm_bpe_byte_to_cp(uint8_t b);
int wlm_bpe_cp_to_byte(uint32_t cp); /* -1 when cp is not in the mapping */

/* Builds the vocab from tokenizer.ggml.* metadata; validates every id and
 * length against the file. Accepts tokenizer models "llama" (SentencePiece)
 * and "gpt2" (byte-level BPE); refuses others by name. */
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

/* ---- model ----------------------------------------------------------------- */

typedef struct wlm_layer {
    const wlm_tensor *attn_norm, *wq, *wk, *wv, *wo;
    const wlm_tensor *bq, *bk, *bv, *bo;    /* optional F32 biases (qwen2 has q/k/v), NULL if absent */
    const wlm_tensor *ffn_norm, *w_gate, *w_up, *w_down;
} wlm_layer;

enum { WLM_ARCH_LLAMA = 0, WLM_ARCH_QWEN2 = 1 };
enum { WLM_ROPE_SCALING_NONE = 0, WLM_ROPE_SCALING_LINEAR = 1, WLM_ROPE_SCALING_LLAMA3 = 2 };

struct wlm_model {
    wlm_gguf g;
    wlm_hparams hp;
    uint32_t arch;                          /* WLM_ARCH_* */
    const wlm_tensor *tok_embd, *out_norm, *output;
    const wlm_tensor *rope_freqs;           /* optional [n_rot/2] F32 divisors of the RoPE frequencies */
    /* rope.scaling.* metadata: used when rope_freqs is absent */
    uint32_t rope_scaling;                  /* WLM_ROPE_SCALING_* */
    float rope_scale_factor, rope_low_freq_factor, rope_high_freq_factor;
    uint32_t rope_orig_ctx;
    wlm_layer *layers;
    wlm_vocab vocab;
    void *mem;
};

/* The divisor of RoPE frequency i (0 <= i < n_rot/2) for model m: 1 without
 * scaling; rope_freqs.weight[i] when the file has it; otherwise computed
 * from rope.scaling.* (linear: the factor; llama3: by wavelength). */
double wlm_rope_freq_divisor(const wlm_model *m, uint32_t i, double theta);

/* ---- kernels --------------------------------------------------------------- */

/* dot of one weight row (n elements, stored in the weight type) with an
 * activation in the form wlm_act_type() names for that type */
typedef float (*wlm_dot_fn)(uint32_t n, const void *w, const void *x);
typedef void (*wlm_gemv_fn)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                            const uint8_t *x8, uint64_t x8s, const uint8_t *x16, uint64_t x16s,
                            uint32_t nt, float *y, uint64_t ys);

typedef struct wlm_kernels {
    const char *name;
    /* row dot products by weight type (NULL = not available in this set) */
    wlm_dot_fn dot[GGML_TYPE_COUNT];
    /* the float kernels by name (attention and tests use them directly) */
    float (*dot_f32)(uint32_t n, const float *w, const float *x);
    float (*dot_f16)(uint32_t n, const uint16_t *w, const float *x);
    float (*dot_bf16)(uint32_t n, const uint16_t *w, const float *x);
    float (*dot_q8_0)(uint32_t n, const block_q8_0 *w, const block_q8_0 *x);
    float (*dot_q4_0)(uint32_t n, const block_q4_0 *w, const block_q8_0 *x);
    /* Prefill of Q8_0/Q4_0 weights, register-tiled: y[t * ys + r] = row r of
     * w . row t of x for r < nr, t < nt. Rows of n values (n % 32 == 0) in the
     * "i16x4" form wlm_unpack_i16x4 writes (int16 values, groups of four
     * blocks interleaved, then float block scales), w rows ws bytes apart, x
     * rows xs. Each result equals dot_q8_0 / dot_q4_0 of the same values bit
     * for bit, however rows and tokens are grouped. */
    void (*gemm_i16x4)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                       const uint8_t *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    /* wlm_unpack_i16x4 (Q8_0 / Q4_0 / q4g row -> i16x4 form), the same bytes */
    void (*unpack_i16x4)(uint32_t type, const void *row, uint8_t *out, uint32_t n);
    /* Decode and small batches of Q8_0 / Q4_0 weights: y[t * ys + r] = row r
     * of w (rows ws bytes apart) . token t for r < nr, t < nt, where token t
     * comes as Q8_0 blocks at x8 + t * x8s and in the "i16eo" form of
     * wlm_act_i16eo at x16 + t * x16s. Each weight block is loaded and
     * widened once for every token (no unpacked copy in memory, unlike
     * gemm_i16x4). Equal bit for bit to dot_q8_0 / dot_q4_0 on (w row, x8). */
    wlm_gemv_fn gemv_q8_0, gemv_q4_0;
    /* Prefill of Q4_0 weights with relaxed SIMD (NULL elsewhere): as
     * gemm_i16x4, on rows in the i8x4 form (weights: unpack_q4_i8x4, n + nb*4
     * bytes; tokens: act_q4g, which in this set writes the i8x4 form, n +
     * nb*8 bytes); equal bit for bit to dot_q4_0. The unpacker writes the
     * bytes of wlm_unpack_q4_i8x4. */
    void (*gemm_q4_i8x4)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                         const uint8_t *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    void (*unpack_q4_i8x4)(const block_q4_0 *row, uint8_t *out, uint32_t n);
    /* Decode and small batches of Q4_0 rows in the q4g form (repacked at
     * load): as gemv_q4_0, with token t as Q8_0 blocks at x8 + t * x8s and
     * in this set's act_q4g form at x16 + t * x16s (the scalar set reads x8
     * only). Equal bit for bit to wlm_dot_q4g, that is to dot_q4_0 on the
     * blocks before the repack. */
    wlm_gemv_fn gemv_q4g;
    /* Writes blocks [b0, b1) of a token's act_q4g form: SIMD128 the i16g
     * form (wlm_act_i16g_blocks), relaxed SIMD the i8x4 form
     * (wlm_act_i8x4_blocks); NULL in the scalar set. b0 and b1 are
     * multiples of 4 (or b1 = nb): groups convert on their own. */
    void (*act_q4g)(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
    /* wlm_q4g_from_q4_0, the same bytes (the load-time repack) */
    void (*q4g_from_q4_0)(uint8_t *row, uint32_t n);
    /* Batches of q4g rows with relaxed SIMD (NULL elsewhere): y[t * ys + r] =
     * row r of w (rows ws bytes apart) . token t for r < nr, t < nt, token t
     * in the q4gb form at xb (act_q4gb, the bytes of wlm_act_q4gb_row) and
     * as Q8_0 blocks at x8 + t * x8s. Each row is read once for the batch,
     * with no unpacked copy. Equal bit for bit to wlm_dot_q4g. */
    void (*gemm_q4gb)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr, const uint8_t *x8, uint64_t x8s,
                      const uint8_t *xb, uint32_t nt, float *y, uint64_t ys);
    void (*act_q4gb)(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t);
    /* Small batches of F16 weights: y[t * ys + r] = row r of w (rows ws
     * bytes apart) . float row x + t * xs (xs in floats) for r < nr,
     * t < nt; each 16 halves converted once for every token. Equal bit for
     * bit to dot_f16. */
    void (*gemv_f16)(uint32_t n, const uint8_t *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    /* Batches of float rows: y[t * ys + r] = row r of w (rows ws floats
     * apart) . row t of x (xs floats apart) for r < nr, t < nt, equal bit
     * for bit to dot_f32. The SIMD set keeps a register tile of rows x
     * tokens, one accumulator each (see kernels_simd128.c). F32 weights take
     * it directly, F16 / BF16 rows after converting a panel of rows. */
    void (*gemm_f32)(uint32_t n, const float *w, uint64_t ws, uint32_t nr,
                     const float *x, uint64_t xs, uint32_t nt, float *y, uint64_t ys);
    /* n halves -> floats exactly as wlm_f16_to_f32 (batched F16 rows are
     * converted once, then gemm_f32 gives dot_f16's bits) */
    void (*cvt_f16)(uint32_t n, const uint16_t *h, float *y);
    /* y += a * x (attention value accumulation), f32 and f16 sources */
    void (*axpy_f32)(uint32_t n, float a, const float *x, float *y);
    void (*axpy_f16)(uint32_t n, float a, const uint16_t *x, float *y);
    /* y *= a */
    void (*scale)(uint32_t n, float a, float *y);
    /* K-quants (kquants.c, kquants_simd128.c): rows of a K-quant weight
     * against a batch of Q8_K activations, equal to dot[type] bit for bit;
     * returns 0 for a type without a batched path (see kquants.h) */
    wlm_kq_rows_fn kq_rows;
    /* The sampler's log-sum-exp: sum over i of wlm_expf_fast(y[i] - m),
     * skipping NaN and -inf, with y[i] above FLT_MAX (+inf) taken as FLT_MAX.
     * Term i goes to double running sum i % 8; the eight are folded as
     * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). Every set gives the
     * scalar reference's bits. */
    double (*sum_exp)(uint32_t n, const float *y, float m);
    /* Its m: the largest y[i] with the same exclusions and clamp, -inf when
     * every entry is excluded; a zero maximum is returned as +0 (the sign of
     * a zero maximum would depend on the order of the scan) */
    float (*logit_max)(uint32_t n, const float *y);
    /* y[i] = wlm_expf_fast(y[i] - m), in place (attention's softmax weights
     * of one tile): the same bits in every set */
    void (*exp_shift)(uint32_t n, float *y, float m);
    /* a[i] = wlm_silu(a[i]) * b[i] (the SwiGLU gate): the same bits in every set */
    void (*silu_mul)(uint32_t n, float *a, const float *b);
    /* wlm_quantize_row_q8_0, the same bytes (the activations of every Q8_0 / Q4_0 product) */
    void (*quantize_q8_0)(const float *x, block_q8_0 *y, uint32_t n);
    /* Attention's value accumulation over a tile: for i < n in order,
     * axpy(hd, e[i], row idx[i] of v (hd floats, or halves with f16), out),
     * the same bits as those axpy calls one by one */
    void (*att_accum)(uint32_t n, uint32_t hd, const float *e, const void *v, int f16, const uint32_t *idx, float *out);
    /* Attention's scores over a tile: s[i] = dot(hd, row idx[i] of k, q) *
     * scale for i < n (dot_f32, or dot_f16 with f16): the same bits */
    void (*att_scores)(uint32_t n, uint32_t hd, const float *q, const void *k, int f16, const uint32_t *idx, float scale, float *s);
} wlm_kernels;

extern const wlm_kernels wlm_kernels_scalar;
#if WLM_SIMD128
extern const wlm_kernels wlm_kernels_simd128;
#endif
const wlm_kernels *wlm_kernels_best(void);
/* every kernel set compiled into this build, the reference first */
extern const wlm_kernels *const wlm_kernel_sets[];
extern const uint32_t wlm_kernel_set_count;
float wlm_fold16(const float s[16]); /* the reference lane fold */
/* sum_exp's reference from element i on: adds terms i..n-1 to the running
 * sums s[8] (term j to s[j % 8]) and returns their fold (SIMD kernels finish
 * their tail with it) */
double wlm_sum_exp_from(uint32_t i, uint32_t n, const float *y, float m, double s[8]);
/* logit_max's reference from element i on, starting from the running max m */
float wlm_logit_max_from(uint32_t i, uint32_t n, const float *y, float m);

/* Quantizes n floats (n % 32 == 0) to Q8_0 blocks; scalar, shared by every
 * build so activations quantize identically everywhere. */
void wlm_quantize_row_q8_0(const float *x, block_q8_0 *y, uint32_t n);
void wlm_quantize_row_q4_0(const float *x, block_q4_0 *y, uint32_t n);
void wlm_quantize_row_f16(const float *x, uint16_t *y, uint32_t n);
/* Q8_0 / Q4_0 row -> the i16x4 form of gemm_i16x4 (exact): blocks in
 * groups of four, 128 int16 per group where element k of block 4g+i sits at
 * g*128 + (k/2)*8 + i*2 + k%2 (so one i32x4.dot_i16x8 lane sums pairs of one
 * block); blocks past the last group of four stay in order (b*32 + k); then
 * the nb block scales as floats at byte offset 2n. */
void wlm_unpack_i16x4(uint32_t type, const void *row, uint8_t *out, uint32_t n);
static inline uint64_t wlm_i16x4_row_bytes(uint32_t n) { return (uint64_t)n * 2 + (uint64_t)n / 32 * 4; }
/* The i8x4 form of the relaxed-SIMD Q4_0 prefill (gemm_q4_i8x4): blocks in
 * groups of four, 128 bytes per group where value k of block 4g+i sits at
 * g*128 + (k/4)*16 + i*4 + k%4 (so one i16x8.relaxed_dot_i8x16_i7x16 pair of
 * lanes, and after a pairwise add one i32 lane, sums values of one block);
 * blocks past the last group of four stay in order (b*32 + k); then the nb
 * block scales as floats at byte offset n. Q4_0 weights: the nibbles q
 * (0..15, without the -8); Q8_0 activations: the int8 values, and after the
 * scales the nb exact block sums as int32 (the -8 is taken off as 8 * sum). */
void wlm_unpack_q4_i8x4(const block_q4_0 *row, uint8_t *out, uint32_t n);
void wlm_act_i8x4(const block_q8_0 *x, uint8_t *out, uint32_t n);
static inline uint64_t wlm_q4_i8x4_row_bytes(uint32_t n) { return (uint64_t)n + (uint64_t)n / 32 * 4; }
static inline uint64_t wlm_act_i8x4_row_bytes(uint32_t n) { return (uint64_t)n + (uint64_t)n / 32 * 8; }
/* Q8_0 activation row -> the i16eo form of gemv_q8_0/gemv_q4_0 (exact): per
 * block the 32 values widened to int16 in the order even 0-14, odd 1-15,
 * even 16-30, odd 17-31 (the order a weight block's bytes fall into when
 * read as int16 lanes); then the nb scales as floats at byte offset 2n; then
 * the nb exact block sums as int32 at 2n + 4 nb. */
void wlm_act_i16eo(const block_q8_0 *x, uint8_t *out, uint32_t n);
/* the same for blocks [b0, b1) only (each block converts on its own) */
void wlm_act_i16eo_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
static inline uint64_t wlm_i16eo_row_bytes(uint32_t n) { return (uint64_t)n * 2 + (uint64_t)n / 32 * 8; }
/* position of value k (0..31) of a block in the i16eo order */
static inline uint32_t wlm_i16eo_pos(uint32_t k) { return (k & 16) + ((k & 1) << 3) + ((k & 15) >> 1); }
/* ---- Q4_0 matrices in groups ("q4g") ----------------------------------------
 * wlm_model_load_inplace rearranges every Q4_0 matrix that is only ever
 * multiplied (not the token embeddings) row by row, in place, once: each
 * group of four blocks (72 bytes) becomes the four f16 scales, then 64
 * bytes where byte 16p + 4i + j (p, i, j < 4) holds value 4p + j of block
 * 4g + i in its low nibble and value 4p + j + 16 in its high nibble (that
 * is, the block's qs[4p + j]). Blocks after the last whole group stay as
 * they were, and so does the row's size. Read 16 bytes at a time, the
 * nibbles are already the i8x4 form (relaxed SIMD), and read as int16 lanes
 * every pair of lanes belongs to one block (SIMD128 gemv_q4g): the kernels
 * need no unpacking or transposition at run time. */
void wlm_q4g_from_q4_0(uint8_t *row, uint32_t n);                    /* in place */
void wlm_q4g_to_q4_0(const uint8_t *row, block_q4_0 *out, uint32_t n);
/* value k (0..31, the nibble 0..15) and f16 scale of block b of a q4g row */
static inline uint32_t wlm_q4g_q(const uint8_t *row, uint32_t nb, uint32_t b, uint32_t k) {
    if (b >= nb / 4 * 4) { const block_q4_0 *B = (const block_q4_0 *)row + b; return k < 16 ? B->qs[k] & 15u : (uint32_t)B->qs[k - 16] >> 4; }
    uint8_t v = row[(uint64_t)(b / 4) * 72 + 8 + ((k & 15) / 4) * 16 + (b % 4) * 4 + k % 4];
    return k < 16 ? v & 15u : (uint32_t)v >> 4;
}
static inline uint16_t wlm_q4g_d(const uint8_t *row, uint32_t nb, uint32_t b) {
    const uint8_t *p = b >= nb / 4 * 4 ? row + (uint64_t)b * sizeof(block_q4_0) : row + (uint64_t)(b / 4) * 72 + (b % 4) * 2;
    return (uint16_t)(p[0] | p[1] << 8);
}
/* dot_q4_0 of the same values on a q4g row, scalar (reference and the
 * fallback of the SIMD kernels for an infinite or NaN scale) */
float wlm_dot_q4g(uint32_t n, const uint8_t *row, const block_q8_0 *x);
/* The i16g activation form of SIMD128's gemv_q4g: the i16eo form, except
 * that the values of each whole group of four blocks sit where the weight
 * nibbles fall when a q4g group is read as int16 lanes (wlm_i16g_pos);
 * blocks after the last group in the i16eo order; then scales and sums as
 * in i16eo. Blocks [b0, b1) only. */
void wlm_act_i16g_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
/* wlm_act_i8x4 for blocks [b0, b1) only */
void wlm_act_i8x4_blocks(const block_q8_0 *x, uint8_t *out, uint32_t n, uint32_t b0, uint32_t b1);
/* int16 index of value k of block b in the i16g form of a row of nb blocks:
 * in group g, slice p = (k mod 16) / 4 of the weights, vector f (0: low
 * nibbles of the even bytes, 1: their high nibbles, 2 and 3: the same for
 * the odd bytes), lane 2 (b mod 4) + (k mod 4) / 2 */
static inline uint32_t wlm_i16g_pos(uint32_t b, uint32_t nb, uint32_t k) {
    if (b >= nb / 4 * 4) return b * 32 + wlm_i16eo_pos(k);
    uint32_t j = k % 4, f = (j & 1) * 2 + (k >= 16);
    return (b / 4) * 128 + ((k & 15) / 4) * 32 + f * 8 + (b % 4) * 2 + j / 2;
}
/* Q4_0 prefill from q4g rows in the SIMD128 set: wlm_unpack_i16x4 of the
 * same values with the type WLM_Q4G */
#define WLM_Q4G 0x100u
/* The q4gb form of a batch of activations for gemm_q4gb (relaxed SIMD):
 * tokens in chunks of four, a chunk wlm_q4gb_chunk_bytes(n) bytes; in a
 * chunk, whole groups of four blocks (n / 128 of them) of 640 bytes each:
 * byte 64v + 16j + 4i + m holds value 4v + m of block 4g + i of the
 * chunk's token j (v < 8: the i8x4 form's vectors; j, i, m < 4),
 * then at 512 + 16j the four block scales of token j as floats and at
 * 576 + 16j eight int16: at 2i + h, -8 times the sum of block i's values
 * 4v + m with m / 2 = h (the values whose products gemm_q4gb's dots add into
 * that lane; the kernel's sums start there, so no -8 * sum correction is
 * left for the float step; |sum| <= 8 x 16 x 128 = 16384 at every step). Blocks after
 * the last group are not in the form (the kernel reads their Q8_0 blocks).
 * wlm_act_q4gb_row writes token t's part (its slots only). */
/* tokens a chunk (8 measured slower: the kernel's 8 int16 sums, 8 float
 * accumulators and the loaded vectors do not fit V8's 15 registers) */
#define WLM_Q4GB_T 4
static inline uint64_t wlm_q4gb_chunk_bytes(uint32_t n) { return (uint64_t)(n / 128) * 160 * WLM_Q4GB_T; }
void wlm_act_q4gb_row(const block_q8_0 *x, uint8_t *xb, uint32_t n, uint32_t t);
/* repacks a loaded model's Q4_0 matrices into q4g (wlm_model_load_inplace
 * does it in the SIMD builds; tests call it to run the q4g paths anywhere) */
void wlm_model_repack_q4g(wlm_model *m);
/* floats of a q4g row (wlm_dequantize_row of the Q4_0 blocks it came from) */
void wlm_dequantize_q4g_row(const uint8_t *row, float *y, uint32_t n);
/* Dequantizes one row of any supported type into floats. */
void wlm_dequantize_row(uint32_t type, const void *row, float *y, uint32_t n);
/* The activation form a weight type's dot product takes: GGML_F32 (floats),
 * GGML_Q8_0 (int8 blocks of 32) or GGML_Q8_K (int8 blocks of 256). */
uint32_t wlm_act_type(uint32_t weight_type);
/* Converts n floats into activation form `act_type` (no-op for F32). */
void wlm_quantize_act(uint32_t act_type, const float *x, void *y, uint32_t n);
/* bytes of one activation row of n elements in form act_type */
uint64_t wlm_act_row_bytes(uint32_t act_type, uint32_t n);

/* ---- threads (threads.c) ------------------------------------------------------ */

#define WLM_MAX_THREADS 64
/* multiply-adds below which a job runs on the calling thread alone */
#define WLM_MIN_PARALLEL_WORK (1u << 17)
typedef void (*wlm_job_fn)(void *arg, uint32_t tid, uint32_t nth);
struct wlm_pool {
    volatile int32_t gen;      /* job generation, -1 = shut down */
    volatile int32_t done;     /* workers that finished the current job */
    volatile int32_t exited;   /* workers that left their loop */
    volatile int32_t bar_count, bar_gen; /* wlm_pool_barrier: arrived threads, generation */
    uint32_t n_threads;        /* including the coordinating thread */
    uint32_t n_active;         /* threads taking part in the current job */
    wlm_job_fn fn; void *arg;
};
/* runs fn(arg, tid, nth) on nth threads (the caller is tid 0) and returns
 * when all are done; p == NULL or nth <= 1 runs it inline */
void wlm_pool_run(wlm_pool *p, wlm_job_fn fn, void *arg, uint32_t nth);
/* called by every one of a job's nth threads: waits until all have called
 * it (no-op for p == NULL or nth <= 1) */
void wlm_pool_barrier(wlm_pool *p, uint32_t nth);
/* inside a job: the next chunk [lo, hi) of n items from a counter shared
 * by the job's nth threads (0 at the start); returns 0 when none are left */
int wlm_pool_take(volatile int32_t *next, uint32_t n, uint32_t nth, uint32_t min, uint32_t *lo, uint32_t *hi);
void wlm_split(uint32_t n, uint32_t tid, uint32_t nth, uint32_t *lo, uint32_t *hi);
#ifndef __wasm__
void wlm_sys_wait32(volatile int32_t *addr, int32_t expected);
void wlm_sys_notify_all(volatile int32_t *addr);
#endif

/* ---- context ----------------------------------------------------------------- */

struct wlm_ctx {
    wlm_model *m;
    const wlm_kernels *k;
    wlm_ctx_params p;
    uint32_t n_ctx, n_batch;
    uint32_t slid;         /* positions dropped by the sliding window (sequence 0) */
    /* sequences (src/kvcache.c): next position of each, and which sequences
     * use each cache slot (bit s of slot_seq[j]; 0 = the slot is free) */
    uint32_t n_seq_max, n_outputs;
    uint32_t seq_pos[WLM_MAX_SEQ];
    uint32_t seq_next[WLM_MAX_SEQ];  /* the slot after each sequence's highest slot (0: none) */
    uint64_t *slot_seq;
    uint32_t n_slots;      /* slots [0, n_slots) may be in use: attention scans these */
    uint32_t n_free;       /* free slots */
    uint32_t free_hint;    /* no free slot below this one */
    /* the tokens of the chunk being evaluated: sequence, position, cache slot */
    uint32_t *tok_seq, *tok_slot; int32_t *tok_pos;
    uint32_t *out_tok;     /* chunk tokens whose logits are wanted, in order */
    uint32_t *att_run; int32_t *att_wpos;   /* attention's runs of the chunk (forward.c, att_plan_runs) */
    /* KV cache: [layer][kv_head][slot][head_dim], f32 or f16 */
    void *k_cache, *v_cache;
    uint64_t kv_layer_stride, kv_head_stride; /* in elements (K cache) */
    uint64_t kv_layer_stride_v, kv_head_stride_v; /* in elements (V cache: value heads may differ in size) */
    int32_t *slot_pos;     /* absolute position stored in each slot, -1 empty */
    /* scratch for a batch of up to n_batch tokens */
    float *x, *xb, *q, *kk, *vv, *att, *hb, *hb2;
    uint8_t *act, *act_k;  /* quantized activations, n_batch rows: Q8_0 blocks, Q8_K blocks */
    uint64_t act_row_bytes;
    uint8_t *wrow;         /* per thread: one weight row unpacked for a batch (prefill) */
    uint8_t *act16;        /* int8 activations widened to int16 + float scales (prefill) */
    uint64_t act16_row_bytes;
    uint64_t act8_off;      /* the i8x4 form of the same rows, at act16 + row * act16_row_bytes + act8_off */
    uint8_t *act_b;         /* a batch's input in the q4gb form (relaxed SIMD, q4g weights) */
    uint64_t wrow_bytes;   /* bytes of one thread's wrow */
    wlm_pool *pool; uint32_t n_thr; /* threads running matmul/attention (1 = inline) */
    float *logits; uint32_t n_logits;
    float *att_tile;       /* one tile of scores per thread */
    uint32_t *att_idx;     /* the cache slots of that tile, per thread */
    float *att_kvt;        /* F16 caches: a tile of keys and values as floats, per thread (else NULL) */
    float *spec_q;         /* n_vocab: a dense draft distribution (wlm_spec_accept) */
    double *rope_freq;     /* n_rot/2 inverse frequencies base^(-2i/n_rot) */
    float *rope_cs;        /* cos/sin pairs for the position of each token of a chunk (n_rot floats apart) */
    /* sampler work space */
    int32_t *cand_id; float *cand_val; uint8_t *seen;
    void *sort_tmp;        /* 12 n_vocab bytes: the radix sort of the candidates */
    void *mem; uint64_t mem_bytes;
};

#define WLM_ATT_TILE 64
#define WLM_ATT_QB 8      /* tokens of one sequence whose queries share a pass over the cache */
#define WLM_ATT_MAXQ 64   /* queries one wlm_attention_block pass holds */

/* attention of one query head over cache slots (used by forward and tests) */
void wlm_attention_tiled(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                         int kv_f16, const int32_t *slot_pos, uint32_t n_slots, int32_t qpos,
                         int32_t window_lo, uint32_t head_dim, float scale, float *out, float *tile);
/* Which slots a query sees: slot j when 0 <= slot_pos[j] <= qpos,
 * slot_pos[j] >= window_lo and (slot_seq == NULL or slot_seq[j] & seq_bit).
 * `idx` is room for WLM_ATT_TILE slot indices. */
typedef struct wlm_att_mask {
    const int32_t *slot_pos; const uint64_t *slot_seq; uint64_t seq_bit;
    uint32_t n_slots; int32_t qpos, window_lo;
} wlm_att_mask;
/* the same with key/query heads of hd_k and value heads of hd_v elements */
void wlm_attention_tiled_kv(const wlm_kernels *k, const float *q, const void *kc, const void *vc,
                            int kv_f16, const wlm_att_mask *mask, uint32_t hd_k, uint32_t hd_v,
                            float scale, float *out, float *tile, uint32_t *idx);

/* nq queries on one KV head of one sequence in one pass over its tiles
 * (forward.c explains); their outputs equal wlm_attention_tiled_kv's */
void wlm_attention_block(const wlm_kernels *k, uint32_t nq, const float *const *q, float *const *out, const int32_t *qpos,
                         const void *kc, const void *vc, int kv_f16, const wlm_att_mask *mask, uint32_t hd_k, uint32_t hd_v,
                         float scale, float *tile, uint32_t *idx, float *kvt);
/* whether the slots mask lets its query see hold ascending positions */
int wlm_att_ascending(const wlm_att_mask *mask);

/* log P(tok) under softmax(logits) at T = 1 (sampler.c): the vocabulary in
 * 32 fixed blocks, each by k->logit_max / k->sum_exp, blocks added in order;
 * wlm_ctx_token_logprob shares the blocks among c's threads, same value */
float wlm_token_logprob(const wlm_kernels *k, const float *logits, uint32_t n, int32_t tok);
/* the sampler's candidate order (sampler.c): keeps the best k (0 = all) of
 * v/id (ids ascending), larger value first, ties by smaller id; tmp (12 n
 * bytes, or NULL for the heap path) lets it radix-sort when k >= 256 */
uint32_t wlm_top_k_sorted(float *v, int32_t *id, uint32_t n, uint32_t k, void *tmp);
float wlm_ctx_token_logprob(wlm_ctx *c, const float *logits, uint32_t n, int32_t tok);

/* ---- sequences in the cache (kvcache.c) ------------------------------------- */
void wlm_kv_reset(wlm_ctx *c);
/* slots a sequence fills before it takes another block (src/kvcache.c) */
#define WLM_KV_BLOCK 16u
/* takes a free slot (the caller checked c->n_free > 0) for seq at pos */
uint32_t wlm_kv_take(wlm_ctx *c, uint32_t seq, int32_t pos);

#endif
