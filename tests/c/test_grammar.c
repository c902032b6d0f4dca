/* Grammar tests (src/grammar.c, src/grammar_mask.c): the GBNF parser
 * (every construct, every error with its line:column), the recognizer on
 * strings (UTF-8 split across calls, deep nesting, nullable loops, limits),
 * the token masks against the direct reference (every token's bytes run
 * through the recognizer) on a hand-built vocabulary, stories260K,
 * SentencePiece llama and byte-level BPE vocabularies along random
 * grammatical walks, and the sampler's allowed set (a forbidden token is
 * never drawn at any temperature; the distribution is renormalised). */
#include "tst.h"
#include "vocab_util.h"
#include "../../src/grammar.h"

/* ---- a small SentencePiece vocabulary built in memory ------------------------ */

static const char *const k_pieces[] = {
    "\xe2\x96\x81",
    "a",
    "b",
    "c",
    "ab",
    "abc",
    ("\xe2\x96\x81"
     "a"),
    "x",
    "y",
    "z",
    "1",
    "2",
    "12",
    "+",
    "*",
    "(",
    ")",
    "((",
    "{",
    "}",
    "\"",
    "{\"",
    "\":",
    "\",",
    "\"}",
    ",",
    ":",
    "[",
    "]",
    "true",
    "false",
    "null",
    "\xc3\xa9",
    "\xc3\xa9t\xc3\xa9",
    "\xf0\x9f\x98\x80",
    "\\",
    "\\n",
    "\\\"",
    "a\"",
    "ab\",",
    "0",
    "-",
    ".",
    "e",
    "E",
    " ",
    "  ",
    "\n",
    "x1",
    "if",
    "then",
    "else",
    "end",
    "=",
    ";",
};
#define N_PIECES (sizeof k_pieces / sizeof k_pieces[0])

/* <unk> <s> </s> <|ctl|> <0x00>..<0xFF> then k_pieces; stories-like types */
static int small_vocab(tvocab *t) {
    uint32_t n = 4 + 256 + N_PIECES;
    const char **tok = malloc(sizeof(char *) * n);
    char(*bytes)[8] = malloc(8 * 256);
    float *sc = malloc(4 * n);
    int32_t *ty = malloc(4 * n);
    tok[0] = "<unk>";
    tok[1] = "<s>";
    tok[2] = "</s>";
    tok[3] = "<|ctl|>";
    ty[0] = 2;
    ty[1] = 3;
    ty[2] = 3;
    ty[3] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], 8, "<0x%02X>", b);
        tok[4 + b] = bytes[b];
        ty[4 + b] = 6;
    }
    for (uint32_t i = 0; i < N_PIECES; i++) {
        tok[260 + i] = k_pieces[i];
        ty[260 + i] = 1;
    }
    for (uint32_t i = 0; i < n; i++) sc[i] = -(float)i;
    gbuf b;
    gb_begin(&b);
    gb_kv_str(&b, "tokenizer.ggml.model", "llama");
    gb_tokens(&b, tok, n);
    gb_scores(&b, sc, n);
    gb_types(&b, ty, n);
    gb_kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
    gb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    gb_kv_u32(&b, "tokenizer.ggml.unknown_token_id", 0);
    unsigned long long size;
    unsigned char *data = gb_end(&b, &size);
    wlm_err err = { 0 };
    int ok = tv_load_bytes(t, data, size, &err);
    if (!ok) fprintf(stderr, "  small vocab: %s\n", err.msg);
    free(tok);
    free(bytes);
    free(sc);
    free(ty);
    return ok;
}

/* one shared trie for the recognizer tests */
static tvocab g_tv;
static wlm_gvocab *g_gv;
static wlm_gvocab *small_gv(void) {
    if (!g_gv) {
        if (!small_vocab(&g_tv)) return NULL;
        wlm_err err = { 0 };
        if (wlm_gvocab_build(&g_gv, &g_tv.v, &err) != WLM_OK) {
            fprintf(stderr, "  trie: %s\n", err.msg);
            return NULL;
        }
    }
    return g_gv;
}

static wlm_grammar *compile(const char *text, wlm_err *err) {
    wlm_grammar *g = NULL;
    memset(err, 0, sizeof *err);
    if (!small_gv()) return NULL;
    if (wlm_grammar_new(&g, g_gv, text, (uint32_t)strlen(text), 0, err) != WLM_OK) return NULL;
    return g;
}

/* 1: the whole text is a sentence; 0: a prefix only; -1: refused; -2: no grammar */
static int match(const char *grammar, const char *text, uint32_t len) {
    wlm_err err;
    wlm_grammar *g = compile(grammar, &err);
    if (!g) {
        fprintf(stderr, "  compile %s: %s\n", grammar, err.msg);
        return -2;
    }
    uint32_t s;
    int r = -2;
    if (wlm_grammar_state_new(g, &s, &err) == WLM_OK)
        r = wlm_grammar_accept_bytes(g, s, text, len, &err) != WLM_OK ? -1 : wlm_grammar_can_end(g, s);
    wlm_grammar_free(g);
    return r;
}
#define FULL(G, T) CHECKF(match(G, T, (uint32_t)strlen(T)) == 1, "%s on \"%s\"", G, T)
#define PREFIX(G, T) CHECKF(match(G, T, (uint32_t)strlen(T)) == 0, "%s on \"%s\" (prefix)", G, T)
#define REFUSE(G, T) CHECKF(match(G, T, (uint32_t)strlen(T)) == -1, "%s refuses \"%s\"", G, T)

/* compiling fails with a message containing each of the given parts */
static int fails_with(const char *grammar, const char *part1, const char *part2) {
    wlm_err err;
    wlm_grammar *g = compile(grammar, &err);
    if (g) {
        wlm_grammar_free(g);
        fprintf(stderr, "  compiled: %s\n", grammar);
        return 0;
    }
    int ok = err.code != WLM_OK && strstr(err.msg, part1) && (!part2 || strstr(err.msg, part2));
    if (!ok) fprintf(stderr, "  %s\n  -> %s\n", grammar, err.msg);
    return ok;
}
#define FAILS(G, A, B) CHECK(fails_with(G, A, B))

/* wlm_sort_u32 / wlm_sort_u64 (src/base.c: a class's ranges, a closure's
 * stacks): ascending and a permutation of the input, on both sides of the
 * insertion-sort cut-off, with duplicates and values above 2^32 */
