/* stats.c: the counters and what reports them: the report printed by
 * malloc_stats() and at exit with CAGEMALLOC_SHOW_STATS=1, the start-up
 * report of CAGEMALLOC_VERBOSE=1, the cm_stats_get snapshot, and glibc's
 * mallinfo, mallinfo2 and malloc_info.
 *
 * Reports are formatted by hand into a stack buffer and written with a raw
 * system call: no stdio (which allocates), so they are safe at exit and from
 * inside the allocator (malloc_info, handed a FILE by its caller, writes the
 * same text with fwrite). Blocks in use are counted from the superblocks'
 * descriptors when asked (nothing is counted per malloc): a block waiting on
 * a heap's bin or local free list counts as in use. */
#include <errno.h>
#include <limits.h>

#include "api.h"

cm_counters_t cm_counters;

typedef struct out {
    int fd;
    FILE *fp;  /* if set, written here instead of fd */
    size_t len;
    char buf[4096];
} out_t;

static void flush_out(out_t *o) {
    if (o->fp) fwrite(o->buf, 1, o->len, o->fp);
    else cm_os_write(o->fd, o->buf, o->len);
    o->len = 0;
}

static void put(out_t *o, const char *s) {
    for (; *s; s++) {
        if (o->len == sizeof o->buf) flush_out(o);
        o->buf[o->len++] = *s;
    }
}

/* Right-aligned decimal in a field of `width`. */
static void put_num(out_t *o, uint64_t v, int width) {
    char digits[24];
    int n = 0;
    do digits[n++] = (char)('0' + v % 10), v /= 10;
    while (v);
    char field[32];
    int len = 0;
    while (len + n < width && len < 24) field[len++] = ' ';
    while (n) field[len++] = digits[--n];
    field[len] = '\0';
    put(o, field);
}

static void put_kib(out_t *o, const char *label, size_t bytes) {
    put(o, label);
    put_num(o, bytes >> 10, 12);
    put(o, " KiB\n");
}

static size_t load_size(_Atomic size_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

/* Blocks in use per class: carved blocks minus those on anchor lists, over
 * every superblock (relaxed reads of type-stable descriptors: a snapshot). */
static void blocks_in_use(uint64_t live[CM_NUM_CLASSES + 1]) {
    for (unsigned c = 0; c <= CM_NUM_CLASSES; c++) live[c] = 0;
    uint32_t n = cm_desc_count(), cap = cm_desc_capacity(); /* 0 before init */
    for (uint32_t ref = 1; ref < n && ref < cap; ref++) {
        cm_desc_t *d = cm_desc_from_ref(ref);
        unsigned cls = atomic_load_explicit(&d->size_class, memory_order_relaxed);
        cm_anchor_t a = atomic_load_explicit(&d->anchor, memory_order_relaxed);
        unsigned st = cm_anchor_state(a);
        if (cls == 0 || cls > CM_NUM_CLASSES ||
            (st != CM_FULL && st != CM_PARTIAL && st != CM_OWNED && st != CM_OWNED_FULL))
            continue;
        uint32_t carved = atomic_load_explicit(&d->carved, memory_order_relaxed), free = cm_anchor_count(a);
        if (carved > free) live[cls] += carved - free;
    }
}

void cm_stats_report(int fd) {
    uint64_t live[CM_NUM_CLASSES + 1];
    blocks_in_use(live);
    out_t o = {.fd = fd};
    put(&o, "cagemalloc statistics\n  class     block        in use   superblocks\n");
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        int64_t sb = atomic_load_explicit(&cm_counters.sb_live[c], memory_order_relaxed);
        if (live[c] == 0 && sb <= 0) continue;
        put_num(&o, c, 7);
        put_num(&o, cm_class_info[c].block_size, 10);
        put_num(&o, live[c], 14);
        put_num(&o, sb > 0 ? (uint64_t)sb : 0, 14);
        put(&o, "\n");
    }
    put(&o, "  superblocks in use");
    put_num(&o, load_size(&cm_counters.superblocks_live), 12);
    put(&o, "\n  large blocks in use");
    put_num(&o, load_size(&cm_counters.large_count), 11);
    put(&o, "\n");
    put_kib(&o, "  large bytes in use   ", load_size(&cm_counters.large_live));
    put_kib(&o, "  large bytes cached   ", load_size(&cm_counters.large_cached));
    put_kib(&o, "  free superblocks kept", cm_pool_kept_bytes());
    put_kib(&o, "  free arena units kept", cm_arena_dirty_bytes());
    put_kib(&o, "  mapped               ", load_size(&cm_counters.mapped));
    put_kib(&o, "  committed            ", load_size(&cm_counters.committed));
    put_kib(&o, "  returned to the OS   ", load_size(&cm_counters.returned));
    put(&o, "  OS calls             ");
    put_num(&o, load_size(&cm_counters.os_calls), 12);
    put(&o, "\n");
    flush_out(&o);
}

