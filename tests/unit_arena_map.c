/* unit_arena_map: the arena's flat page map, which free reads, run with
 * CAGEMALLOC_ARENA_RESERVE=256m (unit.cmake) so that the arena runs out.
 *  - Every unit of every block in the map's 64 GiB window (the arena, and
 *    whatever of ours the kernel put past its end) has the same entry in
 *    the flat map as in the two-level map.
 *  - 320 MiB of 32 KiB blocks fill the arena and go on in 32 MiB
 *    reservations outside it; every block, in or out, keeps its pattern
 *    and is freed by cm_free, and the freed memory serves again.
 *  - The window is exact: its first and last bytes are in, the byte before
 *    its base and the one past its end, NULL and the top address are not.
 *  - A span retired to the OS names no descriptor that can be reused: a
 *    free of a stale pointer into it is caught (the report is checked by
 *    sec_misuse; here, its entry). */
#include <string.h>

#include "internal.h"
#include "unit_check.h"

#define BLOCK ((size_t)32 << 10)
#define COUNT ((size_t)320 << 20) / BLOCK

static unsigned char *blocks[COUNT];

/* In the reservation (the map and the arena): the blocks it can hold. */
static bool in_arena(const void *p) {
    return cm_arena_unit(cm_arena_base(), (uintptr_t)p) < atomic_load(&cm_arena_range.units);
}

/* In the map's window: the blocks whose entries free reads from it. */
static bool in_window(const void *p) { return cm_arena_has_unit(cm_arena_unit(cm_arena_base(), (uintptr_t)p)); }

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

/* Exactly the units of the window have flat entries. */
static void check_bounds(void) {
    if (atomic_load(&cm_arena_range.units) == 0) return;
    uintptr_t base = cm_arena_base(), end = base + ((uintptr_t)CM_ARENA_MAX_UNITS << CM_UNIT_SHIFT);
    CHECK(cm_arena_has_unit(cm_arena_unit(base, base)) && cm_arena_has_unit(cm_arena_unit(base, end - 1)),
          "the first and last bytes are in the window");
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
        if (in_arena(blocks[i])) inside++;
        else outside++;
        if (!in_window(blocks[i])) continue;
        for (size_t off = 0; off < BLOCK; off += CM_UNIT_SIZE / 2) {
            uintptr_t a = (uintptr_t)blocks[i] + off;
            CHECK(flat_entry((void *)a) == cm_pagemap_get(a) && cm_pagemap_get(a) != 0,
                  "flat entry of %p differs from the two-level map", (void *)a);
        }
    }
    size_t arena_mib = (atomic_load(&cm_arena_range.units) << CM_UNIT_SHIFT) >> 20;
    printf("arena of %zu MiB: %zu blocks of %zu KiB in it, %zu beyond it\n", arena_mib, inside, BLOCK >> 10, outside);
    /* none where this test runs under an address-space limit */
    size_t expected_mib = cm_os_address_limit() != SIZE_MAX ? 0 : 256;
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
    /* every block is free: trimming retires their spans */
    cm_trim();
    size_t retired = 0;
    for (size_t i = 0; i < COUNT; i++) {
        uint32_t entry = cm_pagemap_get((uintptr_t)blocks[i]);
        if (cm_entry_class(entry) != 0) continue; /* a superblock kept, or of the block's class again */
        CHECK(entry == 0 || entry == cm_entry_make(CM_DESC_RETIRED, 0),
              "the retired span of block %zu names descriptor %u", i, cm_entry_ref(entry));
        CHECK(!cm_is_block_of(cm_desc_of_entry(entry), blocks[i]), "free's fast path takes stale block %zu", i);
        retired += entry != 0;
    }
    printf("%zu of %zu stale blocks in spans retired to the OS, none taken for a block\n", retired, COUNT);
    CHECK(retired > 0, "cm_trim retired no span");
    printf("flat entries match; blocks in and beyond the arena are freed and reused; its bounds are exact\n");
    return 0;
}
