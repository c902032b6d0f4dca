/* Split GGUFs (wlm_model_load_parts): a tiny llama cut into three parts
 * loads and computes the very logits of the single file; every way the parts
 * can fail to belong together is refused with WLM_ERR_FORMAT naming the part
 * (missing, given twice, out of order, of another split, tensors that do not
 * add up, a tensor in two parts, a broken part), never a crash: the parts are
 * exact-size copies, so ASan sees any read past one. */
#include "tst.h"
#include "gguf_build.h"
#include "../../src/internal.h"

#define NPARTS 3

/* the tiny model, and its tensors dealt into NPARTS parts (first: the
 * metadata; the others: only the split keys) */
typedef struct split_set {
    gb_file whole, part[NPARTS];
} split_set;

static void set_split_keys(gb_file *f, uint16_t no, uint16_t count, int32_t tensors) {
    gb_buf *b = gb_kv_set(f, "split.no", GB_U16);
    uint8_t x[2] = { (uint8_t)no, (uint8_t)(no >> 8) };
    gb_put(b, x, 2);
    b = gb_kv_set(f, "split.count", GB_U16);
    uint8_t y[2] = { (uint8_t)count, (uint8_t)(count >> 8) };
    gb_put(b, y, 2);
    b = gb_kv_set(f, "split.tensors.count", GB_I32);
    gb_u32(b, (uint32_t)tensors);
}

static void copy_tensor(gb_file *dst, const gb_tensor *t) {
    gb_tensor_add(dst, t->name, t->type, t->n_dims, t->ne, t->data.p, t->data.len);
}

static void make_split(split_set *s) {
    gb_llama p = { .n_embd = 32, .n_layer = 2, .n_head = 2, .n_head_kv = 1, .n_ff = 64, .tied = 0, .seed = 11 };
    gb_tiny_llama(&s->whole, &p);
    for (int i = 0; i < NPARTS; i++) gb_init(&s->part[i]);
    /* the first part: every metadata pair of the file */
    for (int k = 0; k < s->whole.n_kv; k++) {
        gb_buf *b = gb_kv_set(&s->part[0], s->whole.kv[k].key, s->whole.kv[k].type);
        gb_put(b, s->whole.kv[k].val.p, s->whole.kv[k].val.len);
    }
    for (int i = 0; i < NPARTS; i++) set_split_keys(&s->part[i], (uint16_t)i, NPARTS, s->whole.n_t);
    int per = (s->whole.n_t + NPARTS - 1) / NPARTS;
    for (int t = 0; t < s->whole.n_t; t++) copy_tensor(&s->part[t / per], &s->whole.t[t]);
}

static void free_split(split_set *s) {
    gb_free(&s->whole);
    for (int i = 0; i < NPARTS; i++) gb_free(&s->part[i]);
}

/* Loads parts[order[i]] for i < n, each an exact-size wlm_sys_alloc copy
 * (kept in bytes[] for the model's life). */
static wlm_status load_parts(gb_file *const *files, uint32_t n, wlm_model **m, unsigned char **bytes, wlm_err *err) {
    const uint8_t *data[8];
    uint64_t sizes[8];
    for (uint32_t i = 0; i < n; i++) {
        size_t sz;
        unsigned char *b = gb_serialize(files[i], &sz);
        bytes[i] = tst_sys_copy(b, sz);
        free(b);
        data[i] = bytes[i];
        sizes[i] = sz;
    }
    *m = (wlm_model *)0x1;
    memset(err, 0, sizeof *err);
    wlm_status st = wlm_model_load_parts(m, data, sizes, n, err);
    if (st != WLM_OK && *m) {
        fprintf(stderr, "  failed load left *out non-NULL\n");
        tst_failed_checks++;
    }
    return st;
}

static void free_bytes(unsigned char **bytes, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) wlm_sys_free(bytes[i]);
}

static void expect_parts_fail(gb_file *const *files, uint32_t n, wlm_status code, const char *sub, const char *what) {
    wlm_model *m;
    unsigned char *bytes[8];
    wlm_err err;
    wlm_status s = load_parts(files, n, &m, bytes, &err);
    CHECKF(s == code, "%s: status %d, expected %d (%s)", what, (int)s, (int)code, err.msg);
    CHECKF(strstr(err.msg, sub) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, sub);
    if (s == WLM_OK) wlm_model_free(m);
    free_bytes(bytes, n);
}

