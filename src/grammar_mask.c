/* The grammar at run time (docs/grammar.md): the vocabulary as a byte
 * trie, the recognizer, and the masks of allowed tokens.
 *
 * Recognizer. A parse stack is a chain of instructions: the top one is a
 * TERM (the next code point must be in its set), each one below is the
 * point a rule returns to. Stacks are hash-consed nodes (instruction,
 * parent), so a stack is one integer. A configuration is the sorted set of
 * stacks alive after some bytes, the bytes of an incomplete UTF-8 code
 * point, and whether a parse has ended; configurations are hash-consed too,
 * and byte transitions between them are cached, so a JSON string's "one
 * more character" costs a table lookup. Calls that are the last thing of
 * their rule replace the caller's frame (no stack growth for right
 * recursion); the closure after each code point follows SPLITs, CALLs and
 * returns, with a visited set, so nullable loops end.
 *
 * Masks. For a configuration C, token t is allowed when its bytes, run
 * from C, leave a configuration that is alive. For each stack S of C with
 * top TERM s, the bytes either stay above S's parent frame (then only s
 * matters: context-independent) or leave it after k >= 1 bytes (then the
 * rest of t must be read from the configuration of S's parent). So per
 * TERM s, walking the trie once from the configuration {[s]} gives
 *   acc(s): the tokens accepted without leaving s's frame, and
 *   pop(s): the trie nodes where the frame can end with bytes below them;
 * and mask(C) = OR over S of acc(top S), plus, per node of pop(top S), the
 * subtree below it walked from the closure of S's parent. Masks are cached
 * per configuration. A configuration in the middle of a code point is
 * walked over the whole trie directly (only continuation bytes pass). */
#include "grammar.h"
#include "model.h"

#define INF 0xffffffffu

/* ---- UTF-8 ------------------------------------------------------------------------ */

static uint32_t lead_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}
/* byte b as the k-th (1-based) byte of a sequence led by `lead` */
static int cont_ok(uint8_t lead, uint32_t k, uint8_t b) {
    if ((b & 0xC0) != 0x80) return 0;
    if (k != 1) return 1;
    if (lead == 0xE0) return b >= 0xA0;
    if (lead == 0xED) return b <= 0x9F;
    if (lead == 0xF0) return b >= 0x90;
    if (lead == 0xF4) return b <= 0x8F;
    return 1;
}
static uint32_t decode(const uint8_t *p, uint32_t n) {
    uint32_t cp = n == 2 ? p[0] & 0x1F : n == 3 ? p[0] & 0x0F
                                                : p[0] & 0x07;
    for (uint32_t i = 1; i < n; i++) cp = (cp << 6) | (p[i] & 0x3F);
    return cp;
}
/* the code points a sequence starting with p[0..k) can still become */
static void pend_range(const uint8_t *p, uint32_t k, uint32_t *lo, uint32_t *hi) {
    uint32_t n = lead_len(p[0]);
    uint8_t a[4] = { 0 }, b[4] = { 0 };
    for (uint32_t i = 0; i < n; i++) {
        if (i < k) {
            a[i] = b[i] = p[i];
            continue;
        }
        a[i] = 0x80;
        b[i] = 0xBF;
        if (i == 1) {
            if (p[0] == 0xE0) a[i] = 0xA0;
            if (p[0] == 0xED) b[i] = 0x9F;
            if (p[0] == 0xF0) a[i] = 0x90;
            if (p[0] == 0xF4) b[i] = 0x8F;
        }
    }
    *lo = decode(a, n);
    *hi = decode(b, n);
}

/* ---- the vocabulary trie ---------------------------------------------------------- */

typedef struct gv_full {
    wlm_gvocab pub;
    const wlm_vocab *voc;
    uint32_t *elig;
    uint32_t max_bytes;
} gv_full;

static int token_usable(const wlm_vocab *v, int32_t t) {
    uint8_t ty = v->type[t];
    return !wlm_vocab_is_eog(v, t) && ty != WLM_TOK_CONTROL && ty != WLM_TOK_UNKNOWN && ty != WLM_TOK_UNUSED;
}

static int bytes_less(const uint8_t *blob, const uint32_t *off, int32_t a, int32_t b) {
    uint32_t la = off[a + 1] - off[a], lb = off[b + 1] - off[b], n = WLM_MIN(la, lb);
    const uint8_t *x = blob + off[a], *y = blob + off[b];
    for (uint32_t i = 0; i < n; i++)
        if (x[i] != y[i]) return x[i] < y[i];
    return la < lb || (la == lb && a < b);
}

/* bottom-up merge sort of token ids by their bytes (ties: smaller id first) */
static void sort_tokens(int32_t *ids, int32_t *tmp, uint32_t n, const uint8_t *blob, const uint32_t *off) {
    int32_t *src = ids, *dst = tmp;
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = WLM_MIN(lo + w, n), hi = WLM_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = bytes_less(blob, off, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != ids)
        for (uint32_t i = 0; i < n; i++) ids[i] = src[i];
}

