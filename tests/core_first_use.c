/* core_first_use: the allocator's first use, made by several threads at the
 * same moment (each round in a fresh child whose parent never called the
 * cm_ API): plain blocks, a heap of one's own, a cage block, a large block.
 * Every thread fills its block with a pattern and verifies it before the
 * free. Every other round sets CAGEMALLOC_* settings first, so the racers
 * also set those. Under ThreadSanitizer (core_first_use_tsan) the set-up
 * races must not be data races: a late racer's CAS on a global set once at
 * init was reported against the plain reads of threads already running. */
#include "core_util.h"

#include "cagemalloc.h"

#define USERS 4
#define ROUNDS 10

static int use;           /* which first use the threads make */
static int with_settings; /* set CAGEMALLOC_* settings before it */

enum { USE_MALLOC, USE_HEAP, USE_CAGE, USE_LARGE, USES };
static const char *const use_names[USES] = {"malloc", "heap", "cage", "large"};

static void *first_user(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    size_t n = use == USE_LARGE ? (size_t)300000 + 4096 * me : (size_t)24 + 40 * me;
    cm_heap_t *h = use == USE_HEAP ? cm_heap_new() : NULL;
    CMT_CHECK(use != USE_HEAP || h != NULL, "cm_heap_new failed");
    unsigned char *p = h ? cm_heap_malloc(h, n) : use == USE_CAGE ? cm_cage_malloc(n) : cm_malloc(n);
    CMT_CHECK(p != NULL, "the first allocation (%s) failed", use_names[use]);
    if (use == USE_CAGE)
        CMT_CHECK(cm_decompress(cm_compress(p)) == p, "%p does not round-trip through 32 bits", (void *)p);
    uint64_t seed = cmt_seed(p, n, me, 0);
    cmt_fill(p, n, seed);
    CMT_VERIFY(p, n, seed, "a block of the first use");
    cm_free(p);
    if (h)
        cm_heap_delete(h);
    return NULL;
}

static void first_use(void)
{
    if (with_settings) {
        /* read at the first use (in the sanitized builds, whose malloc is
         * the sanitizer's, that is the threads' below) */
        setenv("CAGEMALLOC_DECAY_MS", "500", 1);
        setenv("CAGEMALLOC_EMPTY_KEEP", "32m", 1);
        setenv("CAGEMALLOC_LARGE_CACHE", "32m", 1);
    }
    cmt_run_at_once(USERS, first_user);
}

int main(void)
{
    int failures = 0;
    for (use = 0; use < USES; use++) {
        char name[32];
        snprintf(name, sizeof name, "first_use_%s", use_names[use]);
        for (int round = 0; round < ROUNDS; round++) {
            with_settings = round % 2;
            failures += !cmt_case(name, first_use, NULL);
        }
    }
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
