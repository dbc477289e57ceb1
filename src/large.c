/* large.c: blocks above the largest size class. One of up to 1 MiB is a
 * span of the arena (below); a larger one is its own mapping (in the cage,
 * any size: its own run of the cage's units, cage.c), aligned to a
 * page-map unit (64 KiB) or to the requested alignment, with a
 * descriptor named in the page-map entry of its first unit only (free takes
 * the block's start, and any other pointer into it is invalid anyway: an
 * entry per 64 KiB cost 512 MiB of page map for an 8 TiB block). Mapped
 * without MAP_NORESERVE, so the kernel's overcommit policy refuses what it
 * judges impossible, as it does for glibc. realloc moves pages with mremap
 * (in the cage: grows into the free units after the block, else copies).
 *
 * Freed mappings are kept in a small cache and reused: mapping and faulting in
 * every large block anew made mimalloc and jemalloc 7x slower than glibc on a
 * 5-25 MiB workload on this kind of VM. A block that needs more than the
 * best cached mapping has gets the pages of other cached mappings moved in
 * behind it (mremap: page tables move, nothing is faulted in or copied).
 * 64 slots: with 32, two threads churning 128-256 KiB
 * blocks (bench/ mixed, when such blocks were mappings) overflowed it and unmapped, mapped and faulted in
 * again (2,600 munmaps, twice the page faults, 1.2x the time). The cache is
 * bounded in bytes (CAGEMALLOC_LARGE_CACHE, 128 MiB: the excess split off
 * reused mappings waits there too, and at 64 MiB pieces past the bound
 * were unmapped and faulted in again soon after, 1.35x mimalloc-bench's
 * malloc-large time), and mappings idle longer than
 * CAGEMALLOC_DECAY_MS are unmapped by whichever large operation or pool
 * decay pass notices, or by malloc_trim. While the process claims fresh
 * pages for superblocks, the cache gives twice as many bytes back: what no
 * large block reused is not kept beside what replaced it; and a superblock
 * that finds no room at all (a full cage, no address space left) has the
 * cache give back everything first (arena.c). */
#include <string.h>

#include "internal.h"

#define CACHE_SLOTS 64
#define SPLIT_MIN ((size_t)1 << 20) /* a reused mapping's excess of this or more (and at least the need) is split off */
/* A block moves cached pages in behind it from mappings of at least this
 * (or one that covers what is missing): every piece it is made of stays a
 * mapping of its own in the kernel (with blocks split at 2x the need,
 * smaller pieces took a program churning 5-25 MiB blocks from 60 kernel
 * mappings to 1,500). */
#define FILL_MIN ((size_t)1 << 20)

/* A slot holds {in the cage:1, size in units:31, descriptor ref:32}, 0 when
 * free, so a taker can judge the fit without touching a descriptor it does
 * not own. */
static _Atomic uint64_t cache_slots[CACHE_SLOTS];
/* Where each slot's mapping starts, written by the put that filled it: a
 * hint for finding a cached mapping by address (cache_take_at), which
 * checks the descriptor once the slot is taken. */
static _Atomic uintptr_t cache_base[CACHE_SLOTS];
static _Atomic uint64_t last_purge_ns;
#define SLOT_CAGE ((uint64_t)1 << 63)

/* The slots listed by size: list u (1..EXACT_UNITS) has a bit for each slot
 * holding a mapping of exactly u 64 KiB units, list MORE_UNITS for each
 * holding more. A take reads the lists from its size up and looks at the
 * listed slots only: scanning all 64 slots (lines the other threads write)
 * at every take was 8% of bench/ mixed's instructions. The lists are hints,
 * the slot words the truth: a bit whose slot holds something else is
 * cleared by the take that finds it; a bit lost to a race (a take clearing
 * it just as a put into the same slot sets it) hides that mapping until
 * the next purge pass, which takes every slot and puts it back. */
#define EXACT_UNITS 16
#define MORE_UNITS (EXACT_UNITS + 1)
static _Atomic uint64_t slots_by_units[MORE_UNITS + 1];

