/* fastpath: one thread, nanoseconds per malloc+free pair of one size, for
 * 16 B to 1 KiB, calling through volatile pointers and touching each block
 * so that no pair can be optimised away. FASTPATH_PAIRS sets the pairs per
 * size (default 10M): two runs under valgrind --tool=callgrind with
 * different counts give instructions per pair (see BENCHMARKS.md). */
#include "common.h"

int main(void) {
    const char *env = getenv("FASTPATH_PAIRS");
    const long PAIRS = env ? atol(env) : 10000000;
    static const size_t sizes[] = {16, 32, 64, 128, 256, 512, 1024};
    enum { NSIZES = sizeof sizes / sizeof sizes[0] };
    double ns[NSIZES], total = 0, start_all = now_seconds();
    unsigned sink = 0;
    for (int s = 0; s < NSIZES; s++) {
        double start = now_seconds();
        for (int i = 0; i < PAIRS; i++) {
            volatile unsigned char *p = bench_malloc(sizes[s]);
            p[0] = (unsigned char)i;
            sink += p[0];
            bench_free((void *)p);
        }
        ns[s] = (now_seconds() - start) * 1e9 / PAIRS;
        total += ns[s];
    }
    printf("RESULT seconds=%.6f", now_seconds() - start_all);
    for (int s = 0; s < NSIZES; s++) printf(" ns%zu=%.2f", sizes[s], ns[s]);
    printf(" ns_mean=%.2f sink=%u rss_kib=%ld\n", total / NSIZES, sink & 1, peak_rss_kib());
    return 0;
}
