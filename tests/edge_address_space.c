/* edge_address_space: freed address space goes back to the OS and serves
 * any size. In a child limited (RLIMIT_AS) to its address space plus
 * 520 MiB: 300 MiB of 64-byte blocks, all freed, malloc_trim(0); then
 * 300 MiB of 40 KiB blocks, all freed, malloc_trim(0); then 300 MiB of 1 MiB
 * blocks. glibc does all three; an allocator that keeps the spans of one
 * size for that size alone runs out in the second or third round. Last,
 * 300 MiB of 64-byte blocks freed without a trim, then one 300 MiB block:
 * the address space the freed chunks keep must be given back when the
 * mapping fails, not only by malloc_trim. Then 256 MiB aligned to 1 GiB,
 * which over-mapping by the alignment would not fit. Last, a process
 * started under RLIMIT_AS of 64 MiB gets 40 MiB or more of small blocks
 * (its reservations are sized to the limit). Blocks
 * are chained through their first word (no side array to budget for) and
 * every one is pattern-checked before it is freed. */
#include "core_util.h"

#include <errno.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define MiB ((size_t)1 << 20)

struct node {
    struct node *prev;
    uint64_t seed;
};

static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;

static size_t vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    CMT_CHECK(f && fscanf(f, "%lu", &pages) == 1, "cannot read /proc/self/statm");
    fclose(f);
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Allocate `total` bytes in blocks of `size`, then verify and free them
 * all, and malloc_trim(0) if `trim`. */
static void round_of(size_t size, size_t total, int trim)
{
    struct node *last = NULL;
    size_t n = total / size;
    for (size_t i = 0; i < n; i++) {
        struct node *b = do_malloc(size);
        CMT_CHECK(b != NULL, "malloc(%zu) failed after %zu MiB of %zu MiB", size, i * size / MiB, total / MiB);
        b->prev = last;
        b->seed = cmt_mix(i ^ size);
        cmt_fill(b + 1, size - sizeof *b, b->seed);
        last = b;
    }
    while (last) {
        struct node *prev = last->prev;
        CMT_VERIFY(last + 1, size - sizeof *last, last->seed, "block before free");
        do_free(last);
        last = prev;
    }
    if (trim) malloc_trim(0);
    printf("  %zu MiB of %zu-byte blocks%s: ok\n", total / MiB, size, trim ? "" : ", no trim");
    fflush(stdout);
}

/* A block aligned beyond its size takes address space for its size, not
 * size + alignment: over-mapping by 1 GiB would not fit in the limit. */
static void aligned_round(void)
{
    size_t size = 256 * MiB, align = (size_t)1 << 30;
    unsigned char *p = aligned_alloc(align, size);
    CMT_CHECK(p && ((uintptr_t)p & (align - 1)) == 0, "aligned_alloc(1 GiB, 256 MiB) under the limit: %p", (void *)p);
    uint64_t seed = cmt_mix(size);
    cmt_fill(p, size, seed);
    CMT_VERIFY(p, size, seed, "the 1 GiB-aligned block before free");
    free(p);
    printf("  256 MiB aligned to 1 GiB: ok\n");
    fflush(stdout);
}

/* In a process started under RLIMIT_AS of 64 MiB: blocks of 24-2023 bytes
 * until NULL (ENOMEM) must come to at least 40 MiB, each verified before
 * it is freed. The limit counts every reservation whole: a descriptor
 * region as large as fitted, and chunks reserved 32 MiB at a time, left
 * 18 MB of a 60 MB limit (glibc 57, jemalloc 41). */
struct sized_node {
    struct sized_node *prev;
    uint64_t seed;
    size_t size;
};

static int run_limited_from_start(void)
{
    struct sized_node *last = NULL;
    size_t total = 0;
    for (uint64_t i = 0;; i++) {
        size_t size = 24 + (size_t)(i * 37 % 2000);
        struct sized_node *b = do_malloc(size);
        if (!b) {
            CMT_CHECK(errno == ENOMEM, "malloc failed with errno %d", errno);
            break;
        }
        *b = (struct sized_node){.prev = last, .seed = cmt_mix(i), .size = size};
        cmt_fill(b + 1, size - sizeof *b, b->seed);
        last = b;
        total += size;
    }
    CMT_CHECK(total >= 40 * MiB, "only %zu KiB allocated under RLIMIT_AS of 64 MiB", total >> 10);
    while (last) {
        struct sized_node *prev = last->prev;
        CMT_VERIFY(last + 1, last->size - sizeof *last, last->seed, "block before free");
        do_free(last);
        last = prev;
    }
    printf("  from the start under 64 MiB: %zu KiB of small blocks, then ENOMEM\n", total >> 10);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "limited-from-start") == 0) return run_limited_from_start();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        do_free(do_malloc(64)); /* initialised before the limit is set */
        struct rlimit lim;
        lim.rlim_cur = lim.rlim_max = vm_size() + 520 * MiB;
        CMT_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
        round_of(64, 300 * MiB, 1);
        round_of(40 << 10, 300 * MiB, 1);
        round_of(1 << 20, 300 * MiB, 1);
        round_of(64, 300 * MiB, 0);
        round_of(300 * MiB, 300 * MiB, 1);
        aligned_round();
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the limited child failed (status 0x%x)", status);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        struct rlimit lim = {64 * MiB, 64 * MiB};
        CMT_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
        execl("/proc/self/exe", "edge_address_space", "limited-from-start", (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child limited from the start failed (status 0x%x)",
              status);
    printf("address space freed by one size serves the others under RLIMIT_AS\n");
    return 0;
}
