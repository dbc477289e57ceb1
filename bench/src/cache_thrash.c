/* cache-thrash (Hoard): each thread repeatedly allocates an 8-byte object,
 * writes it many times and frees it. An allocator that hands threads blocks
 * on one cache line makes them fight over it (active false sharing). */
#include "common.h"

#define ITERATIONS 5000000 /* in all, split across the threads */
#define WRITES 50

static int per_thread;

static void *worker(void *arg) {
    churn_small_objects((unsigned char)(uintptr_t)arg, per_thread, WRITES);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    per_thread = ITERATIONS / threads;
    report(run_threads(threads, worker));
    return 0;
}
