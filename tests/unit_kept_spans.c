/* unit_kept_spans: memory that fully free superblocks held committed serves
 * spans of other sizes.
 *  - A kept superblock serves any class of its own span size (take-over).
 *  - When a class of another span size needs a new span, kept ones of
 *    other sizes give their spans back to the arena with their pages, as
 *    many bytes as the new span and no more.
 *  - The arena hands such dirty units out first, as they are (marked
 *    dirty: calloc must clear them), and cm_arena_purge returns the pages
 *    of those nobody took.
 *  - A span the dirty units cannot make (no aligned run of them) comes
 *    fresh, and as many dirty units go back to the OS at once: what the
 *    process holds free does not grow with what it claims.
 *  - malloc_stats reports both kinds of memory kept free, as counted.
 *
 * Driven through the pool and the arena in a fresh process, so these are
 * the only superblocks kept. */
#define _GNU_SOURCE /* memfd_create */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "unit_check.h"

/* n fresh superblocks of class cls, their pages touched, then every block
 * of each returned at once: kept (taken first, all of them: the pool hands
 * a kept superblock to the next take of its class). */
static void kept_superblocks(unsigned cls, char **bases, int n) {
    const cm_class_info_t *ci = &cm_class_info[cls];
    CHECK(ci->max_count <= 64, "few blocks per span");
    for (int k = 0; k < n; k++) {
        cm_refill_t r;
        CHECK(cm_pool_take(cls, CM_SPACE_PLAIN, &r) && r.fresh && r.fresh_count == ci->max_count,
              "a fresh superblock of class %u", cls);
        bases[k] = r.fresh;
        memset(r.fresh, 0x5a, (size_t)ci->max_count * ci->block_size); /* its pages become resident */
    }
    for (int k = 0; k < n; k++) {
        char *blocks[64];
        for (uint32_t i = 0; i < ci->max_count; i++) blocks[i] = bases[k] + (size_t)i * ci->block_size;
        for (uint32_t i = 0; i + 1 < ci->max_count; i++) cm_block_set_next(blocks[i], blocks[i + 1]);
        cm_block_set_next(blocks[ci->max_count - 1], NULL);
        cm_pool_return_chain(cm_pool_desc_of(bases[k]), blocks[0], blocks[ci->max_count - 1], ci->max_count);
    }
}

static bool is_kept(const char *base, unsigned cls) {
    cm_desc_t *d = cm_pool_desc_of(base);
    if (!d || cm_desc_class(d) != cls) return false;
    cm_anchor_t a = atomic_load(&d->anchor);
    return cm_anchor_state(a) == CM_PARTIAL && cm_anchor_count(a) == cm_class_info[cls].max_count;
}

static size_t resident_pages(const char *base, size_t len) {
    unsigned char vec[256];
    size_t pages = len / (size_t)sysconf(_SC_PAGESIZE), n = 0;
    CHECK(pages <= sizeof vec && mincore((void *)base, len, vec) == 0, "mincore");
    for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
    return n;
}

/* The KiB that the statistics report gives on the line labelled `label`. */
static size_t reported_kib(const char *label) {
    int fd = memfd_create("report", 0);
    CHECK(fd >= 0, "memfd_create");
    cm_stats_report(fd);
    char text[8192];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    CHECK(n > 0, "the report is written");
    text[n] = 0;
    const char *line = strstr(text, label);
    CHECK(line != NULL, "the report has a line \"%s\"", label);
    return strtoul(line + strlen(label), NULL, 10);
}

/* What the pool and the arena count as kept, and what the report says. */
static void check_kept(size_t superblocks, size_t units, const char *when) {
    CHECK(cm_pool_kept_bytes() == superblocks && cm_arena_dirty_bytes() == units,
          "%s: kept %zu and %zu bytes, want %zu and %zu", when, cm_pool_kept_bytes(), cm_arena_dirty_bytes(),
          superblocks, units);
    CHECK(reported_kib("free superblocks kept") == superblocks >> 10 &&
              reported_kib("free arena units kept") == units >> 10,
          "%s: the report disagrees with the counts", when);
}

