/* heap_alloc.c: a heap's slow paths. Refilling an empty bin (from its
 * current superblock's local and remote frees or uncarved rest, then from
 * the heap's other superblocks, then from the pool); the frees the fast path
 * leaves (a superblock's first local free, its last block, other threads'
 * frees); the mailbox through which remote frees hand parked superblocks
 * back to their heap; large blocks owned by heaps; and what a heap does to
 * all it holds when it is collected, moved or abandoned.
 *
 * A heap's lists and its superblocks' local lists and counts are touched by
 * its owner thread only: plain loads and stores. What other threads may
 * change (a superblock's anchor, a large block's heap word, a heap's mailbox)
 * is atomic, and each CAS says why its order is enough. */
#include <errno.h>
#include <string.h>

#include "alloc_inline.h"

static cm_desc_t *desc(uint32_t ref) { return cm_desc_from_ref(ref); }
static uint32_t ref_of(const cm_desc_t *d) { return cm_desc_ref(d); }
static uint32_t carved_of(const cm_desc_t *d) { return atomic_load_explicit(&d->carved, memory_order_relaxed); }

/* ------------------------------------------------------------ the heap's lists */

/* A heap's lists of descriptors (avail, parked, large) run forward through
 * link, 0 at the end, and back through prev; the first one's prev names the
 * last, so a superblock can join at either end in O(1). */
static void list_push(uint32_t *list, cm_desc_t *d, unsigned at) {
    uint32_t r = ref_of(d);
    d->at = (uint8_t)at;
    d->link = *list;
    if (*list) {
        cm_desc_t *first = desc(*list);
        d->prev = first->prev;
        first->prev = r;
    } else {
        d->prev = r;
    }
    *list = r;
}

static void list_append(uint32_t *list, cm_desc_t *d, unsigned at) {
    if (!*list) {
        list_push(list, d, at);
        return;
    }
    uint32_t r = ref_of(d);
    cm_desc_t *first = desc(*list);
    d->at = (uint8_t)at;
    d->link = 0;
    d->prev = first->prev;
    desc(first->prev)->link = r;
    first->prev = r;
}

static void list_unlink(uint32_t *list, cm_desc_t *d) {
    if (*list == ref_of(d)) {
        *list = d->link;
        if (d->link) desc(d->link)->prev = d->prev; /* d's prev is the last */
    } else {
        desc(d->prev)->link = d->link;
        if (d->link) desc(d->link)->prev = d->prev;
        else desc(*list)->prev = d->prev; /* d was the last */
    }
    d->at = CM_AT_NONE;
}

void cm_heap_check_owner(const cm_heap_t *h, const char *func) {
    if (cm_unlikely(h == NULL || h->thread != cm_my_ref()))
        cm_fatal(func, "heap used by a thread that does not own it (or not a live heap)", h);
}

/* Parked d comes off the parked list and back into h's hands (on no list
 * now): true. False if it was retired meanwhile, every block having come
 * back by remote frees while h stayed away: it is gone. */
static bool take_back_parked(cm_heap_t *h, cm_desc_t *d) {
    list_unlink(&h->parked, d); /* first: once dropped, d may be reused at once */
    if (!cm_pool_unpark(d)) return false;
    cm_desc_set_used(d, cm_desc_used(d) & ~CM_USED_PARKED);
    return true;
}

/* Parked d has a free block again: it joins the end of its class's avail
 * list (the superblocks ahead of it, freed into longer ago, have more free
 * blocks by now, and it gathers more until the class reaches it: refilling
 * from it at its first free block would take one block per refill). False
 * if it was gone (take_back_parked). */
static bool unpark(cm_heap_t *h, cm_desc_t *d) {
    if (!take_back_parked(h, d)) return false;
    list_append(&h->bins[cm_desc_class(d)].avail, d, CM_AT_AVAIL);
    return true;
}

void cm_heap_unpark_all(cm_heap_t *h) {
    while (h->parked) unpark(h, desc(h->parked));
}

/* ------------------------------------------------------------ a superblock's lists */

static uint32_t list_length(void *head, void **tail) {
    uint32_t n = 0;
    for (void *b = head; b; b = cm_block_peek_next(b)) *tail = b, n++;
    return n;
}

/* Blocks freed by other threads join d's local list (they were counted in
 * used until now). A parked superblock that had any goes back to avail (one
 * retired meanwhile is dropped). */
