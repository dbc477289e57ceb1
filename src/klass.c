/* klass.c: the class space. One reservation of 2^range bytes, cut into
 * slots of 2^shift bytes; a class takes a run of whole slots (an "extent"),
 * so its narrow pointer is its slot index. The unused tail of a class's last
 * slot (the alignment gap) is handed to cm_meta_alloc, which is how the loss
 * the seed measured (245-441 bytes per class) shrinks to a few bytes.
 *
 * Data, all lock-free:
 *  - per leaf of 4,096 slots (mapped on first use, never unmapped: stale
 *    reads are harmless): a bit per slot that is free, where a class starts
 *    and where one ends (which give cm_klass_free the class's length); and,
 *    for slots of 256 bytes or more, per slot a 64-bit map of its granules
 *    (1/64 of a slot) free for metadata and a map of where blocks end.
 *  - free slots: a class takes the lowest run of free slots that fits (one
 *    CAS on a bitmap word; a class over 64 slots takes whole words from a
 *    word boundary, one CAS each, undone if one fails), else fresh slots
 *    from a bump index. Freed runs coalesce by themselves, so churn of
 *    classes of mixed sizes does not fragment the space. Slot 0 is never
 *    handed out, so narrow 0 names no class.
 *  - gap slots (a class's last slot, or one whose class was freed while its
 *    metadata lives on) are listed on stacks by their longest free run of
 *    granules; cm_meta_alloc pops the smallest run that fits (best fit).
 *    A gap slot whose granules are all free again is claimed by one CAS and
 *    returned as an extent.
 * Stack heads are {index:32, tag:32} in one CAS'ed word, as everywhere. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "api.h"

#define DEFAULT_SHIFT 10
#define DEFAULT_RANGE 32
#define GAP_SHIFT_MIN 8  /* below 256-byte slots, gaps are smaller than most metadata: no gap filling */
#define GRANULES 64
#define ALL_FREE (~(uint64_t)0)
#define LEAF_SHIFT 12
#define LEAF_SLOTS ((uint32_t)1 << LEAF_SHIFT)
#define META_TRIES 16    /* gap slots one cm_meta_alloc looks at before ordinary memory */

uintptr_t cm_klass_base;
unsigned cm_klass_shift = DEFAULT_SHIFT;

typedef struct gap_slot {
    _Atomic uint64_t free;   /* bit g: granule g is free for metadata; 0: not a gap slot */
    _Atomic uint64_t ends;   /* bit g: a block (the class, or metadata) ends at granule g */
    _Atomic uint32_t next;   /* link on a gap stack */
    _Atomic uint32_t listed; /* 1 while on a gap stack */
} gap_slot_t;

typedef struct leaf {
    _Atomic uint64_t free[LEAF_SLOTS / 64];   /* the slot is free (below the bump index) */
    _Atomic uint64_t starts[LEAF_SLOTS / 64]; /* a class starts at this slot */
    _Atomic uint64_t ends[LEAF_SLOTS / 64];   /* a class ends at this slot */
    gap_slot_t gap[];                         /* slots of 256 bytes or more only (space_tracked()) */
} leaf_t;

/* ------------------------------------------------------------ configuration */

/* {configured-or-frozen flags, shift, range} in one word, so configuring and
 * the first use cannot interleave: the first use freezes it with a CAS. */
#define CFG_SET ((uint32_t)1 << 16)    /* cm_klass_configure was called */
#define CFG_FROZEN ((uint32_t)1 << 17) /* the space is in use */
static _Atomic uint32_t config;

static uint32_t cfg_make(unsigned shift, unsigned range) { return shift | range << 8; }
static unsigned cfg_shift(uint32_t c) { return c & 0xff; }
static unsigned cfg_range(uint32_t c) { return (c >> 8) & 0xff; }
/* Any shift and range within the bounds go together: narrow values have at
 * most 31 bits. */
_Static_assert(CM_KLASS_RANGE_MAX - CM_KLASS_SHIFT_MIN <= 32, "a narrow class value fits 32 bits");
static bool cfg_valid(unsigned shift, unsigned range) {
    return shift >= CM_KLASS_SHIFT_MIN && shift <= CM_KLASS_SHIFT_MAX && range >= CM_KLASS_RANGE_MIN &&
           range <= CM_KLASS_RANGE_MAX;
}

