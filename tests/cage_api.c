/* cage_api: the cage through the cm_ API (also built with TSan and ASan).
 * Compression round trips (null and the sentinel before and after the cage
 * exists, its first and last addresses, every block handed out); blocks of
 * every kind inside the cage (small, large, aligned up to 8 MiB, calloc)
 * with free, cm_free, realloc and malloc_usable_size; realloc keeps cage
 * blocks in the cage; threads allocating in the cage and freeing each
 * other's blocks; several cage heaps, one destroyed while the others and
 * other threads' cage heaps stay in use; an exited thread's half-used cage
 * superblocks reused by the next thread; a full cage (a small one, through
 * CAGEMALLOC_CAGE_LIMIT in a child) gives NULL and ENOMEM with every block
 * intact, and a freed large block's units, cached for reuse, serve a new
 * superblock when nothing else is left; emptied cage memory goes back to
 * the OS; a child whose RLIMIT_AS leaves room for one cage size and 512 MiB
 * makes the cage and uses it. Every block is pattern-filled and verified
 * before it is freed. */
#include "core_util.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>

#include "cagemalloc.h"

/* The standard names are cagemalloc's only in the build linked with the
 * shared library; the sanitized builds use the cm_ names throughout. */
#ifdef CM_SANITIZED
#define std_malloc cm_malloc
#define std_free cm_free
#define std_realloc cm_realloc
#define std_usable_size cm_usable_size
#else
#define std_malloc malloc
#define std_free free
#define std_realloc realloc
#define std_usable_size malloc_usable_size
#endif

#define S CAGEMALLOC_CAGE_SHIFT
#define LOW (CM_CAGE_SIZE - 1)

static uintptr_t cage_start(void) { return cm_cage_base & ~(uintptr_t)LOW; }

/* p is a cage address that compresses to a top-bit-set value and back. */
static void check_round_trip(const void *p, const char *what) {
    CMT_CHECK(cm_in_cage(p), "%s %p is not in the cage", what, p);
    uint32_t c = cm_compress(p);
    CMT_CHECK(c >> 31, "%s %p compresses to 0x%x, top bit clear", what, p, c);
    CMT_CHECK(cm_decompress(c) == p, "%s %p round-trips to %p", what, p, cm_decompress(c));
}

static void check_null_and_sentinel(void) {
    CMT_CHECK(cm_compress(NULL) == 0 && cm_decompress(0) == NULL, "NULL does not round-trip");
    CMT_CHECK(cm_compress(CM_SENTINEL) == 1 && cm_decompress(1) == CM_SENTINEL, "the sentinel does not round-trip");
    CMT_CHECK(!cm_in_cage(NULL) && !cm_in_cage(CM_SENTINEL), "NULL or the sentinel is in the cage");
}

typedef struct blk {
    char *p;
    size_t n;
    uint64_t seed;
} blk_t;

static blk_t fill(void *p, size_t n, uint64_t seq) {
    blk_t b = {p, n, cmt_seed(p, n, 0, seq)};
    cmt_fill(p, n, b.seed);
    return b;
}

static void verify_free(blk_t *b, const char *what) {
    CMT_VERIFY(b->p, b->n, b->seed, what);
    std_free(b->p);
    b->p = NULL;
}

/* ------------------------------------------------------------ single thread */

static void test_before_cage(void) {
    CMT_CHECK(cm_cage_base == LOW, "the cage exists before its first use");
    check_null_and_sentinel();
    void *plain = std_malloc(100);
    cmt_escape(plain);
    CMT_CHECK(!cm_in_cage(plain), "a malloc block is in the cage");
    std_free(plain);
}

