/* pool.c: the lock-free pool of superblocks no heap owns, and every change
 * of a superblock's anchor: a heap acquiring one, parking it, taking its
 * remote frees, releasing it; remote frees; retiring and decay.
 *
 * Per space and size class, lock-free stacks of PARTIAL superblocks. A superblock's
 * span comes from the arena (arena.c) when it is made and goes back there
 * when it retires, for a superblock of any size to reuse; its descriptor
 * then goes back to the descriptor pool, at once or, if it still sits on a
 * partial stack, when a taker pops it. See internal.h for the states. */
#include <errno.h>

#include "internal.h"

/* Partial superblocks are sharded by the thread that gave them back: a heap
 * takes from its thread's shard first (its partial and its kept ones) and
 * from the others only when it is empty, so two threads working the same
 * class do not keep taking each other's superblocks, nor each other's
 * freshly written memory (cm_pool_acquire). Nothing is private: any thread
 * may take any shard. */
#define PARTIAL_SHARDS 4
#define DECAY_SCAN 4096 /* descriptors one decay pass looks at: bounded work inside a malloc */
/* Indexed shard before class: the stacks a thread pushes on, its shard's,
 * lie together (by class, with the shards interleaved, espresso's and
 * glibc-thread's bss held a page more: 44 -> 40 KiB), and the line beside
 * each stack, which the adjacent-line prefetcher pairs with it, is another
 * class of the same shard, not another thread's shard of the same class. */
CM_LARGE_ZEROED static cm_desc_stack_t partial[CM_SPACES][PARTIAL_SHARDS][CM_NUM_CLASSES + 1];
/* All relaxed: budgets, counts and timestamps that only steer policy (keep
 * or retire, scan or not, where to look); no memory is published through them. */
static _Atomic size_t empty_kept_bytes;                 /* fully free superblocks kept committed */
static _Atomic int32_t kept_in_class[CM_SPACES][CM_NUM_CLASSES + 1]; /* of which per class: where take-over looks */
static _Atomic uint64_t last_decay_ns;                  /* when cm_pool_decay last scanned */
static _Atomic uint32_t decay_cursor;                   /* where the next decay pass starts */

static size_t span_size(const cm_desc_t *d) { return (size_t)1 << d->span_shift; }

/* Anchor a, of a superblock of class cls: parked, and every block came back
 * by remote frees (a parked superblock has all its blocks carved). */
static bool parked_all_back(cm_anchor_t a, unsigned cls) {
    return cm_anchor_state(a) == CM_OWNED_FULL && cm_anchor_count(a) == cm_class_info[cls].max_count;
}

/* Blocks carved so far. A superblock no heap owns keeps the count its last
 * owner left (the rest of its span was never touched, and stays so), so
 * "every block free" is count == carved. Unowned, it is read after an
 * acquire of the anchor, which the last owner's release wrote. */
static uint32_t carved_of(const cm_desc_t *d) { return atomic_load_explicit(&d->carved, memory_order_relaxed); }
static unsigned shard_of(uint32_t thread) { return thread % PARTIAL_SHARDS; }
/* Shards looked at, counted from a thread's own: the own one is 0. */
typedef struct shard_range {
    unsigned from, count;
} shard_range_t;
#define ALL_SHARDS ((shard_range_t){0, PARTIAL_SHARDS})
#define OWN_SHARD ((shard_range_t){0, 1})
#define OTHER_SHARDS ((shard_range_t){1, PARTIAL_SHARDS - 1})
/* The partial stack d goes on when given back by thread `thread`. */
static cm_desc_stack_t *stack_for(const cm_desc_t *d, uint32_t thread) {
    return &partial[cm_space_of(d->base)][shard_of(thread)][cm_desc_class(d)];
}

/* ------------------------------------------------------------ new superblocks */

/* Make d (the caller's alone, on no list) a superblock of class cls in
 * anchor state `state` with no block carved. Relaxed stores: they are
 * published by the release that later puts d on a stack or gives one of
 * its blocks out through the user's own synchronisation. */
static void assign_class(cm_desc_t *d, unsigned cls, unsigned state) {
    atomic_store_explicit(&d->size_class, (uint8_t)cls, memory_order_relaxed);
    atomic_store_explicit(&d->anchor, cm_anchor_next(atomic_load_explicit(&d->anchor, memory_order_relaxed), state, 0, 0),
                          memory_order_relaxed);
    atomic_store_explicit(&d->carved, 0, memory_order_relaxed);
    cm_pagemap_set((uintptr_t)d->base, span_size(d), cm_entry_make(cm_desc_ref(d), cls));
    cm_count(&cm_counters.superblocks_live, 1);
    atomic_fetch_add_explicit(&cm_counters.sb_live[cls], 1, memory_order_relaxed);
}

/* d, a descriptor from the pool, describes the span at base, made a
 * superblock of class cls. */
static cm_desc_t *with_span(cm_desc_t *d, char *base, unsigned cls, unsigned state, bool dirty) {
    d->base = base;
    d->span_shift = (uint8_t)cm_class_info[cls].span_shift;
    assign_class(d, cls, state);
    if (!dirty) cm_large_give_way(span_size(d));
    return d;
}

/* A descriptor from the pool and a span of `space` from the arena; NULL
 * when either runs out (the OS refuses memory, the cage is full, or the
 * descriptor cap is reached). *dirty: its pages may hold old data. */
