/* GGUF reader and model loader tests: malformed files (each rejected with its
 * own message, never a crash; the suite also runs under ASan/UBSan), the
 * metadata/tensor table accessors on stories260K, a tiny synthetic llama
 * built from scratch, and re-quantization to Q8_0. */
#include "tst.h"
#include "gguf_build.h"
#include "../../src/internal.h"

#define STORIES "models/stories260K.gguf"
#define STORIES_SIZE 1185376ull
#define STORIES_DATA_START 14176ull

/* ---- helpers -------------------------------------------------------------------- */

/* Loads `size` bytes from a private exact-size copy (so ASan sees any read
 * past the end). Returns the status; *err gets the message. */
static wlm_status load_exact(const unsigned char *bytes, size_t size, wlm_err *err) {
    unsigned char *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, bytes, size);
    wlm_model *m = (wlm_model *)0x1;
    memset(err, 0, sizeof *err);
    wlm_status s = wlm_model_load(&m, copy, size, err);
    if (s == WLM_OK) wlm_model_free(m);
    else if (m != NULL) {
        fprintf(stderr, "  failed load left *out non-NULL\n");
        tst_failed_checks++;
    }
    free(copy);
    return s;
}

/* Expects the file to be refused with `code` and a message containing `sub`. */
static void expect_fail_bytes(const unsigned char *bytes, size_t size, wlm_status code, const char *sub, const char *what) {
    wlm_err err;
    wlm_status s = load_exact(bytes, size, &err);
    CHECKF(s == code, "%s: status %d, expected %d (%s)", what, (int)s, (int)code, err.msg);
    CHECKF(s != WLM_OK && err.code == s, "%s: err.code %d vs status %d", what, (int)err.code, (int)s);
    CHECKF(strstr(err.msg, sub) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, sub);
}

static void expect_fail(const gb_file *f, wlm_status code, const char *sub, const char *what) {
    size_t size;
    unsigned char *b = gb_serialize(f, &size);
    expect_fail_bytes(b, size, code, sub, what);
    free(b);
}

static void expect_ok(const gb_file *f, const char *what) {
    size_t size;
    unsigned char *b = gb_serialize(f, &size);
    wlm_err err;
    wlm_status s = load_exact(b, size, &err);
    CHECKF(s == WLM_OK, "%s: %s", what, err.msg);
    free(b);
}

static unsigned char *read_stories(unsigned long long *size) {
    unsigned char *d = tst_read_file(tst_path(STORIES), size);
    if (!d) fprintf(stderr, "  cannot read %s\n", tst_path(STORIES));
    return d;
}

/* Clones a parsed file into a builder description (raw metadata values,
 * tensor infos and data), in the same order. */
static void clone_gguf(gb_file *f, const wlm_gguf *g) {
    gb_init(f);
    f->version = g->version;
    f->alignment = g->alignment;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const wlm_kv *kv = &g->kv[i];
        char key[160];
        snprintf(key, sizeof key, "%.*s", (int)kv->key_len, kv->key);
        gb_put(gb_kv_add(f, key, kv->type), kv->val, (size_t)kv->val_bytes);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const wlm_tensor *t = &g->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name_len, t->name);
        gb_tensor_add(f, name, t->type, t->n_dims, t->ne, t->data, (size_t)t->nbytes);
    }
}

/* stories260K as a builder description; 0 if the file is missing */
static int stories_desc(gb_file *f) {
    unsigned long long size;
    unsigned char *d = read_stories(&size);
    if (!d) return 0;
    wlm_gguf g;
    wlm_err err;
    if (wlm_gguf_parse(&g, d, size, &err) != WLM_OK) {
        fprintf(stderr, "  parse: %s\n", err.msg);
        free(d);
        return 0;
    }
    clone_gguf(f, &g);
    wlm_gguf_free(&g);
    free(d);
    return 1;
}

static gb_tensor *T(gb_file *f, const char *name) {
    int i = gb_t_find(f, name);
    if (i < 0) {
        fprintf(stderr, "  no tensor %s in the description\n", name);
        abort();
    }
    return &f->t[i];
}

/* ---- header --------------------------------------------------------------------- */

TEST(gguf_header_errors) {
    unsigned char hdr[64];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, "GGUF", 4);
    hdr[4] = 3; /* version 3, 0 tensors, 0 kv */
    expect_fail_bytes(hdr, 0, WLM_ERR_FORMAT, "empty file", "empty file");
    {
        wlm_model *m = NULL;
        wlm_err err = { 0 };
        CHECK(wlm_model_load(&m, NULL, 100, &err) == WLM_ERR_FORMAT && strstr(err.msg, "empty file"));
        CHECK(wlm_model_load(NULL, hdr, 24, &err) == WLM_ERR_ARG);
    }
    expect_fail_bytes(hdr, 3, WLM_ERR_FORMAT, "only 3 bytes", "3-byte file");
    unsigned char bad[24];
    memcpy(bad, hdr, 24);
    memcpy(bad, "GGML", 4);
    expect_fail_bytes(bad, 24, WLM_ERR_FORMAT, "not a GGUF file (magic 0x4c4d4747)", "wrong magic");
    memcpy(bad, hdr, 24);
    bad[4] = 1;
    expect_fail_bytes(bad, 24, WLM_ERR_UNSUPPORTED, "GGUF version 1 is not supported", "version 1");
    memcpy(bad, hdr, 24);
    bad[4] = 0;
    bad[7] = 3; /* version 3 written big-endian */
    expect_fail_bytes(bad, 24, WLM_ERR_UNSUPPORTED, "big-endian", "big-endian");
    memcpy(bad, hdr, 24);
    bad[4] = 99;
    expect_fail_bytes(bad, 24, WLM_ERR_UNSUPPORTED, "unsupported GGUF version 99", "version 99");
    expect_fail_bytes(hdr, 16, WLM_ERR_TRUNCATED, "truncated: GGUF header", "16-byte file");
    /* a header alone with no metadata parses, but is no model */
    expect_fail_bytes(hdr, 24, WLM_ERR_FORMAT, "missing metadata 'general.architecture'", "empty GGUF");
}

