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
CM_HIDDEN CM_NOINLINE void cm_free_generic(void *p, uint32_t entry, const char *func);
CM_HIDDEN CM_NOINLINE void cm_free_suspect(void *p, unsigned cls);
CM_HIDDEN CM_NOINLINE void cm_free_small(void *p, uint32_t entry);
CM_HIDDEN void *cm_heap_calloc_inline(cm_heap_t *h, size_t count, size_t size);
CM_HIDDEN void *cm_heap_aligned_alloc_in(cm_heap_t *h, size_t align, size_t size);
CM_HIDDEN void *cm_heap_realloc_in(cm_heap_t *h, void *p, size_t size);
/* realloc whose result is in h's space (from h if it moves). */
CM_HIDDEN void *cm_realloc_in_space(cm_heap_t *h, void *p, size_t size);

/* Pop a block of class cls from heap h's bin, refilling if empty. */
CM_INLINE void *cm_heap_alloc_class(cm_heap_t *h, unsigned cls) {
    cm_bin_t *bin = &h->bins[cls];
    if (cm_likely(bin->head != NULL)) return cm_bin_pop(bin);
    return cm_heap_refill_alloc(h, cls, false);
}

/* malloc is this with the calling thread's default heap. */
CM_INLINE void *cm_heap_malloc_inline(cm_heap_t *h, size_t size) {
    if (cm_likely(size <= CM_SMALL_MAX)) return cm_heap_alloc_class(h, cm_size_to_class(size));
    return cm_alloc_generic(h, size, false);
}

CM_INLINE void *cm_malloc_inline(size_t size) { return cm_heap_malloc_inline(cm_my_heap(), size); }

/* free, with the bin of the calling thread's default heap of `space` tried
 * first (plain for free, the cage for cm_cage_free): a block of the
 * superblock that heap is allocating from goes straight back onto its bin
 * (the next malloc of its class reuses it while it is hot); any other block
 * takes the descriptor path (cm_free_small: its superblock's local list if
 * this thread owns it, else one CAS onto its anchor). No atomic
 * instruction. Misuse is reported as free's (as it is for cm_free). */
CM_INLINE void cm_free_first_to(unsigned space, void *p) {
    uint32_t entry = cm_pagemap_get((uintptr_t)p);
    unsigned cls = cm_entry_class(entry);
    if (cm_likely(cm_is_block_start(&cm_class_info[cls], p))) {
        /* the heap is loaded here, not by the caller: the paths that do not
         * need it then do not load it */
        cm_heap_t *h = space == CM_SPACE_CAGE ? cm_thread.cage : cm_my_heap();
        cm_bin_t *bin = &h->bins[cls];
        /* the other cases leave by a tail call, so this path keeps no
         * registers to save and restore */
        if (cm_likely(bin->current == entry && !cm_block_looks_free(p))) {
            cm_bin_push(bin, p);
            return;
        }
        cm_free_small(p, entry);
        return;
    }
    cm_free_generic(p, entry, "free"); /* NULL, large, or not a block of ours */
}

CM_INLINE void cm_free_inline(void *p) { cm_free_first_to(CM_SPACE_PLAIN, p); }

#endif /* CM_ALLOC_INLINE_H */
