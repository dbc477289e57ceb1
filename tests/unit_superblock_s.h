/* unit_superblock_s.h: superblock S of the hand-over unit tests
 * (unit_parked_rehome, unit_avail_rehome): 8 blocks of 8192 B that one
 * thread fills, each round with its own pattern, and what the tests ask of
 * them. One translation unit each: the state is static. */
#ifndef UNIT_SUPERBLOCK_S_H
#define UNIT_SUPERBLOCK_S_H
#include <stdatomic.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

#define SIZE 8192
#define PER_SB 8

static cm_desc_t *victim; /* S's descriptor */
static char *span;        /* S's span */
static void *blocks[PER_SB];
static int round_no;

static int holds(const char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] != v) return 0;
    return 1;
}

static int in_span(const void *p) { return (const char *)p >= span && (const char *)p < span + PER_SB * SIZE; }

/* The calling thread allocates S's 8 blocks, filled with 0x11 * round_no. */
static void fill_s(void) {
    for (int i = 0; i < PER_SB; i++) {
        blocks[i] = cm_malloc(SIZE);
        CHECK(blocks[i], "allocation");
        memset(blocks[i], 0x11 * round_no, SIZE);
    }
    victim = cm_pool_desc_of(blocks[0]);
    span = victim->base;
    CHECK(cm_class_info[cm_desc_class(victim)].max_count == PER_SB, "8 blocks of 8192 B per superblock");
    for (int i = 0; i < PER_SB; i++) CHECK(cm_pool_desc_of(blocks[i]) == victim, "S's blocks share a superblock");
}

/* n blocks of SIZE filled with 0x5a, checked; how many were S's. */
static int allocate_and_count_s(void **more, int n) {
    int from_s = 0;
    for (int i = 0; i < n; i++) {
        more[i] = cm_malloc(SIZE);
        CHECK(more[i], "allocation");
        memset(more[i], 0x5a, SIZE);
        from_s += in_span(more[i]);
    }
    for (int i = 0; i < n; i++) CHECK(holds(more[i], SIZE, 0x5a), "a live block lost its data");
    return from_s;
}

/* A thread that does not own S frees its blocks from `first` on, each
 * checked, then sends its batched remote frees to S: the last one decides
 * whether S's span goes to the pool. */
static void free_s_from(int first) {
    for (int i = first; i < PER_SB; i++) {
        CHECK(holds(blocks[i], SIZE, (unsigned char)(0x11 * round_no)), "S's block %d lost its data", i);
        cm_free(blocks[i]);
    }
    cm_remote_flush();
}

/* S's span is in the pool under a new descriptor, every block free. */
static void check_s_in_pool(void) {
    cm_desc_t *home = cm_pool_desc_of(span);
    CHECK(home && home != victim, "S's span was not handed to the pool under a new descriptor");
    cm_anchor_t a = atomic_load(&home->anchor);
    CHECK(cm_anchor_state(a) == CM_PARTIAL && cm_anchor_count(a) == atomic_load(&home->carved),
          "S's span is not in the pool with every block free");
}
#endif
