/* double_free.c: the verdict on a small block whose first word carries the
 * free tag when it is freed or reallocated (cm_free_suspect): free already,
 * a double free, which aborts; or a word of data that looks like a link.
 *
 * A free block's first word is always a link that decodes to the list's end
 * or to a block of its own class (bins, local, anchor and batch lists are
 * all lists of one superblock). Data that merely carries the tag passes the
 * decoded pointer's 17-bit top and 4-bit alignment checks 1 time in 32 and
 * then names a block start of this class by chance only. But a link can
 * also be data: memory reused by a larger class or a large block keeps the
 * old blocks' links inside the new blocks, and a program that copies such
 * uninitialised bytes to the start of a block copies a word that decodes,
 * wherever it is, to the old block's neighbour, which can be a block of the
 * right class (tests/sec_stale_link). So a word that decodes well is only
 * a suspicion, confirmed by finding the block on one of its superblock's
 * lists: every thread's waiting batch, the remote frees on the anchor, the
 * local list and the bin. The last two belong to the superblock's owner;
 * when that is another thread, they are read as they stand, word by word,
 * while the owner may be changing them: a block its owner moves between
 * them at that moment can be missed (a double free racing with the owner's
 * own use of the superblock may then go unreported), and the walk never
 * leaves the superblock's span, whatever it reads. */
#include "internal.h"

#define FLUSH_TRIES 64 /* yields while a thread hands over a batch of d's blocks */

/* The block after b on a list that another thread may be changing: b's
 * word read once, atomically; NULL at the list's end or if it does not
 * decode. */
static void *next_read_racily(const void *b) {
    uintptr_t word = __atomic_load_n(&((const cm_free_block_t *)b)->link, __ATOMIC_RELAXED);
    void *next = cm_link_decode(word, cm_link_key_get());
    return (uintptr_t)next & CM_LINK_INVALID ? NULL : cm_list_head(next);
}

/* Whether the chain of at most n blocks from head, a list of d's, holds p;
 * it ends where a link leaves d's span. The n-th block's link is not read:
 * a batch's last link is rewritten when it is handed over. */
static bool chain_holds(const cm_desc_t *d, void *head, uint32_t n, const void *p) {
    uintptr_t base = (uintptr_t)d->base, span = (uintptr_t)1 << d->span_shift;
    for (void *b = head; n && b && (uintptr_t)b - base < span; b = --n ? next_read_racily(b) : NULL)
        if (b == p) return true;
    return false;
}

/* Whether p waits in a thread's batch for d. A batch being handed over is
 * waited for, as cm_heap_visit does: its blocks are on their way to the
 * anchor; if its thread never finishes, the suspicion stands. */
static bool batches_hold(const cm_desc_t *d, const void *p) {
    uint32_t limit = cm_heap_record_limit();
    for (unsigned tries = 0; tries < FLUSH_TRIES; tries++) {
        bool busy = false;
        for (uint32_t r = 1; r < limit; r++) {
            uint64_t b = cm_remote_batch_word(r);
            if (!b || cm_remote_batch_desc(b) != d) continue;
            if (b & CM_REMOTE_BATCH_FLUSHING) busy = true;
            else if (chain_holds(d, cm_remote_batch_newest(b), cm_remote_batch_count(b), p)) return true;
        }
        if (!busy) return false;
        cm_os_yield();
    }
    return true;
}

/* Whether p, a block of class cls of d, is on one of d's free lists.
 * Blocks go from a batch to the anchor to the local list or the bin, and
 * only d's owner moves them on from the anchor: read in that order, a free
 * block is found where it is, unless another thread owns d and moves it
 * meanwhile. */
static bool lists_hold(cm_desc_t *d, unsigned cls, const void *p) {
    if (batches_hold(d, p)) return true;
    /* acquire: the links of the remote frees it counts are visible */
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    if (cm_anchor_count(a) && chain_holds(d, cm_desc_block(d, cm_anchor_avail(a)), cm_anchor_count(a), p))
        return true;
    /* The owner's plain fields, read atomically (relaxed): if the owner is
     * another thread, they are a view of a moment, which is all this asks. */
    uint32_t most = cm_class_info[cls].max_count;
    if (chain_holds(d, cm_list_head(__atomic_load_n(&d->local_free, __ATOMIC_RELAXED)), most, p)) return true;
    cm_heap_t *h = cm_heap_record(atomic_load_explicit(&d->heap, memory_order_relaxed));
    return h && __atomic_load_n(&h->bins[cls].current, __ATOMIC_RELAXED) == cm_desc_ref(d) &&
           chain_holds(d, cm_list_head(__atomic_load_n(&h->bin_head[cls], __ATOMIC_RELAXED)), most, p);
}

/* p is a block start of d (the caller tested it). */
void cm_free_suspect(void *p, cm_desc_t *d) {
    unsigned cls = cm_desc_class(d);
    void *next = cm_block_next_unverified(p);
    if ((uintptr_t)next & CM_LINK_INVALID) return;
    if (next != NULL && cm_small_class_of(next, cm_pagemap_get((uintptr_t)next)) != cls) return;
    if (lists_hold(d, cls, p)) cm_fatal("free", "double free", p);
}