/* What the environment asks for (options.c keeps only values within the
 * bounds), or the default. */
static uint32_t env_config(void) {
    cm_ensure_init();
    return cfg_make(CM_OPTION(klass_shift) ? CM_OPTION(klass_shift) : DEFAULT_SHIFT,
                    CM_OPTION(klass_range) ? CM_OPTION(klass_range) : DEFAULT_RANGE);
}

/* The configuration in effect, or the one the first use will freeze. */
static uint32_t config_now(void) {
    uint32_t c = atomic_load_explicit(&config, memory_order_acquire);
    return c & (CFG_SET | CFG_FROZEN) ? c : env_config();
}

int cm_klass_configure(unsigned shift, unsigned range_log2) {
    if (!cfg_valid(shift, range_log2)) return EINVAL;
    uint32_t c = atomic_load_explicit(&config, memory_order_relaxed);
    do {
        if (c & CFG_FROZEN) return EBUSY;
    } while (!atomic_compare_exchange_weak_explicit(&config, &c, cfg_make(shift, range_log2) | CFG_SET,
                                                    memory_order_relaxed, memory_order_relaxed));
    return 0;
}

/* ------------------------------------------------------------ the space */

/* Set up once, by a CAS race (set_up_space); base's release CAS publishes
 * it to the racers, cm_klass_base's release store to everyone (space_ready). */
static struct {
    _Atomic(char *) base;
    _Atomic(_Atomic(leaf_t *) *) root; /* slots / LEAF_SLOTS leaves */
} space;

/* The space's settings, derived from the configuration that its set-up
 * froze, not stored: every racer would store the same values, but a late
 * one's plain stores raced with the readers of an earlier one's space
 * (ThreadSanitizer caught it). Relaxed is enough: whoever uses the settings
 * saw the space published (base or cm_klass_base, acquire), after the CAS
 * that froze config.
 * All 0 before the freeze. */
static uint32_t frozen_config(void) {
    uint32_t c = atomic_load_explicit(&config, memory_order_relaxed);
    return c & CFG_FROZEN ? c : 0;
}
static unsigned space_shift(void) { return cfg_shift(frozen_config()); }
/* The last slot index: 2^(range - shift) - 1 (below 2^32). */
static uint32_t space_slots(void) {
    uint32_t c = frozen_config();
    return c ? (uint32_t)(((uint64_t)1 << (cfg_range(c) - cfg_shift(c))) - 1) : 0;
}
/* Slots of 256 bytes or more have gap maps (granule-exact sizes)... */
static bool space_tracked(void) { return space_shift() >= GAP_SHIFT_MIN; }
/* ... and cm_meta_alloc uses them (CAGEMALLOC_KLASS_GAPS). */
static bool space_gaps(void) { return space_tracked() && CM_OPTION(klass_gaps); }

static _Atomic uint64_t gap_stack[GRANULES + 1]; /* by longest free run of granules */
static _Atomic uint32_t bump = 1;                /* next fresh slot; slot 0 is never used */
static cm_reservation_t slots_open = {.prot = PROT_READ | PROT_WRITE, .step = CM_OPEN_STEP};

/* relaxed counters: statistics only */
static _Atomic size_t classes_live, bytes_requested, slots_in_use, gap_bytes, meta_elsewhere;

static size_t slot_bytes(void) { return (size_t)1 << space_shift(); }
static size_t granule_bytes(void) { return slot_bytes() / GRANULES; }
static char *slot_addr(uint32_t slot) { return atomic_load_explicit(&space.base, memory_order_relaxed) + ((size_t)slot << space_shift()); }

static size_t leaf_bytes(void) { return sizeof(leaf_t) + (space_tracked() ? LEAF_SLOTS * sizeof(gap_slot_t) : 0); }

/* Bytes of a class of n slots whose last slot it fills `used` granules of 64. */
static size_t class_bytes(uint32_t n, unsigned used) {
    return ((size_t)(n - 1) << space_shift()) + (((size_t)used << space_shift()) >> 6);
}