static cm_desc_t *new_superblock(unsigned cls, unsigned state, unsigned space, bool *dirty) {
    cm_desc_t *d = cm_desc_alloc();
    if (!d) return NULL;
    char *base = cm_arena_claim(cm_class_info[cls].span_shift, space, dirty);
    if (!base) {
        cm_desc_release(d);
        return NULL;
    }
    return with_span(d, base, cls, state, *dirty);
}

/* ------------------------------------------------------------ retiring */

/* d, RETIRING, names no span any more (the page map no longer leads to it).
 * If it still sits on a list (its partial stack, or its heap's parked
 * list), it stays there as EMPTY and the thread that takes it off releases
 * it (drop_retired); if that thread did so meanwhile and left it DETACHED,
 * or it was on no list, it is released here. */
static void let_go(cm_desc_t *d, bool listed) {
    cm_anchor_t expect = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    /* release: our reads of d happen before the popper that finds EMPTY
     * (an acquire load) releases d for another owner to rewrite. */
    if (listed && cm_anchor_state(expect) == CM_RETIRING &&
        atomic_compare_exchange_strong_explicit(&d->anchor, &expect, cm_anchor_next(expect, CM_EMPTY, 0, 0),
                                                memory_order_release, memory_order_relaxed))
        return;
    /* on no list, or DETACHED: nobody else references d any more */
    cm_desc_release(d);
}

/* The caller moved d's anchor to RETIRING, so it alone owns the superblock's
 * memory: every block is free and no CAS can take them (only PARTIAL
 * superblocks give out blocks, only their owner takes OWNED ones). Return
 * the memory (unless keep_pages: then the span's units go back to the arena
 * resident, for a span of any size to reuse) and the span, then let the
 * descriptor go. */
static void retire(cm_desc_t *d, bool listed, bool keep_pages) {
    unsigned cls = atomic_load_explicit(&d->size_class, memory_order_relaxed);
    /* stale frees into the span now take the slow path and are reported as
     * double frees there; the entries name no descriptor that comes back to
     * life (d may soon describe another span, which free's block test,
     * cm_is_block_of, could then take a stale pointer for a block of) */
    cm_pagemap_set((uintptr_t)d->base, span_size(d), cm_entry_make(CM_DESC_RETIRED, 0));
    if (keep_pages) { /* not the cage's (retire_other_spans) */
        cm_arena_release_dirty(d->base, d->span_shift);
    } else {
        cm_os_decommit(d->base, span_size(d));
        cm_arena_release(d->base, d->span_shift);
    }
    cm_uncount(&cm_counters.superblocks_live, 1);
    atomic_fetch_sub_explicit(&cm_counters.sb_live[cls], 1, memory_order_relaxed);
    let_go(d, listed);
}

/* Reserve room for one more fully free superblock kept committed; false when
 * the budget (CAGEMALLOC_EMPTY_KEEP) is spent and it should be retired.
 * Kept superblocks go back to the OS once idle for CAGEMALLOC_DECAY_MS
 * (cm_pool_decay): a program whose heap empties and refills, round after
 * round, reuses them instead of faulting every page in again. */
size_t cm_pool_kept_bytes(void) { return atomic_load_explicit(&empty_kept_bytes, memory_order_relaxed); }

static void unkeep_bytes(size_t bytes) { atomic_fetch_sub_explicit(&empty_kept_bytes, bytes, memory_order_relaxed); }

static bool keep_empty(size_t bytes) {
    size_t now = atomic_fetch_add_explicit(&empty_kept_bytes, bytes, memory_order_relaxed);
    if (now + bytes <= CM_OPTION(empty_keep)) return true;
    unkeep_bytes(bytes);
    return false;
}

/* A kept superblock of class cls stops being kept (taken, or retired). */
static void unkeep(cm_desc_t *d, unsigned cls) {
    unkeep_bytes(span_size(d));
    atomic_fetch_sub_explicit(&kept_in_class[cm_space_of(d->base)][cls], 1, memory_order_relaxed);
}

/* Every block of owned d is free, the last of them freed by us (its anchor
 * is now a): it is parked and every block came back by remote frees, or it
 * waits on an avail list (rehome_if_idle). Its span goes to the pool,
 * committed and kept like any fully free superblock, under a new
 * descriptor: the old one is on a list of its heap, whose links only the
 * heap may touch, and stays there, retired, for the heap to drop
 * (cm_pool_unpark, cm_pool_claim). Left with their heaps, such spans idled
 * while other heaps made new superblocks: 4 producers and 4 consumers
 * (xmalloc-test -w 4) reached 1.5-2x the program's live data, and
 * larson's main thread, which allocates every worker's first blocks and
 * then sleeps, held a third of the run's superblocks. Past the budget for
 * kept superblocks, it is retired. The CAS fails if the heap took d back
 * first, or another free or claim changed its anchor. */
