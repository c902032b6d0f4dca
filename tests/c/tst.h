/* Minimal C test framework: TEST(name) { ... } registers itself; CHECK
 * records a failure and continues; REQUIRE returns from the test.
 * The runner (test_main.c) prints "N passed, N failed" at the end.
 * Tests run natively and as a wasm32-wasi program under Node (node:wasi),
 * so SIMD kernels are checked against the scalar reference in wasm. */
#ifndef TST_H
#define TST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef void (*tst_fn)(void);
void tst_register(const char *name, tst_fn fn);
extern int tst_failed_checks;
extern const char *tst_data_dir; /* ../shared (models, reference, vocab) */
extern const char *tst_build_dir;

#define TEST(name)                                                                           \
    static void name(void);                                                                  \
    __attribute__((constructor)) static void name##_reg(void) { tst_register(#name, name); } \
    static void name(void)

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            tst_failed_checks++;                                                      \
            fprintf(stderr, "  CHECK failed %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)
#define CHECKF(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            tst_failed_checks++;                                                      \
            fprintf(stderr, "  CHECK failed %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)
#define REQUIRE(cond)                                                                   \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            tst_failed_checks++;                                                        \
            fprintf(stderr, "  REQUIRE failed %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            return;                                                                     \
        }                                                                               \
    } while (0)

/* helpers (test_main.c) */
unsigned char *tst_read_file(const char *path, unsigned long long *size); /* malloc'd, NULL if missing */
char *tst_path(const char *rel);                                          /* tst_data_dir + "/" + rel, static buffer rotation */
/* Copies `size` bytes into memory from wlm_sys_alloc (as the JS glue does). */
unsigned char *tst_sys_copy(const unsigned char *data, unsigned long long size);
/* The file tst_data_dir/rel read into memory from wlm_sys_alloc; NULL (the
 * reason printed) when it cannot be read. */
unsigned char *tst_read_sys(const char *rel, unsigned long long *size);
/* wlm_ctx_new, or NULL with its message printed */
struct wlm_model;
struct wlm_ctx;
struct wlm_ctx_params;
struct wlm_ctx *tst_ctx_new(struct wlm_model *m, const struct wlm_ctx_params *p);
/* deterministic test RNG */
unsigned tst_rand(void);
float tst_randf(void); /* [-1, 1) */

#endif