static void take_remote_into_local(cm_heap_t *h, cm_desc_t *d) {
    if (d->at == CM_AT_PARKED) {
        /* relaxed: a look, which unpark's CAS confirms */
        cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_relaxed);
        if (cm_anchor_state(a) == CM_OWNED_FULL && cm_anchor_count(a) == 0) return; /* none came back */
        if (!unpark(h, d)) return;
    }
    uint32_t n;
    void *chain = cm_pool_take_remote(d, &n);
    if (chain) {
        if (cm_list_head(d->local_free)) { /* else no walk: the chain becomes the list */
            void *tail = NULL;
            list_length(chain, &tail);
            cm_block_set_next(tail, d->local_free);
        }
        d->local_free = chain;
        cm_desc_set_used(d, cm_desc_used(d) - n);
    }
}

/* Bin cls stops allocating from its current superblock: the bin's blocks
 * go back to the superblock's local list, its used count is made exact, and
 * it joins the avail list. Only the bin is walked: the count knows the
 * local list's length (internal.h, cm_used_current). */
static void settle_current(cm_heap_t *h, unsigned cls) {
    cm_bin_t *bin = &h->bins[cls];
    cm_desc_t *d = cm_bin_current(bin);
    if (!d) return;
    void *bin_tail = NULL;
    uint32_t free_blocks =
        list_length(cm_list_head(h->bin_head[cls]), &bin_tail) + cm_current_local_len(cm_desc_used(d));
    if (bin_tail) {
        cm_block_set_next(bin_tail, d->local_free);
        d->local_free = h->bin_head[cls];
    }
    cm_desc_set_used(d, carved_of(d) - free_blocks);
    h->bin_head[cls] = CM_LIST_END;
    bin->current = 0;
    list_push(&bin->avail, d, CM_AT_AVAIL);
}

/* Hand d (on no list of h; not current, so its used count is exact) back
 * to the pool: its local list, the carved blocks not in use, joins its
 * anchor list; blocks never carved stay untouched. The list is walked only
 * if remote frees wait on the anchor (for the tail to link them to): a
 * thread's exit gives up every superblock it holds, and walking each list
 * there cost a cache miss per free block. */
static void give_up(cm_desc_t *d) {
    void *head = cm_list_head(d->local_free);
    uint32_t n = head ? carved_of(d) - cm_desc_used(d) : 0;
    d->local_free = CM_LIST_END;
    CM_TEST_POINT("give up: before the claim");
    /* claimed first: the release may walk the local list, and a remote free
     * that found every block free could hand the span on meanwhile */
    cm_desc_set_used(d, CM_USED_CURRENT);
    if (cm_pool_claim(d)) cm_pool_release(d, head, n);
    else cm_pool_drop(d);
}

/* d, on avail, has every block free: it stays at the front of avail for the
 * next refill of its class (no round trip through the pool when a class
 * empties and fills again), unless one such is kept there already. */
static void empty_on_avail(cm_heap_t *h, cm_desc_t *d) {
    uint32_t *avail = &h->bins[cm_desc_class(d)].avail;
    list_unlink(avail, d);
    if (*avail && cm_desc_used(desc(*avail)) == 0) {
        give_up(d);
        return;
    }
    list_push(avail, d, CM_AT_AVAIL);
}

/* ------------------------------------------------------------ mailbox */

void cm_heap_notify(uint32_t heap_ref, uint32_t desc_ref) {
    cm_heap_t *h = cm_heap_record(heap_ref);
    if (!h) return;
    for (unsigned i = 0; i < CM_MAILBOX_SLOTS; i++) {
        uint32_t none = 0;
        /* relaxed: the ref is a hint, validated by the owner against d's
         * anchor, which it reads with acquire when it takes the blocks */
        if (atomic_compare_exchange_strong_explicit(&h->mailbox[i], &none, desc_ref, memory_order_relaxed,
                                                    memory_order_relaxed))
            return;
    }
    atomic_store_explicit(&h->overflow, 1, memory_order_relaxed);
}

/* d, named by a mailbox (maybe stale: sent to an earlier heap of this
 * record, or about a superblock h has since given up), goes back to avail
 * if h still owns it parked.
 * d->heap equal to our ref can only be our own store: we own d, so its
 * private fields are ours to read. */
