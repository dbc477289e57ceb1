/* descriptor.c: the descriptor pool and the lock-free descriptor stacks.
 *
 * All descriptors live in one region reserved at init (up to
 * CM_MAX_DESCRIPTORS * 128 bytes, closed and opened 1 MiB at a time as
 * descriptors are handed out, reservation.c) and are never returned to the
 * OS. That makes them type-stable: a thread holding a stale reference may
 * read one at any time and see a descriptor, never unmapped memory. A
 * descriptor is named by its index in the region, a 32-bit "ref" (the narrow
 * pointer idea applied to our own metadata), so a stack head is {ref, tag}
 * in one 64-bit word and the tag defeats ABA. */
#include <sys/mman.h>

#include "internal.h"

static cm_desc_t unstarted[CM_DESC_RETIRED + 1]; /* refs 0 and 1 before the region exists */
cm_desc_t *cm_desc_region = unstarted;
static _Atomic uint32_t desc_next_free = CM_DESC_RETIRED + 1; /* refs 0 and 1 are never handed out */
static cm_desc_stack_t released;            /* descriptors of unmapped large blocks */
static cm_reservation_t region_open = {.prot = PROT_READ | PROT_WRITE, .step = CM_OPEN_STEP};

/* A descriptor handed out again names no owner and no heap: a superblock
 * handed to the pool under its heap keeps its owner's ref in the old
 * descriptor, which a later owner-less superblock under it (a take by a
 * thread past its exit hook, pool.c) must not carry into free's owner test.
 * Relaxed: a stale reader of the old life only ever compares these. */
static cm_desc_t *unowned(cm_desc_t *d) {
    cm_desc_set_owner_used(d, 0, 0);
    atomic_store_explicit(&d->heap, 0, memory_order_relaxed);
    return d;
}

cm_desc_t *cm_desc_alloc(void) {
    if (!cm_desc_started()) return NULL;
    cm_desc_t *d = cm_desc_stack_pop(&released);
    if (d) return unowned(d);
    /* relaxed: the index is only a ticket; the descriptor's contents are
     * published by whatever lock-free list or page-map entry later names it. */
    uint32_t ref = atomic_fetch_add_explicit(&desc_next_free, 1, memory_order_relaxed);
    if (ref >= cm_desc_capacity()) {
        atomic_fetch_sub_explicit(&desc_next_free, 1, memory_order_relaxed);
        return NULL;
    }
    uintptr_t base = (uintptr_t)cm_desc_base();
    if (!cm_reservation_open(&region_open, base, base + (ref + 1) * sizeof(cm_desc_t),
                             base + cm_desc_capacity() * sizeof(cm_desc_t)))
        return NULL; /* the ref stays unused: cm_desc_count never counts past the open part */
    cm_count(&cm_counters.committed, sizeof(cm_desc_t));
    return cm_desc_from_ref(ref);
}

void cm_desc_release(cm_desc_t *d) { cm_desc_stack_push(&released, d); }

uint32_t cm_desc_capacity(void) { return (uint32_t)cm_desc_base()[0].map_size; }

/* acquire, not CM_LOAD_SET_ONCE: init's racers call this before they know
 * the region is set, and then read its descriptor 0 */
bool cm_desc_started(void) { return __atomic_load_n(&cm_desc_region, __ATOMIC_ACQUIRE)[0].map_size != 0; }

/* A region of `capacity` descriptors, closed but for its first step, whose
 * descriptor 0 records the capacity, so the region and its size are
 * published by the one CAS; a late racer gives its reservation back. False
 * if no such reservation could be made. */
bool cm_desc_make_region(uint32_t capacity) {
    size_t bytes = (size_t)capacity * sizeof(cm_desc_t), first = bytes < CM_OPEN_STEP ? bytes : CM_OPEN_STEP;
    cm_desc_t *mine = cm_os_reserve_closed(bytes, CM_PAGE_SIZE);
    if (!mine) return false;
    if (!cm_os_open(mine, first, PROT_READ | PROT_WRITE, false)) {
        cm_os_unreserve(mine, bytes);
        return false;
    }
    mine[0].map_size = capacity;
    cm_desc_t *expected = unstarted;
    if (__atomic_compare_exchange_n(&cm_desc_region, &expected, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        cm_reservation_opened(&region_open, (uintptr_t)mine + first);
    else
        cm_os_unreserve(mine, bytes);
    return true;
}

/* Refs handed out so far whose descriptors are open to read: a scan of the
 * region stops there, before a ref whose thread has not opened it yet. */
uint32_t cm_desc_count(void) {
    uintptr_t open_end = atomic_load_explicit(&region_open.opened, memory_order_acquire); /* as cm_reservation_open */
    uint32_t next = atomic_load_explicit(&desc_next_free, memory_order_relaxed);
    uint32_t open = open_end ? (uint32_t)((open_end - (uintptr_t)cm_desc_base()) / sizeof(cm_desc_t)) : 0;
    return next < open ? next : open;
}

static uint64_t head_make(uint32_t ref, uint32_t tag) { return (uint64_t)tag << 32 | ref; }

void cm_desc_stack_push(cm_desc_stack_t *s, cm_desc_t *d) {
    uint32_t ref = cm_desc_ref(d);
    uint64_t old = atomic_load_explicit(&s->head, memory_order_relaxed);
    do {
        atomic_store_explicit(&d->next, (uint32_t)old, memory_order_relaxed);
        /* release: the popper must see d->next and everything the pusher
         * wrote into d (and its superblock) before pushing. */
    } while (!atomic_compare_exchange_weak_explicit(&s->head, &old, head_make(ref, (uint32_t)(old >> 32) + 1),
                                                    memory_order_release, memory_order_relaxed));
}

cm_desc_t *cm_desc_stack_pop(cm_desc_stack_t *s) {
    /* acquire: pairs with the pusher's release so d->next and d's contents
     * are visible. If d is popped and pushed again between our load of
     * d->next and the CAS, the tag has changed and the CAS fails; the stale
     * read itself is harmless because descriptors are never unmapped. */
    uint64_t old = atomic_load_explicit(&s->head, memory_order_acquire);
    for (;;) {
        uint32_t ref = (uint32_t)old;
        if (ref == 0) return NULL;
        cm_desc_t *d = cm_desc_from_ref(ref);
        uint32_t next = atomic_load_explicit(&d->next, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&s->head, &old, head_make(next, (uint32_t)(old >> 32) + 1),
                                                  memory_order_acquire, memory_order_acquire))
            return d;
    }
}
