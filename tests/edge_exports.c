/* edge_exports: what glibc programs link against besides the standard
 * names, and what other allocators provide, comes from cagemalloc: cfree,
 * C23's free_sized and free_aligned_sized, mallinfo (the old struct,
 * saturating), malloc_info (glibc's XML), mallopt
 * (accepted, ignored), and the __libc_* entry points that preloaded tools
 * call directly. CAGEMALLOC_VERBOSE=1 reports what init decided, once. */
#include "core_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>

#include "cagemalloc.h"

static const char *const names[] = {"cfree", "free_sized", "free_aligned_sized", "mallinfo", "malloc_info", "mallopt", "__libc_malloc", "__libc_free",
                                    "__libc_calloc", "__libc_realloc", "__libc_memalign", "__libc_valloc",
                                    "__libc_pvalloc"};

static void *ours(const char *name)
{
    void *sym = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    CMT_CHECK(sym && dladdr(sym, &info) && info.dli_fname && strstr(info.dli_fname, "libcagemalloc"),
              "%s does not come from libcagemalloc (%s)", name, sym && dladdr(sym, &info) ? info.dli_fname : "missing");
    return sym;
}

static void check_libc_entry_points(void)
{
    void *(*libc_malloc)(size_t) = ours("__libc_malloc");
    void *(*libc_calloc)(size_t, size_t) = ours("__libc_calloc");
    void *(*libc_realloc)(void *, size_t) = ours("__libc_realloc");
    void *(*libc_memalign)(size_t, size_t) = ours("__libc_memalign");
    void (*libc_free)(void *) = ours("__libc_free");
    void (*cfree_fn)(void *) = ours("cfree");
    unsigned char *p = libc_malloc(100);
    CMT_CHECK(p && cm_usable_size(p) >= 100, "__libc_malloc");
    memset(p, 0xab, 100);
    p = libc_realloc(p, 5000);
    CMT_CHECK(p && p[0] == 0xab && p[99] == 0xab && cm_usable_size(p) >= 5000, "__libc_realloc kept the contents");
    free(p); /* a block of __libc_malloc is freed by free, and the other way round */
    unsigned char *z = libc_calloc(10, 100);
    for (int i = 0; i < 1000; i++) CMT_CHECK(z[i] == 0, "__libc_calloc not zeroed");
    libc_free(z);
    void *a = libc_memalign(4096, 100);
    CMT_CHECK(a && ((uintptr_t)a & 4095) == 0, "__libc_memalign alignment");
    cfree_fn(a);
    void *v = ((void *(*)(size_t))ours("__libc_valloc"))(10);
    void *pv = ((void *(*)(size_t))ours("__libc_pvalloc"))(10);
    CMT_CHECK(v && pv && ((uintptr_t)v & 4095) == 0 && ((uintptr_t)pv & 4095) == 0 && cm_usable_size(pv) >= 4096,
              "__libc_valloc / __libc_pvalloc");
    free(v);
    free(pv);
}

/* cm_block_visitor: stops the visit (returns 1) at the block sought. */
static int is_sought(void *block, size_t usable, void *sought)
{
    (void)usable;
    return block == sought;
}
static bool live_in_default_heap(void *p) { return cm_heap_visit(cm_heap_get_default(), is_sought, p) == 1; }

/* C23's sized frees: looked up, as glibc before 2.43 declares neither. A
 * block they free is no longer live, small or large. */
static void check_sized_frees(void)
{
    void (*free_sized_fn)(void *, size_t) = (void (*)(void *, size_t))ours("free_sized");
    void (*free_aligned_sized_fn)(void *, size_t, size_t) =
        (void (*)(void *, size_t, size_t))ours("free_aligned_sized");
    free_sized_fn(NULL, 0);
    free_aligned_sized_fn(NULL, 64, 0);
    for (size_t size = 24; size <= (size_t)4 << 20; size *= 7) {
        unsigned char *p = malloc(size), *a = aligned_alloc(4096, size);
        CMT_CHECK(p && a && ((uintptr_t)a & 4095) == 0, "malloc / aligned_alloc(4096, %zu)", size);
        memset(p, 0x5a, size);
        memset(a, 0xa5, size);
        CMT_CHECK(p[size - 1] == 0x5a && a[size - 1] == 0xa5, "blocks of %zu", size);
        CMT_CHECK(live_in_default_heap(p) && live_in_default_heap(a), "blocks of %zu not seen live", size);
        free_sized_fn(p, size);
        free_aligned_sized_fn(a, 4096, size);
        CMT_CHECK(!live_in_default_heap(p), "free_sized(%p, %zu) left it live", (void *)p, size);
        CMT_CHECK(!live_in_default_heap(a), "free_aligned_sized(%p, 4096, %zu) left it live", (void *)a, size);
    }
}

