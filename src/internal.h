/* internal.h: the data model of cagemalloc, read this first.
 *
 * Glossary
 *  block       what malloc returns. Small blocks (<= 128 KiB) come from a size
 *              class; larger ones are "large blocks": up to 1 MiB each a
 *              span of the arena, above that each its own mapping.
 *  size class  one of CM_NUM_CLASSES block sizes (8 B, 16 B steps to 128 B,
 *              then four per doubling to 128 KiB, and 4.5 and 9 KiB for a
 *              page or two plus a header); table generated at build time.
 *              Blocks of the 8-byte class are 8-aligned, all others
 *              16-aligned.
 *  superblock  a span of 64 KiB..1 MiB, aligned to its size, cut into blocks of
 *              one class.
 *  arena       where spans (of superblocks, and of large blocks up to
 *              1 MiB) come from: 4 MiB chunks, each a bitmap of 64
 *              units of 64 KiB, cut from the arena's reservation (64 GiB of
 *              address space reserved at init, opened as it is used:
 *              reservation.c) and, once that is used up or
 *              where it could not be made, from 32 MiB reservations; a
 *              retired superblock's span goes back for any span size to
 *              reuse, and an all-free chunk keeps its address space (not its
 *              pages) until a trim or a failed mapping unmaps it (never, in
 *              the arena's reservation). Each chunk has a home thread, whose
 *              claims look there first.
 *  descriptor  128 bytes of metadata for one superblock or one large block:
 *              its anchor word, its list link, its geometry. Descriptors live
 *              in one reserved region and are never unmapped, so a stale read
 *              of one is harmless; a 32-bit "ref" names one (index in region).
 *              A superblock's descriptor is released to the pool when it
 *              retires: the span and the descriptor are paired while in use.
 *  anchor      a descriptor's 64-bit status word {state, avail, count},
 *              changed only by CAS. avail = index of the first free block of
 *              the superblock's own free list, count = its length.
 *  page map    address -> 32-bit entry {descriptor ref, class} for every
 *              64 KiB unit we own, in two levels; for the units of the
 *              arena's 64 GiB window also in a flat array at its start,
 *              from which free() finds a block's superblock descriptor
 *              with one load.
 *  heap        what malloc allocates from (heap.c): per size class, the
 *              superblock it is carving or reusing now (its "current"), a
 *              list of its other superblocks ("avail": with free blocks,
 *              or used up while the class had others to turn to), and a
 *              list of exhausted ones ("parked"); a class that stops
 *              refilling gives its fully free ones back to the pool. A
 *              heap OWNS its superblocks: only its thread allocates from
 *              them, and that thread's frees go back to the superblock's
 *              own local free list with no atomic instruction.
 *              Every thread has a default heap (what malloc uses); programs
 *              make more with cm_heap_new. A heap's thread is its owner.
 *  bin         per heap and class: the free blocks of the current
 *              superblock, popped by malloc; refilled from that
 *              superblock's local free list (or its remote frees, or its
 *              uncarved rest) when it runs dry.
 *  local free list  per owned superblock, the blocks its owner thread
 *              freed; plain loads and stores (descriptor.local_free).
 *  remote free a free by a thread that does not own the superblock: the
 *              block joins the thread's batch for that superblock (remote.c),
 *              which one CAS pushes on the superblock's anchor list; the
 *              owner takes that list whole when it runs out of blocks.
 *  cage        one aligned reservation (cage.c) whose addresses compress to
 *              32 bits (cagemalloc.h). Its 64 KiB units are claimed from a
 *              bitmap kept in its first unit, by superblocks and large blocks
 *              of the heaps inside it.
 *  space       where a superblock or large block lives: the plain address
 *              space (arena and OS mappings) or the cage. Every heap, and
 *              each of the pool's stacks, holds blocks of one space only.
 *  pool        the superblocks no heap owns (pool.c): per class lock-free
 *              stacks of PARTIAL superblocks (sharded by the thread that gave
 *              them back), fully free ones kept committed up to a budget. A
 *              heap takes a superblock from the pool when it has none with
 *              free blocks, its own thread's memory first, and gives it back
 *              when it empties, or when the heap goes away (abandoned: its
 *              thread exited, or cm_heap_delete); another heap then reclaims
 *              it.
 *
 * Superblock states (anchor.state):
 *  OWNED     a heap owns it; the anchor list holds remote frees (count).
 *            On the heap's avail list, the remote free that brings its
 *            last block back (its used count equals count then) moves its
 *            span to the pool as below; the heap claims it with a CAS
 *            before it allocates from it again (cm_pool_claim), and drops
 *            the old descriptor if it finds it retired.
 *  OWNED_FULL  OWNED, and parked by its heap as exhausted; remote frees
 *            keep it so (the first tells the heap, through its mailbox)
 *            until the heap takes it back (OWNED). The remote free that
 *            brings its last block back, the heap still away, moves its
 *            span to the pool under a new descriptor (kept committed as a
 *            fully free superblock, or retired past that budget); the old
 *            descriptor, retired, waits on the heap's parked list for the
 *            heap to drop it.
 *  FULL      owned by no heap, no free block on its list (all in use); on
 *            no list.
 *  PARTIAL   count > 0 free blocks on its list; on its class's partial stack
 *            (or held by the one thread that just popped it).
 *  RETIRING  all blocks free; one thread owns it and is returning its memory.
 *  EMPTY     memory and span returned while the descriptor sat on a list
 *            (a partial stack, a heap's avail or parked list): whoever
 *            takes it off releases the descriptor to the pool.
 *  DETACHED  RETIRING, but the thread that took it off its list saw that
 *            and left it: the retiring thread must recycle it.
 */
#ifndef CM_INTERNAL_H
#define CM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cagemalloc.h"

#define CM_HIDDEN __attribute__((visibility("hidden")))
#define cm_likely(x) __builtin_expect(!!(x), 1)
#define cm_unlikely(x) __builtin_expect(!!(x), 0)
#define CM_NOINLINE __attribute__((noinline))
#define CM_INLINE static inline __attribute__((always_inline))
/* The entry points whose bodies are the fast paths start a cache line:
 * where they fall in one otherwise moves with every change elsewhere in
 * the library, and moving malloc and free from 16 to 48 bytes into their
 * lines cost threadtest and xmalloc 7% (same instructions). */
#define CM_HOT_ENTRY __attribute__((aligned(64)))
/* On the large zero-initialised arrays (the page map's root, the partial
 * stacks, the code space's tables): gcc on x86-64 puts them in ".lbss",
 * which the linker lays out after all of .bss, so the small variables of
 * every file share a page or two instead of each file's few sitting
 * between its arrays, each on a page of its own. (clang 14 would make such
 * a section file bytes, not zero pages: there it changes nothing.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CM_LARGE_ZEROED __attribute__((section(".lbss")))
#else
#define CM_LARGE_ZEROED
#endif
#define CM_CACHE_LINE 64
/* Data that different threads write must not share an aligned pair of
 * lines either: the adjacent-line prefetcher fetches both lines of a pair,
 * so a write to one takes the other from the core that holds it. Two
 * threads freeing into superblocks whose 64-byte descriptors shared a pair
 * ran at 0.5-0.8x their speed (glibc-thread-2 in one run in eight,
 * bench/lockstep every time: BENCHMARKS.md, "Descriptors a pair of lines
 * apart"). */
#define CM_SHARING_SPAN 128

/* ---------------------------------------------------------------- geometry */
#define CM_UNIT_SHIFT 16                        /* page-map granularity: 64 KiB */
#define CM_UNIT_SIZE ((size_t)1 << CM_UNIT_SHIFT)
#define CM_CHUNK_SHIFT 22                       /* spans are carved from 4 MiB chunks */
#define CM_CHUNK_SIZE ((size_t)1 << CM_CHUNK_SHIFT)
#define CM_SPAN_MIN_SHIFT 16
#define CM_SPAN_ORDERS 5                        /* spans of 64 KiB .. 1 MiB */
#define CM_ADDRESS_BITS 47                      /* user-space addresses on x86-64 */
#define CM_PAGE_SIZE ((size_t)4096)
#define CM_MAX_REQUEST ((size_t)PTRDIFF_MAX - 2 * CM_CHUNK_SIZE)

/* Page-map entry: {ref:25, 0:1, class:6}, so that without its class it is
 * its descriptor's byte offset (cm_desc_of_entry). Class 0 = not a small
 * block (large, or retired, or not ours: the descriptor decides);
 * CM_CLASS_LARGE = large. */
#define CM_ENTRY_CLASS_BITS 6
#define CM_ENTRY_CLASS_MASK ((1u << CM_ENTRY_CLASS_BITS) - 1)
#define CM_ENTRY_REF_SHIFT 7
#define CM_CLASS_LARGE 63u
#define CM_MAX_DESCRIPTORS ((uint32_t)1 << 21)  /* reserve 256 MiB of descriptors if we can, */
#define CM_MIN_DESCRIPTORS ((uint32_t)1 << 13)  /* else less under RLIMIT_AS, down to 1 MiB */

typedef struct cm_class_info {
    uint32_t block_size;   /* bytes per block: 8, or a multiple of 16 */
    uint32_t max_count;    /* blocks per superblock; 0 in the entries of no class */
    uint8_t span_shift;    /* log2 of the superblock size */
    uint8_t carve_batch;   /* blocks carved at once from a fresh superblock */
} cm_class_info_t;

/* What the block-start tests read (cm_is_block_start, and free's
 * cm_is_block_of, which uses no span_mask), one array per field: each is
 * indexed with the class alone, where an array of records took a shift, a
 * lea and an add to reach the record. Entries of no class have start_limit
 * 0, so the test fails. */
