/* code.c: the code space: executable memory from which a `call rel32` or
 * `jmp rel32` reaches a module's text (seed 003: PHP's JIT turned indirect
 * calls into direct ones by placing its buffer within +-2 GiB of the
 * functions it calls).
 *
 * A code range is a memfd mapped twice: an executable view (read + execute)
 * placed, with MAP_FIXED_NOREPLACE, in a hole of the address space from
 * which every byte reaches all of a module's text, and a writable view
 * (read + write) anywhere. No page is ever writable and executable in one
 * mapping (W^X); cm_code_write copies through the writable view, so threads
 * running other code of the range are never disturbed. Ranges are made on
 * demand near each module a caller names (found in /proc/self/maps, read
 * with raw system calls: dl_iterate_phdr would take the loader's lock) and
 * kept in a table whose slots are claimed by CAS: a slot being built is
 * skipped by everyone else, so a thread frozen while building stops no one.
 * Blocks are runs of 64-byte granules in a lock-free bitmap (runs.c), with
 * bitmaps of where blocks start and end (for cm_code_free); a freed block is
 * filled with int3 so a stale call traps. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define GRANULE_SHIFT 6
#define GRANULE ((size_t)1 << GRANULE_SHIFT)
#define MAX_RANGES 256
#define REACH ((uintptr_t)1 << 31)
#define MARGIN ((uintptr_t)1 << 16) /* kept from the edge of rel32's reach */
#define RANGE_ALIGN ((size_t)2 << 20)
#define MAX_BLOCK ((size_t)1 << 30)
#define ATTEMPTS 8                  /* placements tried before giving up (another thread mapped there first) */

enum { SLOT_EMPTY, SLOT_BUILDING, SLOT_READY };

typedef struct code_range {
    char *exec;                   /* executable view */
    char *write;                  /* writable view of the same pages */
    size_t size;
    uint32_t words;               /* bitmap words (64 granules each) */
    _Atomic uint64_t *free_map;   /* free granules */
    _Atomic uint64_t *starts;     /* a block starts at this granule */
    _Atomic uint64_t *ends;       /* a block ends at this granule */
    cm_runs_t free;
    cm_reservation_t exec_open, write_open; /* how much of each view is open (reservation.c) */
} code_range_t;

CM_LARGE_ZEROED static code_range_t ranges[MAX_RANGES];
CM_LARGE_ZEROED static _Atomic int slot_state[MAX_RANGES];
static _Atomic uint32_t slots_used; /* slots ever claimed: a search looks at these */

/* Modules found so far, so that only a `near` outside all of them costs a
 * read of /proc/self/maps. An entry's lo is stored last (release) and is 0
 * while the entry is being written. Entries are never dropped: a library
 * unloaded and another loaded at the same place keeps the old text (code
 * placed for it is then placed for the old extent). */
#define MAX_MODULES 64
CM_LARGE_ZEROED static struct {
    _Atomic uintptr_t lo, hi, text_lo, text_hi;
} modules[MAX_MODULES];
static _Atomic uint32_t modules_known;

/* ------------------------------------------------------------ reach */

int cm_rel32_reachable(const void *next_insn, const void *target) {
    /* the difference as a signed 64-bit value (exact for user addresses),
     * then its range: no XOR-and-shift shortcut, which is wrong whenever the
     * two addresses straddle a 2^31 boundary */
    intptr_t d = (intptr_t)((uintptr_t)target - (uintptr_t)next_insn);
    return d >= INT32_MIN && d <= INT32_MAX;
}

/* True if every byte of [lo, hi) reaches every byte of [text_lo, text_hi). */
static bool reaches(uintptr_t lo, uintptr_t hi, uintptr_t text_lo, uintptr_t text_hi) {
    return lo + REACH >= text_hi + MARGIN && hi + MARGIN <= text_lo + REACH;
}

/* ------------------------------------------------------------ /proc/self/maps */

