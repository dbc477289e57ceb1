/* os.c: the only file that talks to the kernel. Reserve, commit, decommit and
 * release address space, random bytes, the clock, and writing to stderr.
 *
 * Every request is a raw system call, not a libc call: programs and tools
 * interpose mmap/munmap (and libc may route them through code that allocates),
 * which would re-enter malloc while it is refilling. A raw call never does. */
#include <errno.h>
#include <linux/mman.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#include "internal.h"

static long raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
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

static bool raw_failed(long ret) { return (unsigned long)ret > -4096UL; }

static void count_call(void) { cm_count(&cm_counters.os_calls, 1); }

void *cm_os_map(size_t size) {
    count_call();
    long r = raw_syscall6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw_failed(r)) return NULL;
    cm_count(&cm_counters.mapped, size);
    cm_count(&cm_counters.committed, size);
    return (void *)r;
}

void cm_os_unmap(void *p, size_t size) {
    count_call();
    raw_syscall6(SYS_munmap, (long)p, (long)size, 0, 0, 0, 0);
    cm_uncount(&cm_counters.mapped, size);
    cm_uncount(&cm_counters.committed, size);
    cm_count(&cm_counters.returned, size);
}

/* Over-map by the alignment and trim both ends: at most three calls. */
void *cm_os_map_aligned(size_t size, size_t align) {
    if (align <= CM_PAGE_SIZE) return cm_os_map(size);
    if (size + align < size) return NULL;
    char *raw = cm_os_map(size + align - CM_PAGE_SIZE);
    if (!raw) return NULL;
    char *aligned = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    size_t head = (size_t)(aligned - raw), tail = align - CM_PAGE_SIZE - head;
    if (head) cm_os_unmap(raw, head);
    if (tail) cm_os_unmap(aligned + size, tail);
    cm_uncount(&cm_counters.returned, head + tail); /* trimming is not returning memory */
    return aligned;
}

/* MADV_DONTNEED, not MADV_FREE: the pages leave the resident set now (so RSS
 * reflects what we hold) and read back as zeros, which calloc relies on. */
void cm_os_decommit(void *p, size_t size) {
    count_call();
    raw_syscall6(SYS_madvise, (long)p, (long)size, MADV_DONTNEED, 0, 0, 0);
    cm_uncount(&cm_counters.committed, size);
    cm_count(&cm_counters.returned, size);
}

/* Grow a mapping where it is, if the address space after it is free. */
bool cm_os_grow_in_place(void *p, size_t old_size, size_t new_size) {
    count_call();
    long r = raw_syscall6(SYS_mremap, (long)p, (long)old_size, (long)new_size, 0, 0, 0);
    if (raw_failed(r)) return false;
    cm_count(&cm_counters.mapped, new_size - old_size);
    cm_count(&cm_counters.committed, new_size - old_size);
    return true;
}

/* Move a mapping's pages (no copy) onto target, a reservation of new_size
 * bytes made by the caller, growing it; the old range is released. */
bool cm_os_move(void *p, size_t old_size, size_t new_size, void *target) {
    count_call();
    long r = raw_syscall6(SYS_mremap, (long)p, (long)old_size, (long)new_size, MREMAP_MAYMOVE | MREMAP_FIXED,
                          (long)target, 0);
    if (raw_failed(r)) return false;
    cm_uncount(&cm_counters.mapped, old_size); /* the target was counted when reserved */
    cm_uncount(&cm_counters.committed, old_size);
    return true;
}

/* getrandom never blocks after boot-time entropy is ready; if it fails we
 * still mix in the clock and an address, which is weaker but never zero. */
void cm_os_random(void *buf, size_t n) {
    long r = raw_syscall6(SYS_getrandom, (long)buf, (long)n, 0, 0, 0, 0);
    if ((size_t)r != n) {
        uint64_t x = cm_os_now_ns() ^ (uintptr_t)buf ^ 0x9e3779b97f4a7c15ull;
        unsigned char *out = buf;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            out[i] ^= (unsigned char)x;
        }
    }
}

void cm_os_write(int fd, const char *buf, size_t n) {
    while (n > 0) {
        long r = raw_syscall6(SYS_write, fd, (long)buf, (long)n, 0, 0, 0);
        if (r == -EINTR) continue;
        if (r <= 0) return;
        buf += r, n -= (size_t)r;
    }
}

uint64_t cm_os_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* vDSO: no system call, no lock */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
