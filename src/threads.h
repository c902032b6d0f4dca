/* The thread pool (threads.c): one job run by n threads with barriers and
 * a shared work counter; the caller is thread 0. */
#ifndef WLM_THREADS_H
#define WLM_THREADS_H

#include "base.h"

#define WLM_MAX_THREADS 64
/* multiply-adds below which a job runs on the calling thread alone */
#define WLM_MIN_PARALLEL_WORK (1u << 17)
typedef void (*wlm_job_fn)(void *arg, uint32_t tid, uint32_t nth);
/* Bytes apart that counters written by different threads are kept, so that
 * one thread's atomic update does not take the line another thread polls or
 * reads (false sharing): 128, the line (or adjacent-line prefetch pair) of
 * current x86 and Apple cores. By padding, not alignment: the allocator
 * promises 64 bytes, and two fields 128 apart never share a line of 64 or
 * of 128 whatever the base. */
#define WLM_SYNC_LINE 128
struct wlm_pool {
    /* written by the coordinating thread once a job, polled by the workers */
    union {
        struct {
            volatile int32_t gen; /* job generation, -1 = shut down */
            uint32_t n_threads;   /* including the coordinating thread */
            uint32_t n_active;    /* threads taking part in the current job */
            wlm_job_fn fn;
            void *arg;
        };
        char job_line[WLM_SYNC_LINE];
    };
    /* each worker adds 1 when it finishes the job; the coordinator polls it */
    union {
        volatile int32_t done;
        char done_line[WLM_SYNC_LINE];
    };
    /* wlm_pool_barrier: every thread adds 1 to bar_count as it arrives; the
     * waiters poll bar_gen, which only the last to arrive writes */
    union {
        volatile int32_t bar_count;
        char count_line[WLM_SYNC_LINE];
    };
    union {
        volatile int32_t bar_gen;
        char gen_line[WLM_SYNC_LINE];
    };
    volatile int32_t exited; /* workers that left their loop */
};
/* runs fn(arg, tid, nth) on nth threads (the caller is tid 0) and returns
 * when all are done; p == NULL or nth <= 1 runs it inline */
void wlm_pool_run(wlm_pool *p, wlm_job_fn fn, void *arg, uint32_t nth);
/* called by every one of a job's nth threads: waits until all have called
 * it (no-op for p == NULL or nth <= 1) */
void wlm_pool_barrier(wlm_pool *p, uint32_t nth);
/* inside a job: the next chunk [lo, hi) of n items from a counter shared
 * by the job's nth threads (0 at the start); returns 0 when none are left */
int wlm_pool_take(volatile int32_t *next, uint32_t n, uint32_t nth, uint32_t min, uint32_t *lo, uint32_t *hi);
void wlm_split(uint32_t n, uint32_t tid, uint32_t nth, uint32_t *lo, uint32_t *hi);
#ifndef __wasm__
void wlm_sys_wait32(volatile int32_t *addr, int32_t expected);
void wlm_sys_notify_all(volatile int32_t *addr);
#endif

#endif