static uint64_t slot_make(const cm_desc_t *d) {
    return (cm_space_of(d->base) == CM_SPACE_CAGE ? SLOT_CAGE : 0) |
           (uint64_t)(d->map_size >> CM_UNIT_SHIFT) << 32 | cm_desc_ref(d);
}
static size_t slot_units(uint64_t w) { return (size_t)((w & ~SLOT_CAGE) >> 32); }
static size_t slot_bytes(uint64_t w) { return slot_units(w) << CM_UNIT_SHIFT; }
static unsigned list_of(size_t units) { return units < MORE_UNITS ? (unsigned)units : MORE_UNITS; }
/* relaxed, both: the lists are hints, checked against the slots */
static void list_add(unsigned list, unsigned i) {
    atomic_fetch_or_explicit(&slots_by_units[list], (uint64_t)1 << i, memory_order_relaxed);
}
static void list_remove(unsigned list, unsigned i) {
    atomic_fetch_and_explicit(&slots_by_units[list], ~((uint64_t)1 << i), memory_order_relaxed);
}
static unsigned slot_space(uint64_t w) { return w & SLOT_CAGE ? CM_SPACE_CAGE : CM_SPACE_PLAIN; }

/* The entry of the mapping starting at base. */
static bool set_entry(const char *base, uint32_t entry) { return cm_pagemap_set((uintptr_t)base, 1, entry); }

static void mark(cm_desc_t *d, unsigned cls) { set_entry(d->base, cm_entry_make(cm_desc_ref(d), cls)); }

/* Give [p, p + size) back: to the OS, or its pages to the OS and its units to the cage. */
static void unmap_range(char *p, size_t size) {
    if (cm_space_of(p) == CM_SPACE_CAGE) {
        cm_os_decommit(p, size);
        cm_cage_release(p, size);
    } else {
        cm_os_unmap(p, size);
    }
}

/* ------------------------------------------------------------ blocks in spans */

/* A block of at most SPAN_MAX_SHIFT's span (with no larger alignment) is
 * not a mapping of its own but a span of the arena, the smallest that
 * holds it (span_shift names it; 0 for a mapping): no system call to get
 * or give it back, and realloc within the span stays in place. Blocks of
 * 128-256 KiB each mapped, grown by mremap and unmapped made about 1,000
 * system calls in bench/'s mixed at 2 threads, each munmap or mremap flushing the
 * other CPU's TLB (BENCHMARKS.md). Freed, the span goes back to the arena
 * resident, for any span to reuse, while the arena's resident free units
 * and the cached mappings stay under CAGEMALLOC_LARGE_CACHE; the pool's
 * decay pass, which such a free runs too, returns their pages. */
#define SPAN_MAX_SHIFT (CM_SPAN_MIN_SHIFT + CM_SPAN_ORDERS - 1)

/* The shift of the span for a block of need bytes aligned to align (spans
 * are aligned to their size), 0 if none serves. */
static unsigned span_shift_for(size_t need, size_t align, unsigned space) {
    size_t span = need > align ? need : align;
    if (space != CM_SPACE_PLAIN || span > ((size_t)1 << SPAN_MAX_SHIFT)) return 0;
    unsigned shift = CM_SPAN_MIN_SHIFT;
    while (((size_t)1 << shift) < span) shift++;
    return shift;
}

static cm_desc_t *span_new(size_t size, unsigned shift, bool zero) {
    cm_desc_t *d = cm_desc_alloc();
    if (!d) return NULL;
    bool dirty;
    d->base = cm_arena_claim(shift, CM_SPACE_PLAIN, &dirty);
    if (!d->base) {
        cm_desc_release(d);
        return NULL;
    }
    d->span_shift = (uint8_t)shift;
    d->map_size = (size_t)1 << shift;
    /* Units used before may start with a superblock's free-list link; the
     * block's first word must not look free (internal.h): copied into a
     * small block by realloc, such a link met free's double-free check
     * there (bench/ mixed, 1 run in 40, aborted). */
    if (zero && dirty) memset(d->base, 0, size);
    else if (dirty) cm_block_mark_used(d->base);
    return d;
}

