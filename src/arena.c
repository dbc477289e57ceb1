/* arena.c: the address space behind superblocks. Spans (64 KiB .. 1 MiB,
 * aligned to their size) are claimed from 4 MiB chunks and released back
 * when their superblock retires, for any span size to reuse. Chunks come
 * first from the arena's own reservation: up to 64 GiB of address space
 * (CAGEMALLOC_ARENA_RESERVE) reserved closed at init and opened 32 MiB at a
 * time as its chunks are handed out (reservation.c), which begins with the
 * flat page map that free reads (internal.h), open from the start. When it
 * is used up, or was not made (an address-space limit, `ulimit -v`, would
 * count it whole; or the OS refused even 256 MiB),
 * chunks are cut from reservations of 32 MiB mapped at once. A chunk of
 * those whose every unit is free keeps its address space (its pages were
 * returned as its spans were) until malloc_trim, or a mapping that fails
 * for want of address space, unmaps it; the reservation's chunks keep
 * theirs.
 *
 * Why reservations, and why free chunks stay: each mmap or munmap of
 * anonymous memory beside the mappings other threads are faulting pages
 * into merges with or splits their mapping, and the kernel then waits for
 * those faults to finish. A thread that sleeps on that wait is woken by the
 * faulting one and often moved onto its CPU: measured in rptest with two
 * threads, the two then shared one core for 5-20 ms, and the blocks they
 * send each other piled up (peak RSS 20-39 MiB instead of 10). Growing
 * from the reservation makes no such call; in 32 MiB steps, and never
 * unmapping on the free path, one per 32 MiB of growth.
 *
 * Each chunk has one 64-bit word, bit u set when its 64 KiB unit u is free,
 * in the region record of its address (pagemap.c): claiming a span is one
 * CAS clearing an aligned run of bits, releasing it one fetch_or. As the
 * word's place is fixed by the chunk's address, a thread that read a word,
 * slept while the chunk was unmapped and another mapped at the same address,
 * and then won its CAS has claimed free units of the chunk that is there now:
 * the address it computes after the CAS is right, so there is no ABA to fear.
 * Per region a bitmap lists the chunks that may have free units, so a claim
 * looks only at those. A second word per chunk marks free units released
 * with their pages resident (a kept superblock that gave way to a span of
 * another size, pool.c): claims take runs of those first, and a purge
 * (decay, trim) claims the rest, returns their pages and frees them clean.
 * Each chunk has a home thread, the one that mapped it or last claimed from
 * it when it was all free, and a thread claims in its own chunks first:
 * memory one thread just wrote to, reused by another on another core, is
 * fetched line by line from the first core's cache (bench/'s growth at 2
 * threads ran 2x slower when the two vCPUs sat far apart, BENCHMARKS.md).
 * Nothing here waits: every step is a CAS or a fetch_or.
 * Spans of the cage come from the cage's own units (cage.c). */
#include <sys/mman.h>

#include "internal.h"

#define UNITS_PER_CHUNK (CM_CHUNK_SIZE >> CM_UNIT_SHIFT)
#define ALL_FREE (~(uint64_t)0)
#define RESERVATION_CHUNKS 8 /* chunks mapped by one system call: 32 MiB */

_Static_assert(UNITS_PER_CHUNK == 64, "a chunk's units are the 64 bits of one word");
_Static_assert(RESERVATION_CHUNKS < CM_CHUNK_SIZE, "the count fits below a chunk's address");

/* The next unused chunk of the current reservation, plus (in the low bits,
 * free as chunks are 4 MiB aligned) how many chunks of it remain; 0 left
 * means "map a new reservation". */
static _Atomic uintptr_t reservation_cursor;
/* Under an address-space limit below SMALL_LIMIT, which counts a
 * reservation whole, chunks are mapped one at a time: the 28 MiB a new
 * reservation holds unused would be more than a thirtieth of the limit
 * (set at init; relaxed, a hint only). */
#define SMALL_LIMIT ((size_t)1 << 30)
static _Atomic bool chunks_one_at_a_time;

cm_arena_range_t cm_arena_range = {CM_ARENA_NONE, 0};
/* Chunks of the arena's reservation handed out so far; at or past its
 * count, it is used up. */