static void unpark_if_mine(cm_heap_t *h, cm_desc_t *d) {
    if (atomic_load_explicit(&d->heap, memory_order_relaxed) != h->ref || d->at != CM_AT_PARKED) return;
    take_remote_into_local(h, d);
    if (d->at == CM_AT_AVAIL && cm_desc_used(d) == 0) empty_on_avail(h, d);
}

void cm_heap_drain_mailbox(cm_heap_t *h) {
    for (unsigned i = 0; i < CM_MAILBOX_SLOTS; i++) {
        if (!atomic_load_explicit(&h->mailbox[i], memory_order_relaxed)) continue;
        uint32_t r = atomic_exchange_explicit(&h->mailbox[i], 0, memory_order_relaxed);
        if (r) unpark_if_mine(h, desc(r));
    }
    if (atomic_load_explicit(&h->overflow, memory_order_relaxed) &&
        atomic_exchange_explicit(&h->overflow, 0, memory_order_relaxed)) {
        for (uint32_t r = h->parked, next; r; r = next) {
            next = desc(r)->link;
            unpark_if_mine(h, desc(r));
        }
    }
}

/* ------------------------------------------------------------ refill */

/* Carve the next batch of d's untouched blocks onto the empty bin (head:
 * its bin_head slot). Carving lazily keeps untouched pages out of the
 * resident set. */
static uint32_t carve(void **bin_head, cm_desc_t *d, unsigned cls) {
    const cm_class_info_t *ci = &cm_class_info[cls];
    uint32_t carved = carved_of(d), n = ci->max_count - carved;
    if (n > ci->carve_batch) n = ci->carve_batch;
    char *first = d->base + (size_t)carved * ci->block_size;
    void *head = NULL;
    for (uint32_t i = n; i-- > 0;) {
        char *b = first + (size_t)i * ci->block_size;
        cm_block_set_next(b, head);
        head = b;
    }
    *bin_head = head;
    atomic_store_explicit(&d->carved, carved + n, memory_order_relaxed);
    return n;
}

/* A free block of class cls waits on h's first avail superblock: on its
 * local list, among its remote frees, or uncarved. (Relaxed: remote frees
 * only add to the anchor list, and only the owner takes from it.) */
static bool avail_front_has_free(cm_heap_t *h, unsigned cls) {
    uint32_t r = h->bins[cls].avail;
    if (!r) return false;
    cm_desc_t *d = desc(r);
    return cm_list_head(d->local_free) || carved_of(d) < cm_class_info[cls].max_count ||
           cm_anchor_count(atomic_load_explicit(&d->anchor, memory_order_relaxed)) != 0;
}

/* Freed blocks an avail superblock must hold for the bin to turn to it
 * rather than carve: a carve batch, and at least this many (blocks of 1
 * KiB carve 4 at a time, and turning for 4 made bench/ larson refill 21%
 * more often, 3% slower at one thread). */
#define TURN_MIN_BLOCKS 16

/* h's first avail superblock of class cls holds at least a carve batch of
 * blocks its owner freed, and TURN_MIN_BLOCKS (its used count is exact off
 * current: carved less used is its local list's length): the bin should
 * turn to it before it carves. */
static bool avail_front_worth_turning(cm_heap_t *h, unsigned cls) {
    uint32_t r = h->bins[cls].avail;
    if (!r) return false;
    cm_desc_t *d = desc(r);
    uint32_t batch = cm_class_info[cls].carve_batch;
    return carved_of(d) - cm_desc_used(d) >= (batch > TURN_MIN_BLOCKS ? batch : TURN_MIN_BLOCKS);
}

/* Current d's local list becomes the empty bin of its class cls. (One
 * load of the owner and count: this runs once per round of a thread's
 * local churn.) */
static inline void local_to_bin(cm_heap_t *h, cm_desc_t *d, unsigned cls) {
    h->bin_head[cls] = d->local_free;
    d->local_free = CM_LIST_END;
    uint64_t owner_used = cm_desc_owner_used(d);
    cm_desc_set_owner_used(d, (uint32_t)(owner_used >> 32),
                           cm_used_current(cm_current_local_len((uint32_t)owner_used), 0));
}

