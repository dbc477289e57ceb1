/* unit_current_count: a current superblock's count keeps its local list's
 * length and a bound on its bin (internal.h, cm_used_current), so settling
 * it walks the bin alone. Random mallocs and owner frees of one class, with
 * batches of remote frees (a thread that exits) taken into the bin, across
 * carve batches and superblocks; after every step:
 *  - the count's local length is the current superblock's local list's,
 *  - the bin holds no more than the count's bound says it received;
 * and after cm_heap_collect, every superblock the heap keeps has its exact
 * used count (its live blocks), and one whose blocks are all free is gone.
 * Every block is filled with a pattern and checked before its free. */
#include <pthread.h>
#include <string.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

#define SIZE 64
#define SLOTS 3000 /* live blocks at most: about three superblocks, of 1,024 blocks each */
#define STEPS 200000

static void *slot[SLOTS];
static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint64_t next_random(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void fill(void *p, size_t i) { memset(p, (int)(i * 7 + 1), SIZE); }

static void check_and_free(void *p, size_t i) {
    const unsigned char *b = p;
    for (size_t k = 0; k < SIZE; k++) CHECK(b[k] == (unsigned char)(i * 7 + 1), "block %p changed at %zu", p, k);
    cm_free(p);
}

static uint32_t list_len(void *head) {
    uint32_t n = 0;
    for (void *b = cm_list_head(head); b; b = cm_block_peek_next(b)) n++;
    return n;
}

static void check_current(cm_heap_t *h, unsigned cls, int step) {
    if (!h->bins[cls].current) return;
    cm_desc_t *d = cm_desc_from_ref(h->bins[cls].current);
    uint32_t used = cm_desc_used(d);
    CHECK(used & CM_USED_CURRENT, "step %d: current superblock's count %#x says current", step, used);
    CHECK(cm_current_local_len(used) == list_len(d->local_free), "step %d: count's local length %u, list holds %u",
          step, cm_current_local_len(used), list_len(d->local_free));
    CHECK(list_len(h->bin_head[cls]) <= cm_current_bin_fill(used), "step %d: bin holds %u, bound %u", step,
          list_len(h->bin_head[cls]), cm_current_bin_fill(used));
}

typedef struct remote_batch {
    void *blocks[64];
    size_t index[64];
    int n;
} remote_batch_t;

static void *free_remotely(void *arg) {
    remote_batch_t *r = arg;
    for (int i = 0; i < r->n; i++) check_and_free(r->blocks[i], r->index[i]);
    return NULL; /* the exit hands the batch to the superblock's anchor */
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    cm_heap_t *h = cm_heap_new();
    CHECK(h, "cm_heap_new");
    unsigned cls = cm_fine_size_to_class(SIZE);
    uint32_t remote_rounds = 0;
    for (int step = 0; step < STEPS; step++) {
        size_t i = next_random() % SLOTS;
        if (step % 4999 == 0) { /* a batch of remote frees */
            remote_batch_t r = {.n = 0};
            for (size_t k = 0; k < SLOTS && r.n < 64; k++)
                if (slot[k] && next_random() % 4 == 0) r.blocks[r.n] = slot[k], r.index[r.n++] = k, slot[k] = NULL;
            pthread_t t;
            CHECK(pthread_create(&t, NULL, free_remotely, &r) == 0, "pthread_create");
            pthread_join(t, NULL);
            remote_rounds++;
        } else if (slot[i]) {
            check_and_free(slot[i], i);
            slot[i] = NULL;
        } else {
            slot[i] = cm_heap_malloc(h, SIZE);
            CHECK(slot[i], "cm_heap_malloc");
            fill(slot[i], i);
        }
        check_current(h, cls, step);
    }

    /* collected: every superblock kept has its live blocks as its count */
    cm_heap_collect(h, 1);
    uint32_t kept = 0;
    for (uint32_t r = h->bins[cls].avail; r; r = cm_desc_from_ref(r)->link, kept++) {
        cm_desc_t *d = cm_desc_from_ref(r);
        uint32_t live = 0;
        for (size_t k = 0; k < SLOTS; k++) live += slot[k] && cm_pool_desc_of(slot[k]) == d;
        CHECK(cm_desc_used(d) == live, "superblock %p: count %u, live blocks %u", (void *)d->base, cm_desc_used(d),
              live);
        CHECK(live > 0, "superblock %p kept with no live block", (void *)d->base);
    }
    for (size_t k = 0; k < SLOTS; k++)
        if (slot[k]) check_and_free(slot[k], k);
    cm_heap_destroy(h);
    printf("current count: %d steps, %u remote batches, %u superblocks kept at the collect\n", STEPS, remote_rounds,
           kept);
    return 0;
}