TEST(grammar_sorts_both_widths) {
    static uint32_t a[2000];
    static uint64_t b[2000];
    const uint32_t sizes[] = { 0, 1, 2, 31, 32, 33, 100, 2000 };
    for (int k = 0; k < 8; k++) {
        uint32_t n = sizes[k];
        uint64_t sa = 0, sb = 0, xa = 0, xb = 0;
        for (uint32_t i = 0; i < n; i++) {
            a[i] = tst_rand() % 50; /* many duplicates */
            b[i] = ((uint64_t)(tst_rand() % 1000) << 32) | tst_rand();
            sa += a[i];
            sb += b[i];
            xa ^= a[i] * 2654435761u;
            xb ^= b[i] * 11400714819323198485ull;
        }
        wlm_sort_u32(a, n);
        wlm_sort_u64(b, n);
        for (uint32_t i = 0; i < n; i++) {
            if (i) {
                CHECKF(a[i - 1] <= a[i], "u32 n=%u: out of order at %u", n, i);
                CHECKF(b[i - 1] <= b[i], "u64 n=%u: out of order at %u", n, i);
            }
            sa -= a[i];
            sb -= b[i];
            xa ^= a[i] * 2654435761u;
            xb ^= b[i] * 11400714819323198485ull;
        }
        CHECKF(sa == 0 && xa == 0 && sb == 0 && xb == 0, "n=%u: not a permutation of the input", n);
    }
}

TEST(grammar_literals_and_sequences) {
    FULL("root ::= \"abc\"", "abc");
    PREFIX("root ::= \"abc\"", "ab");
    REFUSE("root ::= \"abc\"", "abd");
    REFUSE("root ::= \"abc\"", "abcd");
    FULL("root ::= \"a\" \"b\"  \"c\"", "abc");
    FULL("root ::= \"\"", "");
    PREFIX("root ::= \"x\" \"\" \"y\"", "x");
    /* escapes in strings */
    FULL("root ::= \"\\n\\t\\r\\\\\\\"\\x41\\u00e9\\U0001F600\\'\\/\"", "\n\t\r\\\"A\xc3\xa9\xf0\x9f\x98\x80'/");
    /* UTF-8 in the grammar text */
    FULL("root ::= \"\xc3\xa9t\xc3\xa9\"", "\xc3\xa9t\xc3\xa9");
}

TEST(grammar_alternation_grouping_repetition) {
    const char *g = "root ::= (\"a\" | \"b\") \"c\" | \"d\"";
    FULL(g, "ac");
    FULL(g, "bc");
    FULL(g, "d");
    REFUSE(g, "c");
    REFUSE(g, "dc");
    FULL("root ::= \"a\"*", "");
    FULL("root ::= \"a\"*", "aaaa");
    PREFIX("root ::= \"a\"+", "");
    FULL("root ::= \"a\"+", "aaa");
    FULL("root ::= \"a\"? \"b\"", "b");
    FULL("root ::= \"a\"? \"b\"", "ab");
    REFUSE("root ::= \"a\"? \"b\"", "aab");
    FULL("root ::= \"a\"{3}", "aaa");
    PREFIX("root ::= \"a\"{3}", "aa");
    REFUSE("root ::= \"a\"{3}", "aaaa");
    PREFIX("root ::= \"a\"{2,}", "a");
    FULL("root ::= \"a\"{2,}", "aaaaaa");
    FULL("root ::= \"a\"{1,3} \"b\"", "ab");
    FULL("root ::= \"a\"{1,3} \"b\"", "aaab");
    REFUSE("root ::= \"a\"{1,3} \"b\"", "aaaab");
    FULL("root ::= \"a\"{,2} \"b\"", "b");
    FULL("root ::= \"a\"{ , 2 } \"b\"", "aab");
    REFUSE("root ::= \"a\"{,2} \"b\"", "aaab");
    FULL("root ::= \"a\"{0} \"b\"", "b");
    REFUSE("root ::= \"a\"{0} \"b\"", "ab");
    FULL("root ::= (\"ab\" | \"c\")* \"!\"", "abcab!");
    FULL("root ::= \"a\" * \"b\"", "aaab"); /* a space before the operator */
    FULL("root ::= (\"x\"+)? \"y\"", "xxy");
    /* long sequences and many alternatives (their item lists grow past their first capacity) */
    const char *seq = "root ::= \"a\" b \"c\" b \"e\" b \"g\" b \"i\" b \"k\" b \"m\" b \"o\" b \"q\" b \"s\" b \"u\"\nb ::= [0-9]";
    FULL(seq, "a1c2e3g4i5k6m7o8q9s0u");
    REFUSE(seq, "a1c2e3g4i5k6m7o8q9s0a");
    REFUSE(seq, "a1c2e3g4i5k6m7o8q9sxu");
    const char *alt = "root ::= (\"a\" | \"b\" | \"c\" | \"d\" | \"e\" | \"f\" | \"g\" | \"h\" | \"i\" | \"j\" | \"k\" | \"l\" | \"m\" | \"n\" | \"o\" | \"p\" | \"q\" | \"r\" | \"s\" | \"t\")+";
    FULL(alt, "abcdefghijklmnopqrst");
    REFUSE(alt, "u");
}

TEST(grammar_classes_and_any) {
    FULL("root ::= [a-z]+", "hello");
    REFUSE("root ::= [a-z]+", "Hello");
    FULL("root ::= [^a-z]+", "HELLO1");
    REFUSE("root ::= [^a-z]+", "Hx");
    FULL("root ::= [a-]+", "a-a");
    FULL("root ::= [-a]+", "-a");
    REFUSE("root ::= [a-]+", "b");
    FULL("root ::= [\\]\\\\\\[]+", "]\\[");
    FULL("root ::= [\\x41-\\x43]+", "ABC");
    REFUSE("root ::= [\\x41-\\x43]", "D");
    FULL("root ::= [\\u00e0-\\u00ff]", "\xc3\xa9");
    REFUSE("root ::= [\\u00e0-\\u00ff]", "\xc3\x80");
    FULL("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x98\x80");
    FULL("root ::= [\xc3\xa9\xc3\xa8]", "\xc3\xa8"); /* raw UTF-8 in a class */
    FULL("root ::= [^\"\\\\]*", "any \xe2\x82\xac text");
    FULL("root ::= .", "\xf0\x9f\x98\x80");
    FULL("root ::= ...", "a\xc3\xa9z");
    REFUSE("root ::= .", "ab");
    /* bytes that are not UTF-8 are never a character */
    REFUSE("root ::= .*", "\xff");
    REFUSE("root ::= .*", "\xc3\x28");
    REFUSE("root ::= .*", "\xed\xa0\x80");
    REFUSE("root ::= .*", "\xc0\x80");
    PREFIX("root ::= .*  \"!\"", "\xc3"); /* a character split across calls */
}

