/* cage.c: the cage (cagemalloc.h). Its reservation, made once by whichever
 * thread first needs it; its 64 KiB units, claimed by the superblocks and
 * large blocks of the heaps inside it; and the cm_cage_ entry points.
 *
 * The cage is [start, start + CM_CAGE_SIZE) with start an odd multiple of
 * CM_CAGE_SIZE, so bit 31 + S is set in every address of it and the bits
 * above are start's. Its units are a lock-free bitmap (runs.c) kept in its
 * own first unit: every thread racing to make the cage reserves one and
 * fills in that bitmap before its CAS publishes cm_cage_base, so the bitmap
 * a claimer finds is always complete; the losers unmap theirs. Nothing
 * waits. Units stay reserved for the life of the process; a unit given
 * back has had its pages returned, so claimed units always read as zero. */
#include <errno.h>
#include <sys/mman.h>

#include "alloc_inline.h"

uintptr_t cm_cage_base = CM_CAGE_LOW_BITS;

#define UNITS ((uint32_t)(CM_CAGE_SIZE >> CM_UNIT_SHIFT))
#define ALL_ONES (~(uint64_t)0)
_Static_assert(UNITS / 8 <= CM_UNIT_SIZE, "the cage's unit bitmap fits in its first unit");

/* acquire: pairs with the release CAS that published the cage, so its
 * bitmap and page-map regions are seen complete */
static uintptr_t cage_start(void) {
    return __atomic_load_n(&cm_cage_base, __ATOMIC_ACQUIRE) & ~(uintptr_t)CM_CAGE_LOW_BITS;
}

static _Atomic uint64_t *unit_word(void *ctx, uint32_t w) {
    (void)ctx;
    return (_Atomic uint64_t *)cage_start() + w;
}
static cm_runs_t units = {.word = unit_word};

/* Units in use by the cage: all of them, or CAGEMALLOC_CAGE_LIMIT's worth
 * (a small cage for tests that fill it). Unit 0 holds the bitmap. */
static uint32_t units_used(void) {
    size_t limit = CM_OPTION(cage_limit);
    if (limit == 0 || limit >= CM_CAGE_SIZE) return UNITS;
    uint32_t n = (uint32_t)(limit >> CM_UNIT_SHIFT);
    return n < 2 ? 2 : n;
}

static cm_reservation_t units_open = {.prot = PROT_READ | PROT_WRITE, .step = CM_OPEN_STEP_SPANS};

/* Units [first, first + n) were claimed for a block: open them. False (and
 * the units freed again) if the kernel would not. */
static bool claimed(uint32_t first, uint32_t n) {
    uintptr_t start = cage_start();
    if (!cm_reservation_open(&units_open, start, start + ((size_t)(first + n) << CM_UNIT_SHIFT), start + CM_CAGE_SIZE)) {
        cm_runs_free(&units, first, n);
        return false;
    }
    cm_count(&cm_counters.committed, (size_t)n << CM_UNIT_SHIFT);
    return true;
}

static void fill_bitmap(_Atomic uint64_t *words) {
    uint32_t n = units_used();
    for (uint32_t w = 0; w * 64 < n; w++) {
        uint64_t bits = n - w * 64 >= 64 ? ALL_ONES : ((uint64_t)1 << (n - w * 64)) - 1;
        if (w == 0) bits &= ~(uint64_t)1; /* unit 0: this bitmap */
        /* relaxed: published by the release CAS on cm_cage_base */
        atomic_store_explicit(&words[w], bits, memory_order_relaxed);
    }
}

