/* core_quiet_handoff: a superblock settled by its owner is handed on by
 * another thread's free, and the blocks the owner counted are written by
 * their next owner. Built with ThreadSanitizer (and AddressSanitizer) to
 * check that the owner's reads of its free list happen before those writes.
 *
 *  1. The owner allocates three blocks of a quiet class Q, frees two (its
 *     local list) and hands the third, with a block Z of another class, to
 *     the helper (release / acquire: what came before is ordered).
 *  2. The owner allocates ~20 superblocks of another class: at the looks
 *     at quiet classes (every 8th superblock it takes) Q's superblock is
 *     settled, its free blocks counted, one block counted in use.
 *  3. A relaxed flag (no ordering from the test itself) lets the helper
 *     free the Q block (its last block out: the superblock's span goes to
 *     the pool when Z's free hands the batch over), then allocate Q blocks
 *     of its own, which reuse that span, and write them.
 * Without a release when the count is stored and an acquire where the
 * free reads it, ThreadSanitizer reports step 2's reads racing with step
 * 3's writes. Every block is patterned and checked before its free. */
#include "core_util.h"
#include <pthread.h>
#include <stdatomic.h>

#include "cagemalloc.h"

#define Q_SIZE 49152
#define CLIMB_SIZE 98304
#define CLIMB_BLOCKS 100

static void *_Atomic handed_q, *_Atomic handed_z;
static atomic_int settled;

/* Blocks carry the pattern of their seed (core_util.h), checked before their free. */
static void *filled(size_t n, uint64_t seed) {
    void *p = cm_malloc(n);
    CMT_CHECK(p, "cm_malloc(%zu)", n);
    cmt_fill(p, n, seed);
    return p;
}

static void verified_free(void *p, size_t n, uint64_t seed) {
    CMT_VERIFY(p, n, seed, "block");
    cm_free(p);
}

static void *helper(void *arg) {
    (void)arg;
    void *q, *z;
    while (!(q = atomic_load_explicit(&handed_q, memory_order_acquire))) sched_yield();
    z = atomic_load_explicit(&handed_z, memory_order_acquire);
    while (!atomic_load_explicit(&settled, memory_order_relaxed)) sched_yield();
    verified_free(q, Q_SIZE, 0x51);
    verified_free(z, CLIMB_SIZE, 0x5a); /* hands the batch holding q over */
    void *mine[3];
    for (int i = 0; i < 3; i++) mine[i] = filled(Q_SIZE, 0x61 + i);
    for (int i = 0; i < 3; i++) verified_free(mine[i], Q_SIZE, 0x61 + i);
    return NULL;
}

int main(void) {
    pthread_t t;
    CMT_CHECK(pthread_create(&t, NULL, helper, NULL) == 0, "pthread_create");
    void *q[3], *climb[CLIMB_BLOCKS];
    for (int i = 0; i < 3; i++) q[i] = filled(Q_SIZE, 0x51);
    verified_free(q[1], Q_SIZE, 0x51);
    verified_free(q[2], Q_SIZE, 0x51);
    climb[0] = filled(CLIMB_SIZE, 0x5a);
    atomic_store_explicit(&handed_z, climb[0], memory_order_release);
    atomic_store_explicit(&handed_q, q[0], memory_order_release);
    for (int i = 1; i < CLIMB_BLOCKS; i++) climb[i] = filled(CLIMB_SIZE, 0x5a);
    atomic_store_explicit(&settled, 1, memory_order_relaxed);
    pthread_join(t, NULL);
    for (int i = 1; i < CLIMB_BLOCKS; i++) verified_free(climb[i], CLIMB_SIZE, 0x5a);
    printf("quiet handoff: the settled superblock went on through a remote free and was reused\n");
    return 0;
}
