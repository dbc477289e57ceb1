/* tcache.c: the thread caches' slow paths: first use by a thread, refilling
 * an empty bin, flushing a full one in batches, and returning everything when
 * the thread exits. The fast paths (pop and push) are in alloc_inline.h.
 *
 * Nothing here waits for another thread: refills and flushes are lock-free
 * pool operations, and a thread that dies or is frozen forever loses at most
 * the blocks in its own cache. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

__thread cm_tcache_t cm_tcache __attribute__((tls_model("initial-exec")));

#define FIRST_LIMIT 16   /* a new thread's bins start small and grow on use */
#define FLUSH_GROUPS 16  /* superblocks one flush pass gathers before returning */

/* ------------------------------------------------------------ statistics */

/* Move a bin's counts to the global counters. Between two publications,
 * count changes by (blocks moved in) - (moved out) + frees - allocs, so the
 * frees are derived and the free fast path counts nothing (a remote free
 * lowers net_in instead, as it never enters the bin). */
static void publish_bin(cm_tcache_t *tc, unsigned cls) {
    cm_bin_t *bin = &tc->bins[cls];
    int64_t frees = (int64_t)bin->count - tc->cold->c[cls].net_in + (int64_t)bin->allocs;
    atomic_fetch_add_explicit(&cm_counters.allocs[cls], bin->allocs, memory_order_relaxed);
    atomic_fetch_add_explicit(&cm_counters.frees[cls], (uint64_t)frees, memory_order_relaxed);
    bin->allocs = 0;
    tc->cold->c[cls].net_in = bin->count;
}

void cm_stats_publish_thread(void) {
    cm_tcache_t *tc = &cm_tcache;
    if (tc->state != CM_TC_ACTIVE) return;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) publish_bin(tc, c);
}

/* ------------------------------------------------------------ thread start and exit */

/* The key whose destructor flushes an exiting thread's cache, plus one (0 =
 * not created yet). Created by a CAS race whose losers delete their key. */
static _Atomic unsigned exit_key_plus1;

static void thread_exit(void *arg);

void cm_tcache_global_init(void) {
    if (atomic_load_explicit(&exit_key_plus1, memory_order_acquire)) return;
    pthread_key_t key;
    if (pthread_key_create(&key, thread_exit) != 0) return; /* then caches are not flushed at exit */
    unsigned none = 0;
    if (!atomic_compare_exchange_strong_explicit(&exit_key_plus1, &none, (unsigned)key + 1,
                                                 memory_order_release, memory_order_relaxed))
        pthread_key_delete(key);
}

/* Threads are numbered 1..31 round robin; two threads may share a tag,
 * which only makes some of their frees look local to each other. */
static _Atomic uint32_t thread_seq;

/* Start the calling thread's cache; false (cache still UNINIT) if there is
 * no record for its slow-path state. */
static bool thread_start(cm_tcache_t *tc) {
    cm_ensure_init();
    if (!(tc->cold = cm_cold_get())) return false;
    tc->tag = 1 + atomic_fetch_add_explicit(&thread_seq, 1, memory_order_relaxed) % ((1u << CM_ENTRY_OWNER_BITS) - 1);
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        uint32_t max = cm_class_info[c].cache_max;
        tc->bins[c].limit = max < FIRST_LIMIT ? max : FIRST_LIMIT;
    }
    tc->state = CM_TC_ACTIVE;
    /* may allocate (glibc's second-level key array): we are ACTIVE already,
     * so that malloc is served normally and does not come back here */
    unsigned key = atomic_load_explicit(&exit_key_plus1, memory_order_acquire);
    if (key) pthread_setspecific((pthread_key_t)(key - 1), tc);
    return true;
}

static void flush_blocks(cm_tcache_t *tc, unsigned cls, uint32_t n);
static void flush_remote(cm_tcache_t *tc, unsigned cls);

/* The uncarved blocks [p, end) of a fresh superblock of class cls go back
 * to it as one chain. */
