/* unit_bounds: the smaller defects of "Reliability at the edges", each at
 * its boundary.
 *  - malloc_trim gives back everything the calling thread holds, the
 *    uncarved rest of its fresh superblocks included: no superblock stays live.
 *  - The heap-record pool's head has a 32-bit tag: a cm_heap_record_get paused
 *    (test pause point) between reading the head and its CAS while exactly
 *    65,536 pool operations bring the same record back to the head must not
 *    hand out the record another holder owns (a 16-bit tag wrapped there).
 *  - cm_pagemap_set refuses a range beyond the user address space instead
 *    of writing past its root (which landed in the shared empty leaf).
 *  - A decay pass looks at a bounded number of descriptors, however many
 *    exist (it scanned all of them, up to 2M, inside a malloc).
 *  - A refill miss looks at other classes' partial stacks only where a
 *    fully free superblock is kept (it popped and pushed back ~124 tops). */
#include <pthread.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

static unsigned hook_hits;
static void count_point(const char *point) {
    (void)point;
    hook_hits++;
}

static void check_trim_returns_everything(void) {
    void *blocks[CM_NUM_CLASSES + 1];
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        blocks[c] = cm_malloc(cm_class_info[c].block_size);
        CHECK(blocks[c] != NULL, "allocation");
        memset(blocks[c], (int)c, cm_class_info[c].block_size);
    }
    cm_stats_t s;
    cm_stats_get(&s);
    CHECK(s.superblocks_live >= CM_NUM_CLASSES, "one superblock per class in use");
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) cm_free(blocks[c]);
    cm_trim();
    cm_stats_get(&s);
    CHECK(s.superblocks_live == 0, "%zu superblocks still live after everything was freed and trimmed",
          s.superblocks_live);
}

/* ---- the record pool under a wrapped tag ---- */
static cm_heap_t *rec_a, *rec_b;
static int replayed;

/* Runs inside cm_heap_record_get after it read head a (next b): take a, take b and
 * keep it, put back a fresh record and a, then pop and push a until exactly
 * 65,536 operations have passed. a is at the head again, b is held. */
static void replay_wrap(const char *point) {
    if (strcmp(point, "heap records: head read") != 0 || replayed) return;
    replayed = 1;
    CHECK(cm_heap_record_get() == rec_a && cm_heap_record_get() == rec_b, "the pool holds a, then b");
    cm_heap_t *fresh = cm_heap_record_get();
    CHECK(fresh && fresh != rec_a && fresh != rec_b, "a fresh record");
    cm_heap_record_put(fresh);
    cm_heap_record_put(rec_a);
    for (unsigned ops = 4; ops < 65536; ops += 2) {
        CHECK(cm_heap_record_get() == rec_a, "a is at the head");
        cm_heap_record_put(rec_a);
    }
}

static void check_record_pool_tag(void) {
    rec_a = cm_heap_record_get();
    rec_b = cm_heap_record_get();
    CHECK(rec_a && rec_b && rec_a != rec_b, "two records");
    cm_heap_record_put(rec_b);
    cm_heap_record_put(rec_a);
    cm_test_hook = replay_wrap;
    cm_heap_t *got = cm_heap_record_get();
    cm_test_hook = NULL;
    CHECK(replayed && got == rec_a, "the paused call returns a");
    cm_heap_t *next = cm_heap_record_get();
    CHECK(next != rec_b, "the pool handed out b, which its holder still owns (the head's tag wrapped)");
}

/* ---- page map range ---- */
static void check_pagemap_bounds(void) {
    uintptr_t beyond = (uintptr_t)1 << CM_ADDRESS_BITS;
    CHECK(!cm_pagemap_set(beyond, CM_UNIT_SIZE, 0x12345), "a range beyond the address space was accepted");
    CHECK(!cm_pagemap_set(beyond - CM_UNIT_SIZE, 2 * CM_UNIT_SIZE, 0x12345), "a range crossing the top was accepted");
    for (size_t i = 0; i < ((size_t)1 << CM_PAGEMAP_LEAF_BITS); i++)
        CHECK(atomic_load(&cm_pagemap.empty_leaf[i]) == 0, "the shared empty leaf was written at %zu", i);
}

/* ---- decay's work per pass ---- */
static void check_decay_bound(void) {
    unsigned cls = 1; /* 16 B blocks, 64 KiB spans: nothing is touched until carved */
    for (int i = 0; i < 6000; i++) {
        cm_refill_t r;
        CHECK(cm_pool_take(cls, CM_SPACE_PLAIN, &r), "take");
    }
    CHECK(cm_desc_count() > 6000, "descriptors made");
    /* one kept superblock, so decay has something to look for */
    void *b = cm_malloc(4096);
    cm_free(b);
    cm_trim();
    cm_options.empty_keep = (size_t)1 << 30;
    void *blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = cm_malloc(4096);
    for (int i = 0; i < 16; i++) cm_free(blocks[i]);
    cm_heap_collect(cm_heap_get_default(), 0);
    hook_hits = 0;
    cm_test_hook = count_point;
    cm_pool_decay();
    cm_test_hook = NULL;
    CHECK(hook_hits > 0 && hook_hits <= 4096, "one decay pass looked at %u descriptors", hook_hits);
}

/* ---- take-over looks only where something is kept ---- */
static void *leave_partial(void *arg) {
    void *x = cm_malloc(8192);
    *(void **)arg = cm_malloc(8192);
    cm_free(x);
    return NULL;
}

static void check_take_over_looks_only_at_kept(void) {
    unsigned a = 0, b = 0;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        if (cm_class_info[c].block_size == 8192) a = c;
        if (cm_class_info[c].block_size == 7168) b = c;
    }
    CHECK(a && b && cm_class_info[a].span_shift == cm_class_info[b].span_shift, "two classes sharing a span size");
    /* a partly used superblock of class a sits on its partial stack: a
     * thread that left a block in it exited */
    pthread_t t;
    void *y = NULL;
    pthread_create(&t, NULL, leave_partial, &y);
    pthread_join(t, NULL);
    hook_hits = 0;
    cm_test_hook = count_point;
    cm_refill_t r;
    CHECK(cm_pool_take(b, CM_SPACE_PLAIN, &r), "take of class b");
    cm_test_hook = NULL;
    CHECK(hook_hits == 0, "a refill miss popped %u superblocks of classes with none kept", hook_hits);
    cm_free(y);
}

int main(void) {
    check_trim_returns_everything();
    check_record_pool_tag();
    check_pagemap_bounds();
    check_take_over_looks_only_at_kept();
    check_decay_bound();
    printf("bounds: trim returns all, record pool tag, page-map range, take-over and decay work per call\n");
    return 0;
}
