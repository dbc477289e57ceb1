/* heap_api: first-class heaps through the cm_ API (also built with TSan and
 * ASan). Visit sees exactly the live blocks (blocks freed by other threads
 * included once their free returned); contains; destroy with live blocks
 * returns the memory and spares other heaps' blocks; delete keeps blocks valid in the default heap;
 * realloc into a heap; blocks of a heap whose thread exited stay valid,
 * are freed from another thread and reused; an abandoned thread's
 * half-used superblocks are reclaimed, and so is the uncarved rest of one
 * whose every carved block is in use; 10,000 heaps, and what each costs;
 * the owner rule (a clear abort). Every block is pattern-filled and
 * verified before it is freed. */
#include "core_util.h"

#include <errno.h>
#include <pthread.h>

#include "cagemalloc.h"

#ifdef CM_SANITIZED /* set by tests/CMakeLists.txt for the sanitized builds */
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

typedef struct block {
    char *p;
    size_t n;
    uint64_t seed;
} block_t;

static block_t alloc_in(cm_heap_t *h, size_t n, uint64_t seq) {
    block_t b = {cm_heap_malloc(h, n), n, 0};
    CMT_CHECK(b.p != NULL, "cm_heap_malloc(%zu) failed", n);
    b.seed = cmt_seed(b.p, n, 0, seq);
    cmt_fill(b.p, n, b.seed);
    return b;
}

static void verify_and_free(block_t *b) {
    CMT_VERIFY(b->p, b->n, b->seed, "heap block");
    cm_free(b->p);
    b->p = NULL;
}

static int by_address(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const block_t *)a)->p, y = (uintptr_t)((const block_t *)b)->p;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------ visit and contains */

typedef struct seen {
    block_t *v;
    size_t n, cap, stop_at;
} seen_t;

static int record_block(void *block, size_t usable, void *arg) {
    seen_t *s = arg;
    CMT_CHECK(s->n < s->cap, "visit reported more blocks than are live");
    s->v[s->n].p = block;
    s->v[s->n].n = usable;
    s->n++;
    return s->n == s->stop_at ? 7 : 0;
}

typedef struct remote_job {
    block_t *blocks;
    size_t count;
} remote_job_t;

static void *free_these(void *arg) {
    remote_job_t *job = arg;
    for (size_t i = 0; i < job->count; i++) verify_and_free(&job->blocks[i]);
    return NULL;
}

