/* unit_avail_rotation: a heap whose class has run dry in its current
 * superblock turns to the next one with free blocks and puts the used-up
 * one at the back of its avail list, not parked (no CAS there, and the
 * next free into it takes the fast path); only when no superblock of the
 * class has a free block are they parked, and a new one comes from the
 * pool. One thread, one heap, superblocks of 8 blocks of 8192 B: S1 and S2
 * filled and parked, S3 current and used up; every block holds its own
 * pattern, checked before it is freed. */
#include <string.h>

#include "internal.h"
#include "unit_check.h"

#define SIZE 8192
#define PER_SB 8
#define FILLED (3 * PER_SB)

static void *blocks[FILLED];

static void fill(void *p, unsigned char v) { memset(p, v, SIZE); }

static void check_and_free(void *p, unsigned char v) {
    for (size_t i = 0; i < SIZE; i++) CHECK(((unsigned char *)p)[i] == v, "block %p lost its data", p);
    cm_free(p);
}

static unsigned state_of(const cm_desc_t *d) { return cm_anchor_state(atomic_load(&d->anchor)); }

static void *alloc(cm_heap_t *h, unsigned char v) {
    void *p = cm_heap_malloc(h, SIZE);
    CHECK(p, "allocation");
    fill(p, v);
    return p;
}

int main(void) {
    cm_heap_t *h = cm_heap_new();
    CHECK(h, "cm_heap_new");
    for (int i = 0; i < FILLED; i++) blocks[i] = alloc(h, (unsigned char)i);
    cm_desc_t *s1 = cm_pool_desc_of(blocks[0]), *s2 = cm_pool_desc_of(blocks[PER_SB]),
              *s3 = cm_pool_desc_of(blocks[2 * PER_SB]);
    CHECK(cm_class_info[cm_desc_class(s1)].max_count == PER_SB, "8 blocks of 8192 B per superblock");
    for (int i = 0; i < FILLED; i++)
        CHECK(cm_pool_desc_of(blocks[i]) == (i < PER_SB ? s1 : i < 2 * PER_SB ? s2 : s3), "block %d's superblock", i);
    CHECK(state_of(s1) == CM_OWNED_FULL && state_of(s2) == CM_OWNED_FULL, "S1 and S2 parked: nothing else to turn to");

    /* one free each into S1 and S2: both back on avail, S1 first */
    check_and_free(blocks[1], 1);
    check_and_free(blocks[PER_SB + 1], PER_SB + 1);
    CHECK(state_of(s1) == CM_OWNED && state_of(s2) == CM_OWNED, "S1 and S2 taken back by their frees");

    /* S3 is used up, S1 has a free block: S3 goes to the back, not parked */
    blocks[1] = alloc(h, 101);
    CHECK(cm_pool_desc_of(blocks[1]) == s1, "the block came from S1");
    CHECK(state_of(s3) == CM_OWNED && s3->at == CM_AT_AVAIL, "S3 rotated to avail, not parked");
    CHECK(cm_desc_used(s3) == PER_SB, "S3's used count exact: all out");

    /* a free into the rotated S3 is a plain local free */
    check_and_free(blocks[2 * PER_SB + 3], 2 * PER_SB + 3);
    CHECK(state_of(s3) == CM_OWNED && s3->at == CM_AT_AVAIL && cm_desc_used(s3) == PER_SB - 1, "S3 took a local free");

    /* round the list: S2's free block, then S3's */
    blocks[PER_SB + 1] = alloc(h, 102);
    CHECK(cm_pool_desc_of(blocks[PER_SB + 1]) == s2, "then S2");
    CHECK(state_of(s1) == CM_OWNED && s1->at == CM_AT_AVAIL, "S1 rotated");
    blocks[2 * PER_SB + 3] = alloc(h, 103);
    CHECK(cm_pool_desc_of(blocks[2 * PER_SB + 3]) == s3, "then S3, whose block was freed after it rotated");

    /* nothing free anywhere: all three parked, a fourth superblock */
    void *more = alloc(h, 104);
    cm_desc_t *s4 = cm_pool_desc_of(more);
    CHECK(s4 != s1 && s4 != s2 && s4 != s3, "a new superblock");
    CHECK(state_of(s1) == CM_OWNED_FULL && state_of(s2) == CM_OWNED_FULL && state_of(s3) == CM_OWNED_FULL,
          "used up with nowhere to turn: parked");

    check_and_free(more, 104);
    for (int i = 0; i < FILLED; i++) {
        unsigned char v = (unsigned char)i;
        if (i == 1) v = 101;
        if (i == PER_SB + 1) v = 102;
        if (i == 2 * PER_SB + 3) v = 103;
        check_and_free(blocks[i], v);
    }
    cm_heap_delete(h);
    puts("unit_avail_rotation: ok");
    return 0;
}