typedef struct maps_line {
    uintptr_t lo, hi;
    bool exec;
    bool anonymous;  /* inode 0: no file behind it */
    const char *id;  /* "dev inode" of the mapped file */
    size_t id_len;
} maps_line_t;

static uintptr_t hex(const char **p) {
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
        if (d == 16) return v;
        v = v << 4 | d;
    }
}

static const char *field_end(const char *s) {
    while (*s && *s != ' ' && *s != '\n') s++;
    return s;
}
static const char *next_field(const char *s) {
    s = field_end(s);
    while (*s == ' ') s++;
    return s;
}

/* Parse the line at *p ("lo-hi perms offset dev inode path"), moving *p to
 * the next; false at the end. */
static bool next_line(const char **p, maps_line_t *m) {
    const char *s = *p;
    if (!*s) return false;
    m->lo = hex(&s);
    s++;
    m->hi = hex(&s);
    s++;
    m->exec = s[0] && s[1] && s[2] == 'x';
    s = next_field(next_field(s)); /* past perms and offset, at dev */
    m->id = s;
    const char *inode = next_field(s);
    s = field_end(inode);
    m->id_len = (size_t)(s - m->id);
    m->anonymous = s - inode == 1 && *inode == '0';
    while (*s && *s != '\n') s++;
    *p = *s ? s + 1 : s;
    return true;
}

/* The module mapped at `at`: the span of all its file's mappings, and its
 * text, the span of the executable ones (or, if anonymous, `at`'s own
 * mapping for both). */
typedef struct module {
    uintptr_t lo, hi;           /* everything mapped from its file */
    uintptr_t text_lo, text_hi; /* its executable part */
} module_t;

static bool find_module(const char *maps, uintptr_t at, module_t *mod) {
    maps_line_t m, owner = {0};
    bool found = false;
    for (const char *p = maps; next_line(&p, &m);)
        if (at >= m.lo && at < m.hi) owner = m, found = true;
    if (!found) return false;
    *mod = (module_t){UINTPTR_MAX, 0, UINTPTR_MAX, 0};
    for (const char *p = maps; next_line(&p, &m);) {
        bool same = owner.anonymous ? m.lo == owner.lo
                                    : m.id_len == owner.id_len && memcmp(m.id, owner.id, m.id_len) == 0;
        if (!same) continue;
        if (m.lo < mod->lo) mod->lo = m.lo;
        if (m.hi > mod->hi) mod->hi = m.hi;
        if (m.exec || owner.anonymous) {
            if (m.lo < mod->text_lo) mod->text_lo = m.lo;
            if (m.hi > mod->text_hi) mod->text_hi = m.hi;
        }
    }
    if (mod->text_hi == 0) mod->text_lo = owner.lo, mod->text_hi = owner.hi; /* a module with no text */
    return true;
}

/* The free hole nearest the text where `size` bytes fit within reach of
 * all of [text_lo, text_hi); 0 if none. */
static uintptr_t place_near(const char *maps, size_t size, uintptr_t text_lo, uintptr_t text_hi) {
    uintptr_t window_lo = text_hi > REACH - MARGIN ? text_hi - (REACH - MARGIN) : CM_PAGE_SIZE * 16;
    uintptr_t window_hi = text_lo + (REACH - MARGIN);
    uintptr_t best = 0, best_distance = UINTPTR_MAX, prev_hi = CM_PAGE_SIZE * 16;
    maps_line_t m;
    const char *p = maps;
    for (bool more = true; more;) {
        more = next_line(&p, &m);
        uintptr_t hole_lo = prev_hi, hole_hi = more ? m.lo : ((uintptr_t)1 << CM_ADDRESS_BITS) - CM_PAGE_SIZE;
        if (more) prev_hi = m.hi > prev_hi ? m.hi : prev_hi;
        if (hole_lo < window_lo) hole_lo = window_lo;
        if (hole_hi > window_hi) hole_hi = window_hi;
        hole_lo = (hole_lo + RANGE_ALIGN - 1) & ~(RANGE_ALIGN - 1);
        if (hole_hi < hole_lo + size) continue;
        /* as close to the text as the hole allows */
        uintptr_t at = hole_hi <= text_lo ? (hole_hi - size) & ~(RANGE_ALIGN - 1) : hole_lo;
        uintptr_t distance = at < text_lo ? text_lo - at : at - text_lo;
        if (at >= hole_lo && at + size <= hole_hi && distance < best_distance) best = at, best_distance = distance;
    }
    return best;
}

