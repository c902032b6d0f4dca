#include "tst.h"
#include "../../src/base.h"

#define TST_MAX 512
static struct {
    const char *name;
    tst_fn fn;
} g_tests[TST_MAX];
static int g_n;
int tst_failed_checks;
const char *tst_data_dir = "../shared";
const char *tst_build_dir = "build";

void tst_register(const char *name, tst_fn fn) {
    if (g_n < TST_MAX) {
        g_tests[g_n].name = name;
        g_tests[g_n].fn = fn;
        g_n++;
    }
}

unsigned char *tst_read_file(const char *path, unsigned long long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n ? (size_t)n : 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    *size = (unsigned long long)n;
    return buf;
}

char *tst_path(const char *rel) {
    static char bufs[8][1024];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, 1024, "%s/%s", tst_data_dir, rel);
    return b;
}

unsigned char *tst_sys_copy(const unsigned char *data, unsigned long long size) {
    unsigned char *p = wlm_sys_alloc(size);
    if (p && size) memcpy(p, data, (size_t)size);
    return p;
}

unsigned char *tst_read_sys(const char *rel, unsigned long long *size) {
    unsigned char *file = tst_read_file(tst_path(rel), size);
    if (!file) {
        fprintf(stderr, "  cannot read %s\n", tst_path(rel));
        return NULL;
    }
    unsigned char *p = tst_sys_copy(file, *size);
    free(file);
    return p;
}

wlm_ctx *tst_ctx_new(wlm_model *m, const wlm_ctx_params *p) {
    wlm_ctx *c = NULL;
    wlm_err err = { 0 };
    if (wlm_ctx_new(&c, m, p, &err) != WLM_OK) {
        fprintf(stderr, "  ctx_new: %s\n", err.msg);
        return NULL;
    }
    return c;
}

static unsigned g_rng = 12345;
unsigned tst_rand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}
float tst_randf(void) { return (float)(tst_rand() & 0xffffff) / 8388608.0f - 1.0f; }

int main(int argc, char **argv) {
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) tst_data_dir = argv[++i];
        else if (!strcmp(argv[i], "--build") && i + 1 < argc) tst_build_dir = argv[++i];
        else filter = argv[i];
    }
    const char *env = getenv("WLM_TEST_DATA");
    if (env) tst_data_dir = env;
    const char *benv = getenv("WLM_TEST_BUILD");
    if (benv) tst_build_dir = benv;
    int passed = 0, failed = 0;
    for (int i = 0; i < g_n; i++) {
        if (filter && !strstr(g_tests[i].name, filter)) continue;
        int before = tst_failed_checks;
        g_tests[i].fn();
        if (tst_failed_checks == before) {
            passed++;
            printf("ok   %s\n", g_tests[i].name);
        } else {
            failed++;
            printf("FAIL %s\n", g_tests[i].name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