/* Fill the empty bin from its current superblock d: its local list, its
 * remote frees, its uncarved rest. False if the bin lets d go instead: to
 * the back of avail when d has no free block left and the front has one (a
 * program with live blocks spread over a few superblocks of a class cycles
 * through them, and parking each as it ran dry cost a CAS there and
 * another at its next free: one free in 30 to 40 on mimalloc-bench's
 * larson), or when d has only uncarved blocks left and the front holds
 * enough freed ones (avail_front_worth_turning; resident blocks before new
 * pages: carving first, a thread whose live blocks of a class rise and
 * fall over two superblocks carved both whole, glibc-simple's rounds
 * touched 2,048 blocks for 1,600 and alloc-test peaked 3-11% higher);
 * else parked (or, if remote frees raced in, the caller simply tries
 * again). */
static bool fill_from_current(cm_heap_t *h, cm_bin_t *bin, cm_desc_t *d, unsigned cls) {
    void **bin_head = &h->bin_head[cls];
    if (cm_list_head(d->local_free)) {
        local_to_bin(h, d, cls);
        return true;
    }
    uint32_t n;
    void *remote = cm_pool_take_remote(d, &n);
    if (remote) {
        *bin_head = remote;
        cm_desc_set_used(d, cm_used_current(n, 0));
        return true;
    }
    uint32_t carved = carved_of(d);
    bool uncarved = carved < cm_class_info[cls].max_count;
    if (uncarved && !(carved && avail_front_worth_turning(h, cls))) {
        cm_desc_set_used(d, cm_used_current(carve(bin_head, d, cls), 0));
        return true;
    }
    /* every carved block of d is out */
    if (uncarved || avail_front_has_free(h, cls)) {
        cm_desc_set_used(d, carved);
        bin->current = 0;
        list_append(&bin->avail, d, CM_AT_AVAIL);
        return false;
    }
    if (cm_pool_park(d)) {
        cm_desc_set_used(d, carved | CM_USED_PARKED); /* carved whole */
        bin->current = 0;
        list_push(&h->parked, d, CM_AT_PARKED);
    }
    return false;
}

/* d's count says current already (cm_used_current: set before the claim
 * that took it, which publishes it to remote frees). */
static void make_current(cm_bin_t *bin, cm_desc_t *d) {
    d->at = CM_AT_CURRENT;
    bin->current = ref_of(d);
}

/* A mailbox holds anything? (Relaxed: a hint; draining validates.) */
static bool mailbox_pending(cm_heap_t *h) {
    for (unsigned i = 0; i < CM_MAILBOX_SLOTS; i++)
        if (atomic_load_explicit(&h->mailbox[i], memory_order_relaxed)) return true;
    return atomic_load_explicit(&h->overflow, memory_order_relaxed) != 0;
}

/* Could current d have every block free? Its local list and what its bin
 * last received (a bound on what the bin still holds) must cover every
 * carved block; if not, settling it would walk its bin for nothing. */
static bool current_may_be_empty(const cm_desc_t *d) {
    uint32_t used = cm_desc_used(d);
    return cm_current_local_len(used) + cm_current_bin_fill(used) >= carved_of(d);
}

/* The classes whose bins did not refill since the last look give their
 * fully free superblocks back to the pool, where the classes in use take
 * them over: the current one (settled onto avail, if it may be free) and
 * the empty one avail keeps (empty_on_avail), so the first two on avail, no
 * more (a walk of a long avail list at every look would cost more than it
 * finds). A bin refills at least once per superblock's worth of mallocs, so
 * a class in use is never quiet for long. Without this, a program whose data
 * moves up through the classes (buffers grown by realloc) left two
 * superblocks of every class it passed in every thread's heap. */
static void release_quiet_classes(cm_heap_t *h) {
    uint64_t quiet = h->holding & ~h->refilled;
    h->holding |= h->refilled;
    h->refilled = 0;
    for (; quiet; quiet &= quiet - 1) {
        unsigned c = (unsigned)__builtin_ctzll(quiet);
        if (!h->bins[c].current && !h->bins[c].avail) {
            h->holding &= ~((uint64_t)1 << c);
            continue;
        }
        cm_desc_t *current = cm_bin_current(&h->bins[c]);
        if (current && current_may_be_empty(current)) settle_current(h, c);
        uint32_t r = h->bins[c].avail;
        for (int looked = 0; r && looked < 2; looked++) {
            cm_desc_t *d = desc(r);
            r = d->link;
            if (cm_desc_used(d) == 0) {
                list_unlink(&h->bins[c].avail, d);
                give_up(d);
            }
        }
    }
}

