/* alloc.c: the allocation API with its C semantics (errno, overflow,
 * alignment rules, realloc), built on the fast paths of alloc_inline.h, and
 * the prefixed cm_ entry points. override.c maps the standard names here. */
#include <errno.h>
#include <string.h>

#include "alloc_inline.h"
#include "api.h"

/* ------------------------------------------------------------ slow paths */

void *cm_alloc_generic(cm_heap_t *h, size_t size, bool zero) {
    if (cm_unlikely(size > CM_MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    if (size <= CM_SMALL_MAX) { /* calloc (its fast path stops at CM_FINE_MAX) */
        unsigned cls = cm_size_to_class(size);
        void *b = cm_bin_pop(&h->bin_head[cls]);
        if (b) return zero ? memset(b, 0, size) : b;
        return cm_heap_refill_alloc(h, cls, zero); /* the refill zeroes (or knows it is zero) */
    }
    cm_ensure_init();
    return cm_heap_large_alloc(h, size, 0, zero);
}

void *cm_alloc_medium(cm_heap_t *h, size_t size) {
    if (cm_likely(size <= CM_SMALL_MAX)) return cm_heap_alloc_class(h, cm_coarse_size_to_class(size));
    return cm_alloc_generic(h, size, false);
}

/* p is not a small block in use: say precisely what it is, then abort. A
 * page-map entry with class 0 but a descriptor names a retired superblock or
 * a cached large mapping: all its blocks were free already. */
__attribute__((noreturn, cold)) static void bad_pointer(const void *p, uint32_t entry, const char *func) {
    cm_fatal(func, entry != 0 && cm_entry_class(entry) == 0 ? "double free" : "invalid pointer", p);
}

static cm_desc_t *large_desc_checked(const void *p, uint32_t entry, const char *func) {
    if (cm_entry_class(entry) != CM_CLASS_LARGE) bad_pointer(p, entry, func);
    cm_desc_t *d = cm_desc_from_ref(cm_entry_ref(entry));
    if (d->base != p) cm_fatal(func, "invalid pointer", p);
    return d;
}

void cm_free_generic(void *p, uint32_t entry, const char *func) {
    if (p == NULL) return;
    cm_free_large(large_desc_checked(p, entry, func));
}

/* free of an address outside the arena's window: the fast path with the
 * two-level map's entry. */
void cm_free_outside_arena(void *p) {
    uint32_t entry = cm_pagemap_get((uintptr_t)p);
    if (!cm_free_small_inline(p, entry)) cm_free_generic(p, entry, "free");
}

/* free of what the fast path found no small block in the window (its
 * entry, from the two-level map, is the flat map's). */
void cm_free_by_lookup(void *p) { cm_free_generic(p, cm_pagemap_get((uintptr_t)p), "free"); }

/* ------------------------------------------------------------ API */

void *cm_heap_calloc_inline(cm_heap_t *h, size_t count, size_t size) {
    size_t total;
    if (cm_unlikely(__builtin_mul_overflow(count, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = cm_heap_try_pop(h, total);
    if (cm_likely(p != NULL)) return memset(p, 0, total);
    return cm_alloc_generic(h, total, true);
}

void *cm_impl_calloc(size_t count, size_t size) { return cm_heap_calloc_inline(cm_my_heap(), count, size); }

/* Whether a small block of `usable` bytes keeps serving a realloc to size
 * (not 0): it fits and shrinking would not free half of it. */
static bool stays_small(size_t size, size_t usable) { return size <= usable && (size >= usable / 2 || size <= 16); }

/* realloc of a block that leaves p (old_usable bytes) for one from h. */
static CM_NOINLINE void *realloc_moved(cm_heap_t *h, void *p, size_t size, size_t old_usable) {
    void *q = cm_heap_malloc_inline(h, size);
    if (!q) return NULL;
    memcpy(q, p, size < old_usable ? size : old_usable);
    cm_free_inline(p);
    return q;
}

/* realloc in heap h; in_h: the result must be in h (cm_heap_realloc), else
 * a block that fits stays where it is, whatever heap of h's space holds it. */
static CM_NOINLINE void *realloc_in(cm_heap_t *h, void *p, size_t size, bool in_h) {
    if (p == NULL) return cm_heap_malloc_inline(h, size);
    if (size == 0) {
        cm_free_inline(p);
        return NULL;
    }
    uint32_t entry = cm_pagemap_get((uintptr_t)p);
    unsigned cls = cm_small_class_of(p, entry);
    bool stays = in_h ? cm_heap_contains(h, p) : cm_space_of(p) == h->space;
    size_t old_usable;
    if (cls != 0) {
        if (cm_unlikely(cm_block_looks_free(p))) cm_free_suspect(p, cm_desc_of_entry(entry));
        old_usable = cm_class_info[cls].block_size;
        if (stays && stays_small(size, old_usable)) return p;
    } else {
        cm_desc_t *d = large_desc_checked(p, entry, "realloc");
        if (stays && size > CM_SMALL_MAX && size <= CM_MAX_REQUEST) {
            void *q = cm_large_realloc(d, size);
            if (q) return q;
            /* the mapping could not be resized in place or moved (mremap
             * refused by a seccomp filter, say): a new block and a copy,
             * as glibc does */
        }
        old_usable = cm_large_usable(d);
    }
    return realloc_moved(h, p, size, old_usable);
}

/* A cage block stays in the cage. A small block of the arena (the plain
 * space: the default heap's) is judged here, without realloc_in's register
 * saves and space tests, which cost as much again: a buffer grown a little
 * at a time stays put most times (bench/ growth: 99%). */
void *cm_impl_realloc(void *p, size_t size) {
    uintptr_t base = cm_arena_base(), unit = cm_arena_unit(base, (uintptr_t)p);
    if (cm_likely(cm_arena_has_unit(unit) && size != 0)) {
        /* relaxed: as in cm_pagemap_get */
        unsigned cls = cm_small_class_of(p, atomic_load_explicit(cm_arena_entry_at(base, unit), memory_order_relaxed));
        if (cm_likely(cls != 0 && !cm_block_looks_free(p))) { /* realloc_in reports a free block */
            size_t usable = cm_class_info[cls].block_size;
            return stays_small(size, usable) ? p : realloc_moved(cm_my_heap(), p, size, usable);
        }
    }
    return realloc_in(cm_space_of(p) == CM_SPACE_CAGE ? cm_thread.cage : cm_my_heap(), p, size, false);
}
void *cm_heap_realloc_in(cm_heap_t *h, void *p, size_t size) { return realloc_in(h, p, size, true); }
void *cm_realloc_in_space(cm_heap_t *h, void *p, size_t size) { return realloc_in(h, p, size, false); }

static bool is_power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Any power-of-two alignment. A small block is naturally aligned to every
 * power of two dividing its size (superblocks are aligned to their size,
 * >= 64 KiB), so the smallest class that fits and whose size the alignment
 * divides serves it without padding; anything else is a large block. */
void *cm_heap_aligned_alloc_in(cm_heap_t *h, size_t align, size_t size) {
    if (cm_unlikely(!is_power_of_two(align))) {
        errno = EINVAL;
        return NULL;
    }
    /* every block is 16-aligned but the 8-byte class's */
    if (align <= 16) return cm_heap_malloc_inline(h, size < align ? align : size);
    if (cm_unlikely(size > CM_MAX_REQUEST || align > CM_MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = size < align ? align : size;
    if (need <= CM_SMALL_MAX) {
        for (unsigned cls = cm_size_to_class(need); cls <= CM_NUM_CLASSES; cls++)
            if (cm_class_info[cls].block_size % align == 0) return cm_heap_alloc_class(h, cls);
    }
    cm_ensure_init();
    return cm_heap_large_alloc(h, size, align, false);
}

void *cm_impl_aligned_alloc(size_t align, size_t size) { return cm_heap_aligned_alloc_in(cm_my_heap(), align, size); }

int cm_impl_posix_memalign(void **out, size_t align, size_t size) {
    if (!is_power_of_two(align) || align < sizeof(void *)) return EINVAL;
    int saved = errno;
    void *p = cm_impl_aligned_alloc(align, size);
    if (!p) {
        errno = saved;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

/* glibc's memalign: a non-power-of-two alignment is rounded up. */
void *cm_impl_memalign(size_t align, size_t size) {
    if (align > (SIZE_MAX >> 1) + 1) {
        errno = EINVAL;
        return NULL;
    }
    size_t a = 1;
    while (a < align) a <<= 1;
    return cm_impl_aligned_alloc(a, size);
}

void *cm_impl_pvalloc(size_t size) {
    size_t rounded = (size + CM_PAGE_SIZE - 1) & ~(CM_PAGE_SIZE - 1);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return cm_impl_aligned_alloc(CM_PAGE_SIZE, rounded ? rounded : CM_PAGE_SIZE);
}

void *cm_impl_reallocarray(void *p, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return cm_impl_realloc(p, total);
}

size_t cm_impl_usable_size(const void *p, const char *func) {
    if (p == NULL) return 0;
    uint32_t entry = cm_pagemap_get((uintptr_t)p);
    unsigned cls = cm_small_class_of(p, entry);
    if (cls != 0) return cm_class_info[cls].block_size;
    return cm_large_usable(large_desc_checked(p, entry, func));
}

/* The calling thread's heaps give back what they hold unused now; every
 * other heap does at its next refill (an idle thread's heap cannot be
 * touched by another thread: its lists are its own). 1 if pages went back:
 * those inside free blocks are counted as returned only (relaxed: a
 * count, which another thread's returns may also move). */
int cm_impl_trim(void) {
    if (!atomic_load_explicit(&cm_initialized, memory_order_acquire)) return 0;
    size_t returned = atomic_load_explicit(&cm_counters.returned, memory_order_relaxed);
    atomic_fetch_add_explicit(&cm_trim_epoch, 1, memory_order_relaxed);
    if (cm_thread.state == CM_THREAD_ACTIVE) {
        cm_remote_flush();
        for (cm_heap_t *h = cm_thread.heap; h; h = cm_heap_record(h->next_of_thread)) {
            h->trim_seen = atomic_load_explicit(&cm_trim_epoch, memory_order_relaxed);
            cm_heap_collect_owned(h);
        }
    }
    bool small = cm_pool_trim();
    cm_pool_purge_free_blocks();
    bool chunks = cm_arena_trim();
    bool large = cm_large_trim();
    return small || chunks || large || atomic_load_explicit(&cm_counters.returned, memory_order_relaxed) != returned;
}

/* ------------------------------------------------------------ entry points */

/* for the C++ operators (override_new.cpp), which cannot include our C11 headers */
CM_HOT_ENTRY void *cm_impl_malloc(size_t size) { return cm_malloc_inline(size); }
CM_HOT_ENTRY void cm_impl_free(void *p) { cm_free_inline(p); }

CM_HOT_ENTRY void *cm_malloc(size_t size) { return cm_malloc_inline(size); }
CM_HOT_ENTRY void cm_free(void *p) { cm_free_inline(p); }
void *cm_calloc(size_t count, size_t size) { return cm_impl_calloc(count, size); }
void *cm_realloc(void *p, size_t size) { return cm_impl_realloc(p, size); }
void *cm_aligned_alloc(size_t align, size_t size) { return cm_impl_aligned_alloc(align, size); }
size_t cm_usable_size(const void *p) { return cm_impl_usable_size(p, "malloc_usable_size"); }
int cm_trim(void) { return cm_impl_trim(); }
