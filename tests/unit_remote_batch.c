/* unit_remote_batch: cm_heap_visit and a remote batch caught between its
 * hand-over and the clearing of its word.
 *
 * Deterministic: a test-only pause point in cm_remote_flush, after the CAS
 * that put the batch on the superblock's anchor and before the thread's
 * word says so. While the freeing thread waits there, the owner allocates
 * the batch's blocks again (its bin refills from the anchor), fills them,
 * and visits its heap: each of them is live and must be reported once. A
 * visitor that trusted the stale word would count them as freed. Then the
 * thread is let go and a second visit, with nothing in flight, must agree.
 * Run on the thread's default heap and on its default cage heap (both
 * batched: neither can be destroyed). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

enum { N = 64, SIZE = 48 };
static char *blocks[N];
static atomic_int at_pause, go_on;

static void hold_after_handover(const char *point) {
    if (strcmp(point, "remote: handed over") != 0) return;
    atomic_store(&at_pause, 1);
    while (!atomic_load(&go_on)) cm_os_yield();
}

static void *free_as_batch(void *arg) {
    (void)arg;
    for (int i = 0; i < N / 2; i++) cm_free(blocks[i]); /* one superblock, one batch (its carve batch is 64) */
    uint64_t batch = atomic_load(&cm_thread.heap->remote_batch);
    CHECK(cm_remote_batch_count(batch) == N / 2, "%u of %d frees wait in the thread's batch",
          cm_remote_batch_count(batch), N / 2);
    cm_test_hook = hold_after_handover;
    cm_remote_flush();
    return NULL;
}

typedef struct seen {
    char *want[N];
    int count[N];
} seen_t;

static int count_wanted(void *block, size_t usable, void *arg) {
    (void)usable;
    seen_t *s = arg;
    for (int i = 0; i < N; i++)
        if (block == s->want[i]) s->count[i]++;
    return 0;
}

static int run(cm_heap_t *def) {
    atomic_store(&at_pause, 0);
    atomic_store(&go_on, 0);
    for (int i = 0; i < N; i++) {
        blocks[i] = cm_heap_malloc(def, SIZE);
        memset(blocks[i], 0x5a, SIZE);
    }
    CHECK(cm_pool_desc_of(blocks[0]) == cm_pool_desc_of(blocks[N / 2 - 1]), "the freed blocks share a superblock");
    pthread_t t;
    pthread_create(&t, NULL, free_as_batch, NULL);
    while (!atomic_load(&at_pause)) cm_os_yield();
    cm_test_hook = NULL; /* the hook is global: ours must not pause */

    /* the owner takes the batch back from the anchor and allocates it again */
    seen_t s;
    memset(&s, 0, sizeof s);
    int again = 0;
    for (int k = 0; k < 4 * N && again < N / 2; k++) {
        char *p = cm_heap_malloc(def, SIZE);
        memset(p, 0x6b, SIZE);
        for (int i = 0; i < N / 2; i++)
            if (p == blocks[i]) s.want[again++] = p;
    }
    CHECK(again > 0, "the owner did not get the handed-over blocks back");
    CHECK(cm_heap_visit(def, count_wanted, &s) == 0, "visit stopped");
    for (int i = 0; i < again; i++)
        CHECK(s.count[i] == 1, "a block freed in a batch and allocated again was reported %d times while the batch's "
                               "word was stale", s.count[i]);
    atomic_store(&go_on, 1);
    pthread_join(t, NULL);
    memset(s.count, 0, sizeof s.count);
    CHECK(cm_heap_visit(def, count_wanted, &s) == 0, "visit stopped");
    for (int i = 0; i < again; i++) CHECK(s.count[i] == 1, "reported %d times after the hand-over", s.count[i]);
    return again;
}

int main(void) {
    int plain = run(cm_heap_get_default());
    cm_heap_t *cage = cm_thread_heap(CM_SPACE_CAGE);
    CHECK(cage != NULL, "no default cage heap");
    int caged = run(cage);
    printf("unit_remote_batch: a batch caught mid hand-over (default heap, default cage heap): %d and %d freed "
           "blocks allocated again, each reported once\n", plain, caged);
    return 0;
}
