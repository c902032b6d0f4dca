/* GBNF grammars: text -> program (docs/grammar.md).
 *
 * The text is parsed into a syntax tree per rule; then each rule reachable
 * from `root` becomes a piece of a program whose instructions are the
 * states of a recursive automaton over code points (grammar.h: TERM reads
 * one code point of a set, CALL enters a rule, SPLIT forks, FINAL returns).
 * Repetitions are unrolled ({m,n}: m copies, then n - m nested optional
 * ones) or looped (*, +, {m,}), so loops stay inside their rule. Small rules
 * without loops or recursion (a JSON string's `char`, a `space`) are inlined
 * where they are called: a token's walk then stays inside the calling rule
 * longer, which is what makes the per-rule token sets of grammar_mask.c
 * useful.
 *
 * Checks: every rule referenced is defined, `root` exists, no left
 * recursion that would grow the parse stack without reading a character
 * (rule A reaching A again before any character, through a call that is not
 * the last thing of its rule), and every rule can end. Syntax errors give
 * line:column, what was expected and what was found. */
#include "grammar.h"

enum { A_EMPTY,
       A_TERM,
       A_CALL,
       A_SEQ,
       A_ALT,
       A_REP };
typedef struct ast {
    uint32_t kind, a, b, c;
} ast; /* SEQ/ALT: a = first in kids, b = count; REP: a = child, b = min, c = max */
#define INF 0xffffffffu
#define MAX_CP 0x10FFFFu

/* ---- growable arrays (compile time only) ------------------------------------- */

typedef struct gvec {
    void *p;
    uint32_t n, cap, size;
} gvec;

static int vgrow(gvec *v, uint64_t need) {
    if (need <= v->cap) return 1;
    if (need > 0x40000000u) return 0;
    uint64_t cap = v->cap ? v->cap : 16;
    while (cap < need) cap *= 2;
    void *q = wlm_sys_alloc(cap * v->size);
    if (!q) return 0;
    if (v->n) wlm_memcpy(q, v->p, (size_t)v->n * v->size);
    wlm_sys_free(v->p);
    v->p = q;
    v->cap = (uint32_t)cap;
    return 1;
}
static void vfree(gvec *v) {
    wlm_sys_free(v->p);
    v->p = 0;
    v->n = v->cap = 0;
}
#define VAT(v, T, i) (((T *)(v).p)[i])

/* ---- the parser ------------------------------------------------------------------- */

typedef struct grule {
    uint32_t name, name_len; /* in the text */
    uint32_t body;           /* syntax tree, INF until defined */
    uint32_t def_at, ref_at; /* where it is defined / first referenced */
    uint32_t next;           /* name hash chain (index + 1) */
    /* analysis */
    uint32_t recursive, loops, size, idepth, inl, prog;
} grule;

typedef struct parser {
    const uint8_t *s;
    uint32_t len, pos;
    wlm_err *err;
    int failed;
    gvec ast, kids, sets, ranges, rules, cls;
    uint32_t *rhash, rmask;
    uint32_t nest;
    uint32_t single[128]; /* set id + 1 of each one-character ASCII set */
} parser;

static void where(const parser *P, uint32_t at, uint32_t *line, uint32_t *col) {
    uint32_t l = 1, c = 1;
    for (uint32_t i = 0; i < at && i < P->len; i++) {
        if (P->s[i] == '\n') {
            l++;
            c = 1;
        } else if ((P->s[i] & 0xC0) != 0x80) c++;
    }
    *line = l;
    *col = c;
}

static void hex_cp(char *b, uint32_t cp) { /* "U+00E9" */
    static const char H[] = "0123456789ABCDEF";
    int n = cp > 0xFFFFF ? 6 : cp > 0xFFFF ? 5
                                           : 4,
        k = 0;
    b[k++] = 'U';
    b[k++] = '+';
    for (int i = n - 1; i >= 0; i--) b[k++] = H[(cp >> (4 * i)) & 15];
    b[k] = 0;
}

/* what stands at `at`, for "found ..." */
static void found(const parser *P, uint32_t at, char *b, uint32_t cap) {
    if (at >= P->len) {
        wlm_fmt(b, cap, "the end of the grammar");
        return;
    }
    uint8_t c = P->s[at];
    if (c == '\n' || c == '\r') wlm_fmt(b, cap, "the end of the line");
    else if (c > 32 && c < 127) wlm_fmt(b, cap, "'%c'", c);
    else if (c == ' ' || c == '\t') wlm_fmt(b, cap, "a space");
    else wlm_fmt(b, cap, "byte 0x%x", c);
}

static uint32_t perr(parser *P, uint32_t at, const char *msg) {
    if (P->failed) return INF;
    uint32_t line, col;
    where(P, at, &line, &col);
    wlm_fail(P->err, WLM_ERR_ARG, "grammar: line %u, column %u: %s", line, col, msg);
    P->failed = 1;
    return INF;
}
static uint32_t pnomem(parser *P) {
    if (!P->failed) wlm_fail_nomem(P->err, "the grammar compiler", 0);
    P->failed = 1;
    return INF;
}
/* "expected X, found Y" at the current position */
static uint32_t pexpect(parser *P, const char *what) {
    char f[48], m[200];
    found(P, P->pos, f, sizeof f);
    wlm_fmt(m, sizeof m, "expected %s, found %s", what, f);
    return perr(P, P->pos, m);
}

