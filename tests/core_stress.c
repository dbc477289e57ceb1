/* Multi-threaded stress of the cm_ API: 4 threads each keep a window of live
 * blocks of random sizes (1 B..64 KiB, sometimes 256 KiB..2 MiB) made by
 * cm_malloc, cm_calloc or cm_aligned_alloc, resize some with cm_realloc, and
 * hand some to other threads to free. Every block holds a pattern that is
 * verified before it is resized or freed. */
#include "core_util.h"

#include <pthread.h>

#include "cagemalloc.h"

#define THREADS 4
#define WINDOW 512
#ifdef CM_SANITIZED
#define OPS 30000
#else
#define OPS 1000000
#endif

static struct cmt_xchg xchg;

static size_t random_size(uint64_t *rng)
{
    uint64_t r = cmt_rand(rng) % 1000;
    if (r < 700)
        return cmt_range(rng, 1, 256);
    if (r < 950)
        return cmt_range(rng, 257, 4096);
    if (r < 999)
        return cmt_range(rng, 4097, 64 << 10);
    return cmt_range(rng, 256 << 10, 2 << 20);
}

static void check_and_free(const struct cmt_blk *b, const char *what)
{
    CMT_VERIFY(b->p, b->n, b->seed, what);
    cm_free(b->p);
}

/* Make a new block in *b, by one of the three allocation calls. */
static void allocate(struct cmt_blk *b, unsigned me, uint64_t seq, uint64_t *rng)
{
    size_t n = random_size(rng), i;
    uint64_t how = cmt_rand(rng) % 8;
    if (how == 0) {
        b->p = cm_calloc(1, n);
        CMT_CHECK(b->p != NULL, "cm_calloc(1, %zu) returned NULL", n);
        for (i = 0; i < n; i++)
            CMT_CHECK(b->p[i] == 0, "cm_calloc(1, %zu) = %p: byte %zu is %d", n,
                      (void *)b->p, i, b->p[i]);
    } else if (how == 1) {
        size_t align = (size_t)1 << cmt_range(rng, 4, n > 65536 ? 16 : 12);
        b->p = cm_aligned_alloc(align, n);
        CMT_CHECK(b->p != NULL && (uintptr_t)b->p % align == 0,
                  "cm_aligned_alloc(%zu, %zu) = %p", align, n, (void *)b->p);
    } else {
        b->p = cm_malloc(n);
        CMT_CHECK(b->p != NULL, "cm_malloc(%zu) returned NULL", n);
    }
    CMT_CHECK(n < 16 || (uintptr_t)b->p % 16 == 0, "block %p of %zu not 16-aligned",
              (void *)b->p, n);
    CMT_CHECK(cm_usable_size(b->p) >= n, "cm_usable_size(%p) = %zu < %zu", (void *)b->p,
              cm_usable_size(b->p), n);
    b->n = n;
    b->owner = me;
    b->seed = cmt_seed(b->p, n, me, seq);
    cmt_fill(b->p, n, b->seed);
}

static void resize(struct cmt_blk *b, unsigned me, uint64_t seq, uint64_t *rng)
{
    size_t n = random_size(rng);
    unsigned char *q;
    CMT_VERIFY(b->p, b->n, b->seed, "block before cm_realloc");
    q = cm_realloc(b->p, n);
    CMT_CHECK(q != NULL, "cm_realloc(%p, %zu) returned NULL", (void *)b->p, n);
    CMT_VERIFY(q, b->n < n ? b->n : n, b->seed, "cm_realloc lost data");
    CMT_CHECK(cm_usable_size(q) >= n, "cm_usable_size after cm_realloc %zu < %zu",
              cm_usable_size(q), n);
    b->p = q;
    b->n = n;
    b->seed = cmt_seed(q, n, me, seq);
    cmt_fill(q, n, b->seed);
}

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    struct cmt_blk *win = cm_calloc(WINDOW, sizeof *win), got;
    uint64_t rng = cmt_mix(me + 1), seq;
    size_t i;
    CMT_CHECK(win != NULL, "cm_calloc of the window failed");
    for (seq = 0; seq < OPS; seq++) {
        struct cmt_blk *b = &win[cmt_rand(&rng) % WINDOW];
        uint64_t what = cmt_rand(&rng) % 16;
        if (!b->p) {
            allocate(b, me, seq, &rng);
        } else if (what < 3) {
            resize(b, me, seq, &rng);
        } else if (what < 6 && cmt_xchg_put(&xchg, b, &rng)) {
            b->p = NULL;
        } else {
            check_and_free(b, "block freed by its owner");
            b->p = NULL;
        }
        if (seq % 4 == 0 && cmt_xchg_take(&xchg, me, &got, &rng))
            check_and_free(&got, "block freed by another thread");
    }
    for (i = 0; i < WINDOW; i++)
        if (win[i].p)
            check_and_free(&win[i], "block freed at the end");
    cm_free(win);
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    struct cmt_blk got;
    uint64_t rng = 1;
    unsigned i;
    for (i = 0; i < THREADS; i++)
        CMT_CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0,
                  "pthread_create failed");
    for (i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    while (cmt_xchg_take(&xchg, UINT32_MAX, &got, &rng))
        check_and_free(&got, "block left in the exchange");
    printf("core_stress: %d threads x %d operations passed\n", THREADS, OPS);
    return 0;
}