/* ------------------------------------------------------------ ranges */

static _Atomic uint64_t *free_word(void *ctx, uint32_t w) { return &((code_range_t *)ctx)->free_map[w]; }

/* Open the first step of a new range's executable view; returns how much of
 * it is open (0: none, and the range cannot be used). A process that
 * refuses to make executable a mapping that was not (the kernel's
 * PR_SET_MDWE, systemd's MemoryDenyWriteExecute) still lets a mapping be
 * made executable: there the view is mapped again, executable and whole,
 * and stays out of core dumps (the writable view carries its bytes). */
static size_t open_exec_view(char *exec, size_t size, int fd) {
    size_t first = CM_OPEN_STEP < size ? CM_OPEN_STEP : size;
    if (cm_os_open(exec, first, PROT_READ | PROT_EXEC, true)) return first;
    return cm_os_map_file_over(exec, size, PROT_READ | PROT_EXEC, fd) ? size : 0;
}

/* Map a range of `size` bytes reaching [text_lo, text_hi) and set up r. */
static bool build_range(code_range_t *r, size_t size, uintptr_t text_lo, uintptr_t text_hi) {
    uint32_t granules = (uint32_t)(size >> GRANULE_SHIFT), words = (granules + 63) / 64;
    size_t bitmap_bytes = 3 * (size_t)words * sizeof(uint64_t);
    _Atomic uint64_t *bits = cm_os_reserve(bitmap_bytes);
    int fd = bits ? cm_os_memfd(size) : -1;
    /* both views closed, opened as blocks are handed out (take_block) */
    char *exec = NULL, *write = fd >= 0 ? cm_os_map_file(NULL, size, PROT_NONE, fd) : NULL;
    for (int attempt = 0; write && !exec && attempt < ATTEMPTS; attempt++) {
        size_t len, cap;
        char *maps = cm_os_read_file("/proc/self/maps", &len, &cap);
        if (!maps) break;
        uintptr_t at = place_near(maps, size, text_lo, text_hi);
        cm_os_unmap(maps, cap);
        if (!at) break;
        exec = cm_os_map_file((void *)at, size, PROT_NONE, fd);
    }
    size_t exec_opened = exec ? open_exec_view(exec, size, fd) : 0;
    if (fd >= 0) cm_os_close(fd); /* the mappings keep the file */
    if (!exec_opened) {
        if (exec) cm_os_unmap(exec, size);
        if (write) cm_os_unmap(write, size);
        if (bits) cm_os_unreserve(bits, bitmap_bytes);
        return false;
    }
    r->exec = exec, r->write = write, r->size = size, r->words = words;
    r->exec_open = (cm_reservation_t){.prot = PROT_READ | PROT_EXEC, .step = CM_OPEN_STEP, .file_view = true};
    r->write_open = (cm_reservation_t){.prot = PROT_READ | PROT_WRITE, .step = CM_OPEN_STEP, .file_view = true};
    cm_reservation_opened(&r->exec_open, (uintptr_t)exec + exec_opened);
    r->free_map = bits, r->starts = bits + words, r->ends = bits + 2 * (size_t)words;
    r->free = (cm_runs_t){.word = free_word, .ctx = r};
    cm_runs_free(&r->free, 0, granules);
    atomic_store_explicit(&r->free.lowest, 0, memory_order_relaxed);
    return true;
}

