/* edge_grow_calls: growing the heap makes few mmap/munmap calls, and memory
 * freed and allocated again makes none. Each such call beside the memory
 * other threads fault pages into makes the kernel wait for those faults,
 * and the waiting thread is often moved onto the waker's CPU (see
 * src/arena.c). Round one allocates 96 MiB of 1 KiB blocks: with 4 MiB
 * chunks mapped one by one (three calls each, to align them) that was 72
 * calls; from 32 MiB reservations it is about 9 (the _no_arena run), and
 * none from the arena's reservation (the default). Round two, after every
 * block is freed without a trim, reuses the same address space: nothing
 * more is mapped. Blocks are chained through their first word and
 * pattern-checked before they are freed. */
#include "core_util.h"

#include "cagemalloc.h"

#define MiB ((size_t)1 << 20)
#define BLOCK 1024
#define TOTAL (96 * MiB)

struct node {
    struct node *prev;
    uint64_t seed;
};

static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;

static struct node *fill(void)
{
    struct node *last = NULL;
    for (size_t i = 0; i < TOTAL / BLOCK; i++) {
        struct node *b = do_malloc(BLOCK);
        CMT_CHECK(b != NULL, "malloc(%d) failed after %zu MiB", BLOCK, i * BLOCK / MiB);
        b->prev = last;
        b->seed = cmt_mix(i);
        cmt_fill(b + 1, BLOCK - sizeof *b, b->seed);
        last = b;
    }
    return last;
}

static void drain(struct node *last)
{
    while (last) {
        struct node *prev = last->prev;
        CMT_VERIFY(last + 1, BLOCK - sizeof *last, last->seed, "block before free");
        do_free(last);
        last = prev;
    }
}

int main(void)
{
    do_free(do_malloc(BLOCK)); /* start-up mappings (descriptors, page map) are not growth */
    cm_stats_t s0, s1, s2;
    cm_stats_get(&s0);
    struct node *blocks = fill();
    cm_stats_get(&s1);
    drain(blocks);
    blocks = fill();
    cm_stats_get(&s2);
    drain(blocks);

    /* nothing is printed before here: stdio's buffer would be an allocation of its own */
    size_t calls = s1.os_calls - s0.os_calls;
    printf("%zu MiB of %d-byte blocks: %zu OS calls, %zu MiB more address space\n", TOTAL / MiB, BLOCK, calls,
           (s1.mapped - s0.mapped) / MiB);
    printf("freed and allocated again: %zu KiB more address space\n",
           s2.mapped > s1.mapped ? (s2.mapped - s1.mapped) >> 10 : 0);
    CMT_CHECK(calls <= 16, "growing by %zu MiB took %zu mmap/munmap calls (one reservation per 32 MiB is ~9)",
              TOTAL / MiB, calls);
    CMT_CHECK(s2.mapped <= s1.mapped, "the second round mapped %zu KiB more: freed chunks were unmapped",
              (s2.mapped - s1.mapped) >> 10);
    return 0;
}
