/* C API conformance of the malloc family exported by libcagemalloc.so:
 * sizes, alignment, usable size, realloc, calloc zeroing, overflow and
 * huge-size errors, the aligned allocators, and the glibc extras
 * (malloc_trim, malloc_stats, mallinfo2). */
#include "core_util.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>

#include "cagemalloc.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static size_t page;

/* Sizes that fold to constants would let gcc warn or reason about them. */
static volatile size_t v_size_max = SIZE_MAX;
static volatile size_t v_ptrdiff_max_1 = (size_t)PTRDIFF_MAX + 1;
static volatile size_t v_half_1 = SIZE_MAX / 2 + 1;
static volatile size_t v_2_32 = (size_t)1 << 32;
/* Called through pointers so gcc does not flag the block as used after a
 * realloc that, failing, left it alive. */
static void *(*volatile v_realloc)(void *, size_t) = realloc;
static void *(*volatile v_reallocarray)(void *, size_t, size_t) = reallocarray;
/* clang folds aligned_alloc with an invalid alignment to NULL without the call */
static void *(*volatile v_aligned_alloc)(size_t, size_t) = aligned_alloc;

/* The whole usable size is writable and >= n; n bytes keep a pattern. */
static void use_block(void *p, size_t n, uint64_t seed, const char *what)
{
    size_t usable = malloc_usable_size(p);
    CMT_CHECK(p != NULL, "%s(%zu) returned NULL", what, n);
    CMT_CHECK(usable >= n, "%s(%zu): malloc_usable_size %zu < request", what, n, usable);
    memset(p, 0x5C, usable);
    cmt_fill(p, n, seed);
    CMT_VERIFY(p, n, seed, what);
}

static void test_malloc_zero_and_free_null(void)
{
    enum { N = 100 };
    void *p[N];
    int i, j;
    for (i = 0; i < N; i++) {
        p[i] = malloc(0);
        CMT_CHECK(p[i] != NULL, "malloc(0) returned NULL");
        for (j = 0; j < i; j++)
            CMT_CHECK(p[i] != p[j], "malloc(0) returned %p twice", p[i]);
    }
    for (i = 0; i < N; i++)
        free(p[i]);
    free(NULL);
}

/* With the shared library, malloc and the cm_ API are one heap. */
static void test_shared_heap(void)
{
    void *p = malloc(100);
    CMT_CHECK(p != NULL, "malloc(100) returned NULL");
    CMT_CHECK(cm_usable_size(p) >= 100 && cm_usable_size(p) == malloc_usable_size(p),
              "malloc is not cagemalloc's: cm_usable_size %zu, malloc_usable_size %zu",
              cm_usable_size(p), malloc_usable_size(p));
    cm_free(p);
}

/* Every size 1..4 KiB, then sizes around each step up to 1 MiB: alignment,
 * usable size, and no overlap with the blocks still live (a ring of 64). */
static void test_sizes_alignment_usable(void)
{
    enum { RING = 64 };
    struct cmt_blk ring[RING] = {{0}};
    size_t n, step, seq = 0;
    for (n = 1; n <= MiB; n += step, seq++) {
        struct cmt_blk *b = &ring[seq % RING];
        step = n < 4 * KiB ? 1 : n / 64 + (seq % 7);
        if (b->p) {
            CMT_VERIFY(b->p, b->n, b->seed, "live block overwritten by a later malloc");
            free(b->p);
        }
        b->p = malloc(n);
        b->n = n;
        b->seed = cmt_seed(b->p, n, 0, seq);
        CMT_CHECK(b->p != NULL, "malloc(%zu) returned NULL", n);
        if (n >= 16)
            CMT_CHECK((uintptr_t)b->p % 16 == 0, "malloc(%zu) = %p is not 16-aligned", n, b->p);
        else if (n >= 8)
            CMT_CHECK((uintptr_t)b->p % 8 == 0, "malloc(%zu) = %p is not 8-aligned", n, b->p);
        use_block(b->p, n, b->seed, "malloc");
    }
    for (n = 0; n < RING; n++) {
        CMT_VERIFY(ring[n].p, ring[n].n, ring[n].seed, "live block overwritten by a later malloc");
        free(ring[n].p);
    }
}

static void *realloc_checked(void *p, size_t old, uint64_t old_seed, size_t n, uint64_t seed)
{
    void *q = realloc(p, n);
    CMT_CHECK(q != NULL, "realloc(%p, %zu) from %zu returned NULL", p, n, old);
    CMT_VERIFY(q, old < n ? old : n, old_seed, "realloc lost data");
    use_block(q, n, seed, "realloc");
    return q;
}

