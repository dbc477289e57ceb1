/* unit_klass_race: cm_meta_free of a valid metadata block must not abort
 * when the class whose gap holds it is freed at the same moment. A test
 * pause point inside cm_meta_free, after it has looked whether a class
 * lives in the slot, frees that class; the metadata block is then freed
 * normally. (core_freeze found this: a validation that read the slot's end
 * bits before and after the class bit called a valid block invalid about
 * once in five runs.) */
#include <string.h>

#include "internal.h"
#include "unit_check.h"

static void *klass;
static int freed_inside;

static void free_the_class(const char *point) {
    if (strcmp(point, "meta free: class bit read") != 0 || freed_inside) return;
    freed_inside = 1;
    cm_klass_free(klass);
}

int main(void) {
    for (int round = 0; round < 100; round++) {
        freed_inside = 0;
        klass = cm_klass_alloc(600); /* a 1 KiB slot: 424 bytes of gap */
        CHECK(klass != NULL, "cm_klass_alloc");
        memset(klass, 0x4b, 600);
        char *meta = cm_meta_alloc(64);
        CHECK(meta && meta > (char *)klass && meta < (char *)klass + 1024, "the metadata did not go into the gap");
        memset(meta, 0x4d, 64);
        cm_test_hook = free_the_class;
        cm_meta_free(meta);
        cm_test_hook = NULL;
        CHECK(freed_inside, "the pause point was not reached");
    }
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    CHECK(s.classes_live == 0 && s.gap_bytes_reused == 0, "everything was freed");
    printf("klass race: a metadata block is freed cleanly while its class is freed\n");
    return 0;
}
