/* alloc_inline.h: the malloc and free fast paths, inlined into both the
 * prefixed API (alloc.c) and the drop-in exports (override.c).
 *
 * Written for what they compile to: a table lookup, a thread-local list pop
 * or push, no atomic instruction, and only direct calls to hidden noinline
 * slow paths (a PLT call or an indirect call here would cost as much as the
 * whole path: the seed 003 lesson). tests/core_disasm checks the result. */
#ifndef CM_ALLOC_INLINE_H
#define CM_ALLOC_INLINE_H

#include "internal.h"

CM_HIDDEN CM_NOINLINE void *cm_alloc_generic(cm_heap_t *h, size_t size, bool zero);
CM_HIDDEN CM_NOINLINE void *cm_alloc_medium(cm_heap_t *h, size_t size);
CM_HIDDEN CM_NOINLINE void cm_free_generic(void *p, uint32_t entry, const char *func);
CM_HIDDEN CM_NOINLINE void cm_free_suspect(void *p, cm_desc_t *d);
CM_HIDDEN CM_NOINLINE void cm_free_outside_arena(void *p);
CM_HIDDEN CM_NOINLINE void cm_free_by_lookup(void *p);
CM_HIDDEN void *cm_heap_calloc_inline(cm_heap_t *h, size_t count, size_t size);
CM_HIDDEN void *cm_heap_aligned_alloc_in(cm_heap_t *h, size_t align, size_t size);
CM_HIDDEN void *cm_heap_realloc_in(cm_heap_t *h, void *p, size_t size);
/* realloc whose result is in h's space (from h if it moves). */
CM_HIDDEN void *cm_realloc_in_space(cm_heap_t *h, void *p, size_t size);

/* Pop a block of class cls from heap h's bin, refilling if empty. */
CM_INLINE void *cm_heap_alloc_class(cm_heap_t *h, unsigned cls) {
    void *b = cm_bin_pop(&h->bin_head[cls]);
    if (cm_likely(b != NULL)) return b;
    return cm_heap_refill_alloc(h, cls, false);
}

/* A block of `size` from h's bin if the size is at most CM_FINE_MAX and
 * the bin has one, else NULL: the fast path alone, for callers with a slow
 * path of their own (calloc, operator new). */
CM_INLINE void *cm_heap_try_pop(cm_heap_t *h, size_t size) {
    if (cm_likely(size <= CM_FINE_MAX)) return cm_bin_pop(&h->bin_head[cm_fine_size_to_class(size)]);
    return NULL;
}

/* malloc is this with the calling thread's default heap. Blocks over
 * CM_FINE_MAX come from their bins too, a call away (cm_alloc_medium): a
 * jump more for a block whose use costs far more, and a short lookup table
 * for the sizes that are most of the calls (internal.h). */
CM_INLINE void *cm_heap_malloc_inline(cm_heap_t *h, size_t size) {
    if (cm_likely(size <= CM_FINE_MAX)) return cm_heap_alloc_class(h, cm_fine_size_to_class(size));
    return cm_alloc_medium(h, size);
}

CM_INLINE void *cm_malloc_inline(size_t size) { return cm_heap_malloc_inline(cm_my_heap(), size); }

/* free of p if p is a block start of a superblock (false, and nothing done,
 * otherwise), entry being its page-map entry: a block of a superblock the
 * calling thread owns goes straight onto that superblock's local list,
 * whichever heap of the thread owns it and whether or not it is the one its
 * class allocates from now (no branch on that: random frees across a
 * class's superblocks would mispredict it). The rest leaves by a tail call:
 * another thread's superblock (one CAS), the superblock's last block out
 * or a parked one (cm_free_fast_ok), a block that looks free already. No
 * atomic instruction. */
CM_INLINE bool cm_free_small_inline(void *p, uint32_t entry) {
    cm_desc_t *d = cm_desc_of_entry(entry);
    if (cm_likely(cm_is_block_of(d, p))) {
        /* owner and used in one load (internal.h); when the test holds,
         * the owner-private fields below are ours, and so is the thread
         * that has a copy of the key */
        uint64_t owner_used = cm_desc_owner_used(d);
        if (cm_likely(cm_free_fast_ok(owner_used, cm_thread.free_key) &&
                      !cm_block_looks_free(p))) {
            void *head = d->local_free;
            d->local_free = p;
            ((cm_free_block_t *)p)->link = cm_link_encode(head, cm_thread.link_key);
            cm_desc_used_dec(d, owner_used);
            return true;
        }
        cm_free_small_slow(p, d);
        return true;
    }
    return false;
}

/* free: the entry from the arena's flat map, or for an address outside its
 * window (large blocks past it, NULL, the cage, 32 MiB reservations, not
 * ours) from the two-level map, out of line. What is no small block (NULL,
 * large, not ours) goes to cm_free_by_lookup, which reads its entry again
 * rather than have the fast path keep it in a register: so the fast path
 * fits two cache lines (128 bytes, built with gcc), where a third cost
 * bench/'s fastpath 3% (BENCHMARKS.md). */
CM_INLINE void cm_free_inline(void *p) {
    uintptr_t base = cm_arena_base(), unit = cm_arena_unit(base, (uintptr_t)p);
    if (cm_likely(cm_arena_has_unit(unit))) {
        /* relaxed: as in cm_pagemap_get */
        if (!cm_free_small_inline(p, atomic_load_explicit(cm_arena_entry_at(base, unit), memory_order_relaxed)))
            cm_free_by_lookup(p);
        return;
    }
    cm_free_outside_arena(p);
}

#endif /* CM_ALLOC_INLINE_H */
