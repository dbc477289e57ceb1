/* unit_large_cache: which freed large mapping a large allocation reuses.
 *  - An exact fit among several sizes; else the smallest that fits (split,
 *    its tail cached, at twice the need or more); else the largest
 *    smaller one, grown. One mapping freed and cut into blocks a third of
 *    its size serves all three (GNU sort's pattern).
 *  - A block grown (by malloc or realloc) gets the pages of other cached
 *    mappings moved in behind it, of 1 MiB or more or covering what is
 *    missing; calloc's block reads as zeros all the same. A block that
 *    cannot grow in place moves a multiple of 2 MiB away.
 *  - Cached neighbours, a mapping right after the block (or, for malloc,
 *    right before it), are taken in whole, without a system call.
 *  - These choices made within the one list that sizes above 16 units
 *    share. Blocks of up to 16 units (1 MiB) are spans of the arena, not
 *    mappings (unit_large_spans), so the blocks here are larger, but for
 *    one mapping that realloc cut down.
 *  - A mapping idle past the decay time is unmapped by the pool's decay
 *    pass (which small blocks' refills run), not only by large operations,
 *    also when passes come every few milliseconds (each one looks at it
 *    and puts it back: that must not make it young again).
 *  - Fresh pages claimed for superblocks take the cache's place: it gives
 *    twice as many bytes back, oldest mappings first.
 *  - Two threads churning blocks of 17-55 units through the cache, and small
 *    blocks of 8-64 KiB beside them (the cache giving way meanwhile), every
 *    block patterned and checked before its free.
 * Driven through cm_malloc and cm_free in a fresh process: these are the
 * only large blocks. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

#define UNIT ((size_t)1 << CM_UNIT_SHIFT)
#define CHURN_STEPS 3000

static size_t cached_units(void) { return atomic_load(&cm_counters.large_cached) / UNIT; }

static char *block(size_t units) {
    char *p = cm_malloc(units * UNIT);
    CHECK(p, "cm_malloc(%zu units)", units);
    p[0] = p[units * UNIT - 1] = (char)units;
    return p;
}

/* A block of `units` that does not border [p, p + p_units) on either side.
 * The kernel maps a new block right below the last one, or in a hole
 * anywhere; a block that borders p is kept live in spacer[] (up to 3, for
 * the caller to free) and another taken, for a cached neighbour would be
 * taken in whole where a check wants pages moved in or fresh ones. */
static char *apart_from(const char *p, size_t p_units, size_t units, char **spacer) {
    for (int i = 0; i < 3; i++) {
        char *q = cm_malloc(units * UNIT);
        CHECK(q, "cm_malloc(%zu units)", units);
        if (q + units * UNIT != p && p + p_units * UNIT != q) return q;
        spacer[i] = q;
    }
    CHECK(false, "every block borders %p", (const void *)p);
    return NULL;
}

static void free_spacers(char **spacer) {
    for (int i = 0; i < 3; i++) cm_free(spacer[i]), spacer[i] = NULL;
}

static void expect(const char *what, const char *got, const char *want) {
    CHECK(got == want, "%s: got %p, want %p", what, (const void *)got, (const void *)want);
}

static void *churn(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    char *live[4] = {0}, *small[8] = {0};
    size_t size[4] = {0}, small_size[8] = {0};
    for (int i = 0; i < CHURN_STEPS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* small blocks too: superblocks claimed (fresh once the decay has
         * purged freed ones) make the cache give way during the churn */
        unsigned s = (unsigned)(x >> 32) % 8;
        if (small[s]) {
            for (size_t off = 0; off < small_size[s]; off += 256)
                CHECK(small[s][off] == (char)(off + s), "small block %p changed at %zu", (void *)small[s], off);
            cm_free(small[s]);
        }
        small_size[s] = 8192 + (x >> 40) % 57344;
        small[s] = cm_malloc(small_size[s]);
        CHECK(small[s], "cm_malloc(%zu)", small_size[s]);
        for (size_t off = 0; off < small_size[s]; off += 256) small[s][off] = (char)(off + s);
        unsigned k = (unsigned)(x % 4);
        if (live[k]) {
            for (size_t off = 0; off < size[k]; off += 4096)
                CHECK(live[k][off] == (char)(off / 4096 + size[k]), "block %p changed at %zu", (void *)live[k], off);
            cm_free(live[k]);
        }
        size[k] = (17 + (x >> 8) % 39) * UNIT - (x >> 20) % UNIT;
        live[k] = cm_malloc(size[k]);
        CHECK(live[k], "cm_malloc(%zu)", size[k]);
        for (size_t off = 0; off < size[k]; off += 4096) live[k][off] = (char)(off / 4096 + size[k]);
    }
    for (int k = 0; k < 4; k++) cm_free(live[k]);
    for (int k = 0; k < 8; k++) cm_free(small[k]);
    return NULL;
}