TEST(grammar_rules_comments_layout) {
    const char *g =
        "# a comment line\n"
        "root ::= greeting (\", \" name-list)? # trailing comment\n"
        "greeting ::=\n"
        "    \"hi\"\n"
        "  | \"hello\"\n"
        "name-list ::= name_1 (\" and \" name_1)*\n"
        "name_1 ::= [A-Z] [a-z]*\n";
    FULL(g, "hi");
    FULL(g, "hello, Ann and Bo");
    REFUSE(g, "hello, ann");
    FULL("root ::= a\na ::= | \"x\"", "");
    FULL("root ::= a\na ::= | \"x\"", "x");
    FULL("root ::= b b ::= \"q\"", "q"); /* a rule may follow on the same line */
    FULL("root ::= (\n  \"a\"\n  \"b\"\n)", "ab");
    FULL("root::=\"a\"|\"b\"", "b");
    /* the layout of llama.cpp's grammars/json.gbnf: bodies on the next lines, '|' at line ends, comments */
    const char *json =
        "root   ::= object\n"
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n\n"
        "object ::=\n"
        "  \"{\" ws (\n"
        "            string \":\" ws value\n"
        "    (\",\" ws string \":\" ws value)*\n"
        "  )? \"}\" ws\n\n"
        "array  ::=\n"
        "  \"[\" ws (\n"
        "            value\n"
        "    (\",\" ws value)*\n"
        "  )? \"]\" ws\n\n"
        "string ::=\n"
        "  \"\\\"\" (\n"
        "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
        "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
        "  )* \"\\\"\" ws\n\n"
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n\n"
        "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
    FULL(json, "{\"a\": [1, -2.5e3, \"x\\u00e9\\n\"], \"b\": {\"c\": null, \"d\": true}}");
    REFUSE(json, "{\"a\": [1,]}");
    REFUSE(json, "{\"a\": \"x\ty\"}"); /* a raw tab in a string */
}

TEST(grammar_recursion) {
    /* right recursion is a tail call: no stack growth over a long input */
    wlm_err err;
    wlm_grammar *g = compile("root ::= \"a\" root | \"b\"", &err);
    REQUIRE(g);
    uint32_t s;
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    for (int i = 0; i < 20000; i++) REQUIRE(wlm_grammar_accept_bytes(g, s, "a", 1, &err) == WLM_OK);
    CHECK(!wlm_grammar_can_end(g, s));
    CHECK(wlm_grammar_accept_bytes(g, s, "b", 1, &err) == WLM_OK && wlm_grammar_can_end(g, s));
    CHECKF(g->n_nodes < 64, "%u nodes", g->n_nodes);
    wlm_grammar_free(g);
    /* nesting: balanced parentheses, bounded by the stack depth limit */
    const char *par = "root ::= \"(\" root \")\" root | \"\"";
    FULL(par, "(()(()))");
    PREFIX(par, "(()");
    REFUSE(par, "())");
    g = compile(par, &err);
    REQUIRE(g);
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    int depth = 0;
    while (depth < 5000 && wlm_grammar_accept_bytes(g, s, "(", 1, &err) == WLM_OK) depth++;
    CHECKF(depth >= 1000 && depth < 5000, "nesting stopped at %d", depth);
    CHECK(wlm_grammar_stat(g, WLM_GS_TRUNCATED) > 0);
    wlm_grammar_free(g);
    /* nullable bodies under a loop end their closure */
    FULL("root ::= (\"a\"?)* \"b\"", "aab");
    FULL("root ::= (\"\")* \"x\"", "x");
    FULL("root ::= (a | b)* \"!\"\na ::= \"a\"?\nb ::= \"b\"*", "abba!");
    /* a call before reading that is the last thing of its rule is fine */
    FULL("root ::= \"x\" | root", "x");
    /* mutual recursion through non-nullable prefixes */
    const char *e = "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\nfactor ::= [0-9]+ | \"(\" expr \")\"";
    FULL(e, "1+2*(3-4)/5");
    PREFIX(e, "(1+");
    REFUSE(e, "1+*2");
}

TEST(grammar_errors) {
    FAILS("", "line 1, column 1", "empty");
    FAILS("  # only a comment\n", "empty", NULL);
    FAILS("root \"a\"", "line 1, column 6", "expected '::=' after the rule name 'root'");
    FAILS("root ::= a", "undefined rule 'a'", "line 1, column 10");
    FAILS("top ::= \"a\"", "no rule 'root'", NULL);
    FAILS("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1", "defined twice (first at line 1, column 1)");
    FAILS("root ::= \"abc", "unterminated string", "line 1, column 10");
    FAILS("root ::= \"ab\ncd\"", "unterminated string", NULL);
    FAILS("root ::= [abc", "unterminated character class", NULL);
    FAILS("root ::= []", "empty character class", NULL);
    FAILS("root ::= [z-a]", "range U+007A-U+0061", "ends below its start");
    FAILS("root ::= \"\\q\"", "unknown escape \\q", NULL);
    FAILS("root ::= \"\\x4\"", "\\x needs 2 hex digits", NULL);
    FAILS("root ::= \"\\uD800\"", "not a Unicode scalar value", NULL);
    FAILS("root ::= \"\\U00110000\"", "not a Unicode scalar value", NULL);
    FAILS("root ::= (\"a\" \"b\"", "expected ')'", NULL);
    FAILS("root ::= (\"a\"\nx ::= \"b\"", "not closed before the next rule", "line 1, column 10");
    FAILS("root ::= \"a\" )", "')' without a '('", NULL);
    FAILS("root ::= * \"a\"", "'*' with nothing before it", NULL);
    FAILS("root ::= \"a\"{3,2}", "maximum is below the minimum", NULL);
    FAILS("root ::= \"a\"{}", "expected a count", NULL);
    FAILS("root ::= \"a\"{2", "expected '}'", NULL);
    FAILS("root ::= \"a\"{10001}", "above the limit (10000)", NULL);
    FAILS("root ::= \"a\" ! \"b\"", "expected a rule name, a \"string\"", "found '!'");
    FAILS("root ::= [^\\x00-\\U0010FFFF]", "matches no character", NULL);
    FAILS("root ::= \"\xff\"", "invalid UTF-8", NULL);
    FAILS("root ::= \"a\"\n\n  \"b\" !", "line 3, column 7", "found '!'");
    FAILS("root ::= \"a\"\nx y ::= \"b\"", "undefined rule 'x'", "line 2, column 1"); /* x continues root's body */
    /* limits */
    char deep[800];
    int k = 0;
    k += snprintf(deep + k, sizeof deep - k, "root ::= ");
    for (int i = 0; i < 200; i++) deep[k++] = '(';
    deep[k++] = '"';
    deep[k++] = 'a';
    deep[k++] = '"';
    for (int i = 0; i < 200; i++) deep[k++] = ')';
    deep[k] = 0;
    FAILS(deep, "nested deeper than 128", NULL);
    FAILS("root ::= ((\"a\"{10000}){10000}){10}", "too large", NULL);
    /* left recursion and rules that never end */
    FAILS("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]", "rule 'expr' is left-recursive", "line 2, column 1");
    FAILS("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\"", "left recursion: rule '", "leads back");
    FAILS("root ::= a\na ::= \"\"? a \"x\" | \"y\"", "left-recursive", NULL);
    FAILS("root ::= \"a\" root", "rule 'root' can never end", NULL);
    FAILS("root ::= a | \"x\"\na ::= \"y\" a", "rule 'a' can never end", NULL);
}