/* mallinfo is deprecated in glibc's header (its int fields overflow); that
 * it still works, saturating, is what this checks. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void check_mallinfo(void)
{
    ours("mallinfo");
    char *big = malloc((size_t)3 << 30); /* never touched */
    CMT_CHECK(big != NULL, "malloc(3 GiB)");
    struct mallinfo m = mallinfo();
    struct mallinfo2 m2 = mallinfo2();
    CMT_CHECK(m2.hblkhd >= (size_t)3 << 30 && m.hblkhd == INT_MAX && m.hblks >= 1,
              "mallinfo does not saturate: hblkhd %d (mallinfo2 %zu)", m.hblkhd, m2.hblkhd);
    free(big);
    m = mallinfo();
    CMT_CHECK(m.hblkhd >= 0 && m.hblkhd < INT_MAX && m.arena >= 0, "mallinfo after free: hblkhd %d", m.hblkhd);
}

static void check_malloc_info(void)
{
    ours("malloc_info");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    void *keep = malloc(48);
    CMT_CHECK(f && malloc_info(0, f) == 0 && fclose(f) == 0, "malloc_info(0, f) failed");
    CMT_CHECK(strncmp(text, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 43) == 0 &&
                  strstr(text, "<size from=\"33\" to=\"48\"") && strstr(text, "<total type=\"mmap\"") &&
                  len > 10 && strcmp(text + len - 10, "</malloc>\n") == 0,
              "malloc_info wrote:\n%s", text);
    free(text);
    free(keep);
    errno = 0;
    CMT_CHECK(malloc_info(1, stdout) == -1 && errno == EINVAL, "malloc_info with options != 0");
}

static void check_mallopt(void)
{
    ours("mallopt");
    CMT_CHECK(mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1 && mallopt(M_ARENA_MAX, 1) == 1, "mallopt");
}

static const char *verbose_value;
static void exec_self(void)
{
    if (verbose_value) setenv("CAGEMALLOC_VERBOSE", verbose_value, 1);
    else unsetenv("CAGEMALLOC_VERBOSE");
    execl("/proc/self/exe", "edge_exports", "child", (char *)NULL);
    _exit(127);
}

/* Runs this program again with `verbose` as CAGEMALLOC_VERBOSE; returns how
 * many start-up reports it printed on stderr. */
static int verbose_reports(const char *verbose)
{
    char out[4096];
    verbose_value = verbose;
    int status = cmt_run_child(exec_self, out, sizeof out);
    CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
    int reports = 0;
    for (char *at = out; (at = strstr(at, "cagemalloc: version ")); at++) reports++;
    CMT_CHECK(!reports || (strstr(out, ", hardening o") && strstr(out, "descriptors: ") && strstr(out, "clock: ")),
              "incomplete report:\n%s", out);
    return reports;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) { /* the child of verbose_reports */
        free(malloc(10));
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) ours(names[i]);
    check_libc_entry_points();
    check_sized_frees();
    check_mallinfo();
    check_malloc_info();
    check_mallopt();
    CMT_CHECK(verbose_reports("1") == 1, "CAGEMALLOC_VERBOSE=1 did not report exactly once");
    CMT_CHECK(verbose_reports(NULL) == 0 && verbose_reports("0") == 0, "a report without CAGEMALLOC_VERBOSE");
    printf("exports: cfree, free_sized, free_aligned_sized, mallinfo, malloc_info, mallopt, __libc_*; CAGEMALLOC_VERBOSE reports once\n");
    return 0;
}