/* ---- truncation ------------------------------------------------------------------- */

TEST(gguf_truncated) {
    unsigned long long size;
    unsigned char *d = read_stories(&size);
    REQUIRE(d);
    CHECK(size == STORIES_SIZE);
    wlm_err err;
    CHECKF(load_exact(d, size, &err) == WLM_OK, "whole file: %s", err.msg);
    /* chosen points: header, inside the KV section (count bound, token array,
     * strings, scalar values), tensor infos, padding, tensor data */
    static const unsigned long long chosen[] = {
        4,
        10,
        23,
        100,
        1000,
        40,
        5000,
        6475,
        8570,
        10700,
        10800,
        11300,
        11350,
        11400,
        12000,
        14100,
        14152,
        14160,
        14176,
        14177,
        600000,
        STORIES_SIZE - 1,
    };
    for (size_t i = 0; i < sizeof chosen / sizeof chosen[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "cut at %llu", chosen[i]);
        expect_fail_bytes(d, (size_t)chosen[i], WLM_ERR_TRUNCATED, "truncated", what);
    }
    for (int i = 0; i < 10; i++) {
        unsigned long long cut = 4 + (((unsigned long long)tst_rand() << 8) ^ tst_rand()) % (size - 4);
        char what[64];
        snprintf(what, sizeof what, "cut at %llu (random)", cut);
        expect_fail_bytes(d, (size_t)cut, WLM_ERR_TRUNCATED, "truncated", what);
    }
    free(d);
}

/* the builder reproduces stories260K byte for byte (so the variants below
 * differ from a valid file only by what each test changes) */
TEST(gguf_builder_roundtrip) {
    unsigned long long size;
    unsigned char *d = read_stories(&size);
    REQUIRE(d);
    static gb_file f; /* large: keep it off the (small, wasm) stack */
    REQUIRE(stories_desc(&f));
    size_t n;
    unsigned char *b = gb_serialize(&f, &n);
    CHECKF(n == size, "%zu vs %llu", n, size);
    CHECK(n == size && memcmp(b, d, n) == 0);
    free(b);
    free(d);
    gb_free(&f);
}

/* ---- absurd counts and tensor infos ------------------------------------------------- */

TEST(gguf_bad_counts) {
    static gb_file f; /* large: keep it off the (small, wasm) stack */
    REQUIRE(stories_desc(&f));
    f.n_t_override = (uint64_t)1 << 40;
    expect_fail(&f, WLM_ERR_FORMAT, "absurd tensor count 1099511627776", "2^40 tensors");
    f.n_t_override = GB_AUTO;
    f.n_kv_override = (uint64_t)1 << 40;
    expect_fail(&f, WLM_ERR_FORMAT, "absurd metadata count 1099511627776", "2^40 kv");
    f.n_kv_override = UINT64_MAX - 1;
    expect_fail(&f, WLM_ERR_FORMAT, "absurd metadata count 18446744073709551614", "2^64-2 kv");
    /* one pair more than written: the parser reads tensor infos as a pair */
    f.n_kv_override = (uint64_t)f.n_kv + 1;
    {
        size_t n;
        unsigned char *b = gb_serialize(&f, &n);
        wlm_err err;
        CHECK(load_exact(b, n, &err) != WLM_OK);
        free(b);
    }
    f.n_kv_override = GB_AUTO;
    expect_ok(&f, "unchanged");
    /* a small hand-made file with a plausible tensor count it cannot hold */
    static gb_file s;
    gb_init(&s);
    s.n_t_override = 1000;
    expect_fail(&s, WLM_ERR_TRUNCATED, "truncated: 1000 tensor infos", "1000 tensors in 24 bytes");
    gb_free(&s);
    gb_free(&f);
}

