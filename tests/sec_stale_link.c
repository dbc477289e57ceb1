/* sec_stale_link: a program that copies uninitialised bytes is not told it
 * freed twice. Memory reused by larger blocks keeps the free-list links of
 * the small blocks it held, inside the new blocks; copied to the start of a
 * block of the old class, such a word decodes there to a block of that
 * class, as a free block's link does (src/double_free.c). Freeing or
 * reallocating the copy must work: before the suspicion was confirmed
 * against the superblock's lists, the first copy aborted with "double
 * free". Needs hardening (the links carry the free tag only then). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cagemalloc.h"

enum { SMALL = 64, COUNT = 40000, WANTED = 2000 };

static void *blocks[COUNT];

/* Fill COUNT blocks of one class, check and free them all: their links stay
 * in memory that larger blocks reuse. */
static void leave_links_behind(void) {
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = cm_malloc(SMALL);
        memset(blocks[i], (unsigned char)i, SMALL);
    }
    for (int i = 0; i < COUNT; i++) {
        const unsigned char *b = blocks[i];
        for (int j = 0; j < SMALL; j++)
            if (b[j] != (unsigned char)i) {
                fprintf(stderr, "sec_stale_link: block %d corrupted\n", i);
                exit(1);
            }
        cm_free(blocks[i]);
    }
}

int main(void) {
    leave_links_behind();
    /* Words of fresh large and medium blocks whose top bytes are set: no
     * user-space address has them, a tagged link does. Each goes to the
     * start of a fresh small block, which is then freed or reallocated. */
    int copies = 0;
    void *big[64];
    for (int k = 0; k < 64; k++) {
        size_t size = k < 32 ? 200 * 1024 : 3072;
        const unsigned char *b = big[k] = cm_malloc(size);
        for (size_t off = SMALL; off + 8 <= size && copies < WANTED; off += SMALL) {
            uint64_t word;
            memcpy(&word, b + off, sizeof word);
            if (word >> 48 == 0) continue;
            char *q = cm_malloc(SMALL);
            memcpy(q, &word, sizeof word);
            if (copies % 2) {
                cm_free(q);
            } else {
                char *r = cm_realloc(q, 4 * SMALL);
                if (!r || memcmp(r, &word, sizeof word) != 0) {
                    fprintf(stderr, "sec_stale_link: realloc lost the copied word\n");
                    return 1;
                }
                cm_free(r);
            }
            copies++;
        }
    }
    for (int k = 0; k < 64; k++) cm_free(big[k]);
    printf("%d stale links copied to blocks' starts, freed or reallocated\n", copies);
    if (copies == 0) {
        fprintf(stderr, "sec_stale_link: no block reused the freed blocks' memory: nothing was tested\n");
        return 1;
    }
    return 0;
}
