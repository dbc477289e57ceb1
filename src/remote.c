/* remote.c: frees of blocks whose superblock another thread's heap owns, or
 * no heap does. A thread gathers such frees into one superblock as a batch,
 * a chain of at most a page's worth of blocks (the class's carve batch),
 * and hands the whole batch over with one CAS on the superblock's anchor
 * when a free goes to another superblock, when the batch is full, and when
 * the thread trims, collects or exits. A producer thread's blocks freed by
 * a consumer thread cost one CAS per batch instead of one per block, and
 * the consumer's stores into the blocks no longer wait behind a locked
 * instruction each. Joining a batch is cm_free_remote (internal.h).
 *
 * The batch is one word in the thread's default heap record, stored after
 * the block's link: cm_heap_visit of the heap owning the superblock reads
 * every thread's word and counts the batch's blocks as freed (heap_visit.c).
 * A thread blocked for good holds at most one batch.
 *
 * Only a superblock that no heap or a thread's default heap holds is
 * batched. A heap made by cm_heap_new may be destroyed, which returns its
 * superblocks whole, and a batch handed over after that would write into a
 * span reused by now. A superblock holding a live block never moves into
 * such a heap (it starts only superblocks without live blocks, pool.c), and
 * the blocks waiting in a batch count as live, so the test made at the
 * batch's first block holds until it is handed over. */
#include "internal.h"

/* d is held by no heap, or by a thread's default heap (plain or cage).
 * Relaxed reads: while a block of d is live (the block being freed is),
 * d's heap word, once a heap that can be destroyed, only ever changes to a
 * default heap or none, and a heap ref read stale names either a record
 * that still says so or one recycled since (a destroyable heap starts no
 * superblock holding a live block, so d is in no such heap): a stale read
 * errs towards "no", or names a heap d has left for one that is batchable. */
static bool batchable(const cm_desc_t *d) {
    uint32_t heap = atomic_load_explicit(&d->heap, memory_order_relaxed);
    if (heap == 0) return true;
    cm_heap_t *rec = cm_heap_record(heap);
    return rec && atomic_load_explicit(&rec->lasting, memory_order_relaxed);
}

void cm_free_remote_slow(void *p, cm_desc_t *d) {
    if (cm_unlikely(cm_thread.state == CM_THREAD_NEW)) cm_thread_start(); /* a thread that only frees batches too */
    cm_heap_t *me = cm_thread.heap; /* ref 0 if it could not start, and after its exit hook */
    if (me->ref == 0 || !batchable(d)) {
        cm_pool_free_remote(d, p, p, 1);
        return;
    }
    cm_remote_flush();
    cm_block_set_next(p, NULL);
    me->remote_batch_desc = d;
    me->remote_batch_tail = p;
    me->remote_batch_max = cm_class_info[cm_desc_class(d)].carve_batch;
    /* release: as in cm_free_remote */
    atomic_store_explicit(&me->remote_batch, cm_remote_batch_make(p, 1), memory_order_release);
}

/* The word says "being handed over" from before the anchor CAS until after
 * it: a visitor never takes a word for a batch still waiting once its
 * blocks may be on the anchor list, taken by the owner and allocated again
 * (heap_visit.c waits for such a word to clear). */
void cm_remote_flush(void) {
    cm_heap_t *me = cm_thread.heap;
    cm_desc_t *d = me->remote_batch_desc;
    if (!d) return;
    uint64_t batch = atomic_load_explicit(&me->remote_batch, memory_order_relaxed);
    /* the CAS below is a release, so whoever acquires the anchor after it
     * (the owner taking the list) reads this or a later value; release: a
     * visitor that reads this word sees the chain's links */
    atomic_store_explicit(&me->remote_batch, batch | CM_REMOTE_BATCH_FLUSHING, memory_order_release);
    cm_pool_free_remote(d, cm_remote_batch_newest(batch), me->remote_batch_tail, cm_remote_batch_count(batch));
    CM_TEST_POINT("remote: handed over");
    me->remote_batch_desc = NULL;
    /* release: a visitor that reads 0 finds the blocks on the anchor (our
     * CAS happens before its take of the list) */
    atomic_store_explicit(&me->remote_batch, 0, memory_order_release);
}

/* Acquire: pairs with the release stores of the word (cm_free_remote and
 * the functions above). */
uint64_t cm_remote_batch_word(uint32_t r) {
    cm_heap_t *rec = cm_heap_record(r);
    return rec ? atomic_load_explicit(&rec->remote_batch, memory_order_acquire) : 0;
}

cm_desc_t *cm_remote_batch_desc(uint64_t b) {
    return cm_desc_of_entry(cm_pagemap_get((uintptr_t)cm_remote_batch_newest(b)));
}