TEST(gguf_bad_tensor_info) {
    static gb_file f; /* large: keep it off the (small, wasm) stack */
    REQUIRE(stories_desc(&f));
    gb_tensor *te = T(&f, "token_embd.weight");
    const uint64_t ne0 = te->ne[0], ne1 = te->ne[1];

    te->ne[1] = (uint64_t)1 << 50;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor token_embd.weight has absurd dimension 1125899906842624", "2^50 dim");
    te->ne[1] = 0;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor token_embd.weight has absurd dimension 0", "zero dim");
    te->ne[1] = ne1;

    te->n_dims = 0;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor token_embd.weight has 0 dimensions", "n_dims 0");
    te->n_dims = 5;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor token_embd.weight has 5 dimensions", "n_dims 5");
    /* product of the dimensions overflows 64 bits (each one is plausible) */
    te->n_dims = 4;
    te->ne[0] = te->ne[1] = te->ne[2] = te->ne[3] = (uint64_t)1 << 32;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor token_embd.weight has too many elements", "element count overflow");
    te->n_dims = 2;
    te->ne[0] = ne0;
    te->ne[1] = ne1;
    te->ne[2] = te->ne[3] = 1;
    expect_ok(&f, "restored");

    /* offsets: past the end, wrapping, misaligned */
    gb_tensor *last = T(&f, "blk.4.ffn_norm.weight");
    last->offset = (uint64_t)1 << 30;
    expect_fail(&f, WLM_ERR_TRUNCATED, "tensor blk.4.ffn_norm.weight data (256 bytes at offset 1073741824", "offset past the end");
    last->offset = 1170944 + 32; /* its own place + 32: ends 32 bytes past the file */
    expect_fail(&f, WLM_ERR_TRUNCATED, "tensor blk.4.ffn_norm.weight data (256 bytes at offset 1170976", "offset just past");
    last->offset = UINT64_MAX - 31; /* offset + size wraps around */
    expect_fail(&f, WLM_ERR_TRUNCATED, "at offset 18446744073709551584", "offset + size overflow");
    last->offset = 4;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor blk.4.ffn_norm.weight: data offset 4 is not aligned to 32", "misaligned");
    last->offset = GB_AUTO;
    expect_ok(&f, "restored offsets");

    /* types */
    te->type = 200;
    expect_fail(&f, WLM_ERR_UNSUPPORTED, "unknown tensor type 200 in token_embd.weight", "type 200");
    te->type = 4; /* a hole in the GGML id range */
    expect_fail(&f, WLM_ERR_UNSUPPORTED, "unknown tensor type 4 in token_embd.weight", "type 4");
    te->type = 0;
    gb_tensor *q = T(&f, "blk.0.attn_q.weight");
    q->type = GGML_Q8_1; /* a 32-block type the format knows but no kernel computes */
    gb_data_resize(q, 64 * 64 / 32 * 36);
    expect_fail(&f, WLM_ERR_UNSUPPORTED, "unsupported tensor type Q8_1 in blk.0.attn_q.weight", "Q8_1");
    q->type = GGML_Q4_K; /* 64 is not a multiple of the 256 block */
    expect_fail(&f, WLM_ERR_FORMAT, "row length 64 is not a multiple of the Q4_K block (256)", "Q4_K rows");
    q->type = 0;
    gb_data_resize(q, 64 * 64 * 4);
    expect_ok(&f, "restored types");
    T(&f, "output_norm.weight")->type = GGML_F16;
    gb_data_resize(T(&f, "output_norm.weight"), 128);
    expect_fail(&f, WLM_ERR_UNSUPPORTED, "unsupported tensor type F16 in output_norm.weight", "F16 norm");
    T(&f, "output_norm.weight")->type = 0;
    gb_data_resize(T(&f, "output_norm.weight"), 256);

    /* names */
    snprintf(T(&f, "blk.0.attn_k.weight")->name, 128, "blk.0.attn_q.weight");
    expect_fail(&f, WLM_ERR_FORMAT, "duplicate tensor name 'blk.0.attn_q.weight'", "duplicate tensor");
    snprintf(f.t[4].name, 128, "blk.0.attn_k.weight");
    expect_ok(&f, "restored names");
    snprintf(T(&f, "blk.2.ffn_up.weight")->name, 128, "blk.2.ffn_upp.weight");
    expect_fail(&f, WLM_ERR_FORMAT, "missing tensor blk.2.ffn_up.weight", "renamed tensor");
    gb_tensor_remove(&f, "blk.2.ffn_upp.weight");
    expect_fail(&f, WLM_ERR_FORMAT, "missing tensor blk.2.ffn_up.weight", "missing tensor");
    gb_free(&f);

    REQUIRE(stories_desc(&f));
    f.t[0].name[0] = 0;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor 0 has bad name length 0", "empty name");
    gb_free(&f);

    /* shapes */
    REQUIRE(stories_desc(&f));
    gb_tensor *k = T(&f, "blk.0.attn_k.weight");
    k->ne[1] = 64;
    gb_data_resize(k, 64 * 64 * 4);
    expect_fail(&f, WLM_ERR_FORMAT, "tensor blk.0.attn_k.weight has shape [64, 64], expected [64, 32]", "wrong shape");
    k->ne[1] = 32;
    gb_data_resize(k, 64 * 32 * 4);
    gb_tensor *nrm = T(&f, "blk.1.ffn_norm.weight");
    nrm->n_dims = 2;
    nrm->ne[0] = 32;
    nrm->ne[1] = 2;
    expect_fail(&f, WLM_ERR_FORMAT, "tensor blk.1.ffn_norm.weight has shape [32, 2], expected [64, 1]", "norm shape");
    gb_tensor *emb = T(&f, "token_embd.weight");
    nrm->n_dims = 1;
    nrm->ne[0] = 64;
    nrm->ne[1] = 1;
    emb->ne[1] = 511;
    gb_data_resize(emb, 64 * 511 * 4);
    expect_fail(&f, WLM_ERR_FORMAT, "tensor token_embd.weight has shape [64, 511], expected [64, 512]", "embd vs vocab");
    gb_free(&f);
}

/* ---- metadata -------------------------------------------------------------------- */