#define CM_CLASS_VALUES (1 << CM_ENTRY_CLASS_BITS) /* a page-map entry's class values */
typedef struct cm_block_check {
    uint64_t start_mult[CM_CLASS_VALUES];  /* ceil(2^64 / block_size) */
    uint64_t span_mask[CM_CLASS_VALUES];   /* superblock size - 1: offset of a block = address & span_mask */
    uint64_t start_limit[CM_CLASS_VALUES]; /* offset * start_mult is below this exactly at a block start */
} cm_block_check_t;

#include "size_class_table.h"

_Static_assert(CM_CLASS_INFO_LEN == CM_CLASS_VALUES, "every page-map class value has an entry");

/* size <= CM_FINE_MAX, malloc's fast path: one load from a table with an
 * entry per size (1 KiB, where a table per 8 bytes took an add and a shift
 * more, 6 bytes of malloc's path: BENCHMARKS.md) */
CM_INLINE unsigned cm_fine_size_to_class(size_t size) { return cm_class_by_1[size]; }
/* CM_FINE_MAX < size <= CM_SMALL_MAX (any size up to it, in fact) */
CM_INLINE unsigned cm_coarse_size_to_class(size_t size) { return cm_class_by_128[((uint32_t)size + 127) >> 7]; }
/* size <= CM_SMALL_MAX */
CM_INLINE unsigned cm_size_to_class(size_t size) {
    return size <= CM_FINE_MAX ? cm_fine_size_to_class(size) : cm_coarse_size_to_class(size);
}

/* True if p is the start of a block of a superblock of class cls (spans
 * are aligned to their size); cls is any page-map class value. With
 * m = start_mult = ceil(2^64 / size), m * size = 2^64 + e (0 <= e < size),
 * so the offset k * size + r (r < size) times m is k * e + r * m mod 2^64:
 * k * e when r = 0, and at least m otherwise, as offsets are below 2^20
 * (Lemire, Kaser and Kurz's divisibility test). Below start_limit = count
 * * e (1 when e = 0: the size is a power of two and divides the span) it
 * is exactly at the start of one of the superblock's count blocks, so the
 * tail past the last block fails too; gen_size_classes proves it on every
 * offset of every class. One multiply and one compare (a rotation and two
 * more loads with the modular inverse). */
CM_INLINE bool cm_is_block_start(unsigned cls, const void *p) {
    return ((uintptr_t)p & cm_block_check.span_mask[cls]) * cm_block_check.start_mult[cls] <
           cm_block_check.start_limit[cls];
}

/* The index k of the block that starts at offset off = k * size of a
 * superblock of class cls: the high word of off * start_mult, which is
 * k * 2^64 + k * e (k * e < 2^64). */
CM_INLINE uint32_t cm_block_index(unsigned cls, uint64_t off) {
    __extension__ typedef unsigned __int128 cm_u128;
    return (uint32_t)(((cm_u128)off * cm_block_check.start_mult[cls]) >> 64);
}
/* The class of p if p is the start of a small block of ours (its page-map
 * entry gives the class), else 0. */
CM_INLINE unsigned cm_small_class_of(const void *p, uint32_t entry) {
    unsigned cls = entry & CM_ENTRY_CLASS_MASK;
    return cm_is_block_start(cls, p) ? cls : 0;
}

/* ---------------------------------------------------------------- anchor */
enum { CM_FULL = 0, CM_PARTIAL = 1, CM_RETIRING = 2, CM_EMPTY = 3, CM_DETACHED = 4, CM_OWNED = 5, CM_OWNED_FULL = 6 };

/* {state:3, avail:16, count:16, version:29} in one word, so a single CAS
 * moves a whole chain of blocks and changes the state together (thesis:
 * {2, 31, 31}; a superblock holds at most CM_MAX_BLOCKS (8,192) blocks, so
 * 16 bits each are plenty). Every CAS writes cm_anchor_next(old, ...), which
 * adds one to the version: an anchor read earlier compares equal only if no
 * CAS at all happened since, so a decision taken on other fields read
 * after it (trim: "count == the max_count of the class I read") cannot be
 * validated by an anchor that merely looks the same (a span taken over by
 * another class, its blocks handed out and returned in the same order:
 * issue 9).
 * Wrap-around needs 2^29 CASes on one superblock while a thread sleeps
 * between its read and its CAS. */
typedef uint64_t cm_anchor_t;
#define CM_ANCHOR_FIELD_BITS 16
#define CM_ANCHOR_FIELD_MASK ((1u << CM_ANCHOR_FIELD_BITS) - 1)
#define CM_ANCHOR_VERSION_SHIFT (3 + 2 * CM_ANCHOR_FIELD_BITS)
CM_INLINE unsigned cm_anchor_state(cm_anchor_t a) { return (unsigned)(a & 7); }
CM_INLINE uint32_t cm_anchor_avail(cm_anchor_t a) { return (uint32_t)(a >> 3) & CM_ANCHOR_FIELD_MASK; }
CM_INLINE uint32_t cm_anchor_count(cm_anchor_t a) {
    return (uint32_t)(a >> (3 + CM_ANCHOR_FIELD_BITS)) & CM_ANCHOR_FIELD_MASK;
}
CM_INLINE uint32_t cm_anchor_version(cm_anchor_t a) { return (uint32_t)(a >> CM_ANCHOR_VERSION_SHIFT); }
CM_INLINE cm_anchor_t cm_anchor_make(unsigned state, uint32_t avail, uint32_t count) {
    return (cm_anchor_t)state | (cm_anchor_t)avail << 3 | (cm_anchor_t)count << (3 + CM_ANCHOR_FIELD_BITS);
}
/* The value a CAS replacing `old` writes: the fields given, old's version + 1. */
CM_INLINE cm_anchor_t cm_anchor_next(cm_anchor_t old, unsigned state, uint32_t avail, uint32_t count) {
    return cm_anchor_make(state, avail, count) +
           ((old >> CM_ANCHOR_VERSION_SHIFT) + 1) * ((cm_anchor_t)1 << CM_ANCHOR_VERSION_SHIFT);
}

/* ---------------------------------------------------------------- descriptor */
/* Where an owned descriptor sits in its heap (owner-private). */
enum { CM_AT_NONE = 0, CM_AT_CURRENT = 1, CM_AT_AVAIL = 2, CM_AT_PARKED = 3, CM_AT_LARGE = 4 };
#define CM_HEAP_ZOMBIE UINT32_MAX /* large block's heap after a remote free, until its heap unlinks it */

typedef struct cm_desc {
    _Atomic cm_anchor_t anchor;  /* small: superblock status; large: unused */
    _Atomic uint32_t next;       /* link in whichever lock-free stack holds it */
    _Atomic uint8_t size_class;  /* 1..CM_NUM_CLASSES, or CM_CLASS_LARGE */
    uint8_t span_shift;          /* log2 of the span size (large: 0 for a mapping of its own) */
    uint8_t at;                  /* owner-private: CM_AT_* */
    uint8_t dirty;               /* owner-private: uncarved memory may be non-zero */
    char *base;                  /* span start, or large mapping start */
    union {
        void *local_free;        /* small, owned: the owner's frees (plain, owner only) */
        size_t map_size;         /* large: bytes mapped; the block is base itself */
    };
    _Atomic uint64_t owner_used; /* {owner:32, used:32}: cm_desc_owner, cm_desc_used */
    _Atomic uint32_t carved;     /* blocks carved so far (owner writes; statistics read) */
    _Atomic uint32_t heap;       /* ref of the owning heap, 0 if none (large: or CM_HEAP_ZOMBIE) */
    _Atomic uint64_t idle_since; /* when it became completely free / entered the large cache (ns) */
    uint32_t prev, link;         /* owner-private: the heap list it is on (CM_AT_*); the first one's prev names the last */
} __attribute__((aligned(CM_SHARING_SPAN))) cm_desc_t;

_Static_assert(sizeof(cm_desc_t) == CM_SHARING_SPAN, "a descriptor is a pair of lines: its owner's writes reach no other's");

/* The descriptor region, set once at init (cm_desc_make_region). Until
 * then, and for good if init found no address space for it, it names a
 * static stand-in whose descriptor 0 has no class and capacity 0: a free of
 * NULL (or of a pointer not ours) made before the first allocation finds
 * the descriptor of page-map entry 0 there, whose block test fails, as it
 * does after init, instead of reading through a null base. */
CM_HIDDEN extern cm_desc_t *cm_desc_region;
/* A global set once at init by a CAS race (cm_desc_region, cm_link_key,
 * the settings) is read with CM_LOAD_SET_ONCE (cagemalloc.h): a thread
 * reads it only after its own cm_ensure_init saw it set (acquire), and a
 * late racer's CAS fails, which in C11 is a read, so plain reads race with
 * nothing; only ThreadSanitizer's builds read it atomically. (An atomic
 * load in free's fast path took it from 128 to 131 bytes.) */
CM_INLINE cm_desc_t *cm_desc_base(void) { return CM_LOAD_SET_ONCE(cm_desc_region); }
/* Ref 0 names no descriptor (descriptor 0 records the region's capacity);
 * ref 1 is what a retired span's page-map entries name: a descriptor of no
 * class that is never handed out (descriptor.c, pool.c). */
#define CM_DESC_RETIRED 1u

