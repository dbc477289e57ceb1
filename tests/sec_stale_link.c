/* sec_stale_link: a program that copies uninitialised bytes is not told it
 * freed twice. Memory reused by larger blocks keeps the free-list links of
 * the small blocks it held, inside the new blocks; copied to the start of a
 * block of the old class, such a word decodes there to a block of that
 * class, as a free block's link does (src/double_free.c). Freeing or
 * reallocating the copy must work: before the suspicion was confirmed
 * against the superblock's lists, the first copy aborted with "double
 * free" (and, by a thread other than the owner, until the owner's lists
 * were read too). The copies are freed four times over: alone; while
 * another thread frees blocks of the same class into its waiting batch,
 * which the confirmation reads; by a thread that does not own them; and
 * after the thread that owned them exited (built with ThreadSanitizer
 * too). Needs hardening (the links carry
 * the free tag only then). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cagemalloc.h"

enum { SMALL = 64, COUNT = 40000, WANTED = 2000, HANDED = 8192 };

static void *blocks[COUNT];
static uint64_t stale[WANTED];
static void *handed[HANDED];
static char *copied[WANTED];

/* Fill COUNT blocks of one class, check and free them all: their links stay
 * in memory that larger blocks reuse. */
static void fill(void **list, int n) {
    for (int i = 0; i < n; i++) {
        list[i] = cm_malloc(SMALL);
        memset(list[i], (unsigned char)i, SMALL);
    }
}

static void check_and_free(void **list, int n) {
    for (int i = 0; i < n; i++) {
        const unsigned char *b = list[i];
        for (int j = 0; j < SMALL; j++)
            if (b[j] != (unsigned char)i) {
                fprintf(stderr, "sec_stale_link: block %d corrupted\n", i);
                exit(1);
            }
        cm_free(list[i]);
    }
}

/* Each stale word at the start of a fresh small block. */
static void make_copies(int copies) {
    for (int i = 0; i < copies; i++) {
        copied[i] = cm_malloc(SMALL);
        memcpy(copied[i], &stale[i], sizeof stale[i]);
    }
}

/* Every copy freed, or reallocated (and freed). */
static void release_copies(int copies) {
    for (int i = 0; i < copies; i++) {
        char *q = copied[i];
        if (memcmp(q, &stale[i], sizeof stale[i]) != 0) {
            fprintf(stderr, "sec_stale_link: copy %d changed\n", i);
            exit(1);
        }
        if (i % 2) {
            cm_free(q);
            continue;
        }
        char *r = cm_realloc(q, 4 * SMALL);
        if (!r || memcmp(r, &stale[i], sizeof stale[i]) != 0) {
            fprintf(stderr, "sec_stale_link: realloc lost the copied word\n");
            exit(1);
        }
        cm_free(r);
    }
}

static void copy_and_free(int copies) {
    make_copies(copies);
    release_copies(copies);
}

static void *make_copies_and_exit(void *arg) {
    make_copies(*(int *)arg);
    return arg;
}

static void *release_copies_elsewhere(void *arg) {
    release_copies(*(int *)arg);
    return arg;
}

/* Run fn(copies) in a new thread and wait for it. */
static void in_thread(void *(*fn)(void *), int copies) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn, &copies) != 0) exit(1);
    pthread_join(t, NULL);
}

static void *free_handed(void *arg) {
    check_and_free(handed, HANDED);
    return arg;
}

int main(void) {
    fill(blocks, COUNT);
    check_and_free(blocks, COUNT);
    /* Words of fresh large and medium blocks whose top bytes are set: no
     * user-space address has them, a tagged link does. */
    int copies = 0;
    void *big[64];
    for (int k = 0; k < 64; k++) {
        size_t size = k < 32 ? 200 * 1024 : 3072;
        const unsigned char *b = big[k] = cm_malloc(size);
        for (size_t off = SMALL; off + 8 <= size && copies < WANTED; off += SMALL) {
            memcpy(&stale[copies], b + off, sizeof stale[copies]);
            if (stale[copies] >> 48 != 0) copies++;
        }
    }
    if (copies == 0) {
        fprintf(stderr, "sec_stale_link: no block reused the freed blocks' memory: nothing was tested\n");
        return 1;
    }
    copy_and_free(copies);
    fill(handed, HANDED);
    pthread_t t;
    if (pthread_create(&t, NULL, free_handed, NULL) != 0) return 1;
    copy_and_free(copies);
    pthread_join(t, NULL);
    /* freed by a thread that does not own them, then after their owner exited */
    make_copies(copies);
    in_thread(release_copies_elsewhere, copies);
    in_thread(make_copies_and_exit, copies);
    release_copies(copies);
    for (int k = 0; k < 64; k++) cm_free(big[k]);
    printf("%d stale links copied to blocks' starts, freed or reallocated: alone, beside a thread's batch, "
           "by another thread, after their owner exited\n", copies);
    return 0;
}