TEST(gguf_bad_metadata) {
    static gb_file f; /* large: keep it off the (small, wasm) stack */
    REQUIRE(stories_desc(&f));
    gb_buf *v;

    v = gb_kv_set(&f, "test.str", GB_STRING);
    gb_u64(v, (uint64_t)1 << 63);
    gb_put(v, "abcd", 4);
    expect_fail(&f, WLM_ERR_TRUNCATED, "metadata string of length 9223372036854775808", "string 2^63");
    gb_kv_remove(&f, "test.str");

    v = gb_kv_set(&f, "test.arr", GB_ARRAY);
    gb_u32(v, GB_U32);
    gb_u64(v, (uint64_t)1 << 62);
    gb_u32(v, 7);
    expect_fail(&f, WLM_ERR_TRUNCATED, "metadata 'test.arr' array of 4611686018427387904 u32", "array 2^62");
    v = gb_kv_set(&f, "test.arr", GB_ARRAY);
    gb_u32(v, GB_STRING);
    gb_u64(v, (uint64_t)1 << 62);
    gb_str(v, "x");
    expect_fail(&f, WLM_ERR_TRUNCATED, "metadata 'test.arr' array of 4611686018427387904 items", "string array 2^62");
    v = gb_kv_set(&f, "test.arr", GB_ARRAY);
    gb_u32(v, 13);
    gb_u64(v, 1);
    gb_u32(v, 7);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'test.arr': unknown array element type 13", "array of type 13");
    /* nesting: 2 levels are fine, 8 are refused */
    v = gb_kv_set(&f, "test.arr", GB_ARRAY);
    gb_u32(v, GB_ARRAY);
    gb_u64(v, 2);
    for (int i = 0; i < 2; i++) {
        gb_u32(v, GB_U8);
        gb_u64(v, 1);
        gb_u8(v, (uint8_t)i);
    }
    expect_ok(&f, "array of 2 arrays");
    v = gb_kv_set(&f, "test.arr", GB_ARRAY);
    for (int i = 0; i < 7; i++) {
        gb_u32(v, GB_ARRAY);
        gb_u64(v, 1);
    }
    gb_u32(v, GB_U8);
    gb_u64(v, 1);
    gb_u8(v, 1);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'test.arr': arrays nested deeper than", "8 nested arrays");
    gb_kv_remove(&f, "test.arr");

    v = gb_kv_set(&f, "test.weird", 13);
    gb_u32(v, 0);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'test.weird': unknown value type 13", "value type 13");
    gb_kv_set(&f, "test.weird", 0xffffffffu);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'test.weird': unknown value type 4294967295", "value type 2^32-1");
    gb_kv_remove(&f, "test.weird");
    expect_ok(&f, "restored");

    gb_u32(gb_kv_add(&f, "llama.block_count", GB_U32), 5);
    expect_fail(&f, WLM_ERR_FORMAT, "duplicate metadata key 'llama.block_count'", "duplicate key");
    f.n_kv--;
    free(f.kv[f.n_kv].val.p);

    gb_set_str(&f, "llama.block_count", "5");
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'llama.block_count' has type string, expected an unsigned integer", "block_count string");
    gb_set_f32(&f, "llama.block_count", 5.0f);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'llama.block_count' has type f32", "block_count f32");
    gb_set_u32(&f, "llama.block_count", 5);
    gb_set_u32(&f, "llama.attention.layer_norm_rms_epsilon", 1);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'llama.attention.layer_norm_rms_epsilon' has type u32, expected f32", "eps as u32");
    gb_set_f32(&f, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gb_set_u32(&f, "general.architecture", 7);
    expect_fail(&f, WLM_ERR_FORMAT, "metadata 'general.architecture' has type u32, expected string", "arch as u32");
    gb_set_str(&f, "general.architecture", "gpt2");
    expect_fail(&f, WLM_ERR_UNSUPPORTED, "unsupported architecture 'gpt2'", "gpt2");
    gb_kv_remove(&f, "general.architecture");
    expect_fail(&f, WLM_ERR_FORMAT, "missing metadata 'general.architecture'", "no architecture");
    gb_set_str(&f, "general.architecture", "llama");
    gb_kv_remove(&f, "llama.embedding_length");
    expect_fail(&f, WLM_ERR_FORMAT, "missing metadata 'llama.embedding_length'", "no embedding_length");
    gb_set_u32(&f, "llama.embedding_length", 64);
    expect_ok(&f, "restored keys");

    gb_set_u32(&f, "general.alignment", 48);
    expect_fail(&f, WLM_ERR_FORMAT, "general.alignment 48 is not a power of two", "alignment 48");
    gb_set_u32(&f, "general.alignment", 0);
    expect_fail(&f, WLM_ERR_FORMAT, "general.alignment 0 is not a power of two", "alignment 0");
    gb_set_str(&f, "general.alignment", "32");
    expect_fail(&f, WLM_ERR_FORMAT, "general.alignment has type string, expected u32", "alignment string");
    gb_set_u32(&f, "general.alignment", 64);
    f.alignment = 64;
    expect_ok(&f, "alignment 64");
    T(&f, "blk.4.ffn_norm.weight")->offset = 1170944 + 32; /* 32-aligned, not 64 */
    expect_fail(&f, WLM_ERR_FORMAT, "blk.4.ffn_norm.weight: data offset 1170976 is not aligned to 64", "alignment 64, offset at 32");
    T(&f, "blk.4.ffn_norm.weight")->offset = GB_AUTO;
    f.alignment = 32;
    gb_kv_remove(&f, "general.alignment");

    /* key names */
    gb_u32(gb_kv_add(&f, "", GB_U32), 1);
    expect_fail(&f, WLM_ERR_FORMAT, "has bad length 0", "empty key");
    f.n_kv--;
    free(f.kv[f.n_kv].val.p);
    gb_free(&f);
}

/* ---- accessors on stories260K --------------------------------------------------- */

static int key_eq(const wlm_model *m, uint32_t i, const char *s) {
    uint32_t len;
    const char *k = wlm_meta_key(m, i, &len);
    return k && len == strlen(s) && memcmp(k, s, len) == 0;
}

static int find_key(const wlm_model *m, const char *s) {
    for (uint32_t i = 0; i < wlm_meta_count(m); i++)
        if (key_eq(m, i, s)) return (int)i;
    return -1;
}

static int find_tensor(const wlm_model *m, const char *s) {
    for (uint32_t i = 0; i < wlm_tensor_count(m); i++) {
        uint32_t len;
        const char *n = wlm_tensor_name(m, i, &len);
        if (n && len == strlen(s) && memcmp(n, s, len) == 0) return (int)i;
    }
    return -1;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

TEST(gguf_meta_access) {
    unsigned long long size;
    unsigned char *raw = read_stories(&size);
    REQUIRE(raw);
    unsigned char *d = tst_sys_copy(raw, size);
    free(raw);
    wlm_model *m = NULL;
    wlm_err err = { 0 };
    REQUIRE(wlm_model_load(&m, d, size, &err) == WLM_OK);

    CHECK(wlm_meta_count(m) == 19);
    CHECK(wlm_tensor_count(m) == 48);
    static const char *const keys[19] = {
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.model",
        "general.architecture",
        "general.name",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.padding_token_id",
        "llama.context_length",
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.block_count",
        "llama.rope.dimension_count",
        "llama.attention.layer_norm_rms_epsilon",
    };
    static const uint32_t types[19] = { 9, 9, 9, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 6 };
    for (uint32_t i = 0; i < 19; i++) {
        CHECKF(key_eq(m, i, keys[i]), "key %u", i);
        CHECKF(wlm_meta_type(m, i) == types[i], "key %u type %u", i, wlm_meta_type(m, i));
    }
    uint64_t nb;
    const uint8_t *v = wlm_meta_value(m, 4, &nb); /* general.architecture */
    CHECK(v && nb == 13 && rd64(v) == 5 && memcmp(v + 8, "llama", 5) == 0);
    CHECK(v == d + 10705 + 8 + 20 + 4); /* points into the file */
    v = wlm_meta_value(m, 12, &nb);     /* llama.embedding_length */
    CHECK(v && nb == 4 && rd32(v) == 64);
    v = wlm_meta_value(m, 16, &nb); /* llama.block_count */
    CHECK(v && nb == 4 && rd32(v) == 5);
    v = wlm_meta_value(m, 0, &nb); /* tokens: array of 512 strings */
    CHECK(v && rd32(v) == 8 && rd64(v + 4) == 512 && nb == 6470 - 24 - 8 - 21 - 4);
    v = wlm_meta_value(m, 1, &nb); /* scores: 512 f32 */
    CHECK(v && rd32(v) == 6 && rd64(v + 4) == 512 && nb == 12 + 512 * 4);
    v = wlm_meta_value(m, 18, &nb);
    float eps;
    memcpy(&eps, v, 4);
    CHECK(nb == 4 && eps > 0.99e-5f && eps < 1.01e-5f);
    /* out of range */
    uint32_t len = 77;
    CHECK(wlm_meta_key(m, 19, &len) == NULL && len == 0);
    CHECK(wlm_meta_type(m, 19) == 0xffffffffu);
    nb = 77;
    CHECK(wlm_meta_value(m, 1000, &nb) == NULL && nb == 0);

    /* tensors */
    uint32_t nl;
    const char *nm = wlm_tensor_name(m, 0, &nl);
    CHECK(nm && nl == 17 && memcmp(nm, "token_embd.weight", 17) == 0);
    CHECK(wlm_tensor_type(m, 0) == GGML_F32);
    CHECK(wlm_tensor_ndims(m, 0) == 2);
    CHECK(wlm_tensor_dim(m, 0, 0) == 64 && wlm_tensor_dim(m, 0, 1) == 512 && wlm_tensor_dim(m, 0, 2) == 1);
    CHECKF(wlm_tensor_offset(m, 0) == STORIES_DATA_START + 0, "offset %llu", (unsigned long long)wlm_tensor_offset(m, 0));
    CHECK(wlm_tensor_offset(m, 1) == STORIES_DATA_START + 131072);
    CHECK(wlm_tensor_ndims(m, 1) == 1 && wlm_tensor_dim(m, 1, 0) == 64 && wlm_tensor_dim(m, 1, 1) == 1);
    int i_down = find_tensor(m, "blk.3.ffn_down.weight");
    CHECK(i_down == 3 + 3 * 9 + 6);
    CHECK(wlm_tensor_dim(m, (uint32_t)i_down, 0) == 172 && wlm_tensor_dim(m, (uint32_t)i_down, 1) == 64);
    CHECK(wlm_tensor_offset(m, (uint32_t)i_down) == STORIES_DATA_START + 901120);
    CHECK(wlm_tensor_offset(m, 47) == STORIES_DATA_START + 1170944);
    CHECK(wlm_tensor_offset(m, 47) + 64 * 4 == size);
    /* the first floats of token_embd are the bytes at that offset */
    CHECK(m->tok_embd->data == d + STORIES_DATA_START);
    for (uint32_t i = 0; i < 48; i++) CHECK(wlm_tensor_type(m, i) == GGML_F32);
    CHECK(wlm_tensor_name(m, 48, &nl) == NULL && nl == 0);
    CHECK(wlm_tensor_type(m, 48) == 0xffffffffu && wlm_tensor_ndims(m, 48) == 0);
    CHECK(wlm_tensor_dim(m, 0, 4) == 0 && wlm_tensor_offset(m, 48) == 0);
    CHECK(strcmp(wlm_type_name(8), "Q8_0") == 0 && strcmp(wlm_type_name(6), "Q5_0") == 0);
    CHECK(strcmp(wlm_type_name(200), "unknown") == 0 && strcmp(wlm_type_name(4), "unknown") == 0);

    const wlm_hparams *hp = wlm_model_hparams(m);
    CHECK(hp->n_vocab == 512 && hp->n_embd == 64 && hp->n_layer == 5 && hp->n_head == 8 && hp->n_head_kv == 4);
    CHECK(hp->n_ff == 172 && hp->head_dim == 8 && hp->n_rot == 8 && hp->n_ctx_train == 2048);
    CHECK(hp->bos_id == 1 && hp->eos_id == 2 && hp->unk_id == 0 && hp->tied_output == 0);
    CHECK(find_key(m, "general.file_type") < 0);
    wlm_model_free(m);
    wlm_sys_free(d);
}

/* ---- a tiny llama built from scratch ------------------------------------------------ */

static wlm_model *load_desc(const gb_file *f, unsigned char **bytes, wlm_err *err) {
    size_t n;
    unsigned char *b = gb_serialize(f, &n);
    *bytes = tst_sys_copy(b, n);
    free(b);
    wlm_model *m = NULL;
    if (wlm_model_load(&m, *bytes, n, err) != WLM_OK) {
        wlm_sys_free(*bytes);
        *bytes = NULL;
        return NULL;
    }
    return m;
}

TEST(gguf_tiny_model) {
    gb_llama p = { .n_embd = 32, .n_layer = 1, .n_head = 2, .n_head_kv = 2, .n_ff = 64, .tied = 1, .seed = 7 };
    static gb_file f; /* large: keep it off the (small, wasm) stack */
    gb_tiny_llama(&f, &p);
    unsigned char *bytes;
    wlm_err err = { 0 };
    wlm_model *m = load_desc(&f, &bytes, &err);
    gb_free(&f);
    if (!m) fprintf(stderr, "  tiny model: %s\n", err.msg);
    REQUIRE(m);
    const wlm_hparams *hp = wlm_model_hparams(m);
    CHECK(hp->n_vocab == GB_TINY_NV && hp->n_embd == 32 && hp->n_layer == 1 && hp->n_head == 2 && hp->head_dim == 16);
    CHECK(hp->tied_output == 1 && hp->n_ctx_train == 128 && hp->bos_id == 1);
    CHECK(wlm_meta_count(m) == 17 && wlm_tensor_count(m) == 11);

    wlm_ctx *c = NULL;
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    REQUIRE(wlm_ctx_new(&c, m, &cp, &err) == WLM_OK);
    CHECK(wlm_ctx_n_ctx(c) == 128);
    int32_t toks[5] = { 1, 6, 12, 9, 15 };
    REQUIRE(wlm_eval(c, toks, 5, &err) == WLM_OK);
    float batch[GB_TINY_NV];
    memcpy(batch, wlm_ctx_logits(c), sizeof batch);
    int finite = 1, varied = 0;
    for (uint32_t i = 0; i < GB_TINY_NV; i++) {
        finite &= isfinite(batch[i]) != 0;
        varied |= batch[i] != batch[0];
    }
    CHECK(finite && varied);
    /* token by token gives the same logits as the batch */
    wlm_ctx_reset(c);
    for (int t = 0; t < 5; t++) REQUIRE(wlm_eval(c, &toks[t], 1, &err) == WLM_OK);
    float maxd = 0;
    for (uint32_t i = 0; i < GB_TINY_NV; i++) maxd = fmaxf(maxd, fabsf(wlm_ctx_logits(c)[i] - batch[i]));
    CHECKF(maxd < 1e-4f, "batch vs single max diff %g", maxd);
    /* the context matters: another history gives other logits */
    wlm_ctx_reset(c);
    int32_t other[5] = { 1, 7, 11, 10, 15 };
    REQUIRE(wlm_eval(c, other, 5, &err) == WLM_OK);
    maxd = 0;
    for (uint32_t i = 0; i < GB_TINY_NV; i++) maxd = fmaxf(maxd, fabsf(wlm_ctx_logits(c)[i] - batch[i]));
    CHECKF(maxd > 1e-3f, "history ignored (diff %g)", maxd);
    /* out-of-range tokens are refused */
    CHECK(wlm_eval(c, (int32_t[]){ (int32_t)GB_TINY_NV }, 1, &err) == WLM_ERR_ARG);
    wlm_ctx_free(c);
    wlm_model_free(m);
    wlm_sys_free(bytes);

    /* With attn_output and ffn_down zero the blocks add nothing, so the logits
     * are output . rmsnorm(embd[last token]): check against doubles. */
    p.zero_mix = 1;
    p.tied = 0;
    p.n_head_kv = 1;
    p.seed = 99;
    gb_tiny_llama(&f, &p);
    const float *emb = (const float *)f.t[gb_t_find(&f, "token_embd.weight")].data.p;
    const float *out = (const float *)f.t[gb_t_find(&f, "output.weight")].data.p;
    float *emb_c = malloc(32 * GB_TINY_NV * 4), *out_c = malloc(32 * GB_TINY_NV * 4);
    memcpy(emb_c, emb, 32 * GB_TINY_NV * 4);
    memcpy(out_c, out, 32 * GB_TINY_NV * 4);
    m = load_desc(&f, &bytes, &err);
    gb_free(&f);
    if (!m) fprintf(stderr, "  tiny model 2: %s\n", err.msg);
    REQUIRE(m);
    CHECK(wlm_model_hparams(m)->tied_output == 0 && wlm_model_hparams(m)->n_head_kv == 1);
    REQUIRE(wlm_ctx_new(&c, m, &cp, &err) == WLM_OK);
    int32_t seq[3] = { 1, 13, 4 };
    REQUIRE(wlm_eval(c, seq, 3, &err) == WLM_OK);
    const float *x = emb_c + 4 * 32;
    double ss = 0;
    for (int i = 0; i < 32; i++) ss += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(ss / 32 + 1e-5);
    double worst = 0;
    for (uint32_t r = 0; r < GB_TINY_NV; r++) {
        double want = 0;
        for (int i = 0; i < 32; i++) want += (double)out_c[r * 32 + i] * x[i] * sc;
        double diff = fabs(want - wlm_ctx_logits(c)[r]);
        if (diff > worst) worst = diff;
    }
    CHECKF(worst < 1e-5, "logits differ from the reference by %g", worst);
    free(emb_c);
    free(out_c);
    wlm_ctx_free(c);
    wlm_model_free(m);
    wlm_sys_free(bytes);
}

/* the tiny model with a broken vocabulary or hyper-parameters */
TEST(gguf_tiny_model_bad) {
    gb_llama p = { .n_embd = 32, .n_layer = 1, .n_head = 2, .n_head_kv = 2, .n_ff = 64, .tied = 1, .seed = 3 };
    static gb_file f; /* large: keep it off the (small, wasm) stack */
    gb_tiny_llama(&f, &p);
    expect_ok(&f, "tiny");
    gb_set_u32(&f, "llama.attention.head_count", 3);
    expect_fail(&f, WLM_ERR_FORMAT, "head_count 3 does not divide embedding_length 32", "3 heads");
    gb_set_u32(&f, "llama.attention.head_count", 2);
    gb_set_u32(&f, "llama.attention.head_count_kv", 4);
    expect_fail(&f, WLM_ERR_FORMAT, "head_count_kv 4 does not divide head_count 2", "4 kv heads");
    gb_set_u32(&f, "llama.attention.head_count_kv", 2);
    gb_set_u32(&f, "llama.block_count", 0);
    expect_fail(&f, WLM_ERR_FORMAT, "block_count 0 out of range", "0 layers");
    gb_set_u32(&f, "llama.block_count", 2);
    expect_fail(&f, WLM_ERR_FORMAT, "missing tensor blk.1.attn_norm.weight", "2 layers, 1 present");
    gb_set_u32(&f, "llama.block_count", 1);
    gb_set_u32(&f, "llama.rope.dimension_count", 17);
    expect_fail(&f, WLM_ERR_FORMAT, "rope.dimension_count 17 must be even", "odd rope dims");
    gb_set_u32(&f, "llama.rope.dimension_count", 16);
    gb_set_f32(&f, "llama.rope.freq_base", -1.0f);
    expect_fail(&f, WLM_ERR_FORMAT, "rope.freq_base must be positive", "negative rope base");
    gb_kv_remove(&f, "llama.rope.freq_base");
    gb_set_f32(&f, "llama.attention.layer_norm_rms_epsilon", NAN);
    expect_fail(&f, WLM_ERR_FORMAT, "is not a finite number", "NaN eps");
    gb_set_f32(&f, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gb_set_str(&f, "tokenizer.ggml.model", "t5-unigram");
    expect_fail(&f, WLM_ERR_UNSUPPORTED, "unsupported tokenizer model 't5-unigram'", "unknown tokenizer");
    gb_kv_remove(&f, "tokenizer.ggml.model");
    expect_fail(&f, WLM_ERR_FORMAT, "missing tokenizer.ggml.model", "no tokenizer");
    gb_set_str(&f, "tokenizer.ggml.model", "llama");
    expect_ok(&f, "tiny restored");
    gb_free(&f);
}

/* ---- re-quantization --------------------------------------------------------------- */

TEST(gguf_quantize_q8_0) {
    unsigned long long size;
    unsigned char *raw = read_stories(&size);
    REQUIRE(raw);
    unsigned char *d = tst_sys_copy(raw, size);
    free(raw);
    wlm_model *m = NULL;
    wlm_err err = { 0 };
    REQUIRE(wlm_model_load(&m, d, size, &err) == WLM_OK);
    uint64_t qsize = 0;
    REQUIRE(wlm_quantize_size(m, GGML_Q8_0, &qsize, &err) == WLM_OK);
    CHECKF(qsize > 300000 && qsize < size / 2, "Q8_0 size %llu", (unsigned long long)qsize);
    unsigned char *q = wlm_sys_alloc(qsize);
    REQUIRE(q);
    uint32_t rcap = 16384;
    char *report = malloc(rcap);
    /* too small a buffer is refused */
    CHECK(wlm_quantize(m, GGML_Q8_0, q, qsize - 1, report, rcap, &err) == WLM_ERR_ARG && strstr(err.msg, "output buffer too small"));
    CHECK(wlm_quantize(m, 9, q, qsize, report, rcap, &err) == WLM_ERR_UNSUPPORTED && strstr(err.msg, "cannot quantize to type 9"));
    memset(q, 0, qsize);
    REQUIRE(wlm_quantize(m, GGML_Q8_0, q, qsize, report, rcap, &err) == WLM_OK);

    wlm_model *mq = NULL;
    wlm_err qerr = { 0 };
    CHECKF(wlm_model_load(&mq, q, qsize, &qerr) == WLM_OK, "quantized file: %s", qerr.msg);
    if (mq) {
        CHECK(wlm_meta_count(mq) == 20 && wlm_tensor_count(mq) == 48);
        int ft = find_key(mq, "general.file_type");
        CHECK(ft >= 0);
        if (ft >= 0) {
            uint64_t nb;
            const uint8_t *v = wlm_meta_value(mq, (uint32_t)ft, &nb);
            CHECK(wlm_meta_type(mq, (uint32_t)ft) == 4 && nb == 4 && rd32(v) == 7);
        }
        /* metadata values copied verbatim */
        for (uint32_t i = 0; i < 19; i++) {
            uint64_t n0, n1;
            const uint8_t *a = wlm_meta_value(m, i, &n0), *b = wlm_meta_value(mq, i, &n1);
            CHECKF(n0 == n1 && memcmp(a, b, n0) == 0 && wlm_meta_type(m, i) == wlm_meta_type(mq, i), "kv %u", i);
        }
        int n_q8 = 0;
        for (uint32_t i = 0; i < 48; i++) {
            uint32_t len;
            const char *nm = wlm_tensor_name(mq, i, &len);
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)len, nm);
            uint32_t t = wlm_tensor_type(mq, i);
            int is_norm = strstr(name, "norm") != NULL, is_down = strstr(name, "ffn_down") != NULL;
            if (is_norm || is_down) CHECKF(t == GGML_F32, "%s kept type %u", name, t);
            else {
                CHECKF(t == GGML_Q8_0, "%s has type %u", name, t);
                n_q8++;
            }
            CHECK(wlm_tensor_offset(mq, i) % 32 == 0);
            char line[256];
            if (is_down) {
                snprintf(line, sizeof line, "%s: kept F32 (row length is not a multiple of the block)\n", name);
                CHECKF(strstr(report, line) != NULL, "report lacks '%s'", line);
            } else if (is_norm) {
                snprintf(line, sizeof line, "%s: kept F32 (1-D tensor)\n", name);
                CHECKF(strstr(report, line) != NULL, "report lacks '%s'", line);
            } else {
                snprintf(line, sizeof line, "%s: F32 -> Q8_0 (", name);
                CHECKF(strstr(report, line) != NULL, "report lacks '%s'", line);
            }
        }
        CHECK(n_q8 == 2 + 5 * 6);
        CHECK(wlm_tensor_offset(mq, 47) + 256 == qsize);
        /* the quantized weights are the originals to within Q8_0 precision */
        const wlm_tensor *a = m->tok_embd, *b = mq->tok_embd;
        float row[64];
        double worst = 0;
        for (uint32_t r = 0; r < 512; r++) {
            wlm_dequantize_row(GGML_Q8_0, b->data + (uint64_t)r * 2 * 34, row, 64);
            const float *src = (const float *)(a->data + (uint64_t)r * 256);
            float amax = 0;
            for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(src[i]));
            for (int i = 0; i < 64; i++) {
                double e = fabs(row[i] - src[i]) / (amax + 1e-12);
                if (e > worst) worst = e;
            }
        }
        CHECKF(worst < 1.0 / 127 + 1e-3, "Q8_0 relative error %g", worst);
        /* and the model still predicts the same next token */
        wlm_ctx *c0 = NULL, *c1 = NULL;
        wlm_ctx_params cp;
        wlm_ctx_default_params(&cp);
        cp.n_ctx = 64;
        REQUIRE(wlm_ctx_new(&c0, m, &cp, &err) == WLM_OK);
        REQUIRE(wlm_ctx_new(&c1, mq, &cp, &err) == WLM_OK);
        int32_t toks[64];
        uint32_t nt = 0;
        REQUIRE(wlm_tokenize(m, "Once upon a time", 16, 1, toks, 64, &nt, &err) == WLM_OK);
        REQUIRE(wlm_eval(c0, toks, nt, &err) == WLM_OK && wlm_eval(c1, toks, nt, &err) == WLM_OK);
        const float *l0 = wlm_ctx_logits(c0), *l1 = wlm_ctx_logits(c1);
        uint32_t a0 = 0, a1 = 0;
        for (uint32_t i = 1; i < 512; i++) {
            if (l0[i] > l0[a0]) a0 = i;
            if (l1[i] > l1[a1]) a1 = i;
        }
        CHECKF(a0 == a1, "argmax %u vs %u", a0, a1);
        wlm_ctx_free(c0);
        wlm_ctx_free(c1);
        wlm_model_free(mq);
    }
    free(report);
    wlm_sys_free(q);
    wlm_model_free(m);
    wlm_sys_free(d);
}
