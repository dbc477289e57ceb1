/* unit_large_cache: which freed large mapping a large allocation reuses.
 *  - An exact fit among several sizes; else the smallest that fits; else
 *    the largest smaller one, grown.
 *  - The same above 16 units (1 MiB), where sizes share one list: the
 *    smallest that fits, split when it is over 8x the need.
 *  - Two threads churning blocks of 2-40 units through the cache, every
 *    block patterned and checked before its free.
 * Driven through cm_malloc and cm_free in a fresh process: these are the
 * only large blocks. */
#include <pthread.h>
#include <string.h>

#include "cagemalloc.h"
#include "internal.h"
#include "unit_check.h"

#define UNIT ((size_t)1 << CM_UNIT_SHIFT)
#define CHURN_STEPS 3000

static size_t cached_units(void) { return atomic_load(&cm_counters.large_cached) / UNIT; }

static char *block(size_t units) {
    char *p = cm_malloc(units * UNIT);
    CHECK(p, "cm_malloc(%zu units)", units);
    p[0] = p[units * UNIT - 1] = (char)units;
    return p;
}

static void expect(const char *what, const char *got, const char *want) {
    CHECK(got == want, "%s: got %p, want %p", what, (const void *)got, (const void *)want);
}

static void *churn(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    char *live[4] = {0};
    size_t size[4] = {0};
    for (int i = 0; i < CHURN_STEPS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned k = (unsigned)(x % 4);
        if (live[k]) {
            for (size_t off = 0; off < size[k]; off += 4096)
                CHECK(live[k][off] == (char)(off / 4096 + size[k]), "block %p changed at %zu", (void *)live[k], off);
            cm_free(live[k]);
        }
        size[k] = (2 + (x >> 8) % 39) * UNIT - (x >> 20) % UNIT;
        live[k] = cm_malloc(size[k]);
        CHECK(live[k], "cm_malloc(%zu)", size[k]);
        for (size_t off = 0; off < size[k]; off += 4096) live[k][off] = (char)(off / 4096 + size[k]);
    }
    for (int k = 0; k < 4; k++) cm_free(live[k]);
    return NULL;
}

int main(void) {
    cm_free(cm_malloc(1)); /* initialise */
    cm_large_trim();
    CHECK(cached_units() == 0, "an empty cache to start");

    char *a3 = block(3), *a5 = block(5), *a8 = block(8);
    cm_free(a3), cm_free(a5), cm_free(a8);
    CHECK(cached_units() == 16, "three mappings cached (%zu units)", cached_units());
    char *p5 = block(5), *p4 = block(4), *p6 = cm_malloc(6 * UNIT);
    expect("an exact fit", p5, a5);
    expect("the smallest that fits", p4, a8);
    CHECK(p6 && cached_units() == 0, "the largest smaller one, grown (%zu units left)", cached_units());
    CHECK(p6[0] == 3 && p6[3 * UNIT - 1] == 3, "its pages moved with it");
    memset(p6, 6, 6 * UNIT);
    cm_free(p5), cm_free(p4), cm_free(p6);
    cm_large_trim();

    char *b20 = block(20), *b40 = block(40), *b100 = block(100);
    cm_free(b20), cm_free(b40), cm_free(b100);
    char *q30 = block(30), *q17 = block(17), *q10 = block(10);
    expect("above 1 MiB: the smallest that fits", q30, b40);
    expect("a size above the exact lists", q17, b20);
    expect("one over 8x the need, split", q10, b100);
    CHECK(cached_units() == 90, "its tail cached (%zu units)", cached_units());
    cm_free(q30), cm_free(q17), cm_free(q10);
    cm_large_trim();

    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0, "thread");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    cm_large_trim();
    CHECK(cached_units() == 0, "trim empties the cache (%zu units left)", cached_units());
    printf("large cache: exact fits, smallest fits, largest smaller grown, split; two threads churned\n");
    return 0;
}
