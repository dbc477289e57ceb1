/* edge_mlockall: a program that locks its memory (mlockall(MCL_CURRENT |
 * MCL_FUTURE), as ntpd, corosync, linuxptp and real-time audio programs do)
 * holds what it uses, not the allocator's reservations. The kernel populates
 * and locks every readable or writable mapping: before the fix, a 1 GiB
 * arena (CAGEMALLOC_ARENA_RESERVE=1g) became 1.18 GB resident at the first
 * malloc, the default 64 GiB one more than most machines have.
 *
 * Locks everything, then allocates in every space (small and large blocks,
 * a heap, the cage, the class space, the code space) and has two threads
 * allocate 40 MiB each at once (past the first 32 MiB step that is opened
 * at a time), every block patterned and verified; the resident set must stay
 * under 256 MiB. Then memory freed and taken again by calloc reads as zeros
 * (the kernel will not give locked pages back). Skips (77) where the
 * process may not lock that much. */
#include "core_util.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "cagemalloc.h"

#define MiB ((size_t)1 << 20)
#define BLOCK (8 * 1024)
#define PER_THREAD ((40 * MiB) / BLOCK)
#define THREADS 2
#define RSS_BOUND (256 * MiB)

static void *blocks[THREADS][PER_THREAD];

static void *grow(void *arg) {
    unsigned t = (unsigned)(uintptr_t)arg;
    for (size_t i = 0; i < PER_THREAD; i++) {
        void *p = cm_malloc(BLOCK);
        CMT_CHECK(p, "block %zu of thread %u", i, t);
        cmt_fill(p, BLOCK, cmt_seed(p, BLOCK, t, i));
        blocks[t][i] = p;
    }
    return NULL;
}

static void report_rss(const char *when) {
    size_t rss = cmt_rss();
    printf("%s: %zu MiB resident\n", when, rss / MiB);
    CMT_CHECK(rss < RSS_BOUND, "%s: %zu MiB resident under mlockall (bound %zu MiB)", when, rss / MiB,
              RSS_BOUND / MiB);
}

static void check_zeroed(const unsigned char *p, size_t n, const char *what) {
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += p[i] != 0;
    CMT_CHECK(nonzero == 0, "%s: %zu of %zu bytes not zero", what, nonzero, n);
}

/* Locked pages cannot be given back (madvise refuses them): the memory of
 * the blocks just freed, handed out again, must still read as zeros to
 * calloc. The 80 MiB of 8 KiB blocks are retired by the trim; 40 MiB of
 * 2 KiB blocks take their spans. Then a large cage block, patterned,
 * freed, trimmed and taken again by calloc. */
static void zeroed_after_reuse(void) {
    cm_trim();
    enum { N = (40 * MiB) / 2048 };
    static unsigned char *zeroed[N];
    for (size_t i = 0; i < N; i++) {
        zeroed[i] = cm_calloc(1, 2048);
        CMT_CHECK(zeroed[i], "cm_calloc(1, 2048) number %zu", i);
        check_zeroed(zeroed[i], 2048, "a calloc block on retired locked pages");
    }
    for (size_t i = 0; i < N; i++) cm_free(zeroed[i]);
    size_t big = 16 * MiB;
    unsigned char *c = cm_cage_malloc(big);
    CMT_CHECK(c, "cm_cage_malloc(16 MiB)");
    memset(c, 0xa5, big);
    cm_free(c);
    cm_trim();
    c = cm_cage_calloc(1, big);
    CMT_CHECK(c, "cm_cage_calloc(16 MiB)");
    check_zeroed(c, big, "a cage calloc block on locked pages given back");
    cm_free(c);
    printf("calloc on locked pages freed and taken again: zeros\n");
}

/* CAP_IPC_LOCK (bit 14 of the effective set): the process may lock past RLIMIT_MEMLOCK. */
static bool may_lock_past_limit(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long caps = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &caps) == 1) break;
    if (f) fclose(f);
    return caps >> 14 & 1;
}

int main(void) {
    struct rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY}, now;
    if (setrlimit(RLIMIT_MEMLOCK, &unlimited) != 0 && !may_lock_past_limit() &&
        (getrlimit(RLIMIT_MEMLOCK, &now) != 0 || now.rlim_cur < RSS_BOUND)) {
        printf("SKIP: RLIMIT_MEMLOCK is below %zu MiB, and neither it nor CAP_IPC_LOCK can be had\n", RSS_BOUND / MiB);
        return 77;
    }
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        printf("SKIP: mlockall: %s\n", strerror(errno));
        return 77;
    }

    void *small = cm_malloc(100), *large = cm_malloc(8 * MiB), *caged = cm_cage_malloc(5000);
    cm_heap_t *heap = cm_heap_new();
    void *in_heap = heap ? cm_heap_malloc(heap, 300) : NULL;
    void *klass = cm_klass_alloc(512), *code = cm_code_alloc(128, NULL);
    CMT_CHECK(small && large && caged && in_heap && klass && code, "a first block of each kind");
    size_t sizes[] = {100, 8 * MiB, 5000, 300, 512};
    void *firsts[] = {small, large, caged, in_heap, klass};
    for (unsigned i = 0; i < 5; i++) cmt_fill(firsts[i], sizes[i], cmt_seed(firsts[i], sizes[i], 9, i));
    static const unsigned char ret[64] = {0xc3};
    CMT_CHECK(cm_code_write(code, ret, sizeof ret) == 0, "cm_code_write");
    report_rss("locked, a block of each kind");

    pthread_t tid[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        CMT_CHECK(pthread_create(&tid[t], NULL, grow, (void *)(uintptr_t)t) == 0, "pthread_create");
    for (unsigned t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    report_rss("after 2 x 40 MiB more");

    for (unsigned t = 0; t < THREADS; t++)
        for (size_t i = 0; i < PER_THREAD; i++) {
            CMT_CHECK(cmt_mismatch(blocks[t][i], BLOCK, cmt_seed(blocks[t][i], BLOCK, t, i)) == BLOCK,
                      "block %zu of thread %u lost its pattern", i, t);
            cm_free(blocks[t][i]);
        }
    for (unsigned i = 0; i < 5; i++)
        CMT_CHECK(cmt_mismatch(firsts[i], sizes[i], cmt_seed(firsts[i], sizes[i], 9, i)) == sizes[i],
                  "first block %u lost its pattern", i);
    zeroed_after_reuse();
    cm_code_free(code);
    cm_klass_free(klass);
    cm_free(in_heap);
    cm_heap_delete(heap);
    cm_free(caged);
    cm_free(large);
    cm_free(small);
    munlockall();
    printf("locked memory holds the blocks, not the reservations\n");
    return 0;
}
