/* trim: a program that moves from one phase to the next and asks for its
 * memory back in between (malloc_trim), as a server does after a burst.
 * Phase one: the threads allocate 2,048 blocks of 8-64 KiB between them,
 * write them, each frees every other one of its own and exits, the rest staying live. The
 * main thread calls malloc_trim(0). Phase two: new threads allocate 64 MiB
 * of 64-byte blocks between them, which no freed block of phase one can
 * serve unless its pages went back. The peak is phase two's: the live
 * blocks, the small ones, and whatever of the freed ones stayed resident.
 * Every block is checked before it is freed. */
#include <malloc.h>

#include "common.h"

#define MEDIUM_BLOCKS 2048
#define MEDIUM_MIN (8 * 1024)
#define MEDIUM_MAX (64 * 1024)
#define SMALL_SIZE 64
#define SMALL_BYTES (64u << 20)

static int threads;
static unsigned char *medium[MEDIUM_BLOCKS];
static size_t medium_size[MEDIUM_BLOCKS];

static void *burst(void *arg) {
    int t = (int)(uintptr_t)arg;
    uint64_t rng = 0x9e3779b97f4a7c15u * (uint64_t)(t + 1);
    for (int i = t; i < MEDIUM_BLOCKS; i += threads) {
        medium_size[i] = MEDIUM_MIN + rng_next(&rng) % (MEDIUM_MAX - MEDIUM_MIN + 1);
        if (!(medium[i] = bench_malloc(medium_size[i]))) abort();
        memset(medium[i], i, medium_size[i]); /* buffers are filled: every page in use */
        mark(medium[i], medium_size[i], (unsigned char)i);
    }
    for (int i = t, k = 0; i < MEDIUM_BLOCKS; i += threads, k++) /* every other one of each thread's */
        if (k % 2 == 0) {
            check(medium[i], medium_size[i], (unsigned char)i);
            bench_free(medium[i]);
            medium[i] = NULL;
        }
    return NULL;
}

static void *small_phase(void *arg) {
    int t = (int)(uintptr_t)arg;
    size_t count = SMALL_BYTES / SMALL_SIZE / (size_t)threads;
    unsigned char **blocks = bench_malloc(count * sizeof *blocks);
    if (!blocks) abort();
    for (size_t i = 0; i < count; i++) {
        if (!(blocks[i] = bench_malloc(SMALL_SIZE))) abort();
        mark(blocks[i], SMALL_SIZE, (unsigned char)(t + i));
    }
    for (size_t i = 0; i < count; i++) {
        check(blocks[i], SMALL_SIZE, (unsigned char)(t + i));
        bench_free(blocks[i]);
    }
    bench_free(blocks);
    return NULL;
}

int main(int argc, char **argv) {
    threads = threads_arg(argc, argv);
    double seconds = run_threads(threads, burst);
    double start = now_seconds();
    malloc_trim(0);
    seconds += now_seconds() - start;
    seconds += run_threads(threads, small_phase);
    for (int i = 0; i < MEDIUM_BLOCKS; i++)
        if (medium[i]) {
            check(medium[i], medium_size[i], (unsigned char)i);
            bench_free(medium[i]);
        }
    report(seconds);
    return 0;
}
