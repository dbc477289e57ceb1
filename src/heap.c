/* heap.c: heaps as objects. Each thread's default heap (made at its first
 * allocation, abandoned at its exit), the public cm_heap_* API, and the
 * owner rule: every call that touches a heap's private lists checks that
 * the calling thread owns the heap. The allocation paths are in
 * alloc_inline.h and heap_alloc.c. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "alloc_inline.h"
#include "api.h"

/* Until the thread starts, its key is one whose top bits make the list end
 * word decode to no link: its pops find every bin empty (cm_bin_pop). */
__thread cm_thread_t cm_thread __attribute__((tls_model("initial-exec"))) = {
    .heap = &cm_heap_unstarted, .cage = &cm_cage_unstarted, .free_key = CM_FREE_KEY(CM_NO_THREAD),
    .link_key = CM_LINK_INVALID, .link_invalid = CM_LINK_INVALID, .state = CM_THREAD_NEW};
/* Never allocated from: every bin empty, so a thread's first malloc (or
 * cage allocation) takes the slow path, which starts the thread (or makes
 * its cage heap). */
#define CM_EMPTY_BINS {[0 ... CM_NUM_CLASSES] = CM_LIST_END}
cm_heap_t cm_heap_unstarted = {.bin_head = CM_EMPTY_BINS},
          cm_cage_unstarted = {.bin_head = CM_EMPTY_BINS, .space = CM_SPACE_CAGE};
const uintptr_t cm_list_end = 0;
/* Bumped by malloc_trim: each heap collects itself at its next refill. */
_Atomic uint32_t cm_trim_epoch;

/* ------------------------------------------------------------ threads */

/* The key whose destructor abandons an exiting thread's heaps, plus one (0
 * = not created yet). Created by a CAS race whose losers delete their key. */
static _Atomic unsigned exit_key_plus1;

static void thread_exit(void *arg);

void cm_thread_global_init(void) {
    if (atomic_load_explicit(&exit_key_plus1, memory_order_acquire)) return;
    pthread_key_t key;
    if (pthread_key_create(&key, thread_exit) != 0) return; /* then heaps are not abandoned at exit */
    unsigned none = 0;
    if (!atomic_compare_exchange_strong_explicit(&exit_key_plus1, &none, (unsigned)key + 1,
                                                 memory_order_release, memory_order_relaxed))
        pthread_key_delete(key);
}

bool cm_thread_start(void) {
    cm_thread_t *t = &cm_thread;
    if (t->state != CM_THREAD_NEW) return false;
    cm_ensure_init();
    cm_heap_t *h = cm_heap_record_get();
    if (!h) return false;
    h->thread = h->ref;
    h->trim_seen = atomic_load_explicit(&cm_trim_epoch, memory_order_relaxed);
    atomic_store_explicit(&h->lasting, 1, memory_order_relaxed);
    t->heap = h;
    t->link_key = cm_link_key_get();
    t->free_key = CM_FREE_KEY(h->ref);
    t->state = CM_THREAD_ACTIVE;
    /* may allocate (glibc's second-level key array): we are ACTIVE already,
     * so that malloc is served normally and does not come back here */
    unsigned key = atomic_load_explicit(&exit_key_plus1, memory_order_acquire);
    if (key) pthread_setspecific((pthread_key_t)(key - 1), h);
    return true;
}

/* The thread's heaps, as a list from its default heap. */
static void thread_list_remove(cm_heap_t *def, cm_heap_t *h) {
    for (cm_heap_t *x = def; x; x = cm_heap_record(x->next_of_thread)) {
        if (x->next_of_thread == h->ref) {
            x->next_of_thread = h->next_of_thread;
            return;
        }
    }
}

/* pthread key destructor. Every heap of the thread is abandoned: its
 * superblocks go to the pool with their live blocks, for other threads to
 * reclaim. glibc frees per-thread state (the dlerror result, the strsignal
 * buffer, the resolver's) after every key destructor has run, and later
 * destructors may allocate: from now on the thread allocates from the pool
 * without a heap (DEAD), as a restarted heap would be left behind. */
static void thread_exit(void *arg) {
    cm_heap_t *def = arg;
    cm_remote_flush();
    cm_thread.heap = &cm_heap_unstarted;
    cm_thread.cage = &cm_cage_unstarted;
    cm_thread.state = CM_THREAD_DEAD;
    while (def->next_of_thread) {
        cm_heap_t *h = cm_heap_record(def->next_of_thread);
        def->next_of_thread = h->next_of_thread;
        cm_heap_abandon(h);
        cm_heap_record_put(h);
    }
    cm_heap_abandon(def);
    cm_thread.free_key = CM_FREE_KEY(CM_NO_THREAD); /* after: abandoning frees as the owner */
    cm_heap_record_put(def);
}

/* ------------------------------------------------------------ the owner rule */

static void check_not_default(const cm_heap_t *h, const char *func) {
    cm_heap_check_owner(h, func);
    if (cm_unlikely(atomic_load_explicit(&h->lasting, memory_order_relaxed)))
        cm_fatal(func, "a default heap cannot be deleted or destroyed", h);
}

/* ------------------------------------------------------------ API */

