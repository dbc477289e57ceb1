/* edge_exit_churn: glibc frees per-thread state (the dlerror result, the
 * strsignal buffer, resolver state) AFTER the pthread-key destructors have
 * run, so the allocator sees frees from a thread whose exit hook is done.
 * 20,000 threads that each make one failing dlopen (and check a few
 * pattern-filled blocks) must leave the process's RSS where it was: such a
 * free must not start a new thread cache that nothing flushes again. */
#include "core_util.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>

#define THREADS 20000
#define BATCH 2
#define MiB ((size_t)1 << 20)

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t rng = cmt_mix(id);
    struct cmt_blk b[8];
    for (int i = 0; i < 8; i++) {
        b[i].n = cmt_range(&rng, 1, 4096);
        b[i].p = malloc(b[i].n);
        CMT_CHECK(b[i].p != NULL, "malloc failed");
        b[i].seed = cmt_seed(b[i].p, b[i].n, id, (uint64_t)i);
        cmt_fill(b[i].p, b[i].n, b[i].seed);
    }
    void *h = dlopen("/nonexistent/cagemalloc-edge-test.so", RTLD_NOW); /* fails: dlerror state is malloc'ed */
    CMT_CHECK(h == NULL, "dlopen of a missing file succeeded");
    for (int i = 0; i < 8; i++) {
        CMT_VERIFY(b[i].p, b[i].n, b[i].seed, "block of an exiting thread");
        free(b[i].p);
    }
    return NULL;
}

static void churn(unsigned from, unsigned to)
{
    for (unsigned base = from; base < to; base += BATCH) {
        pthread_t t[BATCH];
        for (unsigned k = 0; k < BATCH; k++)
            CMT_CHECK(pthread_create(&t[k], NULL, worker, (void *)(uintptr_t)(base + k)) == 0, "pthread_create");
        for (unsigned k = 0; k < BATCH; k++) pthread_join(t[k], NULL);
    }
}

int main(void)
{
    churn(0, 1000); /* warm-up: stacks, the loader's own state */
    malloc_trim(0);
    size_t before = cmt_rss();
    churn(1000, THREADS);
    malloc_trim(0);
    size_t after = cmt_rss();
    double grew = ((double)after - (double)before) / MiB;
    printf("RSS %.1f MiB -> %.1f MiB (%+.1f MiB) over %d threads\n", (double)before / MiB, (double)after / MiB,
           grew, THREADS - 1000);
    CMT_CHECK(after < before + 4 * MiB, "RSS grew by %.1f MiB: exiting threads leak", grew);
    return 0;
}
