/* unit_size_class: the generated size-class table. Every size maps to the
 * smallest class that fits; classes follow the 8-byte, 16-byte steps,
 * four-per-doubling rule; superblock geometry and the block-index test are exact; and the
 * tables live in read-only memory (built at compile time, not at run time). */
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

/* True if addr lies in a mapping of this process without write permission. */
static int in_readonly_mapping(const void *addr) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && (uintptr_t)addr >= lo && (uintptr_t)addr < hi)
            found = perms[1] == '-' ? 1 : -1;
    }
    if (f) fclose(f);
    return found == 1;
}

int main(void) {
    CHECK(CM_NUM_CLASSES >= 36 && CM_NUM_CLASSES < 63, "class count %d", CM_NUM_CLASSES);
    CHECK(cm_class_info[CM_NUM_CLASSES].block_size == CM_SMALL_MAX, "largest class %u",
          cm_class_info[CM_NUM_CLASSES].block_size);
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        const cm_class_info_t *ci = &cm_class_info[c];
        uint32_t bs = ci->block_size;
        CHECK(c == 1 ? bs == 8 : bs % 16 == 0, "class %u size %u: 8, then multiples of 16", c, bs);
        if (c > 1) CHECK(bs > cm_class_info[c - 1].block_size, "class %u not increasing", c);
        if (c > 1 && bs <= 128) CHECK(bs == 16 * (c - 1), "class %u: 16-byte steps up to 128, got %u", c, bs);
        else {
            uint32_t p = 1u << (31 - __builtin_clz(bs - 1)); /* the power of two below */
            bool page_plus_header = (p == 4096 || p == 8192) && bs == p + p / 8;
            CHECK((bs - p) % (p / 4) == 0 || page_plus_header, "class %u size %u not 2^x + k*2^(x-2)", c, bs);
        }
        uint32_t span = 1u << ci->span_shift;
        CHECK(ci->span_shift >= CM_SPAN_MIN_SHIFT && ci->span_shift < CM_SPAN_MIN_SHIFT + CM_SPAN_ORDERS,
              "class %u span shift %u", c, ci->span_shift);
        CHECK(ci->max_count == span / bs && ci->max_count >= (bs >= 65536 ? 4u : 8u), "class %u count %u", c,
              ci->max_count);
        CHECK(ci->max_count <= CM_MAX_BLOCKS, "class %u: %u blocks, CM_MAX_BLOCKS is %u", c, ci->max_count,
              CM_MAX_BLOCKS);
        CHECK((span - ci->max_count * bs) * 8 <= span, "class %u wastes more than 1/8", c);
        CHECK(ci->carve_batch >= 1 && ci->carve_batch <= ci->max_count, "class %u carve batch", c);
        CHECK(cm_block_check.span_mask[c] == span - 1, "class %u: the block check's mask is not the span's", c);
        for (uint64_t off = 0; off < span; off++) {
            bool start = off % bs == 0 && off / bs < ci->max_count;
            CHECK(cm_is_block_start(c, (void *)(uintptr_t)(7 * (uint64_t)span + off)) == start, "class %u block start at %llu",
                  c, (unsigned long long)off);
            if (start) CHECK(cm_block_index(c, off) == off / bs, "class %u block index at %llu", c,
                             (unsigned long long)off);
        }
    }
    for (size_t size = 0; size <= CM_SMALL_MAX; size++) {
        unsigned c = cm_size_to_class(size);
        CHECK(c >= 1 && c <= CM_NUM_CLASSES, "size %zu -> class %u", size, c);
        CHECK(cm_class_info[c].block_size >= size, "size %zu -> too small class %u", size, c);
        CHECK(c == 1 || cm_class_info[c - 1].block_size < size, "size %zu -> not the smallest class", size);
    }
    CHECK(in_readonly_mapping(cm_class_info), "class table not in read-only memory");
    for (unsigned c = CM_NUM_CLASSES + 1; c < CM_CLASS_INFO_LEN; c++)
        CHECK(cm_class_info[c].max_count == 0 && cm_block_check.start_limit[c] == 0, "entry %u is no class but has blocks", c);
    CHECK(cm_class_info[0].max_count == 0 && cm_block_check.start_limit[0] == 0, "entry 0 is no class but has blocks");
    CHECK(in_readonly_mapping(&cm_block_check), "block check table not in read-only memory");
    CHECK(in_readonly_mapping(cm_class_by_1) && in_readonly_mapping(cm_class_by_128),
          "lookup tables not in read-only memory");
    printf("size classes: %d classes, all sizes 0..%u map to the smallest fitting class\n", CM_NUM_CLASSES,
           CM_SMALL_MAX);
    return 0;
}