/* The leaf of slot i, mapped on first use (a CAS race whose losers unmap
 * theirs); NULL without memory. */
/* relaxed: the root is published with the base (release), read after it */
static _Atomic(leaf_t *) *root_slot(uint32_t slot) {
    return &atomic_load_explicit(&space.root, memory_order_relaxed)[slot >> LEAF_SHIFT];
}

static leaf_t *leaf_of(uint32_t slot) {
    _Atomic(leaf_t *) *at = root_slot(slot);
    leaf_t *leaf = atomic_load_explicit(at, memory_order_acquire);
    if (leaf) return leaf;
    leaf_t *mine = cm_os_reserve(leaf_bytes());
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(at, &leaf, mine, memory_order_acq_rel, memory_order_acquire))
        return mine;
    cm_os_unreserve(mine, leaf_bytes());
    return leaf;
}
/* For a slot whose leaf exists (it was handed out). */
static leaf_t *leaf_known(uint32_t slot) {
    return atomic_load_explicit(root_slot(slot), memory_order_acquire);
}
static gap_slot_t *gap_of(uint32_t slot) { return &leaf_known(slot)->gap[slot & (LEAF_SLOTS - 1)]; }

static uint64_t bit(uint32_t slot) { return (uint64_t)1 << (slot & 63); }
static _Atomic uint64_t *starts_word(uint32_t slot) { return &leaf_known(slot)->starts[(slot & (LEAF_SLOTS - 1)) / 64]; }
static _Atomic uint64_t *ends_word(uint32_t slot) { return &leaf_known(slot)->ends[(slot & (LEAF_SLOTS - 1)) / 64]; }

/* Reserve the space: freeze the configuration, map 2^range bytes
 * (closed: opened as slots are handed out, reservation.c) aligned to the slot size,
 * and the leaf root. A CAS race: losers unmap what they mapped. Returns the
 * winner's base, NULL if this racer could map nothing and nobody won yet. */
static char *set_up_space(void) {
    cm_ensure_init();
    uint32_t c = atomic_load_explicit(&config, memory_order_relaxed);
    while (!(c & CFG_FROZEN)) {
        uint32_t want = c & CFG_SET ? c : env_config();
        if (atomic_compare_exchange_weak_explicit(&config, &c, want | CFG_FROZEN, memory_order_acq_rel,
                                                  memory_order_acquire))
            c = want | CFG_FROZEN;
    }
    size_t size = (size_t)1 << cfg_range(c), align = (size_t)1 << cfg_shift(c);
    size_t root_bytes = (((size_t)space_slots() >> LEAF_SHIFT) + 1) * sizeof(leaf_t *);
    _Atomic(leaf_t *) *root = cm_os_reserve(root_bytes);
    char *base = root ? cm_os_reserve_closed(size, align) : NULL;
    if (!base) {
        if (root) cm_os_unreserve(root, root_bytes);
        return atomic_load_explicit(&space.base, memory_order_acquire);
    }
    _Atomic(leaf_t *) *no_root = NULL;
    if (!atomic_compare_exchange_strong_explicit(&space.root, &no_root, root, memory_order_acq_rel,
                                                 memory_order_acquire))
        cm_os_unreserve(root, root_bytes);
    char *winner = NULL;
    /* release: whoever sees the base sees the root */
    if (atomic_compare_exchange_strong_explicit(&space.base, &winner, base, memory_order_acq_rel,
                                                memory_order_acquire))
        return base;
    cm_os_unreserve(base, size);
    return winner;
}

/* The space at first use. Its encoding (cm_klass_base, cm_klass_shift,
 * which the header's inline encode and decode read) is stored by every
 * thread that finds it unpublished, the same values each time, atomically:
 * a thread that saw the base CAS'ed in but not yet the encoding published
 * (the winner between the two) must not hand out a class it cannot encode,
 * and must not wait. */
