/* wasmlm public C API.
 *
 * The engine is a library with no hidden globals: every call takes the object
 * it works on. Every fallible call returns a wlm_status and, when `err` is
 * non-NULL, fills it with a readable message that names the problem.
 *
 * Objects:
 *   wlm_model  - a parsed GGUF file: hyper-parameters, vocabulary and tensor
 *                views that point into the file bytes (never copied).
 *   wlm_ctx    - one generation context for a model: KV cache, scratch
 *                buffers, sampler state. All sized once, at creation.
 *   wlm_detok  - a streaming detokenizer that only emits complete UTF-8.
 *
 * The library needs no libc (it builds freestanding for wasm32); memory comes
 * from wlm_sys_alloc (src/base.h; src/sys.c). */
#ifndef WLM_H
#define WLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Functions marked WLM_API are the exports of the wasm module. */
#define WLM_API __attribute__((visibility("default")))

typedef enum {
    WLM_OK = 0,
    WLM_ERR_ARG = 1,          /* bad argument from the caller */
    WLM_ERR_FORMAT = 2,       /* not a GGUF file / malformed structure */
    WLM_ERR_TRUNCATED = 3,    /* something points past the end of the file */
    WLM_ERR_UNSUPPORTED = 4,  /* valid file, feature we do not support */
    WLM_ERR_NOMEM = 5,        /* memory limit reached */
    WLM_ERR_CONTEXT_FULL = 6, /* KV cache full and policy is "error" */
    WLM_ERR_STATE = 7         /* call not valid in this state */
} wlm_status;

typedef struct wlm_err {
    wlm_status code;
    char msg[256];
} wlm_err;

typedef struct wlm_model wlm_model;
typedef struct wlm_ctx wlm_ctx;

/* ---- model ------------------------------------------------------------- */

/* Parses `size` bytes of a GGUF file at `data`. The bytes must stay alive and
 * unmodified for the life of the model: tensors are views into them. */
WLM_API wlm_status wlm_model_load(wlm_model **out, const uint8_t *data, uint64_t size, wlm_err *err);
/* As wlm_model_load, but the model takes the bytes over: it may rewrite
 * them in place into faster layouts (the Q4_0 matrices of the SIMD builds
 * become groups of four blocks, the same size; wlm_quantize still writes
 * the original GGUF bytes). The bytes must be writable, stay alive for the
 * life of the model, and not be loaded again or read as a GGUF file. */
WLM_API wlm_status wlm_model_load_inplace(wlm_model **out, uint8_t *data, uint64_t size, wlm_err *err);
/* A split GGUF (NAME-00001-of-00003.gguf, ...): the bytes of every part, in
 * order (data[i], sizes[i] for split.no i), each a GGUF file of its own; the
 * first holds the model's metadata, the tensors are found in any part. The
 * parts may sit anywhere (a host streams them into consecutive blocks of one
 * memory, no copy is made). Refused with WLM_ERR_FORMAT, naming the part: a
 * part missing or given twice, parts out of order or of another split
 * (split.count / split.tensors.count differ), tensors that do not add up to
 * split.tensors.count, a tensor in two parts. n_parts = 1 is wlm_model_load;
 * a lone part of a split of several is refused. */
WLM_API wlm_status wlm_model_load_parts(wlm_model **out, const uint8_t *const *data, const uint64_t *sizes, uint32_t n_parts, wlm_err *err);
/* wlm_model_load_parts, taking the bytes over as wlm_model_load_inplace does. */
WLM_API wlm_status wlm_model_load_parts_inplace(wlm_model **out, uint8_t *const *data, const uint64_t *sizes, uint32_t n_parts, wlm_err *err);
WLM_API uint32_t wlm_model_n_parts(const wlm_model *m);
WLM_API void wlm_model_free(wlm_model *m);

/* A vocabulary-only load (a tokenizer): the header and metadata of one GGUF
 * file, the vocabulary built from tokenizer.ggml.*; no architecture, no
 * tensor infos and no weights are read, so `size` may end anywhere after
 * the metadata (wlm_gguf_meta_bytes says where that is) and files that hold
 * only a vocabulary (ggml-vocab-*.gguf) load. The model serves
 * wlm_tokenize, wlm_token_bytes, wlm_detok_push, wlm_token_is_eog and the
 * metadata getters (no tensors); hparams has n_vocab, the special ids and
 * flags, and n_ctx_train when the file says it, the rest 0. wlm_ctx_new and
 * wlm_quantize refuse it (WLM_ERR_STATE). The first part of a split GGUF
 * loads this way on its own. The bytes must stay alive, as for
 * wlm_model_load. */
