/* cagemalloc: a lock-free malloc for Linux x86-64.
 *
 * Two ways to use it:
 *  - As a drop-in replacement: link libcagemalloc.so or load it with
 *    LD_PRELOAD. Then malloc, free, calloc, realloc, reallocarray,
 *    aligned_alloc, posix_memalign, memalign, valloc, pvalloc, C23's
 *    free_sized and free_aligned_sized, malloc_usable_size, malloc_trim,
 *    malloc_stats, mallinfo2 and the C++ operators new/delete are
 *    cagemalloc's.
 *  - Through the prefixed API below, without replacing the system malloc
 *    (link libcagemalloc.a). Blocks from cm_* must be released with cm_free
 *    or cm_realloc; with the shared library, cm_free and free are the same.
 *
 * Guarantees (both ways): every block of size >= 16 is 16-byte aligned;
 * a size that cannot be served gives NULL with errno ENOMEM; no call ever
 * takes a lock or waits for another thread. A free of a pointer cagemalloc
 * did not return, or a double free it detects, prints one line naming the
 * function and the pointer on stderr and calls abort().
 */
#ifndef CAGEMALLOC_H
#define CAGEMALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CM_API __attribute__((visibility("default")))
#define CM_MALLOC_ATTRS __attribute__((malloc, warn_unused_result))
#else
#define CM_API
#define CM_MALLOC_ATTRS
#endif

/* A read of a global that the library sets once, by a CAS race between the
 * threads that first need it (cm_cage_base): plain, so an instruction can
 * fold it in; atomic under ThreadSanitizer, which counts the failed CAS of
 * a late racer (a read in C11) as a write (google/sanitizers#1520). */
#if defined(__SANITIZE_THREAD__) /* gcc's way to say ThreadSanitizer */
#define CM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) /* clang's */
#define CM_TSAN 1
#endif
#endif
#ifdef CM_TSAN
#define CM_LOAD_SET_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#else
#define CM_LOAD_SET_ONCE(x) (x)
#endif

#define CAGEMALLOC_VERSION_MAJOR 0
#define CAGEMALLOC_VERSION_MINOR 1

/* Allocate at least size bytes. cm_malloc(0) returns a unique pointer that
 * must be freed. NULL with errno ENOMEM when the size cannot be served. */
CM_API CM_MALLOC_ATTRS void *cm_malloc(size_t size);

/* Release a block from any cm_ allocation function (or, with the shared
 * library, from malloc). cm_free(NULL) does nothing. */
CM_API void cm_free(void *ptr);

/* Allocate count * size zeroed bytes; NULL with errno ENOMEM if the product
 * overflows or cannot be served. */
CM_API CM_MALLOC_ATTRS void *cm_calloc(size_t count, size_t size);

/* Resize a block, keeping min(old, new) bytes of its contents.
 * cm_realloc(NULL, n) is cm_malloc(n). cm_realloc(p, 0) with p != NULL
 * frees p and returns NULL, as glibc does. On failure returns NULL with
 * errno ENOMEM and leaves ptr untouched. */
CM_API void *cm_realloc(void *ptr, size_t size);

/* Allocate size bytes aligned to alignment, which must be a power of two
 * (EINVAL otherwise). Any power of two works, 4 MiB and beyond included. */
CM_API CM_MALLOC_ATTRS void *cm_aligned_alloc(size_t alignment, size_t size);

/* The number of bytes usable in the block at ptr (>= the size requested;
 * all of them may be written). 0 for NULL. */
CM_API size_t cm_usable_size(const void *ptr);

/* Return every page that can be returned to the OS: the calling thread's
 * heaps give back their fully free superblocks and the pages inside their
 * free blocks (past each block's first word), superblocks left by exited
 * threads the pages inside theirs, and kept superblocks, cached large
 * mappings and all-free chunks go back; every other thread's heaps do the
 * same at their next allocation that refills. malloc_trim(0) is this.
 * Returns 1 if memory was returned, 0 otherwise. */
CM_API int cm_trim(void);

/* Write the statistics report (see README: CAGEMALLOC_SHOW_STATS) to fd. */
CM_API void cm_stats_print(int fd);

/* A snapshot of the allocator's counters, all in bytes unless named so. */
typedef struct cm_stats {
    size_t mapped;            /* address space obtained from the OS */
    size_t committed;         /* of which backed by memory (not returned) */
    size_t returned;          /* bytes handed back to the OS so far (madvise/munmap) */
    size_t large_live;        /* bytes in live large blocks */
    size_t large_cached;      /* bytes in freed large mappings kept for reuse */
    size_t superblocks_live;  /* superblocks that currently belong to a size class */
    size_t os_calls;          /* mmap + munmap + madvise + mremap calls made */
} cm_stats_t;