/* A block's span [base, base + 2^shift) back to the arena: its pages
 * resident while the arena's resident free units and the cached mappings
 * stay under the large cache's bound (one bound on what large blocks keep
 * resident). Its entries name the retired descriptor, so a stale free is
 * reported as a double free (as a retired superblock's: pool.c). */
static void span_give_back(char *base, unsigned shift) {
    size_t size = (size_t)1 << shift;
    cm_pagemap_set((uintptr_t)base, size, cm_entry_make(CM_DESC_RETIRED, 0));
    if (cm_arena_dirty_bytes() + atomic_load_explicit(&cm_counters.large_cached, memory_order_relaxed) + size <=
        CM_OPTION(large_cache)) {
        cm_arena_release_dirty(base, shift);
    } else {
        cm_os_decommit(base, size);
        cm_arena_release(base, shift);
    }
}

/* A large block's range goes back: its span (span_shift), or its mapping. */
static void give_back(char *base, size_t size, unsigned span_shift) {
    if (span_shift) {
        span_give_back(base, span_shift);
    } else {
        set_entry(base, 0); /* before the range can be reused */
        unmap_range(base, size);
    }
}

/* d's range goes back, and d with it. */
static void release(cm_desc_t *d) {
    give_back(d->base, d->map_size, d->span_shift);
    cm_desc_release(d);
}

/* ------------------------------------------------------------ the cache */

/* Cache d, idle since `since`: now for a mapping just freed; a mapping
 * taken only to be looked at and put back keeps its age, or a purge pass
 * every quarter of the decay time would keep it young for ever. */
static bool cache_put_aged(cm_desc_t *d, uint64_t since) {
    size_t bytes = d->map_size;
    size_t before = atomic_fetch_add_explicit(&cm_counters.large_cached, bytes, memory_order_relaxed);
    if (before + bytes + cm_arena_dirty_bytes() > CM_OPTION(large_cache)) {
        cm_uncount(&cm_counters.large_cached, bytes);
        return false;
    }
    mark(d, 0); /* a free of the stale pointer is now reported as a double free */
    atomic_store_explicit(&d->idle_since, since, memory_order_relaxed);
    uint64_t w = slot_make(d);
    uintptr_t base = (uintptr_t)d->base; /* read before the slot publishes d: a taker may move it at once */
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        uint64_t empty = 0;
        if (atomic_load_explicit(&cache_slots[i], memory_order_relaxed) != 0) continue; /* no CAS bound to fail */
        /* release: the taker sees d's fields and page-map entries as we left them */
        if (atomic_compare_exchange_strong_explicit(&cache_slots[i], &empty, w, memory_order_release,
                                                    memory_order_relaxed)) {
            /* relaxed: a hint (above), which may be stale already */
            atomic_store_explicit(&cache_base[i], base, memory_order_relaxed);
            list_add(list_of(slot_units(w)), i);
            return true;
        }
    }
    cm_uncount(&cm_counters.large_cached, bytes);
    return false;
}

static bool cache_put(cm_desc_t *d) { return cache_put_aged(d, cm_os_now_ns()); }

/* Put back a mapping taken from the cache but not used. */
static bool cache_return(cm_desc_t *d) {
    return cache_put_aged(d, atomic_load_explicit(&d->idle_since, memory_order_relaxed));
}

/* Take slot i if it still holds w; acquire pairs with cache_put's release. */
static cm_desc_t *cache_take_slot(unsigned i, uint64_t w) {
    if (!atomic_compare_exchange_strong_explicit(&cache_slots[i], &w, 0, memory_order_acquire,
                                                 memory_order_relaxed))
        return NULL;
    list_remove(list_of(slot_units(w)), i);
    cm_uncount(&cm_counters.large_cached, slot_bytes(w));
    return cm_desc_from_ref((uint32_t)w);
}