static bool space_ready(void) {
    /* acquire: pairs with the release below, after which the space is whole */
    if (cm_likely(__atomic_load_n(&cm_klass_base, __ATOMIC_ACQUIRE) != 0)) return true;
    char *base = atomic_load_explicit(&space.base, memory_order_acquire);
    if (!base && !(base = set_up_space())) return false;
    /* relaxed: published by the release store of the base after it */
    __atomic_store_n(&cm_klass_shift, space_shift(), __ATOMIC_RELAXED);
    __atomic_store_n(&cm_klass_base, (uintptr_t)base, __ATOMIC_RELEASE);
    return true;
}

/* ------------------------------------------------------------ free slots */

static _Atomic uint64_t *free_word(void *ctx, uint32_t word) {
    (void)ctx;
    leaf_t *leaf = leaf_known(word * 64); /* NULL while a claim_fresh in flight maps it */
    return leaf ? &leaf->free[word & (LEAF_SLOTS / 64 - 1)] : NULL;
}

static cm_runs_t free_slots = {.word = free_word};

static void slots_free(uint32_t first, uint32_t n) { cm_runs_free(&free_slots, first, n); }

/* The lowest run of n free slots (first fit keeps the high end free), or
 * 0. Searched up to the word of the last slot handed out: its bits above
 * the bump index are never set, fresh slots are not in the map. */
static uint32_t claim_free(uint32_t n) {
    uint32_t handed_out = atomic_load_explicit(&bump, memory_order_acquire) - 1;
    uint32_t found = cm_runs_claim(&free_slots, handed_out ? handed_out / 64 + 1 : 0, n, 1);
    return found ? found - 1 : 0;
}

/* Fresh slots from the bump index. */
static uint32_t claim_fresh(uint32_t n) {
    uint32_t cur = atomic_load_explicit(&bump, memory_order_relaxed);
    do {
        if (cur > space_slots() || space_slots() - cur + 1 < n) return 0;
    } while (!atomic_compare_exchange_weak_explicit(&bump, &cur, cur + n, memory_order_acq_rel, memory_order_relaxed));
    for (uint32_t s = cur; s < cur + n; s += LEAF_SLOTS - (s & (LEAF_SLOTS - 1)))
        if (!leaf_of(s)) return 0; /* no memory for its bitmaps: these slots stay unused */
    if (!leaf_of(cur + n - 1)) return 0;
    if (!cm_reservation_open(&slots_open, (uintptr_t)slot_addr(0), (uintptr_t)slot_addr(cur + n),
                             (uintptr_t)slot_addr(space_slots()) + slot_bytes()))
        return 0; /* these slots stay unused */
    return cur;
}

static uint32_t take_extent(uint32_t n) {
    uint32_t slot = claim_free(n);
    return slot ? slot : claim_fresh(n);
}

/* ------------------------------------------------------------ gap slots */

static uint64_t head_make(uint32_t index, uint64_t old) { return ((old >> 32) + 1) << 32 | index; }

/* A stack of gap slots linked through their `next` fields in the leaves
 * (never unmapped, so a stale read is harmless; the tag fails its CAS).
 * release on push publishes the link, acquire on pop reads it. */
static void stack_push(_Atomic uint64_t *head, uint32_t slot, _Atomic uint32_t *next_field) {
    uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
    do atomic_store_explicit(next_field, (uint32_t)old, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(head, &old, head_make(slot, old), memory_order_release,
                                                  memory_order_relaxed));
}

static unsigned longest_run(uint64_t free) {
    unsigned n = 0;
    for (; free; n++) free &= free >> 1;
    return n;
}

/* Put a gap slot with free granules on the stack of its longest run, unless
 * it is on a stack already (it is found there; a stale bucket only costs a
 * look). */
static void gap_list(uint32_t slot) {
    gap_slot_t *g = gap_of(slot);
    unsigned run = longest_run(atomic_load_explicit(&g->free, memory_order_acquire));
    uint32_t no = 0;
    if (run == 0 || !atomic_compare_exchange_strong_explicit(&g->listed, &no, 1, memory_order_acq_rel,
                                                             memory_order_relaxed))
        return;
    stack_push(&gap_stack[run], slot, &g->next);
}

