/* sec_interpose_lib: an LD_PRELOAD interposer of the kind profilers,
 * sandboxes, tracers and time-faking shims use. It wraps mmap, munmap, open,
 * dl_iterate_phdr and clock_gettime, finds the
 * real functions with dlsym(RTLD_NEXT, ...) on first use (dlsym itself calls
 * calloc), and allocates inside every wrapper: so malloc is re-entered while
 * the program, libc or the allocator is in the middle of something. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static __thread int inside; /* a wrapper calling into malloc may come back here */

static void touch_heap(void) {
    if (inside) return;
    inside = 1;
    char *p = malloc(48);
    if (p) {
        memset(p, 1, 48);
        free(p);
    }
    inside = 0;
}

#define REAL(name) \
    static __typeof__(&name) real_##name; \
    if (!real_##name) *(void **)&real_##name = dlsym(RTLD_NEXT, #name)

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    REAL(mmap);
    touch_heap();
    return real_mmap(addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len) {
    REAL(munmap);
    touch_heap();
    return real_munmap(addr, len);
}

int open(const char *path, int flags, ...) {
    REAL(open);
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    touch_heap();
    return real_open(path, flags, mode);
}

int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data) {
    REAL(dl_iterate_phdr);
    touch_heap();
    return real_dl_iterate_phdr(cb, data);
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    REAL(clock_gettime);
    touch_heap();
    return real_clock_gettime(clock, ts);
}