CM_INLINE cm_desc_t *cm_desc_from_ref(uint32_t ref) { return cm_desc_base() + ref; }
/* A page-map entry's descriptor: its ref is the entry's high bits, and a
 * descriptor is 2^CM_ENTRY_REF_SHIFT bytes, so masking off the class gives
 * the byte offset (one AND, no shift). */
_Static_assert(sizeof(cm_desc_t) == 1u << CM_ENTRY_REF_SHIFT, "an entry without its class is its descriptor's offset");
CM_INLINE cm_desc_t *cm_desc_of_entry(uint32_t entry) {
    return (cm_desc_t *)((char *)cm_desc_base() + (entry & ~((1u << CM_ENTRY_REF_SHIFT) - 1)));
}

CM_INLINE uint32_t cm_desc_ref(const cm_desc_t *d) { return (uint32_t)(d - cm_desc_base()); }

/* True if p is the start of a block of d's superblock, d being the
 * descriptor p's page-map entry names: the same test on p's offset from d's
 * base, with d's class. Free's fast path uses it: it reads d's line anyway,
 * and the entry's class is not needed (5 bytes less of code there). An
 * entry names only a descriptor whose span holds the address, or one whose
 * class has limit 0 (none, large): a retired span's entries name CM_DESC_RETIRED,
 * not the descriptor that may now describe another span, whose offset from
 * p could pass the test (pool.c, retire). */
CM_INLINE bool cm_is_block_of(const cm_desc_t *d, const void *p) {
    unsigned cls = atomic_load_explicit(&d->size_class, memory_order_relaxed);
    return (uint64_t)((const char *)p - d->base) * cm_block_check.start_mult[cls] < cm_block_check.start_limit[cls];
}

/* A superblock's class, its block of index idx, and the index of its block p. */
CM_INLINE unsigned cm_desc_class(const cm_desc_t *d) {
    return atomic_load_explicit(&d->size_class, memory_order_relaxed);
}
CM_INLINE void *cm_desc_block(const cm_desc_t *d, uint32_t idx) {
    return d->base + (size_t)idx * cm_class_info[cm_desc_class(d)].block_size;
}
CM_INLINE uint32_t cm_desc_block_index(const cm_desc_t *d, const void *p) {
    return (uint32_t)cm_block_index(cm_desc_class(d), (uint64_t)((const char *)p - d->base));
}

/* A descriptor's owner is the ref of the thread whose heap owns it (its
 * default heap's), 0 if none; its used count, meaningful while owned, is
 * the carved blocks neither free on its local list nor in its heap's bin.
 * Both sit in one word, owner_used = owner << 32 | used, so that the free
 * fast path tests both with one load and one compare (cm_free_fast_ok).
 * Only one thread writes the word at a time: the owner, or the thread
 * making d its own or giving it up (before it publishes d elsewhere).
 * Loads are relaxed: a thread finds its own ref there only where it stored
 * it itself, and the private fields it then reads are its own; what others
 * decide from a stale owner (which heap to notify, whether a free is
 * remote) is validated where it matters. The one other reader of the used
 * count is the remote free that may hand an avail superblock's span on
 * when the count says every block is back (rehome_if_idle): stores are
 * releases and that load an acquire, so the owner's reads of the blocks
 * it counted (walking its lists to settle a current superblock, or a
 * chain of remote frees) happen before the span's next owner writes them.
 * On x86-64 both are plain moves. */
CM_INLINE uint64_t cm_desc_owner_used(const cm_desc_t *d) {
    return atomic_load_explicit(&d->owner_used, memory_order_relaxed);
}
CM_INLINE uint32_t cm_desc_owner(const cm_desc_t *d) { return (uint32_t)(cm_desc_owner_used(d) >> 32); }
CM_INLINE uint32_t cm_desc_used(const cm_desc_t *d) { return (uint32_t)cm_desc_owner_used(d); }
CM_INLINE uint32_t cm_desc_used_acquire(const cm_desc_t *d) {
    return (uint32_t)atomic_load_explicit(&d->owner_used, memory_order_acquire);
}
CM_INLINE void cm_desc_set_owner_used(cm_desc_t *d, uint32_t owner, uint32_t used) {
    atomic_store_explicit(&d->owner_used, (uint64_t)owner << 32 | used, memory_order_release);
}
CM_INLINE void cm_desc_set_used(cm_desc_t *d, uint32_t used) { cm_desc_set_owner_used(d, cm_desc_owner(d), used); }
CM_INLINE void cm_desc_set_owner(cm_desc_t *d, uint32_t owner) { cm_desc_set_owner_used(d, owner, cm_desc_used(d)); }

/* An owned superblock's used count also tells the owner's free whether it
 * may take the fast path: exact (>= 1) for one on its heap's avail list,
 * where 1 means the free may empty it; CM_USED_CURRENT set while its class
 * allocates from it (no exact count then: blocks move between its list and
 * the bin freely; what the rest says is below); its block count with
 * CM_USED_PARKED set while parked (the first free must move it to avail). The fast path wants owner == the calling
 * thread and 2 <= used < CM_USED_PARKED: owner_used - free_key (the
 * thread's ref << 32 | 2) is below 2^31 exactly then (another owner leaves
 * a difference >= 2^32 - 2, used < 2 borrows to near 2^64), save for used
 * CM_USED_PARKED | 0 or | 1, which never occur: a parked superblock's count
 * is its class's max_count, at least 2 in every class (gen_size_classes
 * checks it). Tested as "no bit above the 31st", a shift where a compare
 * with 2^31 - 2 takes an immediate: 2 bytes of free's two cache lines. */
#define CM_USED_CURRENT (1u << 30)
#define CM_USED_PARKED (1u << 31)
/* While current, the count's lower 30 bits say how the superblock's free
 * blocks lie, so that settling it (heap_alloc.c) walks one list, not two:
 * bits 16-29, the blocks the bin last received (a bound on what it still
 * holds: only refills add to it); bits 0-15, 0xFFFF less the local list's
 * length (each owner's free decrements the count; the list is at most a
 * superblock's blocks, under 2^16, so it never borrows into the bound). */
#define CM_CURRENT_LOCAL_MAX 0xFFFFu
_Static_assert(CM_MAX_BLOCKS < CM_CURRENT_LOCAL_MAX && CM_MAX_BLOCKS < 1u << 14,
               "a current superblock's count holds its list length and bin bound");
CM_INLINE uint32_t cm_used_current(uint32_t bin_fill, uint32_t local_len) {
    return CM_USED_CURRENT | bin_fill << 16 | (CM_CURRENT_LOCAL_MAX - local_len);
}
CM_INLINE uint32_t cm_current_local_len(uint32_t used) { return CM_CURRENT_LOCAL_MAX - (used & CM_CURRENT_LOCAL_MAX); }
CM_INLINE uint32_t cm_current_bin_fill(uint32_t used) { return (used >> 16) & 0x3FFFu; }
#define CM_FREE_KEY(thread_ref) ((uint64_t)(thread_ref) << 32 | 2)
CM_INLINE bool cm_free_fast_ok(uint64_t owner_used, uint64_t free_key) {
    return (owner_used - free_key) >> 31 == 0;
}

#if defined(__SANITIZE_THREAD__)
#define CM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CM_TSAN 1
#endif
#endif

/* used - 1 by d's owner on the free fast path. On x86-64 one decrement of
 * the word in memory (a byte shorter than a subtract of 1; used never
 * borrows into the owner, being at least 2 here), where the compiler
 * spends three instructions on a
 * load it cannot fuse with an atomic store (keep a copy, subtract, store).
 * It is a release store of the new value: the word is aligned, so others
 * read the old or the new whole, and only the owner writes it; x86 orders
 * it after the block's link, which a remote free that reads the count and
 * hands d to the pool (pool.c, rehome_if_idle) must not see written later.
 * Where the instruction is not that, or ThreadSanitizer must see the
 * store, the atomic store. */
CM_INLINE void cm_desc_used_dec(cm_desc_t *d, uint64_t owner_used) {
#if defined(__x86_64__) && !defined(CM_TSAN)
    (void)owner_used;
    __asm__ volatile("decq %0" : "+m"(*(uint64_t *)&d->owner_used) : : "cc", "memory");
#else
    atomic_store_explicit(&d->owner_used, owner_used - 1, memory_order_release);
#endif
}

/* A lock-free stack of descriptors: head = {ref:32, tag:32}, CAS'ed as one word. */
typedef struct cm_desc_stack {
    _Atomic uint64_t head;
} __attribute__((aligned(CM_CACHE_LINE))) cm_desc_stack_t;

CM_HIDDEN cm_desc_t *cm_desc_alloc(void);          /* NULL when the region is exhausted */
CM_HIDDEN void cm_desc_release(cm_desc_t *d);       /* for descriptors not bound to a span */
CM_HIDDEN void cm_desc_stack_push(cm_desc_stack_t *s, cm_desc_t *d);
CM_HIDDEN cm_desc_t *cm_desc_stack_pop(cm_desc_stack_t *s);
CM_HIDDEN uint32_t cm_desc_count(void);     /* refs handed out so far (+1) and open to read */
CM_HIDDEN uint32_t cm_desc_capacity(void);  /* refs the region holds */
CM_HIDDEN bool cm_desc_started(void);       /* the region exists (capacity above 0) */
CM_HIDDEN bool cm_desc_make_region(uint32_t capacity); /* reserve and publish: the first racer's is kept */