static void return_uncarved(unsigned cls, char *p, char *end) {
    if (p >= end) return;
    uint32_t size = cm_class_info[cls].block_size, n = 0;
    for (char *b = p; b < end; b += size, n++) cm_block_set_next(b, b + size < end ? b + size : NULL);
    cm_pool_return_chain(cm_pool_desc_of(p), p, end - size, n);
}

/* Return everything tc holds: cached blocks, remote lists and the uncarved
 * rest of its fresh superblocks. At thread exit the cache then goes DEAD
 * for good: it gives its record back and never starts again. */
static void flush_everything(cm_tcache_t *tc, bool exiting) {
    if (tc->state != CM_TC_ACTIVE) return;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        publish_bin(tc, c);
        flush_blocks(tc, c, tc->bins[c].count);
        flush_remote(tc, c);
        return_uncarved(c, tc->cold->c[c].bump, tc->cold->c[c].bump_end);
        tc->cold->c[c].bump = tc->cold->c[c].bump_end = NULL;
        if (exiting) tc->bins[c].limit = 0;
        publish_bin(tc, c);
    }
    if (exiting) {
        tc->state = CM_TC_DEAD;
        cm_cold_put(tc->cold);
        tc->cold = NULL;
    }
}

/* pthread key destructor. glibc frees per-thread state (the dlerror result,
 * the strsignal buffer, the resolver's) after every key destructor has run,
 * and later destructors may allocate: from now on the thread allocates and
 * frees straight from the pool (DEAD), as a restarted cache would be left
 * behind with its record when the thread is gone. */
static void thread_exit(void *arg) { flush_everything(arg, true); }

/* The thread's cache can be used, starting it on first use. False for a
 * DEAD thread, or one that could not get a record. */
static bool cache_ready(cm_tcache_t *tc) {
    return cm_likely(tc->state == CM_TC_ACTIVE) || (tc->state == CM_TC_UNINIT && thread_start(tc));
}

void cm_tcache_flush_all(void) { flush_everything(&cm_tcache, false); }

/* ------------------------------------------------------------ refill */

/* Carve up to a batch of blocks (no more than the bin holds) from the bin's
 * fresh superblock onto its empty list. Carving lazily keeps untouched pages
 * out of the resident set. */
static void carve(cm_tcache_t *tc, unsigned cls) {
    const cm_class_info_t *ci = &cm_class_info[cls];
    cm_bin_t *bin = &tc->bins[cls];
    char *p = tc->cold->c[cls].bump;
    size_t left = (size_t)(tc->cold->c[cls].bump_end - p) / ci->block_size;
    uint32_t n = ci->carve_batch < bin->limit ? ci->carve_batch : bin->limit;
    if (left < n) n = (uint32_t)left;
    void *head = bin->head;
    for (uint32_t i = n; i-- > 0;) {
        char *b = p + (size_t)i * ci->block_size;
        cm_block_set_next(b, head);
        head = b;
    }
    bin->head = head;
    bin->count += n;
    tc->cold->c[cls].net_in += n;
    tc->cold->c[cls].bump = p + (size_t)n * ci->block_size;
}

static void *return_list(unsigned cls, void *head, uint32_t n, bool rest_follows);

/* Put a superblock's free list, just taken whole, on the empty bin cls: at
 * most cache_max blocks (the rest goes straight back), and the bin's limit
 * rises to hold them, so the next free does not flush them out again. */
static void take_chain(cm_tcache_t *tc, unsigned cls, void *chain, uint32_t count) {
    cm_bin_t *bin = &tc->bins[cls];
    uint32_t max = cm_class_info[cls].cache_max;
    if (count > max) {
        void *last = chain;
        for (uint32_t i = 1; i < max; i++) last = cm_block_peek_next(last);
        void *rest = cm_block_peek_next(last);
        cm_block_set_next(last, NULL);
        return_list(cls, rest, count - max, false);
        count = max;
    }
    bin->head = chain;
    bin->count = count;
    tc->cold->c[cls].net_in += count;
    if (bin->limit <= count) bin->limit = count < max ? count + 1 : max;
}

