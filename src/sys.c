/* System memory for the engine.
 *
 * wasm: the module owns linear memory above __heap_base. Large blocks
 * (file bytes, model tables, a context's planned block) are handed out
 * first-fit from an address-ordered list and coalesced on free; memory grows
 * with memory.grow when no free block fits. There are only a handful of
 * blocks per model, so a list is enough. Only the coordinating thread
 * allocates.
 *
 * native: malloc/free with 64-byte alignment, counted against a limit. */
#if !defined(__wasm__) || defined(__wasi__)
#define _GNU_SOURCE
#endif
#include "base.h"

#define WLM_SYS_HDR 64u

#if defined(__wasm__) && !defined(__wasi__)

typedef struct blk {
    uint64_t size; /* bytes after the header */
    uint32_t free, pad;
    struct blk *next;
} blk;

typedef struct wlm_sys_state {
    blk *head;
    uint64_t in_use, limit;
    uint32_t init;
} wlm_sys_state;

/* The allocator's state lives in the module's data segment: one per
 * instance of the memory, which is the model's own worker. */
static wlm_sys_state S;
extern unsigned char __heap_base;

static void sys_init(void) {
    if (S.init) return;
    S.init = 1;
    S.limit = WLM_WASM_MEMORY_MAX;
}

static uint64_t mem_end(void) { return (uint64_t)__builtin_wasm_memory_size(0) * 65536; }

WLM_API void wlm_sys_set_limit(uint64_t bytes) {
    sys_init();
    S.limit = bytes;
}
uint64_t wlm_sys_limit(void) {
    sys_init();
    return S.limit;
}
uint64_t wlm_sys_in_use(void) { return S.in_use; }

WLM_API void *wlm_sys_alloc(uint64_t bytes) {
    sys_init();
    if (bytes == 0) bytes = 1;
    /* the limit bounds the bytes in use, as natively (what NOMEM messages report) */
    if (bytes > S.limit || S.in_use + bytes > S.limit) return 0;
    bytes = WLM_ALIGN_UP(bytes, 64);
    blk *prev = 0, *b = S.head;
    for (; b; prev = b, b = b->next) {
        if (b->free && b->size >= bytes) {
            if (b->size >= bytes + WLM_SYS_HDR + 4096) { /* split */
                blk *r = (blk *)((uint8_t *)b + WLM_SYS_HDR + bytes);
                r->size = b->size - bytes - WLM_SYS_HDR;
                r->free = 1;
                r->next = b->next;
                b->size = bytes;
                b->next = r;
            }
            b->free = 0;
            S.in_use += b->size;
            uint8_t *p = (uint8_t *)b + WLM_SYS_HDR;
            __builtin_memset(p, 0, b->size);
            return p;
        }
    }
    /* append at the end of the heap */
    uint64_t start = prev ? (uint64_t)(uintptr_t)prev + WLM_SYS_HDR + prev->size
                          : WLM_ALIGN_UP((uint64_t)(uintptr_t)&__heap_base, 64);
    uint64_t end = start + WLM_SYS_HDR + bytes;
    if (end > WLM_WASM_MEMORY_MAX) return 0;
    uint64_t have = mem_end();
    if (end > have) {
        uint64_t pages = (end - have + 65535) / 65536;
        if (__builtin_wasm_memory_grow(0, (size_t)pages) == (size_t)-1) return 0;
    }
    b = (blk *)(uintptr_t)start;
    b->size = bytes;
    b->free = 0;
    b->next = 0;
    if (prev) prev->next = b;
    else S.head = b;
    S.in_use += bytes;
    return (uint8_t *)b + WLM_SYS_HDR; /* fresh pages are zero */
}

WLM_API void wlm_sys_free(void *p) {
    if (!p) return;
    blk *b = (blk *)((uint8_t *)p - WLM_SYS_HDR);
    b->free = 1;
    S.in_use -= b->size;
    /* coalesce neighbours */
    for (blk *x = S.head; x; x = x->next) {
        while (x->free && x->next && x->next->free) {
            x->size += WLM_SYS_HDR + x->next->size;
            x->next = x->next->next;
        }
    }
}

#else /* native */

#include <stdlib.h>
#include <string.h>

static uint64_t g_in_use, g_limit = (uint64_t)8 << 30;

void wlm_sys_set_limit(uint64_t bytes) { g_limit = bytes; }
uint64_t wlm_sys_limit(void) { return g_limit; }
uint64_t wlm_sys_in_use(void) { return g_in_use; }

void *wlm_sys_alloc(uint64_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > g_limit || g_in_use + bytes > g_limit) return 0;
    void *p = 0;
    if (posix_memalign(&p, 64, (size_t)WLM_ALIGN_UP(bytes, 64) + 64)) return 0;
    memset(p, 0, (size_t)WLM_ALIGN_UP(bytes, 64) + 64);
    /* the size sits in the first 8 bytes; the caller gets p + 64 */
    *(uint64_t *)p = bytes;
    g_in_use += bytes;
    return (uint8_t *)p + 64;
}

void wlm_sys_free(void *q) {
    if (!q) return;
    void *p = (uint8_t *)q - 64;
    g_in_use -= *(uint64_t *)p;
    free(p);
}
#endif

wlm_status wlm_fail_nomem(wlm_err *err, const char *what, uint64_t bytes) {
    uint64_t used = wlm_sys_in_use(), limit = wlm_sys_limit();
    if (bytes > limit || used + bytes > limit)
        return wlm_fail(err, WLM_ERR_NOMEM, "%s needs %llu more bytes of memory (%llu in use, limit %llu)", what,
                        (unsigned long long)bytes, (unsigned long long)used, (unsigned long long)limit);
    /* under the limit: the host refused to grow the memory, or no free gap is large enough */
    return wlm_fail(err, WLM_ERR_NOMEM, "%s needs %llu more bytes of memory (%llu in use, limit %llu) and the memory could not grow",
                    what, (unsigned long long)bytes, (unsigned long long)used, (unsigned long long)limit);
}

#if !defined(__wasm__)
/* futex-based sleep/wake for the native thread pool (threads.c) */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
void wlm_sys_wait32(volatile int32_t *addr, int32_t expected) {
    syscall(SYS_futex, (int32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
void wlm_sys_notify_all(volatile int32_t *addr) {
    syscall(SYS_futex, (int32_t *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}
#endif