/* ---------------------------------------------------------------- page map */
#define CM_PAGEMAP_LEAF_BITS (32 - CM_UNIT_SHIFT)
#define CM_PAGEMAP_ROOT_LEN ((size_t)1 << (CM_ADDRESS_BITS - 32))
#define CM_REGION_CHUNKS ((size_t)1 << (32 - CM_CHUNK_SHIFT)) /* 4 MiB chunks per 4 GiB region */
/* What we keep per 4 GiB region of address space, mapped the first time we
 * own something in it and never unmapped: the page-map entries of its 64 KiB
 * units, and for the arena (arena.c) the free units of each of its chunks.
 * Both are indexed by address, so a slot always describes the same range. */
typedef struct cm_chunk_state {
    _Atomic uint64_t free;  /* bit u: unit u of the chunk is free */
    _Atomic uint64_t dirty; /* bit u: free unit u's pages may be resident */
    _Atomic uint32_t home;  /* the thread (ref) whose spans it holds: a hint */
} cm_chunk_state_t;
typedef struct cm_region {
    _Atomic uint32_t entries[(size_t)1 << CM_PAGEMAP_LEAF_BITS];
    _Atomic(struct cm_region *) next; /* the region created after this one */
    uintptr_t base;                   /* the address of its first byte */
    _Atomic uint64_t chunk_listed[CM_REGION_CHUNKS / 64]; /* bit c: chunk c may have free units */
    /* a chunk's fields side by side: a process using one chunk touches one
     * page of them, where an array per field took three */
    cm_chunk_state_t chunks[CM_REGION_CHUNKS];
} cm_region_t;
/* Root slot i holds the byte offset of its region from the empty leaf, an
 * all-zero array of entries in .bss right after the root: 0 (the .bss
 * initial value) names that leaf, so a lookup needs no null test, and the
 * root and the leaves are reached from one base address (the root first, so
 * that neither the root's index nor the leaf's address needs an offset of
 * its own: the leaf's is the load's displacement). */
typedef struct cm_pagemap {
    _Atomic uintptr_t root[CM_PAGEMAP_ROOT_LEN];
    _Atomic uint32_t empty_leaf[(size_t)1 << CM_PAGEMAP_LEAF_BITS];
} cm_pagemap_t;
CM_HIDDEN extern cm_pagemap_t cm_pagemap;

/* The entry for address a, 0 if a is in no unit of ours. Two dependent loads:
 * the root (2^15 slots, one per 4 GiB, hot) and the leaf. The acquire on the
 * root pairs with the release CAS that installed the leaf. */
CM_INLINE uint32_t cm_pagemap_get(uintptr_t a) {
    uintptr_t slot = a >> 32;
    if (cm_unlikely(slot >= CM_PAGEMAP_ROOT_LEN)) return 0;
    /* The empty asm statements make map and entry_offset opaque values, so
     * that one register holds the map's address for both loads and the leaf
     * load is map + entry_offset + the leaf's displacement: left to itself,
     * gcc materialises the leaf's address as a second constant and adds
     * twice (13 instructions, 11 this way). */
    const cm_pagemap_t *map = &cm_pagemap;
    __asm__("" : "+r"(map));
    uintptr_t leaf_offset = atomic_load_explicit(&map->root[slot], memory_order_acquire);
    uintptr_t entry_offset = leaf_offset + ((a >> (CM_UNIT_SHIFT - 2)) & ((((uintptr_t)1 << CM_PAGEMAP_LEAF_BITS) - 1) << 2));
    __asm__("" : "+r"(entry_offset));
    /* relaxed: an entry is published before its blocks exist; whoever frees a
     * block got it through synchronisation that orders the entry's store. */
    return atomic_load_explicit((const _Atomic uint32_t *)((const char *)map->empty_leaf + entry_offset),
                                memory_order_relaxed);
}
_Static_assert(CM_PAGEMAP_LEAF_BITS == 16, "a leaf index is the address's third 16 bits");
/* Set the entries of [start, start + size), creating its regions; false if
 * the OS has no memory for a region (or the range is not a user address). */
CM_HIDDEN bool cm_pagemap_set(uintptr_t start, size_t size, uint32_t entry);
/* The region record of address a, NULL if none was created. */
CM_HIDDEN cm_region_t *cm_pagemap_region(uintptr_t a);
/* The regions created so far, in creation order: the first, and each one's
 * next (NULL at the end), read with an acquire that pairs with the release
 * that appended it. */
CM_HIDDEN cm_region_t *cm_pagemap_first_region(void);
CM_INLINE cm_region_t *cm_pagemap_next_region(const cm_region_t *r) {
    return atomic_load_explicit(&r->next, memory_order_acquire);
}
/* The arena's own flat page map: the arena (arena.c) is one reservation of
 * up to 64 GiB whose first 4 MiB hold a flat array of page-map entries, one
 * per 64 KiB unit of the 64 GiB window that starts at its base (the map's
 * own 64 units included, whose entries stay 0), so that free finds a
 * block's entry with a load of the base, a subtract, a shift, a compare
 * with a constant and one load (four instructions fewer than
 * cm_pagemap_get). Entries of the window past the reservation's end are
 * kept too (pagemap.c writes them for whatever of ours the kernel put
 * there) and read 0 elsewhere, as entries of no block do. Any address
 * outside the window takes cm_pagemap_get, which holds every entry. base is
 * CM_ARENA_NONE until it is written, once, before any span of the arena
 * exists: an address minus CM_ARENA_NONE is outside every window, and a
 * stale value only sends a reader to cm_pagemap_get, so relaxed loads are
 * enough. units is the reservation's length (the map included), for
 * arena.c. */
#define CM_ARENA_MAX_SHIFT 36 /* 64 GiB */
#define CM_ARENA_MAX_UNITS ((size_t)1 << (CM_ARENA_MAX_SHIFT - CM_UNIT_SHIFT))
#define CM_ARENA_TABLE_BYTES (CM_ARENA_MAX_UNITS * sizeof(uint32_t))
#define CM_ARENA_NONE ((uintptr_t)1 << 63)
typedef struct cm_arena_range {
    _Atomic uintptr_t base;  /* the reservation's start: the flat map; CM_ARENA_NONE until it is made */
    _Atomic uintptr_t units; /* the reservation's length in units; 0 until then */
} cm_arena_range_t;
CM_HIDDEN extern cm_arena_range_t cm_arena_range;

CM_INLINE uintptr_t cm_arena_base(void) { return atomic_load_explicit(&cm_arena_range.base, memory_order_relaxed); }
/* The index of a's unit in the flat map at base. */
CM_INLINE uintptr_t cm_arena_unit(uintptr_t base, uintptr_t a) { return (a - base) >> CM_UNIT_SHIFT; }
/* Whether unit (from cm_arena_unit) has an entry in the flat map: it is in
 * the window (a constant compare: free's test and branch take 8 bytes). */
CM_INLINE bool cm_arena_has_unit(uintptr_t unit) { return unit < CM_ARENA_MAX_UNITS; }
CM_INLINE _Atomic uint32_t *cm_arena_entry_at(uintptr_t base, uintptr_t unit) {
    return (_Atomic uint32_t *)base + unit;
}
/* Reserve the arena (CAGEMALLOC_ARENA_RESERVE bytes, less if the OS says
 * no, none if 0) and publish it in cm_arena_range; once, at init. */
CM_HIDDEN void cm_arena_reserve(void);

CM_INLINE uint32_t cm_entry_make(uint32_t ref, unsigned cls) { return ref << CM_ENTRY_REF_SHIFT | cls; }
CM_INLINE uint32_t cm_entry_ref(uint32_t e) { return e >> CM_ENTRY_REF_SHIFT; }
CM_INLINE unsigned cm_entry_class(uint32_t e) { return e & CM_ENTRY_CLASS_MASK; }

/* ---------------------------------------------------------------- OS layer */
CM_HIDDEN void cm_os_init(void);                            /* find the vDSO clock and AT_RANDOM */
/* cm_os_map and the reservations never take transparent huge pages (os.c says why) */
CM_HIDDEN void *cm_os_map(size_t size);                     /* NULL on failure (or refused by overcommit policy) */
CM_HIDDEN void *cm_os_reserve(size_t size);                 /* mostly untouched: MAP_NORESERVE, not counted committed */
CM_HIDDEN void *cm_os_reserve_aligned(size_t size, size_t align);
CM_HIDDEN void cm_os_unreserve(void *p, size_t size);       /* unmap a reservation */
CM_HIDDEN void *cm_os_map_aligned(size_t size, size_t align); /* a large block: the system's huge-page policy */
/* The same, at the offset `like` (aligned to align) has within 2 MiB: the
 * kernel moves pages between two such ranges (cm_os_move) a page table at a
 * time, between others a page at a time, 3-4x slower. */