static void test_visit_and_contains(void) {
    enum { N = 3000 };
    cm_heap_t *h = cm_heap_new();
    CMT_CHECK(h != NULL, "cm_heap_new failed");
    static block_t live[N], remote[N];
    size_t nlive = 0, nremote = 0;
    uint64_t rng = 42;
    for (size_t i = 0; i < N; i++) {
        size_t n = cmt_range(&rng, 0, 9) == 0 ? cmt_range(&rng, 1, 300000) : cmt_range(&rng, 1, 2000);
        block_t b = alloc_in(h, n, i);
        switch (cmt_range(&rng, 0, 2)) {
        case 0: live[nlive++] = b; break;
        case 1: remote[nremote++] = b; break;
        default: verify_and_free(&b); break;
        }
    }
    pthread_t t;
    remote_job_t job = {remote, nremote};
    pthread_create(&t, NULL, free_these, &job);
    pthread_join(t, NULL); /* every remote free has returned */

    static block_t got[N];
    seen_t s = {got, 0, N, 0};
    CMT_CHECK(cm_heap_visit(h, record_block, &s) == 0, "visit stopped without being asked");
    CMT_CHECK(s.n == nlive, "visit saw %zu blocks, %zu are live", s.n, nlive);
    qsort(got, s.n, sizeof got[0], by_address);
    qsort(live, nlive, sizeof live[0], by_address);
    for (size_t i = 0; i < nlive; i++) {
        CMT_CHECK(got[i].p == live[i].p, "visit saw %p where the live block %p was expected", (void *)got[i].p,
                  (void *)live[i].p);
        CMT_CHECK(got[i].n == cm_usable_size(live[i].p) && got[i].n >= live[i].n,
                  "visit gave usable size %zu for a block of %zu (usable %zu)", got[i].n, live[i].n,
                  cm_usable_size(live[i].p));
        CMT_CHECK(cm_heap_contains(h, live[i].p) && cm_heap_contains(h, live[i].p + (live[i].n > 65536 ? 65535 : live[i].n - 1)),
                  "contains says no for a live block of h (or a byte inside it)");
        CMT_CHECK(!cm_heap_contains(cm_heap_get_default(), live[i].p), "the default heap claims a block of h");
    }
    seen_t stop = {got, 0, N, 10};
    CMT_CHECK(cm_heap_visit(h, record_block, &stop) == 7 && stop.n == 10, "a visitor's non-zero return must stop the walk");

    void *mine = cm_malloc(100);
    int on_stack;
    CMT_CHECK(!cm_heap_contains(h, mine) && cm_heap_contains(cm_heap_get_default(), mine),
              "contains: a default-heap block");
    CMT_CHECK(!cm_heap_contains(h, &on_stack) && !cm_heap_contains(h, NULL), "contains: not a heap block");
    cm_free(mine);

    for (size_t i = 0; i < nlive; i++) {
        live[i].seed = cmt_seed(live[i].p, live[i].n, 0, 0);
        cmt_fill(live[i].p, live[i].n, live[i].seed);
    }
    for (size_t i = 0; i < nlive; i++) verify_and_free(&live[i]);
    s.n = 0;
    CMT_CHECK(cm_heap_visit(h, record_block, &s) == 0 && s.n == 0, "visit of an emptied heap saw %zu blocks", s.n);
    cm_heap_delete(h);
    printf("visit and contains: %zu live, %zu freed remotely, all seen exactly\n", nlive, nremote);
}

/* A thread that frees blocks of another thread's default heap hands them
 * over in batches (remote.c); visit counts a block as freed once its free
 * returned, batch handed over or not: the freeing thread stays alive, its
 * last batch still waiting, while the owner visits. */
enum { BATCHED_N = 1000, BATCHED_SIZE = 48 };
static block_t batched[BATCHED_N];
static char *batched_at[BATCHED_N]; /* the addresses, kept after the frees */
static int batched_freed, batched_may_exit;

static void *free_odd_and_wait(void *arg) {
    (void)arg;
    for (size_t i = 1; i < BATCHED_N; i += 2) verify_and_free(&batched[i]);
    __atomic_store_n(&batched_freed, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&batched_may_exit, __ATOMIC_ACQUIRE)) usleep(1000);
    return NULL;
}

static int count_batched(void *block, size_t usable, void *arg) {
    (void)usable;
    int *seen = arg;
    for (size_t i = 0; i < BATCHED_N; i++) {
        if (block != (void *)batched_at[i]) continue;
        CMT_CHECK(i % 2 == 0, "visit reported block %zu, freed by another thread", i);
        seen[i]++;
    }
    return 0;
}

