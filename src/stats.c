/* stats.c: the counters, the report printed by malloc_stats() and at exit
 * with CAGEMALLOC_SHOW_STATS=1, and the cm_stats_get snapshot.
 *
 * The report is formatted by hand into a stack buffer and written with a raw
 * system call: no stdio (which allocates), so it is safe at exit and from
 * inside the allocator. Per-class counts of other threads still running are
 * included up to their last cache refill or flush. */
#include "api.h"

cm_counters_t cm_counters;

typedef struct out {
    int fd;
    size_t len;
    char buf[4096];
} out_t;

static void flush_out(out_t *o) {
    cm_os_write(o->fd, o->buf, o->len);
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

static uint64_t load(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }
static size_t load_size(_Atomic size_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

void cm_stats_report(int fd) {
    cm_stats_publish_thread();
    out_t o = {.fd = fd};
    put(&o, "cagemalloc statistics\n  class     block     allocated         freed   superblocks\n");
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        uint64_t a = load(&cm_counters.allocs[c]), f = load(&cm_counters.frees[c]);
        int64_t sb = atomic_load_explicit(&cm_counters.sb_live[c], memory_order_relaxed);
        if (a == 0 && f == 0 && sb == 0) continue;
        put_num(&o, c, 7);
        put_num(&o, cm_class_info[c].block_size, 10);
        put_num(&o, a, 14);
        put_num(&o, f, 14);
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
    if (cm_options.show_stats) cm_stats_report(2);
}

/* glibc's mallinfo2 fields, from our counters: arena = small-block address
 * space, hblks/hblkhd = large blocks, uordblks = bytes in blocks in use
 * (class counts of other running threads lag, see above). */
struct mallinfo2 cm_stats_mallinfo2(void) {
    cm_stats_publish_thread();
    struct mallinfo2 m = {0};
    size_t small_used = 0;
    for (unsigned c = 1; c <= CM_NUM_CLASSES; c++) {
        uint64_t a = load(&cm_counters.allocs[c]), f = load(&cm_counters.frees[c]);
        if (a > f) small_used += (size_t)(a - f) * cm_class_info[c].block_size;
    }
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