CM_HIDDEN void *cm_os_map_congruent(size_t size, size_t align, const void *like);
CM_HIDDEN void cm_os_unmap(void *p, size_t size);
CM_HIDDEN void cm_os_decommit(void *p, size_t size);
CM_HIDDEN void cm_os_purge(void *p, size_t size);      /* pages inside a free block: resident no more */
CM_HIDDEN bool cm_os_grow_in_place(void *p, size_t old_size, size_t new_size);
CM_HIDDEN bool cm_os_move(void *p, size_t size, void *target);
CM_HIDDEN bool cm_os_random(void *buf, size_t n);          /* false: getrandom failed, weaker fallback used */
CM_HIDDEN bool cm_os_clock_in_vdso(void);
CM_HIDDEN uintptr_t cm_os_main_program(void);                /* an address inside the main program (AT_PHDR) */
CM_HIDDEN size_t cm_os_address_limit(void);                /* RLIMIT_AS in bytes, SIZE_MAX if none */
CM_HIDDEN int cm_os_memfd(size_t size);                      /* an anonymous file of size bytes, or -1 */
CM_HIDDEN void cm_os_close(int fd);
CM_HIDDEN void *cm_os_map_file(void *at, size_t size, int prot, int fd); /* PROT_NONE: closed as cm_os_reserve_closed */
/* map fd over [at, at + size), the caller's own view (MAP_FIXED), left out of core dumps */
CM_HIDDEN bool cm_os_map_file_over(void *at, size_t size, int prot, int fd);
CM_HIDDEN char *cm_os_read_file(const char *path, size_t *len, size_t *cap);
CM_HIDDEN void cm_os_write(int fd, const char *buf, size_t n);
CM_HIDDEN uint64_t cm_os_now_ns(void);
CM_HIDDEN void cm_os_yield(void);                            /* sched_yield */
CM_HIDDEN void *cm_os_reserve_closed(size_t size, size_t align);  /* PROT_NONE: neither dumped nor locked */
/* closed, at an address that is offset modulo align; needs address space for size bytes only, mostly */
CM_HIDDEN void *cm_os_reserve_closed_placed(size_t size, size_t align, size_t offset);
CM_HIDDEN bool cm_os_open(void *p, size_t size, int prot, bool file_view); /* mprotect (a file view: into dumps) */

/* ---------------------------------------------------------------- reservations */
/* A large reservation (the arena, the descriptor region, the cage, the
 * class space, a code range's two views) is made closed, and the part of it
 * in use, from its start to the highest address handed out so far, is
 * opened in steps as it grows (reservation.c). start and limit are the
 * reservation's bounds. cm_reservation_open returns false if the kernel
 * would not open it: the caller fails the allocation. */
typedef struct cm_reservation {
    _Atomic uintptr_t opened; /* the open part ends here; 0: nothing opened yet */
    int prot;                 /* what opening grants */
    size_t step;              /* opened this much at a time */
    bool file_view;           /* a shared file mapping, which core dumps hold whole even closed */
} cm_reservation_t;
#define CM_OPEN_STEP ((size_t)1 << 20)            /* descriptors, classes, code: steps of 1 MiB */
#define CM_OPEN_STEP_SPANS ((size_t)32 << 20)     /* superblocks (arena, cage): one call per 32 MiB */
CM_HIDDEN bool cm_reservation_open_slow(cm_reservation_t *r, uintptr_t start, uintptr_t used_end, uintptr_t limit);
/* [.., end) was opened by the thread that made the reservation, before it published it. */
CM_HIDDEN void cm_reservation_opened(cm_reservation_t *r, uintptr_t end);
CM_INLINE bool cm_reservation_open(cm_reservation_t *r, uintptr_t start, uintptr_t used_end, uintptr_t limit) {
    /* acquire: pairs with the release that raised `opened` after its
     * mprotect returned, so our accesses below it come after that call */
    if (used_end <= atomic_load_explicit(&r->opened, memory_order_acquire)) return true;
    return cm_reservation_open_slow(r, start, used_end, limit);
}

/* ---------------------------------------------------------------- options */
typedef struct cm_options {
    bool show_stats;          /* CAGEMALLOC_SHOW_STATS */
    bool verbose;             /* CAGEMALLOC_VERBOSE: report what init decided */
    size_t empty_keep;        /* CAGEMALLOC_EMPTY_KEEP: most bytes of empty superblocks kept committed */
    size_t large_cache;       /* CAGEMALLOC_LARGE_CACHE: bytes of freed large mappings kept */
    uint64_t decay_ns;        /* CAGEMALLOC_DECAY_MS: kept memory idle this long goes back to the OS */
    unsigned klass_shift;     /* CAGEMALLOC_KLASS_SHIFT (0: default; else within the bounds below) */
    unsigned klass_range;     /* CAGEMALLOC_KLASS_RANGE (0: default; else within the bounds below) */
    bool klass_gaps;          /* CAGEMALLOC_KLASS_GAPS: cm_meta_alloc fills class alignment gaps */
    size_t code_range;        /* CAGEMALLOC_CODE_RANGE: bytes of each code range reserved near a module */
    size_t cage_limit;        /* CAGEMALLOC_CAGE_LIMIT: bytes of the cage used (tests; 0: all) */
    size_t arena_reserve;     /* CAGEMALLOC_ARENA_RESERVE: bytes of address space reserved for superblocks at init */
} cm_options_t;
/* The class space's shift and range (log2 of its size), for any setting */
#define CM_KLASS_SHIFT_MIN 3
#define CM_KLASS_SHIFT_MAX 12
#define CM_KLASS_RANGE_MIN 20
#define CM_KLASS_RANGE_MAX 34
CM_HIDDEN extern cm_options_t cm_options;
/* A setting, read as a global set at init (CM_LOAD_SET_ONCE): each
 * one is CAS'ed once from its default (options.c). */
#define CM_OPTION(field) CM_LOAD_SET_ONCE(cm_options.field)

/* ---------------------------------------------------------------- test hooks */
/* A pause point for tests that must run a precise interleaving (a unit test
 * calls allocator internals from inside another operation). Compiled only
 * into the core the unit tests link (CM_TEST_HOOKS); nothing elsewhere. */
#ifdef CM_TEST_HOOKS
CM_HIDDEN extern void (*volatile cm_test_hook)(const char *point);
#define CM_TEST_POINT(name) \
    do {                    \
        if (cm_test_hook) cm_test_hook(name); \
    } while (0)
#else
#define CM_TEST_POINT(name) ((void)0)
#endif

/* ---------------------------------------------------------------- init, errors */
CM_HIDDEN extern _Atomic int cm_initialized;
CM_HIDDEN void cm_init_slow(void);
CM_INLINE void cm_ensure_init(void) {
    if (cm_unlikely(!atomic_load_explicit(&cm_initialized, memory_order_acquire))) cm_init_slow();
}
CM_HIDDEN void cm_options_load(void);
__attribute__((noreturn, cold)) CM_HIDDEN void cm_fatal(const char *func, const char *what, const void *p);
/* "cagemalloc: NAME=VALUE ignored: WHY" on stderr (a setting it cannot use) */
CM_HIDDEN void cm_report_ignored(const char *name, const char *value, const char *why);

/* ---------------------------------------------------------------- pool */
/* What a take from the pool hands a caller that owns no superblock (a
 * thread past its exit hook): a chain of free blocks, or blocks never
 * carved (a fresh superblock, or the rest of a partial one) to carve, whose
 * memory is zero unless fresh_dirty (taken over from another class while
 * still committed, units of the arena released with their pages, or the
 * rest of a superblock in use). */
typedef struct cm_refill {
    void *chain;         /* first block of a chain of `count` free blocks */
    uint32_t count;
    char *fresh;         /* or: the first of `fresh_count` blocks never carved */
    uint32_t fresh_count;
    bool fresh_dirty;
} cm_refill_t;
CM_HIDDEN bool cm_pool_take(unsigned cls, unsigned space, cm_refill_t *out);
/* A superblock of class cls in `space` for heap `heap` of thread `owner`,
 * now OWNED by it: a partial one (its free blocks on the anchor list, and
 * maybe blocks never carved; unless `reclaim`, one holding no live block:
 * for heaps that can be destroyed), or a fresh one (carved 0, dirty if
 * taken over); NULL when out of memory. */
CM_HIDDEN cm_desc_t *cm_pool_acquire(unsigned cls, unsigned space, uint32_t heap, uint32_t owner, bool reclaim);
/* The owner gives d up: the NULL-terminated chain of n blocks at head (its
 * local list) joins the anchor list, and d
 * becomes FULL, PARTIAL, kept fully free, or retired. Blocks never carved
 * stay so: the next owner carves on from d->carved. */
CM_HIDDEN void cm_pool_release(cm_desc_t *d, void *head, uint32_t n);
/* The owner gives d up with every block free, returning its memory (cm_heap_destroy). */
CM_HIDDEN void cm_pool_discard(cm_desc_t *d);
/* The owner takes d's anchor list (remote frees): its head, *n its length. */
CM_HIDDEN void *cm_pool_take_remote(cm_desc_t *d, uint32_t *n);
/* The owner parks exhausted d (anchor OWNED_FULL with no remote frees);
 * false if remote frees arrived (take them instead). */
CM_HIDDEN bool cm_pool_park(cm_desc_t *d);
/* The owner takes parked d, already off its parked list, back (OWNED_FULL
 * -> OWNED; remote frees stay on the anchor list). False if every block had
 * come back and the decay pass (or malloc_trim) retired d meanwhile: its
 * memory is gone and the descriptor no longer the caller's. */
CM_HIDDEN bool cm_pool_unpark(cm_desc_t *d);
/* The owner takes d, off its lists, back into use (its bin's current
 * superblock, or a visit's): true, or false if a remote free found every
 * block free and handed d's span to the pool (then cm_pool_drop d). Set
 * first what keeps remote frees from doing so from now on: d's used count
 * CM_USED_CURRENT, or the heap's visiting flag. */
CM_HIDDEN bool cm_pool_claim(cm_desc_t *d);
/* The owner lets go of d, whose span was handed to the pool under it (a
 * failed cm_pool_claim): the descriptor is released. */
CM_HIDDEN void cm_pool_drop(cm_desc_t *d);
/* Free the chain head..tail of n blocks of d (linked, tail's link to be
 * set here) from a thread that does not own d: one CAS (the common case, d
 * owned and not parked, takes a short path). */
CM_HIDDEN void cm_pool_free_remote(cm_desc_t *d, void *head, void *tail, uint32_t n);
/* Free the chain head..tail of n blocks of d from a thread that does not
 * own d: one CAS (tail NULL: the chain ends in NULL). */