static _Atomic size_t arena_chunks_taken;
static cm_reservation_t chunks_open = {.prot = PROT_READ | PROT_WRITE, .step = CM_OPEN_STEP_SPANS};

#define ARENA_RESERVE_MIN ((size_t)256 << 20) /* below this, 32 MiB reservations do as well */

/* The flat map and the arena after it, in one reservation of
 * CAGEMALLOC_ARENA_RESERVE bytes at most, which the map's window covers.
 * Racing initialisers each reserve; the first to publish its base keeps
 * it, the others give theirs back. */
void cm_arena_reserve(void) {
    /* An address-space limit would count the reservation whole against
     * what large blocks may map: there, grow a chunk at a time. (Strict
     * overcommit charges the steps opened, as it would 32 MiB mappings.) */
    size_t limit = cm_os_address_limit();
    atomic_store_explicit(&chunks_one_at_a_time, limit < SMALL_LIMIT, memory_order_relaxed);
    size_t want = limit != SIZE_MAX ? 0 : CM_OPTION(arena_reserve);
    if (want > ((size_t)1 << CM_ARENA_MAX_SHIFT)) want = (size_t)1 << CM_ARENA_MAX_SHIFT;
    _Static_assert(CM_ARENA_TABLE_BYTES % CM_CHUNK_SIZE == 0, "the arena starts on a chunk");
    _Static_assert(ARENA_RESERVE_MIN > CM_ARENA_TABLE_BYTES, "a reservation holds chunks after the map");
    for (size_t size = want & ~(CM_CHUNK_SIZE - 1); size >= ARENA_RESERVE_MIN; size = (size / 2) & ~(CM_CHUNK_SIZE - 1)) {
        /* closed, the map opened now: free reads it for any address in the window */
        char *r = cm_os_reserve_closed(size, CM_CHUNK_SIZE);
        if (!r) continue;
        if (!cm_os_open(r, CM_ARENA_TABLE_BYTES, PROT_READ | PROT_WRITE, false)) {
            cm_os_unreserve(r, size);
            continue;
        }
        uintptr_t none = CM_ARENA_NONE;
        if (!atomic_compare_exchange_strong_explicit(&cm_arena_range.base, &none, (uintptr_t)r, memory_order_relaxed,
                                                     memory_order_relaxed)) {
            cm_os_unreserve(r, size);
            return;
        }
        /* the chunks are counted as they are handed out, as the 32 MiB ones are */
        cm_uncount(&cm_counters.mapped, size - CM_ARENA_TABLE_BYTES);
        /* release: whoever reads the count (take_from_arena) sees the base */
        atomic_store_explicit(&cm_arena_range.units, size >> CM_UNIT_SHIFT, memory_order_release);
        return;
    }
}

/* a is in the reservation (the map's own units never hold a chunk). */
static bool in_arena(uintptr_t a) {
    return cm_arena_unit(cm_arena_base(), a) < atomic_load_explicit(&cm_arena_range.units, memory_order_relaxed);
}

/* The next chunk of the arena's reservation never handed out; NULL when it
 * is used up or was not made. */
static char *take_from_arena(void) {
    /* the reservation's chunks after the map's; none if it was not made */
    size_t units = atomic_load_explicit(&cm_arena_range.units, memory_order_acquire);
    size_t chunks = units ? units / UNITS_PER_CHUNK - CM_ARENA_TABLE_BYTES / CM_CHUNK_SIZE : 0;
    /* relaxed: the count only hands out distinct indices; the first test
     * keeps it from climbing forever once the reservation is used up */
    if (atomic_load_explicit(&arena_chunks_taken, memory_order_relaxed) >= chunks) return NULL;
    size_t i = atomic_fetch_add_explicit(&arena_chunks_taken, 1, memory_order_relaxed);
    if (i >= chunks) return NULL;
    uintptr_t first = cm_arena_base() + CM_ARENA_TABLE_BYTES, chunk = first + (i << CM_CHUNK_SHIFT);
    if (!cm_reservation_open(&chunks_open, first, chunk + CM_CHUNK_SIZE, first + chunks * CM_CHUNK_SIZE))
        return NULL; /* the kernel has no memory to account it: the chunk stays unused */
    cm_count(&cm_counters.mapped, CM_CHUNK_SIZE);
    return (char *)chunk;
}

