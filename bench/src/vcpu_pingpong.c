/* vcpu_pingpong: how far apart the machine's two CPUs are right now. Two
 * threads hand one cache line back and forth; the round trip is what every
 * block freed by another thread pays too. On this project's VM it is
 * two-valued, about 55 ns or about 330 ns, switching every minute or so as
 * the host places the two vCPUs near or far: xmalloc-test (every block
 * freed by the other thread) takes 0.7 s in the first mode and 1.2-1.3 s in
 * the second, for every allocator (BENCHMARKS.md). Not an allocator
 * benchmark: run by bench/vcpu-distance, and by bench/mimalloc-bench before
 * each xmalloc-test run. Argument: the round trips (default 2,000,000). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long round_trips = 2000000;

/* odd values: the main thread's serve; even: the other thread's return */
static _Atomic long ball __attribute__((aligned(64)));

static void *returner(void *arg) {
    (void)arg;
    for (long i = 0; i < round_trips; i++) {
        /* acquire/release: each side's store is the other's go-ahead; no
         * other data crosses, so nothing stronger is needed */
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && (round_trips = atol(argv[1])) <= 0) return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, returner, NULL) != 0) return 1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < round_trips; i++) {
        atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2) {
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)round_trips;
    printf("round trip %.0f ns\n", ns);
    return 0;
}
