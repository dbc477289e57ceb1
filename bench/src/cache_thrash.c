/* cache-thrash (Hoard): each thread repeatedly allocates an 8-byte object,
 * writes it many times and frees it. An allocator that hands threads blocks
 * on one cache line makes them fight over it (active false sharing). */
#include <pthread.h>

#include "common.h"

#define ITERATIONS 5000000 /* in all, split across the threads */
#define WRITES 50

static int per_thread;

static void *worker(void *arg) {
    unsigned char tag = (unsigned char)(uintptr_t)arg;
    for (int i = 0; i < per_thread; i++) {
        volatile unsigned char *o = bench_malloc(8);
        for (int w = 0; w < WRITES; w++) o[w & 7] = (unsigned char)(tag + w);
        if (o[(WRITES - 1) & 7] != (unsigned char)(tag + WRITES - 1)) abort();
        bench_free((void *)o);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    per_thread = ITERATIONS / threads;
    pthread_t t[64];
    double start = now_seconds();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    report(now_seconds() - start);
    return 0;
}