/* The cached mapping of the plain space that starts at `at` (or, if
 * ending, the one that ends there), taken; NULL if none. */
static cm_desc_t *cache_take_at(const char *at, bool ending) {
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        uint64_t w = atomic_load_explicit(&cache_slots[i], memory_order_relaxed);
        if (w == 0 || slot_space(w) != CM_SPACE_PLAIN) continue;
        uintptr_t base = atomic_load_explicit(&cache_base[i], memory_order_relaxed);
        if ((ending ? base + slot_bytes(w) : base) != (uintptr_t)at) continue;
        cm_desc_t *d = cache_take_slot(i, w);
        if (!d) continue;
        if ((ending ? d->base + d->map_size : d->base) == at) return d;
        if (!cache_return(d)) release(d); /* the hint was stale */
    }
    return NULL;
}

/* d, a mapping of the plain space taken from the cache (on no list, its
 * page-map entry at its base as the cache left it), grows towards need by
 * taking in the cached mappings right after it and, if `before` (its bytes
 * need not stay where they are), right before it: their pages are mapped
 * and resident already, so no system call and no fault. The kernel places
 * new mappings next to each other, so a freed block's neighbours are often
 * cached too; taking pages from farther away takes an mremap each, and on
 * two CPUs each flushes the other's TLB. */
static void absorb_neighbours(cm_desc_t *d, size_t need, bool before) {
    while (d->map_size < need) {
        cm_desc_t *next = cache_take_at(d->base + d->map_size, false);
        if (next) {
            set_entry(next->base, 0);
            d->map_size += next->map_size;
            cm_desc_release(next);
            continue;
        }
        cm_desc_t *prev = before ? cache_take_at(d->base, true) : NULL;
        if (!prev) return;
        set_entry(prev->base, 0);
        set_entry(d->base, 0); /* the block starts at prev's base now */
        d->base = prev->base;
        d->map_size += prev->map_size;
        cm_desc_release(prev);
    }
}

/* Of the slots on list `list` holding mappings of `space`, the best for
 * need (any on an exact list; on MORE_UNITS, the smallest of at least need,
 * else the largest), taken; NULL if none. */
static cm_desc_t *take_from_list(unsigned list, size_t need, unsigned space) {
    for (int attempt = 0; attempt < 4; attempt++) {
        unsigned best = CACHE_SLOTS;
        uint64_t best_w = 0;
        for (uint64_t slots = atomic_load_explicit(&slots_by_units[list], memory_order_relaxed); slots;
             slots &= slots - 1) {
            unsigned i = (unsigned)__builtin_ctzll(slots);
            uint64_t w = atomic_load_explicit(&cache_slots[i], memory_order_relaxed);
            if (w == 0 || list_of(slot_units(w)) != list) {
                list_remove(list, i); /* stale */
                continue;
            }
            if (slot_space(w) != space) continue;
            size_t have = slot_bytes(w), prev = slot_bytes(best_w);
            bool better = best == CACHE_SLOTS || (have >= need ? prev < need || have < prev : prev < need && have > prev);
            if (better) best = i, best_w = w;
            if (list != MORE_UNITS || have == need) break; /* none fits better */
        }
        if (best == CACHE_SLOTS) return NULL;
        cm_desc_t *d = cache_take_slot(best, best_w);
        if (d) return d;
    }
    return NULL;
}

/* The smallest cached mapping of `space` of at least `need` bytes, or else
 * the largest smaller one of at least `least` bytes; put back, and NULL,
 * if not aligned to align. */
static cm_desc_t *cache_take(size_t need, size_t least, size_t align, unsigned space) {
    unsigned first = list_of(need >> CM_UNIT_SHIFT), last = list_of(least >> CM_UNIT_SHIFT);
    cm_desc_t *d = NULL;
    for (unsigned list = first; !d && list <= MORE_UNITS; list++) d = take_from_list(list, need, space);
    for (unsigned list = first; !d && list-- > last;) d = take_from_list(list, need, space);
    if (!d || ((uintptr_t)d->base & (align - 1)) == 0) return d;
    if (!cache_return(d)) release(d);
    return NULL;
}