void cm_stats_get(cm_stats_t *s) {
    s->mapped = load_size(&cm_counters.mapped);
    s->committed = load_size(&cm_counters.committed);
    s->returned = load_size(&cm_counters.returned);
    s->large_live = load_size(&cm_counters.large_live);
    s->large_cached = load_size(&cm_counters.large_cached);
    s->superblocks_live = load_size(&cm_counters.superblocks_live);
    s->os_calls = load_size(&cm_counters.os_calls);
}

void cm_stats_print(int fd) { cm_stats_report(fd); }

__attribute__((destructor)) static void report_at_exit(void) {
    if (CM_OPTION(show_stats)) cm_stats_report(2);
}

/* ------------------------------------------------------------ glibc's interfaces */

/* glibc's mallinfo2 fields, from our counters: arena = small-block address
 * space, hblks/hblkhd = large blocks, uordblks = bytes in blocks in use
 * (counted from the descriptors, see above). */
struct mallinfo2 cm_stats_mallinfo2(void) {
    struct mallinfo2 m = {0};
    uint64_t live[CM_NUM_CLASSES + 1];
    blocks_in_use(live);
    size_t small_used = 0;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) small_used += (size_t)live[c] * cm_class_info[c].block_size;
    size_t large = load_size(&cm_counters.large_live), cached = load_size(&cm_counters.large_cached);
    size_t mapped = load_size(&cm_counters.mapped), committed = load_size(&cm_counters.committed);
    m.arena = mapped > large + cached ? mapped - large - cached : 0;
    m.hblks = load_size(&cm_counters.large_count);
    m.hblkhd = large;
    m.uordblks = small_used + large;
    m.fordblks = committed > m.uordblks ? committed - m.uordblks : 0;
    m.keepcost = cached;
    return m;
}

/* The old mallinfo has int fields; values that do not fit saturate at
 * INT_MAX rather than wrap (as glibc's do). */
