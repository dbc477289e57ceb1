/* xmalloc: producer/consumer. Each pair is one thread allocating blocks of
 * 16..256 bytes and marking them, and one thread checking and freeing them,
 * connected by a single-producer single-consumer ring: every block is freed
 * by a thread other than its allocator. At 1 thread the one thread plays
 * both parts in batches. Waiting sides yield the CPU (runs above 2 threads
 * oversubscribe the 2 cores). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "common.h"

#define BLOCKS 8000000 /* in all, split across the pairs */
#define RING 4096

struct ring {
    _Atomic uint64_t head, tail; /* head: written by the producer, tail: by the consumer */
    long count;
    void *slot[RING];
} __attribute__((aligned(64)));

static struct ring rings[32];

static size_t size_of(long i) { return 16 + (size_t)(i * 2654435761u) % 241; }

static void *producer(void *arg) {
    struct ring *r = arg;
    for (long i = 0; i < r->count; i++) {
        unsigned char *p = bench_malloc(size_of(i));
        mark(p, size_of(i), (unsigned char)i);
        uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        /* acquire: the slot we reuse was emptied by the consumer */
        while (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING) sched_yield();
        r->slot[h % RING] = p;
        atomic_store_explicit(&r->head, h + 1, memory_order_release); /* publishes the block */
    }
    return NULL;
}

static void *consumer(void *arg) {
    struct ring *r = arg;
    for (long i = 0; i < r->count; i++) {
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        while (atomic_load_explicit(&r->head, memory_order_acquire) == t) sched_yield();
        unsigned char *p = r->slot[t % RING];
        check(p, size_of(i), (unsigned char)i);
        bench_free(p);
        atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    }
    return NULL;
}

static void single_thread(long count) {
    static void *batch[RING];
    for (long done = 0; done < count; done += RING) {
        long n = count - done < RING ? count - done : RING;
        for (long i = 0; i < n; i++) {
            batch[i] = bench_malloc(size_of(done + i));
            mark(batch[i], size_of(done + i), (unsigned char)(done + i));
        }
        for (long i = 0; i < n; i++) {
            check(batch[i], size_of(done + i), (unsigned char)(done + i));
            bench_free(batch[i]);
        }
    }
}

int main(int argc, char **argv) {
    int threads = threads_arg(argc, argv), pairs = threads / 2;
    double start = now_seconds();
    if (pairs == 0) {
        single_thread(BLOCKS);
    } else {
        pthread_t t[64];
        for (int i = 0; i < pairs; i++) {
            rings[i].count = BLOCKS / pairs;
            pthread_create(&t[2 * i], NULL, producer, &rings[i]);
            pthread_create(&t[2 * i + 1], NULL, consumer, &rings[i]);
        }
        for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], NULL);
    }
    report(now_seconds() - start);
    return 0;
}