/* Unmap cached mappings older than the decay time, at most a few times per
 * decay period (a timestamp CAS elects who scans); with none cached, not
 * even the clock is read. */
static void purge_old(bool everything) {
    if (!everything && atomic_load_explicit(&cm_counters.large_cached, memory_order_relaxed) == 0) return;
    uint64_t now = cm_os_now_ns();
    uint64_t last = atomic_load_explicit(&last_purge_ns, memory_order_relaxed);
    if (!everything && (now - last < CM_OPTION(decay_ns) / 4 ||
                        !atomic_compare_exchange_strong_explicit(&last_purge_ns, &last, now,
                                                                 memory_order_relaxed, memory_order_relaxed)))
        return;
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        uint64_t w = atomic_load_explicit(&cache_slots[i], memory_order_relaxed);
        if (w == 0) continue;
        cm_desc_t *d = cache_take_slot(i, w);
        if (!d) continue;
        uint64_t idle = now - atomic_load_explicit(&d->idle_since, memory_order_relaxed);
        if (everything || idle >= CM_OPTION(decay_ns) || !cache_return(d)) release(d);
    }
}

void cm_large_decay(void) { purge_old(false); }

bool cm_large_trim(void) {
    bool had = atomic_load_explicit(&cm_counters.large_cached, memory_order_relaxed) != 0;
    purge_old(true);
    return had;
}

/* ------------------------------------------------------------ giving way */

/* Cut d's mapping down to its first `size` bytes. */
static void shrink(cm_desc_t *d, size_t size) {
    unmap_range(d->base + size, d->map_size - size);
    d->map_size = size;
}

/* Bytes of fresh pages claimed for superblocks since the cache last gave
 * way to them, counted while anything is cached. */
static _Atomic size_t fresh_claimed;
#define GIVE_WAY_STEP ((size_t)1 << 20) /* one pass (and its munmaps) per MiB of growth */
/* Bytes given back per byte claimed. A burst of frees that no large block
 * reuses (CPython's JSON encoder frees its 31 buffers of 2.8 MB at once)
 * otherwise stays resident beside the small blocks claimed after it for as
 * long as it takes them to match it: at 1, 41 MiB of them were still
 * cached at that program's peak (466 MiB; at 2, 430 MiB, glibc's 420). A
 * program that reuses its large blocks keeps its cache: it claims few
 * fresh superblock pages (malloc-large, bench/'s large and mixed: the same
 * time and peak at 1 and 2, BENCHMARKS.md). */
#define GIVE_WAY_RATE 2

/* The cached mapping idle longest, taken; NULL if none. Reading the
 * descriptor a slot names without owning it is safe (descriptors are never
 * unmapped) and a stale age only makes a worse choice. */
static cm_desc_t *take_oldest(void) {
    for (int attempt = 0; attempt < 4; attempt++) {
        unsigned best = CACHE_SLOTS;
        uint64_t best_w = 0, best_since = UINT64_MAX;
        for (unsigned i = 0; i < CACHE_SLOTS; i++) {
            uint64_t w = atomic_load_explicit(&cache_slots[i], memory_order_relaxed);
            if (w == 0) continue;
            uint64_t since = atomic_load_explicit(&cm_desc_from_ref((uint32_t)w)->idle_since, memory_order_relaxed);
            if (since < best_since) best = i, best_w = w, best_since = since;
        }
        if (best == CACHE_SLOTS) return NULL;
        cm_desc_t *d = cache_take_slot(best, best_w);
        if (d) return d;
    }
    return NULL;
}

/* Unmap `bytes` (a multiple of the unit) of cached mappings, the oldest
 * first, a mapping larger than what is left losing its tail. */
