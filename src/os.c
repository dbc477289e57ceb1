/* os.c: the only file that talks to the kernel. Reserve, commit, decommit and
 * release address space, random bytes, the clock, and writing to stderr.
 *
 * Every request is a raw system call or a call into the vDSO, never a libc
 * call: programs and tools interpose mmap, munmap, clock_gettime (tracers,
 * time-faking shims), and an interposer that allocates would re-enter malloc
 * in the middle of a refill or a free. A raw call never does. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <linux/mman.h>
#include <linux/random.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

#include "internal.h"

static long raw_syscall6_asm(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
    long ret;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

#ifdef CM_TSAN
/* ThreadSanitizer intercepts libc's mmap and munmap, not these calls, so it
 * does not see the order the kernel gives address space that one thread
 * unmaps and another maps again: it reports the first owner's last access
 * and the next owner's first as a race. In its builds every unmapping call
 * releases, and every mapping call acquires, one sync object. */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static char kernel_order;

static long raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
    if (n == SYS_munmap || n == SYS_mremap) __tsan_release(&kernel_order);
    long ret = raw_syscall6_asm(n, a1, a2, a3, a4, a5, a6);
    if (n == SYS_mmap || n == SYS_mremap) __tsan_acquire(&kernel_order);
    return ret;
}
#else
#define raw_syscall6 raw_syscall6_asm
#endif

static bool raw_failed(long ret) { return (unsigned long)ret > -4096UL; }

static void count_call(void) { cm_count(&cm_counters.os_calls, 1); }

/* Memory the kernel's overcommit policy answers for, as glibc maps it: a
 * request it judges impossible fails here instead of succeeding and ending
 * in an OOM kill when touched. */
static void *map_flags(size_t size, int prot, int flags);

/* Metadata and superblocks never take transparent huge pages. Where the
 * system gives them to every anonymous mapping (THP "always"), the first
 * touch of a 2 MiB-aligned range faults in all of it: the descriptor region
 * and the page maps, touched a few bytes at a time, and superblocks of
 * 64 KiB, returned to the OS one at a time (and gathered into huge pages
 * again by khugepaged), held whole huge pages. Measured under "always":
 * one malloc left 7.7 MiB resident (1.6 MiB with this advice), espresso
 * 12.0 MiB (3.0). Large blocks (cm_os_map_aligned), each a mapping of its
 * own used whole, keep the system's policy, as glibc's mapped blocks do.
 * Where the kernel has no THP the call fails, and nothing needed doing. */
static void *no_huge_pages(void *p, size_t size) {
    if (p) {
        count_call();
        raw_syscall6(SYS_madvise, (long)p, (long)size, MADV_NOHUGEPAGE, 0, 0, 0);
    }
    return p;
}

void *cm_os_map(size_t size) { return no_huge_pages(map_flags(size, PROT_READ | PROT_WRITE, 0), size); }

static void *map_placed(size_t size, size_t align, size_t offset, int prot, int flags);

/* Address space of which only a small part is ever touched: not counted
 * against the overcommit heuristic, nor as committed here (its users count
 * what they hand out). */
static void *reserve(size_t size, size_t align, size_t offset, int prot) {
    void *p = map_placed(size, align, offset, prot, MAP_NORESERVE);
    if (p) cm_uncount(&cm_counters.committed, size);
    return no_huge_pages(p, size);
}

void *cm_os_reserve(size_t size) { return reserve(size, CM_PAGE_SIZE, 0, PROT_READ | PROT_WRITE); }

void cm_os_unreserve(void *p, size_t size) {
    cm_count(&cm_counters.committed, size); /* cm_os_unmap uncounts it */
    cm_os_unmap(p, size);
    cm_uncount(&cm_counters.returned, size);
}