static void test_visit_default_with_remote_frees(void) {
    cm_heap_t *def = cm_heap_get_default();
    for (size_t i = 0; i < BATCHED_N; i++) {
        batched[i] = alloc_in(def, BATCHED_SIZE, 3000 + i);
        batched_at[i] = batched[i].p;
    }
    pthread_t t;
    pthread_create(&t, NULL, free_odd_and_wait, NULL);
    while (!__atomic_load_n(&batched_freed, __ATOMIC_ACQUIRE)) usleep(1000);
    static int seen[BATCHED_N];
    CMT_CHECK(cm_heap_visit(def, count_batched, seen) == 0, "visit of the default heap stopped");
    for (size_t i = 0; i < BATCHED_N; i += 2) CMT_CHECK(seen[i] == 1, "visit saw live block %zu %d times", i, seen[i]);
    __atomic_store_n(&batched_may_exit, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    for (size_t i = 0; i < BATCHED_N; i += 2) verify_and_free(&batched[i]);
    printf("visit of a default heap: %d blocks freed by a live thread not seen, %d live seen once\n", BATCHED_N / 2,
           BATCHED_N / 2);
}

/* Visits racing with remote frees: two threads free a default heap's
 * blocks (in batches) while its owner visits it again and again. A block
 * whose free returned before a visit began is never reported; a block
 * whose free had not begun when the visit ended is reported exactly once. */
enum { RACE_N = 6000, RACE_FREERS = 2, RACE_VISITS = 40 };
static block_t race[RACE_N];
static char *race_at[RACE_N];
static int race_state[RACE_N]; /* 0 live, 1 being freed, 2 freed */
static int race_reported[RACE_N];

static void *race_freer(void *arg) {
    uint64_t rng = 77 + (uintptr_t)arg;
    for (size_t k = (uintptr_t)arg; k < RACE_N; k += RACE_FREERS) {
        size_t i = k; /* in order: consecutive blocks share superblocks, so batches form */
        __atomic_store_n(&race_state[i], 1, __ATOMIC_SEQ_CST);
        verify_and_free(&race[i]);
        __atomic_store_n(&race_state[i], 2, __ATOMIC_SEQ_CST);
        if (cmt_range(&rng, 0, 20) == 0) usleep(200); /* leave a batch waiting */
    }
    return NULL;
}

static int report_race(void *block, size_t usable, void *arg) {
    (void)usable, (void)arg;
    uintptr_t b = (uintptr_t)block;
    size_t lo = 0, hi = RACE_N; /* race_at is sorted */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uintptr_t)race_at[mid] < b) lo = mid + 1;
        else hi = mid;
    }
    if (lo < RACE_N && (uintptr_t)race_at[lo] == b) race_reported[lo]++;
    return 0;
}

static int by_pointer(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const block_t *)a)->p, y = (uintptr_t)((const block_t *)b)->p;
    return x < y ? -1 : x > y;
}

static void test_visit_racing_remote_frees(void) {
    cm_heap_t *def = cm_heap_get_default();
    uint64_t rng = 5;
    for (size_t i = 0; i < RACE_N; i++) race[i] = alloc_in(def, cmt_range(&rng, 0, 1) ? 48 : 200, 20000 + i);
    qsort(race, RACE_N, sizeof race[0], by_pointer);
    for (size_t i = 0; i < RACE_N; i++) race_at[i] = race[i].p;
    pthread_t t[RACE_FREERS];
    for (uintptr_t f = 0; f < RACE_FREERS; f++) pthread_create(&t[f], NULL, race_freer, (void *)f);
    static int before[RACE_N];
    unsigned visits = 0, overlapped = 0;
    for (; visits < RACE_VISITS; visits++) {
        size_t freed_before = 0;
        for (size_t i = 0; i < RACE_N; i++) freed_before += (before[i] = __atomic_load_n(&race_state[i], __ATOMIC_SEQ_CST)) == 2;
        overlapped += freed_before > 0 && freed_before < RACE_N;
        memset(race_reported, 0, sizeof race_reported);
        CMT_CHECK(cm_heap_visit(def, report_race, NULL) == 0, "visit stopped");
        for (size_t i = 0; i < RACE_N; i++) {
            int after = __atomic_load_n(&race_state[i], __ATOMIC_SEQ_CST);
            CMT_CHECK(before[i] != 2 || race_reported[i] == 0, "visit %u reported block %zu, freed before it began",
                      visits, i);
            CMT_CHECK(after != 0 || race_reported[i] == 1, "visit %u reported live block %zu %d times", visits, i,
                      race_reported[i]);
        }
        usleep(500);
    }
    for (uintptr_t f = 0; f < RACE_FREERS; f++) pthread_join(t[f], NULL);
    CMT_CHECK(overlapped > 0, "no visit overlapped the frees");
    printf("visits racing remote frees: %u visits (%u while %d threads freed %d blocks), all exact\n", visits,
           overlapped, RACE_FREERS, RACE_N);
}

/* ------------------------------------------------------------ destroy, delete, realloc */