static void give_way(size_t bytes) {
    while (bytes) {
        cm_desc_t *d = take_oldest();
        if (!d) return;
        if (d->map_size > bytes) {
            shrink(d, d->map_size - bytes);
            if (!cache_return(d)) release(d);
            return;
        }
        bytes -= d->map_size;
        release(d);
    }
}

void cm_large_give_way(size_t bytes) {
    if (atomic_load_explicit(&cm_counters.large_cached, memory_order_relaxed) == 0) return;
    /* relaxed: the count only paces the passes; a pass that misses a
     * concurrent add leaves it for the next */
    size_t total = atomic_fetch_add_explicit(&fresh_claimed, bytes, memory_order_relaxed) + bytes;
    if (total < GIVE_WAY_STEP) return;
    give_way(GIVE_WAY_RATE * atomic_exchange_explicit(&fresh_claimed, 0, memory_order_relaxed));
}

/* ------------------------------------------------------------ blocks */

static size_t round_to_unit(size_t size) { return (size + CM_UNIT_SIZE - 1) & ~(CM_UNIT_SIZE - 1); }

/* Cut d down to size and keep the tail, whose pages are already faulted in,
 * in the cache as a mapping of its own (unmapped if that fails). */
static void split(cm_desc_t *d, size_t size) {
    cm_desc_t *tail = cm_desc_alloc();
    if (!tail) {
        shrink(d, size);
        return;
    }
    tail->base = d->base + size;
    tail->map_size = d->map_size - size;
    tail->span_shift = 0;
    atomic_store_explicit(&tail->size_class, (uint8_t)CM_CLASS_LARGE, memory_order_relaxed);
    d->map_size = size;
    if (!cache_put(tail)) release(tail);
}

/* Move the pages of cached mappings (plain space: the cage has no mremap)
 * onto [at, at + bytes), the fresh end of a block just grown, from its
 * start on: pages resident already, where the block's own would each be
 * faulted in and zeroed at first touch. Returns the bytes so filled. */
static size_t fill_from_cache(char *at, size_t bytes) {
    size_t filled = 0;
    while (filled < bytes) {
        size_t want = bytes - filled;
        cm_desc_t *piece = cache_take(want, want < FILL_MIN ? want : FILL_MIN, CM_UNIT_SIZE, CM_SPACE_PLAIN);
        if (!piece) break;
        if (piece->map_size > want) split(piece, want);
        set_entry(piece->base, 0); /* before its range is gone */
        if (!cm_os_move(piece->base, piece->map_size, at + filled)) {
            release(piece);
            break;
        }
        filled += piece->map_size;
        cm_desc_release(piece);
    }
    return filled;
}

/* d's bytes from `from` on (just grown) filled from the cache: how many. */
static size_t fill_grown(cm_desc_t *d, size_t from) {
    return cm_space_of(d->base) == CM_SPACE_PLAIN ? fill_from_cache(d->base + from, d->map_size - from) : 0;
}

/* A new range of `space`: a mapping, or units of the cage. */
static char *range_new(size_t size, size_t align, unsigned space) {
    return space == CM_SPACE_CAGE ? cm_cage_claim(size, align) : cm_os_map_aligned(size, align);
}

static cm_desc_t *map_new(size_t size, size_t align, unsigned space) {
    cm_desc_t *d = cm_desc_alloc();
    if (!d) return NULL;
    d->base = range_new(size, align, space);
    if (!d->base) { /* give the cache and the unused chunks back (to the OS, or to the cage) and try once more */
        purge_old(true);
        cm_arena_trim();
        d->base = range_new(size, align, space);
    }
    if (!d->base) {
        cm_desc_release(d);
        return NULL;
    }
    d->map_size = size;
    d->span_shift = 0;
    return d;
}

/* Grow d to size: in place if the kernel can, else by moving its pages to
 * a new reservation aligned to align, at d's offset within 2 MiB (the
 * kernel moves pages between such ranges a page table at a time, 3-4x
 * faster: bench/'s large 8-9% faster, BENCHMARKS.md). The old range is
 * released by the move, so its page-map entries are cleared before (while
 * it is still ours: once released, another thread may map it and set
 * entries of its own). */
