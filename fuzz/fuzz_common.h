/* Shared by the libFuzzer targets: loads the small model files that
 * tools/fuzz-seeds.mjs writes (build/fuzz/models, or $WLM_FUZZ_MODELS) once,
 * at start-up, through the public API. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/wlm.h"

static __attribute__((unused)) unsigned char *fz_read(const char *path, uint64_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(b); return NULL; }
    fclose(f);
    *size = (uint64_t)n;
    return b;
}

/* Loads <models dir>/<name>; exits with a message when it cannot (the
 * fuzzer would otherwise test nothing). The bytes stay alive for good. */
static __attribute__((unused)) wlm_model *fz_model(const char *name) {
    const char *dir = getenv("WLM_FUZZ_MODELS");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "build/fuzz/models", name);
    uint64_t size = 0;
    unsigned char *d = fz_read(path, &size);
    if (!d) { fprintf(stderr, "fuzz: cannot read %s (run: node tools/fuzz-seeds.mjs)\n", path); exit(2); }
    wlm_model *m = NULL; wlm_err err = { 0 };
    if (wlm_model_load(&m, d, size, &err) != WLM_OK) { fprintf(stderr, "fuzz: %s: %s\n", path, err.msg); exit(2); }
    return m;
}

/* a finding the sanitizers would not see: report and abort (libFuzzer saves the input) */
#define FZ_ASSERT(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz check failed: %s: ", #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } } while (0)

/* 1 when s[0..n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF) */
static __attribute__((unused)) int fz_utf8_valid(const unsigned char *s, uint32_t n) {
    for (uint32_t i = 0; i < n;) {
        unsigned c = s[i];
        uint32_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return 0;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 31) : len == 3 ? (c & 15) : (c & 7);
        for (uint32_t k = 1; k < len; k++) { if ((s[i + k] & 0xC0) != 0x80) return 0; cp = cp << 6 | (s[i + k] & 63); }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
        if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
        i += len;
    }
    return 1;
}
#endif