WLM_API wlm_status wlm_model_load_vocab(wlm_model **out, const uint8_t *data, uint64_t size, wlm_err *err);
WLM_API uint32_t wlm_model_vocab_only(const wlm_model *m); /* 1 for a wlm_model_load_vocab model */
/* How many leading bytes of a GGUF file hold its header and metadata, for
 * reading no more of a file than a vocabulary-only load needs: WLM_OK with
 * *need = that count when the `size` bytes at data hold them all;
 * WLM_ERR_TRUNCATED with *need = a lower bound of the count (> size) when
 * they end before; another status (a message in err) when the bytes cannot
 * start a valid GGUF file. Reads only what it checks; allocates nothing. */
WLM_API wlm_status wlm_gguf_meta_bytes(const uint8_t *data, uint64_t size, uint64_t *need, wlm_err *err);
/* A 64-bit fingerprint of the model, computed once at load: every metadata
 * key and value (split.* keys aside, so a split model and its merged file
 * agree), every tensor's name, type and shape, and samples of each tensor's
 * bytes (its first, middle and last 32 bytes). Saved states carry it. 0 for
 * a vocabulary-only model. */
WLM_API uint64_t wlm_model_fingerprint(const wlm_model *m);

typedef struct wlm_hparams {
    uint32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv;
    uint32_t head_dim, n_ff, n_rot;
    float rope_freq_base, rms_eps;
    int32_t bos_id, eos_id, unk_id;
    uint32_t add_bos, add_space_prefix;
    uint32_t tied_output; /* 1 when output.weight is absent (uses token_embd) */
    /* added with qwen2 / Llama 3 support (appended: earlier offsets unchanged) */
    uint32_t head_dim_v;  /* value head size (attention.value_length); head_dim is the
                           * query/key head size (attention.key_length) */
    uint32_t rope_type;   /* WLM_ROPE_NORM: pairs (2i, 2i+1); WLM_ROPE_NEOX: pairs (i, i + n_rot/2) */
    uint32_t rope_scaled; /* 1 when per-frequency factors divide the RoPE frequencies
                           * (rope_freqs.weight, or computed for rope.scaling.type llama3/linear) */
} wlm_hparams;
enum { WLM_ROPE_NORM = 0,
       WLM_ROPE_NEOX = 2 };
WLM_API const wlm_hparams *wlm_model_hparams(const wlm_model *m);

/* Metadata access (for `info`). Values are returned as pointers to the raw
 * GGUF encoding inside the file; `type` is the GGUF value type. */
WLM_API uint32_t wlm_meta_count(const wlm_model *m);
WLM_API const char *wlm_meta_key(const wlm_model *m, uint32_t i, uint32_t *len);
WLM_API uint32_t wlm_meta_type(const wlm_model *m, uint32_t i);
WLM_API const uint8_t *wlm_meta_value(const wlm_model *m, uint32_t i, uint64_t *nbytes);
WLM_API uint32_t wlm_tensor_count(const wlm_model *m);
WLM_API const char *wlm_tensor_name(const wlm_model *m, uint32_t i, uint32_t *len);
WLM_API uint32_t wlm_tensor_type(const wlm_model *m, uint32_t i);
WLM_API uint32_t wlm_tensor_ndims(const wlm_model *m, uint32_t i);
WLM_API uint64_t wlm_tensor_dim(const wlm_model *m, uint32_t i, uint32_t d);
WLM_API uint64_t wlm_tensor_offset(const wlm_model *m, uint32_t i); /* absolute, in its file (its part) */
WLM_API uint32_t wlm_tensor_part(const wlm_model *m, uint32_t i);   /* the part holding it (0-based) */
WLM_API const char *wlm_type_name(uint32_t ggml_type);

/* ---- tokenizer ------------------------------------------------------------ */