static size_t chunk_index(uintptr_t a) { return (a >> CM_CHUNK_SHIFT) & (CM_REGION_CHUNKS - 1); }

/* seq_cst on the listing bits and the re-read after clearing one: a releaser
 * sets units then lists; a claimer unlists then re-reads the units. Either the
 * re-read sees the units or the listing comes after the unlisting. */
static void list_chunk(cm_region_t *r, size_t c) {
    atomic_fetch_or(&r->chunk_listed[c / 64], (uint64_t)1 << (c % 64));
}
static void unlist_chunk(cm_region_t *r, size_t c) {
    atomic_fetch_and(&r->chunk_listed[c / 64], ~((uint64_t)1 << (c % 64)));
    if (atomic_load(&r->chunks[c].free) != 0) list_chunk(r, c);
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

/* Units released dirty (cm_arena_release_dirty) and not yet claimed or
 * purged: relaxed, it only says whether to look for them. */
static _Atomic size_t dirty_units;

bool cm_arena_has_dirty(void) { return atomic_load_explicit(&dirty_units, memory_order_relaxed) != 0; }
size_t cm_arena_dirty_bytes(void) { return atomic_load_explicit(&dirty_units, memory_order_relaxed) << CM_UNIT_SHIFT; }

/* The calling thread as a chunk's home: its ref, or 0 (no home, any chunk)
 * for a thread without a heap. */
static uint32_t home_of_caller(void) {
    uint32_t me = cm_my_ref();
    return me == CM_NO_THREAD ? 0 : me;
}

/* The chunk's home is the calling thread. relaxed, as every access to a
 * home: it only steers where a claim looks first. */
static void set_home(cm_region_t *r, size_t c) {
    atomic_store_explicit(&r->chunks[c].home, home_of_caller(), memory_order_relaxed);
}

/* Claim n aligned units of chunk c of region r, a run of dirty units only
 * if dirty_only, else preferring one; 0 if it has no such run. *dirty: some
 * claimed unit was dirty. A releaser sets a unit's dirty bit before its
 * free bit and a claimer clears it after winning the unit, so the bit read
 * then is the unit's own: nobody else can release or purge it meanwhile. */
static uintptr_t claim_in_chunk(cm_region_t *r, size_t c, unsigned n, bool dirty_only,
                                bool *dirty) {
    /* acquire (load and CAS): the releaser decommitted the units (or set
     * their dirty bits) before its release fetch_or; we must see that
     * before writing to them. */
    uint64_t w = atomic_load_explicit(&r->chunks[c].free, memory_order_acquire);
    for (;;) {
        /* relaxed: a preference only; the fetch_and below decides */
        uint64_t runs = aligned_runs(w & atomic_load_explicit(&r->chunks[c].dirty, memory_order_relaxed), n);
        if (!runs && !dirty_only) runs = aligned_runs(w, n);
        if (!runs) return 0;
        unsigned at = (unsigned)__builtin_ctzll(runs);
        uint64_t mask = run_mask(n, at);
        if (atomic_compare_exchange_weak_explicit(&r->chunks[c].free, &w, w & ~mask, memory_order_acquire,
                                                  memory_order_acquire)) {
            if (w == ALL_FREE) set_home(r, c); /* nobody's spans were in it: ours now */
            /* relaxed: an RMW reads the releaser's bits, which came before its release */
            uint64_t was = atomic_fetch_and_explicit(&r->chunks[c].dirty, ~mask, memory_order_relaxed) & mask;
            unsigned reused = (unsigned)__builtin_popcountll(was);
            if (reused) atomic_fetch_sub_explicit(&dirty_units, reused, memory_order_relaxed);
            cm_count(&cm_counters.committed, (size_t)(n - reused) << CM_UNIT_SHIFT);
            *dirty = reused != 0;
            return r->base + (c << CM_CHUNK_SHIFT) + ((uintptr_t)at << CM_UNIT_SHIFT);
        }
    }
}

/* fn(r, c, ctx) for each listed chunk c of each region r, lowest
 * address first, until fn returns true; true then. */
static bool each_listed_chunk(bool (*fn)(cm_region_t *, size_t, void *), void *ctx) {
    for (cm_region_t *r = cm_pagemap_first_region(); r; r = cm_pagemap_next_region(r)) {
        for (size_t word = 0; word < CM_REGION_CHUNKS / 64; word++) {
            for (uint64_t listed = atomic_load_explicit(&r->chunk_listed[word], memory_order_relaxed); listed;
                 listed &= listed - 1)
                if (fn(r, word * 64 + (size_t)__builtin_ctzll(listed), ctx)) return true;
        }
    }
    return false;
}

typedef struct claim_request {
    unsigned n;
    bool dirty_only, dirty;
    uint32_t home; /* only chunks of this home thread; 0: any chunk */
    uintptr_t span;
} claim_request_t;

static bool claim_from(cm_region_t *r, size_t c, void *ctx) {
    claim_request_t *q = ctx;
    if (q->home && atomic_load_explicit(&r->chunks[c].home, memory_order_relaxed) != q->home) return false;
    q->span = claim_in_chunk(r, c, q->n, q->dirty_only, &q->dirty);
    if (q->span) return true;
    if (atomic_load_explicit(&r->chunks[c].free, memory_order_relaxed) == 0) unlist_chunk(r, c);
    return false;
}

/* Lowest listed chunk with room first (of home `home`, or any if 0): spans
 * crowd into the chunks mapped first, so the others empty out and go back
 * to the OS. */
static char *claim_listed_as(unsigned n, bool dirty_only, uint32_t home, bool *dirty) {
    claim_request_t q = {.n = n, .dirty_only = dirty_only, .home = home};
    if (!each_listed_chunk(claim_from, &q)) return NULL;
    *dirty = q.dirty;
    return (char *)q.span;
}

/* Dirty units first, wherever they are (ours before the others'): their
 * pages are resident already, and left alone they would only be returned.
 * Then clean units of our own chunks. */
static char *claim_resident_or_own(unsigned n, uint32_t me, bool *dirty) {
    char *span = NULL;
    if (cm_arena_has_dirty()) {
        if (me) span = claim_listed_as(n, true, me, dirty);
        if (!span) span = claim_listed_as(n, true, 0, dirty);
    }
    if (!span && me) span = claim_listed_as(n, false, me, dirty);
    return span;
}

/* One chunk from the current reservation, or NULL when it is used up.
 * acquire: pairs with the installer's release, after which the
 * reservation's mapping exists (the cursor publishes nothing else). A stale
 * cursor value that comes round again names the next unused chunk of
 * whatever reservation is current then, so a CAS that succeeds on it is
 * right. */
static char *take_reserved(void) {
    uintptr_t cur = atomic_load_explicit(&reservation_cursor, memory_order_acquire);
    for (uintptr_t left; (left = cur & (CM_CHUNK_SIZE - 1)) != 0;) {
        uintptr_t chunk = cur - left;
        if (atomic_compare_exchange_weak_explicit(&reservation_cursor, &cur, (chunk + CM_CHUNK_SIZE) | (left - 1),
                                                  memory_order_acquire, memory_order_acquire))
            return (char *)chunk;
    }
    return NULL;
}

/* Map a reservation, keep its first chunk and publish the rest. If another
 * thread published one meanwhile, ours goes back and theirs serves us. */
static char *reserve_chunks(void) {
    size_t size = RESERVATION_CHUNKS * CM_CHUNK_SIZE;
    char *r = cm_os_reserve_aligned(size, CM_CHUNK_SIZE);
    if (!r) return NULL;
    uintptr_t used_up = atomic_load_explicit(&reservation_cursor, memory_order_relaxed);
    while (!(used_up & (CM_CHUNK_SIZE - 1))) {
        /* release: a taker that reads the cursor finds the mapping made */
        if (atomic_compare_exchange_weak_explicit(&reservation_cursor, &used_up,
                                                  ((uintptr_t)r + CM_CHUNK_SIZE) | (RESERVATION_CHUNKS - 1),
                                                  memory_order_release, memory_order_relaxed))
            return r;
    }
    cm_os_unreserve(r, size);
    return take_reserved();
}

/* A chunk of address space not in use: from the current reservation, a new
 * one, or (address space short) a mapping of its own; failing all three,
 * after unmapping the chunks nobody uses. */
static char *map_chunk(void) {
    char *arena_chunk = take_from_arena();
    if (arena_chunk) return arena_chunk;
    for (;;) {
        char *chunk = take_reserved();
        if (!chunk && !atomic_load_explicit(&chunks_one_at_a_time, memory_order_relaxed)) chunk = reserve_chunks();
        if (!chunk) chunk = cm_os_reserve_aligned(CM_CHUNK_SIZE, CM_CHUNK_SIZE);
        if (chunk || !cm_arena_trim()) return chunk;
    }
}

/* Claim the first n units of a new chunk (only one of the arena's
 * reservation if arena_only) and list the rest. Its word is 0 until now
 * (never ours, or unmapped by us after we zeroed it). */
static char *claim_new_chunk(unsigned n, bool arena_only) {
    char *chunk = arena_only ? take_from_arena() : map_chunk();
    if (!chunk) return NULL;
    if (!cm_pagemap_set((uintptr_t)chunk, CM_CHUNK_SIZE, 0)) { /* creates its region */
        cm_os_unreserve(chunk, CM_CHUNK_SIZE);
        return NULL;
    }
    cm_region_t *r = cm_pagemap_region((uintptr_t)chunk);
    size_t c = chunk_index((uintptr_t)chunk);
    set_home(r, c);
    cm_count(&cm_counters.committed, (size_t)n << CM_UNIT_SHIFT);
    if (n < UNITS_PER_CHUNK) {
        /* release: a claimer that reads the bits sees the chunk's page-map entries set */
        atomic_store_explicit(&r->chunks[c].free, ~run_mask(n, 0), memory_order_release);
        list_chunk(r, c);
    }
    return chunk;
}

/* Where a span comes from, best first: resident units, clean units of our
 * own chunks, a chunk of the arena's reservation never used (the other
 * threads' clean units cost no more memory, but a thread that settles in
 * another's chunk will give back units there that the other reuses),
 * anyone's clean units, a chunk mapped anew. */
static char *claim_once(unsigned shift, unsigned space, bool *dirty) {
    *dirty = false;
    if (space == CM_SPACE_CAGE) return cm_cage_claim((size_t)1 << shift, (size_t)1 << shift);
    unsigned n = 1u << (shift - CM_UNIT_SHIFT);
    uint32_t me = home_of_caller();
    char *span = claim_resident_or_own(n, me, dirty);
    if (!span && me) span = claim_new_chunk(n, true);
    if (!span) span = claim_listed_as(n, false, 0, dirty);
    return span ? span : claim_new_chunk(n, false);
}

char *cm_arena_claim_own_resident(unsigned shift, bool *dirty) {
    uint32_t me = home_of_caller();
    if (!me || !cm_arena_has_dirty()) return NULL;
    return claim_listed_as(1u << (shift - CM_UNIT_SHIFT), true, me, dirty);
}


/* The chunk is all free and, by our CAS, ours: clear its entries (a stale
 * pointer into it is then "not ours") and give it back. Its pages were
 * returned already, so unmapping returns address space only. */
static bool unmap_if_free(cm_region_t *r, size_t c, uintptr_t chunk) {
    uint64_t all = ALL_FREE;
    /* acquire: every releaser's decommit happens before our munmap */
    if (!atomic_compare_exchange_strong_explicit(&r->chunks[c].free, &all, 0, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    /* its units are ours: dirty ones go with the mapping (relaxed: as in claim_in_chunk) */
    uint64_t was = atomic_exchange_explicit(&r->chunks[c].dirty, 0, memory_order_relaxed);
    if (was) {
        atomic_fetch_sub_explicit(&dirty_units, (size_t)__builtin_popcountll(was), memory_order_relaxed);
        cm_uncount(&cm_counters.committed, (size_t)__builtin_popcountll(was) << CM_UNIT_SHIFT);
    }
    cm_pagemap_set(chunk, CM_CHUNK_SIZE, 0);
    cm_os_unreserve((void *)chunk, CM_CHUNK_SIZE);
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
    atomic_fetch_or_explicit(&r->chunks[c].free, bits, memory_order_release);
    list_chunk(r, c);
}

void cm_arena_release_dirty(char *span, unsigned shift) {
    unsigned n = 1u << (shift - CM_UNIT_SHIFT);
    uintptr_t a = (uintptr_t)span, chunk = a & ~(CM_CHUNK_SIZE - 1);
    cm_region_t *r = cm_pagemap_region(a);
    size_t c = chunk_index(a);
    uint64_t bits = run_mask(n, (unsigned)((a - chunk) >> CM_UNIT_SHIFT));
    atomic_fetch_add_explicit(&dirty_units, n, memory_order_relaxed);
    /* relaxed: published by the release fetch_or of the free bits after it */
    atomic_fetch_or_explicit(&r->chunks[c].dirty, bits, memory_order_relaxed);
    atomic_fetch_or_explicit(&r->chunks[c].free, bits, memory_order_release);
    list_chunk(r, c);
}

/* Claim chunk c's free dirty units, return their pages, give them back
 * clean; how many there were. */
static unsigned purge_chunk(cm_region_t *r, size_t c) {
    uintptr_t chunk = r->base + (c << CM_CHUNK_SHIFT);
    uint64_t w = atomic_load_explicit(&r->chunks[c].free, memory_order_acquire), units;
    do {
        units = w & atomic_load_explicit(&r->chunks[c].dirty, memory_order_relaxed);
        if (!units) return 0;
        /* acquire: as a claim (the units are ours until the fetch_or below) */
    } while (!atomic_compare_exchange_weak_explicit(&r->chunks[c].free, &w, w & ~units, memory_order_acquire,
                                                    memory_order_acquire));
    uint64_t was = atomic_fetch_and_explicit(&r->chunks[c].dirty, ~units, memory_order_relaxed) & units;
    unsigned purged = (unsigned)__builtin_popcountll(was);
    atomic_fetch_sub_explicit(&dirty_units, purged, memory_order_relaxed);
    for (uint64_t left = was; left;) {
        unsigned at = (unsigned)__builtin_ctzll(left);
        uint64_t past = ~(left >> at); /* its lowest set bit ends the run */
        unsigned len = past ? (unsigned)__builtin_ctzll(past) : 64 - at;
        cm_os_decommit((char *)chunk + ((size_t)at << CM_UNIT_SHIFT), (size_t)len << CM_UNIT_SHIFT);
        left &= ~run_mask(len, at);
    }
    /* release: the next claimer sees the pages returned */
    atomic_fetch_or_explicit(&r->chunks[c].free, units, memory_order_release);
    list_chunk(r, c);
    return purged;
}

static bool purge_listed(cm_region_t *r, size_t c, void *any) {
    *(bool *)any |= purge_chunk(r, c) != 0;
    return false;
}

/* Purge listed chunks, lowest first, until *left units are returned. */
static bool purge_until(cm_region_t *r, size_t c, void *left) {
    size_t purged = purge_chunk(r, c), *wanted = left;
    if (purged >= *wanted) return true;
    *wanted -= purged;
    return false;
}

bool cm_arena_purge(void) {
    bool any = false;
    if (cm_arena_has_dirty()) each_listed_chunk(purge_listed, &any);
    return any;
}

char *cm_arena_claim(unsigned shift, unsigned space, bool *dirty) {
    char *span = claim_once(shift, space, dirty);
    /* no room (the cage full, or no address space or memory left): what the
     * large cache holds goes back, and the claim is tried once more */
    if (!span && cm_large_trim()) span = claim_once(shift, space, dirty);
    /* Fresh pages while resident free units wait for the decay pass (none
     * of them in a run this span could use): as many of those go back now,
     * so that what the process holds free does not grow with what it
     * claims. mstress 4 kept 10-15 MiB of them at its peak. */
    if (span && !*dirty && space == CM_SPACE_PLAIN && cm_arena_has_dirty()) {
        size_t units = (size_t)1 << (shift - CM_UNIT_SHIFT);
        each_listed_chunk(purge_until, &units);
    }
    return span;
}

bool cm_arena_trim(void) {
    bool any = cm_arena_purge();
    for (cm_region_t *r = cm_pagemap_first_region(); r; r = cm_pagemap_next_region(r)) {
        for (size_t c = 0; c < CM_REGION_CHUNKS; c++) {
            uintptr_t chunk = r->base + (c << CM_CHUNK_SHIFT);
            /* the arena's reservation keeps its address space: its pages were returned */
            if (atomic_load_explicit(&r->chunks[c].free, memory_order_relaxed) == ALL_FREE && !in_arena(chunk))
                any |= unmap_if_free(r, c, chunk);
        }
    }
    return any;
}