static void *grow_in_cage(cm_desc_t *d, size_t size, size_t align);

static void *grow(cm_desc_t *d, size_t size, size_t align) {
    if (cm_space_of(d->base) == CM_SPACE_CAGE) return grow_in_cage(d, size, align);
    if (cm_os_grow_in_place(d->base, d->map_size, size)) {
        d->map_size = size;
        return d->base;
    }
    char *target = cm_os_map_congruent(size, align, d->base);
    if (!target) return NULL;
    uint32_t entry = cm_pagemap_get((uintptr_t)d->base);
    if (set_entry(target, entry)) {
        set_entry(d->base, 0);
        if (cm_os_move(d->base, d->map_size, target)) {
            d->base = target;
            d->map_size = size;
            return target;
        }
        set_entry(d->base, entry);
    }
    set_entry(target, 0);
    cm_os_unmap(target, size);
    return NULL;
}

/* The cage's version: into the free units that follow, else to a new run
 * of units with the contents copied (the cage has no mremap). */
static void *grow_in_cage(cm_desc_t *d, size_t size, size_t align) {
    if (cm_cage_claim_at(d->base + d->map_size, size - d->map_size)) {
        d->map_size = size;
        return d->base;
    }
    char *target = cm_cage_claim(size, align);
    if (!target) return NULL;
    uint32_t entry = cm_pagemap_get((uintptr_t)d->base);
    if (!set_entry(target, entry)) {
        unmap_range(target, size);
        return NULL;
    }
    memcpy(target, d->base, d->map_size);
    set_entry(d->base, 0);
    unmap_range(d->base, d->map_size);
    d->base = target;
    d->map_size = size;
    return target;
}

cm_desc_t *cm_large_alloc(size_t size, size_t align, bool zero, unsigned space) {
    size_t need = round_to_unit(size);
    if (align < CM_UNIT_SIZE) align = CM_UNIT_SIZE;
    purge_old(false);
    unsigned shift = span_shift_for(need, align, space);
    cm_desc_t *d = shift ? span_new(size, shift, zero) : cache_take(need, CM_UNIT_SIZE, align, space);
    if (d && !shift) {
        if (d->map_size < need && space == CM_SPACE_PLAIN) absorb_neighbours(d, need, align == CM_UNIT_SIZE);
        size_t stale = d->map_size; /* bytes that hold old contents */
        /* a reused mapping whose excess could hold another such block is
         * split, the excess cached for the next ones. Handed out whole (as
         * up to 8x the need once was), the excess stayed resident and
         * unused for as long as the block lived: GNU sort's 50 MiB buffer,
         * freed and cut into 5 MiB merge buffers, peaked at 87 MiB (glibc
         * 52, now 57). The pieces come back moved in behind later, larger
         * blocks, a mremap each: bench/'s large takes 1.6x the time it took
         * (still half the best peer's), mimalloc-bench's malloc-large the
         * same or 1.04x, at a 15% lower peak (BENCHMARKS.md) */
        if (d->map_size >= 2 * need && d->map_size - need >= SPLIT_MIN) split(d, need);
        if (d->map_size < need) {
            if (grow(d, need, align)) {
                stale += fill_grown(d, stale);
            } else {
                release(d);
                d = NULL;
            }
        }
        if (d && zero) memset(d->base, 0, stale < size ? stale : size); /* the rest is fresh from the kernel */
    }
    if (!d && !(d = map_new(need, align, space))) return NULL;
    atomic_store_explicit(&d->size_class, (uint8_t)CM_CLASS_LARGE, memory_order_relaxed);
    if (d->span_shift) cm_pagemap_set((uintptr_t)d->base, d->map_size, 0); /* its other units name nothing */
    if (!set_entry(d->base, cm_entry_make(cm_desc_ref(d), CM_CLASS_LARGE))) {
        release(d);
        return NULL;
    }
    cm_count(&cm_counters.large_live, d->map_size);
    cm_count(&cm_counters.large_count, 1);
    atomic_store_explicit(&d->heap, 0, memory_order_relaxed);
    cm_desc_set_owner(d, 0);
    return d;
}

