/* unit_pagemap: address -> entry lookups over real mappings: every unit of a
 * set range answers its entry, neighbours and foreign addresses answer 0,
 * ranges that do not start or end on a unit are covered, and addresses
 * outside user space never touch the map. */
#include <sys/mman.h>

#include "internal.h"
#include "unit_check.h"

int main(void) {
    size_t len = 8 * CM_UNIT_SIZE;
    char *raw = mmap(NULL, len + CM_UNIT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(raw != MAP_FAILED, "mmap");
    char *base = (char *)(((uintptr_t)raw + CM_UNIT_SIZE - 1) & ~(CM_UNIT_SIZE - 1));
    CHECK(cm_pagemap_get((uintptr_t)base) == 0, "unset entry not 0");
    uint32_t e = cm_entry_make(12345, 7);
    CHECK(cm_entry_ref(e) == 12345 && cm_entry_class(e) == 7, "entry packing");
    CHECK(cm_pagemap_set((uintptr_t)base + CM_UNIT_SIZE, 3 * CM_UNIT_SIZE, e), "set");
    CHECK(cm_pagemap_get((uintptr_t)base + CM_UNIT_SIZE - 1) == 0, "unit before the range is set");
    for (size_t off = CM_UNIT_SIZE; off < 4 * CM_UNIT_SIZE; off += 4093)
        CHECK(cm_pagemap_get((uintptr_t)base + off) == e, "offset %zu not found", off);
    CHECK(cm_pagemap_get((uintptr_t)base + 4 * CM_UNIT_SIZE) == 0, "unit after the range is set");
    /* an unaligned range covers every unit it touches */
    CHECK(cm_pagemap_set((uintptr_t)base + 5 * CM_UNIT_SIZE + 4096, CM_UNIT_SIZE, cm_entry_make(9, 63)), "set2");
    CHECK(cm_entry_ref(cm_pagemap_get((uintptr_t)base + 5 * CM_UNIT_SIZE)) == 9, "partial first unit");
    CHECK(cm_entry_ref(cm_pagemap_get((uintptr_t)base + 6 * CM_UNIT_SIZE + 100)) == 9, "partial last unit");
    CHECK(cm_pagemap_get((uintptr_t)base + 7 * CM_UNIT_SIZE) == 0, "beyond the partial range");
    CHECK(cm_pagemap_set((uintptr_t)base + CM_UNIT_SIZE, 3 * CM_UNIT_SIZE, 0), "clear");
    CHECK(cm_pagemap_get((uintptr_t)base + 2 * CM_UNIT_SIZE) == 0, "cleared entry");
    CHECK(cm_pagemap_get(0) == 0 && cm_pagemap_get((uintptr_t)1 << 47) == 0 && cm_pagemap_get(UINTPTR_MAX) == 0,
          "addresses outside user space");
    int on_stack;
    CHECK(cm_pagemap_get((uintptr_t)&on_stack) == 0, "a stack address");
    printf("page map: set, lookup, partial units and foreign addresses behave\n");
    return 0;
}
