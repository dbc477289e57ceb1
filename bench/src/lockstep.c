/* lockstep: threads that start together and each churn their own blocks.
 * The threads take their first block of each size class in turn (thread 0,
 * then 1, ...), as a pool of workers started at once may, so an allocator
 * that hands out superblocks and their metadata in request order gives
 * neighbouring ones to different threads. Then each thread, alone with its
 * own 1,024 blocks, frees one at random and allocates another of a size
 * drawn as glibc's bench-malloc-thread draws them (4 B-32 KiB, density
 * falling as 1/size^2), writing every byte and checking the block's marks
 * before it is freed. Nothing is shared after the start: any slowdown at 2
 * threads is metadata or memory that two threads' writes share. */
#include <sched.h>
#include <stdatomic.h>

#include "common.h"

#define WORKING_SET 1024
#define OPS 40000000 /* split across the threads */
#define SIZES 8192

static unsigned block_size[SIZES];
static int threads;
static long ops_per_thread;
static _Atomic int turn;

/* One size class per step, 8 B to 32 KiB, four steps per doubling. */
static size_t warm_size(int step) {
    size_t doubling = (size_t)8 << (step / 4);
    return doubling + doubling / 4 * (size_t)(step % 4);
}
#define WARM_STEPS 49 /* warm_size(48) = 32 KiB */

static void *worker(void *arg) {
    int me = (int)(uintptr_t)arg;
    unsigned char **set = bench_malloc(sizeof(*set) * WORKING_SET);
    size_t *len = bench_malloc(sizeof(*len) * WORKING_SET);
    for (int i = 0; i < WORKING_SET; i++) set[i] = NULL, len[i] = 0;
    /* acquire/release: the turn orders the threads' first allocations of
     * each class, which is all it is for */
    for (int step = 0; step < WARM_STEPS; step++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != step * threads + me)
            sched_yield(); /* past 2 threads the one whose turn it is may be waiting for a core */
        len[step] = warm_size(step);
        set[step] = bench_malloc(len[step]);
        mark(set[step], len[step], (unsigned char)step);
        atomic_fetch_add_explicit(&turn, 1, memory_order_release);
    }
    uint64_t rng = 0x9e3779b9u * (uint64_t)(me + 1);
    for (long op = 0; op < ops_per_thread; op++) {
        uint64_t r = rng_next(&rng);
        unsigned slot = (unsigned)(r % WORKING_SET);
        size_t n = block_size[(r >> 32) % SIZES];
        if (set[slot]) {
            check(set[slot], len[slot], (unsigned char)slot);
            bench_free(set[slot]);
        }
        set[slot] = bench_malloc(n);
        memset(set[slot], (int)op, n);
        mark(set[slot], n, (unsigned char)slot);
        len[slot] = n;
    }
    for (int i = 0; i < WORKING_SET; i++)
        if (set[i]) {
            check(set[i], len[i], (unsigned char)i);
            bench_free(set[i]);
        }
    bench_free(set);
    bench_free(len);
    return NULL;
}

int main(int argc, char **argv) {
    threads = threads_arg(argc, argv);
    ops_per_thread = OPS / threads;
    uint64_t rng = 88;
    for (int i = 0; i < SIZES; i++) { /* inverse of the CDF of 1/size^2 on [4, 32768] */
        double u = (double)(rng_next(&rng) >> 11) / (double)(1ull << 53), lo = 1.0 / 4, hi = 1.0 / 32768;
        block_size[i] = (unsigned)(1.0 / (lo - (lo - hi) * u));
    }
    report(run_threads(threads, worker));
    return 0;
}