TEST(grammar_utf8_split_across_calls) {
    wlm_err err;
    wlm_grammar *g = compile("root ::= \"<\" [\\u00e0-\\u00ff\\U0001F600]+ \">\"", &err);
    REQUIRE(g);
    uint32_t s;
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    CHECK(wlm_grammar_accept_bytes(g, s, "<\xc3", 2, &err) == WLM_OK);
    CHECK(!wlm_grammar_can_end(g, s));
    CHECK(wlm_grammar_accept_bytes(g, s, "\xa9\xf0\x9f", 3, &err) == WLM_OK);
    CHECK(wlm_grammar_accept_bytes(g, s, "\x98", 1, &err) == WLM_OK);
    uint32_t before = g->state[s];
    CHECK(wlm_grammar_accept_bytes(g, s, "\x81", 1, &err) != WLM_OK); /* U+1F601 is not in the class */
    CHECK(g->state[s] == before);                                     /* a refused byte changes nothing */
    CHECK(wlm_grammar_accept_bytes(g, s, "\x80>", 2, &err) == WLM_OK && wlm_grammar_can_end(g, s));
    /* a lead byte whose every completion is outside the class is refused at once */
    uint32_t t;
    REQUIRE(wlm_grammar_state_new(g, &t, &err) == WLM_OK);
    CHECK(wlm_grammar_accept_bytes(g, t, "<\xe2", 2, &err) != WLM_OK);
    CHECK(wlm_grammar_accept_bytes(g, t, "<\xc3", 2, &err) == WLM_OK);
    CHECK(wlm_grammar_accept_bytes(g, t, "\x9f", 1, &err) != WLM_OK); /* U+00DF: below the range */
    wlm_grammar_free(g);
}

TEST(grammar_states_tokens_and_eog) {
    wlm_err err;
    wlm_gvocab *gv = small_gv();
    REQUIRE(gv);
    wlm_grammar *g = compile("root ::= \"ab\" \"c\"?", &err);
    REQUIRE(g);
    int32_t ab = wlm_vocab_find(&g_tv.v, "ab", 2), abc = wlm_vocab_find(&g_tv.v, "abc", 3), c = wlm_vocab_find(&g_tv.v, "c", 1);
    REQUIRE(ab > 0 && abc > 0 && c > 0);
    uint32_t s, t;
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    CHECK(wlm_grammar_accept(g, s, 2, &err) != WLM_OK && strstr(err.msg, "before the grammar is complete"));
    CHECK(wlm_grammar_accept(g, s, 3, &err) != WLM_OK && strstr(err.msg, "control token"));
    CHECK(wlm_grammar_accept(g, s, c, &err) != WLM_OK && strstr(err.msg, "not allowed here"));
    CHECK(wlm_grammar_accept(g, s, ab, &err) == WLM_OK && wlm_grammar_can_end(g, s));
    REQUIRE(wlm_grammar_state_new(g, &t, &err) == WLM_OK);
    CHECK(wlm_grammar_state_copy(g, t, s, &err) == WLM_OK); /* a fork */
    const uint32_t *m;
    uint32_t n = 0;
    REQUIRE(wlm_grammar_mask(g, s, 0, &m, &n, &err) == WLM_OK);
    CHECK(n >= 2 && (m[c >> 5] >> (c & 31) & 1) && (m[0] >> 2 & 1) && !(m[0] >> 3 & 1) && !(m[ab >> 5] >> (ab & 31) & 1));
    REQUIRE(wlm_grammar_mask(g, s, WLM_GRAMMAR_NO_EOG, &m, &n, &err) == WLM_OK);
    CHECK(!(m[0] >> 2 & 1) && (m[c >> 5] >> (c & 31) & 1));
    CHECK(wlm_grammar_accept(g, s, c, &err) == WLM_OK);
    REQUIRE(wlm_grammar_mask(g, s, 0, &m, &n, &err) == WLM_OK);
    CHECK(n == 0 && wlm_grammar_can_end(g, s) && (m[0] >> 2 & 1)); /* complete: only EOS */
    CHECK(wlm_grammar_accept(g, s, 2, &err) == WLM_OK);
    CHECK(wlm_grammar_accept(g, s, c, &err) != WLM_OK);   /* nothing after the end */
    CHECK(wlm_grammar_can_end(g, t));                     /* the fork did not move */
    CHECK(wlm_grammar_accept(g, t, abc, &err) != WLM_OK); /* "ab" + "abc" */
    wlm_grammar_state_free(g, t);
    CHECK(wlm_grammar_accept(g, t, c, &err) != WLM_OK && strstr(err.msg, "no recognizer state"));
    /* every state slot in use */
    uint32_t k = 0, x;
    while (wlm_grammar_state_new(g, &x, &err) == WLM_OK) k++;
    CHECK(k == WLM_G_STATES - 1 && strstr(err.msg, "in use"));
    wlm_grammar_free(g);
}

/* ---- masks against the direct reference ---------------------------------------- */

static const char *const k_grammars[] = {
    /* JSON, as grammars generated from schemas write it */
    "root ::= object\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n",
    /* arithmetic */
    "root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\nterm ::= ident | num | \"(\" ws expr \")\" ws\n"
    "ident ::= [a-z] [a-z0-9_]* ws\nnum ::= [0-9]+ ws\nws ::= [ \\t\\n]*\n",
    /* characters outside ASCII, any character */
    "root ::= (\"\xc3\xa9t\xc3\xa9\" | [\\u00e0-\\u00ff]+ | \"\\U0001F600\" | \"<\" . \">\")* \"!\"\n",
    /* a tiny language */
    "root ::= stmt+\nstmt ::= \"if \" cond \" then \" stmt+ \" end\" | ident \" = \" expr \";\" | \"\\n\"\n"
    "cond ::= expr (\"<\" | \"=\") expr\nexpr ::= ident | [0-9]+ | \"(\" expr \" + \" expr \")\"\nident ::= [a-z]{1,3}\n",
};

