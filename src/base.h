/* Freestanding basics shared by every file of the core: memory, error
 * formatting, system allocation. No libc is used anywhere in src/ except by
 * the front ends (src/cli/). */
#ifndef WLM_BASE_H
#define WLM_BASE_H

#include <stddef.h>
#include <stdint.h>
#include "wlm.h"

/* The SIMD kernel sets this build compiles: the wasm builds by their target
 * features; native builds with -DWLM_SIMDE compile the same kernels through
 * SIMDe's implementation of the wasm SIMD intrinsics (simd128.h), and with
 * -DWLM_SIMDE_RELAXED also the relaxed-SIMD variants. */
#if defined(__wasm_simd128__) || defined(WLM_SIMDE)
#define WLM_SIMD128 1
#endif
#if defined(__wasm_relaxed_simd__) || (defined(WLM_SIMDE) && defined(WLM_SIMDE_RELAXED))
#define WLM_RELAXED 1
#endif

#define WLM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define WLM_MAX(a, b) ((a) > (b) ? (a) : (b))
#define WLM_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((uint64_t)(a)-1))

void wlm_memcpy(void *dst, const void *src, size_t n);
void wlm_memset(void *dst, int v, size_t n);
int wlm_memeq(const void *a, const void *b, size_t n);
size_t wlm_strlen(const char *s);

/* Unaligned little-endian loads (GGUF metadata is not aligned). */
static inline uint32_t wlm_rd32(const uint8_t *p) {
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline uint64_t wlm_rd64(const uint8_t *p) {
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
static inline float wlm_rdf32(const uint8_t *p) {
    float v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline void wlm_wr32(uint8_t *p, uint32_t v) { __builtin_memcpy(p, &v, 4); }
static inline void wlm_wr64(uint8_t *p, uint64_t v) { __builtin_memcpy(p, &v, 8); }

/* A 64-bit hash of n bytes, chained through `h` (the previous result, or any
 * seed): model fingerprints and saved-state checksums. Not cryptographic:
 * it catches corruption and mix-ups, not forgery. The same bits on every
 * platform (8-byte little-endian words, then the tail). */
uint64_t wlm_hash64(uint64_t h, const void *data, uint64_t n);

/* Error formatting: a tiny printf subset (%s %.*s %d %u %llu %x %llx %c %%).
 * Returns the status so callers can write `return wlm_fail(err, CODE, ...)`. */
wlm_status wlm_fail(wlm_err *err, wlm_status code, const char *fmt, ...);
/* Same formatter into a buffer; returns length (truncated to cap-1). */
uint32_t wlm_fmt(char *buf, uint32_t cap, const char *fmt, ...);

/* System memory. In wasm it is linear memory grown with memory.grow and
 * handed out by a first-fit allocator of large blocks (see sys.c);
 * natively it is malloc. Allocations are 64-byte aligned and zeroed. */
WLM_API void *wlm_sys_alloc(uint64_t bytes);
WLM_API void wlm_sys_free(void *p);
/* The most linear memory a wasm build addresses, and its default limit:
 * wasm32 4 GiB (65536 pages); wasm64 (memory64) 16 GiB (262144 pages, the
 * most V8 gives a memory64 memory; the Makefile's --max-memory says the same). */
#if defined(__wasm64__)
#define WLM_WASM_MEMORY_MAX ((uint64_t)262144 * 65536)
#else
#define WLM_WASM_MEMORY_MAX ((uint64_t)65536 * 65536)
#endif
/* Upper bound on the bytes in use (wasm: WLM_WASM_MEMORY_MAX; native:
 * 8 GiB); wlm_sys_set_limit changes it. */
WLM_API uint64_t wlm_sys_limit(void);
WLM_API uint64_t wlm_sys_in_use(void);
WLM_API void wlm_sys_set_limit(uint64_t bytes);
/* The one way every failed allocation is reported: "<what> needs N more
 * bytes of memory (X in use, limit M)", so that N + X > M whenever the limit
 * is the cause; below the limit it adds that the memory could not grow. */
wlm_status wlm_fail_nomem(wlm_err *err, const char *what, uint64_t bytes);

/* A bump arena inside one wlm_sys_alloc block: every buffer of a context is
 * carved from one planned block. */
typedef struct wlm_arena {
    uint8_t *base;
    uint64_t cap, used;
} wlm_arena;
void *wlm_arena_take(wlm_arena *a, uint64_t bytes); /* 64-byte aligned; NULL if it does not fit */

/* In-place ascending sorts: insertion up to 32 values, heap sort above (no
 * allocation, O(n log n) for the long lists a hostile grammar can make). */
void wlm_sort_u32(uint32_t *a, uint32_t n);
void wlm_sort_u64(uint64_t *a, uint32_t n);

#endif
