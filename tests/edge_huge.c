/* edge_huge: impossible requests fail the way glibc's do, and large blocks
 * cost no page-map memory in proportion to their size.
 *  - Under the kernel's default overcommit heuristic, a request larger than
 *    RAM + swap (1 TiB, 8 TiB) is refused by the kernel: malloc, calloc,
 *    realloc and aligned_alloc return NULL with errno ENOMEM (as glibc does),
 *    quickly and without growing the process.
 *  - A 16 GiB block that the kernel grants (never touched) adds almost
 *    nothing to the resident set: the page map needs one entry for it, not
 *    one per 64 KiB (262,144 entries, 1 MiB, before). */
#include "core_util.h"

#include <errno.h>

#include "cagemalloc.h"

#define GiB ((size_t)1 << 30)
#define TiB ((size_t)1 << 40)

static void *(*volatile do_malloc)(size_t) = malloc;
static void *(*volatile do_calloc)(size_t, size_t) = calloc;
static void *(*volatile do_realloc)(void *, size_t) = realloc;
static void *(*volatile do_aligned_alloc)(size_t, size_t) = aligned_alloc;
static void (*volatile do_free)(void *) = free;

static size_t meminfo_kib(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    size_t v = 0, klen = strlen(key);
    CMT_CHECK(f != NULL, "cannot read /proc/meminfo");
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') sscanf(line + klen + 1, "%zu", &v);
    fclose(f);
    return v;
}

static int overcommit_mode(void)
{
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = -1;
    if (f) {
        if (fscanf(f, "%d", &mode) != 1) mode = -1;
        fclose(f);
    }
    return mode;
}

static void expect_enomem(const char *what, void *p)
{
    int e = errno;
    CMT_CHECK(p == NULL, "%s succeeded: the kernel's overcommit policy was bypassed", what);
    CMT_CHECK(e == ENOMEM, "%s: errno %d, not ENOMEM", what, e);
}

int main(void)
{
    size_t ram = (meminfo_kib("MemTotal") + meminfo_kib("SwapTotal")) << 10;
    int mode = overcommit_mode();
    cm_stats_t s0, s1;
    cm_stats_get(&s0);
    if (mode == 0 && ram < TiB / 2) {
        size_t sizes[] = {TiB, 8 * TiB};
        for (int i = 0; i < 2; i++) {
            errno = 0;
            expect_enomem("malloc", do_malloc(sizes[i]));
            errno = 0;
            expect_enomem("calloc", do_calloc(sizes[i] >> 12, 4096));
            errno = 0;
            expect_enomem("aligned_alloc", do_aligned_alloc((size_t)1 << 21, sizes[i]));
            char *p = do_malloc(1 << 20);
            CMT_CHECK(p != NULL, "malloc(1 MiB) failed");
            memset(p, 7, 1 << 20);
            errno = 0;
            expect_enomem("realloc", do_realloc(p, sizes[i]));
            CMT_CHECK(p[0] == 7 && p[(1 << 20) - 1] == 7, "realloc failure damaged the block");
            do_free(p);
        }
        cm_stats_get(&s1);
        CMT_CHECK(s1.mapped < s0.mapped + 64 * ((size_t)1 << 20),
                  "refused requests left %zu MiB mapped", (s1.mapped - s0.mapped) >> 20);
        printf("1 TiB and 8 TiB requests: NULL + ENOMEM (RAM + swap %zu GiB, overcommit heuristic)\n", ram / GiB);
    } else {
        printf("SKIP the refusal checks: overcommit_memory=%d, RAM + swap %zu GiB (the kernel grants them)\n", mode,
               ram / GiB);
    }

    size_t before = cmt_rss();
    char *big = do_malloc(16 * GiB);
    if (big == NULL) {
        printf("SKIP the page-map check: the kernel refused 16 GiB\n");
        return 0;
    }
    size_t grew = cmt_rss() - before;
    big[0] = 1;
    big[16 * GiB - 1] = 2;
    CMT_CHECK(big[0] == 1 && big[16 * GiB - 1] == 2, "16 GiB block does not hold its data");
    do_free(big);
    printf("16 GiB block: resident set grew by %zu KiB on allocation\n", grew >> 10);
    CMT_CHECK(grew < 256 * 1024, "a 16 GiB block cost %zu KiB of page map", grew >> 10);
    return 0;
}