static int saturate(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

struct mallinfo cm_stats_mallinfo(void) {
    struct mallinfo2 m2 = cm_stats_mallinfo2();
    struct mallinfo m = {0};
    m.arena = saturate(m2.arena);
    m.hblks = saturate(m2.hblks);
    m.hblkhd = saturate(m2.hblkhd);
    m.uordblks = saturate(m2.uordblks);
    m.fordblks = saturate(m2.fordblks);
    m.keepcost = saturate(m2.keepcost);
    return m;
}

static void put_attr(out_t *o, const char *name, uint64_t v) {
    put(o, " ");
    put(o, name);
    put(o, "=\"");
    put_num(o, v, 0);
    put(o, "\"");
}

/* The totals glibc writes after a heap's sizes and again for the process
 * (then with the mmap'ed blocks: mmap = {count, bytes}). */
static void put_totals(out_t *o, uint64_t count, uint64_t bytes, const uint64_t *mmap) {
    size_t mapped = load_size(&cm_counters.mapped), committed = load_size(&cm_counters.committed);
    put(o, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n<total type=\"rest\"");
    put_attr(o, "count", count);
    put_attr(o, "size", bytes);
    if (mmap) {
        put(o, "/>\n<total type=\"mmap\"");
        put_attr(o, "count", mmap[0]);
        put_attr(o, "size", mmap[1]);
    }
    put(o, "/>\n<system type=\"current\"");
    put_attr(o, "size", committed);
    put(o, "/>\n<system type=\"max\"");
    put_attr(o, "size", mapped);
    put(o, "/>\n<aspace type=\"total\"");
    put_attr(o, "size", mapped);
    put(o, "/>\n<aspace type=\"mprotect\"");
    put_attr(o, "size", mapped);
    put(o, "/>\n");
}

/* glibc's XML layout, one <heap> for the whole process: <sizes> lists each
 * size class with blocks in use (glibc lists free chunks, which here sit in
 * heaps' lists and superblocks), then totals as glibc names them. */
int cm_stats_malloc_info(int options, FILE *fp) {
    if (options != 0 || fp == NULL) {
        errno = EINVAL;
        return -1;
    }
    uint64_t in_use[CM_NUM_CLASSES + 1];
    blocks_in_use(in_use);
    out_t o = {.fp = fp};
    put(&o, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
    uint64_t prev = 0, small_count = 0, small_bytes = 0;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        uint64_t size = cm_class_info[c].block_size, live = in_use[c];
        if (live) {
            put(&o, "<size");
            put_attr(&o, "from", prev + 1);
            put_attr(&o, "to", size);
            put_attr(&o, "total", live * size);
            put_attr(&o, "count", live);
            put(&o, "/>\n");
        }
        small_count += live, small_bytes += live * size, prev = size;
    }
    size_t large = load_size(&cm_counters.large_live), large_n = load_size(&cm_counters.large_count);
    put(&o, "</sizes>\n");
    put_totals(&o, small_count, small_bytes, NULL);
    put(&o, "</heap>\n");
    put_totals(&o, small_count, small_bytes, (uint64_t[]){large_n, large});
    put(&o, "</malloc>\n");
    flush_out(&o);
    return 0;
}

/* ------------------------------------------------------------ CAGEMALLOC_VERBOSE */

static void put_line(out_t *o, const char *label, uint64_t v, const char *unit) {
    put(o, "cagemalloc: ");
    put(o, label);
    put_num(o, v, 0);
    put(o, unit);
    put(o, "\n");
}

/* What init decided, on stderr, once per process. */
void cm_stats_verbose_init(const char *secret_source, const char *clock_source) {
    out_t o = {.fd = 2};
    put(&o, "cagemalloc: version ");
    put_num(&o, CAGEMALLOC_VERSION_MAJOR, 0);
    put(&o, ".");
    put_num(&o, CAGEMALLOC_VERSION_MINOR, 0);
    put(&o, cm_harden ? ", hardening on (free-list secret from " : ", hardening off (built without it; secret from ");
    put(&o, secret_source);
    put(&o, ")\ncagemalloc: clock: ");
    put(&o, clock_source);
    put(&o, "\n");
    put_line(&o, "empty superblocks kept up to ", CM_OPTION(empty_keep) >> 10, " KiB (CAGEMALLOC_EMPTY_KEEP)");
    put_line(&o, "large mappings cached up to ", CM_OPTION(large_cache) >> 10, " KiB (CAGEMALLOC_LARGE_CACHE)");
    put_line(&o, "kept memory returned after ", CM_OPTION(decay_ns) / 1000000, " ms idle (CAGEMALLOC_DECAY_MS)");
    put_line(&o, "arena reserved: ", (atomic_load_explicit(&cm_arena_range.units, memory_order_relaxed) << CM_UNIT_SHIFT) >> 20,
             " MiB (CAGEMALLOC_ARENA_RESERVE; superblocks beyond it come from 32 MiB reservations,"
             " 4 MiB ones under an address-space limit below 1 GiB)");
    put_line(&o, "descriptors: ", cm_desc_capacity(), " (one per superblock or large block; at the cap malloc fails with ENOMEM)");
    put_line(&o, "small blocks limit at the descriptor cap: ", ((uint64_t)cm_desc_capacity() << CM_UNIT_SHIFT) >> 20,
             " MiB of 64 KiB superblocks");
    put_line(&o, "size classes: ", CM_NUM_CLASSES, " up to 128 KiB; larger blocks are their own mappings");
    flush_out(&o);
}