/* Fill *out with the current counters (they are updated without locks, so
 * a snapshot taken while other threads run is approximate). */
CM_API void cm_stats_get(cm_stats_t *out);

/* ------------------------------------------------------------------------
 * Heaps (mimalloc's first-class heaps).
 *
 * A heap owns the superblocks its blocks come from. Every thread has a
 * default heap, which malloc uses; cm_heap_new makes more, for an arena that
 * cm_heap_destroy frees at once, or to keep a data structure's blocks
 * together. A heap belongs to the thread that made it (its owner): only
 * that thread may allocate from it or call cm_heap_destroy, _delete,
 * _collect or _visit on it; any other thread calling them gets a one-line
 * message on stderr and abort(), never corruption. Blocks of any heap are
 * freed with free/cm_free (or resized with realloc/cm_realloc) by any
 * thread. When the owner exits, its heaps are deleted (as cm_heap_delete:
 * their blocks stay valid and are freed as usual); the handle is then dead.
 * A dead handle (after cm_heap_delete, cm_heap_destroy or its owner's exit)
 * fails the owner test in the same way, until a later cm_heap_new reuses
 * its record (the handle then names that new heap).
 * cm_heap_contains may be called by any thread.
 * ---------------------------------------------------------------------- */
typedef struct cm_heap cm_heap_t;

/* A new empty heap owned by the calling thread; NULL with errno ENOMEM. */
CM_API cm_heap_t *cm_heap_new(void);
/* The calling thread's default heap, the one malloc uses (NULL, ENOMEM, in
 * a thread that cannot have one: past its exit, or out of memory). */
CM_API cm_heap_t *cm_heap_get_default(void);
/* As cm_malloc, cm_calloc, cm_aligned_alloc, allocating in h. */
CM_API CM_MALLOC_ATTRS void *cm_heap_malloc(cm_heap_t *h, size_t size);
CM_API CM_MALLOC_ATTRS void *cm_heap_calloc(cm_heap_t *h, size_t count, size_t size);
CM_API CM_MALLOC_ATTRS void *cm_heap_aligned_alloc(cm_heap_t *h, size_t alignment, size_t size);
/* As cm_realloc; the result is in h (p, from any heap, moves if need be). */
CM_API void *cm_heap_realloc(cm_heap_t *h, void *p, size_t size);
/* Free every block of h at once (no per-block work), then delete h. Its
 * blocks must not be used or freed afterwards. Not for the default heap. */
CM_API void cm_heap_destroy(cm_heap_t *h);
/* Delete h; its live blocks stay valid, adopted by the owner's default heap.
 * Not for the default heap. */
CM_API void cm_heap_delete(cm_heap_t *h);
/* Give back what h holds unused: its fully free superblocks go to the
 * shared pool and the pages inside its free blocks to the OS; force also
 * does what cm_trim does to the pool and the large cache. */
CM_API void cm_heap_collect(cm_heap_t *h, int force);
/* 1 if p points into a block of h, live or free (for a large block: into
 * its first 64 KiB, where the page map names it), 0 otherwise. */
CM_API int cm_heap_contains(const cm_heap_t *h, const void *p);
/* Call fn(block, usable_size, arg) for every live block of h once; a block
 * freed by any thread whose free() has returned is not live. A non-zero
 * return stops the walk and is returned; 0 when all were visited. fn must
 * not allocate from h or free its blocks. */
typedef int (*cm_block_visitor)(void *block, size_t usable_size, void *arg);
CM_API int cm_heap_visit(cm_heap_t *h, cm_block_visitor fn, void *arg);

/* ------------------------------------------------------------------------
 * The cage: 32-bit compressed references (Oilpan's pointer compression).
 *
 * One reservation of 2^(31 + S) bytes (S = CAGEMALLOC_CAGE_SHIFT, fixed when
 * the library is built: 1 gives 4 GiB, 2 gives 8 GiB, 3 gives 16 GiB),
 * placed so that every address inside it has bit 31 + S set. A pointer into
 * the cage compresses to 32 bits, p >> S, whose top bit is then set; it
 * decompresses with a sign extension, a shift and one AND with cm_cage_base,
 * with no branch. NULL compresses to 0 and CM_SENTINEL to 1, and both come
 * back unchanged, before the cage exists too.
 *
 * The cage is reserved at its first use without committing memory; its
 * superblocks are committed as they are needed and returned as they empty.
 * Cage blocks come from heaps inside the cage (each thread has a default
 * cage heap; cm_heap_new_in_cage makes more, with the owner rule of every
 * heap), through the same lock-free fast paths as malloc. free, cm_free,
 * realloc and malloc_usable_size take cage blocks; realloc (and
 * cm_cage_realloc) of a cage block gives a cage block. When the cage is
 * full, the cm_cage_ functions give NULL with errno ENOMEM: never a block
 * outside the cage.
 * A program built against this header must use the S the library was built
 * with: the name of cm_cage_base carries S, so a mismatch fails to link.
 * ---------------------------------------------------------------------- */
