/* thread_records.c: the pool of per-thread slow-path records (cm_tcache_cold_t:
 * bump pointers, remote lists, statistics per class), kept out of TLS so the
 * initial-exec TLS block stays small enough for dlopen. A thread takes one
 * when its cache starts and gives it back at exit. Lock-free: a stack of
 * free records, and a cursor that hands out the records of a new chunk. */
#include <string.h>

#include "internal.h"

/* Records live in chunks mapped on demand and never unmapped, named by a
 * 32-bit ref (index + 1; 0 is none), so the pool's head is {ref:32, tag:32}
 * in one CAS'ed word: a stale read of a record is harmless, and a 32-bit tag
 * defeats ABA (with 16 bits, a cm_cold_get preempted across 65,536 pool
 * operations could hand one record to two threads). Records never used are
 * never touched: a new chunk is handed out record by record through a
 * cursor. At most COLD_CHUNKS * RECORDS_PER_CHUNK
 * threads have a cache at once; a thread started beyond that, or without
 * memory for a record, runs without one (alloc_uncached). */
#define COLD_CHUNK ((size_t)1 << 20)
#define RECORDS_PER_CHUNK ((uint32_t)(COLD_CHUNK / sizeof(cm_tcache_cold_t)))
#define COLD_CHUNKS 1024
static _Atomic(cm_tcache_cold_t *) cold_chunks[COLD_CHUNKS];
static _Atomic uint32_t cold_chunks_made;
static _Atomic uint64_t cold_pool;  /* free records: {ref:32, tag:32} */
static _Atomic uint64_t cold_fresh; /* the chunk being handed out: {index + 1:32, records used:32} */

static cm_tcache_cold_t *cold_at(uint32_t ref) {
    cm_tcache_cold_t *chunk = atomic_load_explicit(&cold_chunks[(ref - 1) / RECORDS_PER_CHUNK], memory_order_acquire);
    return &chunk[(ref - 1) % RECORDS_PER_CHUNK];
}

void cm_cold_put(cm_tcache_cold_t *rec) {
    uint64_t old = atomic_load_explicit(&cold_pool, memory_order_relaxed);
    do {
        atomic_store_explicit(&rec->pool_next, (uint32_t)old, memory_order_relaxed);
        /* release: the next owner sees the record as we left it */
    } while (!atomic_compare_exchange_weak_explicit(&cold_pool, &old, ((old >> 32) + 1) << 32 | rec->ref,
                                                    memory_order_release, memory_order_relaxed));
}

static cm_tcache_cold_t *cold_pop(void) {
    /* acquire: pairs with cm_cold_put's release */
    uint64_t old = atomic_load_explicit(&cold_pool, memory_order_acquire);
    while ((uint32_t)old != 0) {
        cm_tcache_cold_t *rec = cold_at((uint32_t)old);
        uint32_t next = atomic_load_explicit(&rec->pool_next, memory_order_relaxed);
        CM_TEST_POINT("cold records: head read");
        if (atomic_compare_exchange_weak_explicit(&cold_pool, &old, ((old >> 32) + 1) << 32 | next,
                                                  memory_order_acquire, memory_order_acquire)) {
            memset(rec->c, 0, sizeof rec->c);
            return rec;
        }
    }
    return NULL;
}

/* A record never used: the next of the fresh chunk, or the first of a new
 * one. Racers to install a new chunk: the losers unmap theirs and leave
 * their table slot empty. The cursor's CAS is acq_rel: the winner's chunk
 * pointer (stored before it) is seen by whoever takes a record after it. */
static cm_tcache_cold_t *cold_fresh_record(void) {
    uint64_t cur = atomic_load_explicit(&cold_fresh, memory_order_acquire);
    for (;;) {
        uint32_t index_plus1 = (uint32_t)(cur >> 32), used = (uint32_t)cur;
        if (index_plus1 && used < RECORDS_PER_CHUNK) {
            if (!atomic_compare_exchange_weak_explicit(&cold_fresh, &cur, cur + 1, memory_order_acq_rel,
                                                       memory_order_acquire))
                continue;
            uint32_t ref = (index_plus1 - 1) * RECORDS_PER_CHUNK + used + 1;
            cm_tcache_cold_t *rec = cold_at(ref); /* fresh from the kernel: zero */
            rec->ref = ref;
            return rec;
        }
        /* relaxed ticket: the chunk's pointer is published through the cursor */
        uint32_t index = atomic_fetch_add_explicit(&cold_chunks_made, 1, memory_order_relaxed);
        if (index >= COLD_CHUNKS) return NULL;
        cm_tcache_cold_t *chunk = cm_os_map(COLD_CHUNK);
        if (!chunk) return NULL;
        atomic_store_explicit(&cold_chunks[index], chunk, memory_order_relaxed);
        if (atomic_compare_exchange_strong_explicit(&cold_fresh, &cur, (uint64_t)(index + 1) << 32 | 1,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            chunk[0].ref = index * RECORDS_PER_CHUNK + 1;
            return &chunk[0];
        }
        atomic_store_explicit(&cold_chunks[index], NULL, memory_order_relaxed);
        cm_os_unmap(chunk, COLD_CHUNK);
    }
}

cm_tcache_cold_t *cm_cold_get(void) {
    cm_tcache_cold_t *rec = cold_pop();
    return rec ? rec : cold_fresh_record();
}