static CM_NOINLINE void *refill_slow(cm_heap_t *h, unsigned cls, bool zero) {
    if (cm_unlikely(h->ref == 0)) { /* an unstarted record: the thread's first block of its space */
        cm_heap_t *mine = cm_thread_heap(h->space);
        if (!mine) return cm_alloc_unowned(cls, zero, h->space);
        h = mine;
    }
    h->refilled |= (uint64_t)1 << cls;
    uint32_t epoch = atomic_load_explicit(&cm_trim_epoch, memory_order_relaxed);
    if (cm_unlikely(h->trim_seen != epoch)) { /* malloc_trim ran in another thread */
        h->trim_seen = epoch;
        cm_heap_collect_owned(h);
    }
    cm_bin_t *bin = &h->bins[cls];
    const cm_class_info_t *ci = &cm_class_info[cls];
    for (;;) {
        cm_desc_t *d = cm_bin_current(bin);
        if (d) {
            /* calloc from memory the OS gave us zeroed: no clearing */
            if (zero && !d->dirty && !cm_list_head(d->local_free) && carved_of(d) < ci->max_count &&
                cm_anchor_count(atomic_load_explicit(&d->anchor, memory_order_relaxed)) == 0) {
                uint32_t carved = carved_of(d);
                atomic_store_explicit(&d->carved, carved + 1, memory_order_relaxed);
                return d->base + (size_t)carved * ci->block_size;
            }
            if (fill_from_current(h, bin, d, cls)) break;
            continue;
        }
        if (!bin->avail && mailbox_pending(h)) cm_heap_drain_mailbox(h);
        if (bin->avail) {
            d = desc(bin->avail);
            list_unlink(&bin->avail, d);
            /* before the claim (cm_pool_claim); its exact count told
             * how many of its carved blocks wait on the local list */
            cm_desc_set_used(d, cm_used_current(0, carved_of(d) - cm_desc_used(d)));
            if (cm_pool_claim(d)) make_current(bin, d);
            else cm_pool_drop(d);
            continue;
        }
        if ((++h->refills & 7) == 0) release_quiet_classes(h);
        if ((h->refills & 63) == 0) cm_pool_decay();
        /* a heap its thread cannot destroy may take another heap's live blocks */
        bool reclaim = atomic_load_explicit(&h->lasting, memory_order_relaxed);
        d = cm_pool_acquire(cls, h->space, h->ref, h->thread, reclaim);
        if (!d) {
            errno = ENOMEM;
            return NULL;
        }
        make_current(bin, d);
    }
    void *b = cm_bin_pop(&h->bin_head[cls]);
    if (zero) memset(b, 0, ci->block_size);
    return b;
}

/* The common refill, kept out of refill_slow's frame (half the
 * instructions): the current superblock's local list becomes the bin. A
 * thread freeing what it allocates cycles its blocks between the two, one
 * refill per round of the carve batch (a page's worth). */
void *cm_heap_refill_alloc(cm_heap_t *h, unsigned cls, bool zero) {
    cm_desc_t *d = cm_bin_current(&h->bins[cls]);
    if (d && cm_list_head(d->local_free) && !zero && h->trim_seen == atomic_load_explicit(&cm_trim_epoch, memory_order_relaxed)) {
        local_to_bin(h, d, cls);
        h->refilled |= (uint64_t)1 << cls;
        return cm_bin_pop(&h->bin_head[cls]);
    }
    return refill_slow(h, cls, zero);
}

/* One block of class cls for a thread without a heap (past its exit hook,
 * or no record for it): take from the pool, keep one block, give the rest
 * straight back. */