static uint32_t lcg(uint32_t *r) {
    *r = *r * 1664525u + 1013904223u;
    return *r >> 8;
}

/* Random walks through grammar gi over trie gv (vocabulary voc): at each
 * step the fast mask equals the direct one; then an allowed token (or, one
 * time in four, a random allowed byte string cut mid-character) is taken. */
static void walk_check(const wlm_gvocab *gv, const char *grammar, uint32_t seed, int steps, const char *what) {
    wlm_err err = { 0 };
    wlm_grammar *g = NULL;
    if (wlm_grammar_compile(&g, gv, grammar, (uint32_t)strlen(grammar), &err) != WLM_OK) {
        fprintf(stderr, "  %s: %s\n", what, err.msg);
        tst_failed_checks++;
        return;
    }
    uint32_t nw = gv->n_words, *ref = malloc(4 * nw), r = seed, s;
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    for (int step = 0; step < steps; step++) {
        const uint32_t *m;
        uint32_t n = 0;
        if (wlm_grammar_mask(g, s, 0, &m, &n, &err) != WLM_OK) {
            fprintf(stderr, "  %s: %s\n", what, err.msg);
            tst_failed_checks++;
            break;
        }
        uint32_t *fast = malloc(4 * nw);
        memcpy(fast, m, 4 * nw);
        CHECK(wlm_grammar_mask_direct(g, g->state[s], ref, &err) == WLM_OK);
        int diff = -1, count = 0;
        for (uint32_t t = 0; t < gv->n_vocab; t++) {
            int a = fast[t >> 5] >> (t & 31) & 1, b = ref[t >> 5] >> (t & 31) & 1;
            if (a != b && diff < 0) diff = (int)t;
            count += a;
        }
        CHECKF(diff < 0, "%s seed %u step %d: token %d fast %d direct %d", what, seed, step, diff,
               diff >= 0 ? (int)(fast[diff >> 5] >> (diff & 31) & 1) : 0, diff >= 0 ? (int)(ref[diff >> 5] >> (diff & 31) & 1) : 0);
        if (diff >= 0) {
            free(fast);
            break;
        }
        if (count == 0 || (n == 0 && wlm_grammar_can_end(g, s))) {
            free(fast);
            break;
        }
        /* pick the k-th allowed non-EOG token */
        uint32_t k = n ? lcg(&r) % n : 0, pick = 0;
        for (uint32_t t = 0; t < gv->n_vocab; t++) {
            if (!(fast[t >> 5] >> (t & 31) & 1)) continue;
            int eog = 0;
            for (uint32_t e = 0; e < gv->n_eog; e++) eog |= gv->eog[e] == (int32_t)t;
            if (eog) continue;
            if (k-- == 0) {
                pick = t;
                break;
            }
        }
        free(fast);
        if (wlm_grammar_accept(g, s, (int32_t)pick, &err) != WLM_OK) {
            fprintf(stderr, "  %s: %s\n", what, err.msg);
            tst_failed_checks++;
            break;
        }
    }
    free(ref);
    wlm_grammar_free(g);
}

TEST(grammar_mask_matches_direct_small_vocab) {
    REQUIRE(small_gv());
    for (uint32_t gi = 0; gi < sizeof k_grammars / sizeof k_grammars[0]; gi++)
        for (uint32_t seed = 1; seed <= 12; seed++) walk_check(g_gv, k_grammars[gi], seed * 7919 + gi, 40, "small vocab");
}

static void vocab_walks(const char *rel, int seeds, int steps) {
    tvocab t;
    if (!tv_load(&t, rel)) {
        tst_failed_checks++;
        return;
    }
    wlm_gvocab *gv = NULL;
    wlm_err err = { 0 };
    if (wlm_gvocab_build(&gv, &t.v, &err) != WLM_OK) {
        fprintf(stderr, "  %s: %s\n", rel, err.msg);
        tst_failed_checks++;
        tv_free(&t);
        return;
    }
    for (uint32_t gi = 0; gi < sizeof k_grammars / sizeof k_grammars[0]; gi++)
        for (int seed = 1; seed <= seeds; seed++) walk_check(gv, k_grammars[gi], (uint32_t)seed * 104729u + gi, steps, rel);
    wlm_gvocab_free(gv);
    tv_free(&t);
}

TEST(grammar_mask_matches_direct_stories260k) {
    unsigned long long size;
    unsigned char *raw = tst_read_file(tst_path("models/stories260K.gguf"), &size);
    REQUIRE(raw);
    tvocab t;
    wlm_err err = { 0 };
    REQUIRE(tv_load_bytes(&t, raw, size, &err));
    wlm_gvocab *gv = NULL;
    REQUIRE(wlm_gvocab_build(&gv, &t.v, &err) == WLM_OK);
    CHECK(gv->n_eog >= 1 && gv->eog[0] == 2);
    for (uint32_t gi = 0; gi < sizeof k_grammars / sizeof k_grammars[0]; gi++)
        for (int seed = 1; seed <= 6; seed++) walk_check(gv, k_grammars[gi], (uint32_t)seed * 31 + gi, 40, "stories260K");
    wlm_gvocab_free(gv);
    tv_free(&t);
}

TEST(grammar_mask_matches_direct_llama_spm) { vocab_walks("vocab/ggml-vocab-llama-spm.gguf", 2, 25); }
TEST(grammar_mask_matches_direct_gpt2_bpe) { vocab_walks("vocab/ggml-vocab-gpt-2.gguf", 2, 25); }

/* the trie holds every byte-matchable token once, in preorder */
TEST(grammar_vocab_trie) {
    tvocab t;
    REQUIRE(tv_load(&t, "vocab/ggml-vocab-gpt-2.gguf"));
    wlm_gvocab *gv = NULL;
    wlm_err err = { 0 };
    REQUIRE(wlm_gvocab_build(&gv, &t.v, &err) == WLM_OK);
    CHECK(gv->n_tokens + gv->n_eog <= gv->n_vocab && gv->n_tokens > 50000);
    CHECK(gv->end[0] == gv->n_nodes && gv->depth[0] == 0);
    /* rebuild each token's bytes from the trie and compare */
    unsigned char path[4096];
    char tb[4096];
    int bad = 0;
    for (uint32_t i = 1; i < gv->n_nodes && !bad; i++) {
        path[gv->depth[i] - 1] = gv->byte[i];
        if (gv->end[i] <= i || gv->end[i] > gv->end[0]) bad = 1;
        for (uint32_t j = gv->tok_at[i]; j < gv->tok_at[i + 1]; j++) {
            uint32_t n = wlm_vocab_token_bytes(&t.v, gv->tok[j], tb, sizeof tb);
            if (n != gv->depth[i] || memcmp(tb, path, n) != 0) bad = 1;
        }
    }
    CHECK(!bad);
    CHECK(gv->tok_at[0] == 0 && gv->tok_at[gv->n_nodes] == gv->n_tokens);
    wlm_gvocab_free(gv);
    tv_free(&t);
}

