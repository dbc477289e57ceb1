/* unit_pool: descriptors and superblock state transitions. The anchor word
 * packs and unpacks; the lock-free descriptor stack is LIFO and loses or
 * duplicates nothing under concurrent pops and pushes; a superblock owned
 * by a heap takes local frees on its local list and remote frees on its
 * anchor, goes back to the pool when its last block is freed (fully free,
 * kept) -> EMPTY (memory returned) -> reused, a retired span is reused
 * by another class, and a superblock given up with blocks never carved
 * stays partial for them. */
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

static void *remote_free(void *p) {
    cm_free(p);
    return NULL;
}

static void check_lifecycle(void) {
    unsigned cls = CM_NUM_CLASSES;
    uint32_t max = cm_class_info[cls].max_count;
    void *blocks[64] = {0};
    cm_desc_t *d = fill_superblock(cls, blocks);
    CHECK(state_of(d) == CM_OWNED && count_of(d) == 0 && atomic_load(&d->heap) == cm_my_ref(),
          "a superblock being carved is OWNED by the default heap");

    uint32_t some = max / 2;
    for (uint32_t i = 0; i < some; i++) cm_free(blocks[i]);
    CHECK(state_of(d) == CM_OWNED && count_of(d) == 0 && d->local_free == blocks[some - 1],
          "local frees of the current superblock go on its local list, not the anchor: state %u count %u",
          state_of(d), count_of(d));
    pthread_t t;
    pthread_create(&t, NULL, remote_free, blocks[some]);
    pthread_join(t, NULL);
    CHECK(state_of(d) == CM_OWNED && count_of(d) == 1, "a remote free goes to the anchor: count %u", count_of(d));

    cm_heap_collect(cm_heap_get_default(), 0); /* d stops being current; the remote free is taken */
    CHECK(state_of(d) == CM_OWNED && count_of(d) == 0 && cm_desc_used(d) == max - some - 1 && d->at == CM_AT_AVAIL,
          "after collect: count %u used %u at %u", count_of(d), cm_desc_used(d), d->at);
    for (uint32_t i = some + 1; i < max; i++) cm_free(blocks[i]);
    CHECK(state_of(d) == CM_OWNED && cm_desc_used(d) == 0 && d->at == CM_AT_AVAIL,
          "an emptied superblock stays with its heap (one per class) for the next refill");
    cm_heap_collect(cm_heap_get_default(), 0);
    CHECK(state_of(d) == CM_PARTIAL && count_of(d) == max && atomic_load(&d->heap) == 0,
          "collect gives the empty superblock back, kept fully free: state %u count %u", state_of(d), count_of(d));

    cm_stats_t before, after;
    cm_stats_get(&before);
    CHECK(cm_pool_trim(), "trim found nothing to return");
    cm_stats_get(&after);
    CHECK(state_of(d) == CM_EMPTY, "after trim: state %u", state_of(d));
    CHECK(after.returned >= before.returned + ((size_t)1 << d->span_shift), "trim returned no memory");
    CHECK(after.superblocks_live + 1 <= before.superblocks_live, "superblock count after trim");
    CHECK(cm_entry_class(cm_pagemap_get((uintptr_t)d->base)) == 0, "retired span still answers as a class");

    void *again = cm_malloc(cm_class_info[cls].block_size);
    CHECK(cm_pool_desc_of(again) == d && state_of(d) == CM_OWNED, "retired superblock not reused");
    cm_free(again);
}

/* A heap gives up a superblock whose carved blocks are all in use but
 * whose rest was never carved (its thread calloc'ed one block from it and
 * exited): it goes on a partial stack with no free block listed, and a
 * taker that owns nothing gets the rest as blocks to carve. */
enum { UNCARVED_CLASS = 10 };
static void *calloc_one_and_exit(void *out) {
    *(void **)out = cm_calloc(1, cm_class_info[UNCARVED_CLASS].block_size);
    return NULL;
}

static void check_uncarved_rest(void) {
    const cm_class_info_t *ci = &cm_class_info[UNCARVED_CLASS];
    void *one = NULL;
    pthread_t t;
    pthread_create(&t, NULL, calloc_one_and_exit, &one);
    pthread_join(t, NULL);
    CHECK(one != NULL, "calloc");
    cm_desc_t *d = cm_pool_desc_of(one);
    CHECK(state_of(d) == CM_PARTIAL && count_of(d) == 0 && atomic_load(&d->carved) == 1,
          "a superblock given up with its one carved block in use is not left partial: state %u count %u carved %u",
          state_of(d), count_of(d), atomic_load(&d->carved));
    cm_refill_t r;
    CHECK(cm_pool_take(UNCARVED_CLASS, CM_SPACE_PLAIN, &r) && !r.chain && r.fresh == d->base + ci->block_size &&
              r.fresh_count == ci->max_count - 1 && r.fresh_dirty,
          "an owner-less take does not get the uncarved rest");
    CHECK(state_of(d) == CM_FULL && atomic_load(&d->carved) == ci->max_count, "taken: every block counts as carved");
    char *rest = r.fresh;
    for (uint32_t i = 0; i + 1 < r.fresh_count; i++)
        cm_block_set_next(rest + (size_t)i * ci->block_size, rest + (size_t)(i + 1) * ci->block_size);
    cm_block_set_next(rest + (size_t)(r.fresh_count - 1) * ci->block_size, NULL);
    cm_pool_return_chain(d, rest, rest + (size_t)(r.fresh_count - 1) * ci->block_size, r.fresh_count);
    CHECK(state_of(d) == CM_PARTIAL && count_of(d) == ci->max_count - 1, "the rest given back");
    cm_free(one);
}

static void check_span_reuse_across_classes(void) {
    unsigned a = CM_NUM_CLASSES - 1, b = CM_NUM_CLASSES - 2;
    CHECK(cm_class_info[a].span_shift == cm_class_info[b].span_shift, "test needs two classes of one span size");
    cm_options.empty_keep = 0; /* retire superblocks as soon as they are fully free */
    cm_refill_t r;
    CHECK(cm_pool_take(a, CM_SPACE_PLAIN, &r) && r.fresh, "a fresh superblock no heap owns");
    cm_desc_t *d = cm_pool_desc_of(r.fresh);
    /* all blocks come back in one batch while FULL (on no list): FULL -> RETIRING,
     * then the span goes back to the arena and the descriptor to the pool */
    uint32_t max = cm_class_info[a].max_count, size = cm_class_info[a].block_size;
    char *span = d->base;
    for (uint32_t i = 0; i + 1 < max; i++) cm_block_set_next(span + (size_t)i * size, span + (size_t)(i + 1) * size);
    cm_pool_return_chain(d, span, span + (size_t)(max - 1) * size, max);
    CHECK(state_of(d) == CM_RETIRING && cm_entry_class(cm_pagemap_get((uintptr_t)span)) == 0,
          "fully free superblock over budget not retired: state %u", state_of(d));
    void *other = cm_malloc(cm_class_info[b].block_size);
    CHECK(cm_pool_desc_of(other) == d && d->base == span, "retired span not reused by a class of the same span size");
    CHECK(atomic_load(&d->size_class) == b, "reassigned class");
    cm_free(other);
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    check_uncarved_rest(); /* first: a fresh superblock, not one kept empty */
    check_anchor_packing();
    check_stack();
    check_lifecycle();
    check_span_reuse_across_classes();
    printf("pool: anchors, descriptor stacks and superblock transitions behave\n");
    return 0;
}