CM_HIDDEN void cm_pool_return_chain(cm_desc_t *d, void *head, void *tail, uint32_t n);
/* Retire every fully free superblock kept committed (malloc_trim). */
CM_HIDDEN bool cm_pool_trim(void);
/* malloc_trim: partly used superblocks no heap owns give back the pages inside their free blocks */
CM_HIDDEN void cm_pool_purge_free_blocks(void);
/* Retire kept superblocks idle for CAGEMALLOC_DECAY_MS, a bounded batch. */
CM_HIDDEN void cm_pool_decay(void);
/* Bytes of completely free superblocks kept committed for reuse. */
CM_HIDDEN size_t cm_pool_kept_bytes(void);
CM_HIDDEN cm_desc_t *cm_pool_desc_of(const void *p);  /* NULL if not a small block of ours */

/* ---------------------------------------------------------------- spaces, the cage */
enum { CM_SPACE_PLAIN = 0, CM_SPACE_CAGE = 1, CM_SPACES = 2 };
#define CM_CAGE_LOW_BITS (CM_CAGE_SIZE - 1)
/* The space of address p: one OR and a compare with the cage's base (its
 * low bits are all set, so an address of the cage ORed with them gives the
 * base). Before the cage exists the base is its low bits alone, which no
 * address >= CM_CAGE_SIZE gives, and below that no block lies. Relaxed: a
 * block of the cage reached this thread after the base was written. */
CM_INLINE unsigned cm_space_of(const void *p) {
    uintptr_t base = __atomic_load_n(&cm_cage_base, __ATOMIC_RELAXED);
    return ((uintptr_t)p | CM_CAGE_LOW_BITS) == base && (uintptr_t)p >= CM_CAGE_SIZE;
}
/* Reserve the cage if nobody has; false if it cannot be reserved. */
CM_HIDDEN bool cm_cage_ensure(void);
/* size bytes (a multiple of 64 KiB) of the cage aligned to align (>= 64
 * KiB), its memory zero; NULL when the cage has no such run free. */
CM_HIDDEN char *cm_cage_claim(size_t size, size_t align);
/* Claim [p, p + size) of the cage; false if any of it is in use. */
CM_HIDDEN bool cm_cage_claim_at(char *p, size_t size);
/* Give back [p, p + size) of the cage, whose pages were returned already. */
CM_HIDDEN void cm_cage_release(char *p, size_t size);

/* ---------------------------------------------------------------- arena */
/* A span of 2^shift bytes (64 KiB .. 1 MiB) aligned to its size in `space`,
 * its page-map entries set to 0; NULL if the OS refuses memory or the cage
 * is full even once the large cache gave back all it held. *dirty: some of
 * its pages were released dirty (not zero). */
CM_HIDDEN char *cm_arena_claim(unsigned shift, unsigned space, bool *dirty);
/* Such a span of the plain space made only of units released dirty into
 * chunks the calling thread is home to (*dirty then true); NULL if none. */
CM_HIDDEN char *cm_arena_claim_own_resident(unsigned shift, bool *dirty);
/* Give back a span whose pages were returned already (decommitted). */
CM_HIDDEN void cm_arena_release(char *span, unsigned shift);
/* Give back a span of the arena (not the cage) with its pages resident, for
 * a span of any size to reuse as they are; cm_arena_purge returns them if
 * none does by then. */
CM_HIDDEN void cm_arena_release_dirty(char *span, unsigned shift);
/* Return the pages of every free unit released dirty; true if any. */
CM_HIDDEN bool cm_arena_purge(void);
CM_HIDDEN bool cm_arena_has_dirty(void);
/* Bytes of free units released dirty, not yet claimed or purged. */
CM_HIDDEN size_t cm_arena_dirty_bytes(void);
/* Return dirty units' pages and unmap every chunk whose units are all
 * free; true if anything was returned. */
CM_HIDDEN bool cm_arena_trim(void);

/* ---------------------------------------------------------------- runs of free bits */
/* A lock-free bitmap of free units (runs.c); its words are reached through
 * `word` (NULL for a word not there yet, which counts as all taken). */
typedef struct cm_runs {
    _Atomic uint64_t *(*word)(void *ctx, uint32_t w);
    void *ctx;
    _Atomic uint32_t lowest; /* no set bit below this word (a hint) */
} cm_runs_t;
/* The lowest run of n set bits in words [0, words) that starts at a
 * multiple of align (a power of two, 1..64), cleared; returns its first
 * bit + 1, or 0 if there is none. */
CM_HIDDEN uint32_t cm_runs_claim(cm_runs_t *r, uint32_t words, uint32_t n, uint32_t align);
/* Clear bits [first, first + n) if all are set; false (nothing taken) if not. */
CM_HIDDEN bool cm_runs_claim_at(cm_runs_t *r, uint32_t first, uint32_t n);
/* Set bits [first, first + n) (they must be clear). */
CM_HIDDEN void cm_runs_free(cm_runs_t *r, uint32_t first, uint32_t n);
/* len ones from bit at. */
CM_INLINE uint64_t cm_bits_mask(unsigned len, unsigned at) {
    return (len >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << len) - 1)) << at;
}
/* Bit i set where bits i..i+len-1 of bits are all set (1 <= len <= 64) and
 * i is a multiple of align (a power of two). */
CM_INLINE uint64_t cm_bits_runs(uint64_t bits, unsigned len, unsigned align) {
    uint64_t x = bits;
    unsigned have = 1;
    while (have * 2 <= len) x &= x >> have, have *= 2;
    if (have < len) x &= x >> (len - have);
    /* a bit every `align`, in the first 65 - len places */
    uint64_t every = align >= 64 ? 1 : ~(uint64_t)0 / ((((uint64_t)1) << align) - 1);
    return x & every & cm_bits_mask(65 - len, 0);
}

/* ---------------------------------------------------------------- free-list links */
/* A free block's first word is the encoded link to the next free block
 * (safe-linking): the next pointer xor a per-process key. glibc's
 * PROTECT_PTR xors in the block's own address instead (shifted right by 12),
 * the only randomness it has; beside a random key the address adds nothing
 * but an instruction on each fast path, and takes away: a block and the
 * next one lie in one superblock, so the two addresses cancel to a small
 * offset and a leaked word would show the key's upper bits in the clear,
 * where without them it shows the key xor a whole address.
 *
 * Every block lies below 2^47 on 8 bytes, so a valid word carries the
 * key's top 17 bits and low 3 bits unchanged, and decodes to a pointer
 * with its top 17 and low 3 bits clear. Decoding checks both, so a corrupted
 * link aborts instead of being followed: a pointer or 4-byte value written
 * over the word's upper half changes the top bits, and a write to its low
 * byte (a counter, a flag) moves the decoded pointer off 8 bytes (7 times
 * in 8); a write confined to bytes 1-5 is not caught here. (A second, keyed
 * check word caught that too, but cost a store per free and half again the
 * instructions: BENCHMARKS.md.)
 * A decoded link is not checked to lie in the same superblock (a check per
 * pop); without the key's 48 secret bits it cannot be aimed at all.
 *
 * The key's top 16 bits (the tag, CM_FREE_TAG, in the word's top 2 bytes)
 * also mark the block as free, which catches double frees cheaply: a block handed out
 * has its first word cleared, so only user data that happens to carry the
 * tag looks free (double_free.c weighs such a word). One word, which both fast paths
 * read or write anyway: hardening adds no memory traffic, only a few
 * register operations. */
typedef struct cm_free_block {
    uintptr_t link;
} cm_free_block_t;

#ifndef CM_HARDENING
#define CM_HARDENING 1 /* cmake -DCAGEMALLOC_HARDENING=OFF sets 0 */
#endif
/* A build-time constant, so the fast paths carry no test of it (a run-time
 * switch cost four instructions per malloc+free pair). */
#define cm_harden ((bool)CM_HARDENING)
CM_HIDDEN extern uintptr_t cm_link_key;  /* CM_FREE_TAG above 48 random bits, per process */
CM_INLINE uintptr_t cm_link_key_get(void) { return CM_LOAD_SET_ONCE(cm_link_key); }

#define CM_LINK_INVALID ((~(uintptr_t)0 << 47) | 7) /* set in no decoded link */

/* Where a free list ends. Hardened, a list's last link and an empty list's
 * raw head (a bin's slot, a superblock's local_free) name this read-only
 * zero word, not NULL: its word decodes to a link that fails the check
 * malloc's pop makes anyway, so the pop tests for no empty bin of its own
 * (the check's out-of-line path tells the two apart: malloc's path is
 * then one 64-byte line, BENCHMARKS.md). Unhardened builds make no check
 * and end lists in NULL. Only the fast paths and the raw heads see the end
 * word: cm_block_set_next writes NULL as it, the cm_block_next_* readers
 * and cm_list_head give it back as NULL, cm_list_raw turns NULL into it. */
CM_HIDDEN extern const uintptr_t cm_list_end;
#if CM_HARDENING
#define CM_LIST_END ((void *)&cm_list_end)
#else
#define CM_LIST_END NULL
#endif
CM_INLINE void *cm_list_head(void *raw) { return raw == CM_LIST_END ? NULL : raw; }
CM_INLINE void *cm_list_raw(void *head) { return head ? head : CM_LIST_END; }

/* next (a block or CM_LIST_END) as a link, keyed with key: cm_link_key,
 * or the thread's copy. */