static void test_realloc(void)
{
    static const size_t chain[] = {1, 15, 16, 17, 100, 1000, 4096, 32 * KiB, 64 * KiB,
        256 * KiB, MiB, 4 * MiB, 3, 200 * KiB, 10, 8 * MiB, 5, 2 * MiB, 2 * MiB + 1,
        33 * KiB, 1};
    uint64_t rng = 42, seed = 1;
    size_t i, old = 0;
    void *p = realloc(NULL, 24);
    use_block(p, 24, seed, "realloc(NULL, n)");
    old = 24;
    for (i = 0; i < sizeof chain / sizeof chain[0]; i++) {
        p = realloc_checked(p, old, seed, chain[i], seed + 1);
        old = chain[i];
        seed++;
    }
    for (i = 0; i < 3000; i++) {
        size_t n = cmt_rand(&rng) % 8 ? cmt_range(&rng, 1, 4 * KiB)
                                      : cmt_range(&rng, 1, 3 * MiB);
        p = realloc_checked(p, old, seed, n, seed + 1);
        old = n;
        seed++;
    }
    errno = 0;
    CMT_CHECK(realloc(p, 0) == NULL, "realloc(p, 0) did not return NULL");

    /* a small block serves what fits unless that frees over half of it */
    p = malloc(1000);
    use_block(p, 1000, seed, "malloc");
    size_t usable = malloc_usable_size(p);
    CMT_CHECK(realloc_checked(p, 1000, seed, usable, seed + 1) == p, "realloc to the usable size moved the block");
    CMT_CHECK(realloc_checked(p, usable, seed + 1, usable / 2 + 1, seed + 2) == p, "realloc to over half moved it");
    void *q = realloc_checked(p, usable / 2 + 1, seed + 2, 100, seed + 3);
    CMT_CHECK(malloc_usable_size(q) < usable / 2, "realloc to 100 bytes kept %zu", malloc_usable_size(q));
    q = realloc_checked(q, 100, seed + 3, usable + 1, seed + 4);
    CMT_CHECK(malloc_usable_size(q) > usable, "realloc past the usable size: %zu", malloc_usable_size(q));
    free(q);
}

/* Dirty blocks, free them, calloc the same size: the memory must read zero,
 * whether it comes back from a cache, a recycled superblock or a mapping. */
static void test_calloc_zeroes(void)
{
    static const size_t sizes[] = {1, 16, 24, 100, 1000, 4000, 32 * KiB, 100 * KiB, MiB,
                                   10 * MiB};
    enum { BATCH = 64 };
    void *p[BATCH];
    size_t s, i, k, round;
    for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s], count = n >= MiB ? 4 : BATCH;
        for (round = 0; round < 5; round++) {
            for (i = 0; i < count; i++) {
                p[i] = malloc(n);
                CMT_CHECK(p[i] != NULL, "malloc(%zu) returned NULL", n);
                memset(p[i], 0xAA, malloc_usable_size(p[i]));
            }
            for (i = 0; i < count; i++)
                free(p[i]);
            for (i = 0; i < count; i++) {
                unsigned char *c = calloc(1, n);
                CMT_CHECK(c != NULL, "calloc(1, %zu) returned NULL", n);
                for (k = 0; k < n; k++)
                    CMT_CHECK(c[k] == 0, "calloc(1, %zu) = %p: byte %zu is 0x%02x after reuse",
                              n, (void *)c, k, c[k]);
                memset(c, 0xAA, n);
                p[i] = c;
            }
            for (i = 0; i < count; i++)
                free(p[i]);
        }
    }
}

static void expect_enomem(void *p, const char *what)
{
    int e = errno;
    CMT_CHECK(p == NULL, "%s returned %p, expected NULL", what, p);
    CMT_CHECK(e == ENOMEM, "%s: errno %d, expected ENOMEM", what, e);
}

static void test_overflow_and_huge(void)
{
    size_t n = 4000;
    void *p = malloc(n);
    use_block(p, n, 7, "malloc");

    errno = 0;
    expect_enomem(calloc(v_half_1, 3), "calloc(SIZE_MAX/2+1, 3)");
    errno = 0;
    expect_enomem(calloc(v_size_max, v_size_max), "calloc(SIZE_MAX, SIZE_MAX)");
    errno = 0;
    expect_enomem(calloc(v_2_32, v_2_32), "calloc(2^32, 2^32)");
    errno = 0;
    expect_enomem(v_reallocarray(p, v_half_1, 3), "reallocarray(p, SIZE_MAX/2+1, 3)");
    CMT_VERIFY(p, n, 7, "block after failed reallocarray");
    errno = 0;
    expect_enomem(malloc(v_size_max), "malloc(SIZE_MAX)");
    errno = 0;
    expect_enomem(malloc(v_ptrdiff_max_1), "malloc(PTRDIFF_MAX+1)");
    errno = 0;
    expect_enomem(malloc(v_size_max - 4096), "malloc(SIZE_MAX-4096)");
    errno = 0;
    expect_enomem(v_realloc(p, v_size_max), "realloc(p, SIZE_MAX)");
    CMT_VERIFY(p, n, 7, "block after failed realloc");
    errno = 0;
    expect_enomem(v_realloc(p, v_ptrdiff_max_1), "realloc(p, PTRDIFF_MAX+1)");
    CMT_VERIFY(p, n, 7, "block after failed realloc");
    free(p);
}