void *cm_alloc_unowned(unsigned cls, bool zero, unsigned space) {
    cm_refill_t r;
    if (!cm_pool_take(cls, space, &r)) {
        errno = ENOMEM;
        return NULL;
    }
    uint32_t size = cm_class_info[cls].block_size;
    char *b = r.chain ? r.chain : r.fresh;
    void *head = NULL, *tail = NULL;
    uint32_t n = 0;
    if (r.chain) { /* d's anchor list: it ends in NULL, give_back finds the tail if needed */
        head = cm_block_peek_next(b);
        n = r.count - 1;
    } else {
        for (uint32_t i = r.fresh_count; i-- > 1;) {
            char *x = b + (size_t)i * size;
            cm_block_set_next(x, head);
            if (!tail) tail = x;
            head = x;
            n++;
        }
    }
    if (n) cm_pool_return_chain(cm_pool_desc_of(b), head, tail, n);
    cm_block_mark_used(b);
    if (zero && (r.chain || r.fresh_dirty)) memset(b, 0, size);
    return b;
}

/* ------------------------------------------------------------ free */

/* The free fast path stops here for a block of d that another thread owns
 * (or none), that looks free already, of a parked superblock, or that may
 * be d's last block out. */
void cm_free_small_slow(void *p, cm_desc_t *d) {
    if (cm_unlikely(cm_block_looks_free(p))) cm_free_suspect(p, d);
    /* only our own thread stores our ref as d's owner */
    if (cm_desc_owner(d) != cm_my_ref()) {
        cm_free_remote(p, d);
        return;
    }
    cm_heap_t *h = cm_heap_record(atomic_load_explicit(&d->heap, memory_order_relaxed));
    /* before p is touched: retired, d's every block had come back already */
    if (d->at == CM_AT_PARKED && !unpark(h, d)) cm_fatal("free", "double free", p);
    cm_block_set_next(p, d->local_free);
    d->local_free = p;
    uint32_t used = cm_desc_used(d) - 1; /* current: one more on the local list */
    cm_desc_set_used(d, used);
    if (used == 0) empty_on_avail(h, d); /* every carved block is on the local list */
}

/* ------------------------------------------------------------ large blocks */

/* Unlink the large blocks other threads freed (their mappings are gone). */
static void sweep_zombies(cm_heap_t *h) {
    for (uint32_t r = h->large, next; r; r = next) {
        cm_desc_t *d = desc(r);
        next = d->link;
        /* acquire: pairs with the zombie CAS, so the remote freer's reads of
         * d happen before we release it for reuse */
        if (atomic_load_explicit(&d->heap, memory_order_acquire) != CM_HEAP_ZOMBIE) continue;
        list_unlink(&h->large, d);
        h->large_count--;
        atomic_fetch_sub_explicit(&h->zombies, 1, memory_order_relaxed);
        cm_desc_release(d);
    }
}

void *cm_heap_large_alloc(cm_heap_t *h, size_t size, size_t align, bool zero) {
    if (h->ref == 0) { /* unstarted: the thread's heap of that space, if it can have one */
        cm_heap_t *mine = cm_thread_heap(h->space);
        if (mine) h = mine;
    }
    cm_desc_t *d = cm_large_alloc(size, align, zero, h->space);
    if (!d) {
        errno = ENOMEM;
        return NULL;
    }
    if (h->ref != 0) {
        if (atomic_load_explicit(&h->zombies, memory_order_relaxed) * 2 > h->large_count) sweep_zombies(h);
        atomic_store_explicit(&d->heap, h->ref, memory_order_relaxed);
        cm_desc_set_owner(d, h->thread);
        list_push(&h->large, d, CM_AT_LARGE);
        h->large_count++;
    }
    return d->base;
}

void cm_free_large(cm_desc_t *d) {
    if (cm_desc_owner(d) != cm_my_ref()) {
        cm_large_free_remote(d);
        return;
    }
    uint32_t href = atomic_load_explicit(&d->heap, memory_order_relaxed);
    if (href == CM_HEAP_ZOMBIE) cm_fatal("free", "double free", d->base);
    cm_heap_t *h = cm_heap_record(href);
    list_unlink(&h->large, d);
    h->large_count--;
    cm_desc_set_owner(d, 0);
    atomic_store_explicit(&d->heap, 0, memory_order_relaxed);
    cm_large_free(d);
}

/* The large block d leaves h: to heap `to`, or to no heap (to == NULL). A
 * remote free may have made it a zombie: then only its descriptor is left. */