wlm_status wlm_gvocab_build(wlm_gvocab **out, const wlm_vocab *v, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out || !v) return wlm_fail(err, WLM_ERR_ARG, "wlm_gvocab_build: NULL argument");
    *out = 0;
    uint32_t n = v->n, total = 0, maxb = 1;
    uint32_t *off = wlm_sys_alloc(((uint64_t)n + 1) * 4);
    int32_t *ids = wlm_sys_alloc((uint64_t)n * 4 + 4), *tmp = wlm_sys_alloc((uint64_t)n * 4 + 4);
    uint8_t *blob = 0, *mem = 0;
    wlm_status st = WLM_OK;
    if (!off || !ids || !tmp) {
        st = wlm_fail_nomem(err, "the vocabulary trie", (uint64_t)n * 12);
        goto done;
    }
    for (uint32_t t = 0; t < n; t++) {
        uint32_t k = token_usable(v, (int32_t)t) ? wlm_vocab_token_bytes(v, (int32_t)t, 0, 0) : 0;
        if (k > 65535) k = 0; /* a token longer than the trie's depth field: never matched */
        off[t] = total;
        total += k;
        if (k > maxb) maxb = k;
    }
    off[n] = total;
    blob = wlm_sys_alloc((uint64_t)total + 1);
    if (!blob) {
        st = wlm_fail_nomem(err, "the vocabulary trie", total);
        goto done;
    }
    uint32_t m = 0;
    for (uint32_t t = 0; t < n; t++) {
        uint32_t k = off[t + 1] - off[t];
        if (!k) continue;
        wlm_vocab_token_bytes(v, (int32_t)t, (char *)blob + off[t], k);
        ids[m++] = (int32_t)t;
    }
    sort_tokens(ids, tmp, m, blob, off);
    /* nodes: each token adds the bytes past its common prefix with the previous one */
    uint64_t n_nodes = 1;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t a = (uint32_t)ids[i], la = off[a + 1] - off[a], lcp = 0;
        if (i) {
            uint32_t b = (uint32_t)ids[i - 1], lb = off[b + 1] - off[b];
            while (lcp < la && lcp < lb && blob[off[a] + lcp] == blob[off[b] + lcp]) lcp++;
        }
        n_nodes += la - lcp;
    }
    uint32_t nw = (n + 31) / 32;
    uint64_t sz_full = WLM_ALIGN_UP(sizeof(gv_full), 64), sz_byte = WLM_ALIGN_UP(n_nodes, 64), sz_depth = WLM_ALIGN_UP(n_nodes * 2, 64);
    uint64_t sz_end = WLM_ALIGN_UP(n_nodes * 4, 64), sz_at = WLM_ALIGN_UP((n_nodes + 1) * 4, 64), sz_tok = WLM_ALIGN_UP((uint64_t)m * 4 + 4, 64);
    uint64_t sz_elig = WLM_ALIGN_UP((uint64_t)nw * 4 + 4, 64);
    uint64_t bytes = sz_full + sz_byte + sz_depth + sz_end + sz_at + sz_tok + sz_elig;
    mem = wlm_sys_alloc(bytes);
    if (!mem) {
        st = wlm_fail_nomem(err, "the vocabulary trie", bytes);
        goto done;
    }
    gv_full *F = (gv_full *)mem;
    wlm_gvocab *G = &F->pub;
    uint8_t *p = mem + sz_full;
    G->mem = mem;
    F->voc = v;
    F->max_bytes = maxb;
    G->byte = p;
    p += sz_byte;
    G->depth = (uint16_t *)p;
    p += sz_depth;
    G->end = (uint32_t *)p;
    p += sz_end;
    G->tok_at = (uint32_t *)p;
    p += sz_at;
    G->tok = (int32_t *)p;
    p += sz_tok;
    F->elig = (uint32_t *)p;
    G->n_vocab = n;
    G->n_words = nw;
    G->n_nodes = (uint32_t)n_nodes;
    G->n_tokens = m;
    /* Sorted order is the trie's preorder: each token opens the nodes past
     * its common prefix with the previous token and sits on the last one
     * (a token with the previous one's bytes shares its node), so the
     * tokens of a node are consecutive in `ids`. */
    uint32_t k = 1, depth_max = 0, node = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t a = (uint32_t)ids[i], la = off[a + 1] - off[a], lcp = 0;
        if (i) {
            uint32_t b = (uint32_t)ids[i - 1], lb = off[b + 1] - off[b];
            while (lcp < la && lcp < lb && blob[off[a] + lcp] == blob[off[b] + lcp]) lcp++;
        }
        for (uint32_t d = lcp; d < la; d++) {
            G->byte[k] = blob[off[a] + d];
            G->depth[k] = (uint16_t)(d + 1);
            node = k++;
        }
        G->tok_at[node + 1]++;
        G->tok[i] = (int32_t)a;
        F->elig[a >> 5] |= 1u << (a & 31);
        if (la > depth_max) depth_max = la;
    }
    for (uint32_t i = 0; i < k; i++) G->tok_at[i + 1] += G->tok_at[i];
    /* subtree ends from depths */
    uint32_t *open = wlm_sys_alloc(((uint64_t)depth_max + 2) * 4), sp = 0; /* one node per depth */
    if (!open) {
        wlm_sys_free(mem);
        st = wlm_fail_nomem(err, "the vocabulary trie", (uint64_t)depth_max * 4);
        goto done;
    }
    for (uint32_t i = 0; i < k; i++) {
        while (sp && G->depth[open[sp - 1]] >= G->depth[i]) G->end[open[--sp]] = i;
        open[sp++] = i;
    }
    while (sp) G->end[open[--sp]] = k;
    wlm_sys_free(open);
    G->max_depth = depth_max;
    G->n_eog = 0;
    for (uint32_t t = 0; t < n && G->n_eog < 16; t++)
        if (wlm_vocab_is_eog(v, (int32_t)t)) G->eog[G->n_eog++] = (int32_t)t;
    *out = G;
done:
    wlm_sys_free(off);
    wlm_sys_free(ids);
    wlm_sys_free(tmp);
    wlm_sys_free(blob);
    return st;
}

WLM_API wlm_status wlm_gvocab_new(wlm_gvocab **out, const wlm_model *m, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out || !m) return wlm_fail(err, WLM_ERR_ARG, "wlm_gvocab_new: NULL argument");
    return wlm_gvocab_build(out, &m->vocab, err);
}