static int at_end(const parser *P) { return P->pos >= P->len; }
static uint8_t cur(const parser *P) { return P->pos < P->len ? P->s[P->pos] : 0; }
static int name_char(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

/* spaces, line breaks and comments (# to the end of the line) */
static uint32_t skip_ws_from(const parser *P, uint32_t i) {
    while (i < P->len) {
        uint8_t c = P->s[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') i++;
        else if (c == '#') {
            while (i < P->len && P->s[i] != '\n') i++;
        } else break;
    }
    return i;
}
static void skip_ws(parser *P) { P->pos = skip_ws_from(P, P->pos); }

/* a rule starts at i: a name, then "::=" */
static int rule_ahead(const parser *P, uint32_t i) {
    uint32_t j = i;
    while (j < P->len && name_char(P->s[j])) j++;
    if (j == i) return 0;
    j = skip_ws_from(P, j);
    return j + 3 <= P->len && P->s[j] == ':' && P->s[j + 1] == ':' && P->s[j + 2] == '=';
}

/* one code point of the text (valid UTF-8), advancing */
static uint32_t text_cp(parser *P) {
    const uint8_t *s = P->s + P->pos;
    uint32_t left = P->len - P->pos, c = s[0], n, cp;
    if (c < 0x80) {
        P->pos++;
        return c;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else return perr(P, P->pos, "invalid UTF-8 in the grammar text");
    if (left < n) return perr(P, P->pos, "invalid UTF-8 in the grammar text");
    for (uint32_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) return perr(P, P->pos, "invalid UTF-8 in the grammar text");
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > MAX_CP)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return perr(P, P->pos, "invalid UTF-8 in the grammar text");
    P->pos += n;
    return cp;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* an escape after '\' (P->pos at the backslash) */
static uint32_t escape(parser *P) {
    uint32_t at = P->pos;
    P->pos++;
    if (at_end(P)) return perr(P, at, "a backslash at the end of the grammar");
    uint8_t c = P->s[P->pos++];
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '\\':
    case '"':
    case '\'':
    case '[':
    case ']':
    case '-':
    case '^':
    case '/': return c;
    case 'x':
    case 'u':
    case 'U': {
        uint32_t n = c == 'x' ? 2 : c == 'u' ? 4
                                             : 8,
                 v = 0;
        for (uint32_t k = 0; k < n; k++) {
            int h = P->pos < P->len ? hexval(P->s[P->pos]) : -1;
            if (h < 0) {
                char m[96];
                wlm_fmt(m, sizeof m, "escape \\%c needs %u hex digits", c, n);
                return perr(P, at, m);
            }
            v = v * 16 + (uint32_t)h;
            P->pos++;
        }
        if (v > MAX_CP || (v >= 0xD800 && v <= 0xDFFF)) {
            char m[96];
            wlm_fmt(m, sizeof m, "escape \\%c%x is not a Unicode scalar value (0 to 10FFFF, no surrogates)", c, v);
            return perr(P, at, m);
        }
        return v;
    }
    default: {
        char m[160];
        if (c > 32 && c < 127) wlm_fmt(m, sizeof m, "unknown escape \\%c (known: \\n \\t \\r \\\\ \\\" \\' \\[ \\] \\- \\^ \\/ \\xHH \\uHHHH \\UHHHHHHHH)", c);
        else wlm_fmt(m, sizeof m, "unknown escape after a backslash");
        return perr(P, at, m);
    }
    }
}

static uint32_t new_ast(parser *P, uint32_t kind, uint32_t a, uint32_t b, uint32_t c) {
    if (!vgrow(&P->ast, (uint64_t)P->ast.n + 1)) return pnomem(P);
    VAT(P->ast, ast, P->ast.n) = (ast){ kind, a, b, c };
    return P->ast.n++;
}

/* ---- character sets ---------------------------------------------------------------- */

/* The set of the ranges in P->cls (negated: its complement). Returns the
 * set id, INF when it is empty (the caller reports it) or on failure. */
static uint32_t make_set(parser *P, int negate) {
    uint64_t *r = P->cls.p;
    uint32_t n = P->cls.n, k = 0;
    wlm_sort_u64(r, n);
    for (uint32_t i = 0; i < n; i++) { /* merge overlapping and adjacent ranges */
        uint32_t lo = (uint32_t)(r[i] >> 32), hi = (uint32_t)r[i];
        if (k && lo <= (uint32_t)r[k - 1] + 1) {
            if (hi > (uint32_t)r[k - 1]) r[k - 1] = (r[k - 1] & 0xFFFFFFFF00000000ull) | hi;
        } else r[k++] = ((uint64_t)lo << 32) | hi;
    }
    n = k;
    if (negate) { /* complement in [0, MAX_CP]: at most n + 1 ranges */
        if (!vgrow(&P->cls, (uint64_t)2 * n + 2)) return pnomem(P);
        r = P->cls.p;
        uint64_t *o = r + n;
        uint32_t m = 0, from = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t lo = (uint32_t)(r[i] >> 32), hi = (uint32_t)r[i];
            if (lo > from) o[m++] = ((uint64_t)from << 32) | (lo - 1);
            from = hi + 1;
        }
        if (from <= MAX_CP) o[m++] = ((uint64_t)from << 32) | MAX_CP;
        for (uint32_t i = 0; i < m; i++) r[i] = o[i];
        n = m;
    }
    if (n == 0) return INF;
    if (!vgrow(&P->sets, (uint64_t)P->sets.n + 1) || !vgrow(&P->ranges, (uint64_t)P->ranges.n + 2 * n)) return pnomem(P);
    wlm_gset *S = &VAT(P->sets, wlm_gset, P->sets.n);
    wlm_memset(S, 0, sizeof *S);
    S->off = P->ranges.n / 2;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo = (uint32_t)(r[i] >> 32), hi = (uint32_t)r[i];
        for (uint32_t c = lo; c <= hi && c < 128; c++) S->ascii[c >> 5] |= 1u << (c & 31);
        if (hi < 128) continue;
        if (lo < 128) lo = 128;
        VAT(P->ranges, uint32_t, P->ranges.n++) = lo;
        VAT(P->ranges, uint32_t, P->ranges.n++) = hi;
        S->n++;
    }
    return P->sets.n++;
}

static uint32_t set_of(parser *P, uint32_t lo, uint32_t hi) {
    if (lo == hi && lo < 128 && P->single[lo]) return P->single[lo] - 1;
    P->cls.n = 0;
    if (!vgrow(&P->cls, 1)) return pnomem(P);
    VAT(P->cls, uint64_t, P->cls.n++) = ((uint64_t)lo << 32) | hi;
    uint32_t s = make_set(P, 0);
    if (s != INF && lo == hi && lo < 128) P->single[lo] = s + 1;
    return s;
}

int wlm_gset_has(const wlm_gprog *p, uint32_t set, uint32_t cp) {
    const wlm_gset *S = &p->sets[set];
    if (cp < 128) return (S->ascii[cp >> 5] >> (cp & 31)) & 1;
    const uint32_t *r = p->ranges + 2 * (uint64_t)S->off;
    uint32_t lo = 0, hi = S->n;
    while (lo < hi) { /* first range whose end is >= cp */
        uint32_t m = (lo + hi) / 2;
        if (r[2 * m + 1] < cp) lo = m + 1;
        else hi = m;
    }
    return lo < S->n && r[2 * lo] <= cp;
}