static void rehome(cm_desc_t *d, cm_anchor_t a) {
    unsigned cls = cm_desc_class(d);
    size_t bytes = span_size(d);
    cm_desc_t *home = NULL;
    if (keep_empty(bytes) && !(home = cm_desc_alloc())) unkeep_bytes(bytes);
    CM_TEST_POINT("rehome: before the CAS");
    /* acquire: every free into d happens before its blocks are handed on
     * or its pages returned */
    if (!atomic_compare_exchange_strong_explicit(&d->anchor, &a, cm_anchor_next(a, CM_RETIRING, 0, 0),
                                                 memory_order_acquire, memory_order_relaxed)) {
        if (home) {
            cm_desc_release(home);
            unkeep_bytes(bytes);
        }
        return;
    }
    if (!home) {
        retire(d, true, false);
        return;
    }
    /* Every carved block on the anchor list (a parked superblock, or one
     * whose owner's local list is empty): the list goes with the span, and
     * the next owner takes it whole at its first refill. Else the span is
     * carved anew: the rest of the free blocks are on the old owner's local
     * list, whose links only it may read. */
    uint32_t carved = carved_of(d);
    bool whole_list = cm_anchor_count(a) == carved;
    home->base = d->base;
    home->span_shift = d->span_shift;
    atomic_store_explicit(&home->size_class, (uint8_t)cls, memory_order_relaxed);
    atomic_store_explicit(&home->carved, whole_list ? carved : 0, memory_order_relaxed);
    atomic_store_explicit(&home->idle_since, atomic_load_explicit(&d->idle_since, memory_order_relaxed),
                          memory_order_relaxed);
    cm_pagemap_set((uintptr_t)home->base, bytes, cm_entry_make(cm_desc_ref(home), cls));
    atomic_fetch_add_explicit(&kept_in_class[cm_space_of(home->base)][cls], 1, memory_order_relaxed);
    /* Last, home becomes a kept superblock: the trim and decay passes look
     * at every descriptor, pushed or not, and may retire it from here on
     * (then the push below lists it EMPTY, for its popper to drop). Before,
     * a pass retired homes still being built, and its page-map entries and
     * ours crossed: spans whose entries named a descriptor reused elsewhere.
     * release: the pass, which acquires the anchor, sees home's fields and
     * entries (so its retire's entries come after ours) */
    atomic_store_explicit(&home->anchor,
                          cm_anchor_next(atomic_load_explicit(&home->anchor, memory_order_relaxed), CM_PARTIAL,
                                         whole_list ? cm_anchor_avail(a) : 0, whole_list ? carved : 0),
                          memory_order_release);
    CM_TEST_POINT("rehome: home kept");
    let_go(d, true);
    /* its release publishes home to the popper */
    cm_desc_stack_push(stack_for(home, cm_my_ref()), home);
}

/* ------------------------------------------------------------ taking from the pool */

/* Anchor a says the superblock was handed to the pool (or retired) while
 * its descriptor stayed on one of its heap's lists (rehome, decay). */
static bool was_rehomed(cm_anchor_t a) {
    return cm_anchor_state(a) == CM_RETIRING || cm_anchor_state(a) == CM_EMPTY;
}

/* d, taken off a list (a partial stack, a heap's parked list) by the thread
 * that found its anchor *a RETIRING or EMPTY, leaves that thread's hands:
 * EMPTY, its memory is gone and the descriptor is released here; RETIRING,
 * its retirer is still returning the memory and is left to release it
 * (DETACHED). False if the anchor changed meanwhile (*a reloaded). */
static bool drop_retired(cm_desc_t *d, cm_anchor_t *a) {
    if (cm_anchor_state(*a) == CM_EMPTY) {
        cm_desc_release(d);
        return true;
    }
    /* acquire: the retirer's writes to d happen before its release of d */
    return atomic_compare_exchange_weak_explicit(&d->anchor, a, cm_anchor_next(*a, CM_DETACHED, 0, 0),
                                                 memory_order_acquire, memory_order_acquire);
}

/* Move d, popped from a partial stack, from PARTIAL to `to` (FULL: taking
 * its free list; OWNED: taking the superblock, the list staying on its
 * anchor). Returns the anchor it had, or 0 if d had been retired meanwhile. */
static cm_anchor_t take_partial(cm_desc_t *d, unsigned cls, unsigned to) {
    /* Owned, d is its heap's current superblock: before it becomes OWNED,
     * its used count (the last owner's until now) must say so, or a remote
     * free could find it equal to the anchor list's length and hand d to
     * the pool under its new owner (rehome_if_idle). The CAS publishes it. */
    if (to == CM_OWNED) cm_desc_set_used(d, CM_USED_CURRENT);
    /* acquire: pairs with the release CAS of every free into d, so the
     * links they wrote into the blocks are visible before we follow them;
     * release: the used count above */
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    for (;;) {
        switch (cm_anchor_state(a)) {
        case CM_PARTIAL: {
            uint32_t keep = to == CM_OWNED ? cm_anchor_count(a) : 0;
            if (!atomic_compare_exchange_weak_explicit(&d->anchor, &a,
                                                       cm_anchor_next(a, to, keep ? cm_anchor_avail(a) : 0, keep),
                                                       memory_order_acq_rel, memory_order_acquire))
                continue;
            if (cm_anchor_count(a) == carved_of(d)) unkeep(d, cls);
            return a;
        }
        case CM_RETIRING:
        case CM_EMPTY:
            if (!drop_retired(d, &a)) continue;
            return 0;
        default:
            cm_fatal("malloc", "superblock pool corrupted at", d->base);
        }
    }
}

/* A superblock of class `other` kept completely free (committed), taken
 * off the top of one of its partial stacks (of `shards`) with its anchor
 * moved to `to` (FULL: to serve another class; RETIRING: to be retired)
 * and no longer counted as kept; NULL if no top is one. One in use goes
 * back. */