cm_heap_t *cm_heap_get_default(void) {
    if (cm_thread.state == CM_THREAD_NEW) cm_thread_start();
    if (cm_thread.state != CM_THREAD_ACTIVE) {
        errno = ENOMEM;
        return NULL;
    }
    return cm_thread.heap;
}

/* A new heap of `space` owned by the calling thread, on its list of heaps. */
static cm_heap_t *heap_new_in(unsigned space) {
    cm_heap_t *def = cm_heap_get_default();
    cm_heap_t *h = def && (space == CM_SPACE_PLAIN || cm_cage_ensure()) ? cm_heap_record_get() : NULL;
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    h->thread = def->thread;
    h->space = (uint8_t)space;
    h->trim_seen = atomic_load_explicit(&cm_trim_epoch, memory_order_relaxed);
    h->next_of_thread = def->next_of_thread;
    def->next_of_thread = h->ref;
    return h;
}

cm_heap_t *cm_heap_new(void) { return heap_new_in(CM_SPACE_PLAIN); }
cm_heap_t *cm_heap_new_in_cage(void) { return heap_new_in(CM_SPACE_CAGE); }

cm_heap_t *cm_thread_heap(unsigned space) {
    if (space == CM_SPACE_PLAIN) return cm_heap_get_default();
    if (cm_thread.cage->ref == 0) {
        cm_heap_t *h = heap_new_in(CM_SPACE_CAGE);
        if (!h) return NULL;
        atomic_store_explicit(&h->lasting, 1, memory_order_relaxed);
        cm_thread.cage = h;
    }
    return cm_thread.cage;
}

void *cm_heap_malloc(cm_heap_t *h, size_t size) {
    cm_heap_check_owner(h, "cm_heap_malloc");
    return cm_heap_malloc_inline(h, size);
}

void *cm_heap_calloc(cm_heap_t *h, size_t count, size_t size) {
    cm_heap_check_owner(h, "cm_heap_calloc");
    return cm_heap_calloc_inline(h, count, size);
}

void *cm_heap_aligned_alloc(cm_heap_t *h, size_t align, size_t size) {
    cm_heap_check_owner(h, "cm_heap_aligned_alloc");
    return cm_heap_aligned_alloc_in(h, align, size);
}

void *cm_heap_realloc(cm_heap_t *h, void *p, size_t size) {
    cm_heap_check_owner(h, "cm_heap_realloc");
    return cm_heap_realloc_in(h, p, size);
}

/* The blocks go to the default heap of h's space; if the thread cannot
 * have a default cage heap, they go to the pool as an exited thread's do. */
void cm_heap_delete(cm_heap_t *h) {
    check_not_default(h, "cm_heap_delete");
    cm_heap_t *to = cm_thread_heap(h->space);
    cm_heap_drain_mailbox(h);
    if (to) cm_heap_move_all(h, to);
    else cm_heap_abandon(h);
    thread_list_remove(cm_thread.heap, h);
    cm_heap_record_put(h);
}

/* Every superblock goes back whole: no block is looked at. */
void cm_heap_destroy(cm_heap_t *h) {
    check_not_default(h, "cm_heap_destroy");
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        cm_bin_t *bin = &h->bins[c];
        if (bin->current) cm_pool_discard(cm_bin_current(bin));
        for (uint32_t r = bin->avail, next; r; r = next) {
            next = cm_desc_from_ref(r)->link;
            cm_pool_discard(cm_desc_from_ref(r));
        }
    }
    for (uint32_t r = h->parked, next; r; r = next) {
        next = cm_desc_from_ref(r)->link;
        if (cm_pool_unpark(cm_desc_from_ref(r))) cm_pool_discard(cm_desc_from_ref(r)); /* else retired already */
    }
    for (uint32_t r = h->large, next; r; r = next) {
        cm_desc_t *d = cm_desc_from_ref(r);
        next = d->link;
        uint32_t expect = h->ref;
        /* decides who releases what (see large_leave); failing, d is a
         * zombie: acquire pairs with the remote freer's release CAS, so its
         * reads of d happen before we release d for reuse (the success
         * order may be no weaker than the failure's) */
        if (atomic_compare_exchange_strong_explicit(&d->heap, &expect, 0, memory_order_acquire, memory_order_acquire)) {
            cm_desc_set_owner(d, 0);
            cm_large_free(d);
        } else {
            cm_desc_release(d);
        }
    }
    thread_list_remove(cm_thread.heap, h);
    cm_heap_record_put(h);
}

void cm_heap_collect(cm_heap_t *h, int force) {
    cm_heap_check_owner(h, "cm_heap_collect");
    cm_remote_flush();
    cm_heap_collect_owned(h);
    if (force) {
        cm_pool_trim();
        cm_pool_purge_free_blocks();
        cm_arena_trim();
        cm_large_trim();
    }
}

int cm_heap_contains(const cm_heap_t *h, const void *p) {
    if (h == NULL || p == NULL) return 0;
    uint32_t entry = cm_pagemap_get((uintptr_t)p);
    unsigned cls = cm_entry_class(entry);
    if (cls == 0) return 0;
    cm_desc_t *d = cm_desc_from_ref(cm_entry_ref(entry));
    if (cls == CM_CLASS_LARGE && (const char *)p >= d->base + d->map_size) return 0;
    return atomic_load_explicit(&d->heap, memory_order_relaxed) == h->ref;
}
