/* common.h: what every benchmark shares: the clock, a per-thread random
 * generator, block patterns, the result line, and calls to malloc/free
 * through volatile pointers (so the compiler cannot drop or merge them). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *(*volatile bench_malloc)(size_t) = malloc;
static void (*volatile bench_free)(void *) = free;
static void *(*volatile bench_realloc)(void *, size_t) = realloc;

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Mark a block: its first and last byte carry a tag; check before freeing. */
static inline void mark(void *p, size_t n, unsigned char tag) {
    unsigned char *b = p;
    b[0] = tag;
    b[n - 1] = (unsigned char)(tag ^ 0x5a);
}
static inline void check(const void *p, size_t n, unsigned char tag) {
    const unsigned char *b = p;
    if (b[0] != tag || b[n - 1] != (unsigned char)(tag ^ 0x5a)) {
        fprintf(stderr, "block %p of %zu bytes corrupted\n", p, n);
        abort();
    }
}

static inline int threads_arg(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 1;
    return t < 1 ? 1 : t > 64 ? 64 : t;
}

/* Peak resident set of this process image, read from the kernel at exit. The
 * parent's rusage is no use: its ru_maxrss includes the runner's own memory
 * from before exec (fork copies it), which hid small heaps entirely. */
static inline long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

/* Run fn((void *)i) in threads i = 0..threads-1; the seconds until all end. */
static inline double run_threads(int threads, void *(*fn)(void *)) {
    pthread_t t[64];
    double start = now_seconds();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return now_seconds() - start;
}

/* Hoard's inner loop: allocate an 8-byte object, write it `writes` times,
 * check it, free it; `count` times. */
static inline void churn_small_objects(unsigned char tag, int count, int writes) {
    for (int i = 0; i < count; i++) {
        volatile unsigned char *o = bench_malloc(8);
        for (int w = 0; w < writes; w++) o[w & 7] = (unsigned char)(tag + w);
        if (o[(writes - 1) & 7] != (unsigned char)(tag + writes - 1)) abort();
        bench_free((void *)o);
    }
}

static inline void report(double seconds) { printf("RESULT seconds=%.6f rss_kib=%ld\n", seconds, peak_rss_kib()); }
#endif
