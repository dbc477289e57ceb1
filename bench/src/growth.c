/* growth: buffers grown by realloc, the way string builders and logs grow:
 * 256 buffers in all (split across the threads) grow in turn, 24 bytes at
 * a time, to 96 KiB each, every appended piece written and checked, then
 * are freed; four rounds. Each buffer walks up through every size class,
 * so what a class leaves behind must serve the next ones (peak RSS), and
 * every step may move the buffer (time). */
#include "common.h"

#define BUFFERS 256
#define STEP 24
#define FINAL (96 * 1024)
#define ROUNDS 4

static int buffers_per_thread;

static void *worker(void *arg) {
    unsigned char tag = (unsigned char)(uintptr_t)arg;
    unsigned char **buf = calloc((size_t)buffers_per_thread, sizeof *buf);
    if (!buf) abort();
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t len = STEP; len <= FINAL; len += STEP) {
            for (int b = 0; b < buffers_per_thread; b++) {
                unsigned char first = (unsigned char)(tag + b);
                buf[b] = bench_realloc(buf[b], len);
                if (!buf[b]) abort();
                if (len > STEP && (buf[b][0] != first || buf[b][len - STEP - 1] != (unsigned char)(len - STEP)))
                    abort(); /* the old contents moved with the buffer */
                memset(buf[b] + len - STEP, (int)(unsigned char)len, STEP);
                buf[b][0] = first;
            }
        }
        for (int b = 0; b < buffers_per_thread; b++) {
            if (buf[b][0] != (unsigned char)(tag + b) || buf[b][FINAL - 1] != (unsigned char)FINAL) abort();
            bench_free(buf[b]);
            buf[b] = NULL;
        }
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv);
    buffers_per_thread = BUFFERS / threads;
    report(run_threads(threads, worker));
    return 0;
}