WLM_API void wlm_gvocab_free(wlm_gvocab *v) {
    if (v) wlm_sys_free(v->mem);
}

/* ---- the recognizer --------------------------------------------------------------- */

#define SEEN (2 * WLM_G_MAX_EXPAND)

static uint32_t hmix(uint32_t a, uint32_t b) {
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u + (a << 6) + (a >> 2));
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    return h;
}

/* a table is full: the current operation fails with this message */
static uint32_t gfail(wlm_grammar *g, const char *what, uint32_t limit) {
    if (!g->fail) {
        g->fail = 1;
        wlm_fail(&g->ferr, WLM_ERR_UNSUPPORTED, "grammar: more than %u %s are needed at once (the grammar is too ambiguous or nests too deep for the recognizer's tables)", limit, what);
    }
    return 0;
}

static uint32_t mknode(wlm_grammar *g, uint32_t ins, uint32_t parent) {
    if (g->nodes[parent].depth >= WLM_G_MAX_DEPTH) {
        g->stat[WLM_GS_TRUNCATED]++;
        return INF;
    }
    uint32_t h = hmix(ins, parent) & (WLM_G_NODES - 1);
    for (uint32_t i = g->node_head[h]; i; i = g->nodes[i].next)
        if (g->nodes[i].ins == ins && g->nodes[i].parent == parent) return i;
    if (g->n_nodes >= WLM_G_NODES) {
        gfail(g, "parse stack nodes", WLM_G_NODES);
        return INF;
    }
    uint32_t id = g->n_nodes++;
    g->nodes[id] = (wlm_gnode){ ins, parent, g->node_head[h], g->nodes[parent].depth + 1 };
    g->node_head[h] = id;
    return id;
}

static uint32_t cfg_hash(const uint32_t *s, uint32_t n, const uint8_t *pend, uint32_t np, uint32_t ended) {
    uint32_t h = hmix(n, ended | np << 1);
    for (uint32_t j = 0; j < np; j++) h = hmix(h, pend[j] + 0x100u);
    for (uint32_t i = 0; i < n; i++) h = hmix(h, s[i]);
    return h;
}

static uint32_t intern(wlm_grammar *g, const uint32_t *s, uint32_t n, const uint8_t *pend, uint32_t np, uint32_t ended) {
    if (!n && !ended) return 0;
    uint32_t h = cfg_hash(s, n, pend, np, ended), k = h & (WLM_G_CFGS - 1);
    for (uint32_t i = g->cfg_head[k]; i; i = g->cfgs[i].next) {
        const wlm_gcfg *C = &g->cfgs[i];
        if (C->hash != h || C->n != n || C->ended != ended || C->n_pend != np) continue;
        uint32_t same = 1;
        for (uint32_t j = 0; j < np && same; j++) same = C->pend[j] == pend[j];
        for (uint32_t j = 0; j < n && same; j++) same = g->stk[C->off + j] == s[j];
        if (same) return i;
    }
    if (g->n_cfgs >= WLM_G_CFGS) return gfail(g, "recognizer configurations", WLM_G_CFGS);
    if (g->n_stk + n > WLM_G_CFG_STK) return gfail(g, "parse stacks held by configurations", WLM_G_CFG_STK);
    uint32_t id = g->n_cfgs++;
    wlm_gcfg *C = &g->cfgs[id];
    wlm_memset(C, 0, sizeof *C);
    C->hash = h;
    C->off = g->n_stk;
    C->n = n;
    C->next = g->cfg_head[k];
    C->n_pend = (uint8_t)np;
    C->ended = (uint8_t)ended;
    for (uint32_t j = 0; j < np && j < sizeof C->pend; j++) C->pend[j] = pend[j]; /* np <= 3: a code point's first bytes */
    for (uint32_t j = 0; j < n; j++) g->stk[g->n_stk++] = s[j];
    g->cfg_head[k] = id;
    g->cfg_dense[id] = 0;
    g->cfg_ended[id] = (uint8_t)ended;
    return id;
}

/* ---- closure: the stacks reached from (instruction, parent) pairs without reading ---- */

static void clo_begin(wlm_grammar *g) {
    g->n_out = 0;
    g->n_visit = 0;
    g->ended = 0;
    if (++g->seen_stamp == 0) {
        wlm_memset(g->seen_tag, 0, SEEN * 4);
        g->seen_stamp = 1;
    }
}

static int visit(wlm_grammar *g, uint64_t key) {
    uint32_t h = hmix((uint32_t)key, (uint32_t)(key >> 32)) & (SEEN - 1);
    while (g->seen_tag[h] == g->seen_stamp) {
        if (g->seen[h] == key) return 0;
        h = (h + 1) & (SEEN - 1);
    }
    g->seen_tag[h] = g->seen_stamp;
    g->seen[h] = key;
    return 1;
}

#define PAIR(ins, par) (((uint64_t)(par) << 32) | (ins))

/* Adds the closure of (ins, parent): SPLITs fork, CALLs push a return frame
 * (a call right before its rule's end replaces the frame instead), FINAL
 * returns to the parent frame or, at the bottom, marks the parse ended;
 * TERMs are kept as stacks in g->out. */