static void *map_flags_at(uintptr_t at, size_t size, int prot, int flags) {
    count_call();
    long r = raw_syscall6(SYS_mmap, (long)at, (long)size, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (raw_failed(r)) return NULL;
    cm_count(&cm_counters.mapped, size);
    cm_count(&cm_counters.committed, size);
    return (void *)r;
}

static void *map_flags(size_t size, int prot, int flags) { return map_flags_at(0, size, prot, flags); }

void cm_os_unmap(void *p, size_t size) {
    count_call();
    raw_syscall6(SYS_munmap, (long)p, (long)size, 0, 0, 0, 0);
    cm_uncount(&cm_counters.mapped, size);
    cm_uncount(&cm_counters.committed, size);
    cm_count(&cm_counters.returned, size);
}

/* Unmap what was mapped only to be placed elsewhere: not memory returned. */
static void unmap_misplaced(void *p, size_t size) {
    cm_os_unmap(p, size);
    cm_uncount(&cm_counters.returned, size);
}

/* size bytes at exactly `at`, or NULL if any of that range is mapped. A
 * kernel before 4.17 knows no MAP_FIXED_NOREPLACE and takes `at` as a
 * hint: what it maps elsewhere is given back. */
static void *map_exactly_at(uintptr_t at, size_t size, int prot, int flags) {
    void *p = map_flags_at(at, size, prot, flags | MAP_FIXED_NOREPLACE);
    if (p && (uintptr_t)p != at) {
        unmap_misplaced(p, size);
        return NULL;
    }
    return p;
}

/* size bytes at an address that is offset modulo align (a power of two).
 * First where the kernel puts size bytes, if that is placed right, else
 * beside it: the nearest such address below (the free side in the usual
 * top-down layout) or above (in the bottom-up one). Only if both are
 * taken, over-map by align and trim both ends, which needs size + align of
 * address space for a moment: done first, under an RLIMIT_AS, it kept a
 * 4 GiB cage (an odd multiple of its size) from being made below 12 GiB. */
static void *map_placed(size_t size, size_t align, size_t offset, int prot, int flags) {
    if (align <= CM_PAGE_SIZE) return map_flags(size, prot, flags);
    char *probe = map_flags(size, prot, flags);
    if (probe) {
        uintptr_t p = (uintptr_t)probe, below = p - ((p - offset) & (align - 1));
        if (below == p) return probe;
        unmap_misplaced(probe, size);
        void *placed = map_exactly_at(below, size, prot, flags);
        if (!placed) placed = map_exactly_at(below + align, size, prot, flags);
        if (placed) return placed;
    }
    if (size + align < size) return NULL;
    char *raw = map_flags(size + align - CM_PAGE_SIZE, prot, flags);
    if (!raw) return NULL;
    char *placed = raw + ((offset - (uintptr_t)raw) & (align - 1));
    size_t head = (size_t)(placed - raw), tail = align - CM_PAGE_SIZE - head;
    if (head) unmap_misplaced(raw, head);
    if (tail) unmap_misplaced(placed + size, tail);
    return placed;
}

void *cm_os_map_aligned(size_t size, size_t align) { return map_placed(size, align, 0, PROT_READ | PROT_WRITE, 0); }

#define TABLE_SPAN ((size_t)2 << 20) /* what one page-table page maps on x86-64 (a PMD entry) */
void *cm_os_map_congruent(size_t size, size_t align, const void *like) {
    size_t span = align > TABLE_SPAN ? align : TABLE_SPAN;
    return map_placed(size, span, (uintptr_t)like & (span - 1), PROT_READ | PROT_WRITE, 0);
}

void *cm_os_reserve_aligned(size_t size, size_t align) { return reserve(size, align, 0, PROT_READ | PROT_WRITE); }

void cm_os_yield(void) { raw_syscall6(SYS_sched_yield, 0, 0, 0, 0, 0, 0); }

static void dump_advice(void *p, size_t size, int advice) {
    count_call();
    raw_syscall6(SYS_madvise, (long)p, (long)size, advice, 0, 0, 0);
}

/* Address space reserved closed (PROT_NONE), for the large reservations
 * opened as they are used (reservation.c): mlockall neither populates nor
 * locks it, and a core dump leaves out the part never opened (it has no
 * pages). */
void *cm_os_reserve_closed(size_t size, size_t align) { return reserve(size, align, 0, PROT_NONE); }

void *cm_os_reserve_closed_placed(size_t size, size_t align, size_t offset) {
    return reserve(size, align, offset, PROT_NONE);
}

/* Open [p, p + size) of a closed reservation or file view with prot (and a
 * file view back into core dumps). False if the kernel refused (out of
 * memory to account it under strict overcommit, or of mappings). */
bool cm_os_open(void *p, size_t size, int prot, bool file_view) {
    count_call();
    if (raw_failed(raw_syscall6(SYS_mprotect, (long)p, (long)size, prot, 0, 0, 0))) return false;
    if (file_view) dump_advice(p, size, MADV_DODUMP);
    return true;
}

/* MADV_DONTNEED, not MADV_FREE: the pages leave the resident set now (so RSS
 * reflects what we hold) and read back as zeros, which calloc relies on.
 * Where the kernel refuses (EINVAL for pages locked by mlockall, EPERM from
 * a seccomp filter) they are zeroed by hand: handed out again as fresh,
 * they gave calloc 20 MB of old bytes under mlockall. */
void cm_os_decommit(void *p, size_t size) {
    count_call();
    if (raw_failed(raw_syscall6(SYS_madvise, (long)p, (long)size, MADV_DONTNEED, 0, 0, 0))) {
        memset(p, 0, size);
        return;
    }
    cm_uncount(&cm_counters.committed, size);
    cm_count(&cm_counters.returned, size);
}

/* The pages of a free block past its link, which stays usable and counted
 * committed: they read back as zeros when it is used again, and nothing
 * relies on their contents, so a refusal (mlockall, seccomp) leaves them. */
void cm_os_purge(void *p, size_t size) {
    count_call();
    if (!raw_failed(raw_syscall6(SYS_madvise, (long)p, (long)size, MADV_DONTNEED, 0, 0, 0)))
        cm_count(&cm_counters.returned, size);
}

/* Grow a mapping where it is, if the address space after it is free: new
 * pages mapped right behind it (mremap refuses to resize a range made of
 * several mappings, as a large block assembled from moved pages is). */
bool cm_os_grow_in_place(void *p, size_t old_size, size_t new_size) {
    return map_exactly_at((uintptr_t)p + old_size, new_size - old_size, PROT_READ | PROT_WRITE, 0) != NULL;
}

/* Move the pages of [p, p + size) (no copy) onto target, inside a range
 * the caller mapped; the old range is released. Moving without resizing,
 * Linux 6.17 and later take a range made of several mappings; earlier
 * ones refuse it (false). */
bool cm_os_move(void *p, size_t size, void *target) {
    count_call();
    long r = raw_syscall6(SYS_mremap, (long)p, (long)size, (long)size, MREMAP_MAYMOVE | MREMAP_FIXED, (long)target, 0);
    if (raw_failed(r)) return false;
    cm_uncount(&cm_counters.mapped, size); /* the target was counted when mapped */
    cm_uncount(&cm_counters.committed, size);
    return true;
}

/* ------------------------------------------------------------ auxv, vDSO, clock, randomness */

typedef int (*vdso_clock_fn)(clockid_t, struct timespec *);
static _Atomic(vdso_clock_fn) vdso_clock; /* NULL: use the system call */
/* The kernel's 16 random bytes for this process. Racing initialisers each
 * store the same words: relaxed atomics make that well defined. */
static _Atomic uint64_t at_random[2];
static _Atomic uintptr_t main_phdr;       /* AT_PHDR: an address inside the main program */

static void raw_clock(clockid_t clock, struct timespec *ts) {
    vdso_clock_fn fn = atomic_load_explicit(&vdso_clock, memory_order_relaxed);
    if (!fn || fn(clock, ts) != 0) raw_syscall6(SYS_clock_gettime, clock, (long)ts, 0, 0, 0, 0);
}

/* clock_gettime in the vDSO image at `base`, found through its dynamic
 * symbol table (DT_HASH gives the symbol count); NULL if not there. */
static vdso_clock_fn vdso_lookup(uintptr_t base) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return NULL;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
    uintptr_t load_offset = 0;
    const Elf64_Dyn *dyn = NULL;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD) load_offset = base + ph[i].p_offset - ph[i].p_vaddr;
        if (ph[i].p_type == PT_DYNAMIC) dyn = (const Elf64_Dyn *)(base + ph[i].p_offset);
    }
    if (!dyn) return NULL;
    const Elf64_Sym *symtab = NULL;
    const char *strtab = NULL;
    const Elf64_Word *hash = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB) symtab = (const Elf64_Sym *)(dyn->d_un.d_ptr + load_offset);
        if (dyn->d_tag == DT_STRTAB) strtab = (const char *)(dyn->d_un.d_ptr + load_offset);
        if (dyn->d_tag == DT_HASH) hash = (const Elf64_Word *)(dyn->d_un.d_ptr + load_offset);
    }
    if (!symtab || !strtab || !hash) return NULL;
    for (Elf64_Word i = 0; i < hash[1]; i++) { /* hash[1]: nchain, the number of symbols */
        const Elf64_Sym *sym = &symtab[i];
        if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_shndx != SHN_UNDEF &&
            strcmp(strtab + sym->st_name, "__vdso_clock_gettime") == 0)
            return (vdso_clock_fn)(load_offset + sym->st_value);
    }
    return NULL;
}