static cm_desc_t *take_kept(unsigned other, unsigned space, unsigned to, shard_range_t shards) {
    for (unsigned i = shards.from, mine = shard_of(cm_my_ref()); i < shards.from + shards.count; i++) {
        unsigned s = (mine + i) % PARTIAL_SHARDS;
        cm_desc_t *d = cm_desc_stack_pop(&partial[space][s][other]);
        if (!d) continue;
        CM_TEST_POINT("take over: popped another class's superblock");
        cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
        for (;;) {
            unsigned st = cm_anchor_state(a);
            if (st == CM_PARTIAL && cm_anchor_count(a) == carved_of(d)) {
                if (!atomic_compare_exchange_weak_explicit(&d->anchor, &a, cm_anchor_next(a, to, 0, 0),
                                                           memory_order_acquire, memory_order_acquire))
                    continue;
                unkeep(d, other);
                return d;
            }
            if (st == CM_EMPTY || st == CM_RETIRING) {
                if (!drop_retired(d, &a)) continue;
            } else {
                cm_desc_stack_push(&partial[space][s][other], d); /* in use: put it back */
            }
            break;
        }
    }
    return NULL;
}

/* Classes with superblocks kept in `space`, whose span size is (same) or is
 * not (!same) 2^shift, other than cls. */
static bool kept_candidate(unsigned other, unsigned cls, unsigned shift, bool same, unsigned space) {
    return other != cls && (cm_class_info[other].span_shift == shift) == same &&
           atomic_load_explicit(&kept_in_class[space][other], memory_order_relaxed) > 0;
}

/* Before a new span is used for class cls, look at the top of the partial
 * stacks of the other classes of its span size that have superblocks kept
 * completely free (committed, so reused as they are, dirty). Without this, a
 * fully free superblock could serve only its own class: a workload shifting
 * between classes kept both the empty superblocks of the old classes and new
 * ones for the new (RSS +80% on a mixed-size run), or, retiring them at once,
 * faulted pages in again. Classes with none kept are not touched. */
static cm_desc_t *take_over_empty(unsigned cls, unsigned state, unsigned space, shard_range_t shards) {
    unsigned shift = cm_class_info[cls].span_shift;
    for (unsigned other = 1; other <= CM_NUM_CLASSES; other++) {
        if (!kept_candidate(other, cls, shift, true, space)) continue;
        cm_desc_t *d = take_kept(other, space, CM_FULL, shards);
        if (!d) continue;
        cm_uncount(&cm_counters.superblocks_live, 1);
        atomic_fetch_sub_explicit(&cm_counters.sb_live[other], 1, memory_order_relaxed);
        assign_class(d, cls, state);
        return d;
    }
    return NULL;
}

/* A new span of class cls's size is needed, and no kept superblock of that
 * size could serve: kept superblocks of other span sizes give their spans
 * back to the arena, pages resident, as many bytes as the new span, for it
 * (aligned units of them) and later spans of any size to reuse as they are;
 * what is not reused by the next decay pass goes back to the OS. A workload
 * moving up through the classes (buffers that grow, a program's phases)
 * otherwise kept every span size's old superblocks on top of new ones, up
 * to CAGEMALLOC_EMPTY_KEEP: 256 strings grown by realloc to 96 KiB each
 * held 2.4x their bytes; returning those pages at once instead cost a
 * madvise and the faults again, round after round (BENCHMARKS.md). */
static void retire_other_spans(unsigned cls, unsigned space, shard_range_t shards) {
    unsigned shift = cm_class_info[cls].span_shift;
    size_t wanted = (size_t)1 << shift, retired = 0;
    /* the cage's units have no dirty state: its kept superblocks stay */
    if (space == CM_SPACE_CAGE || atomic_load_explicit(&empty_kept_bytes, memory_order_relaxed) == 0) return;
    for (unsigned other = 1; other <= CM_NUM_CLASSES && retired < wanted; other++) {
        if (!kept_candidate(other, cls, shift, false, space)) continue;
        cm_desc_t *d;
        while (retired < wanted && (d = take_kept(other, space, CM_RETIRING, shards)) != NULL) {
            retired += span_size(d);
            retire(d, false, true); /* popped: on no list */
        }
    }
}

/* A new superblock, made once kept ones of other span sizes gave way. */
static cm_desc_t *fresh_superblock(unsigned cls, unsigned state, unsigned space, bool *dirty) {
    retire_other_spans(cls, space, ALL_SHARDS);
    return new_superblock(cls, state, space, dirty);
}

/* A superblock of the calling thread's own memory, still resident: made of
 * the dirty units of chunks it is home to, once its own kept superblocks
 * of other span sizes gave way; NULL if there is none. The span is claimed
 * first, as this fails more often than the descriptor pool does. */
static cm_desc_t *own_resident_superblock(unsigned cls, unsigned state, unsigned space) {
    if (space == CM_SPACE_CAGE) return NULL;
    retire_other_spans(cls, space, OWN_SHARD);
    unsigned shift = cm_class_info[cls].span_shift;
    bool dirty;
    char *base = cm_arena_claim_own_resident(shift, &dirty);
    if (!base) return NULL;
    cm_desc_t *d = cm_desc_alloc();
    if (!d) {
        cm_arena_release_dirty(base, shift);
        return NULL;
    }
    return with_span(d, base, cls, state, true);
}

/* True if d, popped from a partial stack, is partial with live blocks in it. */
static bool holds_live_blocks(cm_desc_t *d) {
    /* acquire: carved, read after it, is as the last owner left it */
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    return cm_anchor_state(a) == CM_PARTIAL && cm_anchor_count(a) != carved_of(d);
}

/* A partial superblock of class cls in `space` moved to `to`, looking at
 * the shard of `thread` first; NULL if there is none. no_live: only one
 * with no live block (the top of each shard is looked at; one in use goes
 * back). Nobody else allocates from a popped superblock, so one seen with
 * no live block still has none when it is taken. */
