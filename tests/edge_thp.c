/* edge_thp: no mapping of metadata or superblocks may take transparent huge
 * pages. Where the system gives them to all anonymous memory (THP
 * "always", the default of several distributions), the first touch of a
 * 2 MiB-aligned range faults in all of it: before the fix, one malloc left
 * 7.7 MiB resident instead of 1.6, espresso 12.0 MiB instead of 3.0.
 *
 * The mapping under each kind of address (descriptor region, the arena and
 * its flat page map, a page-map region record, a heap record, a small
 * block, cage and class-space blocks) must carry the kernel's "nh" flag
 * (MADV_NOHUGEPAGE) in /proc/self/smaps, whatever this machine's THP mode;
 * a large block's must not (it keeps the system's policy, as glibc's mapped
 * blocks do). Run again with CAGEMALLOC_ARENA_RESERVE=0, where superblocks
 * come from 32 MiB reservations. On a machine whose mode is "always", none
 * of those mappings may hold a huge page after their memory was touched.
 * Skips (77) on a kernel without THP. */
#include <unistd.h>

#include "internal.h"
#include "smaps_util.h"
#include "unit_check.h"

#define THP_MODE "/sys/kernel/mm/transparent_hugepage/enabled"

static bool thp_always(void) {
    FILE *f = fopen(THP_MODE, "r");
    if (!f) return false;
    char mode[128] = "";
    bool always = fgets(mode, sizeof mode, f) && strstr(mode, "[always]");
    fclose(f);
    return always;
}

static void expect(const char *what, const void *a, bool no_huge) {
    const smaps_entry_t *m = smaps_find(smaps_read(), a);
    CHECK(m != NULL, "%s at %p: in no mapping", what, a);
    CHECK(smaps_flag(m, "nh") == no_huge, "%s at %p: VmFlags:%s %s", what, a, m->flags,
          no_huge ? "lacks nh (it may take huge pages)" : "has nh (a large block keeps the system's policy)");
    if (no_huge && thp_always()) CHECK(m->huge_kib == 0, "%s at %p: %ld KiB of huge pages", what, a, m->huge_kib);
    printf("  %-34s %s\n", what, no_huge ? "nh" : "system policy");
}

/* Small blocks of a few classes, written whole so their pages are touched. */
static void *touched(void *p, size_t n) {
    CHECK(p != NULL, "allocation of %zu bytes", n);
    memset(p, 0x5a, n);
    return p;
}

int main(void) {
    if (access(THP_MODE, F_OK) != 0) { /* the advice fails there, and no mapping has "nh" */
        printf("SKIP: this kernel has no transparent huge pages (no %s)\n", THP_MODE);
        return 77;
    }
    const char *reserve = getenv("CAGEMALLOC_ARENA_RESERVE");
    printf("%s\n", reserve ? "superblocks from 32 MiB reservations (CAGEMALLOC_ARENA_RESERVE=0)"
                           : "superblocks from the arena's reservation");
    void *small[8];
    for (unsigned i = 0; i < 8; i++) small[i] = touched(cm_malloc((size_t)16 << i), (size_t)16 << i);
    void *big_class = touched(cm_malloc(100000), 100000);
    void *large = touched(cm_malloc((size_t)4 << 20), (size_t)4 << 20);
    cm_heap_t *heap = cm_heap_new();
    CHECK(heap != NULL, "cm_heap_new");
    void *in_heap = touched(cm_heap_malloc(heap, 200), 200);
    void *caged = touched(cm_cage_malloc(4096), 4096);
    void *klass = touched(cm_klass_alloc(512), 512);

    expect("descriptor region", cm_desc_base(), true);
    uintptr_t arena = cm_arena_base();
    if (!reserve) {
        CHECK(arena != CM_ARENA_NONE, "the arena was not reserved");
        expect("arena's flat page map", (void *)arena, true);
    } else {
        CHECK(arena == CM_ARENA_NONE, "an arena was reserved with CAGEMALLOC_ARENA_RESERVE=0");
    }
    expect("page-map region record", cm_pagemap_region((uintptr_t)small[0]), true);
    expect("heap record", heap, true);
    for (unsigned i = 0; i < 8; i++) {
        char what[64];
        snprintf(what, sizeof what, "small block (%zu bytes)", (size_t)16 << i);
        expect(what, small[i], true);
    }
    expect("small block (100000 bytes)", big_class, true);
    expect("block of a heap", in_heap, true);
    expect("block in the cage", caged, true);
    expect("block in the class space", klass, true);
    expect("large block (4 MiB)", large, false);

    cm_klass_free(klass);
    cm_free(caged);
    cm_free(in_heap);
    cm_heap_delete(heap);
    cm_free(large);
    cm_free(big_class);
    for (unsigned i = 0; i < 8; i++) cm_free(small[i]);
    printf("no huge pages in metadata or superblocks (THP mode here: %s)\n", thp_always() ? "always" : "not always");
    return 0;
}
