/* unit_trim_aba: trimming a kept (fully free) superblock must not retire it
 * after another class took its span over and handed out a block.
 *
 * Deterministic: a test-only pause point inside cm_pool_trim, between its
 * read of the anchor and its CAS, runs the interleaving that broke it:
 * class B (7168 B, 9 per 64 KiB span) takes over the kept span of class A
 * (8192 B, 8 per span), hands out all 9 blocks, and gets 8 back in an order
 * that rebuilds trim's {PARTIAL, avail, count 8} exactly. The ninth block is
 * live; trim must leave the span alone. Then a multi-threaded stress: two
 * threads churn classes of one span size (blocks pattern-checked) while a
 * third trims without pause. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

static unsigned class_a, class_b;
static cm_desc_t *victim;
static char *live_block;
static int paused;

static void fill(char *p, size_t n, unsigned char v) { memset(p, v, n); }
static int holds(const char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] != v) return 0;
    return 1;
}

/* Runs inside cm_pool_trim, after it read victim's anchor. */
static void interleave(const char *point) {
    if (strcmp(point, "trim: anchor read") != 0 || paused) return;
    paused = 1;
    cm_refill_t r;
    CHECK(cm_pool_take(class_b, CM_SPACE_PLAIN, &r) && r.fresh == victim->base,
          "class B did not take over the kept span of class A");
    const cm_class_info_t *b = &cm_class_info[class_b];
    char *blocks[16];
    for (uint32_t i = 0; i < b->max_count; i++) fill(blocks[i] = r.fresh + (size_t)i * b->block_size, b->block_size, 0xb0);
    /* return all but the last, block 0 first, as A's list had it: same anchor bits */
    for (uint32_t i = 0; i + 2 < b->max_count; i++) cm_block_set_next(blocks[i], blocks[i + 1]);
    cm_block_set_next(blocks[b->max_count - 2], NULL);
    cm_pool_return_chain(victim, blocks[0], blocks[b->max_count - 2], b->max_count - 1);
    live_block = blocks[b->max_count - 1];
    fill(live_block, b->block_size, 0x11);
}

static void check_interleaving(void) {
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        if (cm_class_info[c].block_size == 8192) class_a = c;
        if (cm_class_info[c].block_size == 7168) class_b = c;
    }
    CHECK(class_a && class_b && cm_class_info[class_a].span_shift == cm_class_info[class_b].span_shift &&
              cm_class_info[class_a].max_count == cm_class_info[class_b].max_count - 1,
          "the test needs 8192 B and 7168 B classes sharing a span size");
    cm_options.empty_keep = (size_t)1 << 30;
    cm_refill_t r;
    CHECK(cm_pool_take(class_a, CM_SPACE_PLAIN, &r) && r.fresh, "a fresh superblock of class A");
    victim = cm_pool_desc_of(r.fresh);
    const cm_class_info_t *a = &cm_class_info[class_a];
    char *blocks[16];
    for (uint32_t i = 0; i < a->max_count; i++) blocks[i] = r.fresh + (size_t)i * a->block_size;
    for (uint32_t i = 0; i + 1 < a->max_count; i++) cm_block_set_next(blocks[i], blocks[i + 1]);
    cm_block_set_next(blocks[a->max_count - 1], NULL);
    cm_pool_return_chain(victim, blocks[0], blocks[a->max_count - 1], a->max_count); /* kept, fully free */

    cm_test_hook = interleave;
    cm_pool_trim();
    cm_test_hook = NULL;
    CHECK(paused, "the pause point was not reached");
    CHECK(holds(live_block, cm_class_info[class_b].block_size, 0x11),
          "trim retired a span holding a live block (its memory was returned)");
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_PARTIAL, "the taken-over superblock is no longer PARTIAL");
}

/* ---- stress: churn classes of one span size while another thread trims ---- */
static atomic_int stop;

static void *churn(void *arg) {
    uintptr_t seed = (uintptr_t)arg;
    static const size_t sizes[] = {8192, 7168, 6144, 5120};
    char *held[64] = {0};
    size_t held_size[64];
    for (int round = 0; !atomic_load(&stop); round++) {
        for (int i = 0; i < 64; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            if (held[i]) {
                CHECK(holds(held[i], held_size[i], (unsigned char)(uintptr_t)held[i]), "a live block changed");
                cm_free(held[i]);
                held[i] = NULL;
            }
            if ((seed >> 40) % 3) {
                held_size[i] = sizes[(seed >> 20) % 4];
                held[i] = cm_malloc(held_size[i]);
                CHECK(held[i] != NULL, "allocation");
                fill(held[i], held_size[i], (unsigned char)(uintptr_t)held[i]);
            }
        }
        if (round % 16 == 0) cm_trim();
    }
    for (int i = 0; i < 64; i++) cm_free(held[i]);
    return NULL;
}

static void *trimmer(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) cm_pool_trim();
    return NULL;
}

static void check_stress(void) {
    pthread_t t[3];
    pthread_create(&t[0], NULL, churn, (void *)1);
    pthread_create(&t[1], NULL, churn, (void *)2);
    pthread_create(&t[2], NULL, trimmer, NULL);
    struct timespec ts = {2, 0};
    nanosleep(&ts, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    check_interleaving();
    check_stress();
    printf("trim: a span taken over by another class is never retired under a live block\n");
    return 0;
}