/* ---- the sampler's allowed set ------------------------------------------------------- */

TEST(grammar_sampler_allow) {
    unsigned long long size;
    unsigned char *raw = tst_read_file(tst_path("models/stories260K.gguf"), &size);
    REQUIRE(raw);
    unsigned char *file = tst_sys_copy(raw, size);
    free(raw);
    wlm_model *m = NULL;
    wlm_ctx *c = NULL;
    wlm_err err = { 0 };
    REQUIRE(wlm_model_load(&m, file, size, &err) == WLM_OK);
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    cp.n_ctx = 64;
    REQUIRE(wlm_ctx_new(&c, m, &cp, &err) == WLM_OK);
    uint32_t nv = wlm_model_hparams(m)->n_vocab, allow[16] = { 0 };
    float *l = malloc(4 * nv);
    /* the allowed tokens are the least likely ones */
    for (uint32_t i = 0; i < nv; i++) l[i] = (float)(i % 97) * 0.3f;
    uint32_t ids[] = { 0, 5, 97, 194, 300 };
    for (uint32_t i = 0; i < 5; i++) allow[ids[i] >> 5] |= 1u << (ids[i] & 31);
    float temps[] = { 0.0f, 1e-4f, 0.7f, 1.0f, 5.0f, 1000.0f };
    wlm_rng rng;
    wlm_rng_seed(&rng, 7);
    int outside = 0, seen[5] = { 0 };
    for (int ti = 0; ti < 6; ti++) {
        wlm_sampler_params sp;
        wlm_sampler_default_params(&sp);
        sp.temperature = temps[ti];
        sp.allow = allow;
        if (ti == 5) {
            sp.top_k = 0;
            sp.top_p = 1;
            sp.min_p = 0;
        }
        for (int k = 0; k < 400; k++) {
            int32_t tok = -1;
            REQUIRE(wlm_sample(c, l, &sp, NULL, 0, &rng, &tok, NULL, &err) == WLM_OK);
            int in = 0;
            for (int i = 0; i < 5; i++)
                if ((uint32_t)tok == ids[i]) {
                    in = 1;
                    seen[i]++;
                }
            outside += !in;
        }
    }
    CHECK(outside == 0);
    for (int i = 0; i < 5; i++) CHECKF(seen[i] > 0, "allowed token %u never drawn", ids[i]);
    /* the distribution is renormalised over the allowed set */
    wlm_sampler_params sp;
    wlm_sampler_default_params(&sp);
    sp.temperature = 1;
    sp.top_k = 0;
    sp.top_p = 1;
    sp.min_p = 0;
    sp.repeat_penalty = 1;
    sp.allow = allow;
    int32_t did[16];
    float dp[16];
    uint32_t k = wlm_sample_dist(c, l, &sp, NULL, 0, did, dp, 16);
    CHECK(k == 5);
    double z = 0;
    for (int i = 0; i < 5; i++) z += exp(l[ids[i]]);
    for (uint32_t i = 0; i < k; i++) {
        uint32_t t = (uint32_t)did[i];
        CHECKF(fabs(dp[i] - exp(l[t]) / z) < 1e-5, "token %u: %g vs %g", t, dp[i], exp(l[t]) / z);
    }
    /* greedy picks the best allowed token; a forbidden draft is never accepted */
    sp.temperature = 0;
    int32_t tok = -1, acc = -1;
    REQUIRE(wlm_sample(c, l, &sp, NULL, 0, &rng, &tok, NULL, &err) == WLM_OK);
    CHECK(tok == 300);
    for (int ti = 0; ti < 4; ti++) {
        sp.temperature = temps[ti + 1];
        for (int r = 0; r < 50; r++) {
            int32_t q_id = 96;
            float q_p = 1;
            REQUIRE(wlm_spec_accept(c, l, &sp, NULL, 0, 96, &q_id, &q_p, 1, &rng, &tok, &acc, NULL, &err) == WLM_OK);
            CHECK(!acc && (allow[tok >> 5] >> (tok & 31) & 1));
        }
    }
    /* nothing allowed: a clear error, never a token */
    uint32_t none[16] = { 0 };
    sp.allow = none;
    sp.temperature = 1;
    CHECK(wlm_sample(c, l, &sp, NULL, 0, &rng, &tok, NULL, &err) != WLM_OK && strstr(err.msg, "no allowed token"));
    free(l);
    wlm_ctx_free(c);
    wlm_model_free(m);
    wlm_sys_free(file);
}

static int masks_agree(wlm_grammar *g, uint32_t s, const char *what) {
    const uint32_t *m;
    uint32_t n;
    wlm_err err = { 0 };
    uint32_t nw = g->v->n_words, *ref = malloc(4 * nw);
    int ok = wlm_grammar_mask(g, s, 0, &m, &n, &err) == WLM_OK && wlm_grammar_mask_direct(g, g->state[s], ref, &err) == WLM_OK;
    if (ok) ok = memcmp(m, ref, 4 * nw) == 0;
    if (!ok) fprintf(stderr, "  masks differ: %s %s\n", what, err.msg);
    free(ref);
    return ok;
}