static void test_geometry(void) {
    void *p = cm_cage_malloc(24);
    CMT_CHECK(p, "cm_cage_malloc failed");
    uintptr_t start = cage_start();
    CMT_CHECK((cm_cage_base & LOW) == LOW, "cm_cage_base lost its low bits");
    CMT_CHECK(start % CM_CAGE_SIZE == 0 && (start >> (31 + S)) % 2 == 1,
              "cage start 0x%lx is not an odd multiple of the cage size", (unsigned long)start);
    check_round_trip((void *)start, "first byte");
    check_round_trip((void *)(start + CM_CAGE_SIZE - ((uintptr_t)1 << S)), "last compressible address");
    CMT_CHECK(cm_in_cage((void *)(start + CM_CAGE_SIZE - 1)), "last byte not in the cage");
    CMT_CHECK(!cm_in_cage((void *)(start - 1)) && !cm_in_cage((void *)(start + CM_CAGE_SIZE)),
              "the bytes either side of the cage are in it");
    check_null_and_sentinel();
    check_round_trip(p, "block");
    std_free(p);
}

static void *(*volatile cage_malloc_fn)(size_t) = cm_cage_malloc;

static void test_blocks(void) {
    enum { N = 1200 };
    static blk_t b[N];
    uint64_t rng = 7;
    for (int i = 0; i < N; i++) {
        size_t n;
        void *p;
        switch (i % 6) {
        case 0: n = cmt_range(&rng, 1, 128 << 10); p = cage_malloc_fn(n); break;
        case 1: n = cmt_range(&rng, 1, 256); p = cm_cage_calloc(1, n); break;
        case 2: n = cmt_range(&rng, 1, 2000); p = cm_cage_aligned_alloc((size_t)64 << (i % 5), n); break;
        case 3: n = cmt_range(&rng, (128 << 10) + 1, 1 << 20); p = cage_malloc_fn(n); break;
        case 4: n = cmt_range(&rng, 1, 64); p = cage_malloc_fn(n); break;
        default: n = cmt_range(&rng, 256 << 10, 1 << 20); p = cm_cage_aligned_alloc((size_t)1 << (20 + i % 4), n); break;
        }
        CMT_CHECK(p, "cage allocation %d of %zu bytes failed", i, n);
        check_round_trip(p, "block");
        CMT_CHECK(std_usable_size(p) >= n && cm_usable_size(p) == std_usable_size(p), "usable size of %p", p);
        if (i % 6 == 1)
            for (size_t k = 0; k < n; k++) CMT_CHECK(((char *)p)[k] == 0, "cm_cage_calloc block not zero");
        if (i % 6 == 2) CMT_CHECK((uintptr_t)p % ((size_t)64 << (i % 5)) == 0, "misaligned %p", p);
        if (i % 6 == 5) CMT_CHECK((uintptr_t)p % ((size_t)1 << (20 + i % 4)) == 0, "misaligned large %p", p);
        b[i] = fill(p, n, (uint64_t)i);
    }
    for (int i = 0; i < N; i += 2) verify_free(&b[i], "cage block");
    for (int i = 1; i < N; i += 2) { /* half through cm_cage_free */
        CMT_VERIFY(b[i].p, b[i].n, b[i].seed, "cage block");
        (i % 4 == 1 ? cm_cage_free : cm_free)(b[i].p);
    }
    /* cm_cage_free takes any block, and NULL */
    cm_cage_free(NULL);
    for (size_t n = 16; n <= (4 << 20); n *= 4) {
        void *plain = std_malloc(n);
        CMT_CHECK(plain && !cm_in_cage(plain), "malloc of %zu", n);
        blk_t pb = fill(plain, n, n);
        CMT_VERIFY(pb.p, pb.n, pb.seed, "plain block");
        cm_cage_free(plain);
    }
    errno = 0;
    CMT_CHECK(cm_cage_aligned_alloc(48, 10) == NULL && errno == EINVAL, "bad alignment accepted");
    errno = 0;
    CMT_CHECK(cm_cage_calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM, "calloc overflow accepted");
    errno = 0;
    CMT_CHECK(cm_cage_malloc(SIZE_MAX - 4096) == NULL && errno == ENOMEM, "impossible size accepted");
}

