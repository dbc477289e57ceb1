/* edge_core_dump: a core dump holds the program's blocks and not the address
 * space reserved for later. The kernel dumps an anonymous mapping whole once
 * a page of it was touched, and writes untouched pages as zeros into a pipe
 * (systemd-coredump, apport, abrt): before the fix, every crash streamed the
 * 64 GiB arena, the descriptor region and the cage (68.9 GB, 23 s to die).
 *
 * From /proc/self/smaps (what the kernel reads too): the mapping under every
 * kind of block (small blocks of a heap and of the default heap, a large
 * block, the cage, the class space and its metadata, the code space) is
 * dumped (accessible, and "dd" absent from its VmFlags); two threads then allocate 48 MiB
 * each at once, and every block of theirs, the last ones far past the
 * first 32 MiB step of what dumps hold, is dumped and keeps its pattern; the
 * anonymous mappings a core would hold stay under 512 MiB while more than
 * 1 GiB of reservations is left out. Run again with
 * CAGEMALLOC_ARENA_RESERVE=0 (superblocks from 32 MiB reservations). */
#include "core_util.h"

#include <pthread.h>

#include "cagemalloc.h"
#include "smaps_util.h"

#define MiB ((size_t)1 << 20)
#define BLOCK (16 * 1024)
#define PER_THREAD ((48 * MiB) / BLOCK)
#define THREADS 2

static void *blocks[THREADS][PER_THREAD];

/* Left out of core dumps: advised so ("dd"), or an anonymous mapping never
 * opened (no access, so no page was ever touched). */
static bool left_out_of_dumps(const smaps_entry_t *m) {
    return smaps_flag(m, "dd") || strncmp(m->perms, "---", 3) == 0;
}

static void expect_dumped(size_t n, const char *what, const void *p) {
    const smaps_entry_t *m = smaps_find(n, p);
    CMT_CHECK(m != NULL, "%s at %p: in no mapping", what, p);
    CMT_CHECK(!left_out_of_dumps(m), "%s at %p: its mapping %lx-%lx (%s) is left out of core dumps", what, p,
              (unsigned long)m->lo, (unsigned long)m->hi, m->perms);
}

/* Anonymous memory as the kernel sees it (no file, or a memfd's). */
static bool anonymous(const smaps_entry_t *m) {
    return m->path[0] == '\0' || m->path[0] == '[' || strncmp(m->path, "/memfd:", 7) == 0;
}

/* What a core would hold of anonymous memory, and what is left out, in MiB. */
static void dump_sizes(size_t n, size_t *dumped, size_t *left_out) {
    *dumped = *left_out = 0;
    for (size_t i = 0; i < n; i++) {
        const smaps_entry_t *m = &smaps_table[i];
        if (!anonymous(m) || strcmp(m->path, "[vsyscall]") == 0) continue;
        *(left_out_of_dumps(m) ? left_out : dumped) += (m->hi - m->lo) / MiB;
    }
}

static void *grow(void *arg) {
    unsigned t = (unsigned)(uintptr_t)arg;
    cm_heap_t *own = t ? cm_heap_new() : NULL; /* one thread in a heap of its own, one in its default heap */
    CMT_CHECK(!t || own, "cm_heap_new");
    for (size_t i = 0; i < PER_THREAD; i++) {
        void *p = own ? cm_heap_malloc(own, BLOCK) : cm_malloc(BLOCK);
        CMT_CHECK(p, "block %zu of thread %u", i, t);
        cmt_fill(p, BLOCK, cmt_seed(p, BLOCK, t, i));
        blocks[t][i] = p;
    }
    if (own) cm_heap_delete(own); /* its blocks stay, adopted by this thread's default heap */
    return NULL;
}

int main(void) {
    const char *reserve = getenv("CAGEMALLOC_ARENA_RESERVE");
    printf("%s\n", reserve ? "superblocks from 32 MiB reservations" : "superblocks from the arena's reservation");

    void *small = cm_malloc(48), *large = cm_malloc(8 * MiB), *caged = cm_cage_malloc(1000);
    void *klass = cm_klass_alloc(256), *meta = cm_meta_alloc(40), *code = cm_code_alloc(256, NULL);
    CMT_CHECK(small && large && caged && klass && meta && code, "a first block of each kind");
    memset(small, 1, 48), memset(large, 2, 8 * MiB), memset(caged, 3, 1000), memset(klass, 4, 256);
    memset(meta, 5, 40);
    static const unsigned char ret[64] = {0xc3};
    CMT_CHECK(cm_code_write(code, ret, sizeof ret) == 0, "cm_code_write");

    size_t n = smaps_read();
    expect_dumped(n, "a small block", small);
    expect_dumped(n, "a large block", large);
    expect_dumped(n, "a block in the cage", caged);
    expect_dumped(n, "a class", klass);
    expect_dumped(n, "class metadata", meta);
    expect_dumped(n, "a code block", code);
    size_t dumped, left_out;
    dump_sizes(n, &dumped, &left_out);
    printf("first blocks: a core holds %zu MiB of anonymous memory, %zu MiB left out\n", dumped, left_out);

    pthread_t tid[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        CMT_CHECK(pthread_create(&tid[t], NULL, grow, (void *)(uintptr_t)t) == 0, "pthread_create");
    for (unsigned t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    n = smaps_read();
    for (unsigned t = 0; t < THREADS; t++)
        for (size_t i = 0; i < PER_THREAD; i++) {
            expect_dumped(n, "a block of the growth", blocks[t][i]);
            CMT_CHECK(cmt_mismatch(blocks[t][i], BLOCK, cmt_seed(blocks[t][i], BLOCK, t, i)) == BLOCK,
                      "block %zu of thread %u lost its pattern", i, t);
        }
    dump_sizes(n, &dumped, &left_out);
    printf("after %zu MiB more: a core holds %zu MiB of anonymous memory, %zu MiB left out\n",
           THREADS * PER_THREAD * BLOCK / MiB, dumped, left_out);
    CMT_CHECK(dumped < 512, "a core would hold %zu MiB of anonymous memory", dumped);
    CMT_CHECK(left_out > 1024, "only %zu MiB of reservations are left out of core dumps", left_out);

    for (unsigned t = 0; t < THREADS; t++)
        for (size_t i = 0; i < PER_THREAD; i++) cm_free(blocks[t][i]);
    cm_code_free(code);
    cm_meta_free(meta);
    cm_klass_free(klass);
    cm_free(caged);
    cm_free(large);
    cm_free(small);
    printf("core dumps hold the blocks, not the reservations\n");
    return 0;
}
