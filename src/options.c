/* options.c: the CAGEMALLOC_* environment variables, read once at init.
 * Read with secure_getenv: in a set-user-ID or otherwise privileged process
 * (AT_SECURE) they are ignored, so no caller can change how such a process
 * allocates. Hardening is not among them: it is a build option. */
#define _GNU_SOURCE /* secure_getenv */
#include <stdlib.h>

#include "internal.h"

#define DEFAULT_OPTIONS                                                                            \
    {.show_stats = false, .verbose = false, .empty_keep = 64u << 20, .large_cache = 128u << 20,                             \
     .decay_ns = 1000ull * 1000000ull, .klass_shift = 0, .klass_range = 0, .klass_gaps = true, .code_range = 64u << 20, .cage_limit = 0,      \
     .arena_reserve = (size_t)1 << CM_ARENA_MAX_SHIFT}

cm_options_t cm_options = DEFAULT_OPTIONS;

/* A setting that is set but unusable (not a number, an unknown suffix, too
 * large) keeps its default and is reported once, by the first racer through
 * init (`report`): every racer parses the same environment. */
static _Atomic bool ignored_reported;

static size_t unusable(const char *name, const char *value, const char *why, bool report, size_t fallback) {
    if (report) cm_report_ignored(name, value, why);
    return fallback;
}

/* A decimal number with an optional k/m/g suffix, at most max; `fallback`
 * if unset or unusable. */
static size_t env_size(const char *name, size_t fallback, size_t max, bool report) {
    const char *s = secure_getenv(name), *p = s;
    if (!s) return fallback;
    if (*p < '0' || *p > '9') return unusable(name, s, "not a number", report, fallback);
    size_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        size_t digit = (size_t)(*p - '0');
        if (v > (SIZE_MAX - digit) / 10) return unusable(name, s, "too large", report, fallback);
        v = v * 10 + digit;
    }
    unsigned shift;
    switch (*p) {
    case '\0': shift = 0; break;
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: return unusable(name, s, "a number may end in k, m or g only", report, fallback);
    }
    if (shift && p[1] != '\0') return unusable(name, s, "a number may end in k, m or g only", report, fallback);
    if (v > max >> shift) return unusable(name, s, "too large", report, fallback);
    return v << shift;
}

/* A number within [lo, hi], 0 (the default) if unset or unusable. */
static unsigned env_bounded(const char *name, unsigned lo, unsigned hi, bool report) {
    size_t v = env_size(name, 0, hi, report);
    return v == 0 || v >= lo ? (unsigned)v : (unsigned)unusable(name, secure_getenv(name), "too small", report, 0);
}

static bool env_flag(const char *name, bool fallback) {
    const char *s = secure_getenv(name);
    if (!s || !*s) return fallback;
    return !(s[0] == '0' || s[0] == 'n' || s[0] == 'N' || s[0] == 'f' || s[0] == 'F');
}

/* Change a setting from its default to v, once: every thread racing through
 * init computes the same v, the first one's CAS writes it and the others'
 * CAS fails and writes nothing. So no store ever races with the reads of
 * the settings elsewhere (CM_OPTION: plain, but atomic under
 * ThreadSanitizer, which counts a failed CAS as a write), and the acquire
 * of a failed CAS (or of cm_initialized) orders those reads after the one
 * write. */
#define SET_ONCE(var, dflt, v)                                                                              \
    do {                                                                                                    \
        __typeof__(var) expected_ = (dflt), value_ = (v);                                                   \
        if (value_ != expected_)                                                                            \
            __atomic_compare_exchange_n(&(var), &expected_, value_, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE); \
    } while (0)

void cm_options_load(void) {
    const cm_options_t d = DEFAULT_OPTIONS;
    cm_options_t o = d;
    /* relaxed: only decides which racer prints; nothing is published by it */
    bool report = !atomic_exchange_explicit(&ignored_reported, true, memory_order_relaxed);
    o.show_stats = env_flag("CAGEMALLOC_SHOW_STATS", false);
    o.verbose = env_flag("CAGEMALLOC_VERBOSE", false);
    o.empty_keep = env_size("CAGEMALLOC_EMPTY_KEEP", o.empty_keep, SIZE_MAX, report);
    o.large_cache = env_size("CAGEMALLOC_LARGE_CACHE", o.large_cache, SIZE_MAX, report);
    o.decay_ns = (uint64_t)env_size("CAGEMALLOC_DECAY_MS", o.decay_ns / 1000000, UINT64_MAX / 1000000, report) * 1000000ull;
    o.klass_shift = env_bounded("CAGEMALLOC_KLASS_SHIFT", CM_KLASS_SHIFT_MIN, CM_KLASS_SHIFT_MAX, report);
    o.klass_range = env_bounded("CAGEMALLOC_KLASS_RANGE", CM_KLASS_RANGE_MIN, CM_KLASS_RANGE_MAX, report);
    o.klass_gaps = env_flag("CAGEMALLOC_KLASS_GAPS", true);
    o.code_range = env_size("CAGEMALLOC_CODE_RANGE", o.code_range, SIZE_MAX, report);
    o.cage_limit = env_size("CAGEMALLOC_CAGE_LIMIT", 0, SIZE_MAX, report);
    o.arena_reserve = env_size("CAGEMALLOC_ARENA_RESERVE", o.arena_reserve, SIZE_MAX, report);
    SET_ONCE(cm_options.show_stats, d.show_stats, o.show_stats);
    SET_ONCE(cm_options.verbose, d.verbose, o.verbose);
    SET_ONCE(cm_options.empty_keep, d.empty_keep, o.empty_keep);
    SET_ONCE(cm_options.large_cache, d.large_cache, o.large_cache);
    SET_ONCE(cm_options.decay_ns, d.decay_ns, o.decay_ns);
    SET_ONCE(cm_options.klass_shift, d.klass_shift, o.klass_shift);
    SET_ONCE(cm_options.klass_range, d.klass_range, o.klass_range);
    SET_ONCE(cm_options.klass_gaps, d.klass_gaps, o.klass_gaps);
    SET_ONCE(cm_options.code_range, d.code_range, o.code_range);
    SET_ONCE(cm_options.cage_limit, d.cage_limit, o.cage_limit);
    SET_ONCE(cm_options.arena_reserve, d.arena_reserve, o.arena_reserve);
}