static void test_realloc(void) {
    uint64_t rng = 11;
    char *p = cm_cage_malloc(10);
    blk_t b = fill(p, 10, 1);
    /* grow through small and large sizes, with realloc and cm_cage_realloc */
    for (size_t n = 10; n < (24 << 20); n = n * 3 + cmt_range(&rng, 0, 100)) {
        char *q = (n & 1) ? std_realloc(b.p, n) : cm_cage_realloc(b.p, n);
        CMT_CHECK(q, "realloc to %zu failed", n);
        check_round_trip(q, "reallocated block");
        CMT_VERIFY(q, b.n, b.seed, "grown block");
        b = fill(q, n, n);
    }
    char *q = cm_realloc(b.p, 100); /* shrink to small: still in the cage */
    check_round_trip(q, "shrunk block");
    CMT_VERIFY(q, 100, b.seed, "shrunk block");
    std_free(q);
    /* a plain block moves into the cage with cm_cage_realloc */
    char *plain = std_malloc(300);
    blk_t pb = fill(plain, 300, 2);
    CMT_CHECK(!cm_in_cage(plain), "malloc gave a cage block");
    char *caged = cm_cage_realloc(plain, 300);
    check_round_trip(caged, "block moved into the cage");
    CMT_VERIFY(caged, 300, pb.seed, "block moved into the cage");
    /* and plain realloc of a plain block stays plain */
    char *plain2 = std_realloc(std_malloc(10), 5000);
    CMT_CHECK(plain2 && !cm_in_cage(plain2), "realloc moved a plain block into the cage");
    std_free(plain2);
    std_free(caged);
}

/* ------------------------------------------------------------ cage heaps */

static void test_heaps(void) {
    cm_heap_t *h[3];
    blk_t b[3][200];
    for (int k = 0; k < 3; k++) {
        h[k] = cm_heap_new_in_cage();
        CMT_CHECK(h[k], "cm_heap_new_in_cage failed");
        for (int i = 0; i < 200; i++) {
            size_t n = i % 50 == 0 ? (300 << 10) : (size_t)(16 + i * 7);
            void *p = cm_heap_malloc(h[k], n);
            CMT_CHECK(p && cm_heap_contains(h[k], p), "cage heap block");
            check_round_trip(p, "cage heap block");
            b[k][i] = fill(p, n, (uint64_t)(k * 1000 + i));
        }
    }
    cm_heap_destroy(h[1]); /* while 0 and 2 are in use */
    void *r = cm_heap_realloc(h[2], b[0][5].p, 5000);
    CMT_CHECK(r && cm_heap_contains(h[2], r), "cm_heap_realloc into a cage heap");
    CMT_VERIFY(r, b[0][5].n, b[0][5].seed, "block moved between cage heaps");
    b[0][5] = fill(r, 5000, 77);
    cm_heap_delete(h[2]); /* its blocks stay valid, adopted by the default cage heap */
    for (int k = 0; k < 3; k += 2)
        for (int i = 0; i < 200; i++) {
            check_round_trip(b[k][i].p, "surviving cage heap block");
            verify_free(&b[k][i], "cage heap block");
        }
    cm_heap_delete(h[0]);
    cm_heap_t *plain = cm_heap_new();
    void *p = cm_heap_malloc(plain, 64);
    CMT_CHECK(p && !cm_in_cage(p), "a plain heap gave a cage block");
    cm_heap_destroy(plain);
}

/* ------------------------------------------------------------ threads */

enum { THREADS = 4, ROUNDS = 30000, LIVE = 128 };
static struct cmt_xchg xchg;