static void clo_add(wlm_grammar *g, uint64_t start) {
    uint64_t *w = g->work;
    uint32_t sp = 0;
    const wlm_ginstr *ins = g->p.ins;
    w[sp++] = start;
    while (sp) {
        uint64_t x = w[--sp];
        if (g->n_visit >= WLM_G_MAX_EXPAND) {
            g->stat[WLM_GS_TRUNCATED]++;
            return;
        }
        if (!visit(g, x)) continue;
        g->n_visit++;
        uint32_t at = (uint32_t)x, par = (uint32_t)(x >> 32);
        const wlm_ginstr *I = &ins[at];
        switch (I->op) {
        case WLM_GI_TERM: {
            uint32_t s = mknode(g, at, par);
            if (s != INF) g->out[g->n_out++] = s;
            break;
        }
        case WLM_GI_SPLIT:
            w[sp++] = PAIR(I->b, par);
            w[sp++] = PAIR(I->a, par);
            break;
        case WLM_GI_CALL: {
            uint32_t entry = g->p.rule_start[I->a];
            if (ins[I->b].op == WLM_GI_FINAL) {
                w[sp++] = PAIR(entry, par);
                break;
            }
            uint32_t r = mknode(g, I->b, par);
            if (r != INF) w[sp++] = PAIR(entry, r);
            break;
        }
        default: /* FINAL */
            if (par == 0) g->ended = 1;
            else w[sp++] = PAIR(g->nodes[par].ins, g->nodes[par].parent);
        }
    }
}

static uint32_t clo_end(wlm_grammar *g) {
    if (g->fail) return 0;
    uint32_t n = g->n_out;
    wlm_sort_u32(g->out, n);
    if (n > WLM_G_MAX_STACKS) {
        n = WLM_G_MAX_STACKS;
        g->stat[WLM_GS_TRUNCATED]++;
    }
    return intern(g, g->out, n, 0, 0, g->ended);
}

/* ---- byte transitions --------------------------------------------------------------- */

/* the stacks of configuration c after reading code point cp */
static uint32_t step_cp(wlm_grammar *g, uint32_t c, uint32_t cp) {
    const wlm_gcfg *C = &g->cfgs[c];
    const uint32_t *s = g->stk + C->off;
    uint32_t n = C->n;
    clo_begin(g);
    for (uint32_t i = 0; i < n; i++) {
        const wlm_gnode *N = &g->nodes[s[i]];
        const wlm_ginstr *I = &g->p.ins[N->ins];
        if (wlm_gset_has(&g->p, I->a, cp)) clo_add(g, PAIR(I->b, N->parent));
    }
    return clo_end(g);
}

/* c with the bytes pend[0..np) of an unfinished code point: the stacks whose set can still match */
static uint32_t with_pending(wlm_grammar *g, uint32_t c, const uint8_t *pend, uint32_t np) {
    uint32_t lo, hi, k = 0;
    pend_range(pend, np, &lo, &hi);
    const wlm_gcfg *C = &g->cfgs[c];
    for (uint32_t i = 0; i < C->n; i++) {
        uint32_t s = g->stk[C->off + i];
        if (wlm_gset_meets(&g->p, g->p.ins[g->nodes[s].ins].a, lo, hi)) g->out[k++] = s;
    }
    return k ? intern(g, g->out, k, pend, np, 0) : 0;
}

/* The configuration after byte b. Cached: the first WLM_G_DENSE
 * configurations to be stepped from (since the last collection) get a
 * table of their 256 transitions, the others share a hashed cache. */
static uint32_t step(wlm_grammar *g, uint32_t c, uint8_t b) {
    if (!c) return 0;
    uint32_t d = g->cfg_dense[c], key = 0, slot = 0;
    uint16_t *row = 0;
    if (!d && g->n_dense < WLM_G_DENSE) {
        d = g->cfg_dense[c] = (uint16_t)++g->n_dense;
        wlm_memset(g->dense + (uint64_t)(d - 1) * 256, 0xff, 512);
    }
    if (d) {
        row = g->dense + (uint64_t)(d - 1) * 256;
        if (row[b] != 0xffff) {
            g->stat[WLM_GS_TRANS_HITS]++;
            return row[b];
        }
    } else {
        key = ((c << 8) | b) + 1;
        slot = (key * 2654435761u) >> (32 - 15);
        uint64_t e = g->trans[slot];
        if ((uint32_t)(e >> 32) == key) {
            g->stat[WLM_GS_TRANS_HITS]++;
            return (uint32_t)e;
        }
    }
    g->stat[WLM_GS_TRANS_MISSES]++;
    const wlm_gcfg C = g->cfgs[c];
    uint32_t r;
    if (!C.n_pend) {
        if (b < 0x80) r = step_cp(g, c, b);
        else if (!lead_len(b)) r = 0;
        else {
            uint8_t p[4] = { b, 0, 0, 0 };
            r = with_pending(g, c, p, 1);
        }
    } else {
        uint32_t k = C.n_pend, need = lead_len(C.pend[0]);
        if (!cont_ok(C.pend[0], k, b)) r = 0;
        else {
            uint8_t p[4] = { C.pend[0], C.pend[1], C.pend[2], 0 };
            p[k] = b;
            r = k + 1 == need ? step_cp(g, c, decode(p, need)) : with_pending(g, c, p, k + 1);
        }
    }
    if (g->fail) return r;
    if (row) row[b] = (uint16_t)r;
    else g->trans[slot] = ((uint64_t)key << 32) | r;
    return r;
}

uint32_t wlm_grammar_step(wlm_grammar *g, uint32_t cfg, uint8_t byte, wlm_err *err) {
    g->fail = 0;
    uint32_t r = step(g, cfg, byte);
    if (g->fail && err) *err = g->ferr;
    return r;
}

/* ---- tables that grow: the per-TERM token sets ------------------------------------------ */

static int tpush(wlm_grammar *g, uint32_t v) {
    if (g->n_tdata == g->cap_tdata) {
        uint64_t cap = g->cap_tdata ? 2 * (uint64_t)g->cap_tdata : 4096;
        if (cap > 0x40000000u) return gfail(g, "words of token tables", 0x40000000u);
        uint32_t *q = wlm_sys_alloc(cap * 4);
        if (!q) {
            if (!g->fail) {
                g->fail = 1;
                wlm_fail_nomem(&g->ferr, "the grammar's token tables", cap * 4);
            }
            return 0;
        }
        if (g->n_tdata) wlm_memcpy(q, g->tdata, (size_t)g->n_tdata * 4);
        wlm_sys_free(g->tdata);
        g->tdata = q;
        g->cap_tdata = (uint32_t)cap;
    }
    g->tdata[g->n_tdata++] = v;
    return 1;
}