static cm_desc_t *pop_partial(unsigned cls, unsigned space, uint32_t thread, shard_range_t shards, unsigned to,
                              bool no_live, cm_anchor_t *had) {
    for (unsigned i = shards.from; i < shards.from + shards.count; i++) {
        cm_desc_stack_t *shard = &partial[space][(thread + i) % PARTIAL_SHARDS][cls];
        cm_desc_t *d;
        while ((d = cm_desc_stack_pop(shard)) != NULL) {
            if (no_live && holds_live_blocks(d)) {
                cm_desc_stack_push(shard, d);
                break;
            }
            if ((*had = take_partial(d, cls, to)) != 0) return d;
        }
    }
    return NULL;
}

bool cm_pool_take(unsigned cls, unsigned space, cm_refill_t *out) {
    uint32_t max = cm_class_info[cls].max_count;
    *out = (cm_refill_t){0};
    cm_anchor_t a;
    cm_desc_t *d = pop_partial(cls, space, 0, ALL_SHARDS, CM_FULL, false, &a);
    if (d && cm_anchor_count(a)) {
        out->chain = cm_desc_block(d, cm_anchor_avail(a));
        out->count = cm_anchor_count(a);
        return true;
    }
    if (d) { /* partial for its blocks never carved alone */
        out->fresh_dirty = true;
    } else {
        d = take_over_empty(cls, CM_FULL, space, ALL_SHARDS);
        out->fresh_dirty = d != NULL;
        if (!d) d = fresh_superblock(cls, CM_FULL, space, &out->fresh_dirty);
        if (!d) return false;
    }
    /* no heap owns it: every block counts as carved (the caller carves the rest) */
    uint32_t carved = carved_of(d);
    atomic_store_explicit(&d->carved, max, memory_order_relaxed);
    out->fresh = cm_desc_block(d, carved);
    out->fresh_count = max - carved;
    return true;
}

cm_desc_t *cm_pool_acquire(unsigned cls, unsigned space, uint32_t heap, uint32_t owner, bool reclaim) {
    cm_anchor_t a;
    /* The thread's own memory first, then the other threads': what it
     * gave back is likely still in its core's cache, where another core
     * would fetch it line by line (BENCHMARKS.md). But the class's partial
     * superblocks before any made anew: their free blocks would otherwise
     * wait while new ones are carved (xmalloc-test -w 4 held 1.5x the
     * memory). Resident memory before new pages. A heap that can be
     * destroyed frees every block of its superblocks then: it starts none
     * that holds another heap's live blocks (an exited thread's, which stay
     * valid). */
    cm_desc_t *d = pop_partial(cls, space, owner, OWN_SHARD, CM_OWNED, !reclaim, &a);
    if (!d) d = take_over_empty(cls, CM_OWNED, space, OWN_SHARD);
    if (!d) d = pop_partial(cls, space, owner, OTHER_SHARDS, CM_OWNED, !reclaim, &a);
    if (!d) d = own_resident_superblock(cls, CM_OWNED, space);
    if (!d) d = take_over_empty(cls, CM_OWNED, space, OTHER_SHARDS);
    bool dirty = true; /* used before */
    if (!d && !(d = fresh_superblock(cls, CM_OWNED, space, &dirty))) return NULL;
    d->dirty = dirty;
    d->local_free = CM_LIST_END;
    /* relaxed: remote frees read these only to tell a local free (a thread
     * finds its own ref only where it stored it) and to find the heap to
     * notify, which it validates */
    atomic_store_explicit(&d->heap, heap, memory_order_relaxed);
    cm_desc_set_owner_used(d, owner, cm_used_current(0, 0)); /* the caller makes it its current superblock */
    return d;
}

/* ------------------------------------------------------------ giving back */

/* The last block of the NULL-terminated chain of n blocks at head, ours
 * alone (a heap's local list, or an anchor list taken whole): a block freed
 * twice makes such a chain longer or a cycle, so the walk stops at n and
 * checks. */
static void *chain_tail(void *head, uint32_t n) {
    void *tail = head;
    for (uint32_t i = 1; i < n && tail; i++) tail = cm_block_peek_next(tail);
    if (!tail || cm_block_peek_next(tail)) cm_fatal("free", "corrupted free list", head);
    return tail;
}

/* The anchor CAS of every give-back: n blocks head..tail (linked) join d's
 * list (tail NULL: the chain ends in NULL, and is walked for its tail only
 * if the list has blocks to link it to). From OWNED the owner releases d
 * (`release`); a remote free leaves an owned d owned, and a parked one
 * parked (if every block came back, the caller hands it to the pool:
 * rehome); from FULL/PARTIAL, blocks come back to a superblock no heap
 * owns. A superblock no heap owns whose every block is free is kept
 * committed (budget) or retired. Returns the anchor it replaced. */