/* Encodes `len` bytes of text. `flags`:
 *   WLM_TOK_ADD_BOS (1)       prepend BOS (when the vocab has one) and, when
 *                             the vocab sets add_eos_token, append EOS
 *                             ("add special"; passing 1 is the old add_bos=1;
 *                             a bert vocab: [CLS] before, [SEP] after);
 *   WLM_TOK_PARSE_SPECIAL (2) text of control tokens (e.g. "<|im_start|>")
 *                             becomes their id (longest match first);
 *                             otherwise it is plain text. User-defined tokens
 *                             are always matched as whole strings.
 * Writes at most `cap` ids; *n_out receives the number needed (which may
 * exceed cap: then WLM_ERR_ARG with "token buffer too small"). */
#define WLM_TOK_ADD_BOS 1
#define WLM_TOK_PARSE_SPECIAL 2
#define WLM_TOK_NO_SPACE_PREFIX 4 /* text that continues other text: no SentencePiece "▁" in front (BPE adds none) */
WLM_API wlm_status wlm_tokenize(const wlm_model *m, const char *text, uint32_t len, int flags,
                                int32_t *out, uint32_t cap, uint32_t *n_out, wlm_err *err);

/* 1 when `token` ends generation: EOS, EOT, EOM, or a control token whose
 * text is a known end marker (<|eot_id|>, <|im_end|>, <|end|>,
 * <|endoftext|>, </s>, <end_of_turn>). */
WLM_API int wlm_token_is_eog(const wlm_model *m, int32_t token);

/* The raw bytes a token stands for (byte tokens give their byte, '▁' becomes
 * ' ', control tokens give nothing; byte-level BPE pieces are mapped back to
 * their bytes, user-defined tokens give their text). Returns the byte count written (<= cap),
 * or the needed count if larger than cap. */
WLM_API uint32_t wlm_token_bytes(const wlm_model *m, int32_t token, char *out, uint32_t cap);

/* Streaming detokenizer: holds bytes of an incomplete UTF-8 character until
 * it completes; invalid bytes become U+FFFD. Plain struct, no allocation. */
typedef struct wlm_detok {
    uint8_t pending[8];
    uint32_t n_pending;
} wlm_detok;
WLM_API void wlm_detok_reset(wlm_detok *d);
/* Appends the text of `token`; writes complete valid UTF-8 into out (cap must
 * be >= 64 + longest token). Returns bytes written. */
WLM_API uint32_t wlm_detok_push(const wlm_model *m, wlm_detok *d, int32_t token, char *out, uint32_t cap);
/* Flushes held bytes (an incomplete character) as one U+FFFD at the end of a stream. */
WLM_API uint32_t wlm_detok_flush(wlm_detok *d, char *out, uint32_t cap);

/* ---- context ------------------------------------------------------------ */

enum { WLM_KV_F32 = 0,
       WLM_KV_F16 = 1 };
enum { WLM_FULL_ERROR = 0,
       WLM_FULL_SLIDE = 1 };

typedef struct wlm_ctx_params {
    uint32_t n_ctx;       /* KV cache length; 0 = min(model context, 2048) */
    uint32_t n_batch;     /* max tokens per forward call (prefill chunk); 0 = 64 */
    uint32_t kv_type;     /* WLM_KV_F32 (default) or WLM_KV_F16 */
    uint32_t full_policy; /* WLM_FULL_ERROR (default) or WLM_FULL_SLIDE */
    uint32_t n_keep;      /* with SLIDE: first positions never dropped (attention sink) */
    uint32_t logits_all;  /* keep logits for every token of a batch, not only the last */
    uint32_t n_threads;   /* most threads that will run this context's work (0 = 1) */
    /* added with multi-sequence batches (appended: earlier offsets unchanged) */
    uint32_t n_seq_max; /* sequences the cache can hold at once, 1..WLM_MAX_SEQ (0 = 1) */
    uint32_t n_outputs; /* rows of logits one wlm_eval_batch may ask for
                           * (0 = max(n_seq_max, 1, n_batch if logits_all)) */
    /* added with the window ring (appended: earlier offsets unchanged) */
    uint32_t swa_full; /* 1: sliding-window layers keep every position, as the
                           * others do (a rewind may go anywhere); 0 (default):
                           * they keep a ring of the positions their window can
                           * still see (less memory; see wlm_seq_truncate) */
} wlm_ctx_params;
#define WLM_MAX_SEQ 64

