/* large: blocks of 5-25 MiB. Four live slots; each step frees a random slot
 * and allocates a new block there, writing one byte per 4 KiB page (so its
 * pages are faulted in) and checking the marks before the free. On this VM,
 * mapping and faulting every large block anew made jemalloc and mimalloc 7x
 * slower than glibc. */
#include "common.h"

#define STEPS 1000 /* in all, split across the threads */
#define SLOTS 4

static int steps_per_thread;

static void *worker(void *arg) {
    uint64_t rng = (uintptr_t)arg + 1;
    unsigned char *v[SLOTS] = {0};
    size_t n[SLOTS] = {0};
    for (int i = 0; i < steps_per_thread; i++) {
        uint64_t x = rng_next(&rng);
        unsigned k = (unsigned)(x % SLOTS);
        if (v[k]) {
            check(v[k], n[k], (unsigned char)n[k]);
            bench_free(v[k]);
        }
        n[k] = ((size_t)5 << 20) + (x >> 16) % ((size_t)20 << 20);
        v[k] = bench_malloc(n[k]);
        for (size_t off = 0; off < n[k]; off += 4096) v[k][off] = (unsigned char)off;
        mark(v[k], n[k], (unsigned char)n[k]);
    }
    for (int k = 0; k < SLOTS; k++) bench_free(v[k]);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    steps_per_thread = STEPS / threads;
    report(run_threads(threads, worker));
    return 0;
}