int wlm_gset_meets(const wlm_gprog *p, uint32_t set, uint32_t lo, uint32_t hi) {
    const wlm_gset *S = &p->sets[set];
    for (uint32_t c = lo; c < 128 && c <= hi; c++)
        if ((S->ascii[c >> 5] >> (c & 31)) & 1) return 1;
    if (hi < 128) return 0;
    if (lo < 128) lo = 128;
    const uint32_t *r = p->ranges + 2 * (uint64_t)S->off;
    uint32_t a = 0, b = S->n;
    while (a < b) {
        uint32_t m = (a + b) / 2;
        if (r[2 * m + 1] < lo) a = m + 1;
        else b = m;
    }
    return a < S->n && r[2 * a] <= hi;
}

/* [...] with P->pos at '[' */
static uint32_t parse_class(parser *P) {
    uint32_t at = P->pos;
    P->pos++;
    int neg = 0;
    if (cur(P) == '^') {
        neg = 1;
        P->pos++;
    }
    P->cls.n = 0;
    for (;;) {
        if (at_end(P)) return perr(P, at, "unterminated character class: ']' expected");
        if (cur(P) == ']') {
            P->pos++;
            break;
        }
        uint32_t a = cur(P) == '\\' ? escape(P) : text_cp(P);
        if (P->failed) return INF;
        uint32_t b = a;
        if (cur(P) == '-' && P->pos + 1 < P->len && P->s[P->pos + 1] != ']') {
            uint32_t rat = P->pos;
            P->pos++;
            b = cur(P) == '\\' ? escape(P) : text_cp(P);
            if (P->failed) return INF;
            if (b < a) {
                char m[120], x[12], y[12];
                hex_cp(x, a);
                hex_cp(y, b);
                wlm_fmt(m, sizeof m, "range %s-%s in a character class ends below its start", x, y);
                return perr(P, rat, m);
            }
        }
        if (!vgrow(&P->cls, (uint64_t)P->cls.n + 1)) return pnomem(P);
        VAT(P->cls, uint64_t, P->cls.n++) = ((uint64_t)a << 32) | b;
    }
    if (P->cls.n == 0) return perr(P, at, "empty character class []");
    uint32_t s = make_set(P, neg);
    if (s == INF && !P->failed) return perr(P, at, "this character class matches no character");
    return s == INF ? INF : new_ast(P, A_TERM, s, 0, 0);
}

/* "..." with P->pos at the quote: a sequence of one-character terminals */
static uint32_t parse_string(parser *P) {
    uint32_t at = P->pos, first = P->kids.n, n = 0;
    P->pos++;
    /* the terminals go to a scratch tail of kids, then become the sequence */
    for (;;) {
        if (at_end(P) || cur(P) == '\n' || cur(P) == '\r')
            return perr(P, at, "unterminated string literal: '\"' expected before the end of the line (write a line break as \\n)");
        if (cur(P) == '"') {
            P->pos++;
            break;
        }
        uint32_t c = cur(P) == '\\' ? escape(P) : text_cp(P);
        if (P->failed) return INF;
        uint32_t s = set_of(P, c, c);
        if (s == INF) return INF;
        uint32_t t = new_ast(P, A_TERM, s, 0, 0);
        if (t == INF || !vgrow(&P->kids, (uint64_t)P->kids.n + 1)) return pnomem(P);
        VAT(P->kids, uint32_t, P->kids.n++) = t;
        n++;
    }
    if (n == 0) return new_ast(P, A_EMPTY, 0, 0, 0);
    if (n == 1) {
        P->kids.n = first;
        return VAT(P->kids, uint32_t, first);
    }
    return new_ast(P, A_SEQ, first, n, 0);
}

static uint32_t name_hash(const uint8_t *s, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h;
}

/* the rule named s[at, at + n): its index (created on first sight) */
static uint32_t rule_id(parser *P, uint32_t at, uint32_t n) {
    uint32_t h = name_hash(P->s + at, n);
    for (uint32_t i = P->rhash[h & P->rmask]; i; i = VAT(P->rules, grule, i - 1).next) {
        grule *r = &VAT(P->rules, grule, i - 1);
        if (r->name_len == n && wlm_memeq(P->s + r->name, P->s + at, n)) return i - 1;
    }
    if (P->rules.n >= WLM_G_MAX_RULES) {
        char m[96];
        wlm_fmt(m, sizeof m, "more than %u rules", WLM_G_MAX_RULES);
        return perr(P, at, m);
    }
    if (!vgrow(&P->rules, (uint64_t)P->rules.n + 1)) return pnomem(P);
    if (2 * (P->rules.n + 1) > P->rmask + 1) { /* grow the hash table */
        uint32_t cap = 2 * (P->rmask + 1);
        uint32_t *h2 = wlm_sys_alloc((uint64_t)cap * 4);
        if (!h2) return pnomem(P);
        wlm_sys_free(P->rhash);
        P->rhash = h2;
        P->rmask = cap - 1;
        for (uint32_t i = 0; i < P->rules.n; i++) {
            grule *r = &VAT(P->rules, grule, i);
            uint32_t k = name_hash(P->s + r->name, r->name_len) & P->rmask;
            r->next = P->rhash[k];
            P->rhash[k] = i + 1;
        }
    }
    uint32_t id = P->rules.n++;
    grule *r = &VAT(P->rules, grule, id);
    wlm_memset(r, 0, sizeof *r);
    r->name = at;
    r->name_len = n;
    r->body = INF;
    r->def_at = INF;
    r->ref_at = INF;
    r->next = P->rhash[h & P->rmask];
    P->rhash[h & P->rmask] = id + 1;
    return id;
}

static uint32_t parse_alts(parser *P, uint32_t open_at);

