/* cache-scratch (Hoard): the main thread allocates one 8-byte object per
 * thread (neighbours on a cache line); each thread frees its object, then
 * repeatedly allocates an 8-byte object, writes it many times and frees it.
 * An allocator that gives the thread back the object it freed keeps the
 * threads on that shared line (passive false sharing). */
#include <pthread.h>

#include "common.h"

#define ITERATIONS 5000000 /* in all, split across the threads */
#define WRITES 50

static int per_thread;
static void *initial[64];

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    bench_free(initial[id]);
    for (int i = 0; i < per_thread; i++) {
        volatile unsigned char *o = bench_malloc(8);
        for (int w = 0; w < WRITES; w++) o[w & 7] = (unsigned char)(id + w);
        if (o[(WRITES - 1) & 7] != (unsigned char)(id + WRITES - 1)) abort();
        bench_free((void *)o);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    per_thread = ITERATIONS / threads;
    for (int i = 0; i < threads; i++) initial[i] = bench_malloc(8);
    pthread_t t[64];
    double start = now_seconds();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    report(now_seconds() - start);
    return 0;
}