static void *cage_worker(void *arg) {
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t rng = me * 977 + 1;
    struct cmt_blk live[LIVE] = {{0}};
    cm_heap_t *own = cm_heap_new_in_cage();
    CMT_CHECK(own, "cm_heap_new_in_cage in a thread");
    for (int round = 0; round < ROUNDS; round++) {
        unsigned slot = (unsigned)(cmt_rand(&rng) % LIVE);
        struct cmt_blk *b = &live[slot];
        if (b->p) {
            CMT_VERIFY(b->p, b->n, b->seed, "cage block");
            /* blocks of the own heap stay here: it is destroyed midway */
            if (b->kind == CMT_HEAP || !cmt_xchg_put(&xchg, b, &rng)) (round % 2 ? cm_free : cm_cage_free)(b->p);
            b->p = NULL;
        }
        struct cmt_blk other;
        if (cmt_xchg_take(&xchg, me, &other, &rng)) { /* another thread's block, freed here */
            CMT_VERIFY(other.p, other.n, other.seed, "cage block from another thread");
            check_round_trip(other.p, "cage block from another thread");
            (round % 2 ? cm_cage_free : cm_free)(other.p);
        }
        size_t n = cmt_rand(&rng) % 64 == 0 ? cmt_range(&rng, 1, 400 << 10) : cmt_range(&rng, 1, 600);
        b->kind = round % 3 == 0 ? CMT_HEAP : CMT_MALLOC;
        b->p = b->kind == CMT_HEAP ? cm_heap_malloc(own, n) : cm_cage_malloc(n);
        CMT_CHECK(b->p, "cage allocation in a thread failed");
        check_round_trip(b->p, "thread's cage block");
        b->n = n;
        b->owner = me;
        b->seed = cmt_seed(b->p, n, me, (uint64_t)round);
        cmt_fill(b->p, n, b->seed);
        if (round == ROUNDS / 2) { /* replace the own heap while the others run */
            for (unsigned i = 0; i < LIVE; i++)
                if (live[i].p && live[i].kind == CMT_HEAP) {
                    CMT_CHECK(cm_heap_contains(own, live[i].p), "a block of the own heap is not in it");
                    CMT_VERIFY(live[i].p, live[i].n, live[i].seed, "cage heap block");
                    live[i].p = NULL;
                }
            cm_heap_destroy(own);
            own = cm_heap_new_in_cage();
            CMT_CHECK(own, "cm_heap_new_in_cage again");
        }
    }
    for (unsigned i = 0; i < LIVE; i++)
        if (live[i].p) {
            CMT_VERIFY(live[i].p, live[i].n, live[i].seed, "cage block");
            cm_free(live[i].p);
        }
    cm_heap_delete(own);
    return NULL;
}

static void test_threads(void) {
    pthread_t t[THREADS];
    for (unsigned i = 0; i < THREADS; i++)
        CMT_CHECK(pthread_create(&t[i], NULL, cage_worker, (void *)(uintptr_t)i) == 0, "pthread_create");
    for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    struct cmt_blk b;
    uint64_t rng = 5;
    while (cmt_xchg_take(&xchg, UINT32_MAX, &b, &rng)) {
        CMT_VERIFY(b.p, b.n, b.seed, "cage block left in the exchange");
        cm_free(b.p);
    }
}

/* A thread that exits leaves its cage blocks valid and the free space of
 * its half-used cage superblocks to others: the next thread's default cage
 * heap allocates there. */
enum { LEFT_N = 512, LEFT_SIZE = 208 }; /* a class no other test here allocates in bulk */
static blk_t left[LEFT_N];

static void *leave_cage_blocks(void *arg) {
    (void)arg;
    for (size_t i = 0; i < LEFT_N; i++) left[i] = fill(cm_cage_malloc(LEFT_SIZE), LEFT_SIZE, 9000 + i);
    for (size_t i = 0; i < LEFT_N; i += 2) verify_free(&left[i], "cage block of a thread about to exit");
    return NULL;
}

static void *reuse_cage_space(void *arg) {
    size_t *reused = arg;
    static blk_t mine[LEFT_N / 2];
    for (size_t i = 0; i < LEFT_N / 2; i++) {
        mine[i] = fill(cm_cage_malloc(LEFT_SIZE), LEFT_SIZE, 9500 + i);
        for (size_t j = 1; j < LEFT_N; j += 2)
            if (((uintptr_t)mine[i].p >> 16) == ((uintptr_t)left[j].p >> 16)) {
                (*reused)++;
                break;
            }
    }
    for (size_t i = 0; i < LEFT_N / 2; i++) verify_free(&mine[i], "cage block in reclaimed space");
    return NULL;
}

static void test_exited_thread_reclaimed(void) {
    pthread_t t;
    pthread_create(&t, NULL, leave_cage_blocks, NULL);
    pthread_join(t, NULL);
    size_t reused = 0;
    pthread_create(&t, NULL, reuse_cage_space, &reused);
    pthread_join(t, NULL);
    for (size_t i = 1; i < LEFT_N; i += 2) verify_free(&left[i], "cage block of a thread that exited");
    CMT_CHECK(reused >= LEFT_N / 4, "only %zu of %d cage allocations reused an exited thread's superblocks", reused,
              LEFT_N / 2);
    printf("exited thread: %zu of %d cage allocations reused its half-used superblocks\n", reused, LEFT_N / 2);
}