static void test_destroy(void) {
    block_t keep[64];
    for (int i = 0; i < 64; i++) keep[i] = alloc_in(cm_heap_get_default(), 200 + (size_t)i * 37, (uint64_t)i);
    cm_stats_t before, full, after;
    cm_trim();
    cm_stats_get(&before);
    cm_heap_t *h = cm_heap_new();
    uint64_t rng = 7;
    for (int i = 0; i < 40000; i++) {
        size_t n = cmt_range(&rng, 1, 1000);
        char *p = cm_heap_malloc(h, n);
        CMT_CHECK(p != NULL, "allocation in h");
        memset(p, 0x5a, n);
    }
    for (int i = 0; i < 8; i++) memset(cm_heap_malloc(h, (size_t)1 << 20), 1, (size_t)1 << 20);
    cm_stats_get(&full);
    cm_heap_destroy(h);
    cm_trim();
    cm_stats_get(&after);
    size_t grew = full.committed - before.committed, left = after.committed > before.committed ? after.committed - before.committed : 0;
    CMT_CHECK(grew > ((size_t)20 << 20), "h committed only %zu bytes", grew);
    CMT_CHECK(left < grew / 8, "destroy left %zu of %zu bytes committed", left, grew);
    for (int i = 0; i < 64; i++) verify_and_free(&keep[i]);
    /* a new heap works normally after */
    h = cm_heap_new();
    block_t b = alloc_in(h, 500, 1);
    verify_and_free(&b);
    cm_heap_destroy(h);
    printf("destroy: %zu KiB committed by the heap, %zu KiB left after destroy\n", grew >> 10, left >> 10);
}

static void test_delete_adopts(void) {
    enum { N = 2000 };
    static block_t b[N];
    cm_heap_t *h = cm_heap_new();
    uint64_t rng = 9;
    for (size_t i = 0; i < N; i++) b[i] = alloc_in(h, cmt_range(&rng, 1, i % 100 == 0 ? 200000 : 3000), i);
    for (size_t i = 0; i < N; i += 3) verify_and_free(&b[i]);
    cm_heap_delete(h);
    cm_heap_t *def = cm_heap_get_default();
    for (size_t i = 0; i < N; i++) {
        if (!b[i].p) continue;
        CMT_VERIFY(b[i].p, b[i].n, b[i].seed, "block adopted from a deleted heap");
        CMT_CHECK(cm_heap_contains(def, b[i].p), "a deleted heap's block is not in the default heap");
    }
    /* realloc of an adopted block, then frees from this thread and another */
    for (size_t i = 1; i < N; i += 3) {
        char *q = cm_realloc(b[i].p, b[i].n + 100);
        CMT_CHECK(q != NULL, "realloc of an adopted block");
        CMT_VERIFY(q, b[i].n, b[i].seed, "adopted block after realloc");
        b[i].p = q;
        verify_and_free(&b[i]);
    }
    static block_t rest[N];
    size_t n = 0;
    for (size_t i = 2; i < N; i += 3) rest[n++] = b[i];
    pthread_t t;
    remote_job_t job = {rest, n};
    pthread_create(&t, NULL, free_these, &job);
    pthread_join(t, NULL);
    printf("delete: live blocks adopted by the default heap, reallocated and freed\n");
}

