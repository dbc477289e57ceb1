/* unit_quiet_classes: a heap gives back the superblocks of classes it has
 * stopped using, as a program whose data moves up through the classes
 * (buffers grown by realloc) needs.
 *  - A class that did not refill since the last look (every 8th superblock
 *    the heap takes from the pool) gives its fully free superblocks to the
 *    pool: the current one and the empty one avail keeps.
 *  - The class in use takes those spans over.
 *  - A class in use keeps its current superblock; a quiet class with live
 *    blocks keeps them, valid, and allocates from that superblock again.
 * Every block is filled with a pattern and checked before its free. */
#include <string.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

#define QUIET_BLOCKS 20 /* two superblocks' worth of the quiet class */
#define LIVE_BLOCKS 3
#define CLIMB_BLOCKS 90 /* 18 superblocks of the climbing class: two looks */

static unsigned class_of_size(uint32_t size) {
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++)
        if (cm_class_info[c].block_size == size) return c;
    CHECK(0, "no class of %u bytes", size);
    return 0;
}

static char *span_of(const void *p, unsigned cls) {
    return (char *)((uintptr_t)p & ~(((uintptr_t)1 << cm_class_info[cls].span_shift) - 1));
}

static void *filled(cm_heap_t *h, size_t size, int tag) {
    char *p = cm_heap_malloc(h, size);
    CHECK(p, "cm_heap_malloc(%zu)", size);
    memset(p, tag, size);
    return p;
}

static void check_and_free(void *p, size_t size, int tag) {
    const unsigned char *b = p;
    for (size_t i = 0; i < size; i += 512) CHECK(b[i] == (unsigned char)tag, "block %p changed at %zu", p, i);
    CHECK(b[size - 1] == (unsigned char)tag, "block %p changed at its end", p);
    cm_free(p);
}

/* The heap still owns a superblock of class cls whose blocks are all free? */
static bool holds_free_superblock(const cm_heap_t *h, unsigned cls) {
    if (h->bins[cls].current) return true; /* uncounted: it may be */
    for (uint32_t r = h->bins[cls].avail; r; r = cm_desc_from_ref(r)->link)
        if (cm_desc_used(cm_desc_from_ref(r)) == 0) return true;
    return false;
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    /* classes of one span size, so the climbing one can take the quiet one's spans over */
    const uint32_t quiet_size = 49152, climb_size = 98304, busy_size = 57344, live_size = 20480;
    unsigned quiet = class_of_size(quiet_size), climb = class_of_size(climb_size);
    unsigned busy = class_of_size(busy_size), live = class_of_size(live_size);
    CHECK(cm_class_info[quiet].span_shift == cm_class_info[climb].span_shift, "one span size");
    CHECK(QUIET_BLOCKS == 2 * cm_class_info[quiet].max_count, "two superblocks of the quiet class");

    cm_heap_t *h = cm_heap_new();
    CHECK(h, "cm_heap_new");
    void *q[QUIET_BLOCKS], *l[LIVE_BLOCKS], *c[CLIMB_BLOCKS];
    char *quiet_spans[2];
    for (int i = 0; i < QUIET_BLOCKS; i++) q[i] = filled(h, quiet_size, 0x11);
    quiet_spans[0] = span_of(q[0], quiet), quiet_spans[1] = span_of(q[QUIET_BLOCKS - 1], quiet);
    CHECK(quiet_spans[0] != quiet_spans[1], "the quiet class filled two superblocks");
    for (int i = 0; i < LIVE_BLOCKS; i++) l[i] = filled(h, live_size, 0x22);
    for (int i = 0; i < QUIET_BLOCKS; i++) check_and_free(q[i], quiet_size, 0x11);
    CHECK(holds_free_superblock(h, quiet), "before: the heap holds the quiet class's free superblocks");

    void *busy_block = filled(h, busy_size, 0x33);
    uint32_t busy_current = h->bins[busy].current;
    int took_over = 0;
    for (int i = 0; i < CLIMB_BLOCKS; i++) {
        c[i] = filled(h, climb_size, 0x44);
        took_over += span_of(c[i], climb) == quiet_spans[0] || span_of(c[i], climb) == quiet_spans[1];
        check_and_free(busy_block, busy_size, 0x33); /* the busy class refills at every step */
        busy_block = filled(h, busy_size, 0x33);
    }
    CHECK(h->refills >= 16, "two looks at the quiet classes (%u superblocks taken)", h->refills);
    CHECK(!holds_free_superblock(h, quiet), "the quiet class gave its free superblocks back");
    CHECK(took_over > 0, "the climbing class took the quiet class's spans over");
    CHECK(h->bins[busy].current == busy_current, "the busy class kept its current superblock");

    /* the quiet class with live blocks: they stay valid, and its next block comes from their superblock */
    char *live_span = span_of(l[0], live);
    CHECK(atomic_load(&cm_pool_desc_of(live_span)->heap) == h->ref,
          "the live blocks' superblock is still the heap's");
    void *again = filled(h, live_size, 0x55);
    CHECK(span_of(again, live) == live_span, "the class allocates from its superblock again");
    check_and_free(again, live_size, 0x55);
    for (int i = 0; i < LIVE_BLOCKS; i++) check_and_free(l[i], live_size, 0x22);
    for (int i = 0; i < CLIMB_BLOCKS; i++) check_and_free(c[i], climb_size, 0x44);
    check_and_free(busy_block, busy_size, 0x33);
    cm_heap_delete(h);
    printf("quiet classes: free superblocks given back and taken over (%d blocks), live ones kept\n", took_over);
    return 0;
}