/* One block of class cls without a cache (a thread past its exit hook, or
 * without a record): refill, keep one block, give the rest straight back. */
static void *alloc_uncached(unsigned cls, bool zero) {
    cm_refill_t r;
    if (!cm_pool_refill(cls, 0, &r)) {
        errno = ENOMEM;
        return NULL;
    }
    uint32_t size = cm_class_info[cls].block_size;
    char *b = r.chain ? r.chain : r.fresh;
    if (r.chain && r.count > 1) return_list(cls, cm_block_peek_next(b), r.count - 1, false);
    if (!r.chain) return_uncarved(cls, b + size, b + (size_t)cm_class_info[cls].max_count * size);
    cm_block_mark_used(b);
    if (zero && (r.chain || r.fresh_dirty)) memset(b, 0, size);
    return b;
}

/* malloc found bin `cls` empty. Returns a block (zeroed if `zero`) or NULL
 * with errno ENOMEM. A zeroing request is served straight from a fresh
 * superblock when there is one, whose memory the OS gave us zeroed. */
void *cm_tcache_refill_alloc(unsigned cls, bool zero) {
    cm_tcache_t *tc = &cm_tcache;
    if (!cache_ready(tc)) return alloc_uncached(cls, zero);
    cm_bin_t *bin = &tc->bins[cls];
    uint32_t size = cm_class_info[cls].block_size;
    if (!bin->head) {
        if (tc->cold->c[cls].bump >= tc->cold->c[cls].bump_end) {
            cm_refill_t r;
            publish_bin(tc, cls);
            if ((++tc->refills & 63) == 0) cm_pool_decay();
            if (!cm_pool_refill(cls, tc->tag, &r)) {
                errno = ENOMEM;
                return NULL;
            }
            if (r.chain) {
                take_chain(tc, cls, r.chain, r.count);
            } else {
                tc->cold->c[cls].bump = r.fresh;
                tc->cold->c[cls].bump_dirty = r.fresh_dirty;
                tc->cold->c[cls].bump_end = r.fresh + (size_t)cm_class_info[cls].max_count * size;
            }
        }
        if (!bin->head) {
            if (zero && !tc->cold->c[cls].bump_dirty) {
                char *b = tc->cold->c[cls].bump;
                tc->cold->c[cls].bump = b + size;
                bin->allocs++;
                return b;
            }
            carve(tc, cls);
        }
    }
    void *b = cm_bin_pop(bin);
    if (zero) memset(b, 0, size);
    return b;
}

/* ------------------------------------------------------------ flush */

typedef struct flush_group {
    cm_desc_t *desc;
    void *head, *tail;
    uint32_t n;
} flush_group_t;

typedef struct flush_groups {
    flush_group_t g[FLUSH_GROUPS];
    unsigned n;
} flush_groups_t;

static void return_groups(flush_groups_t *gs) {
    for (unsigned i = 0; i < gs->n; i++)
        cm_pool_return_chain(gs->g[i].desc, gs->g[i].head, gs->g[i].tail, gs->g[i].n);
    gs->n = 0;
}

/* Add a run of n linked blocks of one superblock to its group: runs of the
 * same superblock are spliced (one link rewritten per run, not per block). */
static void add_run(flush_groups_t *gs, void *head, void *tail, uint32_t n) {
    cm_desc_t *d = cm_pool_desc_of(head);
    for (unsigned i = 0; i < gs->n; i++) {
        flush_group_t *g = &gs->g[i];
        if (g->desc == d) {
            cm_block_set_next(tail, g->head);
            g->head = head;
            g->n += n;
            return;
        }
    }
    if (gs->n == FLUSH_GROUPS) return_groups(gs);
    gs->g[gs->n++] = (flush_group_t){d, head, tail, n};
}

/* Return the first n blocks of a list of class cls to their superblocks:
 * one CAS per superblock however many blocks go back to it. The list is cut
 * into runs of consecutive blocks of one superblock (same class, so same
 * span size: one mask compares two addresses), which stay linked as they
 * are. Returns the rest of the list. Compiled once hardened and once not,
 * so neither walk tests the setting per block. */