/* ------------------------------------------------------------ memory */

/* Emptied cage memory leaves the resident set. */
static void test_returned(void) {
    enum { N = 64 };
    static char *p[N];
    cm_trim(); /* what the tests before kept for reuse */
    size_t before = cmt_rss();
    for (int i = 0; i < N; i++) {
        p[i] = cm_cage_malloc(2 << 20);
        CMT_CHECK(p[i], "2 MiB cage block");
        memset(p[i], i + 1, 2 << 20);
    }
    for (int i = 0; i < 20000; i++) { /* 20,000 small ones too: about 80 superblocks */
        char *q = cm_cage_malloc(500);
        memset(q, 1, 500);
        *(char **)q = p[0];
        p[0] = q;
    }
    size_t full = cmt_rss();
    while (*p[0] != (char)1 || std_usable_size(p[0]) < (2 << 20)) {
        char *next = *(char **)p[0];
        std_free(p[0]);
        p[0] = next;
    }
    for (int i = 0; i < N; i++) {
        CMT_CHECK(p[i][(2 << 20) - 1] == (char)(i + 1), "2 MiB cage block corrupted");
        std_free(p[i]);
    }
    cm_trim();
    size_t after = cmt_rss();
    printf("cage RSS: %zu KiB before, %zu KiB with 138 MiB live, %zu KiB after free and trim\n", before >> 10,
           full >> 10, after >> 10);
#ifdef CM_SANITIZED
    return; /* the sanitizers' shadow of what was touched stays resident */
#endif
    CMT_CHECK(full > before + (100 << 20), "the blocks were not resident");
    CMT_CHECK(after < before + (8 << 20), "emptied cage memory stayed resident (%zu KiB)", (after - before) >> 10);
}

/* ------------------------------------------------------------ a full cage */

/* In a child started with CAGEMALLOC_CAGE_LIMIT=32m: fill the cage with
 * blocks of every size until NULL, check ENOMEM and every block, free half,
 * allocate again. */
static int run_full_cage(void) {
    enum { MAX = 100000 };
    static blk_t b[MAX];
    uint64_t rng = 3;
    int n = 0;
    size_t bytes = 0;
    for (unsigned attempt = 0;; attempt++) {
        size_t size = attempt % 10 == 0 ? cmt_range(&rng, 200 << 10, 2 << 20) : cmt_range(&rng, 1, 4000);
        errno = 0;
        void *p = cm_cage_malloc(size);
        if (!p) {
            CMT_CHECK(errno == ENOMEM, "a full cage set errno %d, not ENOMEM", errno);
            if (size < 4000) break;
            continue; /* a large one did not fit: keep filling with small ones */
        }
        CMT_CHECK(n < MAX, "the 32 MiB cage took more than %d blocks", MAX);
        check_round_trip(p, "block of the small cage");
        b[n] = fill(p, size, (uint64_t)n);
        bytes += size;
        n++;
    }
    CMT_CHECK(bytes > (16 << 20) && bytes <= (32 << 20), "a 32 MiB cage held %zu bytes", bytes);
    void *plain = std_malloc(1 << 20);
    CMT_CHECK(plain && !cm_in_cage(plain), "malloc failed or used the full cage");
    std_free(plain);
    for (int i = 0; i < n; i += 2) verify_free(&b[i], "block of the full cage");
    for (int i = 0; i < n; i += 2) {
        void *p = cm_cage_malloc(b[i].n);
        CMT_CHECK(p, "no room after freeing half of the cage");
        b[i] = fill(p, b[i].n, (uint64_t)(i + MAX));
    }
    for (int i = 0; i < n; i++) verify_free(&b[i], "block of the full cage");
    printf("full cage: %d blocks, %zu KiB, then NULL/ENOMEM; refilled after freeing half\n", n, bytes >> 10);
    return 0;
}