static void large_leave(cm_heap_t *h, cm_desc_t *d, cm_heap_t *to) {
    list_unlink(&h->large, d);
    h->large_count--;
    if (!to) cm_desc_set_owner(d, 0);
    uint32_t expect = h->ref;
    /* release: once d has no heap, any thread may free the block and reuse
     * d; our writes to it (above) happen before that (the freer's load of
     * d->heap is an acquire). Failing, d is a zombie: acquire pairs with the
     * remote freer's release CAS, so its reads of d happen before we
     * release d for reuse (hence acq_rel on success: no weaker than that). */
    if (!atomic_compare_exchange_strong_explicit(&d->heap, &expect, to ? to->ref : 0, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        atomic_fetch_sub_explicit(&h->zombies, 1, memory_order_relaxed);
        cm_desc_release(d);
        return;
    }
    if (to) {
        list_push(&to->large, d, CM_AT_LARGE);
        to->large_count++;
    }
}

/* ------------------------------------------------------------ a heap as a whole */

void cm_heap_gather(cm_heap_t *h) {
    cm_heap_drain_mailbox(h);
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        settle_current(h, c);
        for (uint32_t r = h->bins[c].avail, next; r; r = next) {
            cm_desc_t *d = desc(r);
            next = d->link;
            if (cm_pool_claim(d)) {
                take_remote_into_local(h, d);
            } else { /* a remote free handed it to the pool */
                list_unlink(&h->bins[c].avail, d);
                cm_pool_drop(d);
            }
        }
    }
    for (uint32_t r = h->parked, next; r; r = next) {
        next = desc(r)->link;
        take_remote_into_local(h, desc(r));
    }
    sweep_zombies(h);
}

/* d's free blocks (its local list) give back their pages: half the blocks
 * of 32 KiB freed held 32 MiB of 64 until their superblocks emptied. */
static void purge_free_blocks(cm_desc_t *d, size_t block_size) {
    for (void *b = cm_list_head(d->local_free); b; b = cm_block_peek_next(b)) cm_free_block_purge(b, block_size);
}

/* Gathered, every superblock with all its blocks free is on avail: back to
 * the pool; the others give back the pages inside their free blocks. The
 * visiting flag keeps remote frees from handing an avail superblock to the
 * pool while its list is walked, as for cm_heap_visit (published by the
 * gather's claims). */
void cm_heap_collect_owned(cm_heap_t *h) {
    uint8_t visiting = atomic_load_explicit(&h->visiting, memory_order_relaxed);
    atomic_store_explicit(&h->visiting, 1, memory_order_relaxed);
    cm_heap_gather(h);
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        size_t block_size = cm_class_info[c].block_size;
        for (uint32_t r = h->bins[c].avail, next; r; r = next) {
            cm_desc_t *d = desc(r);
            next = d->link;
            if (cm_desc_used(d) == 0) {
                list_unlink(&h->bins[c].avail, d);
                give_up(d);
            } else if (block_size > CM_PAGE_SIZE) {
                purge_free_blocks(d, block_size);
            }
        }
    }
    atomic_store_explicit(&h->visiting, visiting, memory_order_relaxed);
}

void cm_heap_abandon(cm_heap_t *h) {
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        settle_current(h, c);
        while (h->bins[c].avail) {
            cm_desc_t *d = desc(h->bins[c].avail);
            list_unlink(&h->bins[c].avail, d);
            give_up(d);
        }
    }
    while (h->parked) {
        cm_desc_t *d = desc(h->parked);
        if (take_back_parked(h, d)) give_up(d);
    }
    while (h->large) large_leave(h, desc(h->large), NULL);
}

void cm_heap_move_all(cm_heap_t *h, cm_heap_t *to) {
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        settle_current(h, c);
        while (h->bins[c].avail) {
            cm_desc_t *d = desc(h->bins[c].avail);
            list_unlink(&h->bins[c].avail, d);
            atomic_store_explicit(&d->heap, to->ref, memory_order_relaxed);
            list_push(&to->bins[c].avail, d, CM_AT_AVAIL);
        }
    }
    /* parked ones join avail: a notification sent to h meanwhile is lost,
     * and the next refill of their class looks at them anyway */
    while (h->parked) {
        cm_desc_t *d = desc(h->parked);
        if (!take_back_parked(h, d)) continue;
        atomic_store_explicit(&d->heap, to->ref, memory_order_relaxed);
        list_push(&to->bins[cm_desc_class(d)].avail, d, CM_AT_AVAIL);
    }
    while (h->large) large_leave(h, desc(h->large), to);
}