WLM_API void wlm_ctx_default_params(wlm_ctx_params *p);
/* Plans and allocates every buffer of the context (KV cache, scratch, sampler
 * work space). Fails with "the context needs N more bytes of memory (X in use,
 * limit M)" when it cannot. */
WLM_API wlm_status wlm_ctx_new(wlm_ctx **out, wlm_model *m, const wlm_ctx_params *p, wlm_err *err);
WLM_API void wlm_ctx_free(wlm_ctx *c);
/* Bytes the context would need, without allocating (memory planning). */
WLM_API uint64_t wlm_ctx_bytes_needed(const wlm_model *m, const wlm_ctx_params *p);

/* Forgets every position (KV cache emptied); the next eval starts at 0. */
WLM_API void wlm_ctx_reset(wlm_ctx *c);
WLM_API uint32_t wlm_ctx_pos(const wlm_ctx *c); /* tokens evaluated so far */
WLM_API uint32_t wlm_ctx_n_ctx(const wlm_ctx *c);
/* Rows the sliding-window layers keep per KV head: the window ring, n_seq_max
 * x (window - 1) + n_batch, or 0 when they keep one per cache slot (no such
 * layers, swa_full, or a ring that would not be smaller). */
WLM_API uint32_t wlm_ctx_window_rows(const wlm_ctx *c);
/* Drops positions >= pos (rewind), so the cache can be reused for a prompt
 * that shares a prefix. Only valid when nothing slid out of the window
 * (and as wlm_seq_truncate for sequence 0). */
WLM_API wlm_status wlm_ctx_truncate(wlm_ctx *c, uint32_t pos, wlm_err *err);

/* Runs the transformer on n tokens appended at the current position
 * (prefill when n > 1, decode when n == 1). Processes them in chunks of
 * n_batch. Afterwards wlm_ctx_logits gives the logits of the last token
 * (or of every token of the last chunk with logits_all). */
WLM_API wlm_status wlm_eval(wlm_ctx *c, const int32_t *tokens, uint32_t n, wlm_err *err);
WLM_API float *wlm_ctx_logits(wlm_ctx *c);
WLM_API uint32_t wlm_ctx_n_logits(const wlm_ctx *c); /* rows of logits available */

/* ---- sequences: several token streams in one cache --------------------------
 *
 * A context holds up to n_seq_max sequences, numbered 0 .. n_seq_max-1
 * (wlm_eval works on sequence 0). The cache is one pool of n_ctx slots; each
 * slot stores the keys/values of one position and a set of the sequences
 * that use it. Forking shares the source's slots with the new sequence (no
 * copy): a prompt prefilled once serves every candidate that forks it, and
 * each candidate's own tokens go into free slots. A slot no sequence uses is
 * free again. Each sequence has its own positions 0, 1, 2, ...
 *
 * wlm_eval_batch runs one forward pass over n tokens of any sequences
 * (e.g. the next token of each of 8 candidates): every weight is read once
 * for the whole batch. Token i goes to sequence seqs[i] (NULL: all 0) at
 * that sequence's next position, in order. want[i] != 0 asks for the logits
 * after token i (NULL: only the last token). The logits rows come out in
 * token order: row r of wlm_ctx_logits is the r-th token asked for.
 * Fails without changing anything when a sequence would pass n_ctx
 * positions or the pool has fewer free slots than tokens
 * (WLM_ERR_CONTEXT_FULL), or when more rows are asked than n_outputs. */
WLM_API wlm_status wlm_eval_batch(wlm_ctx *c, const int32_t *tokens, const uint32_t *seqs,
                                  const uint8_t *want, uint32_t n, wlm_err *err);
/* dst becomes a copy of src (dst's old tokens are dropped first); the two
 * share src's cache slots. */
WLM_API wlm_status wlm_seq_fork(wlm_ctx *c, uint32_t src, uint32_t dst, wlm_err *err);
/* Drops every position of seq (its slots are freed unless shared). */
WLM_API wlm_status wlm_seq_remove(wlm_ctx *c, uint32_t seq, wlm_err *err);
/* Drops positions >= pos of seq (rewind: speculative rollback, prefix reuse).
 * With a window ring (wlm_ctx_window_rows > 0) the sliding-window layers
 * drop the positions no window sees any more, so a rewind needs the
 * window - 1 positions before pos to be still there: always true back to
 * the first token of the last chunk evaluated for seq if no other sequence
 * was evaluated since (a speculative rollback), and with one sequence for
 * the last n_batch positions; deeper it fails with WLM_ERR_STATE naming
 * the lowest position possible, changing nothing (evaluate again from 0,
 * or plan with swa_full). */
