/* A thread allocates blocks, hands them to another thread, which frees them
 * all, and then sleeps: its superblocks, parked full in its heap, have every
 * block back, but it never comes to look. That memory must go back to the OS
 * anyway: at once with cm_trim, and by the decay pass (CAGEMALLOC_DECAY_MS,
 * set short by the test's environment) while other threads keep allocating,
 * or only keep freeing. In the last round the sleeper frees every other
 * block itself before it hands the rest over, so its superblocks wait on
 * its avail lists, not parked: the other thread's frees must hand them to
 * the pool too (as larson's main thread leaves its workers' first blocks).
 * The sleeper then wakes and allocates and frees again, its data verified.
 * Before the fixes, trim and decay reached only the pool, never a parked
 * superblock, and no superblock on an avail list came back at all: nothing
 * came back until the sleeper woke. */
#include "core_util.h"

#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "cagemalloc.h"

#define BLOCKS 40000
#define SIZE 400 /* 16 MiB in all: far above what the other thread's churn keeps */

static void *blocks[BLOCKS];
static sem_t handed, wake, done;

static void fill_all(void) {
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = cm_malloc(SIZE);
        CMT_CHECK(blocks[i], "malloc failed");
        cmt_fill(blocks[i], SIZE, (unsigned)i);
    }
}

static void free_every_other(int first) {
    for (int i = first; i < BLOCKS; i += 2) {
        CMT_VERIFY(blocks[i], SIZE, (unsigned)i, "block");
        cm_free(blocks[i]);
    }
}

#define ROUNDS 4

static void *sleeper(void *arg) {
    (void)arg;
    for (int round = 0; round < ROUNDS; round++) {
        fill_all();
        if (round == ROUNDS - 1) free_every_other(1);
        sem_post(&handed);
        sem_wait(&wake); /* sleeps while the other thread frees everything */
    }
    /* its parked superblocks were retired meanwhile: allocating works on */
    fill_all();
    for (int i = 0; i < BLOCKS; i++) {
        CMT_VERIFY(blocks[i], SIZE, (unsigned)i, "block");
        cm_free(blocks[i]);
    }
    sem_post(&done);
    return NULL;
}

static void free_range(int from, int to) {
    for (int i = from; i < to; i++) {
        CMT_VERIFY(blocks[i], SIZE, (unsigned)i, "block");
        cm_free(blocks[i]);
    }
}

static void free_all(void) { free_range(0, BLOCKS); }

static size_t returned(void) {
    cm_stats_t s;
    cm_stats_get(&s);
    return s.returned;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Churn through the pool in 64 KiB superblocks: refills from the pool run the decay pass. */
static void churn(double seconds) {
    static void *v[2048];
    for (double end = now_s() + seconds; now_s() < end;) {
        for (int i = 0; i < 2048; i++) {
            v[i] = cm_malloc(1024);
            CMT_CHECK(v[i], "malloc failed");
            cmt_fill(v[i], 1024, (unsigned)i);
        }
        for (int i = 0; i < 2048; i++) {
            CMT_VERIFY(v[i], 1024, (unsigned)i, "block");
            cm_free(v[i]);
        }
    }
}

int main(void) {
    const size_t bytes = (size_t)BLOCKS * SIZE, want = bytes / 10 * 9;
    sem_init(&handed, 0, 0);
    sem_init(&wake, 0, 0);
    sem_init(&done, 0, 0);
    pthread_t t;
    CMT_CHECK(pthread_create(&t, NULL, sleeper, NULL) == 0, "pthread_create");

    /* round 1: cm_trim. Every round counts from before the frees: the
     * remote frees that hand the sleeper's superblocks to the pool also run
     * the decay pass, which returns those handed over CAGEMALLOC_DECAY_MS
     * earlier (frees that take that long: ThreadSanitizer on a loaded
     * machine) */
    sem_wait(&handed);
    size_t before = returned();
    free_all();
    CMT_CHECK(cm_trim() == 1, "cm_trim returned nothing");
    size_t by_trim = returned() - before;
    CMT_CHECK(by_trim >= want, "the frees and cm_trim gave back %zu KiB of the sleeper's %zu KiB", by_trim >> 10,
              bytes >> 10);
    sem_post(&wake);

    /* round 2: the decay pass, run by this thread's allocations */
    sem_wait(&handed);
    before = returned();
    free_all();
    churn(1.0); /* CAGEMALLOC_DECAY_MS=100 (tests/edge.cmake) */
    size_t by_decay = returned() - before;
    CMT_CHECK(by_decay >= want, "decay gave back %zu KiB of the sleeper's %zu KiB", by_decay >> 10, bytes >> 10);
    sem_post(&wake);

    /* round 3: the decay pass, run by frees alone (a thread that never
     * refills): the second half's last frees retire the first half */
    sem_wait(&handed);
    before = returned();
    free_range(0, BLOCKS / 2);
    usleep(300 * 1000);
    free_range(BLOCKS / 2, BLOCKS);
    size_t by_frees = returned() - before;
    CMT_CHECK(by_frees >= want / 2 - want / 10, "decay from frees gave back %zu KiB of the sleeper's first %zu KiB",
              by_frees >> 10, bytes >> 11);
    sem_post(&wake);

    /* round 4: superblocks on the sleeper's avail lists, every block free */
    sem_wait(&handed);
    before = returned();
    free_every_other(0);
    CMT_CHECK(cm_trim() == 1, "cm_trim returned nothing of the sleeper's avail superblocks");
    size_t by_avail = returned() - before;
    CMT_CHECK(by_avail >= want, "cm_trim gave back %zu KiB of the sleeper's %zu KiB on its avail lists",
              by_avail >> 10, bytes >> 10);
    sem_post(&wake);

    sem_wait(&done);
    pthread_join(t, NULL);
    printf("edge_idle_owner: the sleeper's %zu KiB, freed by another thread: %zu KiB back by cm_trim, "
           "%zu KiB by decay, %zu KiB (of the first half) by decay run from frees, %zu KiB from its avail lists by "
           "cm_trim\n", bytes >> 10, by_trim >> 10, by_decay >> 10, by_frees >> 10, by_avail >> 10);
    return 0;
}
