/* unit_reuse_before_carve: a heap whose current superblock has run out of
 * freed blocks turns to an avail superblock holding at least a carve
 * batch of them before it carves untouched blocks (new pages) of the
 * current one; with fewer waiting there, it carves. One thread, one heap,
 * blocks of 64 B (1,024 to a superblock, carved 64 at a time):
 *  - 1,600 blocks fill S1 and carve 576 of S2; all are freed;
 *  - 1,600 again come from those same blocks: S2's 576, then S1's 1,024,
 *    and S2 stays at 576 carved (before this, S2 carved up to 1,024 first
 *    and the round touched 2,048 blocks: glibc-simple's pattern);
 *  - with S2 current and out of freed blocks, and only 10 of S1's freed
 *    (S1 first on avail), the next malloc carves S2.
 * Every block holds its own pattern, checked before it is freed. */
#include <string.h>

#include "internal.h"
#include "unit_check.h"

#define SIZE 64
#define PER_SB 1024
#define LIVE 1600
#define FEW 10

static void *blocks[LIVE];

static void fill(void *p, size_t i) { memset(p, (int)(i * 13 + 5), SIZE); }

static void check_and_free(void *p, size_t i) {
    for (size_t k = 0; k < SIZE; k++)
        CHECK(((unsigned char *)p)[k] == (unsigned char)(i * 13 + 5), "block %p lost its data at %zu", p, k);
    cm_free(p);
}

static void *alloc(cm_heap_t *h, size_t i) {
    void *p = cm_heap_malloc(h, SIZE);
    CHECK(p, "allocation");
    fill(p, i);
    return p;
}

static uint32_t carved(const cm_desc_t *d) { return atomic_load(&d->carved); }

int main(void) {
    cm_heap_t *h = cm_heap_new();
    CHECK(h, "cm_heap_new");
    for (size_t i = 0; i < LIVE; i++) blocks[i] = alloc(h, i);
    cm_desc_t *s1 = cm_pool_desc_of(blocks[0]), *s2 = cm_pool_desc_of(blocks[PER_SB]);
    unsigned cls = cm_desc_class(s1);
    CHECK(cm_class_info[cls].max_count == PER_SB && cm_class_info[cls].carve_batch == 64,
          "64-byte blocks: 1,024 to a superblock, carved 64 at a time");
    for (size_t i = 0; i < LIVE; i++)
        CHECK(cm_pool_desc_of(blocks[i]) == (i < PER_SB ? s1 : s2), "block %zu's superblock", i);
    CHECK(carved(s1) == PER_SB && carved(s2) == LIVE - PER_SB, "S1 carved whole, S2 576 blocks");

    for (size_t i = 0; i < LIVE; i++) check_and_free(blocks[i], i);
    for (size_t i = 0; i < LIVE; i++) blocks[i] = alloc(h, i);
    size_t in_s1 = 0;
    for (size_t i = 0; i < LIVE; i++) {
        cm_desc_t *d = cm_pool_desc_of(blocks[i]);
        CHECK(d == s1 || d == s2, "block %zu came from S1 or S2", i);
        in_s1 += d == s1;
    }
    CHECK(in_s1 == PER_SB, "all of S1's freed blocks reused (%zu)", in_s1);
    CHECK(carved(s2) == LIVE - PER_SB, "S2 carved no further while S1 held freed blocks (%u carved)", carved(s2));

    /* S1 is current and used up, S2 on avail with every block out. FEW of
     * S2's blocks come back: the next malloc turns to S2 and takes them;
     * then FEW of S1's come back (S1 now on avail), fewer than a batch:
     * once S2's are out, S2 carves its next batch instead of turning. */
    CHECK(s1->at == CM_AT_CURRENT && s2->at == CM_AT_AVAIL && cm_desc_used(s2) == LIVE - PER_SB,
          "S1 current, S2 on avail with all its blocks out");
    size_t s1_freed = 0, s2_freed = 0;
    for (size_t i = 0; i < LIVE && s2_freed < FEW; i++)
        if (cm_pool_desc_of(blocks[i]) == s2) {
            check_and_free(blocks[i], i);
            blocks[i] = NULL;
            s2_freed++;
        }
    void *extra[FEW + 1];
    extra[0] = alloc(h, LIVE);
    CHECK(cm_pool_desc_of(extra[0]) == s2 && s2->at == CM_AT_CURRENT, "S2's freed block reused, S2 current");
    for (size_t i = 0; i < LIVE && s1_freed < FEW; i++)
        if (cm_pool_desc_of(blocks[i]) == s1) {
            check_and_free(blocks[i], i);
            blocks[i] = NULL;
            s1_freed++;
        }
    CHECK(s1->at == CM_AT_AVAIL && h->bins[cls].avail == cm_desc_ref(s1), "S1 first on avail, %d blocks freed", FEW);
    for (size_t k = 1; k < FEW; k++) {
        extra[k] = alloc(h, LIVE + k);
        CHECK(cm_pool_desc_of(extra[k]) == s2 && carved(s2) == LIVE - PER_SB, "S2's freed blocks first");
    }
    extra[FEW] = alloc(h, LIVE + FEW);
    CHECK(cm_pool_desc_of(extra[FEW]) == s2 && carved(s2) == LIVE - PER_SB + 64,
          "with %d freed blocks on S1, S2 carves its next batch", FEW);
    for (size_t k = 0; k <= FEW; k++) check_and_free(extra[k], LIVE + k);

    for (size_t i = 0; i < LIVE; i++)
        if (blocks[i]) check_and_free(blocks[i], i);
    cm_heap_delete(h);
    puts("unit_reuse_before_carve: ok");
    return 0;
}
