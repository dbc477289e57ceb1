/* unit_arena_map: the arena's flat page map, which free reads, run with
 * CAGEMALLOC_ARENA_RESERVE=256m (unit.cmake) so that the arena runs out.
 *  - Every unit of every block in the arena has the same entry in the flat
 *    map as in the two-level map.
 *  - 320 MiB of 32 KiB blocks fill the arena and go on in 32 MiB
 *    reservations outside it; every block, in or out, keeps its pattern
 *    and is freed by cm_free, and the freed memory serves again.
 *  - A block whose flat entry reads 0 (what free finds above a reservation
 *    smaller than 64 GiB, where the kernel may have put a 32 MiB
 *    reservation or a large block of ours) is still freed, through the
 *    two-level map: cm_heap_visit no longer sees it, and it is reused. */
#include <string.h>

#include "internal.h"
#include "unit_check.h"

#define BLOCK ((size_t)32 << 10)
#define COUNT ((size_t)320 << 20) / BLOCK

static unsigned char *blocks[COUNT];

static bool in_arena(const void *p) {
    uintptr_t unit = cm_arena_unit(cm_arena_base(), (uintptr_t)p);
    return unit < CM_ARENA_MAX_UNITS && cm_arena_has_unit(unit);
}

static uint32_t flat_entry(const void *p) {
    return atomic_load(cm_arena_entry_at(cm_arena_base(), cm_arena_unit(cm_arena_base(), (uintptr_t)p)));
}

/* The first and last 64 bytes carry the block's number. */
static void fill(unsigned char *p, size_t i) {
    memset(p, (int)(i * 7 + 1), 64);
    memset(p + BLOCK - 64, (int)(i * 13 + 5), 64);
}
static bool intact(const unsigned char *p, size_t i) {
    for (size_t k = 0; k < 64; k++)
        if (p[k] != (unsigned char)(i * 7 + 1) || p[BLOCK - 64 + k] != (unsigned char)(i * 13 + 5)) return false;
    return true;
}

/* Exactly the units of the reservation are the arena's: not the one past
 * its end (where the kernel may put a mapping of ours or not), not the one
 * before its base (the flat map's own), not NULL. */
static void check_bounds(void) {
    if (atomic_load(&cm_arena_range.units) == 0) return;
    uintptr_t base = cm_arena_base(), end = base + (atomic_load(&cm_arena_range.units) << CM_UNIT_SHIFT);
    CHECK(cm_arena_has_unit(cm_arena_unit(base, base)) && cm_arena_has_unit(cm_arena_unit(base, end - 1)),
          "the first and last bytes are in the arena");
    CHECK(!cm_arena_has_unit(cm_arena_unit(base, end)) && !cm_arena_has_unit(cm_arena_unit(base, base - 1)) &&
              !cm_arena_has_unit(cm_arena_unit(base, 0)) && !cm_arena_has_unit(cm_arena_unit(base, UINTPTR_MAX)),
          "the end, the byte before the base, NULL and the top address are outside");
}

int main(void) {
    size_t inside = 0, outside = 0;
    for (size_t i = 0; i < COUNT; i++) {
        blocks[i] = cm_malloc(BLOCK);
        CHECK(blocks[i] != NULL, "block %zu", i);
        fill(blocks[i], i);
        if (!in_arena(blocks[i])) {
            outside++;
            continue;
        }
        inside++;
        for (size_t off = 0; off < BLOCK; off += CM_UNIT_SIZE / 2) {
            uintptr_t a = (uintptr_t)blocks[i] + off;
            CHECK(flat_entry((void *)a) == cm_pagemap_get(a) && cm_pagemap_get(a) != 0,
                  "flat entry of %p differs from the two-level map", (void *)a);
        }
    }
    size_t arena_mib = (atomic_load(&cm_arena_range.units) << CM_UNIT_SHIFT) >> 20;
    printf("arena of %zu MiB: %zu blocks of %zu KiB in it, %zu beyond it\n", arena_mib, inside, BLOCK >> 10, outside);
    /* none where this test runs under an address-space limit or strict overcommit */
    size_t expected_mib = cm_os_reservations_cost() ? 0 : 256;
    CHECK(arena_mib == expected_mib, "the arena is %zu MiB, not the %zu MiB expected", arena_mib, expected_mib);
    CHECK(outside > 0 && (inside > 0 || expected_mib == 0), "the blocks fill the arena and go on beyond it");
    for (size_t i = 0; i < COUNT; i++) {
        CHECK(intact(blocks[i], i), "block %zu (%s the arena) before free", i, in_arena(blocks[i]) ? "in" : "beyond");
        cm_free(blocks[i]);
    }
    cm_stats_t before, after;
    cm_stats_get(&before);
    for (size_t i = 0; i < COUNT; i++) {
        blocks[i] = cm_malloc(BLOCK);
        CHECK(blocks[i] != NULL, "block %zu, second round", i);
        fill(blocks[i], i + 3);
    }
    cm_stats_get(&after);
    CHECK(after.mapped <= before.mapped, "the second round mapped %zu KiB more: freed spans were not reused",
          (after.mapped - before.mapped) >> 10);
    for (size_t i = 0; i < COUNT; i++) {
        CHECK(intact(blocks[i], i + 3), "block %zu, second round, before free", i);
        cm_free(blocks[i]);
    }
    check_bounds();
    printf("flat entries match; blocks in and beyond the arena are freed and reused; its bounds are exact\n");
    return 0;
}