static cm_anchor_t give_back(cm_desc_t *d, void *head, void *tail, uint32_t n, bool release, cm_anchor_t *now) {
    unsigned cls = cm_desc_class(d), space = cm_space_of(d->base);
    uint32_t head_idx = n ? cm_desc_block_index(d, head) : 0;
    /* acquire (and on a failed CAS): carved, read after it, is as the last
     * owner left it when d has none now */
    cm_anchor_t old = atomic_load_explicit(&d->anchor, memory_order_acquire), new;
    bool kept = false;
    uint32_t max = 0;
    for (;;) {
        unsigned state = cm_anchor_state(old);
        uint32_t count = cm_anchor_count(old) + n;
        max = carved_of(d);
        bool owned = state == CM_OWNED || state == CM_OWNED_FULL;
        if (cm_unlikely(release ? state != CM_OWNED : (!owned && state != CM_FULL && state != CM_PARTIAL)) ||
            count > max)
            cm_fatal("free", "double free", n ? head : d->base);
        if (n && !tail && cm_anchor_count(old)) tail = chain_tail(head, n);
        if (n && tail) cm_block_set_next(tail, cm_anchor_count(old) ? cm_desc_block(d, cm_anchor_avail(old)) : NULL);
        uint32_t avail = n ? head_idx : cm_anchor_avail(old);
        if (owned && !release) {
            new = cm_anchor_next(old, state, avail, count);
            if (parked_all_back(new, cls)) /* before the CAS: retire_if_kept reads it after */
                atomic_store_explicit(&d->idle_since, cm_os_now_ns(), memory_order_relaxed);
        } else if (count == max) {
            if (!kept && (kept = keep_empty(span_size(d))))
                atomic_store_explicit(&d->idle_since, cm_os_now_ns(), memory_order_relaxed);
            new = kept ? cm_anchor_next(old, CM_PARTIAL, avail, count) : cm_anchor_next(old, CM_RETIRING, 0, 0);
        } else {
            /* blocks never carved count as free space: a heap that gives d
             * up with every carved block in use (a thread that allocated
             * one block and exited) leaves it for the next heap to carve
             * on, not stranded until one of its blocks comes back */
            bool has_room = count || max < cm_class_info[cls].max_count;
            new = cm_anchor_next(old, has_room ? CM_PARTIAL : CM_FULL, avail, count);
        }
        /* release: publishes the links just written (and the freed blocks'
         * last contents) to the thread that takes this list; acquire: when
         * we retire, every other thread's earlier frees into d happen before
         * our madvise. */
        if (atomic_compare_exchange_weak_explicit(&d->anchor, &old, new, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
        if (kept && cm_anchor_count(old) + n != carved_of(d)) {
            unkeep_bytes(span_size(d));
            kept = false;
        }
    }
    if (kept) atomic_fetch_add_explicit(&kept_in_class[space][cls], 1, memory_order_relaxed);
    *now = new;
    return old;
}

/* Owned d, whose anchor list our free just made a, has every block free:
 * its used count (exact while d waits on an avail list: the carved blocks
 * not on its local list) is the anchor list's length. Then d goes to the
 * pool, where any heap may take it: its owner, if it is still allocating,
 * gets it back from there at its next refill, but an owner that has gone
 * idle would hold it until it woke. Not while its heap is being visited (a
 * visit walks its avail superblocks, which must stay put). The owner sets
 * CM_USED_CURRENT (or its heap's visiting flag) before the CAS with which
 * it takes d back into use (cm_pool_claim); our free's CAS read that CAS's
 * value or an earlier one: if later, its acquire makes the owner's store
 * visible to the loads here; if earlier, the claim's CAS or ours in
 * rehome fails, whichever comes second. A stale used count is only ever
 * larger (an avail superblock's count only falls until it is claimed), so
 * it cannot make d look free. */
static void rehome_if_idle(cm_desc_t *d, cm_anchor_t a) {
    if (cm_anchor_count(a) != cm_desc_used_acquire(d)) return; /* acquire: internal.h, cm_desc_set_owner_used */
    cm_heap_t *h = cm_heap_record(atomic_load_explicit(&d->heap, memory_order_relaxed));
    if (h && atomic_load_explicit(&h->visiting, memory_order_relaxed)) return;
    atomic_store_explicit(&d->idle_since, cm_os_now_ns(), memory_order_relaxed);
    rehome(d, a);
}

void cm_pool_free_remote(cm_desc_t *d, void *head, void *tail, uint32_t n) {
    cm_anchor_t old = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    uint32_t idx = cm_desc_block_index(d, head), max = cm_class_info[cm_desc_class(d)].max_count;
    while (cm_anchor_state(old) == CM_OWNED) {
        if (cm_unlikely(cm_anchor_count(old) + n > max)) cm_fatal("free", "double free", head);
        cm_block_set_next(tail, cm_anchor_count(old) ? cm_desc_block(d, cm_anchor_avail(old)) : NULL);
        cm_anchor_t new = cm_anchor_next(old, CM_OWNED, idx, cm_anchor_count(old) + n);
        /* release: the links and the blocks' last contents reach the owner,
         * whose take of the list is an acquire; acquire: rehome_if_idle */
        if (atomic_compare_exchange_weak_explicit(&d->anchor, &old, new, memory_order_acq_rel, memory_order_relaxed)) {
            rehome_if_idle(d, new);
            return;
        }
    }
    cm_pool_return_chain(d, head, tail, n);
}

void cm_pool_return_chain(cm_desc_t *d, void *head, void *tail, uint32_t n) {
    cm_anchor_t new, old = give_back(d, head, tail, n, false, &new);
    unsigned was = cm_anchor_state(old);
    if (was == CM_OWNED_FULL) {
        /* the first block back in a parked superblock tells its heap.
         * relaxed: a stale or zero heap ref only costs a wasted or missed
         * hint; the owner validates what it reads, and finds d anyway when
         * it next collects */
        if (cm_anchor_count(old) == 0)
            cm_heap_notify(atomic_load_explicit(&d->heap, memory_order_relaxed), cm_desc_ref(d));
        /* every block back: to the pool, for any heap; the decay pass also
         * runs from refills, which a thread that only frees never does */
        if (parked_all_back(new, cm_desc_class(d))) {
            rehome(d, new);
            cm_pool_decay();
        }
    } else if (cm_anchor_state(new) == CM_RETIRING) {
        retire(d, was == CM_PARTIAL, false);
    } else if (was == CM_FULL) {
        /* only the FULL -> PARTIAL transition pushes, onto the shard of the freeing thread */
        cm_desc_stack_push(stack_for(d, cm_my_ref()), d);
    }
}

void cm_pool_release(cm_desc_t *d, void *head, uint32_t n) {
    uint32_t owner = cm_desc_owner(d);
    cm_desc_set_owner(d, 0);
    atomic_store_explicit(&d->heap, 0, memory_order_relaxed);
    d->at = CM_AT_NONE;
    cm_anchor_t new;
    give_back(d, head, NULL, n, true, &new);
    if (cm_anchor_state(new) == CM_RETIRING) retire(d, false, false);
    else if (cm_anchor_state(new) == CM_PARTIAL) cm_desc_stack_push(stack_for(d, owner), d);
}

void cm_pool_discard(cm_desc_t *d) {
    cm_desc_set_owner(d, 0);
    atomic_store_explicit(&d->heap, 0, memory_order_relaxed);
    d->at = CM_AT_NONE;
    cm_anchor_t old = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    /* acquire: remote frees into d happen before its pages are returned */
    do {
        if (was_rehomed(old)) {
            cm_pool_drop(d);
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(&d->anchor, &old, cm_anchor_next(old, CM_RETIRING, 0, 0),
                                                    memory_order_acquire, memory_order_relaxed));
    retire(d, false, false);
}

/* ------------------------------------------------------------ the owner's anchor changes */

void *cm_pool_take_remote(cm_desc_t *d, uint32_t *n) {
    /* acquire: pairs with the release of each remote free's CAS, so their
     * links and the blocks' last contents are visible */
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    while (cm_anchor_count(a) != 0) {
        if (atomic_compare_exchange_weak_explicit(&d->anchor, &a, cm_anchor_next(a, CM_OWNED, 0, 0),
                                                  memory_order_acquire, memory_order_acquire)) {
            *n = cm_anchor_count(a);
            return cm_desc_block(d, cm_anchor_avail(a));
        }
    }
    *n = 0;
    return NULL;
}

bool cm_pool_park(cm_desc_t *d) {
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    /* relaxed: parking publishes nothing; a remote free that sees
     * OWNED_FULL only learns to notify the heap */
    while (cm_anchor_count(a) == 0) {
        if (atomic_compare_exchange_weak_explicit(&d->anchor, &a, cm_anchor_next(a, CM_OWNED_FULL, 0, 0),
                                                  memory_order_relaxed, memory_order_relaxed))
            return true;
    }
    return false;
}

bool cm_pool_unpark(cm_desc_t *d) {
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    for (;;) {
        switch (cm_anchor_state(a)) {
        case CM_OWNED_FULL:
            /* Succeeding, it keeps the decay pass from retiring d (whose
             * CAS expects this very anchor). acquire: failing, d may be
             * found retired and its descriptor released here (the
             * success order may be no weaker); the anchor list itself is
             * taken later, with its own acquire. release: as in
             * cm_pool_claim (a visit unparks everything). */
            if (!atomic_compare_exchange_weak_explicit(&d->anchor, &a,
                                                       cm_anchor_next(a, CM_OWNED, cm_anchor_avail(a), cm_anchor_count(a)),
                                                       memory_order_acq_rel, memory_order_acquire))
                continue;
            return true;
        case CM_RETIRING:
        case CM_EMPTY:
            if (!drop_retired(d, &a)) continue;
            return false;
        default:
            cm_fatal("malloc", "superblock pool corrupted at", d->base);
        }
    }
}

bool cm_pool_claim(cm_desc_t *d) {
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    for (;;) {
        if (was_rehomed(a)) return false;
        if (cm_anchor_state(a) != CM_OWNED) cm_fatal("malloc", "superblock pool corrupted at", d->base);
        /* release: publishes the caller's CM_USED_CURRENT or visiting flag
         * to the remote free whose CAS comes next (rehome_if_idle); acquire:
         * failing, d may be found rehomed and dropped */
        if (atomic_compare_exchange_weak_explicit(&d->anchor, &a,
                                                  cm_anchor_next(a, CM_OWNED, cm_anchor_avail(a), cm_anchor_count(a)),
                                                  memory_order_acq_rel, memory_order_acquire))
            return true;
    }
}

void cm_pool_drop(cm_desc_t *d) {
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    while (!drop_retired(d, &a)) {
    }
}

/* ------------------------------------------------------------ trim, lookup */

/* Retire the fully free superblock d, kept in the pool or parked by a heap
 * that has not come back for it (whose last remote free has not yet
 * handed it to the pool), if it still is one and has idled
 * min_age_ns. Reading any descriptor is safe (type-stable). The decision
 * rests on the anchor and the class read after it; the CAS succeeds only if
 * the anchor did not change at all since (its version, internal.h), so the
 * superblock is still fully free in that class. The other anchor CASes need
 * no such care: each is made by a thread that owns what its decision rests
 * on (a popped descriptor, or blocks of the superblock it holds, which keep
 * the superblock from being retired or taken over). */
static bool retire_if_kept(cm_desc_t *d, uint64_t now, uint64_t min_age_ns) {
    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
    unsigned cls = atomic_load_explicit(&d->size_class, memory_order_relaxed);
    if (cls == 0 || cls > CM_NUM_CLASSES) return false;
    bool kept = cm_anchor_state(a) == CM_PARTIAL && cm_anchor_count(a) == carved_of(d);
    if (!(kept || parked_all_back(a, cls)) ||
        (min_age_ns && now - atomic_load_explicit(&d->idle_since, memory_order_relaxed) < min_age_ns))
        return false;
    CM_TEST_POINT("trim: anchor read");
    if (!atomic_compare_exchange_strong_explicit(&d->anchor, &a, cm_anchor_next(a, CM_RETIRING, 0, 0),
                                                 memory_order_acquire, memory_order_relaxed))
        return false;
    if (kept) unkeep(d, cls);
    retire(d, true, false); /* on its partial stack, or its heap's parked list */
    return true;
}

/* Retire every fully free superblock kept or parked (malloc_trim). */
bool cm_pool_trim(void) {
    bool returned = false;
    uint32_t n = cm_desc_count();
    for (uint32_t ref = 1; ref < n && ref < cm_desc_capacity(); ref++)
        returned |= retire_if_kept(cm_desc_from_ref(ref), 0, 0);
    return returned;
}

/* A partial superblock taken off its stack for a purge, with the free list
 * its anchor held; or, with no list (a = 0), one whose only free blocks were
 * never carved, to be pushed back as it is. */
typedef struct held {
    cm_desc_t *d;
    cm_anchor_t a;
} held_t;

/* h's free blocks give back their pages and go back to its anchor, as a
 * remote free's batch does. */
static void purge_and_return(held_t h, size_t block_size) {
    void *head = cm_desc_block(h.d, cm_anchor_avail(h.a)), *tail = head;
    for (uint32_t left = cm_anchor_count(h.a);;) {
        cm_free_block_purge(tail, block_size);
        if (--left == 0) break;
        tail = cm_block_peek_next(tail);
    }
    cm_pool_return_chain(h.d, head, tail, cm_anchor_count(h.a));
}

/* Each partial stack of a class whose blocks span pages is emptied, every
 * superblock's free list taken (FULL), purged and given back, which pushes
 * the superblock onto the calling thread's shard: that shard goes first, so
 * none is taken twice. The taken ones are listed in a scratch mapping, not
 * through their stack links: a remote free may push one meanwhile. */
void cm_pool_purge_free_blocks(void) {
    uint32_t most = cm_desc_count();
    size_t bytes = ((size_t)most * sizeof(held_t) + CM_PAGE_SIZE - 1) & ~(CM_PAGE_SIZE - 1);
    held_t *held = cm_os_map(bytes);
    if (!held) return;
    unsigned mine = shard_of(cm_my_ref());
    for (unsigned space = 0; space < CM_SPACES; space++)
        for (unsigned cls = 1; cls <= CM_NUM_CLASSES; cls++) {
            size_t block_size = cm_class_info[cls].block_size;
            if (block_size <= CM_PAGE_SIZE) continue;
            for (unsigned i = 0; i < PARTIAL_SHARDS; i++) {
                cm_desc_stack_t *stack = &partial[space][(mine + i) % PARTIAL_SHARDS][cls];
                uint32_t n = 0;
                cm_desc_t *d;
                while (n < most && (d = cm_desc_stack_pop(stack)) != NULL) {
                    /* acquire: as in take_partial. Popped, its list only grows. */
                    cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_acquire);
                    if (cm_anchor_state(a) == CM_PARTIAL && cm_anchor_count(a) == 0)
                        held[n++] = (held_t){d, 0};
                    else if ((a = take_partial(d, cls, CM_FULL)) != 0)
                        held[n++] = (held_t){d, a};
                }
                for (uint32_t k = 0; k < n; k++) {
                    if (held[k].a) purge_and_return(held[k], block_size);
                    else cm_desc_stack_push(stack, held[k].d);
                }
            }
        }
    cm_os_unmap(held, bytes);
}

/* Called from every 64th refill of a thread (reading the clock costs as much
 * as a refill): at most a few times per decay period (a timestamp CAS elects
 * the one thread that scans), retire what idled, looking at DECAY_SCAN
 * descriptors per pass, round robin, so no malloc does unbounded work. */
void cm_pool_decay(void) {
    cm_large_decay(); /* a program that stopped using large blocks still gets their cache back */
    uint64_t now = cm_os_now_ns(), last = atomic_load_explicit(&last_decay_ns, memory_order_relaxed);
    if (now - last < CM_OPTION(decay_ns) / 4 ||
        (atomic_load_explicit(&empty_kept_bytes, memory_order_relaxed) == 0 && !cm_arena_has_dirty()) ||
        !atomic_compare_exchange_strong_explicit(&last_decay_ns, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    cm_arena_purge();
    uint32_t n = cm_desc_count(), cap = cm_desc_capacity();
    if (n > cap) n = cap;
    uint32_t at = atomic_fetch_add_explicit(&decay_cursor, DECAY_SCAN, memory_order_relaxed);
    for (uint32_t i = 0; i < DECAY_SCAN && i + 1 < n; i++) {
        CM_TEST_POINT("decay: descriptor visited");
        retire_if_kept(cm_desc_from_ref(1 + (at + i) % (n - 1)), now, CM_OPTION(decay_ns));
    }
}

cm_desc_t *cm_pool_desc_of(const void *p) {
    uint32_t e = cm_pagemap_get((uintptr_t)p);
    unsigned cls = cm_entry_class(e);
    if (cls == 0 || cls > CM_NUM_CLASSES) return NULL;
    return cm_desc_from_ref(cm_entry_ref(e));
}