void cm_large_free(cm_desc_t *d) {
    cm_uncount(&cm_counters.large_live, d->map_size);
    cm_uncount(&cm_counters.large_count, 1);
    if (d->span_shift) {
        release(d);
        cm_pool_decay(); /* whose pass returns the arena's resident free units */
    } else {
        if (!cache_put(d)) release(d);
        purge_old(false);
    }
}

/* A thread that does not own d's heap cannot unlink d from the heap's list:
 * it turns d into a zombie there (the heap releases the descriptor later)
 * and frees the mapping under a descriptor of its own. The mapping is read
 * before the CAS: once d is a zombie its heap may release it at any time. */
void cm_large_free_remote(cm_desc_t *d) {
    char *base = d->base;
    size_t size = d->map_size;
    uint8_t span_shift = d->span_shift;
    /* acquire: pairs with the release of a heap letting d go (heap 0), so
     * its last writes to d happen before we release d for reuse. The CAS
     * decides who releases the descriptor; the mapping itself was
     * published to us with the pointer being freed. */
    uint32_t h = atomic_load_explicit(&d->heap, memory_order_acquire);
    while (h != 0) {
        if (h == CM_HEAP_ZOMBIE) cm_fatal("free", "double free", base);
        /* release: our reads of d (its mapping here, its base when free
         * checked the pointer) happen before the heap, which acquires the
         * zombie mark, releases d for reuse */
        if (!atomic_compare_exchange_weak_explicit(&d->heap, &h, CM_HEAP_ZOMBIE, memory_order_release,
                                                   memory_order_relaxed))
            continue;
        cm_heap_t *owner = cm_heap_record(h);
        cm_desc_t *mine = cm_desc_alloc();
        if (mine) {
            mine->base = base;
            mine->map_size = size;
            mine->span_shift = span_shift;
            atomic_store_explicit(&mine->size_class, (uint8_t)CM_CLASS_LARGE, memory_order_relaxed);
            mark(mine, CM_CLASS_LARGE);
            cm_large_free(mine);
        } else {
            cm_uncount(&cm_counters.large_live, size);
            cm_uncount(&cm_counters.large_count, 1);
            give_back(base, size, span_shift);
        }
        if (owner) atomic_fetch_add_explicit(&owner->zombies, 1, memory_order_relaxed);
        return;
    }
    cm_large_free(d);
}

void *cm_large_realloc(cm_desc_t *d, size_t size) {
    size_t need = round_to_unit(size), old = d->map_size;
    /* a block in a span stays while it fits and uses over half of it; else
     * the caller moves it (a copy of at most a span) */
    if (d->span_shift) return need <= old && need > old / 2 ? d->base : NULL;
    /* shrinking by less than half keeps the mapping whole: no system call
     * now, and none if the block grows back (realloc to random sizes
     * unmapped a tail and mapped it again at every other call) */
    if (need < old && need >= old / 2) return d->base;
    if (need < old) {
        shrink(d, need);
    } else if (need > old) {
        if (cm_space_of(d->base) == CM_SPACE_PLAIN) absorb_neighbours(d, need, false);
        size_t resident = d->map_size;
        if (resident < need) {
            if (!grow(d, need, CM_UNIT_SIZE)) return NULL;
            mark(d, CM_CLASS_LARGE);
            fill_grown(d, resident);
        } else if (resident >= 2 * need && resident - need >= SPLIT_MIN) {
            split(d, need); /* a neighbour taken in had more than the block needs */
        }
    }
    size_t now = d->map_size;
    if (now > old) cm_count(&cm_counters.large_live, now - old);
    else cm_uncount(&cm_counters.large_live, old - now);
    return d->base;
}

size_t cm_large_usable(const cm_desc_t *d) { return d->map_size; }