CM_INLINE uintptr_t cm_link_encode(const void *next, uintptr_t key) {
    return cm_likely(cm_harden) ? (uintptr_t)next ^ key : (uintptr_t)next;
}
/* next, a block (or, at the end of the list, NULL or CM_LIST_END), as
 * block's link. */
CM_INLINE void cm_block_set_next(void *block, void *next) {
    ((cm_free_block_t *)block)->link = cm_link_encode(cm_list_raw(next), cm_link_key_get());
}
/* A link decoded with key (if hardened) but not verified: a block or
 * CM_LIST_END if cm_block_set_next or a fast path wrote the word; for other
 * words, almost always a value with CM_LINK_INVALID bits set. */
CM_INLINE void *cm_link_decode(uintptr_t link, uintptr_t key) {
    return (void *)(cm_likely(cm_harden) ? link ^ key : link);
}
/* block's link, decoded so. */
CM_INLINE void *cm_block_link_keyed(const void *block, uintptr_t key) {
    return cm_link_decode(((const cm_free_block_t *)block)->link, key);
}
/* The next block after `block` as its link says, NULL at the list's end;
 * not verified. */
CM_INLINE void *cm_block_next_unverified(const void *block) {
    return cm_list_head(cm_block_link_keyed(block, cm_link_key_get()));
}
/* The block after `block` on a free list (NULL at its end), verified: a
 * hardened link must decode to a possible block address, no bit of
 * CM_LINK_INVALID set, or the process aborts naming func. */
CM_INLINE void *cm_block_decode(const void *block, const char *func) {
    void *next = cm_block_next_unverified(block);
    if (cm_unlikely(cm_harden && ((uintptr_t)next & CM_LINK_INVALID))) cm_fatal(func, "corrupted free list", block);
    return next;
}
/* The next block of a list being walked (reported as a corrupted link in free). */
CM_INLINE void *cm_block_peek_next(const void *block) { return cm_block_decode(block, "free"); }
/* A block handed out must never look free: its first word becomes its own
 * address, which has no tag (bit 55 is set in every tag and clear in every
 * user-space address) and tells the caller nothing it does not know; a
 * 3-byte store, where storing 0 takes 7. */
CM_INLINE void cm_block_mark_used(void *block) {
    if (cm_likely(cm_harden)) ((cm_free_block_t *)block)->link = (uintptr_t)block;
}
/* The decoded link of a block believed free, NULL if it does not verify
 * (racy walks, which stop there). */
CM_INLINE void *cm_block_next_if_valid(const void *block) {
    void *next = cm_block_next_unverified(block);
    return cm_harden && ((uintptr_t)next & CM_LINK_INVALID) ? NULL : next;
}
/* The tag: the link key's top 16 bits, the same in every process (the
 * other 48 are random), so free compares a word's top 2 bytes with a
 * constant, where a per-process tag cost a load on free's path. Knowing it
 * helps no forger: a link must still decode, through the 48 secret bits, to
 * a block of the right class before it is even weighed (double_free.c),
 * and a word that carries the tag by design only sends its free down the
 * slow path. Chosen to be rare in data: bit 55 (the top bit of byte 6) is
 * clear in pointers, small integers and ASCII text, bit 63 is set in small
 * negative integers, byte 6 (0xC1) never occurs in UTF-8 text, and as a
 * double the word is about 1e-237. */
#define CM_FREE_TAG ((uint16_t)0x0EC1)
/* True if block's first word carries the tag, i.e. it looks free already:
 * one compare of its top 2 bytes with the constant. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CM_TAG_OFFSET 6
#else
#define CM_TAG_OFFSET 0
#endif
CM_INLINE bool cm_block_looks_free(const void *block) {
    if (cm_unlikely(!cm_harden)) return false;
    uint16_t word_tag; /* __builtin_: the library is built with -fno-builtin */
    __builtin_memcpy(&word_tag, (const char *)block + CM_TAG_OFFSET, 2);
    return word_tag == CM_FREE_TAG;
}

/* The whole pages of free block b (of block_size bytes) past its link go
 * back to the OS; the link stays, and the rest reads as zeros when the block
 * is used again. What malloc_trim does to the free blocks it can reach, as
 * glibc's gives back the pages of its free chunks. */
CM_INLINE void cm_free_block_purge(void *b, size_t block_size) {
    uintptr_t from = ((uintptr_t)b + sizeof(cm_free_block_t) + CM_PAGE_SIZE - 1) & ~(CM_PAGE_SIZE - 1);
    uintptr_t to = ((uintptr_t)b + block_size) & ~(CM_PAGE_SIZE - 1);
    if (to > from) cm_os_purge((void *)from, to - from);
}

/* ---------------------------------------------------------------- large blocks */
CM_HIDDEN cm_desc_t *cm_large_alloc(size_t size, size_t align, bool zero, unsigned space);
CM_HIDDEN void cm_large_free(cm_desc_t *d);
/* Free a large block owned by a heap of another thread (or by none). */
CM_HIDDEN void cm_large_free_remote(cm_desc_t *d);
CM_HIDDEN void *cm_large_realloc(cm_desc_t *d, size_t size);
CM_HIDDEN size_t cm_large_usable(const cm_desc_t *d);
CM_HIDDEN bool cm_large_trim(void);
CM_HIDDEN void cm_large_decay(void); /* unmap cached mappings idle past the decay time */
/* Fresh pages were claimed for superblocks: the cache gives as many back
 * (per MiB of such growth), so memory nobody reuses is not held beside it. */
CM_HIDDEN void cm_large_give_way(size_t bytes);

/* ---------------------------------------------------------------- heaps */
/* A bin's free blocks are not in its record but in the heap's bin_head
 * array, whose 8-byte slots malloc reaches with one scaled index. */
typedef struct cm_bin {
    uint32_t current; /* ref of the current superblock, 0 if none */
    uint32_t avail;  /* first of the superblocks with free blocks (CM_AT_AVAIL) */
} cm_bin_t;

#define CM_MAILBOX_SLOTS 8
/* Records are type-stable (never unmapped, recycled), so a remote free may
 * write a stale heap's mailbox: the owner validates every ref it reads. */
struct cm_heap {
    void *bin_head[CM_NUM_CLASSES + 1]; /* per class, the bin's free blocks: malloc pops here (first: reset clears from it) */
    cm_bin_t bins[CM_NUM_CLASSES + 1];
    uint32_t ref;              /* this record's name in the pool of records */
    uint32_t thread;           /* the owning thread's ref (its default heap's), 0 for none */
    uint32_t parked;           /* exhausted superblocks (CM_AT_PARKED) */
    uint32_t large;            /* large blocks (CM_AT_LARGE) */
    uint32_t large_count;      /* on that list, zombies included */
    uint32_t next_of_thread;   /* the thread's next heap (a list from its default heap) */
    uint32_t refills;          /* superblocks taken from the pool: paces cm_pool_decay and the quiet-class sweep */
    uint32_t trim_seen;        /* cm_trim_epoch when last collected */
    uint64_t refilled;         /* bit per class: its bin refilled since the last quiet-class sweep */
    uint64_t holding;          /* bit per class: refilled before that, not yet found holding nothing */
    uint8_t space;             /* CM_SPACE_*: where its blocks live */
    /* 1 for a thread's default heaps (plain and cage), which cannot be
     * destroyed: other threads may batch their frees into its superblocks
     * (remote.c), and it may take superblocks holding others' live blocks.
     * Atomic: remote freers read it through a heap ref that may be stale. */
    _Atomic uint8_t lasting;
    /* 1 while cm_heap_visit walks it: remote frees hand none of its
     * superblocks to the pool meanwhile (pool.c, rehome_if_idle) */
    _Atomic uint8_t visiting;
    _Atomic uint32_t pool_next;  /* next free record, while in the pool */
    _Atomic uint32_t mailbox[CM_MAILBOX_SLOTS]; /* superblocks unparked by remote frees */
    _Atomic uint32_t overflow;   /* the mailbox was full: scan the parked list */
    _Atomic uint32_t zombies;    /* large blocks freed by other threads, still linked */
    /* A default heap's record: its thread's remote frees waiting to go to one
     * superblock together (remote.c), published for cm_heap_visit. */
    _Atomic uint64_t remote_batch; /* cm_remote_batch_make(newest block, blocks), 0 if none */
    cm_desc_t *remote_batch_desc;  /* thread-private: the batch's superblock, NULL if none */
    void *remote_batch_tail;       /* thread-private: the batch's first block, its link NULL */
    uint32_t remote_batch_max;     /* thread-private: blocks the batch may hold */
} __attribute__((aligned(CM_CACHE_LINE))); /* records sit side by side: no line shared by two threads */
/* (A pair of lines is, at every other boundary, unlike descriptors: with the
 * hot bins at one end and remote-free state at the other, 128-byte records
 * measured the same and would take an empty heap over 1 KiB.) */
_Static_assert(CM_NUM_CLASSES < 64, "a heap's class masks have a bit per class");

/* A zeroed record of ref != 0 (space CM_SPACE_PLAIN) but for its bins, which
 * are empty (CM_LIST_END), or NULL (no memory, or all records in use). */
CM_HIDDEN cm_heap_t *cm_heap_record_get(void);
CM_HIDDEN void cm_heap_record_put(cm_heap_t *h);
CM_HIDDEN cm_heap_t *cm_heap_record(uint32_t ref);  /* NULL if no such record */
CM_HIDDEN uint32_t cm_heap_record_limit(void);     /* every record handed out has a ref below this */

/* Remote frees (remote.c). A thread's batch is published as one word,
 * {blocks:16, being handed over:1, newest block's address:47}: the blocks
 * are a chain linked as on any free list, from the newest to the first,
 * whose link is NULL. */
