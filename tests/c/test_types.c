/* The type table (src/types.c) and the kernel-choice table (src/matmul.c):
 * every computable type carries a full row, the quantize targets are the
 * list front ends show, and the forms wlm_mm_needs names are the ones the
 * chosen kernel reads. */
#include "tst.h"
#include "../../src/internal.h"
#include "../../src/matmul.h"

TEST(types_rows_complete) {
    int computable = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        const wlm_type_info *ti = wlm_type(t);
        if (!wlm_type_supported(ti)) continue;
        computable++;
        CHECKF(ti->dequantize != 0, "%s has no dequantizer", ti->name);
        CHECKF(ti->act == GGML_F32 || ti->act == GGML_Q8_0 || ti->act == GGML_Q8_K, "%s: activation form %u", ti->name, ti->act);
        CHECKF(ti->block % wlm_type(ti->act)->block == 0, "%s: block %u is not whole activation blocks", ti->name, ti->block);
        CHECKF(wlm_act_type(t) == ti->act, "%s: wlm_act_type disagrees with its row", ti->name);
        for (uint32_t k = 0; k < wlm_kernel_set_count; k++)
            CHECKF(wlm_kernel_dot(wlm_kernel_sets[k], t) != 0, "%s has no dot in set %s", ti->name, wlm_kernel_sets[k]->name);
        if (ti->fallback) CHECKF(wlm_type(ti->fallback)->quantize && wlm_type(ti->fallback)->block == 32, "%s: fallback", ti->name);
    }
    CHECK(computable == 13);
    CHECK(!wlm_type_supported(wlm_type(GGML_Q8_K)) && wlm_type(GGML_Q8_K)->dequantize);
    CHECK(wlm_type(GGML_TYPE_COUNT) == 0 && wlm_kernel_dot(&wlm_kernels_scalar, 9) == 0);
}

TEST(types_quantize_targets) {
    static const char *want[] = { "F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                                  "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M" };
    uint32_t i = 0, id;
    for (; (id = wlm_quantize_target(i)) != 0xffffffffu; i++) {
        REQUIRE(i < sizeof want / sizeof want[0]);
        const char *name = wlm_quantize_target_name(id);
        CHECKF(name && !strcmp(name, want[i]), "target %u is %s, expected %s", i, name ? name : "NULL", want[i]);
        if (id < GGML_TYPE_COUNT) CHECKF(wlm_type(id)->quantize != 0 && wlm_type(id)->target == i + 1, "%s", want[i]);
    }
    CHECK(i == sizeof want / sizeof want[0]);
    CHECK(wlm_quantize_target_name(GGML_BF16) == 0 && wlm_quantize_target_name(9) == 0);
    float x[256], y[256];
    uint8_t q[300];
    for (int j = 0; j < 256; j++) x[j] = (float)((j * 37) % 19) - 9.0f;
    CHECK(wlm_quantize_row(GGML_Q8_0, x, q, 256) == 1 && wlm_quantize_row(GGML_BF16, x, q, 256) == 0);
    wlm_dequantize_row(GGML_Q8_0, q, y, 256);
    for (int j = 0; j < 256; j++) CHECKF(fabsf(y[j] - x[j]) < 0.04f, "Q8_0 round trip at %d: %g -> %g", j, x[j], y[j]);
}

/* a tensor descriptor of `type` with rows of n elements, for the choice only */
static wlm_tensor shape_of(uint32_t type, uint32_t q4g) {
    wlm_tensor w;
    memset(&w, 0, sizeof w);
    w.type = type;
    w.q4g = q4g;
    w.n_dims = 2;
    w.ne[0] = 256;
    w.ne[1] = 4;
    return w;
}

TEST(types_kernel_choice_forms) {
    for (uint32_t k = 0; k < wlm_kernel_set_count; k++) {
        wlm_ctx c;
        memset(&c, 0, sizeof c);
        c.k = wlm_kernel_sets[k];
        for (uint32_t n_tok = 1; n_tok <= 9; n_tok++) {
            wlm_tensor f32 = shape_of(GGML_F32, 0), q8 = shape_of(GGML_Q8_0, 0), q4 = shape_of(GGML_Q4_0, 0);
            wlm_tensor q4g = shape_of(GGML_Q4_0, 1), q4k = shape_of(GGML_Q4_K, 0), q5 = shape_of(GGML_Q5_0, 0);
            CHECK(wlm_mm_needs(&c, &f32, n_tok) == 0);
            CHECK(wlm_mm_needs(&c, &q4k, n_tok) == WLM_NEED_QK);
            CHECK(wlm_mm_needs(&c, &q5, n_tok) == WLM_NEED_Q8);
            /* every Q8_0 / Q4_0 product reads the Q8_0 blocks and exactly one rearranged form */
            uint32_t forms[3] = { wlm_mm_needs(&c, &q8, n_tok), wlm_mm_needs(&c, &q4, n_tok), wlm_mm_needs(&c, &q4g, n_tok) };
            for (int i = 0; i < 3; i++) {
                uint32_t extra = forms[i] & ~(uint32_t)WLM_NEED_Q8;
                CHECKF((forms[i] & WLM_NEED_Q8) && extra && !(extra & (extra - 1)), "set %s, %u tokens, weights %d: forms %x",
                       c.k->name, n_tok, i, forms[i]);
            }
            CHECK(forms[0] == (n_tok <= 3 ? WLM_NEED_Q8 | WLM_NEED_I16 : WLM_NEED_Q8 | WLM_NEED_X4));
            if (c.k->gemm_q4gb) CHECK(forms[2] == (n_tok == 1 ? WLM_NEED_Q8 | WLM_NEED_G : WLM_NEED_Q8 | WLM_NEED_B));
        }
    }
}