static unsigned class_of_size(uint32_t size) {
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++)
        if (cm_class_info[c].block_size == size) return c;
    CHECK(0, "no class of %u bytes", size);
    return 0;
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    cm_options.empty_keep = (size_t)1 << 30;
    unsigned small = class_of_size(8192), same = class_of_size(7168), big = 0;
    unsigned shift = cm_class_info[small].span_shift;
    for (unsigned c = 1; c <= CM_NUM_CLASSES && !big; c++)
        if (cm_class_info[c].span_shift == shift + 1) big = c;
    CHECK(big && cm_class_info[same].span_shift == shift, "classes of one span size and of twice it");
    size_t span = (size_t)1 << shift;

    char *kept[3];
    check_kept(0, 0, "at start");
    kept_superblocks(small, kept, 3);
    for (int i = 0; i < 3; i++)
        CHECK(is_kept(kept[i], small) && resident_pages(kept[i], span) > 0, "superblock %d kept, resident", i);
    check_kept(3 * span, 0, "three superblocks freed");

    /* a class of the same span size takes one over, dirty, retiring none */
    cm_refill_t r;
    CHECK(cm_pool_take(same, CM_SPACE_PLAIN, &r) && r.fresh_dirty, "class %u took a kept span over", same);
    int taken = -1, still = 0;
    for (int i = 0; i < 3; i++) {
        if (r.fresh == kept[i]) taken = i;
        else still += is_kept(kept[i], small);
    }
    CHECK(taken >= 0 && still == 2, "the take-over used a kept span (%d) and left the other two (%d)", taken, still);
    check_kept(2 * span, 0, "one taken over");

    /* a class of twice the span size: the two left (2 x 64 KiB) make room,
     * as its span if they are an aligned pair, else returned for its fresh one */
    CHECK(cm_pool_take(big, CM_SPACE_PLAIN, &r), "class %u got a new span", big);
    char *fresh = r.fresh;
    for (int i = 0; i < 3; i++) {
        if (i == taken) continue;
        CHECK(!is_kept(kept[i], small), "superblock %d is still kept beside a new span of another size", i);
        bool reused = kept[i] >= fresh && kept[i] < fresh + 2 * span;
        CHECK(reused == r.fresh_dirty, "superblock %d: reused %d, the new span dirty %d", i, reused, r.fresh_dirty);
        if (!reused) CHECK(resident_pages(kept[i], span) == 0, "superblock %d kept its pages beside a fresh span", i);
    }

    /* no more than the new span's size: of three kept, one stays */
    kept_superblocks(small, kept, 3);
    CHECK(cm_pool_take(big, CM_SPACE_PLAIN, &r), "class %u got a new span", big);
    still = 0;
    for (int i = 0; i < 3; i++) still += is_kept(kept[i], small);
    CHECK(still == 1, "%d of 3 kept superblocks left after a new span of twice their size (want 1)", still);

    /* the arena: units released dirty come back first, as they are */
    cm_arena_purge(); /* none left from the above */
    bool dirty;
    char *pair = cm_arena_claim(shift + 1, CM_SPACE_PLAIN, &dirty);
    CHECK(pair && !dirty, "a clean span of %zu bytes", 2 * span);
    memset(pair, 0x77, 2 * span);
    size_t still_kept = cm_pool_kept_bytes();
    cm_arena_release_dirty(pair, shift + 1);
    CHECK(cm_arena_has_dirty(), "dirty units are listed");
    check_kept(still_kept, 2 * span, "a span released with its pages");
    char *half = cm_arena_claim(shift, CM_SPACE_PLAIN, &dirty);
    CHECK(dirty && (half == pair || half == pair + span), "the dirty units came back first (%p of %p)", (void *)half,
          (void *)pair);
    CHECK(resident_pages(half, span) == span / (size_t)sysconf(_SC_PAGESIZE) && (unsigned char)half[100] == 0x77,
          "with their pages, as they were");
    cm_arena_purge();
    char *other = half == pair ? pair + span : pair;
    CHECK(!cm_arena_has_dirty() && resident_pages(other, span) == 0, "the purge returned the unit nobody took");
    CHECK(resident_pages(half, span) > 0, "the purge left the claimed span alone");
    cm_arena_release(half, shift); /* clean: cm_arena_release wants its pages returned */

    /* a dirty unit whose neighbour is in use, so that a span of twice its
     * size cannot have it: returned when that span is claimed fresh */
    char *two = cm_arena_claim(shift + 1, CM_SPACE_PLAIN, &dirty);
    CHECK(two, "a span of %zu bytes", 2 * span);
    memset(two, 0x33, 2 * span);
    cm_arena_release_dirty(two + span, shift); /* its upper half; the lower stays ours */
    char *pair2 = cm_arena_claim(shift + 1, CM_SPACE_PLAIN, &dirty);
    CHECK(pair2 && !dirty && pair2 != two, "a fresh pair elsewhere");
    CHECK(!cm_arena_has_dirty() && resident_pages(two + span, span) == 0, "the dirty unit went back for the fresh pair");
    CHECK(resident_pages(two, span) > 0, "the unit in use kept its pages");
    printf("kept spans: taken over by their own span size, given to the arena for another, reused dirty, purged, "
           "returned for fresh ones\n");
    return 0;
}
