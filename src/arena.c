/* arena.c: the address space behind superblocks. Spans (64 KiB .. 1 MiB,
 * aligned to their size) are claimed from 4 MiB chunks mapped from the OS
 * and released back when their superblock retires, for any span size to
 * reuse; a chunk whose every unit is free is unmapped, beyond a few kept to
 * spare the system calls (and all of them by malloc_trim).
 *
 * Each chunk has one 64-bit word, bit u set when its 64 KiB unit u is free,
 * in the region record of its address (pagemap.c): claiming a span is one
 * CAS clearing an aligned run of bits, releasing it one fetch_or. As the
 * word's place is fixed by the chunk's address, a thread that read a word,
 * slept while the chunk was unmapped and another mapped at the same address,
 * and then won its CAS has claimed free units of the chunk that is there now:
 * the address it computes after the CAS is right, so there is no ABA to fear.
 * Per region a bitmap lists the chunks that may have free units, so a claim
 * looks only at those. Nothing here waits: every step is a CAS or a fetch_or.
 * Spans of the cage come from the cage's own units (cage.c). */
#include "internal.h"

#define UNITS_PER_CHUNK (CM_CHUNK_SIZE >> CM_UNIT_SHIFT)
#define ALL_FREE (~(uint64_t)0)
#define KEEP_FREE_CHUNKS 4 /* fully free chunks kept mapped (address space only: their pages are returned) */

_Static_assert(UNITS_PER_CHUNK == 64, "a chunk's units are the 64 bits of one word");

/* Chunks whose every unit is free and that are still mapped. relaxed: a
 * budget that steers keep-or-unmap; it publishes no memory. */
static _Atomic int64_t free_chunks;

static size_t chunk_index(uintptr_t a) { return (a >> CM_CHUNK_SHIFT) & (CM_REGION_CHUNKS - 1); }

/* seq_cst on the listing bits and the re-read after clearing one: a releaser
 * sets units then lists; a claimer unlists then re-reads the units. Either the
 * re-read sees the units or the listing comes after the unlisting. */
static void list_chunk(cm_region_t *r, size_t c) {
    atomic_fetch_or(&r->chunk_listed[c / 64], (uint64_t)1 << (c % 64));
}
static void unlist_chunk(cm_region_t *r, size_t c) {
    atomic_fetch_and(&r->chunk_listed[c / 64], ~((uint64_t)1 << (c % 64)));
    if (atomic_load(&r->chunk_free[c]) != 0) list_chunk(r, c);
}

/* Bit i of the result is set when units i .. i+n-1 are all free and i is a
 * multiple of n (n a power of two). */
static uint64_t aligned_runs(uint64_t free, unsigned n) {
    uint64_t starts = 0;
    for (unsigned i = 0; i < 64; i += n) starts |= (uint64_t)1 << i;
    for (unsigned s = 1; s < n; s <<= 1) free &= free >> s;
    return free & starts;
}

static uint64_t run_mask(unsigned n, unsigned at) {
    return (n == 64 ? ALL_FREE : (((uint64_t)1 << n) - 1)) << at;
}

/* Claim n aligned units of chunk c of region r; 0 if it has no such run. */
static uintptr_t claim_in_chunk(cm_region_t *r, uintptr_t region_base, size_t c, unsigned n) {
    /* acquire (load and CAS): the releaser decommitted the units before its
     * release fetch_or; we must see that before writing to them. */
    uint64_t w = atomic_load_explicit(&r->chunk_free[c], memory_order_acquire);
    for (;;) {
        uint64_t runs = aligned_runs(w, n);
        if (!runs) return 0;
        unsigned at = (unsigned)__builtin_ctzll(runs);
        if (atomic_compare_exchange_weak_explicit(&r->chunk_free[c], &w, w & ~run_mask(n, at),
                                                  memory_order_acquire, memory_order_acquire)) {
            if (w == ALL_FREE) atomic_fetch_sub_explicit(&free_chunks, 1, memory_order_relaxed);
            cm_count(&cm_counters.committed, (size_t)n << CM_UNIT_SHIFT);
            return region_base + (c << CM_CHUNK_SHIFT) + ((uintptr_t)at << CM_UNIT_SHIFT);
        }
    }
}

/* Lowest listed chunk with room first: spans crowd into the chunks mapped
 * first, so the others empty out and go back to the OS. */