static uint32_t gap_pop(_Atomic uint64_t *head) {
    uint64_t old = atomic_load_explicit(head, memory_order_acquire);
    while ((uint32_t)old != 0) {
        uint32_t slot = (uint32_t)old;
        uint32_t next = atomic_load_explicit(&gap_of(slot)->next, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(head, &old, head_make(next, old), memory_order_acquire,
                                                  memory_order_acquire)) {
            atomic_store_explicit(&gap_of(slot)->listed, 0, memory_order_release);
            return slot;
        }
    }
    return 0;
}

/* Give back the extent of `slots` slots that ends with slot `last`. */
static void extent_release(uint32_t last, uint32_t slots) {
    atomic_fetch_sub_explicit(&slots_in_use, slots, memory_order_relaxed);
    slots_free(last - slots + 1, slots);
}

/* Granules were freed in gap slot `slot`, the last of `slots` slots no
 * class uses any more (its map is now `now`). If all its granules are free
 * it is claimed (one CAS: a racing cm_meta_alloc may take some first) and
 * all the slots go back as one extent; otherwise the slots before it do, and
 * it stays listed for metadata until its last block is freed. */
static void gap_freed(uint32_t slot, uint64_t now, uint32_t slots) {
    gap_slot_t *g = gap_of(slot);
    uint64_t all = ALL_FREE;
    if (now == ALL_FREE && atomic_compare_exchange_strong_explicit(&g->free, &all, 0, memory_order_acq_rel,
                                                                   memory_order_relaxed)) {
        extent_release(slot, slots);
        return;
    }
    if (slots > 1) extent_release(slot - 1, slots - 1);
    gap_list(slot);
}

/* ------------------------------------------------------------ classes */

static void fatal_if(bool bad, const char *func, const void *p) {
    if (cm_unlikely(bad)) cm_fatal(func, "invalid pointer", p);
}

void *cm_klass_alloc(size_t size) {
    if (!space_ready() || size > ((size_t)space_slots() << space_shift())) {
        errno = ENOMEM;
        return NULL;
    }
    if (size == 0) size = 1;
    uint32_t n = (uint32_t)((size + slot_bytes() - 1) >> space_shift());
    uint32_t first = take_extent(n), last = first + n - 1;
    if (!first) {
        errno = ENOMEM;
        return NULL;
    }
    unsigned used = GRANULES; /* granules of the last slot the class takes */
    if (space_tracked()) {
        size_t tail = size - ((size_t)(n - 1) << space_shift());
        used = (unsigned)((tail + granule_bytes() - 1) / granule_bytes());
        gap_slot_t *g = gap_of(last);
        uint64_t gap = space_gaps() && used < GRANULES ? ~cm_bits_mask(used, 0) : 0;
        atomic_store_explicit(&g->ends, (uint64_t)1 << (used - 1), memory_order_relaxed);
        /* release: a cm_meta_alloc that sees the free granules sees the ends */
        atomic_store_explicit(&g->free, gap, memory_order_release);
        if (gap) gap_list(last);
    }
    atomic_fetch_or_explicit(ends_word(last), bit(last), memory_order_relaxed);
    /* release: a cm_klass_free in another thread (handed the pointer through
     * its own synchronisation) sees the bits */
    atomic_fetch_or_explicit(starts_word(first), bit(first), memory_order_release);
    atomic_fetch_add_explicit(&classes_live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_requested, class_bytes(n, used), memory_order_relaxed);
    atomic_fetch_add_explicit(&slots_in_use, n, memory_order_relaxed);
    return slot_addr(first);
}

/* The last slot of the class starting at `first`: its end bit, the first
 * set at or after `first`. */
static uint32_t class_last_slot(uint32_t first) {
    for (uint32_t s = first;; s = (s | 63) + 1) {
        uint64_t w = atomic_load_explicit(ends_word(s), memory_order_acquire) & (ALL_FREE << (s & 63));
        if (w) return (s & ~63u) + (uint32_t)__builtin_ctzll(w);
    }
}

/* Slot index of p if it lies in a slot handed out, else abort naming func. */
static uint32_t slot_checked(const void *p, const char *func) {
    char *base = atomic_load_explicit(&space.base, memory_order_acquire);
    uintptr_t off = (uintptr_t)p - (uintptr_t)base;
    fatal_if(!base || (uintptr_t)p < (uintptr_t)base || off >> space_shift() >= atomic_load(&bump), func, p);
    return (uint32_t)(off >> space_shift());
}