/* A new range reaching the text, in a free slot; NULL if none can be made. */
static code_range_t *new_range(size_t size, uintptr_t text_lo, uintptr_t text_hi) {
    for (uint32_t i = 0; i < MAX_RANGES; i++) {
        int empty = SLOT_EMPTY;
        if (!atomic_compare_exchange_strong_explicit(&slot_state[i], &empty, SLOT_BUILDING, memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        uint32_t used = atomic_load_explicit(&slots_used, memory_order_relaxed);
        while (used < i + 1 && !atomic_compare_exchange_weak_explicit(&slots_used, &used, i + 1, memory_order_relaxed,
                                                                      memory_order_relaxed)) {
        }
        if (!build_range(&ranges[i], size, text_lo, text_hi)) {
            atomic_store_explicit(&slot_state[i], SLOT_EMPTY, memory_order_release);
            return NULL;
        }
        /* release: a reader that sees READY sees the range's fields */
        atomic_store_explicit(&slot_state[i], SLOT_READY, memory_order_release);
        return &ranges[i];
    }
    return NULL;
}

static code_range_t *ready_range(uint32_t i) {
    return atomic_load_explicit(&slot_state[i], memory_order_acquire) == SLOT_READY ? &ranges[i] : NULL;
}

/* The range holding exec address p (and the next n - 1 bytes), or NULL. */
static code_range_t *range_of(const void *p, size_t n) {
    uint32_t used = atomic_load_explicit(&slots_used, memory_order_relaxed);
    for (uint32_t i = 0; i < used; i++) {
        code_range_t *r = ready_range(i);
        if (r && (const char *)p >= r->exec && n <= r->size && (size_t)((const char *)p - r->exec) <= r->size - n)
            return r;
    }
    return NULL;
}

/* ------------------------------------------------------------ blocks */

static void set_bit(_Atomic uint64_t *map, uint32_t g) {
    atomic_fetch_or_explicit(&map[g / 64], (uint64_t)1 << (g % 64), memory_order_release);
}

static void *take_block(code_range_t *r, uint32_t granules) {
    uint32_t found = cm_runs_claim(&r->free, r->words, granules, 1);
    if (!found) return NULL;
    uint32_t g = found - 1;
    size_t end = (size_t)(g + granules) << GRANULE_SHIFT;
    uintptr_t exec = (uintptr_t)r->exec, write = (uintptr_t)r->write;
    if (!cm_reservation_open(&r->exec_open, exec, exec + end, exec + r->size) ||
        !cm_reservation_open(&r->write_open, write, write + end, write + r->size)) {
        cm_runs_free(&r->free, g, granules);
        return NULL;
    }
    set_bit(r->ends, g + granules - 1);
    set_bit(r->starts, g);
    return r->exec + ((size_t)g << GRANULE_SHIFT);
}

static bool cached_module(uintptr_t at, uintptr_t *text_lo, uintptr_t *text_hi) {
    uint32_t n = atomic_load_explicit(&modules_known, memory_order_acquire);
    for (uint32_t i = 0; i < n && i < MAX_MODULES; i++) {
        uintptr_t lo = atomic_load_explicit(&modules[i].lo, memory_order_acquire);
        if (!lo || at < lo || at >= atomic_load_explicit(&modules[i].hi, memory_order_relaxed)) continue;
        *text_lo = atomic_load_explicit(&modules[i].text_lo, memory_order_relaxed);
        *text_hi = atomic_load_explicit(&modules[i].text_hi, memory_order_relaxed);
        return true;
    }
    return false;
}

static void cache_module(const module_t *mod) {
    uint32_t i = atomic_fetch_add_explicit(&modules_known, 1, memory_order_relaxed);
    if (i >= MAX_MODULES) return;
    atomic_store_explicit(&modules[i].hi, mod->hi, memory_order_relaxed);
    atomic_store_explicit(&modules[i].text_lo, mod->text_lo, memory_order_relaxed);
    atomic_store_explicit(&modules[i].text_hi, mod->text_hi, memory_order_relaxed);
    atomic_store_explicit(&modules[i].lo, mod->lo, memory_order_release);
}

/* The text of the module holding `at`: from the cache, else from the maps.
 * Sets errno and returns false if at lies in no mapping (EINVAL) or the
 * maps cannot be read (ENOMEM). */
static bool text_of(uintptr_t at, uintptr_t *text_lo, uintptr_t *text_hi) {
    if (cached_module(at, text_lo, text_hi)) return true;
    size_t len, cap;
    char *maps = cm_os_read_file("/proc/self/maps", &len, &cap);
    if (!maps) {
        errno = ENOMEM;
        return false;
    }
    module_t mod;
    bool found = find_module(maps, at, &mod);
    cm_os_unmap(maps, cap);
    if (!found) {
        errno = EINVAL;
        return false;
    }
    cache_module(&mod);
    *text_lo = mod.text_lo, *text_hi = mod.text_hi;
    return true;
}

void *cm_code_alloc(size_t size, const void *near) {
    cm_ensure_init();
    if (size == 0) size = 1;
    uintptr_t text_lo, text_hi;
    if (size > MAX_BLOCK) {
        errno = ENOMEM;
        return NULL;
    }
    if (!text_of(near ? (uintptr_t)near : cm_os_main_program(), &text_lo, &text_hi)) return NULL;
    uint32_t granules = (uint32_t)((size + GRANULE - 1) >> GRANULE_SHIFT);
    uint32_t used = atomic_load_explicit(&slots_used, memory_order_relaxed);
    for (uint32_t i = 0; i < used; i++) {
        code_range_t *r = ready_range(i);
        if (!r || !reaches((uintptr_t)r->exec, (uintptr_t)r->exec + r->size, text_lo, text_hi)) continue;
        void *p = take_block(r, granules);
        if (p) return p;
    }
    size_t range = CM_OPTION(code_range);
    if (range < (size_t)granules << GRANULE_SHIFT) range = ((size_t)granules << GRANULE_SHIFT);
    range = (range + RANGE_ALIGN - 1) & ~(RANGE_ALIGN - 1);
    code_range_t *r = new_range(range, text_lo, text_hi);
    void *p = r ? take_block(r, granules) : NULL;
    if (!p) errno = ENOMEM; /* no free address space within reach (never a far block) */
    return p;
}

void cm_code_free(void *p) {
    if (!p) return;
    code_range_t *r = range_of(p, 1);
    uintptr_t off = r ? (uintptr_t)((char *)p - r->exec) : 1;
    if (!r || (off & (GRANULE - 1))) cm_fatal("cm_code_free", "invalid pointer", p);
    uint32_t g = (uint32_t)(off >> GRANULE_SHIFT);
    uint64_t bit = (uint64_t)1 << (g % 64);
    /* acquire: pairs with take_block's release of the bits */
    if (!(atomic_fetch_and_explicit(&r->starts[g / 64], ~bit, memory_order_acquire) & bit))
        cm_fatal("cm_code_free", "invalid pointer", p); /* not a block, or freed already */
    uint32_t last = g;
    for (uint64_t w;; last = (last | 63) + 1)
        if ((w = atomic_load_explicit(&r->ends[last / 64], memory_order_acquire) & (~(uint64_t)0 << (last % 64)))) {
            last = (last & ~63u) + (uint32_t)__builtin_ctzll(w);
            break;
        }
    atomic_fetch_and_explicit(&r->ends[last / 64], ~((uint64_t)1 << (last % 64)), memory_order_relaxed);
    size_t bytes = (size_t)(last - g + 1) << GRANULE_SHIFT;
    memset(r->write + off, 0xcc, bytes); /* int3: a stale call traps instead of running old code */
    cm_runs_free(&r->free, g, last - g + 1);
}

int cm_code_write(void *dst, const void *src, size_t n) {
    code_range_t *r = n ? range_of(dst, n) : range_of(dst, 1);
    if (!r) return EINVAL;
    memcpy(r->write + ((char *)dst - r->exec), src, n);
    /* the executing view sees the bytes (same pages); make the instruction
     * stream coherent: nothing to do on x86-64, a cache flush elsewhere */
    __builtin___clear_cache((char *)dst, (char *)dst + n);
    return 0;
}
