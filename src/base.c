/* Freestanding basics: memory helpers, a tiny formatter for error messages,
 * and the system allocator (linear memory in wasm, malloc natively). */
#include <stdarg.h>
#include "base.h"

void wlm_memcpy(void *dst, const void *src, size_t n) { __builtin_memcpy(dst, src, n); }
void wlm_memset(void *dst, int v, size_t n) { __builtin_memset(dst, v, n); }
int wlm_memeq(const void *a, const void *b, size_t n) {
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return 0;
    return 1;
}
size_t wlm_strlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

/* Each word is multiplied in, rotated and multiplied again, so every input
 * bit reaches the high bits; the length and a final avalanche (xor-shift and
 * multiply, three times) end it. Multipliers: odd 64-bit constants, the
 * first the golden ratio's fraction. */
#define H_K1 0x9E3779B97F4A7C15ull
#define H_K2 0xD6E8FEB86659FD93ull
static uint64_t rotl64(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }
uint64_t wlm_hash64(uint64_t h, const void *data, uint64_t n) {
    const uint8_t *p = data;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) h = rotl64(h ^ (wlm_rd64(p + i) * H_K1), 29) * H_K2;
    uint64_t tail = 0;
    for (uint64_t k = 0; i + k < n; k++) tail |= (uint64_t)p[i + k] << (8 * k);
    h = rotl64(h ^ ((tail ^ (n << 3)) * H_K1), 29) * H_K2;
    h ^= h >> 32;
    h *= H_K1;
    h ^= h >> 29;
    h *= H_K2;
    h ^= h >> 32;
    return h;
}

#if defined(__wasm__) && !defined(__wasi__)
/* Without libc the compiler still emits calls to these for struct copies and
 * large initializers. Byte loops are enough: hot paths use bulk memory. */
void *memcpy(void *d, const void *s, size_t n) {
    uint8_t *a = d;
    const uint8_t *b = s;
    while (n--) *a++ = *b++;
    return d;
}
void *memmove(void *d, const void *s, size_t n) {
    uint8_t *a = d;
    const uint8_t *b = s;
    if (a < b) {
        while (n--) *a++ = *b++;
    } else {
        a += n;
        b += n;
        while (n--) *--a = *--b;
    }
    return d;
}
void *memset(void *d, int v, size_t n) {
    uint8_t *a = d;
    while (n--) *a++ = (uint8_t)v;
    return d;
}
int memcmp(const void *x, const void *y, size_t n) {
    const uint8_t *a = x, *b = y;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}
#endif

/* ---- formatting ------------------------------------------------------------ */

typedef struct {
    char *buf;
    uint32_t cap, len;
} wbuf;
static void put(wbuf *b, char c) {
    if (b->len + 1 < b->cap) b->buf[b->len] = c;
    b->len++;
}
static void put_u64(wbuf *b, uint64_t v, unsigned base) {
    char tmp[24];
    int n = 0;
    do {
        unsigned d = (unsigned)(v % base);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v);
    while (n) put(b, tmp[--n]);
}

static uint32_t vfmt(char *buf, uint32_t cap, const char *fmt, va_list ap) {
    wbuf b = { buf, cap, 0 };
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            put(&b, *p);
            continue;
        }
        p++;
        int prec = -1, longs = 0;
        if (*p == '.' && p[1] == '*') {
            prec = va_arg(ap, int);
            p += 2;
        }
        while (*p == 'l') {
            longs++;
            p++;
        }
        if (*p == 'z') {
            longs = 2;
            p++;
        }
        switch (*p) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s) s = "(null)";
            uint32_t n = 0;
            while ((prec < 0 || (int)n < prec) && s[n]) n++;
            /* names come from files: keep messages printable */
            for (uint32_t i = 0; i < n; i++) put(&b, (s[i] >= 32 && s[i] < 127) ? s[i] : '?');
            break;
        }
        case 'd': {
            int64_t v = longs ? va_arg(ap, long long) : va_arg(ap, int);
            if (v < 0) {
                put(&b, '-');
                put_u64(&b, (uint64_t)(-(v + 1)) + 1, 10);
            } else put_u64(&b, (uint64_t)v, 10);
            break;
        }
        case 'u': put_u64(&b, longs ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned), 10); break;
        case 'x': put_u64(&b, longs ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned), 16); break;
        case 'c': put(&b, (char)va_arg(ap, int)); break;
        case '%': put(&b, '%'); break;
        default:
            put(&b, '%');
            put(&b, *p);
            break;
        }
        if (!*p) break;
    }
    if (cap) buf[b.len < cap ? b.len : cap - 1] = 0;
    return b.len < cap ? b.len : (cap ? cap - 1 : 0);
}

uint32_t wlm_fmt(char *buf, uint32_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    uint32_t n = vfmt(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

wlm_status wlm_fail(wlm_err *err, wlm_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vfmt(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void *wlm_arena_take(wlm_arena *a, uint64_t bytes) {
    uint64_t at = WLM_ALIGN_UP(a->used, 64);
    if (at > a->cap || bytes > a->cap - at) return 0;
    a->used = at + bytes;
    return a->base + at;
}

/* ---- sorting ------------------------------------------------------------------ */

/* one definition for both widths: sift a[i] down the max-heap a[0..k) */
#define WLM_DEFINE_SORT(name, T)                          \
    void name(T *a, uint32_t n) {                         \
        if (n <= 32) {                                    \
            for (uint32_t i = 1; i < n; i++) {            \
                T v = a[i];                               \
                uint32_t j = i;                           \
                while (j && a[j - 1] > v) {               \
                    a[j] = a[j - 1];                      \
                    j--;                                  \
                }                                         \
                a[j] = v;                                 \
            }                                             \
            return;                                       \
        }                                                 \
        for (uint32_t e = n, s = n / 2;;) {               \
            uint32_t i;                                   \
            if (s > 0) i = --s; /* building the heap */   \
            else if (e > 1) {   /* the max to the end */  \
                T t = a[0];                               \
                a[0] = a[--e];                            \
                a[e] = t;                                 \
                i = 0;                                    \
            } else break;                                 \
            for (;;) {                                    \
                uint32_t l = 2 * i + 1, r = l + 1, m = i; \
                if (l < e && a[l] > a[m]) m = l;          \
                if (r < e && a[r] > a[m]) m = r;          \
                if (m == i) break;                        \
                T t = a[i];                               \
                a[i] = a[m];                              \
                a[m] = t;                                 \
                i = m;                                    \
            }                                             \
        }                                                 \
    }
WLM_DEFINE_SORT(wlm_sort_u32, uint32_t)
WLM_DEFINE_SORT(wlm_sort_u64, uint64_t)