void cm_klass_free(void *klass) {
    if (!klass) return;
    uint32_t first = slot_checked(klass, "cm_klass_free");
    fatal_if(((uintptr_t)klass & (slot_bytes() - 1)) != 0, "cm_klass_free", klass);
    /* acquire: pairs with cm_klass_alloc's release of the bits */
    uint64_t was = atomic_fetch_and_explicit(starts_word(first), ~bit(first), memory_order_acquire);
    fatal_if(!(was & bit(first)), "cm_klass_free", klass); /* not a class, or freed already */
    uint32_t last = class_last_slot(first), n = last - first + 1;
    atomic_fetch_and_explicit(ends_word(last), ~bit(last), memory_order_relaxed);
    unsigned used = GRANULES;
    if (space_tracked()) {
        gap_slot_t *g = gap_of(last);
        used = (unsigned)__builtin_ctzll(atomic_load_explicit(&g->ends, memory_order_relaxed)) + 1;
        /* release: our leaf bit's clearing is seen by whoever sees this (cm_meta_free) */
        atomic_fetch_and_explicit(&g->ends, ~((uint64_t)1 << (used - 1)), memory_order_release);
    }
    atomic_fetch_sub_explicit(&classes_live, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&bytes_requested, class_bytes(n, used), memory_order_relaxed);
    if (!space_gaps()) {
        extent_release(last, n);
        return;
    }
    /* the class's granules join the gap: metadata may still live there */
    uint64_t mine = cm_bits_mask(used, 0);
    uint64_t now = atomic_fetch_or_explicit(&gap_of(last)->free, mine, memory_order_acq_rel) | mine;
    gap_freed(last, now, n);
}

unsigned cm_klass_bits(void) {
    uint32_t c = config_now();
    return cfg_range(c) - cfg_shift(c);
}

/* ------------------------------------------------------------ metadata */

/* Take `len` free granules (starting on 16 bytes) of gap slot `slot`;
 * returns the first granule, or -1 if it has no such run. */
static int claim_granules(uint32_t slot, unsigned len, unsigned align) {
    gap_slot_t *g = gap_of(slot);
    /* acquire: the freer's release; the granules' last contents are theirs */
    uint64_t w = atomic_load_explicit(&g->free, memory_order_acquire);
    for (;;) {
        uint64_t runs = cm_bits_runs(w, len, align);
        if (!runs) return -1;
        unsigned at = (unsigned)__builtin_ctzll(runs);
        if (atomic_compare_exchange_weak_explicit(&g->free, &w, w & ~cm_bits_mask(len, at), memory_order_acquire,
                                                  memory_order_acquire)) {
            atomic_fetch_or_explicit(&g->ends, (uint64_t)1 << (at + len - 1), memory_order_relaxed);
            return (int)at;
        }
    }
}

/* Best fit: the stacks of gap slots from the smallest run that could fit
 * up; a slot popped is put back on the stack of what it has left. */
static void *meta_in_gap(size_t size) {
    size_t granule = granule_bytes();
    unsigned len = (unsigned)((size + granule - 1) / granule), align = granule >= 16 ? 1 : (unsigned)(16 / granule);
    unsigned tries = 0;
    for (unsigned run = len; run <= GRANULES && tries < META_TRIES; run++) {
        uint32_t slot;
        while (tries < META_TRIES && (slot = gap_pop(&gap_stack[run])) != 0) {
            tries++;
            int at = claim_granules(slot, len, align);
            gap_list(slot);
            if (at >= 0) {
                atomic_fetch_add_explicit(&gap_bytes, len * granule, memory_order_relaxed);
                return slot_addr(slot) + (size_t)at * granule;
            }
        }
    }
    return NULL;
}

