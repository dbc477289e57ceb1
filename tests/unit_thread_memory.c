/* unit_thread_memory: a thread reuses its own memory before another's.
 * Memory one thread wrote to, handed to another thread on another core, is
 * fetched line by line from the first core's cache (BENCHMARKS.md: bench/'s
 * growth at 2 threads). So:
 *  - a thread's superblocks come from chunks of its own (the arena's chunks
 *    have a home thread), not from the first chunk that has room;
 *  - a thread that needs a superblock takes over its own kept ones before
 *    another thread's.
 * Two threads, A and B, alive together, take turns (a barrier between
 * steps); every block is filled with a pattern and checked before its free. */
#include <pthread.h>
#include <string.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

#define SUPERBLOCKS 3
#define MAX_BLOCKS 256

typedef struct thread_side {
    pthread_t thread;
    unsigned char tag;
    uint32_t ref;
    char *bases[SUPERBLOCKS]; /* its superblocks of class X */
    char *taken;              /* the superblock its block of class Y came from */
} thread_side_t;

static pthread_barrier_t step;
static unsigned class_x, class_y;
static thread_side_t sides[2];
static uintptr_t main_chunk;

static unsigned class_of_size(uint32_t size) {
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++)
        if (cm_class_info[c].block_size == size) return c;
    CHECK(0, "no class of %u bytes", size);
    return 0;
}

static uintptr_t chunk_of(const void *p) { return (uintptr_t)p & ~(uintptr_t)(CM_CHUNK_SIZE - 1); }
static char *superblock_of(const void *p) { return cm_pool_desc_of(p)->base; }

static void fill(unsigned char *p, size_t n, unsigned char tag) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(tag + i);
}
static void check_fill(const unsigned char *p, size_t n, unsigned char tag) {
    for (size_t i = 0; i < n; i++) CHECK(p[i] == (unsigned char)(tag + i), "block %p byte %zu", (void *)p, i);
}

/* in turn: side 0 works while side 1 waits, then the other way round */
static void in_turn(thread_side_t *me, void (*work)(thread_side_t *)) {
    for (int turn = 0; turn < 2; turn++) {
        if (me == &sides[turn]) work(me);
        pthread_barrier_wait(&step);
    }
}

static void *blocks[2][MAX_BLOCKS];
static uint32_t block_count;

static void allocate_x(thread_side_t *me) {
    uint32_t size = cm_class_info[class_x].block_size;
    void **mine = blocks[me - sides];
    for (uint32_t i = 0; i < block_count; i++) {
        mine[i] = cm_malloc(size);
        CHECK(mine[i], "malloc");
        fill(mine[i], size, (unsigned char)(me->tag + i));
    }
    me->ref = cm_my_ref(); /* the thread has a heap now */
    int n = 0;
    for (uint32_t i = 0; i < block_count; i++) {
        char *base = superblock_of(mine[i]);
        bool seen = false;
        for (int k = 0; k < n; k++) seen |= me->bases[k] == base;
        if (!seen) {
            CHECK(n < SUPERBLOCKS, "%u blocks fill %d superblocks", block_count, SUPERBLOCKS);
            me->bases[n++] = base;
        }
    }
    CHECK(n == SUPERBLOCKS, "%u blocks fill %d superblocks, not %d", block_count, SUPERBLOCKS, n);
}

/* Every block back, then the heap hands its empty superblocks to the pool,
 * where they are kept (on the thread's shard). */
static void free_x(thread_side_t *me) {
    uint32_t size = cm_class_info[class_x].block_size;
    for (uint32_t i = 0; i < block_count; i++) {
        check_fill(blocks[me - sides][i], size, (unsigned char)(me->tag + i));
        cm_free(blocks[me - sides][i]);
    }
    cm_heap_collect(cm_heap_get_default(), 0);
}

/* A class of the same span size: its new superblock is one taken over. */
static void allocate_y(thread_side_t *me) {
    uint32_t size = cm_class_info[class_y].block_size;
    unsigned char *p = cm_malloc(size);
    CHECK(p, "malloc");
    fill(p, size, me->tag);
    me->taken = superblock_of(p);
    check_fill(p, size, me->tag);
    cm_free(p);
}

static void *side_main(void *arg) {
    thread_side_t *me = arg;
    in_turn(me, allocate_x);
    in_turn(me, free_x);
    in_turn(me, allocate_y);
    return NULL;
}

static bool is_base_of(const thread_side_t *s, const char *base) {
    for (int k = 0; k < SUPERBLOCKS; k++)
        if (s->bases[k] == base) return true;
    return false;
}

int main(void) {
    void *first = cm_malloc(1); /* initialise: the main thread's chunk */
    main_chunk = chunk_of(first);
    cm_free(first);
    cm_options.empty_keep = (size_t)1 << 30;
    class_x = class_of_size(8192);
    class_y = class_of_size(7168);
    CHECK(cm_class_info[class_x].span_shift == cm_class_info[class_y].span_shift, "X and Y share a span size");
    block_count = SUPERBLOCKS * cm_class_info[class_x].max_count;
    CHECK(block_count <= MAX_BLOCKS, "blocks per superblock");

    pthread_barrier_init(&step, NULL, 2);
    for (int i = 0; i < 2; i++) {
        sides[i].tag = (unsigned char)(0x40 * (i + 1));
        CHECK(pthread_create(&sides[i].thread, NULL, side_main, &sides[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < 2; i++) pthread_join(sides[i].thread, NULL);
    CHECK(sides[0].ref % 4 != sides[1].ref % 4, "the two threads have shards of their own (refs %u, %u)",
          sides[0].ref, sides[1].ref);

    /* each thread's superblocks lie in chunks of its own */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < SUPERBLOCKS; k++) {
            uintptr_t c = chunk_of(sides[i].bases[k]);
            CHECK(c != main_chunk, "thread %d's superblock %p is in the main thread's chunk", i,
                  (void *)sides[i].bases[k]);
            for (int j = 0; j < SUPERBLOCKS; j++)
                CHECK(c != chunk_of(sides[1 - i].bases[j]), "threads %d and %d share the chunk %#lx", i, 1 - i,
                      (unsigned long)c);
        }
    /* each took over one of its own kept superblocks */
    for (int i = 0; i < 2; i++)
        CHECK(is_base_of(&sides[i], sides[i].taken), "thread %d took %p, not one of its own", i,
              (void *)sides[i].taken);
    puts("unit_thread_memory: ok");
    return 0;
}
