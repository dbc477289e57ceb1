/* Thread churn: 5000 short-lived threads, 8 at a time, each allocate and free
 * blocks (exiting with freed blocks in their caches) and leave some blocks
 * for the main thread to verify and free. Afterwards, with cm_trim, the
 * allocator's committed memory, live superblocks and the RSS must be back
 * near where they were after a warm-up: thread exit must not leak. */
#include "core_util.h"

#include <pthread.h>

#include "cagemalloc.h"

#define THREADS 5000
#define BATCH 8
#define KEEP 16      /* blocks each thread leaves to the main thread */
#define PER_THREAD 200
#define MiB ((size_t)1 << 20)

static struct cmt_blk left[BATCH][KEEP];

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    struct cmt_blk b[PER_THREAD];
    uint64_t rng = cmt_mix(id);
    size_t i;
    for (i = 0; i < PER_THREAD; i++) {
        size_t n = cmt_rand(&rng) % 16 ? cmt_range(&rng, 1, 2048)
                                       : cmt_range(&rng, 2049, 128 << 10);
        b[i].p = malloc(n);
        CMT_CHECK(b[i].p != NULL, "malloc(%zu) returned NULL", n);
        b[i].n = n;
        b[i].seed = cmt_seed(b[i].p, n, id, i);
        cmt_fill(b[i].p, n, b[i].seed);
    }
    for (i = 0; i < PER_THREAD; i++) {
        if (i < KEEP) {
            left[id % BATCH][i] = b[i];
            continue;
        }
        CMT_VERIFY(b[i].p, b[i].n, b[i].seed, "block freed by its thread");
        free(b[i].p);
    }
    return NULL;
}

/* Runs threads [from, to) in batches; the main thread frees what they left. */
static void churn(unsigned from, unsigned to)
{
    pthread_t t[BATCH];
    unsigned i, k, base;
    for (base = from; base < to; base += BATCH) {
        for (i = 0; i < BATCH; i++)
            CMT_CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(base + i)) == 0,
                      "pthread_create failed after %u threads", base + i - from);
        for (i = 0; i < BATCH; i++)
            pthread_join(t[i], NULL);
        for (i = 0; i < BATCH; i++)
            for (k = 0; k < KEEP; k++) {
                CMT_VERIFY(left[i][k].p, left[i][k].n, left[i][k].seed,
                           "block left to the main thread");
                free(left[i][k].p);
            }
    }
}

int main(void)
{
    cm_stats_t base, end;
    size_t rss_base, rss_end;

    churn(0, 100 * BATCH);
    cm_trim();
    cm_stats_get(&base);
    rss_base = cmt_rss();

    churn(100 * BATCH, THREADS);
    cm_trim();
    cm_stats_get(&end);
    rss_end = cmt_rss();

    printf("core_churn: %d threads; committed %zu -> %zu KiB, superblocks %zu -> %zu, "
           "RSS %zu -> %zu KiB\n", THREADS, base.committed >> 10, end.committed >> 10,
           base.superblocks_live, end.superblocks_live, rss_base >> 10, rss_end >> 10);
    /* committed counts the spans claimed for superblocks (kept empty ones
     * included, up to the pool's budget), so it moves by some MiB without
     * any leak; a leak of the exited threads' caches (~100 KiB each) would be
     * hundreds of MiB. RSS and the superblock count are the sharp checks. */
    CMT_CHECK(end.committed <= base.committed + 20 * MiB,
              "committed grew from %zu to %zu KiB over the churn: thread exit leaks",
              base.committed >> 10, end.committed >> 10);
    CMT_CHECK(end.superblocks_live <= base.superblocks_live + 16,
              "live superblocks grew from %zu to %zu over the churn: thread exit leaks",
              base.superblocks_live, end.superblocks_live);
    CMT_CHECK(rss_end <= rss_base + 8 * MiB,
              "RSS grew from %zu to %zu KiB over the churn", rss_base >> 10, rss_end >> 10);
    return 0;
}