WLM_API wlm_status wlm_seq_truncate(wlm_ctx *c, uint32_t seq, uint32_t pos, wlm_err *err);
WLM_API uint32_t wlm_seq_pos(const wlm_ctx *c, uint32_t seq); /* next position of seq */
WLM_API uint32_t wlm_ctx_free_slots(const wlm_ctx *c);        /* cache slots no sequence uses */

/* ---- threads ------------------------------------------------------------ */

/* A pool of n_threads threads (the caller counts as one) on this memory.
 * The host creates n_threads - 1 threads that each call wlm_worker_loop(p,
 * tid) with tid = 1 .. n_threads - 1 (wasm: workers instantiating the same
 * module on the shared memory, each with its own stack). Returns NULL where
 * threads are not available (the single-threaded wasm build). */
typedef struct wlm_pool wlm_pool;
WLM_API wlm_pool *wlm_pool_new(uint32_t n_threads);
WLM_API uint32_t wlm_pool_threads(const wlm_pool *p);
/* Tells the workers to leave their loops, waits for them, frees the pool. */
WLM_API void wlm_pool_free(wlm_pool *p);
WLM_API void wlm_worker_loop(wlm_pool *p, uint32_t tid);
/* Lets a context run its matrix products and attention on the pool, with
 * at most n threads (n <= the n_threads the context was created for). */
WLM_API void wlm_ctx_set_pool(wlm_ctx *c, wlm_pool *p, uint32_t n);

/* ---- sampling ----------------------------------------------------------- */

/* One logit bias: added to the token's logit first of all, after a grammar's mask (-inf bans it). */
typedef struct wlm_logit_bias {
    int32_t token;
    float bias;
} wlm_logit_bias;

typedef struct wlm_sampler_params {
    float temperature;      /* 0 = greedy (argmax, lowest id wins ties) */
    uint32_t top_k;         /* 0 = off */
    float top_p;            /* 1 = off; 0 = the most likely token only */
    float min_p;            /* 0 = off */
    float repeat_penalty;   /* 1 = off */
    uint32_t repeat_last_n; /* window of recent tokens the penalties look at */
    /* logit bias, OpenAI's penalties, locally typical sampling: a field
     * left 0 is off, so a zero-filled tail changes nothing */
    float presence_penalty;  /* subtracted once from each token in the window; in [-1e6, 1e6] */
    float frequency_penalty; /* times the token's count in the window; in [-1e6, 1e6] */
    float typical_p;         /* locally typical sampling: keep this much mass; 0 or 1 = off */
    uint32_t n_biases;
    const wlm_logit_bias *biases; /* n_biases entries (ids in range; a bias is finite or -inf;
                                   * a token given twice gets the sum) */
    const uint32_t *allow;        /* NULL = every token; else a bitset (bit t of word t / 32): only those
                              * tokens can be drawn, applied before every other stage (a grammar's mask) */
} wlm_sampler_params;
WLM_API void wlm_sampler_default_params(wlm_sampler_params *p);

/* Seeded PRNG (PCG32): the same seed gives the same stream on every platform. */
typedef struct wlm_rng {
    uint64_t state, inc;
} wlm_rng;
WLM_API void wlm_rng_seed(wlm_rng *r, uint64_t seed);
WLM_API uint32_t wlm_rng_u32(wlm_rng *r);
WLM_API float wlm_rng_float(wlm_rng *r); /* [0,1), 24 bits */

/* Samples the next token from `logits` (n_vocab floats, not modified).
 * `history`/`n_history` are the recent tokens for the penalties (the last
 * repeat_last_n of them count). The pipeline (src/sampler.c): grammar mask
 * (sp->allow) -> logit bias -> penalties -> temperature -> top-k -> typical
 * -> top-p -> min-p -> draw.
 * `logprob` receives log P(token) under the model's own distribution
 * (softmax of the raw logits, T = 1, no filters). */
WLM_API wlm_status wlm_sample(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                              const int32_t *history, uint32_t n_history, wlm_rng *rng,
                              int32_t *token, float *logprob, wlm_err *err);