static void test_posix_memalign(void)
{
    static const size_t bad[] = {0, 1, 2, 3, 4, 12, 24, 48, 4097};
    size_t i, a, s;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p = NULL;
        int rc;
        errno = 12345;
        rc = posix_memalign(&p, bad[i], 64);
        CMT_CHECK(rc == EINVAL, "posix_memalign(alignment %zu) returned %d, expected EINVAL",
                  bad[i], rc);
        CMT_CHECK(errno == 12345, "posix_memalign(alignment %zu) changed errno to %d",
                  bad[i], errno);
    }
    for (a = sizeof(void *); a <= 16 * MiB; a *= 2) {
        const size_t sizes[] = {1, a - 1, a, 3 * a};
        for (s = 0; s < 4; s++) {
            void *p = NULL;
            int rc = posix_memalign(&p, a, sizes[s]);
            CMT_CHECK(rc == 0, "posix_memalign(%zu, %zu) returned %d", a, sizes[s], rc);
            CMT_CHECK((uintptr_t)p % a == 0, "posix_memalign(%zu, %zu) = %p misaligned",
                      a, sizes[s], p);
            use_block(p, sizes[s], a ^ s, "posix_memalign");
            free(p);
        }
    }
}

/* Requests of 1-8 bytes take the 8-byte class, whose blocks are 8-aligned
 * (half of them off 16 bytes); asking for 16 must give 16 through every
 * aligned allocator, heaps and the cage included. Many live blocks, so a
 * result aligned by chance cannot pass for all. */
static void test_small_alignment(void)
{
    enum { LIVE = 64, WAYS = 6 };
    void *small[LIVE], *aligned[LIVE][WAYS];
    cm_heap_t *heap = cm_heap_new();
    CMT_CHECK(heap != NULL, "cm_heap_new failed");
    for (size_t n = 0; n <= 8; n++) {
        size_t off_16 = 0;
        for (int i = 0; i < LIVE; i++) {
            small[i] = malloc(n);
            CMT_CHECK(small[i] && (uintptr_t)small[i] % 8 == 0, "malloc(%zu) = %p", n, small[i]);
            off_16 += (uintptr_t)small[i] % 16 != 0;
            CMT_CHECK(posix_memalign(&aligned[i][0], 16, n) == 0, "posix_memalign(16, %zu) failed", n);
            aligned[i][1] = aligned_alloc(16, n);
            aligned[i][2] = memalign(16, n);
            aligned[i][3] = cm_aligned_alloc(16, n);
            aligned[i][4] = cm_heap_aligned_alloc(heap, 16, n);
            aligned[i][5] = cm_cage_aligned_alloc(16, n);
            for (int w = 0; w < WAYS; w++)
                CMT_CHECK(aligned[i][w] && (uintptr_t)aligned[i][w] % 16 == 0,
                          "aligned allocator %d of (16, %zu) = %p", w, n, aligned[i][w]);
        }
        CMT_CHECK(off_16 > 0, "no malloc(%zu) block off 16 bytes: no 8-byte class", n);
        for (int i = 0; i < LIVE; i++) {
            free(small[i]);
            for (int w = 0; w < WAYS; w++)
                free(aligned[i][w]);
        }
    }
    cm_heap_destroy(heap);
}

