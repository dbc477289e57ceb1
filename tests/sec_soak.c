/* sec_soak: a multi-threaded soak for a given number of seconds (argument).
 * Four threads mix malloc, calloc, realloc, aligned_alloc and free over sizes
 * from 1 byte to 1 MiB, hand a share of their blocks to the next thread
 * through a lock-free exchange (so those are freed remotely), and check every
 * block's full pattern before it is reallocated or freed. Any mismatch, or a
 * failed allocation, exits non-zero. */
#include <stdatomic.h>

#include "core_util.h"

#include <pthread.h>

#define THREADS 4
#define LIVE 512
#define XCHG 256

struct block {
    unsigned char *p;
    size_t n;
    uint64_t seed;
};

/* Per thread: a single-slot mailbox array the previous thread fills. */
static _Atomic(struct block *) mailbox[THREADS][XCHG];
static _Atomic int stop;
static _Atomic uint64_t total_ops, total_remote;

/* The shared word-wise pattern of core_util.h: any prefix verifies. */
static void fill(struct block *b) { cmt_fill(b->p, b->n, b->seed); }
static void verify(const struct block *b, size_t n) { CMT_VERIFY(b->p, n, b->seed, "sec_soak"); }

static size_t random_size(uint64_t *rng) {
    uint64_t x = cmt_rand(rng);
    switch (x % 16) {
    case 0: return 1 + (x >> 8) % ((size_t)1 << 20);
    case 1: case 2: return 1 + (x >> 8) % 65536;
    default: return 1 + (x >> 8) % 600;
    }
}

static void *worker(void *arg) {
    int id = (int)(uintptr_t)arg, next = (id + 1) % THREADS;
    uint64_t rng = (uint64_t)id * 7919 + 1, ops = 0, remote = 0;
    struct block live[LIVE] = {{0}};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        /* free whatever the previous thread sent us */
        for (int i = 0; i < XCHG; i++) {
            struct block *b = atomic_exchange_explicit(&mailbox[id][i], NULL, memory_order_acquire);
            if (!b) continue;
            verify(b, b->n);
            free(b->p);
            free(b);
            remote++;
        }
        for (int round = 0; round < 256; round++, ops++) {
            struct block *b = &live[cmt_rand(&rng) % LIVE];
            unsigned op = (unsigned)(cmt_rand(&rng) % 10);
            if (b->p && op < 3) {
                verify(b, b->n);
                free(b->p);
                b->p = NULL;
            } else if (b->p && op < 5) {
                size_t n = random_size(&rng);
                verify(b, b->n);
                unsigned char *q = realloc(b->p, n);
                if (!q) exit(2);
                b->p = q;
                verify(b, n < b->n ? n : b->n); /* the common prefix survived */
                b->n = n;
                fill(b);
            } else if (b->p && op < 7) {
                /* hand it to the next thread: the exchange release publishes its contents */
                struct block *sent = malloc(sizeof *sent);
                *sent = *b;
                int slot = (int)(cmt_rand(&rng) % XCHG);
                struct block *none = NULL;
                if (atomic_compare_exchange_strong_explicit(&mailbox[next][slot], &none, sent, memory_order_release,
                                                            memory_order_relaxed))
                    b->p = NULL;
                else
                    free(sent);
            } else if (!b->p) {
                b->n = random_size(&rng);
                b->seed = cmt_rand(&rng);
                size_t align = (size_t)16 << (cmt_rand(&rng) % 10);
                b->p = op == 7 ? calloc(1, b->n) : op == 8 ? aligned_alloc(align, b->n) : malloc(b->n);
                if (!b->p) exit(2);
                if (op == 7)
                    for (size_t i = 0; i < b->n; i++)
                        if (b->p[i]) exit(3);
                if (op == 8 && (uintptr_t)b->p % align) exit(4);
                fill(b);
            }
        }
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i].p) verify(&live[i], live[i].n), free(live[i].p);
    atomic_fetch_add(&total_ops, ops);
    atomic_fetch_add(&total_remote, remote);
    return NULL;
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 5;
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    sleep((unsigned)seconds);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int k = 0; k < THREADS; k++) /* blocks still in the mailboxes */
        for (int i = 0; i < XCHG; i++) {
            struct block *b = atomic_load(&mailbox[k][i]);
            if (b) verify(b, b->n), free(b->p), free(b);
        }
    printf("soak: %d s, %llu operations, %llu remote frees, every block verified\n", seconds,
           (unsigned long long)atomic_load(&total_ops), (unsigned long long)atomic_load(&total_remote));
    return 0;
}