void *cm_meta_alloc(size_t size) {
    if (size == 0) size = 1;
    if (space_ready() && space_gaps() && size <= slot_bytes()) {
        void *p = meta_in_gap(size);
        if (p) return p;
    }
    void *p = cm_malloc(size < 16 ? 16 : size); /* 16-aligned: not the 8-byte class */
    if (p) atomic_fetch_add_explicit(&meta_elsewhere, cm_impl_usable_size(p, "cm_meta_alloc"), memory_order_relaxed);
    return p;
}

void cm_meta_free(void *meta) {
    if (!meta) return;
    char *base = atomic_load_explicit(&space.base, memory_order_acquire);
    if (!base || (char *)meta < base || (char *)meta >= base + ((size_t)space_slots() << space_shift()) + slot_bytes()) {
        atomic_fetch_sub_explicit(&meta_elsewhere, cm_impl_usable_size(meta, "cm_meta_free"), memory_order_relaxed);
        cm_free(meta);
        return;
    }
    uint32_t slot = slot_checked(meta, "cm_meta_free");
    size_t granule = granule_bytes(), off = (uintptr_t)meta & (slot_bytes() - 1);
    fatal_if(!space_gaps() || off % 16 != 0, "cm_meta_free", meta);
    gap_slot_t *g = gap_of(slot);
    unsigned at = (unsigned)(off / granule);
    /* One snapshot of the slot's ends, then whether a class lives here: a
     * class's free clears its leaf bit before (release) its end bit, so if
     * the bit still reads set after the snapshot (acquire), the snapshot
     * holds the class's end as its lowest bit. (Two reads of the ends, one
     * before and one after the leaf bit, let a neighbouring class's free
     * make a valid block look like it lay inside the class.) */
    uint64_t all_ends = atomic_load_explicit(&g->ends, memory_order_acquire);
    uint64_t ends = all_ends & (ALL_FREE << at);
    uint64_t free = atomic_load_explicit(&g->free, memory_order_acquire);
    bool class_here = atomic_load_explicit(ends_word(slot), memory_order_relaxed) & bit(slot);
    CM_TEST_POINT("meta free: class bit read");
    unsigned class_end = class_here && all_ends ? (unsigned)__builtin_ctzll(all_ends) : 0;
    fatal_if(!ends || (class_here && at <= class_end), "cm_meta_free", meta);
    unsigned last = (unsigned)__builtin_ctzll(ends), len = last - at + 1;
    uint64_t mine = cm_bits_mask(len, at);
    if (cm_unlikely(free & mine)) cm_fatal("cm_meta_free", "double free", meta);
    atomic_fetch_and_explicit(&g->ends, ~((uint64_t)1 << last), memory_order_relaxed);
    /* release: the next taker of these granules sees our last writes done */
    uint64_t now = atomic_fetch_or_explicit(&g->free, mine, memory_order_release) | mine;
    atomic_fetch_sub_explicit(&gap_bytes, len * granule, memory_order_relaxed);
    gap_freed(slot, now, 1);
}

/* ------------------------------------------------------------ statistics */

void cm_klass_stats(struct cm_klass_stats *out) {
    memset(out, 0, sizeof *out);
    uint32_t c = config_now();
    bool ready = atomic_load_explicit(&space.base, memory_order_acquire) != NULL;
    out->shift = cfg_shift(c);
    out->range_log2 = cfg_range(c);
    out->narrow_bits = out->range_log2 - out->shift;
    if (!ready) return;
    out->gap_filling = space_gaps();
    out->classes_live = atomic_load_explicit(&classes_live, memory_order_relaxed);
    out->bytes_requested = atomic_load_explicit(&bytes_requested, memory_order_relaxed);
    out->bytes_committed = (size_t)(atomic_load_explicit(&bump, memory_order_relaxed) - 1) << space_shift();
    out->gap_bytes_reused = atomic_load_explicit(&gap_bytes, memory_order_relaxed);
    out->meta_bytes_elsewhere = atomic_load_explicit(&meta_elsewhere, memory_order_relaxed);
    size_t in_use = atomic_load_explicit(&slots_in_use, memory_order_relaxed) << space_shift();
    size_t held = out->bytes_requested + out->gap_bytes_reused;
    out->alignment_loss = in_use > held ? in_use - held : 0;
    out->loss_per_class = out->classes_live ? out->alignment_loss / out->classes_live : 0;
}