/* In a child started with CAGEMALLOC_CAGE_LIMIT=32m: fill the cage with
 * 1 MiB blocks, then with blocks of one small size, free one 1 MiB block
 * (its units wait in the large-block cache) and allocate a size that needs
 * a new superblock: the cache gives its units back rather than the
 * allocation failing. */
static int run_cache_gives_way(void) {
    enum { MAX = 64, SMALL = 20000, SMALL_SIZE = 100 };
    static blk_t big[MAX], small[SMALL];
    int n_big = 0, n_small = 0;
    void *p;
    while (n_big < MAX && (p = cm_cage_malloc(1 << 20)) != NULL) {
        big[n_big] = fill(p, 1 << 20, (uint64_t)n_big);
        n_big++;
    }
    while (n_small < SMALL && (p = cm_cage_malloc(SMALL_SIZE)) != NULL) {
        small[n_small] = fill(p, SMALL_SIZE, (uint64_t)(MAX + n_small));
        n_small++;
    }
    CMT_CHECK(n_big > 16 && n_small < SMALL, "the cage did not fill (%d large, %d small blocks)", n_big, n_small);
    verify_free(&big[0], "large block of the full cage");
    errno = 0;
    p = cm_cage_malloc(5000);
    CMT_CHECK(p != NULL, "no room for a 5000-byte block after a 1 MiB block was freed (errno %d)", errno);
    blk_t other = fill(p, 5000, 1);
    verify_free(&other, "block after the cache gave way");
    for (int i = 1; i < n_big; i++) verify_free(&big[i], "large block of the full cage");
    for (int i = 0; i < n_small; i++) verify_free(&small[i], "small block of the full cage");
    printf("full cage: a freed 1 MiB block's cached units served a new superblock\n");
    return 0;
}

/* ------------------------------------------------------------ under RLIMIT_AS */

static size_t vm_size(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    CMT_CHECK(f && fscanf(f, "%lu", &pages) == 1, "cannot read /proc/self/statm");
    fclose(f);
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* In a fresh child: with address space for the cage and 512 MiB more (not
 * the three cage sizes that reserving it by over-mapping takes), the cage
 * is made and serves blocks small and large. */
static int run_limited(void) {
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = vm_size() + CM_CAGE_SIZE + ((size_t)512 << 20);
    CMT_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
    enum { N = 64 };
    blk_t b[N];
    uint64_t rng = 5;
    for (int i = 0; i < N; i++) {
        size_t size = i % 8 == 0 ? cmt_range(&rng, 1 << 20, 16 << 20) : cmt_range(&rng, 1, 5000);
        void *p = cm_cage_malloc(size);
        CMT_CHECK(p && cm_in_cage(p), "cm_cage_malloc(%zu) under RLIMIT_AS of the cage + 512 MiB: %p (errno %d)", size,
                  p, errno);
        check_round_trip(p, "block of the cage under RLIMIT_AS");
        b[i] = fill(p, size, (uint64_t)i);
    }
    for (int i = 0; i < N; i++) verify_free(&b[i], "block of the cage under RLIMIT_AS");
    printf("cage made and used under RLIMIT_AS of its size + 512 MiB\n");
    return 0;
}

static void run_child(const char *self, const char *mode, const char *env, const char *value) {
    pid_t pid = fork();
    CMT_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        if (env) setenv(env, value, 1);
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the %s child failed (status 0x%x)", mode, status);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "full-cage") == 0) return run_full_cage();
    if (argc > 1 && strcmp(argv[1], "cache-gives-way") == 0) return run_cache_gives_way();
    if (argc > 1 && strcmp(argv[1], "limited") == 0) return run_limited();
    test_before_cage();
    test_geometry();
    test_blocks();
    test_realloc();
    test_heaps();
    test_threads();
    test_exited_thread_reclaimed();
    test_returned();
    run_child(argv[0], "full-cage", "CAGEMALLOC_CAGE_LIMIT", "32m");
    run_child(argv[0], "cache-gives-way", "CAGEMALLOC_CAGE_LIMIT", "32m");
    run_child(argv[0], "limited", NULL, NULL);
    printf("cage_api: ok\n");
    return 0;
}