/* openat, as glibc calls it: seccomp allowlists made by tracing glibc
 * programs have no `open`, and some kill the process that calls it. */
static long open_read_only(const char *path) {
    return raw_syscall6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
}

/* The first n bytes (at most) of a small file, with raw calls: the bytes
 * read, or a negative errno. */
static long read_start(const char *path, void *buf, size_t n) {
    long fd = open_read_only(path);
    if (raw_failed(fd)) return fd;
    long got = raw_syscall6(SYS_read, fd, (long)buf, (long)n, 0, 0, 0);
    raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
    return got;
}

/* Read this process's auxiliary vector from /proc with raw calls (getauxval
 * is a libc symbol, and so interposable): the vDSO's address, AT_RANDOM and
 * where the main program's headers are.
 * Without /proc, the clock is a system call and the secret is seeded from
 * getrandom, the clock and the pid. Every racing initialiser finds the same. */
void cm_os_init(void) {
    Elf64_auxv_t aux[64];
    long got = read_start("/proc/self/auxv", aux, sizeof aux);
    for (long i = 0; !raw_failed(got) && i < got / (long)sizeof aux[0] && aux[i].a_type != AT_NULL; i++) {
        if (aux[i].a_type == AT_RANDOM) {
            uint64_t bytes[2];
            memcpy(bytes, (const void *)aux[i].a_un.a_val, sizeof bytes);
            for (int w = 0; w < 2; w++) atomic_store_explicit(&at_random[w], bytes[w], memory_order_relaxed);
        }
        if (aux[i].a_type == AT_PHDR) atomic_store_explicit(&main_phdr, aux[i].a_un.a_val, memory_order_relaxed);
        if (aux[i].a_type == AT_SYSINFO_EHDR)
            atomic_store_explicit(&vdso_clock, vdso_lookup(aux[i].a_un.a_val), memory_order_relaxed);
    }
}