/* The n most likely tokens of the model's own distribution (softmax of
 * the raw logits, T = 1: before a grammar's mask, bias, penalties and
 * filters, so a token the mask forbids may be among them), best first,
 * lowest id on ties, with their log-probabilities: each is exactly the
 * *logprob wlm_sample reports when it picks that token. Returns the count
 * written (n, or fewer when fewer logits are usable: not NaN or -inf). */
WLM_API uint32_t wlm_top_logprobs(wlm_ctx *c, const float *logits, uint32_t n, int32_t *ids, float *logprobs);

/* Sampling distribution after mask, bias, penalties, temperature and filters: writes up to
 * `cap` (token, probability) pairs sorted by probability, returns the count.
 * (For UIs that show the next-token distribution.) */
WLM_API uint32_t wlm_sample_dist(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                                 const int32_t *history, uint32_t n_history,
                                 int32_t *ids, float *probs, uint32_t cap);

/* Speculative sampling, one draft token checked against the target.
 * `logits` are the target's logits for the position the draft token x
 * fills; q_ids/q_probs (q_n pairs) are the distribution x was drawn from
 * (the draft model's filtered distribution; one pair with probability 1
 * for prompt lookup). The target distribution p is `logits` through the
 * same pipeline as wlm_sample (bias -> penalties -> temperature -> filters). x is
 * accepted with probability min(1, p(x)/q(x)) (*accepted = 1, *token = x);
 * otherwise *token is drawn from max(0, p - q) renormalized. Emitted
 * tokens then follow p exactly. Greedy (temperature 0): accepted iff x is
 * p's argmax, else the argmax. *logprob: log P(token) as in wlm_sample. */
WLM_API wlm_status wlm_spec_accept(wlm_ctx *c, const float *logits, const wlm_sampler_params *sp,
                                   const int32_t *history, uint32_t n_history, int32_t x,
                                   const int32_t *q_ids, const float *q_probs, uint32_t q_n,
                                   wlm_rng *rng, int32_t *token, int32_t *accepted, float *logprob,
                                   wlm_err *err);

/* ---- saved state: one sequence to bytes and back ---------------------------
 *
 * A saved state holds one sequence: its tokens (n_tokens >= its positions:
 * the last ones may not be evaluated yet, e.g. the token a generation
 * sampled last), the keys and values of the cache rows it uses (not the
 * whole context: the size grows with the positions, not with n_ctx), the
 * rows' positions, a sampler stream (optional) and what the cache must match
 * to take them: the model's fingerprint, the cache's shape and element type.
 * Sliding-window layers hold only their rows from the sequence's rewind
 * floor - (window - 1) on (the window ring may have dropped older ones);
 * the floor is saved and restored, so a rewind after a load goes as deep as
 * before the save. A state loads into a context that keeps a window ring
 * or a row per slot (swa_full) alike, whichever the saver had.
 * Layout (little-endian; src/kvcache.c): a 96-byte header ("WLMS", version,
 * total size, checksum of every other byte, fingerprint, counts), the
 * tokens, the positions, then per layer its row count and its rows' keys and
 * values as stored. The bytes are untrusted input when loaded: every count
 * and length is checked before it is used, and nothing changes unless all of
 * it is valid.
 *
 * wlm_ctx_state_size: the bytes wlm_ctx_state_save writes for sequence seq
 * with n_tokens tokens (0 when seq is out of range or the size would not
 * fit in 64 bits).
 * wlm_ctx_state_save: writes them into out (cap bytes, *written = the size).
 * tokens (n_tokens >= wlm_seq_pos(c, seq)) are the sequence's tokens;
 * rng (NULL: none) the sampler stream to continue from.
 * wlm_ctx_state_load: sequence seq of c becomes the saved one (the others
 * are kept); refused, changing nothing, with WLM_ERR_TRUNCATED (cut short),
 * WLM_ERR_FORMAT (not a state, corrupt: the checksum or a count does not
 * match), WLM_ERR_UNSUPPORTED (another state version, another KV element
 * type), WLM_ERR_ARG (another model: the fingerprint or the cache shape
 * differs) or WLM_ERR_CONTEXT_FULL (more positions or rows than c holds, or
 * a slid state (onFull 'slide') whose ring differs). `info` (optional)
 * receives the counts, where the tokens are and the sampler stream. */
