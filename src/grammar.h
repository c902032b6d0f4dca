/* Grammar-constrained decoding (docs/grammar.md).
 *
 * grammar.c       GBNF text -> a program: one instruction per state of a
 *                 recursive automaton over Unicode code points (rules call
 *                 rules), checked (undefined rules, left recursion, rules
 *                 that can never end) and with small loop-free rules inlined.
 * grammar_mask.c  the vocabulary as a byte trie (wlm_gvocab), the recognizer
 *                 (a set of parse stacks per state, hash-consed, with a cache
 *                 of byte transitions) and the allowed-token masks: per
 *                 terminal instruction the tokens it accepts on its own
 *                 (context-independent, precomputed once) and the trie nodes
 *                 where a token leaves its rule (checked against the stack
 *                 below, per state, cached).
 * The public API is in wlm.h (wlm_gvocab_*, wlm_grammar_*). */
#ifndef WLM_GRAMMAR_H
#define WLM_GRAMMAR_H

#include "base.h"
#include "vocab.h"

/* ---- limits (every one is reported by name when a grammar passes it) ------ */
#define WLM_G_MAX_TEXT (4u << 20)  /* bytes of grammar text */
#define WLM_G_MAX_NEST 128u        /* nested parentheses */
#define WLM_G_MAX_REPEAT 10000u    /* m and n of {m,n} */
#define WLM_G_MAX_INSTR (1u << 18) /* instructions after repetitions are unrolled */
#define WLM_G_MAX_RULES 65536u     /* rules, named and generated */
#define WLM_G_INLINE 64u           /* a loop-free, non-recursive rule of at most this
                                        * many instructions is inlined where it is called */
/* runtime tables (fixed per grammar; a recognizer that needs more reports it) */
#define WLM_G_MAX_DEPTH 4000u    /* parse stack depth (nesting) */
#define WLM_G_MAX_STACKS 1024u   /* parse stacks alive at once in one state */
#define WLM_G_MAX_EXPAND 16384u  /* stacks visited by one step's closure */
#define WLM_G_NODES (1u << 16)   /* stack nodes */
#define WLM_G_CFGS (1u << 15)    /* recognizer configurations */
#define WLM_G_CFG_STK (1u << 17) /* stack ids held by configurations */
#define WLM_G_TRANS (1u << 15)   /* cached byte transitions (configurations without a table) */
#define WLM_G_DENSE 1024u        /* configurations with a table of their 256 transitions */
#define WLM_G_MASKS 48u          /* cached token masks */
#define WLM_G_STATES 256u        /* recognizer states (sequences) per grammar */
_Static_assert(WLM_G_CFGS < 0xffff, "configuration ids are stored in 16 bits in the transition tables");

/* ---- the vocabulary as a byte trie ----------------------------------------- */

/* Nodes in preorder: node 0 is the root (the empty prefix); the subtree of
 * node i is [i, end[i]); node i adds byte[i] to its parent's prefix and
 * sits at depth[i] (= prefix length). The tokens whose bytes are exactly
 * node i's prefix are tok[tok_at[i] .. tok_at[i + 1]). Only tokens that can
 * be matched by bytes are in it: not end-of-generation, control, unknown or
 * unused tokens, not tokens without bytes. */
struct wlm_gvocab {
    uint32_t n_vocab, n_words; /* tokens; 32-bit words of a mask */
    uint32_t n_nodes, max_depth, n_tokens;
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *end, *tok_at;
    int32_t *tok;
    int32_t eog[16];
    uint32_t n_eog; /* end-of-generation tokens: allowed where the grammar may end */
    void *mem;
};

/* Builds the trie of a vocabulary (the model-free core of wlm_gvocab_new). */
wlm_status wlm_gvocab_build(wlm_gvocab **out, const wlm_vocab *v, wlm_err *err);

/* ---- the program ------------------------------------------------------------ */

enum { WLM_GI_TERM = 0, /* a = character set, b = next: reads one code point in the set */
       WLM_GI_CALL,     /* a = rule, b = next (the return point) */
       WLM_GI_SPLIT,    /* a, b: either */
       WLM_GI_EPS,      /* a: go on there */
       WLM_GI_FINAL };  /* the end of a rule: return */

typedef struct wlm_ginstr {
    uint32_t op, a, b;
} wlm_ginstr;

/* A set of code points: ASCII as a bitmap, the rest as sorted disjoint
 * ranges (lo, hi inclusive) at ranges[2 off ..]. */
typedef struct wlm_gset {
    uint32_t ascii[4];
    uint32_t off, n;
} wlm_gset;

typedef struct wlm_gprog {
    wlm_ginstr *ins;
    uint32_t n_ins;
    wlm_gset *sets;
    uint32_t n_sets;
    uint32_t *ranges;
    uint32_t *rule_start;
    uint32_t n_rules; /* entry instruction of each rule */
    uint32_t root;    /* the root rule */
    void *mem;
} wlm_gprog;

/* Parses and checks GBNF text (grammar.c). Errors name line:column and what
 * was expected there. */
