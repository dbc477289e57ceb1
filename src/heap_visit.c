/* heap_visit.c: cm_heap_visit, the walk over a heap's live blocks. The
 * heap first gathers every free block onto its superblocks' local lists
 * (remote frees included: a block another thread freed is on its
 * superblock's anchor list once that free has returned); a bitmap of those
 * per superblock then tells the live blocks from the free. */
#include <string.h>

#include "api.h"

#define MAX_BLOCKS 4096 /* per superblock (the anchor's 16-bit fields allow more; the table has at most this) */

static int visit_superblock(cm_desc_t *d, cm_block_visitor fn, void *arg) {
    const cm_class_info_t *ci = &cm_class_info[atomic_load_explicit(&d->size_class, memory_order_relaxed)];
    uint64_t free_bits[MAX_BLOCKS / 64];
    memset(free_bits, 0, sizeof free_bits);
    for (void *b = d->local_free; b; b = cm_block_peek_next(b)) {
        size_t i = (size_t)((char *)b - d->base) / ci->block_size;
        free_bits[i / 64] |= (uint64_t)1 << (i % 64);
    }
    uint32_t carved = atomic_load_explicit(&d->carved, memory_order_relaxed);
    for (uint32_t i = 0; i < carved; i++) {
        if (free_bits[i / 64] >> (i % 64) & 1) continue;
        int r = fn(d->base + (size_t)i * ci->block_size, ci->block_size, arg);
        if (r) return r;
    }
    return 0;
}

static int visit_list(uint32_t r, cm_block_visitor fn, void *arg) {
    for (; r; r = cm_desc_from_ref(r)->link) {
        int rc = visit_superblock(cm_desc_from_ref(r), fn, arg);
        if (rc) return rc;
    }
    return 0;
}

int cm_heap_visit(cm_heap_t *h, cm_block_visitor fn, void *arg) {
    cm_heap_check_owner(h, "cm_heap_visit");
    cm_heap_gather(h);
    int rc;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++)
        if ((rc = visit_list(h->bins[c].avail, fn, arg)) != 0) return rc;
    if ((rc = visit_list(h->parked, fn, arg)) != 0) return rc;
    for (uint32_t r = h->large; r; r = cm_desc_from_ref(r)->link) {
        cm_desc_t *d = cm_desc_from_ref(r);
        if ((rc = fn(d->base, d->map_size, arg)) != 0) return rc;
    }
    return 0;
}
