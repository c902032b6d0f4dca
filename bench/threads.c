/* The thread pool's synchronisation costs, natively (`make bench-threads`):
 * the numbers the thread-count projection in docs/architecture.md is made
 * of. For each thread count n from 2 to the argument (default: the cores):
 *   job        an empty job run by wlm_pool_run: waking the workers (they
 *              are polling: jobs come back to back) and waiting for all
 *   barrier    wlm_pool_barrier inside one job, all n threads arriving
 *              together: what a forward step's end costs when the work is
 *              evenly split
 *   take       a step of 4096 items handed out by wlm_pool_take (guided
 *              chunks of at least 16) with no work: the chunks' cost
 * Medians of REPS runs (second argument, default 15), in microseconds per
 * job and nanoseconds per barrier and per step. The workers poll before they
 * sleep (threads.c), so on a machine with fewer free cores than n the numbers
 * measure the scheduler instead: compare them only on an idle machine. */
#define _POSIX_C_SOURCE 199309L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "../src/internal.h"

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

typedef struct {
    wlm_pool *p;
    uint32_t tid;
} warg;
static void *wmain(void *a) {
    warg *w = a;
    wlm_worker_loop(w->p, w->tid);
    return NULL;
}

enum { BARRIERS = 2000,
       STEPS = 200,
       ITEMS = 4096 };

static void empty_job(void *arg, uint32_t tid, uint32_t nth) {
    (void)arg;
    (void)tid;
    (void)nth;
}

typedef struct {
    wlm_pool *p;
    volatile int32_t next[2][32];
} job_arg;

static void barrier_job(void *arg, uint32_t tid, uint32_t nth) {
    job_arg *j = arg;
    for (int i = 0; i < BARRIERS; i++) wlm_pool_barrier(j->p, nth);
    (void)tid;
}

/* STEPS steps of ITEMS items each, as forward.c's: two counters in turn,
 * thread 0 clearing the other one, a barrier between steps */
static void take_job(void *arg, uint32_t tid, uint32_t nth) {
    job_arg *j = arg;
    for (int s = 0; s < STEPS; s++) {
        volatile int32_t *next = j->next[s & 1];
        if (tid == 0) __atomic_store_n(j->next[(s & 1) ^ 1], 0, __ATOMIC_RELAXED);
        uint32_t lo, hi;
        while (wlm_pool_take(next, ITEMS, nth, 16, &lo, &hi)) {}
        wlm_pool_barrier(j->p, nth);
    }
}

int main(int argc, char **argv) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int maxn = argc > 1 ? atoi(argv[1]) : (int)cores, reps = argc > 2 ? atoi(argv[2]) : 15;
    if (maxn < 2) maxn = 2;
    if (maxn > WLM_MAX_THREADS) maxn = WLM_MAX_THREADS;
    if (reps < 1 || reps > 99) reps = 15;
    printf("thread pool synchronisation, %ld cores online, medians of %d\n", cores, reps);
    printf("%8s %12s %14s %16s\n", "threads", "job us", "barrier ns", "take step ns");
    for (int n = 2; n <= maxn; n++) {
        wlm_pool *p = wlm_pool_new((uint32_t)n);
        pthread_t th[WLM_MAX_THREADS];
        warg wa[WLM_MAX_THREADS];
        for (int t = 1; t < n; t++) {
            wa[t].p = p;
            wa[t].tid = (uint32_t)t;
            pthread_create(&th[t], NULL, wmain, &wa[t]);
        }
        job_arg *j = calloc(1, sizeof *j);
        j->p = p;
        double tj[99], tb[99], tt[99];
        for (int r = -2; r < reps; r++) {
            double t0 = now_ns();
            for (int i = 0; i < 1000; i++) wlm_pool_run(p, empty_job, j, (uint32_t)n);
            double t1 = now_ns();
            wlm_pool_run(p, barrier_job, j, (uint32_t)n);
            double t2 = now_ns();
            wlm_pool_run(p, take_job, j, (uint32_t)n);
            double t3 = now_ns();
            if (r >= 0) {
                tj[r] = (t1 - t0) / 1000 / 1e3;
                tb[r] = (t2 - t1) / BARRIERS;
                tt[r] = (t3 - t2) / STEPS;
            }
        }
        printf("%8d %12.2f %14.0f %16.0f\n", n, median(tj, reps), median(tb, reps), median(tt, reps));
        wlm_pool_free(p);
        for (int t = 1; t < n; t++) pthread_join(th[t], NULL);
        free(j);
    }
    return 0;
}
