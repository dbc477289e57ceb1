/* heap_records.c: the pool of heap records (cm_heap_t), for the threads'
 * default heaps and for cm_heap_new. A heap takes one when it is made and
 * gives it back when it goes away. Lock-free: a stack of free records, and
 * a cursor that hands out the records of a new chunk. */
#include <string.h>

#include "internal.h"

/* Records live in chunks mapped on demand and never unmapped, named by a
 * 32-bit ref (index + 1; 0 is none), so the pool's head is {ref:32, tag:32}
 * in one CAS'ed word: a stale read of a record is harmless, and a 32-bit tag
 * defeats ABA (with 16 bits, a cm_heap_record_get preempted across 65,536 pool
 * operations could hand one record to two threads). Records never used are
 * never touched: a new chunk is handed out record by record through a
 * cursor. At most RECORD_CHUNKS * RECORDS_PER_CHUNK heaps exist at once;
 * a thread started beyond that, or without memory for a record, runs
 * without a heap (cm_alloc_unowned). Being never unmapped, a record may be
 * written by a remote free that read a stale heap ref (its mailbox, its
 * zombie count): those fields are atomics, reset atomically, and only hints. */
#define RECORD_CHUNK ((size_t)1 << 20)
#define RECORDS_PER_CHUNK ((uint32_t)(RECORD_CHUNK / sizeof(cm_heap_t)))
#define RECORD_CHUNKS 1024
CM_LARGE_ZEROED static _Atomic(cm_heap_t *) record_chunks[RECORD_CHUNKS];
static _Atomic uint32_t record_chunks_made;
static _Atomic uint64_t record_pool;  /* free records: {ref:32, tag:32} */
static _Atomic uint64_t record_fresh; /* the chunk being handed out: {index + 1:32, records used:32} */

static cm_heap_t *record_at(uint32_t ref) {
    cm_heap_t *chunk = atomic_load_explicit(&record_chunks[(ref - 1) / RECORDS_PER_CHUNK], memory_order_acquire);
    return &chunk[(ref - 1) % RECORDS_PER_CHUNK];
}

cm_heap_t *cm_heap_record(uint32_t ref) {
    if (ref == 0 || ref - 1 >= RECORD_CHUNKS * RECORDS_PER_CHUNK) return NULL;
    cm_heap_t *chunk = atomic_load_explicit(&record_chunks[(ref - 1) / RECORDS_PER_CHUNK], memory_order_acquire);
    return chunk ? &chunk[(ref - 1) % RECORDS_PER_CHUNK] : NULL;
}

/* Everything but the ref and the pool link: the plain fields with memset,
 * the ones stale remote frees may write with atomic stores. */
static void reset(cm_heap_t *h) {
    memset(h->bin_head, 0, offsetof(cm_heap_t, ref));
    h->thread = h->parked = h->large = h->large_count = h->next_of_thread = h->refills = h->trim_seen = 0;
    h->refilled = h->holding = 0;
    h->space = CM_SPACE_PLAIN;
    for (unsigned i = 0; i < CM_MAILBOX_SLOTS; i++) atomic_store_explicit(&h->mailbox[i], 0, memory_order_relaxed);
    atomic_store_explicit(&h->overflow, 0, memory_order_relaxed);
    atomic_store_explicit(&h->zombies, 0, memory_order_relaxed);
    atomic_store_explicit(&h->lasting, 0, memory_order_relaxed);
    atomic_store_explicit(&h->remote_batch, 0, memory_order_relaxed);
    h->remote_batch_desc = NULL;
    h->remote_batch_tail = NULL;
    h->remote_batch_max = 0;
}

void cm_heap_record_put(cm_heap_t *rec) {
    rec->thread = 0; /* a dead handle fails every owner test (cm_heap_check_owner): no thread has ref 0 */
    uint64_t old = atomic_load_explicit(&record_pool, memory_order_relaxed);
    do {
        atomic_store_explicit(&rec->pool_next, (uint32_t)old, memory_order_relaxed);
        /* release: the next owner sees the record as we left it */
    } while (!atomic_compare_exchange_weak_explicit(&record_pool, &old, ((old >> 32) + 1) << 32 | rec->ref,
                                                    memory_order_release, memory_order_relaxed));
}

static cm_heap_t *record_pop(void) {
    /* acquire: pairs with cm_heap_record_put's release */
    uint64_t old = atomic_load_explicit(&record_pool, memory_order_acquire);
    while ((uint32_t)old != 0) {
        cm_heap_t *rec = record_at((uint32_t)old);
        uint32_t next = atomic_load_explicit(&rec->pool_next, memory_order_relaxed);
        CM_TEST_POINT("heap records: head read");
        if (atomic_compare_exchange_weak_explicit(&record_pool, &old, ((old >> 32) + 1) << 32 | next,
                                                  memory_order_acquire, memory_order_acquire)) {
            reset(rec);
            return rec;
        }
    }
    return NULL;
}

/* A record never used: the next of the fresh chunk, or the first of a new
 * one. Racers to install a new chunk: the losers unmap theirs and leave
 * their table slot empty. The cursor's CAS is acq_rel: the winner's chunk
 * pointer (stored before it) is seen by whoever takes a record after it. */
static cm_heap_t *fresh_record(void) {
    uint64_t cur = atomic_load_explicit(&record_fresh, memory_order_acquire);
    for (;;) {
        uint32_t index_plus1 = (uint32_t)(cur >> 32), used = (uint32_t)cur;
        if (index_plus1 && used < RECORDS_PER_CHUNK) {
            if (!atomic_compare_exchange_weak_explicit(&record_fresh, &cur, cur + 1, memory_order_acq_rel,
                                                       memory_order_acquire))
                continue;
            uint32_t ref = (index_plus1 - 1) * RECORDS_PER_CHUNK + used + 1;
            cm_heap_t *rec = record_at(ref); /* fresh from the kernel: zero */
            rec->ref = ref;
            return rec;
        }
        /* relaxed ticket: the chunk's pointer is published through the cursor */
        uint32_t index = atomic_fetch_add_explicit(&record_chunks_made, 1, memory_order_relaxed);
        if (index >= RECORD_CHUNKS) return NULL;
        cm_heap_t *chunk = cm_os_map(RECORD_CHUNK);
        if (!chunk) return NULL;
        atomic_store_explicit(&record_chunks[index], chunk, memory_order_relaxed);
        if (atomic_compare_exchange_strong_explicit(&record_fresh, &cur, (uint64_t)(index + 1) << 32 | 1,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            chunk[0].ref = index * RECORDS_PER_CHUNK + 1;
            return &chunk[0];
        }
        atomic_store_explicit(&record_chunks[index], NULL, memory_order_relaxed);
        cm_os_unmap(chunk, RECORD_CHUNK);
    }
}

uint32_t cm_heap_record_limit(void) {
    uint32_t chunks = atomic_load_explicit(&record_chunks_made, memory_order_relaxed);
    return (chunks < RECORD_CHUNKS ? chunks : RECORD_CHUNKS) * RECORDS_PER_CHUNK + 1;
}

cm_heap_t *cm_heap_record_get(void) {
    cm_heap_t *rec = record_pop();
    if (!rec) rec = fresh_record();
    if (rec)
        for (unsigned c = 0; c <= CM_NUM_CLASSES; c++) rec->bin_head[c] = CM_LIST_END;
    return rec;
}