#define CM_REMOTE_BATCH_SHIFT 48
#define CM_REMOTE_BATCH_FLUSHING ((uint64_t)1 << CM_ADDRESS_BITS)
CM_INLINE uint64_t cm_remote_batch_make(const void *newest, uint32_t count) {
    return (uint64_t)count << CM_REMOTE_BATCH_SHIFT | (uintptr_t)newest;
}
CM_INLINE void *cm_remote_batch_newest(uint64_t b) {
    return (void *)(uintptr_t)(b & (CM_REMOTE_BATCH_FLUSHING - 1));
}
CM_INLINE uint32_t cm_remote_batch_count(uint64_t b) { return (uint32_t)(b >> CM_REMOTE_BATCH_SHIFT); }
/* Free p, a block of d that another thread's heap owns (or none does), when
 * it cannot join the calling thread's batch. */
CM_HIDDEN CM_NOINLINE void cm_free_remote_slow(void *p, cm_desc_t *d);
/* Hand the calling thread's waiting remote frees over now. */
CM_HIDDEN void cm_remote_flush(void);
/* Heap record r's batch word, 0 if there is none (or no record r); read
 * with acquire, so the links of the chain it names are visible. */
CM_HIDDEN uint64_t cm_remote_batch_word(uint32_t r);
/* The superblock of a batch word's blocks (they keep it while they wait). */
CM_HIDDEN cm_desc_t *cm_remote_batch_desc(uint64_t b);

/* Per thread, in initial-exec TLS (kept small: glibc's static TLS surplus
 * for dlopen is about 1.6 KiB). Before the thread starts and after its exit
 * hook, heap is the never-usable cm_heap_unstarted (and cage, before the
 * thread's first cage allocation, cm_cage_unstarted), so the fast paths need
 * no state test: every bin is empty and no superblock has owner CM_NO_THREAD.
 * The unstarted records have ref 0, which no real heap has. */
typedef struct cm_thread {
    cm_heap_t *heap;   /* the default heap */
    cm_heap_t *cage;   /* the default cage heap */
    uint64_t free_key; /* CM_FREE_KEY(the thread's ref): heap->ref, or CM_NO_THREAD */
    /* cm_link_key, copied when the thread starts (before, CM_LINK_INVALID:
     * heap.c): free's fast path, which uses it only past the owner test (so
     * only in a started thread), reaches it from the TLS base it holds, 2
     * bytes shorter a load */
    uintptr_t link_key;
    uintptr_t link_invalid; /* CM_LINK_INVALID, kept likewise for malloc's link check */
    int state;         /* CM_THREAD_NEW, _ACTIVE, or _DEAD (after its exit hook) */
} cm_thread_t;
enum { CM_THREAD_NEW = 0, CM_THREAD_ACTIVE = 1, CM_THREAD_DEAD = 2 };
#define CM_NO_THREAD UINT32_MAX
CM_HIDDEN extern __thread cm_thread_t cm_thread __attribute__((tls_model("initial-exec")));
CM_HIDDEN extern cm_heap_t cm_heap_unstarted, cm_cage_unstarted;
CM_HIDDEN extern _Atomic uint32_t cm_trim_epoch;

/* The calling thread's default heap, for the fast paths. */
CM_INLINE cm_heap_t *cm_my_heap(void) { return cm_thread.heap; }
/* The calling thread's ref (the owner of what its heaps own), or CM_NO_THREAD. */
CM_INLINE uint32_t cm_my_ref(void) { return (uint32_t)(cm_thread.free_key >> 32); }

/* The bin's current superblock, NULL if none. */
CM_INLINE cm_desc_t *cm_bin_current(const cm_bin_t *bin) {
    return bin->current ? cm_desc_from_ref(bin->current) : NULL;
}

/* Pop a block of a bin (head: its bin_head slot), NULL if it is empty.
 * The compiler must assume a block's words may alias the slot: pop clears
 * the block before it updates the slot. The next pop reads the next block's
 * link: its line is fetched now, while the caller works (a block that
 * waited long on the list is out of the cache: 6-14% off mimalloc-bench's
 * larson; a prefetch of the list's end does nothing). Hardened, an empty
 * bin holds CM_LIST_END, whose word fails the link check like a corrupted
 * one: the test for it is off the path. */
CM_INLINE void *cm_bin_pop(void **head) {
    void *b = *head;
    if (!cm_harden && b == NULL) return NULL;
    /* The key and the check's mask are the thread's copies (a thread pops
     * only its own heaps' bins, and before it starts, only the empty bins of
     * cm_heap_unstarted), which the TLS base it holds reaches in 5 bytes an
     * instruction where the global key takes 7 and the mask, a 64-bit
     * constant, 13. Checked before the forged link could be followed. */
    void *next = cm_block_link_keyed(b, cm_thread.link_key);
#if CM_HARDENING && defined(__x86_64__)
    /* gcc loads and ands a %fs: operand where one test does: 3 bytes more
     * on malloc's path, whose length is what hardening costs (BENCHMARKS.md) */
    __asm__ goto("testq %0, %1\n\tjnz %l[not_a_link]" : : "r"(next), "m"(cm_thread.link_invalid) : "cc" : not_a_link);
#else
    if (cm_unlikely(cm_harden && ((uintptr_t)next & cm_thread.link_invalid))) goto not_a_link;
#endif
    cm_block_mark_used(b);
    *head = next;
    __builtin_prefetch(next);
    return b;
not_a_link:
    if (b == CM_LIST_END) return NULL;
    cm_fatal("malloc", "corrupted free list", b);
}

/* Free p, a block of d that another thread's heap owns (or none does):
 * onto the calling thread's waiting batch for d if it has room, plain
 * stores only; remote.c says when a batch goes. */
CM_INLINE void cm_free_remote(void *p, cm_desc_t *d) {
    cm_heap_t *me = cm_thread.heap;
    /* relaxed: only this thread writes its word */
    uint64_t batch = atomic_load_explicit(&me->remote_batch, memory_order_relaxed);
    uint32_t n = cm_remote_batch_count(batch);
    if (cm_likely(me->remote_batch_desc == d && n < me->remote_batch_max)) {
        cm_block_set_next(p, cm_remote_batch_newest(batch));
        /* release: a visitor that reads the word (acquire) sees the chain's links */
        atomic_store_explicit(&me->remote_batch, cm_remote_batch_make(p, n + 1), memory_order_release);
        return;
    }
    cm_free_remote_slow(p, d);
}

/* The slow paths (heap_alloc.c). */
CM_HIDDEN CM_NOINLINE void *cm_heap_refill_alloc(cm_heap_t *h, unsigned cls, bool zero);
CM_HIDDEN CM_NOINLINE void cm_free_small_slow(void *p, cm_desc_t *d);
CM_HIDDEN void *cm_heap_large_alloc(cm_heap_t *h, size_t size, size_t align, bool zero);
CM_HIDDEN void cm_free_large(cm_desc_t *d);
/* Abort, naming func, unless the calling thread owns h (the owner rule). */
CM_HIDDEN void cm_heap_check_owner(const cm_heap_t *h, const char *func);
/* Give back whatever h holds unused: its fully free superblocks go to the pool. */
CM_HIDDEN void cm_heap_collect_owned(cm_heap_t *h);
/* Bring every free block of h onto its superblocks' local lists (none
 * current, remote frees taken, zombies unlinked): for cm_heap_visit. */
CM_HIDDEN void cm_heap_gather(cm_heap_t *h);
/* Every parked superblock of h joins avail (or, retired, is dropped). */
CM_HIDDEN void cm_heap_unpark_all(cm_heap_t *h);
/* Give up everything h holds (abandon: blocks stay valid), or move it to `to`. */
CM_HIDDEN void cm_heap_abandon(cm_heap_t *h);
CM_HIDDEN void cm_heap_move_all(cm_heap_t *h, cm_heap_t *to);
CM_HIDDEN void cm_heap_drain_mailbox(cm_heap_t *h);
/* A remote free made parked superblock desc_ref usable again: tell its heap. */
CM_HIDDEN void cm_heap_notify(uint32_t heap_ref, uint32_t desc_ref);
/* Start the calling thread; false if it cannot have a heap (dead, or no record). */
CM_HIDDEN bool cm_thread_start(void);
/* The calling thread's default heap of `space`, made (and the thread
 * started) if need be; NULL if it cannot have one. */
CM_HIDDEN cm_heap_t *cm_thread_heap(unsigned space);
CM_HIDDEN void cm_thread_global_init(void);
/* One block of class cls in `space` for a thread without a heap, from the pool. */
CM_HIDDEN void *cm_alloc_unowned(unsigned cls, bool zero, unsigned space);

/* ---------------------------------------------------------------- stats */
typedef struct cm_counters {
    _Atomic size_t mapped, committed, returned, large_live, large_cached;
    _Atomic size_t superblocks_live, os_calls, large_count;
    _Atomic int64_t sb_live[CM_NUM_CLASSES + 1];
} cm_counters_t;
CM_HIDDEN extern cm_counters_t cm_counters;
/* Relaxed: counters are statistics; no decision other than reporting reads them. */
CM_INLINE void cm_count(_Atomic size_t *c, size_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }
CM_INLINE void cm_uncount(_Atomic size_t *c, size_t n) { atomic_fetch_sub_explicit(c, n, memory_order_relaxed); }
CM_HIDDEN void cm_stats_report(int fd);
CM_HIDDEN void cm_stats_verbose_init(const char *secret_source, const char *clock_source);

#endif /* CM_INTERNAL_H */