CM_INLINE void *return_list_as(unsigned cls, void *head, uint32_t n, bool rest_follows, bool harden) {
    /* next continues the run if it lies in the run's span on 16 bytes: then
     * it passes cm_link_verify_as by construction (an address in a span, with
     * its low 4 bits clear), so only a link leaving the span is verified */
    uintptr_t leaves_run = ~(uintptr_t)cm_class_info[cls].span_mask | 15;
    flush_groups_t gs;
    gs.n = 0; /* only the first n groups are ever read: no 0.5 KiB clear per flush */
    void *run_head = head, *run_tail = head;
    uint32_t run_n = 1;
    for (uint32_t i = 1; i < n; i++) {
        void *next = cm_block_next_unverified_as(run_tail, harden);
        if ((((uintptr_t)next ^ (uintptr_t)run_tail) & leaves_run) == 0) {
            run_tail = next;
            run_n++;
            continue;
        }
        cm_link_verify_as(run_tail, next, "free", harden);
        add_run(&gs, run_head, run_tail, run_n);
        run_head = run_tail = next;
        run_n = 1;
    }
    void *rest = rest_follows ? cm_block_peek_next(run_tail) : NULL;
    add_run(&gs, run_head, run_tail, run_n);
    return_groups(&gs);
    return rest;
}
static void *return_list(unsigned cls, void *head, uint32_t n, bool rest_follows) {
    return cm_harden ? return_list_as(cls, head, n, rest_follows, true) : return_list_as(cls, head, n, rest_follows, false);
}

/* Return the n most recently freed blocks of bin cls (its list's head). */
static void flush_blocks(cm_tcache_t *tc, unsigned cls, uint32_t n) {
    cm_bin_t *bin = &tc->bins[cls];
    if (n == 0) return;
    bin->head = return_list(cls, bin->head, n, n < bin->count);
    bin->count -= n;
    tc->cold->c[cls].net_in -= n;
}

static void flush_remote(cm_tcache_t *tc, unsigned cls) {
    if (tc->cold->c[cls].remote_count == 0) return;
    return_list(cls, tc->cold->c[cls].remote, tc->cold->c[cls].remote_count, false);
    tc->cold->c[cls].remote = NULL;
    tc->cold->c[cls].remote_count = 0;
}

/* free of a block whose superblock another thread took last. Reusing it here
 * would put this thread's next block beside that thread's blocks, on shared
 * cache lines (passive false sharing); so it waits on a remote list that goes
 * back in batches, like any flush. */
void cm_tcache_free_remote(void *p, unsigned cls) {
    cm_tcache_t *tc = &cm_tcache;
    cm_block_set_next(p, tc->cold->c[cls].remote);
    tc->cold->c[cls].remote = p;
    tc->cold->c[cls].net_in--; /* counted as a free (see publish_bin) */
    if (++tc->cold->c[cls].remote_count >= cm_class_info[cls].cache_max / 2u) flush_remote(tc, cls);
}

/* free found bin `cls` at its limit (or the thread not started): push p,
 * flush half the bin, and let the bin grow toward its class maximum, so a
 * thread that frees a lot flushes rarely while an idle thread holds little. */
void cm_tcache_flush_free(void *p, unsigned cls) {
    cm_tcache_t *tc = &cm_tcache;
    if (!cache_ready(tc)) {
        cm_pool_return_chain(cm_pool_desc_of(p), p, p, 1); /* no cache: straight back */
        return;
    }
    cm_bin_t *bin = &tc->bins[cls];
    cm_block_set_next(p, bin->head);
    bin->head = p;
    bin->count++;
    if (bin->count < bin->limit) return;
    publish_bin(tc, cls);
    flush_blocks(tc, cls, bin->count - bin->limit / 2);
    uint32_t max = cm_class_info[cls].cache_max;
    bin->limit = bin->limit * 2 < max ? bin->limit * 2 : max;
}