static void test_aligned_alloc(void)
{
    static const size_t bad[] = {3, 24, 48, 1000, 4097, (size_t)3 << 20, 0};
    enum { LIVE = 200 };
    void *live[LIVE];
    size_t i, a, s, k;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p;
        errno = 0;
        p = v_aligned_alloc(bad[i], 64);
        CMT_CHECK(p == NULL && errno == EINVAL,
                  "aligned_alloc(%zu, 64) = %p errno %d, expected NULL and EINVAL",
                  bad[i], p, errno);
    }
    /* Each block larger than the one just freed, so a freed large mapping is
     * reused and grown (and moved, if it cannot grow in place): the result
     * must still be aligned. malloc_trim first empties the cache of freed
     * mappings, so no larger one is there to be picked instead. */
    malloc_trim(0);
    for (a = 1; a <= 4 * MiB; a *= 2) {
        const size_t sizes[] = {1, a, 3 * a + 1, 5 * a + 1};
        for (s = 0; s < 4; s++) {
            void *p = aligned_alloc(a, sizes[s]);
            CMT_CHECK(p != NULL && (uintptr_t)p % a == 0, "aligned_alloc(%zu, %zu) = %p",
                      a, sizes[s], p);
            use_block(p, sizes[s], a + s, "aligned_alloc");
            free(p);
        }
    }
    /* aligned_alloc(n, n), many live at once (Debian's libmimalloc2.0
     * returns misaligned blocks for n = 256..1024). */
    for (a = 16; a <= 64 * KiB; a *= 2) {
        for (k = 0; k < LIVE; k++) {
            live[k] = aligned_alloc(a, a);
            CMT_CHECK(live[k] != NULL && (uintptr_t)live[k] % a == 0,
                      "aligned_alloc(%zu, %zu) #%zu = %p", a, a, k, live[k]);
            cmt_fill(live[k], a, k);
        }
        for (k = 0; k < LIVE; k++) {
            CMT_VERIFY(live[k], a, k, "aligned_alloc(n, n) block");
            free(live[k]);
        }
    }
}

static void test_memalign_valloc_pvalloc(void)
{
    size_t a, n;
    void *p;
    for (a = 1; a <= MiB; a *= 4) {
        p = memalign(a, 3 * a + 5);
        CMT_CHECK(p != NULL && (uintptr_t)p % a == 0, "memalign(%zu) = %p", a, p);
        use_block(p, 3 * a + 5, a, "memalign");
        free(p);
    }
    for (n = 1; n <= 3 * page; n += page / 2 + 1) {
        p = valloc(n);
        CMT_CHECK(p != NULL && (uintptr_t)p % page == 0, "valloc(%zu) = %p", n, p);
        use_block(p, n, n, "valloc");
        free(p);
    }
    for (n = 0; n <= 3 * page; n += page / 2 + 1) {
        size_t rounded = (n + page - 1) / page * page;
        p = pvalloc(n);
        CMT_CHECK(p != NULL && (uintptr_t)p % page == 0, "pvalloc(%zu) = %p", n, p);
        CMT_CHECK(malloc_usable_size(p) >= rounded && malloc_usable_size(p) % page == 0,
                  "pvalloc(%zu): usable size %zu is not a multiple of the page size "
                  "of at least %zu", n, malloc_usable_size(p), rounded);
        use_block(p, rounded, n, "pvalloc");
        free(p);
    }
}

static void test_trim_stats_mallinfo(void)
{
    enum { N = 2000 };
    static void *p[N];
    struct mallinfo2 before, during;
    size_t i, grown;
    int fd, saved;
    char buf[64];
    void *big;

    for (i = 0; i < N; i++) {
        p[i] = malloc(i * 37 % 5000 + 1);
        cmt_escape(p[i]);
    }
    for (i = 0; i < N; i++)
        free(p[i]);
    malloc_trim(0);
    for (i = 0; i < N; i++) {
        p[i] = malloc(i % 3000 + 1);
        use_block(p[i], i % 3000 + 1, i, "malloc after malloc_trim");
    }
    for (i = 0; i < N; i++) {
        CMT_VERIFY(p[i], i % 3000 + 1, i, "block after malloc_trim");
        free(p[i]);
    }

    fd = memfd_create("stats", 0);
    CMT_CHECK(fd >= 0, "memfd_create failed");
    fflush(stderr);
    saved = dup(2);
    dup2(fd, 2);
    malloc_stats();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CMT_CHECK(pread(fd, buf, sizeof buf, 0) > 0, "malloc_stats() wrote nothing to stderr");
    close(fd);

    before = mallinfo2();
    big = malloc(10 * MiB);
    use_block(big, 10 * MiB, 3, "malloc");
    during = mallinfo2();
    grown = (during.uordblks + during.hblkhd) - (before.uordblks + before.hblkhd);
    CMT_CHECK(during.uordblks + during.hblkhd >= before.uordblks + before.hblkhd + 10 * MiB,
              "mallinfo2: uordblks+hblkhd grew by %zu after malloc(10 MiB)", grown);
    CMT_CHECK(during.uordblks + during.hblkhd < ((size_t)1 << 40),
              "mallinfo2: implausible uordblks %zu hblkhd %zu", during.uordblks, during.hblkhd);
    free(big);
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    test_malloc_zero_and_free_null();
    test_shared_heap();
    test_sizes_alignment_usable();
    test_realloc();
    test_calloc_zeroes();
    test_overflow_and_huge();
    test_posix_memalign();
    test_small_alignment();
    test_aligned_alloc();
    test_memalign_valloc_pvalloc();
    test_trim_stats_mallinfo();
    printf("core_api: all checks passed\n");
    return 0;
}