#ifndef CAGEMALLOC_CAGE_SHIFT
#define CAGEMALLOC_CAGE_SHIFT 1
#endif
#if CAGEMALLOC_CAGE_SHIFT < 1 || CAGEMALLOC_CAGE_SHIFT > 3
#error "CAGEMALLOC_CAGE_SHIFT must be 1, 2 or 3 (a 4, 8 or 16 GiB cage)"
#endif
#define CM_CAGE_SIZE ((uintptr_t)1 << (31 + CAGEMALLOC_CAGE_SHIFT))
/* The pointer that compresses to 1: a non-null "no object" marker. */
#define CM_SENTINEL ((void *)((uintptr_t)1 << CAGEMALLOC_CAGE_SHIFT))

#define CM_CAGE_JOIN_(a, b) a##b
#define CM_CAGE_JOIN(a, b) CM_CAGE_JOIN_(a, b)
#define cm_cage_base CM_CAGE_JOIN(cm_cage_base_shift, CAGEMALLOC_CAGE_SHIFT)
/* The cage's start with its low 31 + S bits set; only those low bits until
 * the cage exists. Written once, when the cage is made. */
CM_API extern uintptr_t cm_cage_base;

static inline uint32_t cm_compress(const void *p) {
    return (uint32_t)((uintptr_t)p >> CAGEMALLOC_CAGE_SHIFT);
}
static inline void *cm_decompress(uint32_t c) {
    return (void *)(((uintptr_t)(intptr_t)(int32_t)c << CAGEMALLOC_CAGE_SHIFT) & CM_LOAD_SET_ONCE(cm_cage_base));
}

/* As malloc, calloc, realloc and aligned_alloc, inside the cage, from the
 * calling thread's default cage heap. cm_cage_realloc(p, n) moves p into
 * the cage if it is not there. NULL with errno ENOMEM when the cage is full
 * or cannot be reserved. */
CM_API CM_MALLOC_ATTRS void *cm_cage_malloc(size_t size);
CM_API CM_MALLOC_ATTRS void *cm_cage_calloc(size_t count, size_t size);
CM_API void *cm_cage_realloc(void *p, size_t size);
CM_API CM_MALLOC_ATTRS void *cm_cage_aligned_alloc(size_t alignment, size_t size);
/* cm_free: a block's free goes to its own superblock whatever heap or
 * space it is in, so this is the same path; any block cm_free takes is
 * accepted. */
CM_API void cm_cage_free(void *p);
/* A new empty heap inside the cage, owned by the calling thread (all cage
 * heaps share the one cage); NULL with errno ENOMEM. */
CM_API cm_heap_t *cm_heap_new_in_cage(void);
/* 1 if p points into the cage's reservation, 0 otherwise. */
CM_API int cm_in_cage(const void *p);

/* ------------------------------------------------------------------------
 * Class space: narrow class pointers (OpenJDK Lilliput's idea).
 *
 * Class metadata lives in one reservation of 2^range bytes whose blocks are
 * aligned to 2^shift, so a class pointer fits in (range - shift) bits:
 * narrow = (klass - base) >> shift. Defaults: shift 10, range 32 (4 GiB),
 * 22-bit narrow pointers. The gaps that alignment leaves after each class
 * are given to cm_meta_alloc, so little of the alignment is lost.
 * Lock-free, usable from any thread. Blocks are not freed by free(): use
 * cm_klass_free and cm_meta_free. Narrow value 0 never names a class (the
 * space's first slot is never handed out), so a runtime may use it as "none".
 * ---------------------------------------------------------------------- */

/* Set shift (3..12) and range (20..34, and range - shift <= 32) before the
 * class space is first used (otherwise CAGEMALLOC_KLASS_SHIFT and
 * CAGEMALLOC_KLASS_RANGE, else the defaults, apply). Returns 0, EINVAL for
 * values out of bounds, or EBUSY once the space is in use. */
CM_API int cm_klass_configure(unsigned shift, unsigned range_log2);