static void set_bit(uint32_t *m, int32_t t) { m[(uint32_t)t >> 5] |= 1u << ((uint32_t)t & 31); }

/* Walks the trie below node `from` (its descendants) with configuration c0
 * for from's prefix: every token whose configuration is alive is set in
 * `mask`; with `pops`, nodes where a parse has ended and tokens go on
 * below are appended to tdata. Returns 0 when a table failed. */
static int walk(wlm_grammar *g, uint32_t from, uint32_t c0, uint32_t *mask, uint64_t *n_set, int pops) {
    const wlm_gvocab *V = g->v;
    uint32_t *cfg_at = g->walk_cfg, stop = V->end[from];
    uint64_t walked = 0, set = 0;
    cfg_at[V->depth[from]] = c0;
    for (uint32_t i = from + 1; i < stop;) {
        uint32_t d = V->depth[i], c = step(g, cfg_at[d - 1], V->byte[i]);
        walked++;
        if (g->fail) return 0;
        if (!c) {
            i = V->end[i];
            continue;
        }
        cfg_at[d] = c;
        for (uint32_t j = V->tok_at[i]; j < V->tok_at[i + 1]; j++) {
            set_bit(mask, V->tok[j]);
            set++;
        }
        if (pops && g->cfg_ended[c] && V->end[i] > i + 1 && !tpush(g, i)) return 0;
        i++;
    }
    g->stat[WLM_GS_WALK_NODES] += walked;
    if (n_set) *n_set += set;
    return 1;
}

/* acc(s) and pop(s) of TERM instruction s (see the top of this file) */
static int term_compute(wlm_grammar *g, uint32_t s) {
    wlm_gterm *T = &g->term[s];
    if (T->flags & 1) return 1;
    uint32_t top = mknode(g, s, 0);
    if (top == INF) return 0;
    uint32_t c0 = intern(g, &top, 1, 0, 0, 0);
    if (!c0) return 0;
    uint32_t nw = g->v->n_words;
    wlm_memset(g->marks, 0, (size_t)nw * 4);
    uint64_t n_acc = 0;
    uint32_t pop = g->n_tdata;
    if (!walk(g, 0, c0, g->marks, &n_acc, 1)) return 0;
    T->pop = pop;
    T->n_pop = g->n_tdata - pop;
    T->acc = g->n_tdata;
    if (n_acc > nw) { /* a bitset is smaller */
        T->flags = 2;
        T->n_acc = nw;
        for (uint32_t w = 0; w < nw; w++)
            if (!tpush(g, g->marks[w])) return 0;
    } else {
        T->flags = 0;
        T->n_acc = (uint32_t)n_acc;
        for (uint32_t w = 0; w < nw; w++)
            for (uint32_t m = g->marks[w]; m; m &= m - 1)
                if (!tpush(g, w * 32 + (uint32_t)__builtin_ctz(m))) return 0;
    }
    T->flags |= 1;
    g->stat[WLM_GS_TERMS_DONE]++;
    g->stat[WLM_GS_TERM_NODES] += T->n_pop;
    return 1;
}

static void add_eog(const wlm_gvocab *V, uint32_t *mask) {
    for (uint32_t i = 0; i < V->n_eog; i++) set_bit(mask, V->eog[i]);
}

static uint32_t popcount(const uint32_t *m, uint32_t nw) {
    uint32_t n = 0;
    for (uint32_t w = 0; w < nw; w++) n += (uint32_t)__builtin_popcount(m[w]);
    return n;
}

/* the mask of configuration c into `mask`; *count: allowed tokens that are not end-of-generation */
static int mask_compute(wlm_grammar *g, uint32_t c, uint32_t *mask, uint32_t *count) {
    const wlm_gvocab *V = g->v;
    uint32_t nw = V->n_words;
    wlm_memset(mask, 0, (size_t)nw * 4);
    const wlm_gcfg C = g->cfgs[c];
    if (C.n_pend) {
        if (!walk(g, 0, c, mask, 0, 0)) return 0;
    } else {
        for (uint32_t i = 0; i < C.n; i++)
            if (!term_compute(g, g->nodes[g->stk[C.off + i]].ins)) return 0;
        uint32_t last = INF, pc = 0;
        for (uint32_t i = 0; i < C.n; i++) {
            const wlm_gnode N = g->nodes[g->stk[C.off + i]];
            const wlm_gterm *T = &g->term[N.ins];
            const uint32_t *acc = g->tdata + T->acc;
            if (T->flags & 2)
                for (uint32_t w = 0; w < nw; w++) mask[w] |= acc[w];
            else
                for (uint32_t j = 0; j < T->n_acc; j++) set_bit(mask, (int32_t)acc[j]);
            if (!T->n_pop || N.parent == 0) continue;
            if (N.parent != last) { /* the closure of the frame below */
                last = N.parent;
                clo_begin(g);
                clo_add(g, PAIR(g->nodes[N.parent].ins, g->nodes[N.parent].parent));
                pc = clo_end(g);
                if (g->fail) return 0;
            }
            if (!pc) continue;
            for (uint32_t j = 0; j < T->n_pop; j++)
                if (!walk(g, g->tdata[T->pop + j], pc, mask, 0, 0)) return 0;
        }
    }
    *count = popcount(mask, nw);
    if (C.ended && !C.n_pend) add_eog(V, mask);
    g->stat[WLM_GS_MASKS]++;
    return 1;
}