wlm_status wlm_gprog_compile(wlm_gprog *p, const char *text, uint32_t len, wlm_err *err);
void wlm_gprog_free(wlm_gprog *p);
int wlm_gset_has(const wlm_gprog *p, uint32_t set, uint32_t cp);
/* does the set hold a code point in [lo, hi]? */
int wlm_gset_meets(const wlm_gprog *p, uint32_t set, uint32_t lo, uint32_t hi);

/* ---- the recognizer (grammar_mask.c) --------------------------------------- */

/* A parse stack is a node: (instruction, parent node); node 0 is the bottom.
 * Nodes are hash-consed, so a stack is one id. */
typedef struct wlm_gnode {
    uint32_t ins, parent, next;
    uint32_t depth;
} wlm_gnode;

/* A configuration: the sorted set of parse stacks (each topped by a TERM
 * instruction), the bytes of a code point read so far (UTF-8 split across
 * tokens), and whether some parse has ended (the grammar may end here; in
 * a rule's own walk: the token leaves the rule here). Hash-consed:
 * configuration 0 is the dead one. */
typedef struct wlm_gcfg {
    uint32_t hash, off, n, next;
    uint8_t pend[4];
    uint8_t n_pend, ended, pad[2];
} wlm_gcfg;

/* What a TERM instruction accepts on its own (computed once, on first use
 * or at compile time): the tokens it accepts without leaving its rule (a
 * list of ids, or a bitset when that is smaller), and the trie nodes where
 * a token leaves the rule with bytes still to read. */
typedef struct wlm_gterm {
    uint32_t flags;      /* 1: computed; 2: acc is a bitset */
    uint32_t acc, n_acc; /* offset in tdata, count of ids (or words) */
    uint32_t pop, n_pop; /* offset in tdata, count of trie nodes */
} wlm_gterm;

enum { WLM_GS_TERMS = 0,
       WLM_GS_TERMS_DONE,
       WLM_GS_TERM_NODES,
       WLM_GS_MASKS,
       WLM_GS_MASK_HITS,
       WLM_GS_WALK_NODES,
       WLM_GS_GCS,
       WLM_GS_TRANS_HITS,
       WLM_GS_TRANS_MISSES,
       WLM_GS_CFGS,
       WLM_GS_NODES,
       WLM_GS_TDATA_BYTES,
       WLM_GS_BYTES,
       WLM_GS_TRUNCATED,
       WLM_GS_COUNT };

struct wlm_grammar {
    const wlm_gvocab *v;
    wlm_gprog p;
    wlm_gterm *term; /* per instruction (TERM ones used) */
    uint32_t *tdata, n_tdata, cap_tdata;
    /* parse stacks */
    wlm_gnode *nodes;
    uint32_t n_nodes, *node_head;
    /* configurations and the stack ids they hold */
    wlm_gcfg *cfgs;
    uint32_t n_cfgs, *cfg_head;
    uint32_t *stk;
    uint32_t n_stk;
    uint64_t *trans;             /* high half: (cfg << 8 | byte) + 1; low half: the next cfg */
    uint16_t *dense, *cfg_dense; /* per configuration its table + 1 (0: none); tables of 256 next
                                        * configurations (0xffff: not computed yet) */
    uint32_t n_dense;
    uint8_t *cfg_ended; /* cfgs[c].ended, packed for the walks */
    /* the mask cache: slot k holds the mask of configuration mask_cfg[k] (0: empty) */
    uint32_t *masks, mask_cfg[WLM_G_MASKS], mask_used[WLM_G_MASKS], mask_count[WLM_G_MASKS], mask_clock;
    uint32_t *scratch_mask; /* a mask without its end-of-generation tokens */
    /* recognizer states: their configuration (0xffffffff: free) */
    uint32_t state[WLM_G_STATES];
    uint32_t start_cfg; /* the configuration before any byte */
    /* work space of a closure and of the walks */
    uint64_t *work, *seen;
    uint32_t *seen_tag, seen_stamp;
    uint32_t *out, n_out, n_visit, ended;
    uint32_t *walk_cfg, *marks, *node_map, *cfg_map;
    uint8_t *tokbuf;
    uint32_t fail;
    wlm_err ferr; /* a table overflowed during the current call */
    uint64_t stat[WLM_GS_COUNT];
    void *mem;
};

/* Internal (tests, fuzz): the configuration reached from cfg by one byte
 * (0 = dead), and the configuration before any byte. A failure of the
 * tables sets *err and returns 0 with err->code != WLM_OK. */
uint32_t wlm_grammar_step(wlm_grammar *g, uint32_t cfg, uint8_t byte, wlm_err *err);
/* The token mask of a configuration, computed without the per-terminal
 * tables or the caches: every token's bytes run through wlm_grammar_step
 * (the reference the tests hold the fast path to). */
wlm_status wlm_grammar_mask_direct(wlm_grammar *g, uint32_t cfg, uint32_t *mask, wlm_err *err);
/* Compiles against a model-free trie (tests). */
wlm_status wlm_grammar_new(wlm_grammar **out, const wlm_gvocab *v, const char *text, uint32_t len, uint32_t precompute, wlm_err *err);

#endif
