/* A small thread pool on shared memory.
 *
 * Threads are created by the host (Web Workers / worker_threads instantiating
 * the same wasm module on one shared memory, or pthreads natively); each
 * spends its life in wlm_worker_loop. The coordinating thread publishes a job
 * (function + argument + how many threads take part), bumps a generation
 * counter and wakes everyone; it runs share 0 itself, then sleeps until every
 * worker has reported. Waiting threads sleep in memory.atomic.wait32 (futex
 * natively) after a short spin: they never burn a core while idle.
 *
 * Jobs split work into fixed contiguous ranges by thread index, and every
 * output element is computed by the same code whatever the thread count, so
 * results are identical at any number of threads. */
#include "threads.h"

#if defined(__wasm__) && !defined(__wasm_atomics__)
#define WLM_NO_THREADS 1
#endif

#define SPIN 20000 /* a short poll before sleeping: jobs come back to back while generating */
/* At a barrier inside a job the others are usually a few microseconds
 * behind: poll longer before sleeping, since a sleeper wakes tens of
 * microseconds after the notify and that delay falls on every later step;
 * but not much longer, or threads that outnumber the cores (or share them
 * with other programs) spin while the one they wait for cannot run. */
#define SPIN_BARRIER (1 << 17)

#ifndef WLM_NO_THREADS
static int32_t load32(volatile int32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/* The longest sleep in one wait, in nanoseconds. Every caller re-checks its
 * condition in a loop, so a bounded sleep is always correct. Seen once, for
 * a while on one freshly booted machine: with no timeout a 2-thread F16 prefill
 * of s110m hung in about one fresh process of three, both threads asleep in
 * memory.atomic.wait32 (gdb) and the pool's counters showing the job done,
 * so the coordinator had missed the worker's notify. A build that trapped
 * whenever a bounded wait timed out with its value already changed never
 * trapped, but later the unbounded build stopped hanging as well, so the
 * cause could not be pinned down (tests/soak/threads-wake.mjs repeats the
 * experiment). With the bound a missed notify costs at most this long. */
#define WAIT_NS 100000000LL

static void wait32(volatile int32_t *p, int32_t expected, int spin) {
    for (int i = 0; i < spin; i++)
        if (load32(p) != expected) return;
#ifdef __wasm__
    __builtin_wasm_memory_atomic_wait32((int32_t *)p, expected, WAIT_NS);
#else
    wlm_sys_wait32(p, expected);
#endif
}

static void notify_all(volatile int32_t *p) {
#ifdef __wasm__
    __builtin_wasm_memory_atomic_notify((int32_t *)p, 0x7fffffffu);
#else
    wlm_sys_notify_all(p);
#endif
}
#endif

wlm_pool *wlm_pool_new(uint32_t n_threads) {
#ifdef WLM_NO_THREADS
    (void)n_threads;
    return 0;
#else
    if (n_threads < 1 || n_threads > WLM_MAX_THREADS) return 0;
    wlm_pool *p = wlm_sys_alloc(sizeof(wlm_pool));
    if (!p) return 0;
    p->n_threads = n_threads;
    return p;
#endif
}

uint32_t wlm_pool_threads(const wlm_pool *p) { return p ? p->n_threads : 1; }

void wlm_pool_free(wlm_pool *p) {
    if (!p) return;
#ifndef WLM_NO_THREADS
    __atomic_store_n(&p->gen, -1, __ATOMIC_RELEASE);
    notify_all(&p->gen);
    /* wait until every worker has left its loop before the block is reused */
    int32_t n;
    while ((n = load32(&p->exited)) != (int32_t)p->n_threads - 1) wait32(&p->exited, n, SPIN);
#endif
    wlm_sys_free(p);
}

void wlm_worker_loop(wlm_pool *p, uint32_t tid) {
#ifdef WLM_NO_THREADS
    (void)p;
    (void)tid;
#else
    int32_t seen = 0;
    for (;;) {
        int32_t g;
        while ((g = load32(&p->gen)) == seen) wait32(&p->gen, seen, SPIN);
        if (g < 0) break;
        seen = g;
        if (tid < p->n_active) p->fn(p->arg, tid, p->n_active);
        if (__atomic_add_fetch(&p->done, 1, __ATOMIC_ACQ_REL) == (int32_t)p->n_threads - 1) notify_all(&p->done);
    }
    __atomic_add_fetch(&p->exited, 1, __ATOMIC_ACQ_REL);
    notify_all(&p->exited);
#endif
}

void wlm_pool_run(wlm_pool *p, wlm_job_fn fn, void *arg, uint32_t nth) {
#ifndef WLM_NO_THREADS
    if (p && nth > 1 && p->n_threads > 1) {
        if (nth > p->n_threads) nth = p->n_threads;
        p->fn = fn;
        p->arg = arg;
        p->n_active = nth;
        __atomic_store_n(&p->done, 0, __ATOMIC_RELEASE);
        int32_t g = load32(&p->gen);
        __atomic_store_n(&p->gen, (g + 1) & 0x3fffffff ? (g + 1) & 0x3fffffff : 1, __ATOMIC_RELEASE);
        notify_all(&p->gen);
        fn(arg, 0, nth);
        int32_t d;
        while ((d = load32(&p->done)) != (int32_t)p->n_threads - 1) wait32(&p->done, d, SPIN);
        return;
    }
#endif
    (void)p;
    (void)nth;
    fn(arg, 0, 1);
}

/* Inside a job: returns when all nth threads of the job have arrived
 * (everything written before the barrier is then visible to every thread).
 * A generation counter: the last to arrive resets the count and bumps the
 * generation; the others wait for the bump (spinning, then sleeping). */
void wlm_pool_barrier(wlm_pool *p, uint32_t nth) {
#ifndef WLM_NO_THREADS
    if (!p || nth < 2) return;
    int32_t g = load32(&p->bar_gen);
    if (__atomic_add_fetch(&p->bar_count, 1, __ATOMIC_ACQ_REL) == (int32_t)nth) {
        __atomic_store_n(&p->bar_count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&p->bar_gen, (g + 1) & 0x3fffffff, __ATOMIC_RELEASE);
        notify_all(&p->bar_gen);
        return;
    }
    while (load32(&p->bar_gen) == g) wait32(&p->bar_gen, g, SPIN_BARRIER);
#else
    (void)p;
    (void)nth;
#endif
}

/* Guided self-scheduling inside a job: the next chunk [lo, hi) of the n
 * items counted off by *next (0 at the start of the step); a chunk is
 * 1/(2 nth) of what is left, at least `min` items. Returns 0 when none are
 * left. A thread that falls behind (preempted, on a busier core) simply
 * takes fewer chunks, so no thread waits long at the step's end. */
int wlm_pool_take(volatile int32_t *next, uint32_t n, uint32_t nth, uint32_t min, uint32_t *lo, uint32_t *hi) {
#ifndef WLM_NO_THREADS
    int32_t i = load32(next);
    for (;;) {
        if ((uint32_t)i >= n) return 0;
        uint32_t left = n - (uint32_t)i, c = nth > 1 ? left / (2 * nth) : left;
        if (c < min) c = min;
        if (c > left) c = left;
        if (__atomic_compare_exchange_n(next, &i, i + (int32_t)c, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            *lo = (uint32_t)i;
            *hi = (uint32_t)i + c;
            return 1;
        }
    }
#else
    (void)nth;
    (void)min;
    if ((uint32_t)*next >= n) return 0;
    *lo = (uint32_t)*next;
    *hi = n;
    *next = (int32_t)n;
    return 1;
#endif
}

/* [lo, hi) of n items for thread tid of nth: contiguous, in order */
void wlm_split(uint32_t n, uint32_t tid, uint32_t nth, uint32_t *lo, uint32_t *hi) {
    uint64_t a = (uint64_t)n * tid / nth, b = (uint64_t)n * (tid + 1) / nth;
    *lo = (uint32_t)a;
    *hi = (uint32_t)b;
}