/* ---- garbage collection of stacks and configurations ------------------------------------ */

/* Keeps the configurations of live states (and the start) and the stack
 * nodes they use, renumbered in order (a node's parent is older than the
 * node, a configuration's stacks stay sorted); empties both caches. */
static void gc(wlm_grammar *g) {
    uint32_t *nm = g->node_map, *cm = g->cfg_map;
    wlm_memset(nm, 0, (size_t)g->n_nodes * 4);
    wlm_memset(cm, 0, (size_t)g->n_cfgs * 4);
    for (uint32_t k = 0; k <= WLM_G_STATES; k++) {
        uint32_t c = k < WLM_G_STATES ? g->state[k] : g->start_cfg;
        if (c == INF || !c || cm[c]) continue;
        cm[c] = 1;
        const wlm_gcfg *C = &g->cfgs[c];
        for (uint32_t i = 0; i < C->n; i++)
            for (uint32_t x = g->stk[C->off + i]; x && !nm[x]; x = g->nodes[x].parent) nm[x] = 1;
    }
    uint32_t k = 1;
    for (uint32_t i = 1; i < g->n_nodes; i++) {
        if (!nm[i]) continue;
        wlm_gnode N = g->nodes[i];
        N.parent = nm[N.parent];
        nm[i] = k;
        g->nodes[k++] = N;
    }
    g->n_nodes = k;
    wlm_memset(g->node_head, 0, (size_t)WLM_G_NODES * 4);
    for (uint32_t i = 1; i < k; i++) {
        uint32_t h = hmix(g->nodes[i].ins, g->nodes[i].parent) & (WLM_G_NODES - 1);
        g->nodes[i].next = g->node_head[h];
        g->node_head[h] = i;
    }
    uint32_t kc = 1, ns = 0;
    wlm_memset(g->cfg_head, 0, (size_t)WLM_G_CFGS * 4);
    for (uint32_t c = 1; c < g->n_cfgs; c++) {
        if (!cm[c]) continue;
        wlm_gcfg C = g->cfgs[c];
        for (uint32_t j = 0; j < C.n; j++) g->stk[ns + j] = nm[g->stk[C.off + j]];
        C.off = ns;
        ns += C.n;
        C.hash = cfg_hash(g->stk + C.off, C.n, C.pend, C.n_pend, C.ended);
        uint32_t h = C.hash & (WLM_G_CFGS - 1);
        C.next = g->cfg_head[h];
        g->cfg_head[h] = kc;
        g->cfgs[kc] = C;
        g->cfg_ended[kc] = C.ended;
        cm[c] = kc++;
    }
    wlm_memset(g->cfg_dense, 0, (size_t)WLM_G_CFGS * 2);
    g->n_dense = 0;
    g->n_cfgs = kc;
    g->n_stk = ns;
    for (uint32_t s = 0; s < WLM_G_STATES; s++)
        if (g->state[s] != INF && g->state[s]) g->state[s] = cm[g->state[s]];
    if (g->start_cfg) g->start_cfg = cm[g->start_cfg];
    wlm_memset(g->trans, 0, (size_t)WLM_G_TRANS * 8);
    for (uint32_t m = 0; m < WLM_G_MASKS; m++) g->mask_cfg[m] = 0;
    g->stat[WLM_GS_GCS]++;
}

static void gc_maybe(wlm_grammar *g) {
    if (g->n_nodes > WLM_G_NODES / 2 || g->n_cfgs > WLM_G_CFGS / 2 || g->n_stk > WLM_G_CFG_STK / 2) gc(g);
}

/* ---- the public API ---------------------------------------------------------------------- */

static const gv_full *full(const wlm_gvocab *v) { return (const gv_full *)v; }