/* GRND_NONBLOCK: early in boot, before the kernel's pool is seeded, plain
 * getrandom blocks, and malloc must not. Then, and wherever getrandom is
 * missing or filtered, the bytes come from AT_RANDOM (random per exec),
 * the pid and a fine clock (which differ between forked children), and the
 * buffer's address, mixed: weaker than getrandom, never constant. */
bool cm_os_random(void *buf, size_t n) {
    long r = raw_syscall6(SYS_getrandom, (long)buf, (long)n, GRND_NONBLOCK, 0, 0, 0);
    if ((size_t)r == n) return true;
    struct timespec ts;
    raw_clock(CLOCK_MONOTONIC, &ts);
    uint64_t x = atomic_load_explicit(&at_random[0], memory_order_relaxed) ^
                 (atomic_load_explicit(&at_random[1], memory_order_relaxed) * 0x9e3779b97f4a7c15ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                 ((uint64_t)raw_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0) << 40) ^ (uintptr_t)buf;
    unsigned char *out = buf;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        out[i] = (unsigned char)(x * 0x2545f4914f6cdd1dull >> 56);
    }
    return false;
}

bool cm_os_clock_in_vdso(void) { return atomic_load_explicit(&vdso_clock, memory_order_relaxed) != NULL; }

void cm_os_write(int fd, const char *buf, size_t n) {
    while (n > 0) {
        long r = raw_syscall6(SYS_write, fd, (long)buf, (long)n, 0, 0, 0);
        if (r == -EINTR) continue;
        if (r <= 0) return;
        buf += r, n -= (size_t)r;
    }
}