/* a state in the middle of a character: only tokens that complete it (or continue it) */
TEST(grammar_mask_pending_utf8) {
    REQUIRE(small_gv());
    wlm_err err;
    wlm_grammar *g = compile("root ::= ([\\u00e0-\\u00ff] | \"\\U0001F600\" | [a-c])+ \"!\"", &err);
    REQUIRE(g);
    const char *prefixes[] = { "\xc3", "a\xf0", "a\xf0\x9f", "a\xf0\x9f\x98", "\xc3\xa9" };
    for (int i = 0; i < 5; i++) {
        uint32_t s;
        REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
        REQUIRE(wlm_grammar_accept_bytes(g, s, prefixes[i], (uint32_t)strlen(prefixes[i]), &err) == WLM_OK);
        CHECK(masks_agree(g, s, prefixes[i]));
        const uint32_t *m;
        uint32_t n;
        REQUIRE(wlm_grammar_mask(g, s, 0, &m, &n, &err) == WLM_OK);
        int32_t a9 = 4 + 0xA9, a0 = 4 + 0xA0, x98 = 4 + 0x98, x80 = 4 + 0x80;
        if (i == 0) CHECK((m[a9 >> 5] >> (a9 & 31) & 1) && !(m[x80 >> 5] >> (x80 & 31) & 1) && n == 32); /* <0xA0>..<0xBF> */
        if (i == 2) CHECK((m[x98 >> 5] >> (x98 & 31) & 1) && !(m[a0 >> 5] >> (a0 & 31) & 1) && n == 1);
        wlm_grammar_state_free(g, s);
    }
    wlm_grammar_free(g);
    /* the same on byte-level BPE pieces that end inside a character */
    tvocab t;
    REQUIRE(tv_load(&t, "vocab/ggml-vocab-gpt-2.gguf"));
    wlm_gvocab *gv = NULL;
    REQUIRE(wlm_gvocab_build(&gv, &t.v, &err) == WLM_OK);
    const char *text = "root ::= ([\\u00e0-\\u00ff] | \"\\U0001F600\" | [a-z ])+ \"!\"";
    REQUIRE(wlm_grammar_compile(&g, gv, text, (uint32_t)strlen(text), &err) == WLM_OK);
    for (int i = 0; i < 5; i++) {
        uint32_t s;
        REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
        REQUIRE(wlm_grammar_accept_bytes(g, s, prefixes[i], (uint32_t)strlen(prefixes[i]), &err) == WLM_OK);
        CHECK(masks_agree(g, s, prefixes[i]));
        wlm_grammar_state_free(g, s);
    }
    wlm_grammar_free(g);
    wlm_gvocab_free(gv);
    tv_free(&t);
}

/* many configurations: the tables are collected between calls and live
 * states keep working (their masks still equal the reference) */
TEST(grammar_gc_keeps_states) {
    REQUIRE(small_gv());
    wlm_err err;
    wlm_grammar *g = compile("root ::= ([a-c] [a-c]? [a-c]?){0,9000} \"!\"", &err);
    REQUIRE(g);
    uint32_t s, t;
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    REQUIRE(wlm_grammar_state_new(g, &t, &err) == WLM_OK);
    REQUIRE(wlm_grammar_accept_bytes(g, t, "ab", 2, &err) == WLM_OK);
    int i = 0;
    for (; i < 24000 && wlm_grammar_stat(g, WLM_GS_GCS) < 2; i++) {
        if (wlm_grammar_accept_bytes(g, s, &"abc"[i % 3], 1, &err) != WLM_OK) {
            fprintf(stderr, "  %d: %s\n", i, err.msg);
            break;
        }
        if (i % 997 == 0) CHECK(masks_agree(g, s, "during"));
    }
    CHECKF(wlm_grammar_stat(g, WLM_GS_GCS) >= 2, "%d bytes, %u configurations, no collection", i, g->n_cfgs);
    CHECK(masks_agree(g, s, "after") && masks_agree(g, t, "other state"));
    CHECK(wlm_grammar_accept_bytes(g, t, "c!", 2, &err) == WLM_OK && wlm_grammar_can_end(g, t));
    CHECK(wlm_grammar_accept_bytes(g, s, "!", 1, &err) == WLM_OK && wlm_grammar_can_end(g, s));
    wlm_grammar_free(g);
}

/* a vocabulary without byte tokens: a grammar can need a character no token
 * spells, a dead end the mask reports as no allowed token and no end */
TEST(grammar_dead_end) {
    const char *tok[] = { "<unk>", "<s>", "</s>", "a", "b", ("\xe2\x96\x81"
                                                             "a") };
    int32_t ty[] = { 2, 3, 3, 1, 1, 1 };
    float sc[] = { 0, 0, 0, -1, -2, -3 };
    gbuf b;
    gb_begin(&b);
    gb_kv_str(&b, "tokenizer.ggml.model", "llama");
    gb_tokens(&b, tok, 6);
    gb_scores(&b, sc, 6);
    gb_types(&b, ty, 6);
    gb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    unsigned long long size;
    unsigned char *data = gb_end(&b, &size);
    tvocab t;
    wlm_err err = { 0 };
    REQUIRE(tv_load_bytes(&t, data, size, &err));
    wlm_gvocab *gv = NULL;
    REQUIRE(wlm_gvocab_build(&gv, &t.v, &err) == WLM_OK);
    CHECK(gv->n_tokens == 3 && gv->n_eog == 1);
    wlm_grammar *g = NULL;
    const char *text = "root ::= \"a\" \"c\" | \"b\"";
    REQUIRE(wlm_grammar_compile(&g, gv, text, (uint32_t)strlen(text), &err) == WLM_OK);
    uint32_t s;
    REQUIRE(wlm_grammar_state_new(g, &s, &err) == WLM_OK);
    const uint32_t *m;
    uint32_t n = 0;
    REQUIRE(wlm_grammar_mask(g, s, 0, &m, &n, &err) == WLM_OK);
    CHECK(n == 2 && m[0] == ((1u << 3) | (1u << 4)));
    REQUIRE(wlm_grammar_accept(g, s, 3, &err) == WLM_OK);
    REQUIRE(wlm_grammar_mask(g, s, 0, &m, &n, &err) == WLM_OK);
    CHECK(n == 0 && m[0] == 0 && !wlm_grammar_can_end(g, s));
    wlm_grammar_free(g);
    wlm_gvocab_free(gv);
    tv_free(&t);
}

/* ---- seeded generations pinned to their tokens ------------------------------------- */

/* stories260K generating from BOS with a seed, with and without a grammar,
 * through the whole loop (mask, sample, accept, eval). The tokens were
 * recorded before the sampler's fast paths (gathering a sparse mask's
 * tokens, the SIMD threshold scans): they hold every path of the sampler to
 * the distribution and order it had, natively and in wasm (make test-wasm).
 * A mismatch prints the tokens got. */
#define PIN_TOKENS 40
typedef struct pin_case {
    const char *what, *grammar;
    float temperature, repeat_penalty, typical_p;
    uint32_t top_k;
    float top_p, min_p;
    int bias; /* a logit bias on a few tokens, one of them -inf */
    uint64_t seed;
    int32_t want[PIN_TOKENS];
} pin_case;

static const char k_pin_list[] = "root ::= (\"[\" [a-z]{1,8} (\",\" \" \"? [a-z]{1,8}){0,4} \"]\" \"\\n\")*";
static const char k_pin_text[] = "root ::= ([A-Z] [a-z ,.]{0,60} \"\\n\")*";