wlm_status wlm_grammar_new(wlm_grammar **out, const wlm_gvocab *v, const char *text, uint32_t len, uint32_t precompute, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!out || !v) return wlm_fail(err, WLM_ERR_ARG, "wlm_grammar_compile: NULL argument");
    *out = 0;
    wlm_gprog p;
    wlm_status st = wlm_gprog_compile(&p, text, len, err);
    if (st) return st;
    uint32_t nw = v->n_words, n_ins = p.n_ins;
    uint64_t sizes[] = {
        sizeof(wlm_grammar),
        (uint64_t)n_ins * sizeof(wlm_gterm),
        (uint64_t)WLM_G_NODES * sizeof(wlm_gnode),
        (uint64_t)WLM_G_NODES * 4,
        (uint64_t)WLM_G_CFGS * sizeof(wlm_gcfg),
        (uint64_t)WLM_G_CFGS * 4,
        (uint64_t)WLM_G_CFG_STK * 4,
        (uint64_t)WLM_G_TRANS * 8,
        (uint64_t)WLM_G_MASKS * nw * 4,
        (uint64_t)nw * 4,
        (uint64_t)(2 * WLM_G_MAX_EXPAND + 8) * 8,
        (uint64_t)SEEN * 8,
        (uint64_t)SEEN * 4,
        (uint64_t)WLM_G_MAX_EXPAND * 4,
        ((uint64_t)v->max_depth + 2) * 4,
        (uint64_t)nw * 4,
        (uint64_t)WLM_G_NODES * 4,
        (uint64_t)WLM_G_CFGS * 4,
        (uint64_t)full(v)->max_bytes + 8,
        (uint64_t)WLM_G_DENSE * 512,
        (uint64_t)WLM_G_CFGS * 2,
        (uint64_t)WLM_G_CFGS,
    };
    uint64_t total = 0;
    for (uint32_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += WLM_ALIGN_UP(sizes[i], 64);
    uint8_t *mem = wlm_sys_alloc(total);
    if (!mem) {
        wlm_gprog_free(&p);
        return wlm_fail_nomem(err, "the compiled grammar", total);
    }
    uint8_t *q = mem;
    void *part[sizeof sizes / sizeof sizes[0]];
    for (uint32_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        part[i] = q;
        q += WLM_ALIGN_UP(sizes[i], 64);
    }
    wlm_grammar *g = part[0];
    g->mem = mem;
    g->v = v;
    g->p = p;
    g->term = part[1];
    g->nodes = part[2];
    g->node_head = part[3];
    g->cfgs = part[4];
    g->cfg_head = part[5];
    g->stk = part[6];
    g->trans = part[7];
    g->masks = part[8];
    g->scratch_mask = part[9];
    g->work = part[10];
    g->seen = part[11];
    g->seen_tag = part[12];
    g->out = part[13];
    g->walk_cfg = part[14];
    g->marks = part[15];
    g->node_map = part[16];
    g->cfg_map = part[17];
    g->tokbuf = part[18];
    g->dense = part[19];
    g->cfg_dense = part[20];
    g->cfg_ended = part[21];
    g->n_nodes = 1;
    g->n_cfgs = 1; /* node 0: the bottom; configuration 0: dead */
    for (uint32_t s = 0; s < WLM_G_STATES; s++) g->state[s] = INF;
    for (uint32_t i = 0; i < n_ins; i++)
        if (p.ins[i].op == WLM_GI_TERM) g->stat[WLM_GS_TERMS]++;
    g->stat[WLM_GS_BYTES] = total;
    clo_begin(g);
    clo_add(g, PAIR(p.rule_start[p.root], 0));
    g->start_cfg = clo_end(g);
    if (g->fail || !g->start_cfg) {
        st = g->fail ? g->ferr.code : WLM_ERR_ARG;
        if (g->fail) *err = g->ferr;
        else wlm_fail(err, st, "grammar: the root rule matches nothing");
        wlm_grammar_free(g);
        return st;
    }
    /* Every TERM's token sets, while the work stays within a budget of
     * walking the trie 8 times and at most 2 M trie nodes (about 0.1 s;
     * past it, the rest are computed on first use). */
    if (precompute) {
        uint64_t budget = WLM_MIN(8 * (uint64_t)v->n_nodes + 100000, 2000000u);
        for (uint32_t i = 0; i < n_ins && g->stat[WLM_GS_WALK_NODES] < budget; i++) {
            if (p.ins[i].op != WLM_GI_TERM) continue;
            gc_maybe(g);
            if (!term_compute(g, i)) {
                st = g->ferr.code;
                *err = g->ferr;
                wlm_grammar_free(g);
                return st;
            }
        }
        gc(g);
    }
    g->stat[WLM_GS_TDATA_BYTES] = g->cap_tdata * 4;
    *out = g;
    return WLM_OK;
}

WLM_API wlm_status wlm_grammar_compile(wlm_grammar **out, const wlm_gvocab *v, const char *text, uint32_t len, wlm_err *err) {
    return wlm_grammar_new(out, v, text, len, 1, err);
}

WLM_API void wlm_grammar_free(wlm_grammar *g) {
    if (!g) return;
    wlm_gprog_free(&g->p);
    wlm_sys_free(g->tdata);
    wlm_sys_free(g->mem);
}

static wlm_status bad_state(wlm_grammar *g, uint32_t state, wlm_err *err) {
    if (!g) return wlm_fail(err, WLM_ERR_ARG, "grammar: NULL grammar");
    if (state >= WLM_G_STATES || g->state[state] == INF) return wlm_fail(err, WLM_ERR_ARG, "grammar: no recognizer state %u", state);
    g->fail = 0;
    return WLM_OK;
}

WLM_API wlm_status wlm_grammar_state_new(wlm_grammar *g, uint32_t *state, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!g || !state) return wlm_fail(err, WLM_ERR_ARG, "wlm_grammar_state_new: NULL argument");
    for (uint32_t s = 0; s < WLM_G_STATES; s++) {
        if (g->state[s] != INF) continue;
        g->state[s] = g->start_cfg;
        *state = s;
        return WLM_OK;
    }
    return wlm_fail(err, WLM_ERR_STATE, "grammar: all %u recognizer states are in use", WLM_G_STATES);
}

WLM_API wlm_status wlm_grammar_state_copy(wlm_grammar *g, uint32_t dst, uint32_t src, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_status st;
    if ((st = bad_state(g, src, err)) || (st = bad_state(g, dst, err))) return st;
    g->state[dst] = g->state[src];
    return WLM_OK;
}

WLM_API void wlm_grammar_state_free(wlm_grammar *g, uint32_t state) {
    if (g && state < WLM_G_STATES) g->state[state] = INF;
}

WLM_API int wlm_grammar_can_end(const wlm_grammar *g, uint32_t state) {
    if (!g || state >= WLM_G_STATES || g->state[state] == INF) return 0;
    const wlm_gcfg *C = &g->cfgs[g->state[state]];
    return C->ended && !C->n_pend;
}

static int is_eog(const wlm_gvocab *V, int32_t t) {
    for (uint32_t i = 0; i < V->n_eog; i++)
        if (V->eog[i] == t) return 1;
    return 0;
}

/* runs bytes from the state; a dead end leaves the state as it was */
static wlm_status run_bytes(wlm_grammar *g, uint32_t state, const uint8_t *b, uint32_t n, uint32_t *at, wlm_err *err) {
    uint32_t c = g->state[state];
    for (uint32_t i = 0; i < n; i++) {
        c = step(g, c, b[i]);
        if (g->fail) {
            *err = g->ferr;
            return g->ferr.code;
        }
        if (!c) {
            *at = i;
            return WLM_ERR_ARG;
        }
    }
    g->state[state] = c;
    return WLM_OK;
}