static char *claim_listed(unsigned n) {
    uint32_t regions = cm_pagemap_region_count();
    for (uint32_t i = 0; i < regions; i++) {
        uintptr_t base;
        cm_region_t *r = cm_pagemap_region_at(i, &base);
        if (!r) continue;
        for (size_t word = 0; word < CM_REGION_CHUNKS / 64; word++) {
            uint64_t listed = atomic_load_explicit(&r->chunk_listed[word], memory_order_relaxed);
            while (listed) {
                size_t c = word * 64 + (size_t)__builtin_ctzll(listed);
                listed &= listed - 1;
                uintptr_t span = claim_in_chunk(r, base, c, n);
                if (span) return (char *)span;
                if (atomic_load_explicit(&r->chunk_free[c], memory_order_relaxed) == 0) unlist_chunk(r, c);
            }
        }
    }
    return NULL;
}

/* Map a new chunk, claim its first n units and list the rest. Its word is 0
 * until now (never ours, or unmapped by us after we zeroed it). */
static char *claim_new_chunk(unsigned n) {
    char *chunk = cm_os_map_aligned(CM_CHUNK_SIZE, CM_CHUNK_SIZE);
    if (!chunk) return NULL;
    if (!cm_pagemap_set((uintptr_t)chunk, CM_CHUNK_SIZE, 0)) { /* creates its region */
        cm_os_unmap(chunk, CM_CHUNK_SIZE);
        return NULL;
    }
    /* committed counts claimed spans only: the rest is untouched address space */
    cm_uncount(&cm_counters.committed, CM_CHUNK_SIZE - ((size_t)n << CM_UNIT_SHIFT));
    cm_region_t *r = cm_pagemap_region((uintptr_t)chunk);
    size_t c = chunk_index((uintptr_t)chunk);
    if (n < UNITS_PER_CHUNK) {
        /* release: a claimer that reads the bits sees the chunk's page-map entries set */
        atomic_store_explicit(&r->chunk_free[c], ~run_mask(n, 0), memory_order_release);
        list_chunk(r, c);
    }
    return chunk;
}

char *cm_arena_claim(unsigned shift, unsigned space) {
    if (space == CM_SPACE_CAGE) return cm_cage_claim((size_t)1 << shift, (size_t)1 << shift);
    unsigned n = 1u << (shift - CM_UNIT_SHIFT);
    char *span = claim_listed(n);
    return span ? span : claim_new_chunk(n);
}

/* The chunk is all free and, by our CAS, ours: clear its entries (a stale
 * pointer into it is then "not ours") and give it back. Its pages were
 * returned already, so unmapping returns address space only. */
static bool unmap_if_free(cm_region_t *r, size_t c, uintptr_t chunk) {
    uint64_t all = ALL_FREE;
    /* acquire: every releaser's decommit happens before our munmap */
    if (!atomic_compare_exchange_strong_explicit(&r->chunk_free[c], &all, 0, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    atomic_fetch_sub_explicit(&free_chunks, 1, memory_order_relaxed);
    cm_pagemap_set(chunk, CM_CHUNK_SIZE, 0);
    cm_count(&cm_counters.committed, CM_CHUNK_SIZE); /* cm_os_unmap uncounts what is already returned */
    cm_uncount(&cm_counters.returned, CM_CHUNK_SIZE);
    cm_os_unmap((void *)chunk, CM_CHUNK_SIZE);
    return true;
}

/* The span's pages must already be returned (its superblock retired). */
void cm_arena_release(char *span, unsigned shift) {
    if (cm_space_of(span) == CM_SPACE_CAGE) {
        cm_cage_release(span, (size_t)1 << shift);
        return;
    }
    unsigned n = 1u << (shift - CM_UNIT_SHIFT);
    uintptr_t a = (uintptr_t)span, chunk = a & ~(CM_CHUNK_SIZE - 1);
    cm_region_t *r = cm_pagemap_region(a);
    size_t c = chunk_index(a);
    /* release: the next claimer of these units sees them decommitted */
    uint64_t bits = run_mask(n, (unsigned)((a - chunk) >> CM_UNIT_SHIFT));
    uint64_t now = atomic_fetch_or_explicit(&r->chunk_free[c], bits, memory_order_release) | bits;
    if (now == ALL_FREE &&
        atomic_fetch_add_explicit(&free_chunks, 1, memory_order_relaxed) >= KEEP_FREE_CHUNKS &&
        unmap_if_free(r, c, chunk))
        return;
    list_chunk(r, c);
}

bool cm_arena_trim(void) {
    bool any = false;
    uint32_t regions = cm_pagemap_region_count();
    for (uint32_t i = 0; i < regions; i++) {
        uintptr_t base;
        cm_region_t *r = cm_pagemap_region_at(i, &base);
        if (!r) continue;
        for (size_t c = 0; c < CM_REGION_CHUNKS; c++)
            if (atomic_load_explicit(&r->chunk_free[c], memory_order_relaxed) == ALL_FREE)
                any |= unmap_if_free(r, c, base + (c << CM_CHUNK_SHIFT));
    }
    return any;
}