/* A block of at least size bytes aligned to 2^shift in the class space; a
 * class larger than 2^shift takes several slots. NULL with errno ENOMEM when
 * the space is exhausted (or cannot be reserved). */
CM_API CM_MALLOC_ATTRS void *cm_klass_alloc(size_t size);

/* Make a class block's space reusable (class unloading). Anything else is
 * reported on stderr and aborts. cm_klass_free(NULL) does nothing. */
CM_API void cm_klass_free(void *klass);

/* Bits a narrow class pointer needs: range - shift. */
CM_API unsigned cm_klass_bits(void);

/* Metadata that belongs with classes (method tables, constant pools: 16-byte
 * aligned, any size): placed in the gaps that class alignment leaves when
 * one fits, else in ordinary memory. Free it with cm_meta_free (only). */
CM_API CM_MALLOC_ATTRS void *cm_meta_alloc(size_t size);
CM_API void cm_meta_free(void *meta);

/* Set at the class space's first use, by each thread that races to set it
 * up (the same values): read atomically by the inline encoding below (a
 * relaxed load is a plain load; the thread got its class from
 * cm_klass_alloc, which saw them set). */
CM_API extern uintptr_t cm_klass_base;
CM_API extern unsigned cm_klass_shift;

/* Narrow class pointer of a block from cm_klass_alloc: a subtract and a shift. */
static inline uint32_t cm_klass_encode(const void *klass) {
    return (uint32_t)(((uintptr_t)klass - __atomic_load_n(&cm_klass_base, __ATOMIC_RELAXED)) >>
                      __atomic_load_n(&cm_klass_shift, __ATOMIC_RELAXED));
}
/* The class block a narrow pointer names: a shift and an add. */
static inline void *cm_klass_decode(uint32_t narrow) {
    return (void *)(__atomic_load_n(&cm_klass_base, __ATOMIC_RELAXED) +
                    ((uintptr_t)narrow << __atomic_load_n(&cm_klass_shift, __ATOMIC_RELAXED)));
}

struct cm_klass_stats {
    size_t classes_live;         /* class blocks allocated and not freed */
    size_t bytes_requested;      /* their sizes, each rounded up to the granule (2^shift / 64, at least 1) */
    size_t bytes_committed;      /* class space handed out so far (up to its high-water mark) */
    size_t alignment_loss;       /* bytes of slots in use held by no class and no metadata */
    size_t loss_per_class;       /* alignment_loss / classes_live */
    size_t gap_bytes_reused;     /* metadata bytes living in the gaps after classes */
    size_t meta_bytes_elsewhere; /* metadata bytes in ordinary memory (no gap fitted) */
    unsigned shift, range_log2, narrow_bits;
    int gap_filling;             /* 1 if cm_meta_alloc uses the gaps (shift >= 8, CAGEMALLOC_KLASS_GAPS) */
};
/* Fill *out (counters are updated without locks: approximate while other
 * threads allocate). */
CM_API void cm_klass_stats(struct cm_klass_stats *out);

/* ------------------------------------------------------------------------
 * Code space: executable memory placed for direct calls (for JITs).
 *
 * A `call rel32` (E8) or `jmp rel32` reaches +-2 GiB; a JIT whose code sits
 * that close to the runtime functions it calls can use them instead of
 * `mov rax, imm64; call rax` (an indirect call the predictor must learn).
 * Code memory is never writable and executable in the same mapping (W^X):
 * it is written through cm_code_write. Blocks are 64-byte aligned.
 * ---------------------------------------------------------------------- */

/* size bytes of executable memory from every byte of which a rel32 call or
 * jump reaches `near` and the whole text of the module containing it (NULL:
 * the main program). NULL with errno ENOMEM when no free address range is
 * in reach (never a far block), EINVAL if near lies in no mapping. */
CM_API void *cm_code_alloc(size_t size, const void *near);

/* Release a block of cm_code_alloc (its bytes become int3 traps). Anything
 * else is reported on stderr and aborts. cm_code_free(NULL) does nothing. */
CM_API void cm_code_free(void *code);

/* Copy n bytes to dst inside code memory, through a writable view of the
 * same pages: threads running other code are not disturbed; the new bytes
 * are coherent for the calling thread's instruction stream when it returns.
 * Returns 0, or EINVAL if [dst, dst + n) is not inside the code space. */
CM_API int cm_code_write(void *dst, const void *src, size_t n);

/* 1 if a rel32 displacement from next_insn (the address after the call
 * instruction) reaches target: their signed difference fits in 32 bits. */
CM_API int cm_rel32_reachable(const void *next_insn, const void *target);

#ifdef __cplusplus
}
#endif

#endif /* CAGEMALLOC_H */
