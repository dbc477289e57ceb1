/* pagemap.c: address -> {descriptor ref, size class} for every 64 KiB unit of
 * address space we own.
 *
 * Two levels rather than one flat array over a reserved arena: a flat map
 * needs the whole heap's address range reserved up front, which fails (or
 * eats the budget) under `ulimit -v` / RLIMIT_AS. Here the root is 2^15
 * pointers in .bss (one per 4 GiB, zero pages until touched) and a leaf of
 * 2^16 entries (256 KiB, lazily committed) is mapped the first time we own
 * something in its 4 GiB. Slots hold offsets from a shared all-zero leaf,
 * so the lookup has no null test. */
#include "internal.h"

#define LEAF_LEN ((size_t)1 << CM_PAGEMAP_LEAF_BITS)

_Atomic uintptr_t cm_pagemap_root[CM_PAGEMAP_ROOT_LEN];
_Atomic uint32_t cm_pagemap_empty_leaf[LEAF_LEN];

static _Atomic uint32_t *leaf_at(uintptr_t offset) {
    return (_Atomic uint32_t *)((char *)cm_pagemap_empty_leaf + offset);
}

/* Install the leaf for root slot i if missing: a CAS race whose losers unmap
 * their leaf. The release pairs with the acquire in cm_pagemap_get. */
static _Atomic uint32_t *leaf_for(size_t i) {
    uintptr_t offset = atomic_load_explicit(&cm_pagemap_root[i], memory_order_acquire);
    if (offset) return leaf_at(offset);
    _Atomic uint32_t *mine = cm_os_map(LEAF_LEN * sizeof(uint32_t));
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(&cm_pagemap_root[i], &offset,
                                                (uintptr_t)mine - (uintptr_t)cm_pagemap_empty_leaf,
                                                memory_order_acq_rel, memory_order_acquire))
        return mine;
    cm_os_unmap(mine, LEAF_LEN * sizeof(uint32_t));
    return leaf_at(offset);
}

/* Set the entry of every unit in [start, start + size). start and size need
 * not be unit-aligned (a moved large mapping); a partly covered unit is ours
 * alone because all other mappings we make start and end on unit bounds. */
bool cm_pagemap_set(uintptr_t start, size_t size, uint32_t entry) {
    uintptr_t first = start >> CM_UNIT_SHIFT, last = (start + size - 1) >> CM_UNIT_SHIFT;
    for (uintptr_t u = first; u <= last; u++) {
        _Atomic uint32_t *leaf = leaf_for(u >> CM_PAGEMAP_LEAF_BITS);
        if (!leaf) return false;
        /* relaxed: see cm_pagemap_get; publication happens through the
         * synchronisation that hands the block to another thread. */
        atomic_store_explicit(&leaf[u & (LEAF_LEN - 1)], entry, memory_order_relaxed);
    }
    return true;
}
