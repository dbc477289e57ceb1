/* override.c: the standard allocation names, exported by libcagemalloc.so so
 * that linking it or LD_PRELOADing it replaces the system allocator. Not in
 * libcagemalloc.a, which offers only the cm_ names. malloc and free inline
 * the fast paths; the rest are direct calls to hidden implementations.
 * Besides the standard names, what glibc programs link against and other
 * allocators provide: cfree, C23's free_sized and free_aligned_sized,
 * mallinfo, malloc_info, mallopt, and the __libc_* entry points that some
 * preloaded tools call directly. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_inline.h"
#include "api.h"

#define CM_EXPORT __attribute__((visibility("default")))

CM_HOT_ENTRY CM_EXPORT void *malloc(size_t size) { return cm_malloc_inline(size); }
CM_HOT_ENTRY CM_EXPORT void free(void *p) { cm_free_inline(p); }
CM_EXPORT void *calloc(size_t count, size_t size) { return cm_impl_calloc(count, size); }
CM_EXPORT void *realloc(void *p, size_t size) { return cm_impl_realloc(p, size); }
CM_EXPORT void *reallocarray(void *p, size_t count, size_t size) { return cm_impl_reallocarray(p, count, size); }
CM_EXPORT void *aligned_alloc(size_t align, size_t size) { return cm_impl_aligned_alloc(align, size); }
CM_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    return cm_impl_posix_memalign(out, align, size);
}
CM_EXPORT void *memalign(size_t align, size_t size) { return cm_impl_memalign(align, size); }
CM_EXPORT void *valloc(size_t size) { return cm_impl_aligned_alloc(CM_PAGE_SIZE, size); }
CM_EXPORT void *pvalloc(size_t size) { return cm_impl_pvalloc(size); }
CM_EXPORT size_t malloc_usable_size(void *p) { return cm_impl_usable_size(p, "malloc_usable_size"); }
CM_EXPORT int malloc_trim(size_t pad) {
    (void)pad;
    return cm_impl_trim();
}
CM_EXPORT void malloc_stats(void) { cm_stats_report(2); }
CM_EXPORT struct mallinfo2 mallinfo2(void) { return cm_stats_mallinfo2(); }
CM_EXPORT struct mallinfo mallinfo(void) { return cm_stats_mallinfo(); }
CM_EXPORT int malloc_info(int options, FILE *fp) { return cm_stats_malloc_info(options, fp); }
/* glibc's tuning knobs (M_MMAP_THRESHOLD, M_ARENA_MAX, ...) have no
 * counterpart here: accepted and ignored, reported as success. */
CM_EXPORT int mallopt(int param, int value) {
    (void)param, (void)value;
    return 1;
}
CM_EXPORT void cfree(void *p) { cm_free_inline(p); }
/* C23's sized frees (glibc 2.43 exports them, and GLib's g_free_sized calls
 * them when built against it): without these a program on a newer glibc
 * would hand our blocks to glibc's free_sized. The size and alignment are
 * not needed, as for sized operator delete. */
CM_EXPORT void free_sized(void *p, size_t size) {
    (void)size;
    cm_free_inline(p);
}
CM_EXPORT void free_aligned_sized(void *p, size_t align, size_t size) {
    (void)align, (void)size;
    cm_free_inline(p);
}

/* The plain operator new and new[] (override_new.cpp, which tail-calls
 * this): malloc's fast path, with new's own slow path (the new-handler
 * loop, std::bad_alloc) instead of malloc's NULL. */
CM_HIDDEN void *cm_new_slow(size_t size);
CM_HOT_ENTRY CM_HIDDEN void *cm_impl_new(size_t size) {
    void *p = cm_heap_try_pop(cm_my_heap(), size);
    if (cm_likely(p != NULL)) return p;
    return cm_new_slow(size);
}

CM_EXPORT void *__libc_malloc(size_t size) { return cm_malloc_inline(size); }
CM_EXPORT void __libc_free(void *p) { cm_free_inline(p); }
CM_EXPORT void *__libc_calloc(size_t count, size_t size) { return cm_impl_calloc(count, size); }
CM_EXPORT void *__libc_realloc(void *p, size_t size) { return cm_impl_realloc(p, size); }
CM_EXPORT void *__libc_memalign(size_t align, size_t size) { return cm_impl_memalign(align, size); }
CM_EXPORT void *__libc_valloc(size_t size) { return cm_impl_aligned_alloc(CM_PAGE_SIZE, size); }
CM_EXPORT void *__libc_pvalloc(size_t size) { return cm_impl_pvalloc(size); }