WLM_API wlm_status wlm_grammar_accept_bytes(wlm_grammar *g, uint32_t state, const char *bytes, uint32_t n, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_status st = bad_state(g, state, err);
    if (st) return st;
    if (!bytes && n) return wlm_fail(err, WLM_ERR_ARG, "wlm_grammar_accept_bytes: NULL bytes");
    gc_maybe(g);
    uint32_t at = 0;
    st = run_bytes(g, state, (const uint8_t *)bytes, n, &at, err);
    if (st == WLM_ERR_ARG) return wlm_fail(err, st, "grammar: byte %u of %u (0x%x) is not allowed here", at, n, (uint8_t)bytes[at]);
    return st;
}

WLM_API wlm_status wlm_grammar_accept(wlm_grammar *g, uint32_t state, int32_t token, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_status st = bad_state(g, state, err);
    if (st) return st;
    const wlm_gvocab *V = g->v;
    if (token < 0 || (uint32_t)token >= V->n_vocab) return wlm_fail(err, WLM_ERR_ARG, "grammar: token %d out of range", token);
    if (is_eog(V, token)) {
        if (!wlm_grammar_can_end(g, state)) return wlm_fail(err, WLM_ERR_ARG, "grammar: end of generation (token %d) before the grammar is complete", token);
        uint32_t done = intern(g, 0, 0, 0, 0, 1);
        if (g->fail) {
            *err = g->ferr;
            return g->ferr.code;
        }
        g->state[state] = done;
        return WLM_OK;
    }
    const gv_full *F = full(V);
    if (!((F->elig[(uint32_t)token >> 5] >> ((uint32_t)token & 31)) & 1))
        return wlm_fail(err, WLM_ERR_ARG, "grammar: token %d is a control token, which a grammar never allows", token);
    gc_maybe(g);
    uint32_t n = wlm_vocab_token_bytes(F->voc, token, (char *)g->tokbuf, F->max_bytes), at = 0;
    st = run_bytes(g, state, g->tokbuf, n, &at, err);
    if (st == WLM_ERR_ARG) return wlm_fail(err, st, "grammar: token %d is not allowed here (its byte %u of %u does not fit)", token, at, n);
    return st;
}

WLM_API wlm_status wlm_grammar_mask(wlm_grammar *g, uint32_t state, uint32_t flags, const uint32_t **mask, uint32_t *n_allowed, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    wlm_status st = bad_state(g, state, err);
    if (st) return st;
    if (!mask) return wlm_fail(err, WLM_ERR_ARG, "wlm_grammar_mask: NULL argument");
    gc_maybe(g);
    uint32_t c = g->state[state], nw = g->v->n_words, slot = INF, victim = 0;
    for (uint32_t k = 0; k < WLM_G_MASKS && slot == INF; k++)
        if (g->mask_cfg[k] == c + 1) slot = k;
    for (uint32_t k = 1; k < WLM_G_MASKS; k++) /* an empty slot, else the least recently used */
        if (g->mask_cfg[victim] && (!g->mask_cfg[k] || g->mask_used[k] < g->mask_used[victim])) victim = k;
    uint32_t *m;
    if (slot != INF) {
        g->stat[WLM_GS_MASK_HITS]++;
        m = g->masks + (uint64_t)slot * nw;
    } else {
        slot = victim;
        m = g->masks + (uint64_t)slot * nw;
        g->mask_cfg[slot] = 0;
        if (!mask_compute(g, c, m, &g->mask_count[slot])) {
            *err = g->ferr;
            return g->ferr.code;
        }
        g->mask_cfg[slot] = c + 1;
    }
    g->mask_used[slot] = ++g->mask_clock;
    if ((flags & WLM_GRAMMAR_NO_EOG) && wlm_grammar_can_end(g, state) && g->v->n_eog) {
        wlm_memcpy(g->scratch_mask, m, (size_t)nw * 4);
        for (uint32_t i = 0; i < g->v->n_eog; i++) g->scratch_mask[(uint32_t)g->v->eog[i] >> 5] &= ~(1u << ((uint32_t)g->v->eog[i] & 31));
        m = g->scratch_mask;
    }
    *mask = m;
    if (n_allowed) *n_allowed = g->mask_count[slot];
    return WLM_OK;
}

wlm_status wlm_grammar_mask_direct(wlm_grammar *g, uint32_t cfg, uint32_t *mask, wlm_err *err) {
    const gv_full *F = full(g->v);
    g->fail = 0;
    wlm_memset(mask, 0, (size_t)g->v->n_words * 4);
    for (uint32_t t = 0; t < g->v->n_vocab; t++) {
        if (!((F->elig[t >> 5] >> (t & 31)) & 1)) continue;
        uint32_t n = wlm_vocab_token_bytes(F->voc, (int32_t)t, (char *)g->tokbuf, F->max_bytes), c = cfg;
        for (uint32_t i = 0; i < n && c; i++) c = step(g, c, g->tokbuf[i]);
        if (g->fail) {
            if (err) *err = g->ferr;
            return g->ferr.code;
        }
        if (c) set_bit(mask, (int32_t)t);
    }
    if (g->cfgs[cfg].ended && !g->cfgs[cfg].n_pend) add_eog(g->v, mask);
    return WLM_OK;
}

WLM_API uint64_t wlm_grammar_stat(const wlm_grammar *g, uint32_t what) {
    if (!g || what >= WLM_GS_COUNT) return 0;
    if (what == WLM_GS_CFGS) return g->n_cfgs;
    if (what == WLM_GS_NODES) return g->n_nodes;
    if (what == WLM_GS_TDATA_BYTES) return g->cap_tdata * 4;
    return g->stat[what];
}