static void test_realloc_and_api(void) {
    cm_heap_t *h = cm_heap_new();
    block_t b = alloc_in(cm_heap_get_default(), 300, 1);
    char *q = cm_heap_realloc(h, b.p, 300);
    CMT_CHECK(q && cm_heap_contains(h, q) && q != b.p, "cm_heap_realloc must move a block of another heap into h");
    CMT_VERIFY(q, 300, b.seed, "block moved by cm_heap_realloc");
    char *r = cm_heap_realloc(h, q, 200);
    CMT_CHECK(r == q, "a block of h that fits stays in place");
    char *big = cm_heap_realloc(h, r, 500000);
    CMT_CHECK(big && cm_heap_contains(h, big), "realloc to a large block stays in h");
    CMT_VERIFY(big, 200, b.seed, "block grown by cm_heap_realloc");
    cm_free(big);

    unsigned char *z = cm_heap_calloc(h, 1000, 7);
    CMT_CHECK(z && cm_heap_contains(h, z), "cm_heap_calloc");
    for (size_t i = 0; i < 7000; i++) CMT_CHECK(z[i] == 0, "cm_heap_calloc: byte %zu not zero", i);
    cm_free(z);
    for (size_t al = 16; al <= ((size_t)1 << 22); al <<= 3) {
        char *a = cm_heap_aligned_alloc(h, al, 100);
        CMT_CHECK(a && ((uintptr_t)a & (al - 1)) == 0 && cm_heap_contains(h, a), "cm_heap_aligned_alloc(%zu)", al);
        memset(a, 1, 100);
        cm_free(a);
    }
    errno = 0;
    CMT_CHECK(cm_heap_aligned_alloc(h, 24, 100) == NULL && errno == EINVAL, "bad alignment -> EINVAL");
    errno = 0;
    CMT_CHECK(cm_heap_calloc(h, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM, "calloc overflow -> ENOMEM");
    errno = 0;
    CMT_CHECK(cm_heap_malloc(h, SIZE_MAX - 10) == NULL && errno == ENOMEM, "huge -> ENOMEM");
    cm_heap_destroy(h);
    printf("realloc, calloc, aligned_alloc and errors in a heap: ok\n");
}

/* ------------------------------------------------------------ threads that exit */

enum { CLASS_SIZE = 256, PER_SUPERBLOCK = 256 }; /* 64 KiB superblocks of 256 B blocks */
static block_t orphan[2 * PER_SUPERBLOCK];
static cm_heap_t *orphan_heap;

/* Fills two superblocks of 256 B blocks in a heap of its own and two in its
 * default heap, frees every other block, and exits holding the rest. */
static void *leave_blocks(void *arg) {
    (void)arg;
    orphan_heap = cm_heap_new();
    for (size_t i = 0; i < 2 * PER_SUPERBLOCK; i++)
        orphan[i] = alloc_in(i < PER_SUPERBLOCK ? orphan_heap : cm_heap_get_default(), CLASS_SIZE, i);
    for (size_t i = 0; i < 2 * PER_SUPERBLOCK; i += 2) verify_and_free(&orphan[i]);
    return NULL;
}

static int in_orphan_span(const void *p) {
    for (size_t i = 1; i < 2 * PER_SUPERBLOCK; i += 2)
        if (((uintptr_t)p >> 16) == ((uintptr_t)orphan[i].p >> 16)) return 1;
    return 0;
}

static void *reuse_orphans(void *arg) {
    size_t *reused = arg;
    block_t mine[PER_SUPERBLOCK];
    for (size_t i = 0; i < PER_SUPERBLOCK; i++) {
        mine[i] = alloc_in(cm_heap_get_default(), CLASS_SIZE, 1000 + i);
        *reused += in_orphan_span(mine[i].p);
    }
    for (size_t i = 0; i < PER_SUPERBLOCK; i++) verify_and_free(&mine[i]);
    return NULL;
}

static void test_exited_owner(void) {
    pthread_t t;
    pthread_create(&t, NULL, leave_blocks, NULL);
    pthread_join(t, NULL);
    /* the owner exited: its heaps are gone, their blocks valid */
    for (size_t i = 1; i < 2 * PER_SUPERBLOCK; i += 2)
        CMT_VERIFY(orphan[i].p, orphan[i].n, orphan[i].seed, "block of a heap whose thread exited");
    size_t reused = 0;
    pthread_create(&t, NULL, reuse_orphans, &reused);
    pthread_join(t, NULL);
    CMT_CHECK(reused >= PER_SUPERBLOCK / 2, "another thread reused only %zu of the %d free blocks of the abandoned superblocks",
              reused, PER_SUPERBLOCK);
    /* freed from here (their superblocks have no owner now), then reusable */
    for (size_t i = 1; i < 2 * PER_SUPERBLOCK; i += 2) verify_and_free(&orphan[i]);
    pthread_create(&t, NULL, reuse_orphans, &reused);
    pthread_join(t, NULL);
    printf("exited owner: blocks valid, freed here; %zu of %d allocations reused abandoned superblocks\n", reused,
           PER_SUPERBLOCK);
}

/* A heap other than a default one starts no superblock that holds another
 * heap's live blocks: destroying it frees its own blocks and nobody else's
 * (here an exited thread's, left in half-used superblocks in the pool). */
enum { SPARE_SIZE = 80, SPARE_N = 2000 }; /* a class no other test here uses */
static block_t spare[SPARE_N], after_destroy[SPARE_N];

static void *leave_every_other(void *arg) {
    (void)arg;
    for (size_t i = 0; i < SPARE_N; i++) spare[i] = alloc_in(cm_heap_get_default(), SPARE_SIZE, 7000 + i);
    for (size_t i = 0; i < SPARE_N; i += 2) verify_and_free(&spare[i]);
    return NULL;
}

static void test_destroy_spares_others(void) {
    pthread_t t;
    pthread_create(&t, NULL, leave_every_other, NULL);
    pthread_join(t, NULL);
    cm_heap_t *h = cm_heap_new();
    for (size_t i = 0; i < SPARE_N; i++) {
        char *p = cm_heap_malloc(h, SPARE_SIZE);
        CMT_CHECK(p != NULL, "allocation in h");
        memset(p, 0x77, SPARE_SIZE);
    }
    cm_heap_destroy(h);
    for (size_t i = 0; i < SPARE_N; i++) after_destroy[i] = alloc_in(cm_heap_get_default(), SPARE_SIZE, 9000 + i);
    for (size_t i = 1; i < SPARE_N; i += 2)
        CMT_VERIFY(spare[i].p, spare[i].n, spare[i].seed, "an exited thread's block after another heap was destroyed");
    for (size_t i = 1; i < SPARE_N; i += 2) verify_and_free(&spare[i]);
    for (size_t i = 0; i < SPARE_N; i++) verify_and_free(&after_destroy[i]);
    printf("destroy spares others: an exited thread's %d live blocks intact after a heap of the same class was destroyed\n",
           SPARE_N / 2);
}

/* Threads that each calloc one block and exit (mleak's pattern): calloc
 * from a fresh superblock carves just that block, so the superblock is
 * given up with every carved block in use and the rest never carved; the
 * next thread's heap must carve on from it rather than start a superblock
 * of its own (one per thread, before). */
enum { ONE_BLOCK_THREADS = 200, ONE_BLOCK_SIZE = 112 }; /* a class no other test here uses */
static block_t one_block[ONE_BLOCK_THREADS];

static void *allocate_one_and_exit(void *arg) {
    size_t i = (size_t)(uintptr_t)arg;
    block_t b = {cm_heap_calloc(cm_heap_get_default(), 1, ONE_BLOCK_SIZE), ONE_BLOCK_SIZE, 0};
    CMT_CHECK(b.p != NULL, "cm_heap_calloc(1, %d) failed", ONE_BLOCK_SIZE);
    for (size_t k = 0; k < b.n; k++) CMT_CHECK(b.p[k] == 0, "calloc block not zero at %zu", k);
    b.seed = cmt_seed(b.p, b.n, 0, 5000 + i);
    cmt_fill(b.p, b.n, b.seed);
    one_block[i] = b;
    return NULL;
}

static void test_one_block_threads(void) {
    cm_stats_t before, after;
    cm_stats_get(&before);
    for (size_t i = 0; i < ONE_BLOCK_THREADS; i++) {
        pthread_t t;
        pthread_create(&t, NULL, allocate_one_and_exit, (void *)(uintptr_t)i);
        pthread_join(t, NULL);
    }
    cm_stats_get(&after);
    size_t grew = after.superblocks_live - before.superblocks_live;
    for (size_t i = 0; i < ONE_BLOCK_THREADS; i++) verify_and_free(&one_block[i]);
    /* 200 blocks of 112 B fit one 64 KiB superblock; a thread's exit hook
     * gives its superblocks back, so a few may be in flight at a time */
    CMT_CHECK(grew <= 4, "%d threads that each left one block live took %zu superblocks", ONE_BLOCK_THREADS, grew);
    printf("one-block threads: %d threads, each leaving a block live, took %zu superblock(s)\n", ONE_BLOCK_THREADS,
           grew);
}

/* ------------------------------------------------------------ many heaps */

static void test_many_heaps(void) {
    enum { HEAPS = 10000 };
    static cm_heap_t *hs[HEAPS];
    cm_heap_t *warm = cm_heap_new(); /* the first record chunk's mapping is not the heaps' cost */
    cm_heap_delete(warm);
    size_t rss0 = cmt_rss();
    for (int i = 0; i < HEAPS; i++) CMT_CHECK((hs[i] = cm_heap_new()) != NULL, "cm_heap_new #%d", i);
    size_t per_heap = (cmt_rss() - rss0) / HEAPS;
    printf("10000 empty heaps: %zu bytes each (resident)\n", per_heap);
    if (!SANITIZED) CMT_CHECK(per_heap < 1024, "an empty heap costs %zu bytes", per_heap);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < HEAPS; i++) {
            block_t b = alloc_in(hs[i], 16 + (size_t)(i % 64) * 16, (uint64_t)i);
            verify_and_free(&b);
        }
    }
    for (int i = 0; i < HEAPS; i++) {
        if (i % 2) cm_heap_delete(hs[i]);
        else cm_heap_destroy(hs[i]);
    }
    /* made and dropped again: the records are reused, nothing grows */
    size_t rss1 = cmt_rss();
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < HEAPS; i++) hs[i] = cm_heap_new();
        for (int i = 0; i < HEAPS; i++) cm_heap_delete(hs[i]);
    }
    size_t rss2 = cmt_rss();
    if (!SANITIZED)
        CMT_CHECK(rss2 < rss1 + ((size_t)4 << 20), "making and deleting heaps grew RSS from %zu to %zu KiB", rss1 >> 10, rss2 >> 10);
}

