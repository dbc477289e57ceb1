/* Producer/consumer through the cm_ API: one thread allocates and fills
 * blocks of mixed small sizes, another verifies and frees them (every free
 * is a remote free). Far more bytes pass through than are ever live, so the
 * memory committed at the end must stay bounded: freed remote blocks must be
 * reused, not leaked. */
#include "core_util.h"

#include <pthread.h>

#include "cagemalloc.h"

#ifdef CM_SANITIZED
#define BLOCKS 200000
#else
#define BLOCKS 2000000
#endif
#define RING 4096 /* at most RING blocks (< 4 MiB) are live at once */
#define MiB ((size_t)1 << 20)
#define COMMITTED_LIMIT (64 * MiB)

static struct cmt_blk ring[RING];
static _Atomic size_t head, tail; /* head: next to produce; tail: next to consume */

static void *producer(void *arg)
{
    uint64_t rng = 7, seq;
    size_t total = 0;
    (void)arg;
    for (seq = 0; seq < BLOCKS; seq++) {
        size_t n = cmt_rand(&rng) % 4 ? cmt_range(&rng, 1, 128) : cmt_range(&rng, 129, 1024);
        size_t h = atomic_load_explicit(&head, memory_order_relaxed);
        struct cmt_blk *b = &ring[h % RING];
        while (h - atomic_load_explicit(&tail, memory_order_acquire) == RING)
            sched_yield();
        b->p = cm_malloc(n);
        CMT_CHECK(b->p != NULL, "cm_malloc(%zu) returned NULL", n);
        b->n = n;
        b->seed = cmt_seed(b->p, n, 0, seq);
        cmt_fill(b->p, n, b->seed);
        total += n;
        atomic_store_explicit(&head, h + 1, memory_order_release);
    }
    printf("core_xthread: %zu blocks, %zu MiB passed from producer to consumer\n",
           (size_t)BLOCKS, total / MiB);
    return NULL;
}

static void *consumer(void *arg)
{
    size_t t;
    (void)arg;
    for (t = 0; t < BLOCKS; t++) {
        struct cmt_blk *b = &ring[t % RING];
        while (atomic_load_explicit(&head, memory_order_acquire) == t)
            sched_yield();
        CMT_VERIFY(b->p, b->n, b->seed, "block received by the consumer");
        cm_free(b->p);
        atomic_store_explicit(&tail, t + 1, memory_order_release);
    }
    return NULL;
}

int main(void)
{
    pthread_t p, c;
    cm_stats_t st;
    size_t rss0 = cmt_rss(), rss1;
    CMT_CHECK(pthread_create(&p, NULL, producer, NULL) == 0, "pthread_create failed");
    CMT_CHECK(pthread_create(&c, NULL, consumer, NULL) == 0, "pthread_create failed");
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    cm_stats_get(&st);
    rss1 = cmt_rss();
    printf("core_xthread: committed %zu KiB, RSS grew by %zd KiB\n", st.committed >> 10,
           ((ssize_t)rss1 - (ssize_t)rss0) / 1024);
    CMT_CHECK(st.committed < COMMITTED_LIMIT,
              "committed %zu MiB after the run: remote-freed blocks not reused",
              st.committed / MiB);
#ifndef CM_SANITIZED /* sanitizer shadow memory makes RSS meaningless here */
    CMT_CHECK(rss1 < rss0 + COMMITTED_LIMIT, "RSS grew by %zu MiB: remote-freed blocks "
              "not reused", (rss1 - rss0) / MiB);
#endif
    return 0;
}