static int logits_of(wlm_model *m, float *out) {
    wlm_ctx *c = NULL;
    wlm_err err;
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    if (wlm_ctx_new(&c, m, &cp, &err) != WLM_OK) return 0;
    int32_t toks[4] = { 1, 6, 12, 9 };
    int ok = wlm_eval(c, toks, 4, &err) == WLM_OK;
    if (ok) memcpy(out, wlm_ctx_logits(c), GB_TINY_NV * sizeof(float));
    wlm_ctx_free(c);
    return ok;
}

TEST(split_loads_like_the_whole_file) {
    static split_set s;
    make_split(&s);
    /* the single file */
    size_t wsz;
    unsigned char *wb = gb_serialize(&s.whole, &wsz);
    unsigned char *whole = tst_sys_copy(wb, wsz);
    free(wb);
    wlm_model *mw = NULL;
    wlm_err err;
    REQUIRE(wlm_model_load(&mw, whole, wsz, &err) == WLM_OK);
    float want[GB_TINY_NV], got[GB_TINY_NV];
    REQUIRE(logits_of(mw, want));

    gb_file *files[NPARTS] = { &s.part[0], &s.part[1], &s.part[2] };
    wlm_model *m;
    unsigned char *bytes[NPARTS];
    wlm_status st = load_parts(files, NPARTS, &m, bytes, &err);
    CHECKF(st == WLM_OK, "split load: %s", err.msg);
    if (st == WLM_OK) {
        CHECK(wlm_model_n_parts(m) == NPARTS && wlm_model_n_parts(mw) == 1);
        CHECK(wlm_tensor_count(m) == wlm_tensor_count(mw));
        CHECK(wlm_meta_count(m) == wlm_meta_count(mw) + 3);
        /* tensors in their parts, offsets within the part */
        uint32_t per = (wlm_tensor_count(m) + NPARTS - 1) / NPARTS, maxpart = 0;
        for (uint32_t i = 0; i < wlm_tensor_count(m); i++) {
            CHECK(wlm_tensor_part(m, i) == i / per);
            if (wlm_tensor_part(m, i) > maxpart) maxpart = wlm_tensor_part(m, i);
        }
        CHECK(maxpart == NPARTS - 1);
        REQUIRE(logits_of(m, got));
        CHECK(memcmp(want, got, sizeof want) == 0);
        /* quantizing a split model writes one file without the split keys */
        uint64_t qsz = 0;
        REQUIRE(wlm_quantize_size(m, 8, &qsz, &err) == WLM_OK);
        unsigned char *q = wlm_sys_alloc(qsz);
        REQUIRE(wlm_quantize(m, 8, q, qsz, NULL, 0, &err) == WLM_OK);
        wlm_model *mq = NULL;
        st = wlm_model_load(&mq, q, qsz, &err);
        CHECKF(st == WLM_OK, "quantized split model: %s", err.msg);
        if (st == WLM_OK) {
            CHECK(wlm_meta_count(mq) == wlm_meta_count(mw) || wlm_meta_count(mq) == wlm_meta_count(mw) + 1);
            wlm_model_free(mq);
        }
        wlm_sys_free(q);
        wlm_model_free(m);
    }
    free_bytes(bytes, NPARTS);
    /* the inplace variant (the wasm front end's) agrees */
    uint8_t *data[NPARTS];
    uint64_t sizes[NPARTS];
    for (int i = 0; i < NPARTS; i++) {
        size_t n;
        unsigned char *b = gb_serialize(&s.part[i], &n);
        data[i] = tst_sys_copy(b, n);
        sizes[i] = n;
        free(b);
    }
    st = wlm_model_load_parts_inplace(&m, data, sizes, NPARTS, &err);
    CHECKF(st == WLM_OK, "inplace: %s", err.msg);
    if (st == WLM_OK) {
        CHECK(logits_of(m, got) && memcmp(want, got, sizeof want) == 0);
        wlm_model_free(m);
    }
    for (int i = 0; i < NPARTS; i++) wlm_sys_free(data[i]);
    wlm_model_free(mw);
    wlm_sys_free(whole);
    free_split(&s);
}

