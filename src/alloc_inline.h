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

CM_HIDDEN CM_NOINLINE void *cm_alloc_generic(size_t size, bool zero);
CM_HIDDEN CM_NOINLINE void cm_free_generic(void *p, uint32_t entry, const char *func);
CM_HIDDEN CM_NOINLINE void cm_free_suspect(void *p, unsigned cls);
CM_HIDDEN CM_NOINLINE void cm_free_checked_slow(void *p);

/* Pop a block of class cls from this thread's cache, refilling if empty. */
CM_INLINE void *cm_alloc_class(unsigned cls) {
    cm_bin_t *bin = cm_my_bin(cls);
    if (cm_likely(bin->head != NULL)) return cm_bin_pop(bin);
    return cm_tcache_refill_alloc(cls, false);
}

CM_INLINE void *cm_malloc_inline(size_t size) {
    if (cm_likely(size <= CM_SMALL_MAX)) return cm_alloc_class(cm_size_to_class(size));
    return cm_alloc_generic(size, false);
}

/* The class of small block p, after checking p is the start of a block: the
 * page map gives the class, the class gives the superblock geometry (spans
 * are aligned to their size), and one multiply checks the offset. Returns 0
 * if p is not a small block of ours at all. */
CM_INLINE unsigned cm_small_class_checked(const void *p, uint32_t entry, const char *func) {
    unsigned cls = cm_entry_class(entry);
    if (cls - 1 >= CM_NUM_CLASSES) return 0;
    const cm_class_info_t *ci = &cm_class_info[cls];
    uint64_t off = (uintptr_t)p & ci->span_mask;
    uint64_t idx = (off * ci->recip) >> CM_RECIP_SHIFT;
    if (cm_unlikely(idx * ci->block_size != off || idx >= ci->max_count)) cm_fatal(func, "invalid pointer", p);
    return cls;
}

CM_INLINE void cm_free_inline(void *p) {
    uint32_t entry = cm_pagemap_get((uintptr_t)p);
    unsigned cls = cm_small_class_checked(p, entry, "free");
    if (cm_likely(cls != 0)) {
        cm_bin_t *bin = cm_my_bin(cls);
        /* the rare cases (full bin, a block of another thread's superblock,
         * a block that looks free already) leave by a tail call, so the fast
         * path keeps no registers to save and restore */
        if (cm_likely(bin->count < bin->limit && cm_entry_owner(entry) == cm_tcache.tag &&
                      !cm_block_looks_free(p))) {
            cm_bin_push(bin, p);
            return;
        }
        cm_free_checked_slow(p);
        return;
    }
    cm_free_generic(p, entry, "free"); /* NULL, large, or not ours */
}

#endif /* CM_ALLOC_INLINE_H */