#define WLM_STATE_VERSION 1
typedef struct wlm_state_info {
    uint32_t n_tokens;      /* the sequence's tokens */
    uint32_t n_pos;         /* positions evaluated (its next position); tokens past it are not */
    uint32_t tokens_offset; /* byte offset of the tokens (int32, little-endian) in the state */
    uint32_t has_rng;       /* 1 when rng holds a saved sampler stream */
    wlm_rng rng;
} wlm_state_info;
WLM_API uint64_t wlm_ctx_state_size(const wlm_ctx *c, uint32_t seq, uint32_t n_tokens);
WLM_API wlm_status wlm_ctx_state_save(const wlm_ctx *c, uint32_t seq, const int32_t *tokens, uint32_t n_tokens,
                                      const wlm_rng *rng, uint8_t *out, uint64_t cap, uint64_t *written, wlm_err *err);
WLM_API wlm_status wlm_ctx_state_load(wlm_ctx *c, uint32_t seq, const uint8_t *data, uint64_t size,
                                      wlm_state_info *info, wlm_err *err);

/* ---- grammars (GBNF) ----------------------------------------------------------
 *
 * Constrained decoding (docs/grammar.md): a grammar in GBNF text is compiled
 * against a model's vocabulary; a recognizer state per sequence follows the
 * generated tokens, and for each state the set of tokens that keep the text
 * inside the grammar is a bitset over the vocabulary (bit t of word t / 32),
 * which wlm_sampler_params.allow applies before every other filter. Tokens
 * are matched by their bytes (wlm_token_bytes): byte-fallback tokens, SPM's
 * space mark and byte-level BPE pieces as they decode, a UTF-8 character may
 * be split across tokens. Control tokens are never allowed; the model's
 * end-of-generation tokens only where the grammar may end. */
typedef struct wlm_gvocab wlm_gvocab;
typedef struct wlm_grammar wlm_grammar;
/* The vocabulary as a byte trie, built once per model (the model must
 * outlive it, and it every grammar compiled against it). */
WLM_API wlm_status wlm_gvocab_new(wlm_gvocab **out, const wlm_model *m, wlm_err *err);
WLM_API void wlm_gvocab_free(wlm_gvocab *v);
/* Parses and checks `len` bytes of GBNF (start rule `root`); a syntax error
 * names line:column, what was expected and what was found. Precomputes
 * per terminal the tokens it accepts on its own (docs/grammar.md). */
WLM_API wlm_status wlm_grammar_compile(wlm_grammar **out, const wlm_gvocab *v, const char *text, uint32_t len, wlm_err *err);
WLM_API void wlm_grammar_free(wlm_grammar *g);
/* Recognizer states (one per sequence, up to 256 per grammar): a new one is
 * at the start of the grammar; copy makes dst the same as src (forks). */
WLM_API wlm_status wlm_grammar_state_new(wlm_grammar *g, uint32_t *state, wlm_err *err);
WLM_API wlm_status wlm_grammar_state_copy(wlm_grammar *g, uint32_t dst, uint32_t src, wlm_err *err);
WLM_API void wlm_grammar_state_free(wlm_grammar *g, uint32_t state);
/* Advances a state by a token (an end-of-generation token where the grammar
 * may end; then only end-of-generation follows) or by raw bytes. A token or
 * byte the grammar does not allow is refused and the state is unchanged. */
WLM_API wlm_status wlm_grammar_accept(wlm_grammar *g, uint32_t state, int32_t token, wlm_err *err);
WLM_API wlm_status wlm_grammar_accept_bytes(wlm_grammar *g, uint32_t state, const char *bytes, uint32_t n, wlm_err *err);
/* 1 when the text so far is a complete sentence of the grammar */
WLM_API int wlm_grammar_can_end(const wlm_grammar *g, uint32_t state);
/* The allowed tokens of a state (*mask: n_vocab bits, valid until the next
 * call on this grammar) and how many of them are not end-of-generation
 * tokens (0 and can_end: the grammar is complete; 0 otherwise: a dead end).
 * Flag WLM_GRAMMAR_NO_EOG leaves the end-of-generation tokens out. */
#define WLM_GRAMMAR_NO_EOG 1
WLM_API wlm_status wlm_grammar_mask(wlm_grammar *g, uint32_t state, uint32_t flags, const uint32_t **mask, uint32_t *n_allowed, wlm_err *err);
/* Counters for benchmarks and tests (src/grammar.h, WLM_GS_*). */
WLM_API uint64_t wlm_grammar_stat(const wlm_grammar *g, uint32_t what);