/* a number of a repetition {m,n} (P->pos at its first digit) */
static uint32_t rep_number(parser *P) {
    uint32_t at = P->pos, v = 0;
    while (cur(P) >= '0' && cur(P) <= '9') {
        v = v * 10 + (uint32_t)(cur(P) - '0');
        P->pos++;
        if (v > WLM_G_MAX_REPEAT) {
            char m[96];
            wlm_fmt(m, sizeof m, "repetition count above the limit (%u)", WLM_G_MAX_REPEAT);
            return perr(P, at, m);
        }
    }
    return v;
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* a primary, then its postfix operators */
static uint32_t parse_item(parser *P) {
    uint32_t at = P->pos, node;
    uint8_t c = cur(P);
    if (c == '"') node = parse_string(P);
    else if (c == '[') node = parse_class(P);
    else if (c == '.') {
        P->pos++;
        uint32_t s = set_of(P, 0, MAX_CP);
        node = s == INF ? INF : new_ast(P, A_TERM, s, 0, 0);
    } else if (c == '(') {
        if (++P->nest > WLM_G_MAX_NEST) {
            char m[96];
            wlm_fmt(m, sizeof m, "groups and repetitions nested deeper than %u", WLM_G_MAX_NEST);
            return perr(P, at, m);
        }
        P->pos++;
        node = parse_alts(P, at);
        if (P->failed) return INF;
        if (cur(P) != ')') return pexpect(P, "')' to close the group");
        P->pos++;
        P->nest--;
    } else if (name_char(c)) {
        uint32_t b = P->pos;
        while (name_char(cur(P))) P->pos++;
        uint32_t r = rule_id(P, b, P->pos - b);
        if (r == INF) return INF;
        if (VAT(P->rules, grule, r).ref_at == INF) VAT(P->rules, grule, r).ref_at = b;
        node = new_ast(P, A_CALL, r, 0, 0);
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        char m[96];
        wlm_fmt(m, sizeof m, "'%c' with nothing before it to repeat", c);
        return perr(P, at, m);
    } else {
        return pexpect(P, "a rule name, a \"string\", a [character class], '.' or '('");
    }
    if (P->failed) return INF;
    /* postfix operators */
    uint32_t depth = P->nest;
    for (;;) {
        uint32_t save = P->pos;
        skip_ws(P);
        c = cur(P);
        uint32_t lo, hi;
        if (c == '*') {
            lo = 0;
            hi = INF;
            P->pos++;
        } else if (c == '+') {
            lo = 1;
            hi = INF;
            P->pos++;
        } else if (c == '?') {
            lo = 0;
            hi = 1;
            P->pos++;
        } else if (c == '{') {
            uint32_t bat = P->pos;
            P->pos++;
            skip_ws(P);
            int has_lo = is_digit(cur(P));
            lo = has_lo ? rep_number(P) : 0;
            if (P->failed) return INF;
            skip_ws(P);
            if (cur(P) == ',') {
                P->pos++;
                skip_ws(P);
                if (is_digit(cur(P))) {
                    hi = rep_number(P);
                    if (P->failed) return INF;
                } else {
                    if (!has_lo) return pexpect(P, "a count in {m}, {m,}, {m,n} or {,n}");
                    hi = INF;
                }
                skip_ws(P);
            } else {
                if (!has_lo) return pexpect(P, "a count in {m}, {m,}, {m,n} or {,n}");
                hi = lo;
            }
            if (cur(P) != '}') return pexpect(P, "'}' to close the repetition");
            P->pos++;
            if (hi < lo) {
                char m[96];
                wlm_fmt(m, sizeof m, "repetition {%u,%u}: the maximum is below the minimum", lo, hi);
                return perr(P, bat, m);
            }
        } else {
            P->pos = save;
            break;
        }
        if (++depth > WLM_G_MAX_NEST) {
            char m[96];
            wlm_fmt(m, sizeof m, "groups and repetitions nested deeper than %u", WLM_G_MAX_NEST);
            return perr(P, at, m);
        }
        node = new_ast(P, A_REP, node, lo, hi);
        if (node == INF) return INF;
    }
    return node;
}

/* items until '|', ')', the end or the next rule */
static uint32_t parse_seq(parser *P, uint32_t open_at) {
    /* item ids on a list of their own (nested groups add to kids meanwhile) */
    gvec items = { 0, 0, 0, 4 };
    uint32_t n = 0, node = INF;
    for (;;) {
        skip_ws(P);
        uint8_t c = cur(P);
        if (at_end(P) || c == '|' || c == ')') break;
        if (rule_ahead(P, P->pos)) {
            if (open_at != INF) {
                uint32_t line, col;
                char m[120];
                where(P, open_at, &line, &col);
                wlm_fmt(m, sizeof m, "the group opened at line %u, column %u is not closed before the next rule", line, col);
                vfree(&items);
                return perr(P, P->pos, m);
            }
            break;
        }
        uint32_t it = parse_item(P);
        if (P->failed) {
            vfree(&items);
            return INF;
        }
        if (!vgrow(&items, (uint64_t)n + 1)) {
            vfree(&items);
            return pnomem(P);
        }
        VAT(items, uint32_t, n++) = it;
        items.n = n;
    }
    if (n == 0) node = new_ast(P, A_EMPTY, 0, 0, 0);
    else if (n == 1) node = VAT(items, uint32_t, 0);
    else if (vgrow(&P->kids, (uint64_t)P->kids.n + n)) {
        uint32_t first = P->kids.n;
        for (uint32_t i = 0; i < n; i++) VAT(P->kids, uint32_t, P->kids.n++) = VAT(items, uint32_t, i);
        node = new_ast(P, A_SEQ, first, n, 0);
    } else node = pnomem(P);
    vfree(&items);
    return node;
}

/* sequences separated by '|' */
static uint32_t parse_alts(parser *P, uint32_t open_at) {
    gvec alts = { 0, 0, 0, 4 };
    uint32_t n = 0, node;
    for (;;) {
        uint32_t s = parse_seq(P, open_at);
        if (P->failed) {
            vfree(&alts);
            return INF;
        }
        if (!vgrow(&alts, (uint64_t)n + 1)) {
            vfree(&alts);
            return pnomem(P);
        }
        VAT(alts, uint32_t, n++) = s;
        alts.n = n;
        skip_ws(P);
        if (cur(P) != '|') break;
        P->pos++;
    }
    if (n == 1) node = VAT(alts, uint32_t, 0);
    else if (vgrow(&P->kids, (uint64_t)P->kids.n + n)) {
        uint32_t first = P->kids.n;
        for (uint32_t i = 0; i < n; i++) VAT(P->kids, uint32_t, P->kids.n++) = VAT(alts, uint32_t, i);
        node = new_ast(P, A_ALT, first, n, 0);
    } else node = pnomem(P);
    vfree(&alts);
    return node;
}

static void parse_grammar(parser *P) {
    skip_ws(P);
    if (at_end(P)) {
        perr(P, 0, "the grammar is empty: it needs at least a rule 'root ::= ...'");
        return;
    }
    while (!P->failed) {
        skip_ws(P);
        if (at_end(P)) break;
        uint32_t at = P->pos;
        if (!name_char(cur(P))) {
            if (cur(P) == ')') {
                perr(P, at, "')' without a '(' before it");
                return;
            }
            pexpect(P, "a rule name (letters, digits, '-' and '_') to start a rule 'name ::= ...'");
            return;
        }
        while (name_char(cur(P))) P->pos++;
        uint32_t n = P->pos - at;
        skip_ws(P);
        if (!(P->pos + 3 <= P->len && P->s[P->pos] == ':' && P->s[P->pos + 1] == ':' && P->s[P->pos + 2] == '=')) {
            char m[160];
            wlm_fmt(m, sizeof m, "'::=' after the rule name '%.*s'", (int)WLM_MIN(n, 60u), P->s + at);
            pexpect(P, m);
            return;
        }
        P->pos += 3;
        uint32_t r = rule_id(P, at, n);
        if (r == INF) return;
        if (VAT(P->rules, grule, r).def_at != INF) {
            uint32_t line, col;
            char m[160];
            where(P, VAT(P->rules, grule, r).def_at, &line, &col);
            wlm_fmt(m, sizeof m, "rule '%.*s' is defined twice (first at line %u, column %u)", (int)WLM_MIN(n, 60u), P->s + at, line, col);
            perr(P, at, m);
            return;
        }
        VAT(P->rules, grule, r).def_at = at;
        uint32_t body = parse_alts(P, INF);
        if (P->failed) return;
        VAT(P->rules, grule, r).body = body;
        skip_ws(P);
        if (at_end(P)) break;
        if (cur(P) == ')') {
            perr(P, P->pos, "')' without a '(' before it");
            return;
        }
        /* parse_seq stopped at a rule start: the loop goes on with it */
    }
}

/* ---- analysis on the syntax trees ---------------------------------------------------- */

/* the rules a tree calls (appended to out), and whether it loops */
static int tree_calls(parser *P, uint32_t node, gvec *out, uint32_t *loops) {
    ast a = VAT(P->ast, ast, node);
    switch (a.kind) {
    case A_CALL:
        if (!vgrow(out, (uint64_t)out->n + 1)) return 0;
        VAT(*out, uint32_t, out->n++) = a.a;
        return 1;
    case A_SEQ:
    case A_ALT:
        for (uint32_t i = 0; i < a.b; i++)
            if (!tree_calls(P, VAT(P->kids, uint32_t, a.a + i), out, loops)) return 0;
        return 1;
    case A_REP:
        if (a.c == INF) *loops = 1;
        return a.c == 0 ? 1 : tree_calls(P, a.a, out, loops);
    default: return 1;
    }
}

static uint32_t sat_add(uint32_t a, uint32_t b) { return a + b < a ? INF : a + b; }
static uint32_t sat_mul(uint32_t a, uint32_t b) { return b && a > INF / b ? INF : a * b; }

/* instructions a tree compiles to (inlined calls counted at their size) */
static uint32_t tree_size(parser *P, uint32_t node) {
    ast a = VAT(P->ast, ast, node);
    switch (a.kind) {
    case A_TERM: return 1;
    case A_CALL: {
        grule *r = &VAT(P->rules, grule, a.a);
        return r->inl ? r->size : 1;
    }
    case A_SEQ:
    case A_ALT: {
        uint32_t s = a.kind == A_ALT ? a.b - 1 : 0;
        for (uint32_t i = 0; i < a.b; i++) s = sat_add(s, tree_size(P, VAT(P->kids, uint32_t, a.a + i)));
        return s;
    }
    case A_REP: {
        uint32_t x = tree_size(P, a.a);
        if (a.c == INF) return sat_add(sat_mul(x, a.b), sat_add(x, 1));
        return sat_add(sat_mul(x, a.b), sat_mul(sat_add(x, 1), a.c - a.b));
    }
    default: return 0;
    }
}
static uint32_t tree_idepth(parser *P, uint32_t node) {
    ast a = VAT(P->ast, ast, node);
    uint32_t d = 0;
    if (a.kind == A_CALL) {
        grule *r = &VAT(P->rules, grule, a.a);
        return r->inl ? r->idepth + 1 : 0;
    }
    if (a.kind == A_SEQ || a.kind == A_ALT)
        for (uint32_t i = 0; i < a.b; i++) d = WLM_MAX(d, tree_idepth(P, VAT(P->kids, uint32_t, a.a + i)));
    if (a.kind == A_REP && a.c) d = tree_idepth(P, a.a);
    return d;
}

/* Strongly connected components of a graph in CSR form (adj[at[v] ..
 * at[v+1])), iteratively (Tarjan): comp[v] numbers them so that a
 * component comes after every component it reaches (callees first); order
 * receives the vertices in that order. Work arrays: 4 n u32. */
static uint32_t scc(uint32_t n, const uint32_t *at, const uint32_t *adj, uint32_t *comp, uint32_t *order, uint32_t *work) {
    uint32_t *idx = work, *low = work + n, *stk = work + 2 * n, *cs = work + 3 * n; /* cs: the DFS path */
    uint32_t *edge = order;                                                         /* each vertex's next edge, until `order` is written */
    uint32_t counter = 1, sp = 0, csp = 0, nc = 0;
    for (uint32_t v = 0; v < n; v++) {
        idx[v] = 0;
        comp[v] = INF;
    }
    for (uint32_t root = 0; root < n; root++) {
        if (idx[root]) continue;
        cs[csp++] = root;
        idx[root] = low[root] = counter++;
        stk[sp++] = root;
        edge[root] = at[root];
        while (csp) {
            uint32_t v = cs[csp - 1];
            if (edge[v] < at[v + 1]) {
                uint32_t w = adj[edge[v]++];
                if (!idx[w]) {
                    idx[w] = low[w] = counter++;
                    stk[sp++] = w;
                    edge[w] = at[w];
                    cs[csp++] = w;
                } else if (comp[w] == INF && idx[w] < low[v]) low[v] = idx[w];
                continue;
            }
            csp--;
            if (csp) {
                uint32_t u = cs[csp - 1];
                if (low[v] < low[u]) low[u] = low[v];
            }
            if (low[v] == idx[v]) {
                uint32_t w;
                do {
                    w = stk[--sp];
                    comp[w] = nc;
                } while (w != v);
                nc++;
            }
        }
    }
    /* vertices by component (components are numbered callees first) */
    uint32_t *cnt = work; /* idx/low no longer needed */
    for (uint32_t c = 0; c <= nc; c++) cnt[c] = 0;
    for (uint32_t v = 0; v < n; v++) cnt[comp[v] + 1]++;
    for (uint32_t c = 0; c < nc; c++) cnt[c + 1] += cnt[c];
    for (uint32_t v = 0; v < n; v++) order[cnt[comp[v]]++] = v;
    return nc;
}

/* ---- the program ------------------------------------------------------------------------ */

typedef struct builder {
    parser *P;
    gvec ins, todo;  /* instructions; rules still to compile */
    uint32_t n_prog; /* program rules so far */
    gvec prog_rule;  /* program rule -> parser rule */
} builder;

static uint32_t emit(builder *B, uint32_t op, uint32_t a, uint32_t b) {
    parser *P = B->P;
    if (P->failed) return INF;
    if (B->ins.n >= WLM_G_MAX_INSTR) {
        char m[160];
        wlm_fmt(m, sizeof m, "the grammar is too large: more than %u states once its repetitions are unrolled", WLM_G_MAX_INSTR);
        return perr(P, 0, m);
    }
    if (!vgrow(&B->ins, (uint64_t)B->ins.n + 1)) return pnomem(P);
    VAT(B->ins, wlm_ginstr, B->ins.n) = (wlm_ginstr){ op, a, b };
    return B->ins.n++;
}

/* the program rule of parser rule r (queued for compiling on first use) */
static uint32_t prog_of(builder *B, uint32_t r) {
    grule *R = &VAT(B->P->rules, grule, r);
    if (R->prog != INF) return R->prog;
    if (!vgrow(&B->todo, (uint64_t)B->todo.n + 1) || !vgrow(&B->prog_rule, (uint64_t)B->n_prog + 1)) return pnomem(B->P);
    VAT(B->todo, uint32_t, B->todo.n++) = r;
    VAT(B->prog_rule, uint32_t, B->n_prog) = r;
    B->prog_rule.n = B->n_prog + 1;
    return R->prog = B->n_prog++;
}

/* the code of tree `node` followed by `next`; returns its entry */
static uint32_t build(builder *B, uint32_t node, uint32_t next) {
    parser *P = B->P;
    if (P->failed) return INF;
    ast a = VAT(P->ast, ast, node);
    switch (a.kind) {
    case A_EMPTY: return next;
    case A_TERM: return emit(B, WLM_GI_TERM, a.a, next);
    case A_CALL: {
        grule *r = &VAT(P->rules, grule, a.a);
        if (r->inl) return build(B, r->body, next);
        uint32_t pr = prog_of(B, a.a);
        return pr == INF ? INF : emit(B, WLM_GI_CALL, pr, next);
    }
    case A_SEQ:
        for (uint32_t i = a.b; i-- > 0 && !P->failed;) next = build(B, VAT(P->kids, uint32_t, a.a + i), next);
        return next;
    case A_ALT: {
        uint32_t x = build(B, VAT(P->kids, uint32_t, a.a + a.b - 1), next);
        for (uint32_t i = a.b - 1; i-- > 0 && !P->failed;) {
            uint32_t e = build(B, VAT(P->kids, uint32_t, a.a + i), next);
            x = emit(B, WLM_GI_SPLIT, e, x);
        }
        return x;
    }
    case A_REP: {
        uint32_t tail = next;
        if (a.c == INF) { /* the loop: SPLIT(body -> back here, next) */
            uint32_t L = emit(B, WLM_GI_SPLIT, 0, next);
            if (L == INF) return INF;
            uint32_t body = build(B, a.a, L);
            if (body == INF) return INF;
            VAT(B->ins, wlm_ginstr, L).a = body;
            tail = L;
        } else { /* n - m nested optional copies: (x (x (x)?)?)? */
            for (uint32_t k = a.b; k < a.c && !P->failed; k++) tail = emit(B, WLM_GI_SPLIT, build(B, a.a, tail), next);
        }
        for (uint32_t k = 0; k < a.b && !P->failed; k++) tail = build(B, a.a, tail);
        return tail;
    }
    }
    return INF;
}

/* Least fixpoint over instructions: ok[i] when instruction i can reach
 * its rule's FINAL, reading characters (terms = 1) or not (terms = 0, so
 * ok = "can end without reading": nullable). CALL needs its rule's entry
 * and its return point. rdep: CSR of who depends on whom. */
static void fixpoint(const wlm_ginstr *ins, uint32_t n, const uint32_t *rule_start, const uint32_t *rat, const uint32_t *rdep,
                     int terms, uint8_t *ok, uint32_t *queue) {
    uint32_t qh = 0, qt = 0;
    for (uint32_t i = 0; i < n; i++) {
        ok[i] = ins[i].op == WLM_GI_FINAL;
        if (ok[i]) queue[qt++] = i;
    }
    while (qh < qt) {
        uint32_t x = queue[qh++];
        for (uint32_t e = rat[x]; e < rat[x + 1]; e++) {
            uint32_t d = rdep[e];
            if (ok[d]) continue;
            const wlm_ginstr *I = &ins[d];
            int now = 0;
            if (I->op == WLM_GI_SPLIT) now = 1;
            else if (I->op == WLM_GI_TERM) now = terms && ok[I->b];
            else if (I->op == WLM_GI_CALL) now = ok[I->b] && ok[rule_start[I->a]];
            if (now) {
                ok[d] = 1;
                queue[qt++] = d;
            }
        }
    }
}

static uint32_t rule_name_fail(parser *P, builder *B, uint32_t prog_rule, const char *fmt) {
    grule *r = &VAT(P->rules, grule, VAT(B->prog_rule, uint32_t, prog_rule));
    char m[240];
    wlm_fmt(m, sizeof m, fmt, (int)WLM_MIN(r->name_len, 60u), P->s + r->name);
    return perr(P, r->def_at, m);
}

/* the checks on the program: every rule can end; no left recursion that grows the stack */
static void check_program(builder *B, wlm_gprog *p) {
    parser *P = B->P;
    uint32_t n = p->n_ins, nr = p->n_rules;
    wlm_ginstr *ins = p->ins;
    /* reverse dependencies */
    uint32_t *rat = wlm_sys_alloc(((uint64_t)n + 1) * 4), *rdep = wlm_sys_alloc((uint64_t)3 * n * 4 + 4);
    uint32_t *queue = wlm_sys_alloc((uint64_t)n * 4 + 4);
    uint8_t *prod = wlm_sys_alloc(n + 1), *null = wlm_sys_alloc(n + 1);
    uint32_t *eat = wlm_sys_alloc(((uint64_t)nr + 1) * 4), *work = wlm_sys_alloc((uint64_t)4 * nr * 4 + 16);
    uint32_t *comp = wlm_sys_alloc((uint64_t)nr * 4 + 4), *order = wlm_sys_alloc((uint64_t)nr * 4 + 4);
    gvec edges = { 0, 0, 0, 8 }; /* (from << 32 | to), tail flag in the top bit of to */
    if (!rat || !rdep || !queue || !prod || !null || !eat || !work || !comp || !order) {
        pnomem(P);
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        const wlm_ginstr *I = &ins[i];
        if (I->op == WLM_GI_TERM) rat[I->b + 1]++;
        else if (I->op == WLM_GI_SPLIT) {
            rat[I->a + 1]++;
            rat[I->b + 1]++;
        } else if (I->op == WLM_GI_CALL) {
            rat[I->b + 1]++;
            rat[p->rule_start[I->a] + 1]++;
        }
    }
    for (uint32_t i = 0; i < n; i++) rat[i + 1] += rat[i];
    for (uint32_t i = 0; i < n; i++) queue[i] = rat[i];
    for (uint32_t i = 0; i < n; i++) {
        const wlm_ginstr *I = &ins[i];
        if (I->op == WLM_GI_TERM) rdep[queue[I->b]++] = i;
        else if (I->op == WLM_GI_SPLIT) {
            rdep[queue[I->a]++] = i;
            rdep[queue[I->b]++] = i;
        } else if (I->op == WLM_GI_CALL) {
            rdep[queue[I->b]++] = i;
            rdep[queue[p->rule_start[I->a]]++] = i;
        }
    }
    fixpoint(ins, n, p->rule_start, rat, rdep, 1, prod, queue);
    for (uint32_t r = 0; r < nr; r++) {
        if (!prod[p->rule_start[r]]) {
            rule_name_fail(P, B, r, "rule '%.*s' can never end: every way through it calls a rule that never ends (or itself) again");
            goto done;
        }
    }
    fixpoint(ins, n, p->rule_start, rat, rdep, 0, null, queue);
    /* left calls: from each rule's entry through SPLITs and calls of
     * rules that may read nothing, the calls reachable before any character */
    uint32_t *seen = rat; /* reused: stamp per instruction */
    for (uint32_t i = 0; i <= n; i++) seen[i] = INF;
    for (uint32_t r = 0; r < nr; r++) {
        uint32_t qt = 0;
        queue[qt++] = p->rule_start[r];
        seen[p->rule_start[r]] = r;
        while (qt) {
            const wlm_ginstr *I = &ins[queue[--qt]];
            uint32_t nx[2], k = 0;
            if (I->op == WLM_GI_SPLIT) {
                nx[k++] = I->a;
                nx[k++] = I->b;
            } else if (I->op == WLM_GI_CALL) {
                if (!vgrow(&edges, (uint64_t)edges.n + 1)) {
                    pnomem(P);
                    goto done;
                }
                uint32_t tail = ins[I->b].op == WLM_GI_FINAL;
                VAT(edges, uint64_t, edges.n++) = ((uint64_t)r << 32) | I->a | (tail ? 0x80000000u : 0);
                if (null[p->rule_start[I->a]]) nx[k++] = I->b;
            }
            for (uint32_t j = 0; j < k; j++)
                if (seen[nx[j]] != r) {
                    seen[nx[j]] = r;
                    queue[qt++] = nx[j];
                }
        }
    }
    /* components of the left-call graph: a call that is not a tail call
     * inside a component grows the stack without reading */
    for (uint32_t i = 0; i < edges.n; i++) eat[(VAT(edges, uint64_t, i) >> 32) + 1]++;
    for (uint32_t r = 0; r < nr; r++) eat[r + 1] += eat[r];
    for (uint32_t r = 0; r < nr; r++) comp[r] = eat[r];
    for (uint32_t i = 0; i < edges.n; i++) {
        uint64_t e = VAT(edges, uint64_t, i);
        queue[comp[e >> 32]++] = (uint32_t)e & 0x7fffffffu;
    }
    scc(nr, eat, queue, comp, order, work);
    for (uint32_t i = 0; i < edges.n; i++) {
        uint64_t e = VAT(edges, uint64_t, i);
        uint32_t from = (uint32_t)(e >> 32), to = (uint32_t)e & 0x7fffffffu, tail = (uint32_t)e >> 31;
        if (tail || comp[from] != comp[to]) continue;
        grule *a = &VAT(P->rules, grule, VAT(B->prog_rule, uint32_t, from)), *b = &VAT(P->rules, grule, VAT(B->prog_rule, uint32_t, to));
        char m[240];
        if (from == to)
            wlm_fmt(m, sizeof m, "rule '%.*s' is left-recursive: it can call itself before reading a character (write 'a ::= a x | y' as 'a ::= y x*')",
                    (int)WLM_MIN(a->name_len, 60u), P->s + a->name);
        else
            wlm_fmt(m, sizeof m, "left recursion: rule '%.*s' calls '%.*s' before reading a character, and '%.*s' leads back to '%.*s' the same way",
                    (int)WLM_MIN(a->name_len, 40u), P->s + a->name, (int)WLM_MIN(b->name_len, 40u), P->s + b->name,
                    (int)WLM_MIN(b->name_len, 40u), P->s + b->name, (int)WLM_MIN(a->name_len, 40u), P->s + a->name);
        perr(P, a->def_at, m);
        goto done;
    }
done:
    wlm_sys_free(rat);
    wlm_sys_free(rdep);
    wlm_sys_free(queue);
    wlm_sys_free(prod);
    wlm_sys_free(null);
    wlm_sys_free(eat);
    wlm_sys_free(work);
    wlm_sys_free(comp);
    wlm_sys_free(order);
    vfree(&edges);
}

/* rule analysis: recursion (components of the call graph), loops, sizes, which to inline */
static void analyse_rules(parser *P) {
    uint32_t nr = P->rules.n;
    gvec calls = { 0, 0, 0, 4 };
    uint32_t *at = wlm_sys_alloc(((uint64_t)nr + 1) * 4), *comp = wlm_sys_alloc((uint64_t)nr * 4 + 4);
    uint32_t *order = wlm_sys_alloc((uint64_t)nr * 4 + 4), *work = wlm_sys_alloc((uint64_t)4 * nr * 4 + 16);
    uint32_t *csize = wlm_sys_alloc((uint64_t)nr * 4 + 8);
    if (!at || !comp || !order || !work || !csize) {
        pnomem(P);
        goto done;
    }
    for (uint32_t r = 0; r < nr; r++) {
        grule *R = &VAT(P->rules, grule, r);
        at[r] = calls.n;
        uint32_t loops = 0;
        if (!tree_calls(P, R->body, &calls, &loops)) {
            pnomem(P);
            goto done;
        }
        R->loops = loops;
    }
    at[nr] = calls.n;
    uint32_t nc = scc(nr, at, calls.p ? calls.p : at, comp, order, work);
    for (uint32_t c = 0; c <= nc; c++) csize[c] = 0;
    for (uint32_t r = 0; r < nr; r++) csize[comp[r]]++;
    for (uint32_t r = 0; r < nr; r++) {
        grule *R = &VAT(P->rules, grule, r);
        R->recursive = csize[comp[r]] > 1;
        for (uint32_t e = at[r]; e < at[r + 1]; e++)
            if (VAT(calls, uint32_t, e) == r) R->recursive = 1;
    }
    /* callees first: sizes and inline depths of the rules they inline are known */
    for (uint32_t i = 0; i < nr; i++) {
        grule *R = &VAT(P->rules, grule, order[i]);
        R->inl = 0;
        if (R->recursive || R->loops) continue;
        uint32_t size = tree_size(P, R->body), depth = tree_idepth(P, R->body);
        R->size = size;
        R->idepth = depth;
        R->inl = size <= WLM_G_INLINE && depth < 8;
    }
done:
    wlm_sys_free(at);
    wlm_sys_free(comp);
    wlm_sys_free(order);
    wlm_sys_free(work);
    wlm_sys_free(csize);
    vfree(&calls);
}

void wlm_gprog_free(wlm_gprog *p) {
    if (!p) return;
    wlm_sys_free(p->mem);
    wlm_memset(p, 0, sizeof *p);
}

wlm_status wlm_gprog_compile(wlm_gprog *p, const char *text, uint32_t len, wlm_err *err) {
    wlm_err dummy;
    if (!err) err = &dummy;
    if (!p || (!text && len)) return wlm_fail(err, WLM_ERR_ARG, "wlm_gprog_compile: NULL argument");
    wlm_memset(p, 0, sizeof *p);
    if (len > WLM_G_MAX_TEXT) return wlm_fail(err, WLM_ERR_ARG, "grammar: the text has %u bytes, more than the limit (%u)", len, WLM_G_MAX_TEXT);
    parser P;
    wlm_memset(&P, 0, sizeof P);
    P.s = (const uint8_t *)text;
    P.len = len;
    P.err = err;
    P.ast.size = sizeof(ast);
    P.kids.size = 4;
    P.sets.size = sizeof(wlm_gset);
    P.ranges.size = 4;
    P.rules.size = sizeof(grule);
    P.cls.size = 8;
    P.rmask = 63;
    P.rhash = wlm_sys_alloc(64 * 4);
    builder B;
    wlm_memset(&B, 0, sizeof B);
    B.P = &P;
    B.ins.size = sizeof(wlm_ginstr);
    B.todo.size = 4;
    B.prog_rule.size = 4;
    if (!P.rhash) {
        pnomem(&P);
        goto done;
    }
    parse_grammar(&P);
    if (P.failed) goto done;
    /* every rule referenced is defined; root exists */
    uint32_t root = INF;
    for (uint32_t r = 0; r < P.rules.n; r++) {
        grule *R = &VAT(P.rules, grule, r);
        R->prog = INF;
        if (R->body == INF) {
            char m[160];
            wlm_fmt(m, sizeof m, "undefined rule '%.*s'", (int)WLM_MIN(R->name_len, 60u), P.s + R->name);
            perr(&P, R->ref_at, m);
            goto done;
        }
        if (R->name_len == 4 && wlm_memeq(P.s + R->name, "root", 4)) root = r;
    }
    if (root == INF) {
        perr(&P, P.len, "the grammar has no rule 'root' (generation starts there)");
        goto done;
    }
    analyse_rules(&P);
    if (P.failed) goto done;
    VAT(P.rules, grule, root).inl = 0;
    /* compile root, then every rule it reaches that is not inlined */
    uint32_t *rs = 0;
    prog_of(&B, root);
    for (uint32_t k = 0; k < B.todo.n && !P.failed; k++) {
        uint32_t r = VAT(B.todo, uint32_t, k);
        uint32_t fin = emit(&B, WLM_GI_FINAL, 0, 0);
        if (fin == INF) break;
        uint32_t start = build(&B, VAT(P.rules, grule, r).body, fin);
        if (start == INF) break;
        /* the entry of rule k: kept in the todo list's slot (replaced below) */
        VAT(B.todo, uint32_t, k) = start;
    }
    if (P.failed) goto done;
    /* one block: instructions, sets, ranges, rule entries */
    uint64_t bi = WLM_ALIGN_UP((uint64_t)B.ins.n * sizeof(wlm_ginstr), 64), bs = WLM_ALIGN_UP((uint64_t)P.sets.n * sizeof(wlm_gset), 64);
    uint64_t br = WLM_ALIGN_UP((uint64_t)P.ranges.n * 4 + 4, 64), bp = WLM_ALIGN_UP((uint64_t)B.n_prog * 4, 64);
    uint8_t *mem = wlm_sys_alloc(bi + bs + br + bp);
    if (!mem) {
        wlm_fail_nomem(err, "the compiled grammar", bi + bs + br + bp);
        P.failed = 1;
        goto done;
    }
    p->mem = mem;
    p->ins = (wlm_ginstr *)mem;
    p->n_ins = B.ins.n;
    p->sets = (wlm_gset *)(mem + bi);
    p->n_sets = P.sets.n;
    p->ranges = (uint32_t *)(mem + bi + bs);
    rs = (uint32_t *)(mem + bi + bs + br);
    p->rule_start = rs;
    p->n_rules = B.n_prog;
    p->root = 0;
    if (B.ins.n) wlm_memcpy(p->ins, B.ins.p, (size_t)B.ins.n * sizeof(wlm_ginstr));
    if (P.sets.n) wlm_memcpy(p->sets, P.sets.p, (size_t)P.sets.n * sizeof(wlm_gset));
    if (P.ranges.n) wlm_memcpy(p->ranges, P.ranges.p, (size_t)P.ranges.n * 4);
    for (uint32_t k = 0; k < B.n_prog; k++) rs[k] = VAT(B.todo, uint32_t, k);
    check_program(&B, p);
done:
    vfree(&P.ast);
    vfree(&P.kids);
    vfree(&P.sets);
    vfree(&P.ranges);
    vfree(&P.rules);
    vfree(&P.cls);
    wlm_sys_free(P.rhash);
    vfree(&B.ins);
    vfree(&B.todo);
    vfree(&B.prog_rule);
    if (P.failed) {
        wlm_gprog_free(p);
        return err->code ? err->code : WLM_ERR_ARG;
    }
    return WLM_OK;
}
