/* heap_visit.c: cm_heap_visit, the walk over a heap's live blocks. The
 * heap first gathers every free block onto its superblocks' local lists
 * (remote frees included: a block another thread freed is on its
 * superblock's anchor list once that free has returned, or in that
 * thread's waiting batch, remote.c); a bitmap of the free blocks per
 * superblock then tells the live blocks from the free. Heaps no thread
 * frees into in batches (all but default heaps, remote.c) skip the part
 * about batches. */
#include <string.h>

#include "api.h"

typedef struct free_map {
    const cm_desc_t *d;
    uint32_t block_size;
    uint64_t bits[CM_MAX_BLOCKS / 64];
} free_map_t;

static void mark_free(free_map_t *m, const void *b) {
    size_t i = (size_t)((const char *)b - m->d->base) / m->block_size;
    if (i < CM_MAX_BLOCKS) m->bits[i / 64] |= (uint64_t)1 << (i % 64);
}

/* n blocks of a chain from head, linked as free lists are; its blocks stay
 * free while we look (only the owner, the caller, takes them), and links
 * within it do not change: a chain grows at its head, and only its last
 * block's link is ever rewritten. */
static void mark_chain(free_map_t *m, void *head, uint32_t n) {
    for (void *b = head; n && b; b = --n ? cm_block_next_if_valid(b) : NULL) mark_free(m, b);
}

#define SETTLE_TRIES 64 /* yields while a thread hands over a batch for our heap */

/* The batches waiting for h's superblocks when the visit begins, each with
 * its superblock, read once (each superblock then looks at these alone).
 * A batch handed over since is on its superblock's anchor or local list,
 * which the walk reads as well; frees that begin later are concurrent with
 * the visit, and their blocks may be reported either way. */
typedef struct batch {
    uint64_t word;
    const cm_desc_t *d;
} batch_t;

typedef struct batches {
    bool any;         /* a batch for the heap waited when the visit began */
    uint32_t count;
    batch_t *list;
    size_t map_bytes; /* of list, mapped for this visit */
} batches_t;

/* Before the gather: collect the batches for h, and start again (after a
 * yield, a bounded number of times) while one is being handed over. Such a
 * word may name blocks that reached the anchor list, then our bins, and
 * were allocated again before the word was cleared; a word that is not
 * being handed over names blocks still waiting, and so does any word a
 * thread writes from now on for our superblocks (we take and allocate
 * nothing until the walk ends). If some thread stays in the middle of its
 * hand-over (stopped, or starved), its batch is left out and its blocks
 * may be reported live; so are all batches if there is no memory for the
 * list. */
static void collect_batches(const cm_heap_t *h, batches_t *bt) {
    uint32_t limit = cm_heap_record_limit();
    for (unsigned tries = 0; tries < SETTLE_TRIES; tries++) {
        bool busy = false;
        bt->count = 0;
        for (uint32_t r = 1; r < limit; r++) {
            uint64_t b = cm_remote_batch_word(r);
            if (!b) continue;
            const cm_desc_t *d = cm_remote_batch_desc(b);
            if (atomic_load_explicit(&d->heap, memory_order_relaxed) != h->ref) continue;
            bt->any = true;
            if (b & CM_REMOTE_BATCH_FLUSHING) {
                busy = true;
                continue;
            }
            if (!bt->list) {
                bt->map_bytes = ((size_t)limit * sizeof(batch_t) + CM_PAGE_SIZE - 1) & ~(CM_PAGE_SIZE - 1);
                if (!(bt->list = cm_os_map(bt->map_bytes))) {
                    bt->map_bytes = 0;
                    return;
                }
            }
            bt->list[bt->count++] = (batch_t){b, d};
        }
        if (!busy) return;
        cm_os_yield();
    }
}

static void mark_batched(free_map_t *m, const batches_t *bt) {
    for (uint32_t i = 0; i < bt->count; i++)
        if (bt->list[i].d == m->d)
            mark_chain(m, cm_remote_batch_newest(bt->list[i].word), cm_remote_batch_count(bt->list[i].word));
}

/* A batch for d waiting at the start of the visit is now either still
 * waiting, or was handed over since and is on d's anchor list, or on its
 * local list if that happened before the gather: all three are read here,
 * without taking anything. */
static int visit_superblock(cm_desc_t *d, const batches_t *bt, cm_block_visitor fn, void *arg) {
    free_map_t m;
    m.d = d;
    m.block_size = cm_class_info[cm_desc_class(d)].block_size;
    memset(m.bits, 0, sizeof m.bits);
    if (bt->any) {
        mark_batched(&m, bt);
        /* acquire: the links of the remote frees it counts are visible */
        cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
        if (cm_anchor_count(a)) mark_chain(&m, cm_desc_block(d, cm_anchor_avail(a)), cm_anchor_count(a));
    }
    for (void *b = cm_list_head(d->local_free); b; b = cm_block_peek_next(b)) mark_free(&m, b);
    uint32_t carved = atomic_load_explicit(&d->carved, memory_order_relaxed);
    for (uint32_t i = 0; i < carved; i++) {
        if (m.bits[i / 64] >> (i % 64) & 1) continue;
        int r = fn(d->base + (size_t)i * m.block_size, m.block_size, arg);
        if (r) return r;
    }
    return 0;
}

static int visit_list(uint32_t r, const batches_t *bt, cm_block_visitor fn, void *arg) {
    for (; r; r = cm_desc_from_ref(r)->link) {
        int rc = visit_superblock(cm_desc_from_ref(r), bt, fn, arg);
        if (rc) return rc;
    }
    return 0;
}

static int visit_all(cm_heap_t *h, const batches_t *bt, cm_block_visitor fn, void *arg) {
    int rc;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++)
        if ((rc = visit_list(h->bins[c].avail, bt, fn, arg)) != 0) return rc;
    for (uint32_t r = h->large; r; r = cm_desc_from_ref(r)->link) {
        cm_desc_t *d = cm_desc_from_ref(r);
        if ((rc = fn(d->base, d->map_size, arg)) != 0) return rc;
    }
    return 0;
}

int cm_heap_visit(cm_heap_t *h, cm_block_visitor fn, void *arg) {
    cm_heap_check_owner(h, "cm_heap_visit");
    /* published by the claim of every superblock in the gather and the
     * unpark below (release CASes on their anchors, pool.c): from there on
     * no remote free hands one of them to the pool */
    atomic_store_explicit(&h->visiting, 1, memory_order_relaxed);
    batches_t bt = {0};
    collect_batches(h, &bt);
    cm_heap_gather(h);
    /* parked superblocks, which the free that brings their last block back
     * hands to the pool, join avail, where none can leave under the visit */
    cm_heap_unpark_all(h);
    int rc = visit_all(h, &bt, fn, arg);
    if (bt.map_bytes) cm_os_unmap(bt.list, bt.map_bytes);
    atomic_store_explicit(&h->visiting, 0, memory_order_relaxed);
    return rc;
}
