/* The hostile GGUF corpus (tools/make-hostile.mjs, written to
 * <build>/hostile by the Makefile before the C tests run): every file must
 * get exactly its expected status and a message naming its problem; the
 * files that load must tokenize, evaluate and sample without trouble. Runs
 * natively, in wasm (WASI) and under ASan/UBSan, so "no crash, no
 * out-of-bounds read" is checked by the sanitizers on every case. */
#include "tst.h"
#include "../../src/internal.h"

static int status_of(const char *name) {
    static const char *const names[] = { "OK", "ARG", "FORMAT", "TRUNCATED", "UNSUPPORTED", "NOMEM" };
    for (int i = 0; i < 6; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

/* splits a line in place at tabs; returns the field count */
static int split_tabs(char *line, char **f, int max) {
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == '\t') {
            *p = 0;
            f[n++] = p + 1;
        }
    return n;
}

/* a loaded model must work: tokenize, two evals, a sample */
static void exercise(wlm_model *m, const char *file) {
    int32_t ids[64];
    uint32_t n = 0;
    wlm_err err = { 0 };
    wlm_status s = wlm_tokenize(m, "Hello world", 11, WLM_TOK_ADD_BOS, ids, 64, &n, &err);
    CHECKF(s == WLM_OK && n > 0 && n <= 64, "%s: tokenize: %s", file, err.msg);
    if (s != WLM_OK || n == 0) return;
    wlm_ctx_params p;
    wlm_ctx_default_params(&p);
    p.n_ctx = 16;
    wlm_ctx *c = NULL;
    s = wlm_ctx_new(&c, m, &p, &err);
    CHECKF(s == WLM_OK, "%s: ctx: %s", file, err.msg);
    if (s != WLM_OK) return;
    s = wlm_eval(c, ids, n > 8 ? 8 : n, &err);
    CHECKF(s == WLM_OK, "%s: eval: %s", file, err.msg);
    wlm_sampler_params sp;
    wlm_sampler_default_params(&sp);
    wlm_rng r;
    wlm_rng_seed(&r, 1);
    int32_t tok = -1;
    if (s == WLM_OK) {
        s = wlm_sample(c, wlm_ctx_logits(c), &sp, ids, n, &r, &tok, NULL, &err);
        CHECKF(s == WLM_OK && tok >= 0 && (uint32_t)tok < wlm_model_hparams(m)->n_vocab, "%s: sample %d: %s", file, tok, err.msg);
    }
    wlm_ctx_free(c);
}

TEST(hostile_gguf_corpus) {
    char path[1024];
    snprintf(path, sizeof path, "%s/hostile/manifest.tsv", tst_build_dir);
    unsigned long long size = 0;
    unsigned char *man = tst_read_file(path, &size);
    CHECKF(man != NULL, "cannot read %s (make generates it: node tools/make-hostile.mjs %s/hostile)", path, tst_build_dir);
    if (!man) return;
    char *text = malloc(size + 1);
    memcpy(text, man, size);
    text[size] = 0;
    free(man);
    int n_cases = 0, n_ok = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *f[4];
        if (split_tabs(line, f, 4) < 3) continue;
        const char *file = f[0], *msg = f[2];
        int want = status_of(f[1]);
        CHECKF(want >= 0, "%s: unknown status %s in the manifest", file, f[1]);
        snprintf(path, sizeof path, "%s/hostile/%s", tst_build_dir, file);
        unsigned long long fsize = 0;
        unsigned char *raw = tst_read_file(path, &fsize);
        CHECKF(raw != NULL, "cannot read %s", path);
        if (!raw) continue;
        /* exact-size copy: ASan catches any read past the end of the file */
        unsigned char *d = fsize ? raw : NULL;
        wlm_model *m = NULL;
        wlm_err err = { 0 };
        wlm_status s = wlm_model_load(&m, d, fsize, &err);
        n_cases++;
        CHECKF((int)s == want, "%s: status %d, expected %s (%s)", file, (int)s, f[1], err.msg);
        if (want != WLM_OK) {
            CHECKF(strstr(err.msg, msg) != NULL, "%s: message '%s' lacks '%s'", file, err.msg, msg);
            CHECKF(m == NULL, "%s: failed load left a model", file);
        }
        if (m) {
            n_ok++;
            exercise(m, file);
            wlm_model_free(m);
        }
        if (s == WLM_OK) { /* again with the load-time repack (Q4_0 matrices rewritten in place) */
            wlm_model *mi = NULL;
            CHECKF(wlm_model_load_inplace(&mi, d, fsize, &err) == WLM_OK, "%s: in-place load failed: %s", file, err.msg);
            if (mi) {
                wlm_model_repack_q4g(mi);
                exercise(mi, file);
                wlm_model_free(mi);
            }
        }
        free(raw);
    }
    free(text);
    CHECKF(n_cases >= 50, "only %d cases in the manifest", n_cases);
    CHECKF(n_ok >= 2, "only %d cases loaded (the valid ones must)", n_ok);
}