/* ---- embeddings ------------------------------------------------------------
 *
 * One vector of n_embd floats per text: the model's last hidden states
 * (decoders: after the final norm; bert / nomic-bert: the last layer's
 * output) pooled over the text's tokens. Pooling kinds are the GGUF
 * pooling_type values: MEAN (the average over the tokens), CLS (the first
 * token's), LAST (the last token's). */
enum { WLM_POOLING_NONE = 0,
       WLM_POOLING_MEAN = 1,
       WLM_POOLING_CLS = 2,
       WLM_POOLING_LAST = 3 };
#define WLM_POOLING_MODEL 0xFFFFFFFFu /* wlm_embed: the model's pooling (wlm_model_pooling) */
#define WLM_EMBED_NORMALIZE 1         /* wlm_embed flag: divide each vector by its L2 norm */

/* The pooling a model's embeddings use: the file's <arch>.pooling_type when
 * it names MEAN, CLS or LAST; otherwise LAST for causal models (decoders:
 * the last token has seen the whole text) and MEAN for the others. */
WLM_API uint32_t wlm_model_pooling(const wlm_model *m);
/* 1 when attention is causal (<arch>.attention.causal; decoders by
 * default), 0 when every token sees its whole sequence (bert, nomic-bert). */
WLM_API uint32_t wlm_model_causal(const wlm_model *m);

/* Embeds n_texts texts in as few forward passes as fit: text i is
 * n_tokens[i] token ids, the texts' ids one after the other in `tokens`
 * (token type 0, positions from 0). Each text is a sequence of its own
 * (they never see each other), so a batch gives each text the vector it
 * gets alone (up to summation order). Writes n_texts x n_embd floats to
 * `out`, row i for text i. `pooling`: WLM_POOLING_MEAN / CLS / LAST or
 * WLM_POOLING_MODEL; `flags`: WLM_EMBED_NORMALIZE. The cache is emptied
 * before and after (every sequence of c is dropped). Fails with
 * WLM_ERR_ARG naming the text when one has no tokens, more than n_ctx, or
 * (non-causal models, which see a whole text in one pass) more than
 * n_batch; the context needs n_seq_max >= 1 (texts are packed into a pass
 * up to n_batch tokens and n_seq_max texts). */
WLM_API wlm_status wlm_embed(wlm_ctx *c, const int32_t *tokens, const uint32_t *n_tokens, uint32_t n_texts,
                             uint32_t pooling, uint32_t flags, float *out, wlm_err *err);

/* ---- quantization --------------------------------------------------------- */

/* Size of the GGUF file wlm_quantize would write for target type `type`:
 * a GGML type id (0 F32, 1 F16, 8 Q8_0, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1,
 * 10 Q2_K, 11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K) or a mixture below. The
 * per-tensor rule (mixtures, K-quant fallback for rows not a multiple of
 * 256) is described in src/requantize.c and docs/accuracy.md. */
#define WLM_QUANT_Q4_K_M 1000 /* Q4_K, Q6_K for output and some attn_v/ffn_down */
#define WLM_QUANT_Q5_K_M 1001 /* Q5_K, Q6_K for output and some attn_v/ffn_down */
WLM_API wlm_status wlm_quantize_size(const wlm_model *m, uint32_t type, uint64_t *size, wlm_err *err);
/* Writes the re-quantized GGUF into out (size from wlm_quantize_size).
 * 2-D weight tensors are converted; norms and rows whose length is not a
 * multiple of the block size keep their type. `report` (optional) receives
 * one line per tensor. */
WLM_API wlm_status wlm_quantize(const wlm_model *m, uint32_t type, uint8_t *out, uint64_t size,
                                char *report, uint32_t report_cap, wlm_err *err);
/* The targets wlm_quantize accepts, for front ends to list without a copy:
 * the id of target i (types, then mixtures; 0xffffffff past the last) and
 * the name of a target id ("Q4_0", "Q4_K_M"; NULL when it is not one). */
WLM_API uint32_t wlm_quantize_target(uint32_t i);
WLM_API const char *wlm_quantize_target_name(uint32_t type);

#ifdef __cplusplus
}
#endif
#endif
