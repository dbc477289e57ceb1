/* unit_pool: descriptors and superblock state transitions. The anchor word
 * packs and unpacks; the lock-free descriptor stack is LIFO and loses or
 * duplicates nothing under concurrent pops and pushes; a superblock goes
 * FULL -> PARTIAL -> (fully free, kept) -> EMPTY (memory returned) -> reused,
 * and a retired span is reused by another class. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"
#include "unit_check.h"

static void check_anchor_packing(void) {
    cm_anchor_t a = cm_anchor_make(CM_DETACHED, 65535, 65535);
    CHECK(cm_anchor_state(a) == CM_DETACHED && cm_anchor_avail(a) == 65535 && cm_anchor_count(a) == 65535 &&
              cm_anchor_version(a) == 0, "anchor extremes");
    a = cm_anchor_next(a, CM_PARTIAL, 17, 4096);
    CHECK(cm_anchor_state(a) == CM_PARTIAL && cm_anchor_avail(a) == 17 && cm_anchor_count(a) == 4096 &&
              cm_anchor_version(a) == 1, "anchor");
    cm_anchor_t top = cm_anchor_make(CM_FULL, 0, 0) | ~(cm_anchor_t)0 << CM_ANCHOR_VERSION_SHIFT;
    CHECK(cm_anchor_version(cm_anchor_next(top, CM_FULL, 0, 0)) == 0, "the version wraps without touching the fields");
}

#define STACK_DESCS 64
#define STACK_ROUNDS 200000
static cm_desc_stack_t stack;

static void *stack_worker(void *arg) {
    (void)arg;
    for (int i = 0; i < STACK_ROUNDS; i++) {
        cm_desc_t *d = cm_desc_stack_pop(&stack);
        if (d) cm_desc_stack_push(&stack, d);
    }
    return NULL;
}

static void check_stack(void) {
    cm_desc_t *a = cm_desc_alloc(), *b = cm_desc_alloc(), *c = cm_desc_alloc();
    CHECK(a && b && c && a != b && b != c, "descriptor allocation");
    cm_desc_stack_push(&stack, a);
    cm_desc_stack_push(&stack, b);
    cm_desc_stack_push(&stack, c);
    CHECK(cm_desc_stack_pop(&stack) == c && cm_desc_stack_pop(&stack) == b && cm_desc_stack_pop(&stack) == a,
          "stack order");
    CHECK(cm_desc_stack_pop(&stack) == NULL, "empty stack");

    cm_desc_t *all[STACK_DESCS];
    for (int i = 0; i < STACK_DESCS; i++) cm_desc_stack_push(&stack, all[i] = cm_desc_alloc());
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, stack_worker, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    int seen[STACK_DESCS] = {0}, n = 0;
    for (cm_desc_t *d; (d = cm_desc_stack_pop(&stack)) != NULL; n++) {
        int i = 0;
        while (i < STACK_DESCS && all[i] != d) i++;
        CHECK(i < STACK_DESCS && !seen[i], "foreign or duplicated descriptor after concurrent use");
        seen[i] = 1;
    }
    CHECK(n == STACK_DESCS, "lost descriptors: %d of %d", n, STACK_DESCS);
}

static unsigned state_of(cm_desc_t *d) { return cm_anchor_state(atomic_load(&d->anchor)); }
static uint32_t count_of(cm_desc_t *d) { return cm_anchor_count(atomic_load(&d->anchor)); }

/* Allocate every block of one fresh superblock of class cls. */
static cm_desc_t *fill_superblock(unsigned cls, void **blocks) {
    const cm_class_info_t *ci = &cm_class_info[cls];
    for (uint32_t i = 0; i < ci->max_count; i++) {
        blocks[i] = cm_malloc(ci->block_size);
        CHECK(blocks[i] != NULL, "allocation");
        ((char *)blocks[i])[ci->block_size - 1] = 1;
    }
    cm_desc_t *d = cm_pool_desc_of(blocks[0]);
    for (uint32_t i = 1; i < ci->max_count; i++)
        CHECK(cm_pool_desc_of(blocks[i]) == d, "blocks of one fresh superblock split across superblocks");
    return d;
}

static void check_lifecycle(void) {
    unsigned cls = CM_NUM_CLASSES;
    uint32_t max = cm_class_info[cls].max_count;
    void *blocks[64];
    cm_desc_t *d = fill_superblock(cls, blocks);
    CHECK(state_of(d) == CM_FULL && count_of(d) == 0, "fresh superblock handed out whole is FULL");

    uint32_t some = max / 2;
    for (uint32_t i = 0; i < some; i++) cm_free(blocks[i]);
    cm_tcache_flush_all();
    CHECK(state_of(d) == CM_PARTIAL && count_of(d) == some, "after a flush of %u: state %u count %u", some,
          state_of(d), count_of(d));

    for (uint32_t i = some; i < max; i++) cm_free(blocks[i]);
    cm_tcache_flush_all();
    CHECK(state_of(d) == CM_PARTIAL && count_of(d) == max, "fully free superblock kept within budget");

    cm_stats_t before, after;
    cm_stats_get(&before);
    CHECK(cm_pool_trim(), "trim found nothing to return");
    cm_stats_get(&after);
    CHECK(state_of(d) == CM_EMPTY, "after trim: state %u", state_of(d));
    CHECK(after.returned >= before.returned + ((size_t)1 << d->span_shift), "trim returned no memory");
    CHECK(after.superblocks_live + 1 <= before.superblocks_live, "superblock count after trim");
    CHECK(cm_entry_class(cm_pagemap_get((uintptr_t)d->base)) == 0, "retired span still answers as a class");

    void *again = cm_malloc(cm_class_info[cls].block_size);
    CHECK(cm_pool_desc_of(again) == d && state_of(d) == CM_FULL, "retired superblock not reused");
    cm_free(again);
}

static void check_span_reuse_across_classes(void) {
    unsigned a = CM_NUM_CLASSES - 1, b = CM_NUM_CLASSES - 2;
    CHECK(cm_class_info[a].span_shift == cm_class_info[b].span_shift, "test needs two classes of one span size");
    cm_options.empty_keep = 0; /* retire superblocks as soon as they are fully free */
    void *blocks[64];
    cm_desc_t *d = fill_superblock(a, blocks);
    /* all blocks come back in one batch while FULL (on no list): FULL -> RETIRING,
     * then the span goes back to the arena and the descriptor to the pool */
    uint32_t max = cm_class_info[a].max_count;
    char *span = d->base;
    for (uint32_t i = 0; i + 1 < max; i++) cm_block_set_next(blocks[i], blocks[i + 1]);
    cm_pool_return_chain(d, blocks[0], blocks[max - 1], max);
    CHECK(state_of(d) == CM_RETIRING && cm_entry_class(cm_pagemap_get((uintptr_t)span)) == 0,
          "fully free superblock over budget not retired: state %u", state_of(d));
    void *other = cm_malloc(cm_class_info[b].block_size);
    CHECK(cm_pool_desc_of(other) == d && d->base == span, "retired span not reused by a class of the same span size");
    CHECK(atomic_load(&d->size_class) == b && d->block_size == cm_class_info[b].block_size, "reassigned class");
    cm_free(other);
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    check_anchor_packing();
    check_stack();
    check_lifecycle();
    check_span_reuse_across_classes();
    printf("pool: anchors, descriptor stacks and superblock transitions behave\n");
    return 0;
}