int main(void) {
    setenv("CAGEMALLOC_DECAY_MS", "50", 1); /* read at initialisation */
    cm_free(cm_malloc(1)); /* initialise */
    cm_large_trim();
    CHECK(cached_units() == 0, "an empty cache to start");

    char *a19 = block(19), *a21 = block(21), *a24 = block(24);
    cm_free(a19), cm_free(a21), cm_free(a24);
    CHECK(cached_units() == 64, "three mappings cached (%zu units)", cached_units());
    char *p21 = block(21), *p22 = block(22), *p20 = cm_malloc(20 * UNIT);
    expect("an exact fit", p21, a21);
    expect("the smallest that fits, whole", p22, a24);
    CHECK(p20 && cached_units() == 0, "the largest smaller one, grown (%zu units left)", cached_units());
    CHECK(p20[0] == 19 && p20[19 * UNIT - 1] == 19, "its pages moved with it");
    memset(p20, 20, 20 * UNIT);
    cm_free(p21), cm_free(p20), cm_free(p22);
    cm_large_trim();

    /* 40 units grown to 60: the first 20 units of the cached 30 are moved
     * in behind (their bytes come along); calloc's block reads as zeros */
    for (int zeroed = 0; zeroed < 2; zeroed++) {
        char *spacer[3] = {0}, *c40 = cm_malloc(40 * UNIT);
        CHECK(c40, "cm_malloc");
        char *c30 = apart_from(c40, 40, 30, spacer);
        memset(c40, 0x40, 40 * UNIT), memset(c30, 0x30, 30 * UNIT);
        cm_free(c40), cm_free(c30);
        char *r60 = zeroed ? cm_calloc(1, 60 * UNIT) : cm_malloc(60 * UNIT);
        CHECK(r60 && cached_units() == 10, "the rest of the 30 cached (%zu units)", cached_units());
        free_spacers(spacer);
        /* grown where it was, or moved to the same offset within 2 MiB,
         * where the kernel moves whole page tables */
        CHECK(((uintptr_t)r60 - (uintptr_t)c40) % ((size_t)2 << 20) == 0, "moved from %p to %p: not 2 MiB apart",
              (void *)c40, (void *)r60);
        for (size_t off = 0; off < 60 * UNIT; off++) {
            char want = zeroed ? 0 : off < 40 * UNIT ? 0x40 : 0x30;
            CHECK(r60[off] == want, "%s: byte %zu is %d, want %d", zeroed ? "calloc" : "malloc", off, r60[off], want);
        }
        cm_free(r60);
        cm_large_trim();
    }

    /* a cached mapping under 1 MiB (blocks that small are spans: this one
     * is a mapping cut down by realloc) that does not cover what is missing
     * is not moved in: the grown part is fresh */
    char *spacer[3] = {0}, *e40 = cm_malloc(40 * UNIT);
    CHECK(e40, "cm_malloc");
    char *e17 = apart_from(e40, 40, 17, spacer), *e8 = cm_realloc(e17, 8 * UNIT);
    CHECK(e8 == e17, "realloc cutting the mapping down in place");
    memset(e40, 0x40, 40 * UNIT), memset(e8, 8, 8 * UNIT);
    cm_free(e40), cm_free(e8);
    char *g60 = cm_malloc(60 * UNIT);
    CHECK(g60 && cached_units() == 8, "the small mapping left cached (%zu units)", cached_units());
    free_spacers(spacer);
    CHECK(g60[0] == 0x40 && g60[40 * UNIT - 1] == 0x40 && g60[40 * UNIT] == 0 && g60[60 * UNIT - 1] == 0,
          "the 40 grown with fresh pages");
    cm_free(g60);
    cm_large_trim();

    /* cached neighbours (two halves of one freed mapping) are taken in
     * whole, without a system call: by malloc, at the lower one's start;
     * by calloc, zeroed; by realloc, behind the block, its bytes kept */
    for (int zeroed = 0; zeroed < 2; zeroed++) {
        char *whole = cm_malloc(60 * UNIT);
        CHECK(whole, "cm_malloc");
        cm_free(whole);
        char *low = cm_malloc(30 * UNIT), *high = cm_malloc(30 * UNIT);
        expect("the first half of the freed mapping", low, whole);
        expect("its second half", high, whole + 30 * UNIT);
        memset(low, 0x11, 30 * UNIT), memset(high, 0x22, 30 * UNIT);
        cm_free(high), cm_free(low);
        size_t calls = atomic_load(&cm_counters.os_calls);
        char *both = zeroed ? cm_calloc(1, 60 * UNIT) : cm_malloc(60 * UNIT);
        expect("both halves taken in", both, whole);
        CHECK(atomic_load(&cm_counters.os_calls) == calls && cached_units() == 0,
              "%zu system calls, %zu units left cached", atomic_load(&cm_counters.os_calls) - calls, cached_units());
        for (size_t off = 0; zeroed && off < 60 * UNIT; off++) CHECK(both[off] == 0, "calloc: byte %zu is %d", off, both[off]);
        cm_free(both);
        cm_large_trim();
    }
    char *whole = cm_malloc(60 * UNIT);
    CHECK(whole, "cm_malloc");
    cm_free(whole);
    char *low = cm_malloc(30 * UNIT), *high = cm_malloc(30 * UNIT);
    CHECK(low == whole && high == whole + 30 * UNIT, "the freed mapping in two halves");
    memset(low, 0x11, 30 * UNIT);
    cm_free(high);
    size_t calls = atomic_load(&cm_counters.os_calls);
    char *grown = cm_realloc(low, 50 * UNIT);
    expect("realloc grown in place over its cached neighbour", grown, low);
    CHECK(atomic_load(&cm_counters.os_calls) == calls && cached_units() == 0, "%zu system calls, %zu units cached",
          atomic_load(&cm_counters.os_calls) - calls, cached_units());
    for (size_t off = 0; off < 30 * UNIT; off++) CHECK(grown[off] == 0x11, "realloc: byte %zu lost", off);
    cm_free(grown);
    cm_large_trim();

    /* realloc's growth takes cached pages too */
    char *f20 = cm_malloc(20 * UNIT);
    CHECK(f20, "cm_malloc");
    char *h30 = apart_from(f20, 20, 30, spacer);
    memset(f20, 0x20, 20 * UNIT), memset(h30, 0x33, 30 * UNIT);
    cm_free(h30);
    char *f40 = cm_realloc(f20, 40 * UNIT);
    CHECK(f40 && cached_units() == 10, "realloc took 20 of the cached 30 units (%zu left)", cached_units());
    free_spacers(spacer);
    CHECK(f40[0] == 0x20 && f40[20 * UNIT - 1] == 0x20 && f40[20 * UNIT] == 0x33 && f40[40 * UNIT - 1] == 0x33,
          "the block's bytes kept, the cached ones behind");
    cm_free(f40);
    cm_large_trim();

    char *b20 = block(20), *b40 = block(40), *b100 = block(100);
    cm_free(b20), cm_free(b40), cm_free(b100);
    char *q30 = block(30), *q17 = block(17), *q18 = block(18);
    expect("above 1 MiB: the smallest that fits", q30, b40);
    expect("a size above the exact lists", q17, b20);
    expect("one of over five times the need, split", q18, b100);
    CHECK(cached_units() == 82, "its tail cached (%zu units)", cached_units());
    cm_free(q30), cm_free(q17), cm_free(q18);
    cm_large_trim();

    /* a buffer freed and cut into thirds: all three from its mapping */
    char *buf = block(90);
    cm_free(buf);
    char *third[3];
    for (int i = 0; i < 3; i++) third[i] = block(30);
    for (int i = 0; i < 3; i++) expect("a third of the freed buffer", third[i], buf + (size_t)i * 30 * UNIT);
    CHECK(cached_units() == 0, "nothing left cached (%zu units)", cached_units());
    for (int i = 0; i < 3; i++) cm_free(third[i]);
    cm_large_trim();

    /* the small-block path's decay pass gives an idle cache back too */
    cm_free(block(20));
    CHECK(cached_units() == 20, "a mapping cached (%zu units)", cached_units());
    struct timespec idle = {0, 120 * 1000 * 1000};
    nanosleep(&idle, NULL);
    cm_pool_decay();
    CHECK(cached_units() == 0, "decayed by the pool's pass (%zu units left)", cached_units());

    /* passes every few milliseconds, each taking the mapping to look at its
     * age and putting it back, do not keep it young */
    cm_free(block(20));
    struct timespec tick = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 60 && cached_units() != 0; i++) {
        nanosleep(&tick, NULL);
        cm_pool_decay();
    }
    CHECK(cached_units() == 0, "decayed under frequent passes (%zu units left)", cached_units());

    /* a MiB of fresh superblock pages (and what was counted before, under
     * a MiB) gives twice that back: 2 MiB or more of 40 cached units, at
     * the rate of one byte for one it would be under 2 MiB */
    cm_free(block(40));
    CHECK(cached_units() == 40, "a mapping cached (%zu units)", cached_units());
    cm_large_give_way((size_t)1 << 20);
    CHECK(cached_units() <= 8, "a MiB claimed gave 2 MiB or more back (%zu units left of 40)", cached_units());
    cm_large_trim();
    CHECK(cached_units() == 0, "trimmed (%zu units left)", cached_units());

    /* superblocks made of fresh pages take the cache's place: 3 MiB of
     * them (16 KiB blocks; a span or two may reuse units freed earlier)
     * give at least 2 MiB of the cached 40 units back, the mapping
     * losing its tail */
    char *cached = block(40);
    cm_free(cached);
    CHECK(cached_units() == 40, "a mapping cached (%zu units)", cached_units());
    enum { SMALL = 192, SMALL_SIZE = 16384 };
    char *small[SMALL];
    for (int i = 0; i < SMALL; i++) {
        small[i] = cm_malloc(SMALL_SIZE);
        CHECK(small[i], "cm_malloc(%d)", SMALL_SIZE);
        memset(small[i], i, SMALL_SIZE);
    }
    size_t left = cached_units();
    CHECK(left <= 8, "at least 2 MiB given way (%zu units left of 40)", left);
    /* the mapping lost its tail, not its head (msync: ENOMEM where nothing is mapped) */
    CHECK(msync(cached + left * UNIT, (40 - left) * UNIT, MS_ASYNC) == -1 && errno == ENOMEM, "its tail unmapped");
    CHECK(left == 0 || msync(cached, left * UNIT, MS_ASYNC) == 0, "its head still cached");
    for (int i = 0; i < SMALL; i++) {
        for (int off = 0; off < SMALL_SIZE; off += 512) CHECK(small[i][off] == (char)i, "block %d changed", i);
        cm_free(small[i]);
    }
    cm_large_trim();

    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0, "thread");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    cm_large_trim();
    CHECK(cached_units() == 0, "trim empties the cache (%zu units left)", cached_units());
    printf("large cache: exact fits, smallest fits, largest smaller grown with cached pages moved in, split past 2x, a freed buffer cut in thirds; decayed; gave way to fresh superblocks; two threads churned\n");
    return 0;
}
