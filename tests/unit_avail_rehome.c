/* unit_avail_rehome: a superblock waiting on its owner's avail list, with
 * the owner's own frees on its local list, goes to the pool at the remote
 * free that brings its last block back (the owner sleeps: larson's main
 * thread); but never once the owner claimed it, and the owner, giving it
 * up at its exit, never walks a local list whose span went on.
 *
 * Deterministic, in three rounds, each with a new owner thread that fills
 * superblock S (8 blocks of 8192 B) and frees its block 0 itself; the main
 * thread frees the other 7.
 *  1. The owner collects its heap (S joins avail, used count 7) and
 *     sleeps: the main thread's last free hands S's span to the pool under
 *     a new descriptor, the main thread's next 8 blocks are exactly S's, and
 *     the owner, allocating again, drops the old descriptor and never gets
 *     a block of S's span.
 *  2. The hand-over pauses before its CAS, and the owner allocates in the
 *     pause: it claims S first, so the hand-over leaves S alone and the
 *     owner gets all 8 blocks of S, data intact.
 *  3. The owner exits with S current: its exit hook gives S up, pausing
 *     just before its claim, while the main thread frees the 7 blocks (S
 *     goes to the pool) and fills S's span anew. The owner then finds S
 *     gone and lets it go. Giving it up without that claim followed block
 *     0's link, overwritten by the main thread, and aborted (mstress at 4
 *     threads did so in 1 run of 5). */
#include <pthread.h>
#include <semaphore.h>

#include "unit_superblock_s.h"

enum { ROUND_HAND_OVER = 1, ROUND_CLAIM_FIRST, ROUND_GIVE_UP };

static void *mains[PER_SB];
static sem_t filled, go_on, claim_now, claimed, paused_sem, resume;
static int paused;
static pthread_t owner_thread;

static void interleave(const char *point) {
    if (paused) return;
    if (round_no == ROUND_CLAIM_FIRST && strcmp(point, "rehome: before the CAS") == 0) {
        paused = 1; /* main thread, in its last free: the owner claims S now */
        sem_post(&claim_now);
        sem_wait(&claimed);
    } else if (round_no == ROUND_GIVE_UP && strcmp(point, "give up: before the claim") == 0 &&
               pthread_equal(pthread_self(), owner_thread) && cm_list_head(victim->local_free) == NULL) {
        paused = 1; /* the owner, exiting, about to give S up */
        sem_post(&paused_sem);
        sem_wait(&resume);
    }
}

static void *owner(void *arg) {
    (void)arg;
    void *more[PER_SB];
    fill_s();
    cm_free(blocks[0]); /* S stays current, block 0 on its local list */
    if (round_no == ROUND_GIVE_UP) {
        sem_post(&filled);
        return NULL; /* the exit hook gives S up */
    }
    cm_heap_collect(cm_heap_get_default(), 0); /* S leaves the bin: on avail, used count 7 */
    CHECK(victim->at == CM_AT_AVAIL && cm_desc_used(victim) == PER_SB - 1, "S on avail with 7 blocks out");
    sem_post(&filled);
    if (round_no == ROUND_CLAIM_FIRST) {
        sem_wait(&claim_now);
        void *b = cm_malloc(SIZE); /* claims S, the first on avail, and takes block 0 */
        CHECK(b == blocks[0], "the owner's next block is S's block 0");
        sem_post(&claimed);
        sem_wait(&go_on);
        CHECK(cm_pool_desc_of(span) == victim, "S's span changed hands under its owner");
        CHECK(allocate_and_count_s(more, PER_SB - 1) == PER_SB - 1, "S did not give its blocks to its owner again");
        for (int i = 0; i < PER_SB - 1; i++) cm_free(more[i]);
        cm_free(b);
        return NULL;
    }
    sem_wait(&go_on);
    CHECK(allocate_and_count_s(more, PER_SB) == 0, "the owner got a block of S's span after it went to the pool");
    for (int i = 0; i < PER_SB; i++) cm_free(more[i]);
    return NULL;
}

/* A new heap of the main thread (with no superblock of its own yet) gets
 * exactly S's span's PER_SB blocks, filled with v. */
static cm_heap_t *main_heap;
static void take_s_span(unsigned char v) {
    check_s_in_pool();
    main_heap = cm_heap_new();
    CHECK(main_heap, "cm_heap_new");
    for (int i = 0; i < PER_SB; i++) {
        mains[i] = cm_heap_malloc(main_heap, SIZE);
        CHECK(in_span(mains[i]), "the main thread's block %d is not from S's span", i);
        memset(mains[i], v, SIZE);
    }
}

static void release_mains(unsigned char v) {
    for (int i = 0; i < PER_SB; i++) {
        CHECK(holds(mains[i], SIZE, v), "a block from S's span lost its data");
        cm_free(mains[i]);
    }
    cm_heap_delete(main_heap);
}

static void start_round(int r) {
    round_no = r;
    paused = 0;
    CHECK(pthread_create(&owner_thread, NULL, owner, NULL) == 0, "pthread_create");
    sem_wait(&filled);
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    sem_init(&filled, 0, 0);
    sem_init(&go_on, 0, 0);
    sem_init(&claim_now, 0, 0);
    sem_init(&claimed, 0, 0);
    sem_init(&paused_sem, 0, 0);
    sem_init(&resume, 0, 0);
    cm_test_hook = interleave;

    start_round(ROUND_HAND_OVER);
    free_s_from(1);
    take_s_span(0x66);
    sem_post(&go_on);
    pthread_join(owner_thread, NULL);
    release_mains(0x66);

    start_round(ROUND_CLAIM_FIRST);
    free_s_from(1);
    CHECK(paused, "the hand-over's pause point was not reached");
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) == CM_OWNED, "the hand-over changed S after its owner claimed it");
    sem_post(&go_on);
    pthread_join(owner_thread, NULL);

    start_round(ROUND_GIVE_UP);
    sem_wait(&paused_sem);
    free_s_from(1);
    take_s_span(0x77);
    sem_post(&resume);
    pthread_join(owner_thread, NULL);
    CHECK(cm_anchor_state(atomic_load(&victim->anchor)) != CM_OWNED, "the exited owner still owns S");
    release_mains(0x77);

    cm_test_hook = NULL;
    printf("avail rehome: S's span goes to the pool at its last remote free and another heap reuses it; never after "
           "its owner claimed it; an exiting owner lets it go without walking its old local list\n");
    return 0;
}
