/* unit_large_spans: blocks of 128 KiB - 1 MiB are spans of the arena.
 *  - A block is the smallest span that holds it, aligned to its size, its
 *    usable size the span's; a larger alignment makes it a mapping.
 *  - realloc keeps it in place while it fits and fills over half the span,
 *    and moves it (its bytes kept) otherwise.
 *  - Freed, its span is reused resident: the next block of its size gets
 *    the same address, and calloc's reads as zeros all the same; what the
 *    units held never makes the block look free (a link word at its start).
 *  - Churn through blocks of every size in the range makes no system call
 *    once the arena has the chunks it needs.
 *  - The resident free units stay within CAGEMALLOC_LARGE_CACHE, and
 *    malloc_trim returns them.
 * Driven through the cm_ API in a fresh process with a long decay time (no
 * decay pass returns pages during the run). */
#include <string.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

#define KIB ((size_t)1024)
#define LIVE 8
#define STEPS 3000

static uint64_t xorshift(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static bool in_arena(const void *p) {
    uintptr_t base = cm_arena_base();
    return cm_arena_has_unit(cm_arena_unit(base, (uintptr_t)p));
}

static size_t os_calls(void) { return atomic_load(&cm_counters.os_calls); }

static void fill(char *p, size_t n, char tag) {
    for (size_t off = 0; off < n; off += 4096) p[off] = (char)(tag + off / 4096);
}

static void verify(const char *p, size_t n, char tag) {
    for (size_t off = 0; off < n; off += 4096)
        CHECK(p[off] == (char)(tag + off / 4096), "block %p of %zu bytes changed at %zu", (const void *)p, n, off);
}

/* LIVE slots, each step one block freed (checked first), allocated or
 * reallocated anew at 129 KiB - 1 MiB. */
static void churn(char **live, size_t *size, uint64_t *x, int steps) {
    for (int i = 0; i < steps; i++) {
        uint64_t r = xorshift(x);
        unsigned k = (unsigned)(r % LIVE);
        size_t n = 129 * KIB + (r >> 16) % (1024 * KIB - 129 * KIB);
        if (live[k]) verify(live[k], size[k], (char)k);
        if (live[k] && (r >> 8) % 4 == 0) {
            char *q = cm_realloc(live[k], n);
            CHECK(q, "cm_realloc(%zu)", n);
            verify(q, size[k] < n ? size[k] : n, (char)k);
            live[k] = q;
        } else {
            cm_free(live[k]);
            live[k] = cm_malloc(n);
            CHECK(live[k], "cm_malloc(%zu)", n);
        }
        size[k] = n;
        fill(live[k], n, (char)k);
    }
}

int main(void) {
    setenv("CAGEMALLOC_DECAY_MS", "600000", 1); /* read at initialisation */
    setenv("CAGEMALLOC_LARGE_CACHE", "16m", 1);
    cm_free(cm_malloc(1)); /* initialise */

    /* the smallest span that holds the block, aligned to it */
    char *p = cm_malloc(200 * KIB);
    CHECK(p && in_arena(p), "a 200 KiB block in the arena (%p)", (void *)p);
    CHECK((uintptr_t)p % (256 * KIB) == 0 && cm_usable_size(p) == 256 * KIB, "a 256 KiB span (%p, %zu usable)",
          (void *)p, cm_usable_size(p));
    char *m = cm_malloc(1024 * KIB), *a = cm_aligned_alloc(512 * KIB, 300 * KIB);
    CHECK(m && cm_usable_size(m) == 1024 * KIB && in_arena(m), "1 MiB: the largest span");
    CHECK(a && (uintptr_t)a % (512 * KIB) == 0 && in_arena(a), "aligned to 512 KiB: a 512 KiB span");
    char *big = cm_malloc(1024 * KIB + 1), *far = cm_aligned_alloc(2048 * KIB, 300 * KIB);
    CHECK(big && cm_usable_size(big) > 1024 * KIB, "over 1 MiB: a mapping (%zu usable)", cm_usable_size(big));
    CHECK(far && (uintptr_t)far % (2048 * KIB) == 0, "aligned to 2 MiB: a mapping so aligned");
    cm_free(m), cm_free(a), cm_free(big), cm_free(far);

    /* realloc: in place while it fits over half the span, else moved */
    fill(p, 200 * KIB, 1);
    CHECK(cm_realloc(p, 256 * KIB) == p && cm_realloc(p, 129 * KIB) == p, "in place within the span");
    verify(p, 129 * KIB, 1);
    char *grown = cm_realloc(p, 300 * KIB);
    CHECK(grown && grown != p && cm_usable_size(grown) == 512 * KIB, "grown past the span: moved to a 512 KiB one");
    verify(grown, 129 * KIB, 1);
    char *shrunk = cm_realloc(grown, 200 * KIB);
    CHECK(shrunk && shrunk != grown && cm_usable_size(shrunk) == 256 * KIB, "shrunk to under half: moved");
    verify(shrunk, 129 * KIB, 1);
    char *small = cm_realloc(shrunk, 100 * KIB);
    CHECK(small && cm_usable_size(small) >= 100 * KIB && cm_usable_size(small) <= 128 * KIB, "below 128 KiB: a small block");
    verify(small, 100 * KIB, 1);
    cm_free(small);

    /* a freed span is reused resident: same address, calloc's zeroed */
    char *q = cm_malloc(500 * KIB);
    CHECK(q, "cm_malloc");
    memset(q, 0xab, 500 * KIB);
    cm_free(q);
    char *z = cm_calloc(1, 500 * KIB);
    CHECK(z == q, "the freed span reused (%p, was %p)", (void *)z, (void *)q);
    for (size_t i = 0; i < 500 * KIB; i++) CHECK(z[i] == 0, "calloc's byte %zu is %d", i, z[i]);
    cm_free(z);

    /* a span of units used before never starts with what looks like a
     * free block: here a free small block's link word left at its start
     * (hardened builds: unhardened ones have no such check) */
    if (cm_harden) {
        char *link_holder = cm_malloc(64), *other = cm_malloc(64);
        CHECK(link_holder && other, "cm_malloc(64)");
        cm_free(other), cm_free(link_holder); /* link_holder's word now links to other */
        uintptr_t link;
        memcpy(&link, link_holder, sizeof link);
        char *s1 = cm_malloc(300 * KIB);
        CHECK(s1, "cm_malloc");
        memcpy(s1, &link, sizeof link);
        CHECK(cm_block_looks_free(s1), "the copied link looks free where it lies");
        cm_free(s1);
        char *s2 = cm_malloc(300 * KIB);
        CHECK(s2 == s1, "the freed span reused (%p, was %p)", (void *)s2, (void *)s1);
        CHECK(!cm_block_looks_free(s2), "a block handed out that looks free");
        cm_free(s2);
    }

    /* churn: warmed up, the arena has its chunks; then no system call */
    char *live[LIVE] = {0};
    size_t size[LIVE] = {0};
    uint64_t x = 0x9e3779b97f4a7c15u;
    churn(live, size, &x, STEPS);
    size_t before = os_calls();
    churn(live, size, &x, STEPS);
    CHECK(os_calls() == before, "%zu system calls in %d steps of churn", os_calls() - before, STEPS);
    for (int k = 0; k < LIVE; k++) {
        verify(live[k], size[k], (char)k);
        cm_free(live[k]);
    }

    /* resident free units within the bound (24 MiB freed here); trim returns them */
    char *mib[24];
    for (int i = 0; i < 24; i++) {
        mib[i] = cm_malloc(1024 * KIB);
        CHECK(mib[i], "cm_malloc(1 MiB)");
        fill(mib[i], 1024 * KIB, (char)i);
    }
    for (int i = 0; i < 24; i++) {
        verify(mib[i], 1024 * KIB, (char)i);
        cm_free(mib[i]);
    }
    CHECK(cm_arena_dirty_bytes() >= 8 * KIB * KIB && cm_arena_dirty_bytes() <= 16 * KIB * KIB, "%zu KiB resident free, not up to the 16 MiB bound",
          cm_arena_dirty_bytes() / KIB);
    cm_trim();
    CHECK(cm_arena_dirty_bytes() == 0, "%zu KiB resident free after trim", cm_arena_dirty_bytes() / KIB);
    printf("large spans: smallest span aligned, mapped past 1 MiB or 1 MiB alignment; realloc in place and moved; "
           "reused resident; churn without system calls; bounded, trimmed\n");
    return 0;
}
