/* threadtest (the thesis's benchmark): 100 rounds in all, split across the
 * threads; in a round a thread allocates 100,000 blocks of 64 bytes, writes
 * each, then checks and frees them in allocation order. */
#include "common.h"

#define ROUNDS 100
#define BLOCKS 100000
#define SIZE 64

static int rounds_per_thread;

static void *worker(void *arg) {
    (void)arg;
    char **v = bench_malloc(sizeof(char *) * BLOCKS);
    for (int r = 0; r < rounds_per_thread; r++) {
        for (int i = 0; i < BLOCKS; i++) {
            v[i] = bench_malloc(SIZE);
            mark(v[i], SIZE, (unsigned char)i);
        }
        for (int i = 0; i < BLOCKS; i++) {
            check(v[i], SIZE, (unsigned char)i);
            bench_free(v[i]);
        }
    }
    bench_free(v);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    rounds_per_thread = ROUNDS / threads > 0 ? ROUNDS / threads : 1;
    report(run_threads(threads, worker));
    return 0;
}
