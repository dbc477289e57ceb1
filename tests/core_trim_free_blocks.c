/* core_trim_free_blocks: malloc_trim gives back the pages inside free
 * blocks, as glibc's does for its free chunks, wherever the trimming thread
 * may reach them: its own heaps' superblocks, a heap collected by
 * cm_heap_collect, the partly used superblocks an exited thread left in the
 * pool, and (at its next refill) the heap of a thread still running. Blocks
 * of 32 KiB, every other one freed: a freed block keeps its first page (its
 * link) and nothing else resident (mincore); every live block keeps its
 * data, checked before it is freed; blocks allocated again are usable. */
#include "core_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "cagemalloc.h"

#define SIZE 32768
#define BLOCKS 200
#define PAGE 4096 /* the arena's pages: it takes no huge pages */
#define CHECK CMT_CHECK

static void fill(unsigned char *p, size_t tag) { memset(p, (int)(tag * 7 + 3), SIZE); }

static void check(const unsigned char *p, size_t tag) {
    for (size_t k = 0; k < SIZE; k++)
        CHECK(p[k] == (unsigned char)(tag * 7 + 3), "live block %p lost its data at %zu", (const void *)p, k);
}

/* Resident pages of b past its first page. */
static unsigned resident_past_first_page(void *b) {
    unsigned char vec[SIZE / PAGE];
    CHECK(mincore(b, SIZE, vec) == 0, "mincore");
    unsigned n = 0;
    for (size_t i = 1; i < SIZE / PAGE; i++) n += vec[i] & 1;
    return n;
}

static void allocate_and_free_half(cm_heap_t *h, unsigned char **blocks) {
    for (size_t i = 0; i < BLOCKS; i++) {
        blocks[i] = h ? cm_heap_malloc(h, SIZE) : cm_malloc(SIZE);
        CHECK(blocks[i], "allocation");
        fill(blocks[i], i);
    }
    for (size_t i = 0; i < BLOCKS; i += 2) {
        check(blocks[i], i);
        cm_free(blocks[i]);
    }
}

/* Every freed block (even index) gave its pages back, but at most `spared`
 * of them; every live one (odd) is whole, its data checked. */
static void expect_purged(unsigned char **blocks, unsigned spared, const char *what) {
    unsigned kept = 0;
    for (size_t i = 0; i < BLOCKS; i += 2) kept += resident_past_first_page(blocks[i]) != 0;
    CHECK(kept <= spared, "%s: %u freed blocks still resident", what, kept);
    for (size_t i = 1; i < BLOCKS; i += 2) {
        CHECK(resident_past_first_page(blocks[i]) == SIZE / PAGE - 1, "%s: a live block lost pages", what);
        check(blocks[i], i);
    }
}

static void free_live(unsigned char **blocks) {
    for (size_t i = 1; i < BLOCKS; i += 2) {
        check(blocks[i], i);
        cm_free(blocks[i]);
    }
}

/* The freed blocks are allocated again and hold new data. */
static void reuse(cm_heap_t *h) {
    unsigned char *again[BLOCKS / 2];
    for (size_t i = 0; i < BLOCKS / 2; i++) {
        again[i] = h ? cm_heap_malloc(h, SIZE) : cm_malloc(SIZE);
        CHECK(again[i], "allocation");
        fill(again[i], i + 1000);
    }
    for (size_t i = 0; i < BLOCKS / 2; i++) {
        check(again[i], i + 1000);
        cm_free(again[i]);
    }
}

static unsigned char *exited_blocks[BLOCKS];
static void *exiting_thread(void *arg) {
    (void)arg;
    allocate_and_free_half(NULL, exited_blocks);
    return NULL;
}

static unsigned char *running_blocks[BLOCKS];
static atomic_int stage;
static void *running_thread(void *arg) {
    (void)arg;
    allocate_and_free_half(NULL, running_blocks);
    atomic_store(&stage, 1);
    while (atomic_load(&stage) != 2) sched_yield();
    /* the trim happened: this refill collects the heap first */
    unsigned char *p = cm_malloc(SIZE);
    CHECK(p, "allocation");
    fill(p, 5000);
    check(p, 5000);
    atomic_store(&stage, 3);
    while (atomic_load(&stage) != 4) sched_yield();
    cm_free(p);
    free_live(running_blocks);
    return NULL;
}

int main(void) {
    static unsigned char *blocks[BLOCKS];

    allocate_and_free_half(NULL, blocks);
    cm_trim();
    expect_purged(blocks, 0, "the trimming thread's heap");
    free_live(blocks);
    reuse(NULL);

    cm_heap_t *h = cm_heap_new();
    CHECK(h, "cm_heap_new");
    allocate_and_free_half(h, blocks);
    cm_heap_collect(h, 0);
    expect_purged(blocks, 0, "a collected heap");
    reuse(h);
    free_live(blocks);
    cm_heap_delete(h);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, exiting_thread, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    cm_trim();
    expect_purged(exited_blocks, 0, "an exited thread's superblocks in the pool");
    free_live(exited_blocks);

    CHECK(pthread_create(&t, NULL, running_thread, NULL) == 0, "pthread_create");
    while (atomic_load(&stage) != 1) sched_yield();
    cm_trim();
    atomic_store(&stage, 2);
    while (atomic_load(&stage) != 3) sched_yield();
    /* its malloc reused one of the freed blocks */
    expect_purged(running_blocks, 1, "a running thread's heap at its next refill");
    atomic_store(&stage, 4);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    return 0;
}
