/* unit_parked_retire: a parked superblock whose every block came back by
 * remote frees may be retired by trim (or decay) while its owner stays
 * away, but never after the owner took it back.
 *
 * Deterministic: the owner fills superblock S (8 blocks of 8192 B) and
 * parks it; another thread frees all 8. That thread's cm_pool_trim pauses
 * between reading S's anchor and its CAS, and the owner, woken in the pause,
 * drains its mailbox: S is taken back. The trim must then leave S alone:
 * the owner allocates all 8 blocks of S again and their data must hold.
 * Before unpark took S back with a CAS, nothing stopped the retire. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

#define SIZE 8192

static cm_desc_t *victim;
static void *blocks[8];
static sem_t freed, take_back, taken_back, trimmed;
static int paused;

static int holds(const char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] != v) return 0;
    return 1;
}

/* Runs inside cm_pool_trim, after it read an anchor. */
static void interleave(const char *point) {
    cm_anchor_t a = atomic_load(&victim->anchor);
    if (strcmp(point, "trim: anchor read") != 0 || paused || cm_anchor_state(a) != CM_OWNED_FULL) return;
    paused = 1;
    sem_post(&take_back);
    sem_wait(&taken_back);
}

static void *owner(void *arg) {
    (void)arg;
    for (int i = 0; i < 8; i++) blocks[i] = cm_malloc(SIZE);
    victim = cm_pool_desc_of(blocks[0]);
    CHECK(victim && cm_class_info[cm_desc_class(victim)].max_count == 8, "8 blocks of 8192 B per superblock");
    for (int i = 0; i < 8; i++) CHECK(cm_pool_desc_of(blocks[i]) == victim, "the first 8 blocks share a superblock");
    void *next = cm_malloc(SIZE); /* S is exhausted: parked, and a new superblock current */
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED_FULL, "S parked");
    sem_post(&freed); /* the other thread frees S's 8 blocks, then trims */

    sem_wait(&take_back);
    cm_heap_drain_mailbox(cm_my_heap());
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED, "S taken back");
    sem_post(&taken_back);
    sem_wait(&trimmed);

    /* the current superblock's 7 other blocks, then S's 8 again */
    void *more[15];
    int from_s = 0;
    for (int i = 0; i < 15; i++) {
        more[i] = cm_malloc(SIZE);
        CHECK(more[i], "allocation");
        memset(more[i], 0x5a, SIZE);
        from_s += cm_pool_desc_of(more[i]) == victim;
    }
    CHECK(from_s == 8, "S gave %d blocks, not 8", from_s);
    for (int i = 0; i < 15; i++) {
        CHECK(holds(more[i], SIZE, 0x5a), "a live block of S lost its data (S retired under its owner)");
        cm_free(more[i]);
    }
    cm_free(next);
    return NULL;
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    sem_init(&freed, 0, 0);
    sem_init(&take_back, 0, 0);
    sem_init(&taken_back, 0, 0);
    sem_init(&trimmed, 0, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, owner, NULL) == 0, "pthread_create");
    sem_wait(&freed);
    for (int i = 0; i < 8; i++) cm_free(blocks[i]);
    cm_remote_flush(); /* this thread's batched remote frees go to S */
    CHECK(cm_anchor_count(atomic_load(&victim->anchor)) == 8, "all 8 blocks back on S's anchor");

    cm_test_hook = interleave;
    cm_pool_trim();
    cm_test_hook = NULL;
    CHECK(paused, "the pause point was not reached with S parked");
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED, "trim changed S after its owner took it back");
    sem_post(&trimmed);
    pthread_join(t, NULL);
    printf("parked retire: trim leaves a parked superblock alone once its owner took it back\n");
    return 0;
}
