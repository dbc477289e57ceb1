/* sec_interpose_prog: the program run under the interposer: threads that
 * allocate and check blocks of all sizes, and meanwhile call the wrapped
 * functions (mmap, munmap, open, dl_iterate_phdr), so the wrappers resolve
 * their targets and allocate concurrently with the threads' own allocation.
 * Rounds of many blocks freed together empty whole superblocks, where an
 * allocator that reads the clock through libc would call the wrapped
 * clock_gettime in the middle of a flush. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_objects(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info, (void)size;
    ++*(int *)data;
    return 0;
}

/* Allocate and free a few thousand blocks at once: the frees flush batches
 * that empty whole superblocks. */
static void empty_superblocks(uint64_t x) {
    enum { N = 3000 };
    static __thread unsigned char *blocks[N];
    for (int i = 0; i < N; i++) {
        size_t n = 16 + (size_t)((x >> 40) + (uint64_t)i * 97) % 2000;
        if (!(blocks[i] = malloc(n))) abort();
        memset(blocks[i], i & 0xff, 16);
    }
    for (int i = 0; i < N; i++) {
        if (blocks[i][15] != (unsigned char)(i & 0xff)) abort();
        free(blocks[i]);
    }
}

static void *worker(void *arg) {
    uint64_t x = (uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        size_t n = 2 + (x >> 33) % ((x & 15) == 0 ? (4u << 20) : 4096);
        unsigned char *p = malloc(n);
        if (!p) abort();
        p[0] = (unsigned char)i, p[n - 1] = (unsigned char)~i;
        if (p[0] != (unsigned char)i || p[n - 1] != (unsigned char)~i) abort();
        free(p);
        if (i % 500 == 0) {
            int objects = 0;
            dl_iterate_phdr(count_objects, &objects);
            int fd = open("/proc/self/statm", O_RDONLY);
            void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (fd < 0 || objects == 0 || m == MAP_FAILED) abort();
            close(fd);
            munmap(m, 1 << 16);
            empty_superblocks(x);
        }
    }
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    puts("interposed run finished");
    return 0;
}