/* The coarse clock: read from the vDSO's data page, no system call. */
uint64_t cm_os_now_ns(void) {
    struct timespec ts;
    raw_clock(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uintptr_t cm_os_main_program(void) { return atomic_load_explicit(&main_phdr, memory_order_relaxed); }

/* ------------------------------------------------------------ shared memory, files */

/* An anonymous file of `size` bytes (memfd), for mapping the same pages
 * twice; -1 on failure. */
int cm_os_memfd(size_t size) {
    long fd = raw_syscall6(SYS_memfd_create, (long)"cagemalloc-code", MFD_CLOEXEC, 0, 0, 0, 0);
    if (raw_failed(fd)) return -1;
    if (raw_failed(raw_syscall6(SYS_ftruncate, fd, (long)size, 0, 0, 0, 0))) {
        raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
        return -1;
    }
    return (int)fd;
}

void cm_os_close(int fd) { raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0); }

/* Map `size` bytes of fd shared with protection prot: exactly at `at` if
 * given (never replacing a mapping: NULL if the place is taken), else
 * anywhere. */
void *cm_os_map_file(void *at, size_t size, int prot, int fd) {
    count_call();
    long r = raw_syscall6(SYS_mmap, (long)at, (long)size, prot, MAP_SHARED | (at ? MAP_FIXED_NOREPLACE : 0), fd, 0);
    if (raw_failed(r) || (at && (void *)r != at)) {
        if (!raw_failed(r)) raw_syscall6(SYS_munmap, r, (long)size, 0, 0, 0, 0); /* kernels before 4.17 took it as a hint */
        return NULL;
    }
    cm_count(&cm_counters.mapped, size);
    if (prot == PROT_NONE) dump_advice((void *)r, size, MADV_DONTDUMP); /* closed: dumped whole even so */
    return (void *)r;
}

bool cm_os_map_file_over(void *at, size_t size, int prot, int fd) {
    count_call();
    long r = raw_syscall6(SYS_mmap, (long)at, (long)size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
    if (raw_failed(r)) return false;
    dump_advice(at, size, MADV_DONTDUMP);
    return true;
}

/* The address-space limit (RLIMIT_AS) in bytes, SIZE_MAX if there is none
 * (or it cannot be read): it counts a reservation whole, opened or not.
 * Strict overcommit (mode 2) charges only what is opened of one: closed,
 * it is not writable. */
size_t cm_os_address_limit(void) {
    struct rlimit lim;
    if (raw_failed(raw_syscall6(SYS_prlimit64, 0, RLIMIT_AS, 0, (long)&lim, 0, 0)) || lim.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX;
    return lim.rlim_cur;
}

/* The whole of a (proc) file read into a fresh mapping, NUL-terminated;
 * *len its length; NULL on failure. Free with cm_os_unmap(buf, *cap). */
char *cm_os_read_file(const char *path, size_t *len, size_t *cap) {
    long fd = open_read_only(path);
    if (raw_failed(fd)) return NULL;
    size_t size = (size_t)1 << 16, got = 0;
    char *buf = cm_os_map(size);
    for (;;) {
        if (!buf) break;
        if (got + 1 == size) { /* full: move into one twice as large */
            char *bigger = cm_os_map(size * 2);
            if (bigger) memcpy(bigger, buf, got);
            cm_os_unmap(buf, size);
            buf = bigger, size *= 2;
            continue;
        }
        long r = raw_syscall6(SYS_read, fd, (long)(buf + got), (long)(size - 1 - got), 0, 0, 0);
        if (r == -EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    raw_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
    if (buf) buf[got] = 0;
    *len = got, *cap = size;
    return buf;
}
