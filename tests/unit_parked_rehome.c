/* unit_parked_rehome: the remote free that brings a parked superblock's last
 * block back hands its span to the pool, where another thread's heap reuses
 * it; but never once the owner took the superblock back, and never one that
 * trim retired meanwhile.
 *
 * Deterministic, in three rounds. Each time the owner fills superblock S
 * (8 blocks of 8192 B) and parks it, and the main thread frees all 8.
 *  1. The free's hand-over pauses before its CAS, and the owner, woken in
 *     the pause, drains its mailbox: S is taken back. The hand-over must
 *     leave S alone: the owner gets all 8 blocks of S again, data intact.
 *  2. The hand-over pauses, and trim runs in the pause: it retires S, and
 *     the hand-over must leave S retired (its pages gone; nothing in the pool).
 *  3. No pause: S's span is in the pool under a new descriptor, every block
 *     free, and the main thread's next 8 blocks of 8192 B are exactly S's;
 *     the owner, coming back, drops the old descriptor and allocates on.
 *  4. The hand-over pauses once the new descriptor is a kept superblock,
 *     before it is listed, and trim runs in the pause: it retires the span,
 *     whose page-map entries (both maps) must end up naming no descriptor,
 *     and the listed, retired descriptor is dropped by the next taker.
 *     (Before the fix, the descriptor was kept before its entries were
 *     written: they ended up naming it, retired and soon reused.) */
#include <pthread.h>
#include <semaphore.h>

#include "unit_superblock_s.h"

enum { ROUND_TAKE_BACK = 1, ROUND_TRIM, ROUND_REUSE, ROUND_TRIM_HOME };

static sem_t filled, go_on, take_back, taken_back;
static int paused;

/* Runs at every test point; acts once per round, at the hand-over's pause. */
static void interleave(const char *point) {
    const char *pause = round_no == ROUND_TRIM_HOME ? "rehome: home kept" : "rehome: before the CAS";
    if (strcmp(point, pause) != 0 || paused) return;
    paused = 1;
    if (round_no == ROUND_TRIM_HOME) {
        CHECK(cm_pool_trim(), "trim found the new descriptor not kept");
        return;
    }
    if (round_no == ROUND_TAKE_BACK) {
        sem_post(&take_back);
        sem_wait(&taken_back);
    } else if (round_no == ROUND_TRIM) {
        CHECK(cm_pool_trim(), "trim found nothing to return");
        CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_EMPTY, "trim did not retire S");
    }
}

/* The owner fills S and parks it (the next block starts a new superblock). */
static void *fill_and_park(void) {
    fill_s();
    void *next = cm_malloc(SIZE);
    CHECK(next && cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED_FULL, "S parked");
    return next;
}

static void *owner(void *arg) {
    (void)arg;
    void *more[2 * PER_SB];

    round_no = ROUND_TAKE_BACK;
    void *next = fill_and_park();
    sem_post(&filled);
    sem_wait(&take_back);
    cm_heap_drain_mailbox(cm_my_heap());
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED, "S taken back");
    sem_post(&taken_back);
    sem_wait(&go_on);
    CHECK(allocate_and_count_s(more, 2 * PER_SB - 1) == PER_SB, "S did not give its 8 blocks to its owner again");
    for (int i = 0; i < 2 * PER_SB - 1; i++) cm_free(more[i]);
    cm_free(next);
    cm_heap_collect(cm_heap_get_default(), 1); /* nothing of round 1 stays in the owner's heap */

    round_no = ROUND_TRIM;
    next = fill_and_park();
    sem_post(&filled);
    sem_wait(&go_on);
    cm_heap_drain_mailbox(cm_my_heap()); /* drops the retired descriptor */
    CHECK(allocate_and_count_s(more, PER_SB) <= PER_SB, "allocation after the retire");
    for (int i = 0; i < PER_SB; i++) cm_free(more[i]);
    cm_free(next);
    cm_heap_collect(cm_heap_get_default(), 1);

    round_no = ROUND_REUSE;
    next = fill_and_park();
    sem_post(&filled);
    sem_wait(&go_on);
    cm_heap_drain_mailbox(cm_my_heap());
    CHECK(allocate_and_count_s(more, PER_SB) == 0, "the owner took S back after the main thread reused it");
    for (int i = 0; i < PER_SB; i++) cm_free(more[i]);
    cm_free(next);
    cm_heap_collect(cm_heap_get_default(), 1);

    round_no = ROUND_TRIM_HOME;
    next = fill_and_park();
    sem_post(&filled);
    sem_wait(&go_on);
    cm_heap_drain_mailbox(cm_my_heap()); /* drops the old descriptor */
    cm_free(next);
    return NULL;
}

/* Once the owner parked S: free S's blocks, the hand-over pausing once. */
static void free_paused(void) {
    sem_wait(&filled);
    paused = 0;
    free_s_from(0);
    CHECK(paused, "round %d: the hand-over's pause point was not reached", round_no);
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    sem_init(&filled, 0, 0);
    sem_init(&go_on, 0, 0);
    sem_init(&take_back, 0, 0);
    sem_init(&taken_back, 0, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, owner, NULL) == 0, "pthread_create");
    cm_test_hook = interleave;

    free_paused();
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED, "the hand-over changed S after its owner took it back");
    CHECK(cm_pool_desc_of(span) == victim, "S's span changed hands under its owner");
    sem_post(&go_on);

    free_paused();
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_EMPTY, "the hand-over changed S after trim retired it");
    CHECK(cm_pool_desc_of(span) == NULL, "a retired span still names a superblock");
    sem_post(&go_on);

    sem_wait(&filled);
    cm_test_hook = NULL;
    free_s_from(0);
    check_s_in_pool();
    void *mine[PER_SB];
    for (int i = 0; i < PER_SB; i++) {
        mine[i] = cm_malloc(SIZE);
        CHECK(in_span(mine[i]), "the main thread's block %d is not from S's span", i);
        memset(mine[i], 0x77, SIZE);
    }
    sem_post(&go_on);

    cm_test_hook = interleave;
    free_paused();
    cm_test_hook = NULL;
    uint32_t retired = cm_entry_make(CM_DESC_RETIRED, 0);
    for (char *u = span; u < span + PER_SB * SIZE; u += CM_UNIT_SIZE) {
        uintptr_t base = cm_arena_base(), unit = cm_arena_unit(base, (uintptr_t)u);
        uint32_t entry = cm_pagemap_get((uintptr_t)u);
        CHECK(entry == retired || entry == 0, "the retired span's entry names descriptor %u", cm_entry_ref(entry));
        CHECK(!cm_arena_has_unit(unit) || atomic_load(cm_arena_entry_at(base, unit)) == entry,
              "the flat map and the two-level map disagree on the retired span");
    }
    void *again[PER_SB];
    CHECK(allocate_and_count_s(again, PER_SB) <= PER_SB, "allocation after the retire"); /* drops the listed one */
    sem_post(&go_on);
    pthread_join(t, NULL);
    for (int i = 0; i < PER_SB; i++) {
        CHECK(holds(mine[i], SIZE, 0x77), "a block from S's span lost its data");
        cm_free(mine[i]);
        cm_free(again[i]);
    }
    printf("parked rehome: S's span goes to the pool and another heap reuses it; never after its owner took S back or trim retired it; "
           "trim retiring it on its way leaves its entries naming no descriptor\n");
    return 0;
}