TEST(split_parts_that_do_not_belong_together) {
    static split_set s;
    make_split(&s);
    gb_file *p0 = &s.part[0], *p1 = &s.part[1], *p2 = &s.part[2];

    expect_parts_fail((gb_file *[]){ p0 }, 1, WLM_ERR_FORMAT, "part 1 of a split GGUF of 3 parts", "the first part alone");
    expect_parts_fail((gb_file *[]){ p0, p1 }, 2, WLM_ERR_FORMAT, "part 3 is missing", "the last part missing");
    expect_parts_fail((gb_file *[]){ p0, p2 }, 2, WLM_ERR_FORMAT, "place 2 holds part 3 of 3", "the middle part missing");
    expect_parts_fail((gb_file *[]){ p0, p2, p1 }, 3, WLM_ERR_FORMAT, "out of order", "parts out of order");
    expect_parts_fail((gb_file *[]){ p1, p0, p2 }, 3, WLM_ERR_FORMAT, "out of order: place 1 holds part 2", "the second part first");
    expect_parts_fail((gb_file *[]){ p0, p1, p1 }, 3, WLM_ERR_FORMAT, "part 2 of 3 is given twice (in places 2 and 3)", "a part twice");
    expect_parts_fail((gb_file *[]){ p0, p1, p2, p2 }, 4, WLM_ERR_FORMAT, "given twice", "one part too many");
    expect_parts_fail((gb_file *[]){ &s.whole, p1, p2 }, 3, WLM_ERR_FORMAT, "the first has no split.count", "a plain file as the first part");
    expect_parts_fail(NULL, 0, WLM_ERR_ARG, "no GGUF parts", "no parts");

    /* a part of another split: another count */
    static gb_file other;
    gb_init(&other);
    set_split_keys(&other, 2, 4, s.whole.n_t);
    copy_tensor(&other, &p2->t[0]);
    expect_parts_fail((gb_file *[]){ p0, p1, &other }, 3, WLM_ERR_FORMAT, "part 3 belongs to another split GGUF: split.count 4", "another split's part");
    /* another total */
    set_split_keys(&other, 2, 3, s.whole.n_t + 5);
    expect_parts_fail((gb_file *[]){ p0, p1, &other }, 3, WLM_ERR_FORMAT, "part 3 belongs to another split GGUF: split.tensors.count", "another total");
    gb_free(&other);
    /* split.no past split.count */
    set_split_keys(p2, 3, 3, s.whole.n_t);
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_FORMAT, "part 3 of 3: split.no 3 is out of range", "split.no out of range");
    /* the tensors do not add up */
    for (int i = 0; i < NPARTS; i++) set_split_keys(&s.part[i], (uint16_t)i, NPARTS, s.whole.n_t + 1);
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_FORMAT, "the parts hold", "tensor count");
    for (int i = 0; i < NPARTS; i++) set_split_keys(&s.part[i], (uint16_t)i, NPARTS, s.whole.n_t);
    /* a split.count of 0, a split key of the wrong type */
    set_split_keys(p1, 1, 0, s.whole.n_t);
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_FORMAT, "part 2 of 3: split.count is 0", "split.count 0");
    set_split_keys(p1, 1, NPARTS, s.whole.n_t);
    gb_set_str(p1, "split.no", "1");
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_FORMAT, "part 2 of 3: metadata 'split.no' has type string", "split.no a string");
    set_split_keys(p1, 1, NPARTS, s.whole.n_t);
    /* one tensor in two parts (the counts adjusted so only that is wrong) */
    copy_tensor(p2, &p1->t[0]);
    for (int i = 0; i < NPARTS; i++) set_split_keys(&s.part[i], (uint16_t)i, NPARTS, s.whole.n_t + 1);
    char want[256];
    snprintf(want, sizeof want, "tensor %s is in split parts 2 and 3", p1->t[0].name);
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_FORMAT, want, "a tensor in two parts");
    gb_tensor_remove(p2, p1->t[0].name); /* the copy (names are unique within p2) */
    for (int i = 0; i < NPARTS; i++) set_split_keys(&s.part[i], (uint16_t)i, NPARTS, s.whole.n_t);
    /* a broken part: its own error, named */
    p2->t[p2->n_t - 1].offset = 1u << 20;
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_TRUNCATED, "part 3 of 3: truncated: tensor", "a tensor past its part's end");
    p2->t[p2->n_t - 1].offset = GB_AUTO;
    p2->magic = 0x4034b50;
    expect_parts_fail((gb_file *[]){ p0, p1, p2 }, 3, WLM_ERR_FORMAT, "part 3 of 3: not a GGUF file", "a part that is not GGUF");
    p2->magic = 0x46554747u;
    /* and after all that, the parts still load */
    wlm_model *m;
    unsigned char *bytes[NPARTS];
    wlm_err err;
    wlm_status st = load_parts((gb_file *[]){ p0, p1, p2 }, 3, &m, bytes, &err);
    CHECKF(st == WLM_OK, "restored parts: %s", err.msg);
    if (st == WLM_OK) wlm_model_free(m);
    free_bytes(bytes, NPARTS);
    free_split(&s);
}
