/* mixed: each thread keeps 2000 live blocks and applies random operations:
 * allocate (80% 8-512 B, 15% 512 B-16 KiB, 5% 16-256 KiB), reallocate a
 * live block to a new random size (its marks must survive), or free. */
#include "common.h"

#define LIVE 2000
#define OPS 6000000 /* in all, split across the threads */

static int ops_per_thread;

static size_t random_size(uint64_t x) {
    unsigned r = (unsigned)(x % 100);
    if (r < 80) return 8 + (x >> 8) % 505;
    if (r < 95) return 512 + (x >> 8) % (16384 - 512);
    return 16384 + (x >> 8) % (262144 - 16384);
}

static void *worker(void *arg) {
    uint64_t rng = (uintptr_t)arg + 1;
    static __thread unsigned char *v[LIVE];
    static __thread size_t n[LIVE];
    for (int i = 0; i < ops_per_thread; i++) {
        uint64_t x = rng_next(&rng);
        unsigned k = (unsigned)(x % LIVE), op = (unsigned)(x >> 40) % 3;
        size_t size = random_size(x >> 12);
        if (v[k] && op == 0) {
            check(v[k], n[k], (unsigned char)n[k]);
            bench_free(v[k]);
            v[k] = NULL;
        } else if (v[k] && op == 1) {
            unsigned char first = v[k][0];
            v[k] = bench_realloc(v[k], size);
            if (v[k][0] != first) abort();
            n[k] = size;
            mark(v[k], size, (unsigned char)size);
        } else {
            if (v[k]) bench_free(v[k]);
            v[k] = bench_malloc(size);
            n[k] = size;
            mark(v[k], size, (unsigned char)size);
        }
    }
    for (int k = 0; k < LIVE; k++) bench_free(v[k]);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    ops_per_thread = OPS / threads;
    report(run_threads(threads, worker));
    return 0;
}
