/* api.h: the implementations behind both the cm_ names (alloc.c) and the
 * standard names (override.c). Hidden, so calls to them are direct. */
#ifndef CM_API_H
#define CM_API_H

#include "internal.h"

#include <malloc.h>
#include <stdio.h>

CM_HIDDEN void *cm_impl_malloc(size_t size);
CM_HIDDEN void cm_impl_free(void *p);
CM_HIDDEN void *cm_impl_calloc(size_t count, size_t size);
CM_HIDDEN void *cm_impl_realloc(void *p, size_t size);
CM_HIDDEN void *cm_impl_reallocarray(void *p, size_t count, size_t size);
CM_HIDDEN void *cm_impl_aligned_alloc(size_t align, size_t size);
CM_HIDDEN int cm_impl_posix_memalign(void **out, size_t align, size_t size);
CM_HIDDEN void *cm_impl_memalign(size_t align, size_t size);
CM_HIDDEN void *cm_impl_pvalloc(size_t size);
CM_HIDDEN size_t cm_impl_usable_size(const void *p, const char *func); /* func: what misuse reports name */
CM_HIDDEN int cm_impl_trim(void);
CM_HIDDEN struct mallinfo2 cm_stats_mallinfo2(void);
CM_HIDDEN struct mallinfo cm_stats_mallinfo(void);
CM_HIDDEN int cm_stats_malloc_info(int options, FILE *fp);

#endif /* CM_API_H */