static pin_case k_pins[] = {
    { "plain, default filters", NULL, 0.8f, 1.0f, 1.0f, 40, 0.95f, 0.05f, 0, 42, { 403, 407, 261, 378, 432, 383, 286, 261, 376, 268, 414, 422, 395, 405, 426, 405, 401, 396, 267, 337, 322, 265, 282, 295, 433, 335, 345, 357, 426, 385, 328, 432, 366, 272, 277, 264, 261, 370, 262, 415 } },
    { "plain, every token (radix sort)", NULL, 1.3f, 1.0f, 1.0f, 0, 1.0f, 0.0f, 0, 5, { 403, 407, 261, 378, 432, 322, 261, 410, 456, 425, 417, 316, 297, 316, 432, 383, 286, 261, 268, 414, 419, 419, 422, 270, 277, 372, 426, 359, 413, 286, 399, 262, 417, 340, 269, 404, 330, 344, 294, 302 } },
    { "plain, penalty, typical, bias", NULL, 0.9f, 1.3f, 0.9f, 40, 0.95f, 0.05f, 1, 11, { 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 269, 279, 420, 412, 424, 335, 311, 374, 419, 426, 385, 328, 432, 358, 394 } },
    { "list grammar, default filters", k_pin_list, 0.8f, 1.0f, 1.0f, 40, 0.95f, 0.05f, 0, 7, { 508, 419, 432, 383, 432, 383, 432, 261, 416, 288, 412, 421, 419, 432, 298, 276, 302, 285, 422, 509, 13, 94, 421, 417, 411, 276, 419, 432, 344, 419, 427, 411, 429, 417, 302, 432, 269, 431, 411, 295 } },
    { "list grammar, every token", k_pin_list, 1.5f, 1.0f, 1.0f, 0, 1.0f, 0.0f, 0, 3, { 94, 433, 331, 432, 261, 431, 413, 285, 380, 411, 432, 383, 276, 419, 432, 383, 432, 383, 419, 293, 509, 13, 508, 422, 412, 341, 419, 419, 432, 268, 421, 425, 411, 422, 432, 398, 413, 289, 429, 444 } },
    { "text grammar, penalty, typical, bias", k_pin_text, 0.9f, 1.3f, 0.9f, 40, 0.95f, 0.05f, 1, 9, { 441, 416, 411, 328, 432, 261, 376, 298, 315, 421, 395, 410, 293, 311, 357, 343, 269, 279, 380, 418, 422, 426, 13, 448, 415, 290, 411, 366, 382, 276, 337, 299, 322, 265, 282, 295, 433, 432, 358, 394 } },
    { "text grammar, greedy", k_pin_text, 0.0f, 1.1f, 1.0f, 40, 0.95f, 0.05f, 0, 1, { 441, 328, 432, 261, 376, 298, 315, 421, 395, 410, 293, 261, 416, 334, 341, 284, 303, 263, 415, 414, 401, 396, 267, 337, 322, 13, 440, 411, 394, 261, 370, 259, 276, 411, 426, 410, 13, 434, 260, 268 } },
};

TEST(grammar_pinned_generations) {
    unsigned long long size;
    unsigned char *raw = tst_read_file(tst_path("models/stories260K.gguf"), &size);
    REQUIRE(raw);
    unsigned char *file = tst_sys_copy(raw, size);
    free(raw);
    wlm_model *m = NULL;
    wlm_ctx *c = NULL;
    wlm_gvocab *gv = NULL;
    wlm_err err = { 0 };
    REQUIRE(wlm_model_load(&m, file, size, &err) == WLM_OK);
    wlm_ctx_params cp;
    wlm_ctx_default_params(&cp);
    cp.n_ctx = 64;
    REQUIRE(wlm_ctx_new(&c, m, &cp, &err) == WLM_OK);
    REQUIRE(wlm_gvocab_new(&gv, m, &err) == WLM_OK);
    for (uint32_t k = 0; k < sizeof k_pins / sizeof k_pins[0]; k++) {
        const pin_case *pc = &k_pins[k];
        wlm_grammar *g = NULL;
        uint32_t gs = 0;
        if (pc->grammar) {
            REQUIRE(wlm_grammar_compile(&g, gv, pc->grammar, (uint32_t)strlen(pc->grammar), &err) == WLM_OK);
            REQUIRE(wlm_grammar_state_new(g, &gs, &err) == WLM_OK);
        }
        wlm_sampler_params sp;
        wlm_sampler_default_params(&sp);
        sp.temperature = pc->temperature;
        sp.repeat_penalty = pc->repeat_penalty;
        sp.typical_p = pc->typical_p;
        sp.top_k = pc->top_k;
        sp.top_p = pc->top_p;
        sp.min_p = pc->min_p;
        wlm_logit_bias biases[] = { { 13, 2.5f }, { 300, -1.0f }, { 29, -__builtin_inff() }, { 66, 4.0f } };
        if (pc->bias) {
            sp.biases = biases;
            sp.n_biases = 4;
        }
        wlm_rng rng;
        wlm_rng_seed(&rng, pc->seed);
        wlm_ctx_reset(c);
        int32_t hist[PIN_TOKENS + 1], got[PIN_TOKENS];
        uint32_t nh = 0;
        hist[nh++] = 1;
        REQUIRE(wlm_eval(c, hist, 1, &err) == WLM_OK);
        for (int i = 0; i < PIN_TOKENS; i++) {
            if (g) REQUIRE(wlm_grammar_mask(g, gs, WLM_GRAMMAR_NO_EOG, &sp.allow, NULL, &err) == WLM_OK);
            int32_t t = -1;
            REQUIRE(wlm_sample(c, wlm_ctx_logits(c), &sp, hist, nh, &rng, &t, NULL, &err) == WLM_OK);
            if (g) REQUIRE(wlm_grammar_accept(g, gs, t, &err) == WLM_OK);
            got[i] = t;
            hist[nh++] = t;
            REQUIRE(wlm_eval(c, &t, 1, &err) == WLM_OK);
        }
        if (memcmp(got, pc->want, sizeof got)) {
            tst_failed_checks++;
            fprintf(stderr, "  %s (seed %llu): got {", pc->what, (unsigned long long)pc->seed);
            for (int i = 0; i < PIN_TOKENS; i++) fprintf(stderr, " %d,", got[i]);
            fprintf(stderr, " }\n");
        }
        wlm_grammar_free(g);
    }
    wlm_gvocab_free(gv);
    wlm_ctx_free(c);
    wlm_model_free(m);
    wlm_sys_free(file);
}