/* Reserve the cage at an odd multiple of its size, opened as its units are claimed. */
static bool make_cage(void) {
    char *r = cm_os_reserve_closed_placed(CM_CAGE_SIZE, 2 * CM_CAGE_SIZE, CM_CAGE_SIZE);
    if (!r) return false;
    uintptr_t start = (uintptr_t)r, end = start + CM_CAGE_SIZE;
    if (!cm_os_open((void *)start, CM_UNIT_SIZE, PROT_READ | PROT_WRITE, false)) { /* unit 0: the bitmap */
        cm_os_unreserve((void *)start, CM_CAGE_SIZE);
        return false;
    }
    bool regions = true; /* the page map's records for the cage's 4 GiB regions, made now */
    for (uintptr_t a = start; a < end && regions; a += (uintptr_t)1 << 32) regions = cm_pagemap_set(a, 1, 0);
    uintptr_t none = CM_CAGE_LOW_BITS;
    if (regions) {
        fill_bitmap((_Atomic uint64_t *)start);
        /* release: the bitmap and the page-map regions before the base */
        if (__atomic_compare_exchange_n(&cm_cage_base, &none, start | CM_CAGE_LOW_BITS, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
            cm_reservation_opened(&units_open, start + CM_UNIT_SIZE);
            return true;
        }
    }
    cm_os_unreserve((void *)start, CM_CAGE_SIZE);
    return none != CM_CAGE_LOW_BITS; /* another thread made it */
}

bool cm_cage_ensure(void) {
    if (__atomic_load_n(&cm_cage_base, __ATOMIC_ACQUIRE) != CM_CAGE_LOW_BITS) return true;
    cm_ensure_init(); /* the options (CAGEMALLOC_CAGE_LIMIT) */
    return make_cage();
}

char *cm_cage_claim(size_t size, size_t align) {
    if (!cm_cage_ensure() || size > CM_CAGE_SIZE || align > CM_CAGE_SIZE) return NULL;
    uint32_t n = (uint32_t)(size >> CM_UNIT_SHIFT), a = (uint32_t)(align >> CM_UNIT_SHIFT);
    /* a run aligned beyond one bitmap word: claim enough to cut one out */
    uint32_t extra = a > 64 ? a - 1 : 0;
    uint32_t found = cm_runs_claim(&units, (units_used() + 63) / 64, n + extra, a > 64 ? 1 : a);
    if (!found) return NULL;
    uint32_t first = found - 1;
    if (extra) {
        uint32_t lead = (a - (first & (a - 1))) & (a - 1);
        if (lead) cm_runs_free(&units, first, lead);
        if (extra > lead) cm_runs_free(&units, first + lead + n, extra - lead);
        first += lead;
    }
    if (!claimed(first, n)) return NULL;
    return (char *)cage_start() + ((size_t)first << CM_UNIT_SHIFT);
}

bool cm_cage_claim_at(char *p, size_t size) {
    uint32_t first = (uint32_t)(((uintptr_t)p - cage_start()) >> CM_UNIT_SHIFT), n = (uint32_t)(size >> CM_UNIT_SHIFT);
    return first + (uint64_t)n <= units_used() && cm_runs_claim_at(&units, first, n) && claimed(first, n);
}

void cm_cage_release(char *p, size_t size) {
    cm_runs_free(&units, (uint32_t)(((uintptr_t)p - cage_start()) >> CM_UNIT_SHIFT), (uint32_t)(size >> CM_UNIT_SHIFT));
}

/* ------------------------------------------------------------ API */

void *cm_cage_malloc(size_t size) { return cm_heap_malloc_inline(cm_thread.cage, size); }
void *cm_cage_calloc(size_t count, size_t size) { return cm_heap_calloc_inline(cm_thread.cage, count, size); }
void *cm_cage_aligned_alloc(size_t align, size_t size) { return cm_heap_aligned_alloc_in(cm_thread.cage, align, size); }
void *cm_cage_realloc(void *p, size_t size) { return cm_realloc_in_space(cm_thread.cage, p, size); }
/* The cage is not in the arena's flat map: straight to the two-level one. */
void cm_cage_free(void *p) { cm_free_outside_arena(p); }
int cm_in_cage(const void *p) { return (int)cm_space_of(p); }
