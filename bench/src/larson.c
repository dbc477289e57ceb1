/* larson: a server simulation. Each thread owns an array of slots and
 * repeatedly replaces the block in a random slot (check, free, allocate
 * 16..1024 bytes, mark). Between rounds the arrays rotate between threads,
 * so most blocks are freed by a thread other than the one that allocated
 * them. */
#include "common.h"

#define SLOTS 1000
#define ROUNDS 20
#define OPS 10000000 /* in all, split across the threads and rounds */

static int threads, ops_per_thread;
static struct slot {
    unsigned char *p;
    size_t n;
} *arrays[64];
static pthread_barrier_t barrier;

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uint64_t rng = id + 1;
    for (int r = 0; r < ROUNDS; r++) {
        struct slot *s = arrays[(id + (uintptr_t)r) % (uintptr_t)threads];
        for (int i = 0; i < ops_per_thread / ROUNDS; i++) {
            uint64_t x = rng_next(&rng);
            struct slot *o = &s[x % SLOTS];
            if (o->p) {
                check(o->p, o->n, (unsigned char)o->n);
                bench_free(o->p);
            }
            o->n = 16 + (x >> 20) % 1009;
            o->p = bench_malloc(o->n);
            mark(o->p, o->n, (unsigned char)o->n);
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv) {
    threads = threads_arg(argc, argv);
    ops_per_thread = OPS / threads;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) arrays[i] = calloc(SLOTS, sizeof(struct slot));
    double elapsed = run_threads(threads, worker);
    for (int i = 0; i < threads; i++) {
        for (int k = 0; k < SLOTS; k++) bench_free(arrays[i][k].p);
        free(arrays[i]);
    }
    report(elapsed);
    return 0;
}