/* ------------------------------------------------------------ the owner rule */

static cm_heap_t *foreign;
static void *make_heap(void *arg) {
    (void)arg;
    __atomic_store_n(&foreign, cm_heap_new(), __ATOMIC_RELEASE);
    pause(); /* stays alive, owning it */
    return NULL;
}
static void malloc_in_foreign_heap(void) {
    pthread_t t;
    pthread_create(&t, NULL, make_heap, NULL);
    while (!__atomic_load_n(&foreign, __ATOMIC_ACQUIRE)) usleep(1000);
    cmt_escape(cm_heap_malloc(foreign, 10));
}
static void destroy_default_heap(void) { cm_heap_destroy(cm_heap_get_default()); }
/* A deleted or destroyed heap's handle is dead: using it aborts (before,
 * cm_heap_malloc on it returned a block of a record back in the pool). */
static void malloc_after_delete(void) {
    cm_heap_t *h = cm_heap_new();
    cmt_escape(h);
    cm_heap_delete(h);
    cmt_escape(cm_heap_malloc(h, 10));
}
static void destroy_twice(void) {
    cm_heap_t *h = cm_heap_new();
    cmt_escape(cm_heap_malloc(h, 10));
    cm_heap_destroy(h);
    cm_heap_destroy(h);
}

int main(void) {
    test_exited_owner(); /* first: no partial superblock of 256 B blocks of anyone else's yet */
    test_one_block_threads();
    test_visit_and_contains();
    test_visit_default_with_remote_frees();
    test_visit_racing_remote_frees();
    test_destroy();
    test_destroy_spares_others();
    test_delete_adopts();
    test_realloc_and_api();
    test_many_heaps();
    int ok = cmt_case("cm_heap_malloc from a non-owner", malloc_in_foreign_heap, "does not own it");
    ok &= cmt_case("cm_heap_destroy(default heap)", destroy_default_heap, "default heap");
    ok &= cmt_case("cm_heap_malloc after cm_heap_delete", malloc_after_delete, "cm_heap_malloc(): heap used by a thread that does not own it (or not a live heap)");
    ok &= cmt_case("cm_heap_destroy twice", destroy_twice, "cm_heap_destroy(): heap used by a thread that does not own it (or not a live heap)");
    if (!ok) return 1;
    printf("heap_api: all passed\n");
    return 0;
}
