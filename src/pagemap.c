/* pagemap.c: address -> {descriptor ref, class} for every 64 KiB
 * unit of address space we own, and the per-region records that hold it.
 *
 * Two levels, so that any address can be ours: large blocks are mappings
 * of their own wherever the kernel puts them, and superblocks come from
 * 32 MiB reservations once the arena's own reservation is used up or could
 * not be made (`ulimit -v` / RLIMIT_AS). The root is 2^15 slots in .bss
 * (one per 4 GiB, zero pages until touched) and a region record (280 KiB,
 * lazily committed: 2^16 entries plus the arena's chunk bitmaps) is mapped
 * the first time we own something in its 4 GiB. Slots hold offsets from a
 * shared all-zero leaf that follows the root, so the lookup has no null
 * test. Regions are never unmapped: a stale read of one is always harmless.
 *
 * The units of the arena's 64 GiB window have their entries here and also
 * in the flat array at the start of its reservation (cm_arena_entry_at,
 * internal.h), which free reads: four instructions fewer. */
#include "internal.h"

#define LEAF_LEN ((size_t)1 << CM_PAGEMAP_LEAF_BITS)

CM_LARGE_ZEROED cm_pagemap_t cm_pagemap;
/* The regions, in creation order, linked through their records: a region
 * joins the end once installed (a scanner may miss it for that instant
 * only). */
static _Atomic(cm_region_t *) first_region;

static cm_region_t *region_at_offset(uintptr_t offset) {
    return (cm_region_t *)((char *)cm_pagemap.empty_leaf + offset);
}

/* Install the region of root slot i if missing: a CAS race whose losers
 * unmap theirs. The release pairs with the acquire in cm_pagemap_get. */
static cm_region_t *region_for(size_t i) {
    uintptr_t offset = atomic_load_explicit(&cm_pagemap.root[i], memory_order_acquire);
    if (offset) return region_at_offset(offset);
    cm_region_t *mine = cm_os_map(sizeof(cm_region_t));
    if (!mine) return NULL;
    mine->base = (uintptr_t)i << 32;
    if (atomic_compare_exchange_strong_explicit(&cm_pagemap.root[i], &offset,
                                                (uintptr_t)mine - (uintptr_t)cm_pagemap.empty_leaf,
                                                memory_order_acq_rel, memory_order_acquire)) {
        /* Append: a CAS on the last link, which only moves on when another
         * region took it (regions are never removed). release: a reader
         * that follows the link sees base; acquire on failure: we read the
         * winner's link next. */
        _Atomic(cm_region_t *) *link = &first_region;
        cm_region_t *last = NULL;
        while (!atomic_compare_exchange_weak_explicit(link, &last, mine, memory_order_release, memory_order_acquire))
            if (last) link = &last->next, last = NULL;
        return mine;
    }
    cm_os_unmap(mine, sizeof(cm_region_t));
    return region_at_offset(offset);
}

/* Set the entry of every unit in [start, start + size). start and size need
 * not be unit-aligned (a moved large mapping); a partly covered unit is ours
 * alone because all other mappings we make start and end on unit bounds. */
bool cm_pagemap_set(uintptr_t start, size_t size, uint32_t entry) {
    uintptr_t first = start >> CM_UNIT_SHIFT, last = (start + size - 1) >> CM_UNIT_SHIFT;
    if ((last >> CM_PAGEMAP_LEAF_BITS) >= CM_PAGEMAP_ROOT_LEN || last < first) return false;
    for (uintptr_t u = first; u <= last; u++) {
        cm_region_t *r = region_for(u >> CM_PAGEMAP_LEAF_BITS);
        if (!r) return false;
        /* relaxed: see cm_pagemap_get; publication happens through the
         * synchronisation that hands the block to another thread. */
        atomic_store_explicit(&r->entries[u & (LEAF_LEN - 1)], entry, memory_order_relaxed);
        /* The arena's base was published in init, before anything of ours
         * was mapped in its window, so no unit of the window is set here
         * without its flat entry. */
        uintptr_t arena = cm_arena_base(), unit = cm_arena_unit(arena, u << CM_UNIT_SHIFT);
        if (cm_arena_has_unit(unit)) atomic_store_explicit(cm_arena_entry_at(arena, unit), entry, memory_order_relaxed);
    }
    return true;
}

cm_region_t *cm_pagemap_region(uintptr_t a) {
    if ((a >> 32) >= CM_PAGEMAP_ROOT_LEN) return NULL;
    uintptr_t offset = atomic_load_explicit(&cm_pagemap.root[a >> 32], memory_order_acquire);
    return offset ? region_at_offset(offset) : NULL;
}

cm_region_t *cm_pagemap_first_region(void) { return atomic_load_explicit(&first_region, memory_order_acquire); }
