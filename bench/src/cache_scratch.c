/* cache-scratch (Hoard): the main thread allocates one 8-byte object per
 * thread (neighbours on a cache line); each thread frees its object, then
 * repeatedly allocates an 8-byte object, writes it many times and frees it.
 * An allocator that gives the thread back the object it freed keeps the
 * threads on that shared line (passive false sharing). */
#include "common.h"

#define ITERATIONS 5000000 /* in all, split across the threads */
#define WRITES 50

static int per_thread;
static void *initial[64];

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    bench_free(initial[id]);
    churn_small_objects((unsigned char)id, per_thread, WRITES);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    per_thread = ITERATIONS / threads;
    for (int i = 0; i < threads; i++) initial[i] = bench_malloc(8);
    report(run_threads(threads, worker));
    return 0;
}
