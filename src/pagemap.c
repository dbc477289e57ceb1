/* pagemap.c: address -> {descriptor ref, class} for every 64 KiB
 * unit of address space we own, and the per-region records that hold it.
 *
 * Two levels, so that any address can be ours: large blocks are mappings
 * of their own wherever the kernel puts them, and superblocks come from
 * 32 MiB reservations once the arena's own reservation is used up or could
 * not be made (`ulimit -v` / RLIMIT_AS). The root is 2^15 slots in .bss
 * (one per 4 GiB, zero pages until touched) and a region record (264 KiB,
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

cm_pagemap_t cm_pagemap;
/* Root slots (+1, so 0 means "not stored yet") of the regions created, in
 * order; a slot is listed once its region is installed (a scanner may miss
 * a region for that instant only). */
static _Atomic uint16_t region_slots[CM_PAGEMAP_ROOT_LEN];
static _Atomic uint32_t regions_listed;

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
    if (atomic_compare_exchange_strong_explicit(&cm_pagemap.root[i], &offset,
                                                (uintptr_t)mine - (uintptr_t)cm_pagemap.empty_leaf,
                                                memory_order_acq_rel, memory_order_acquire)) {
        /* relaxed ticket; release store: a reader of the list sees the slot */
        uint32_t at = atomic_fetch_add_explicit(&regions_listed, 1, memory_order_relaxed);
        atomic_store_explicit(&region_slots[at], (uint16_t)(i + 1), memory_order_release);
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

uint32_t cm_pagemap_region_count(void) { return atomic_load_explicit(&regions_listed, memory_order_acquire); }

/* NULL while the slot's writer has taken its ticket but not yet stored it. */
cm_region_t *cm_pagemap_region_at(uint32_t i, uintptr_t *base) {
    uintptr_t slot_plus1 = atomic_load_explicit(&region_slots[i], memory_order_acquire);
    if (!slot_plus1) return NULL;
    *base = (slot_plus1 - 1) << 32;
    return cm_pagemap_region(*base);
}
