/* options.c: the CAGEMALLOC_* environment variables, read once at init. */
#include <stdlib.h>

#include "internal.h"

#define DEFAULT_OPTIONS                                                                            \
    {.show_stats = false, .harden = true, .empty_keep = 64u << 20, .large_cache = 64u << 20,             \
     .decay_ns = 1000ull * 1000000ull}

cm_options_t cm_options = DEFAULT_OPTIONS;

/* A decimal number with an optional k/m/g suffix; `fallback` if unset or bad. */
static size_t env_size(const char *name, size_t fallback) {
    const char *s = getenv(name);
    if (!s || *s < '0' || *s > '9') return fallback;
    size_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + (size_t)(*s - '0');
    switch (*s) {
    case 'k': case 'K': return v << 10;
    case 'm': case 'M': return v << 20;
    case 'g': case 'G': return v << 30;
    case '\0': return v;
    default: return fallback;
    }
}

static bool env_flag(const char *name, bool fallback) {
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    return !(s[0] == '0' || s[0] == 'n' || s[0] == 'N' || s[0] == 'f' || s[0] == 'F');
}

/* Called by every thread that races through init; all compute the same
 * values, so the duplicate (atomic, relaxed) stores are harmless. */
void cm_options_load(void) {
    cm_options_t o = DEFAULT_OPTIONS;
    o.show_stats = env_flag("CAGEMALLOC_SHOW_STATS", false);
    o.harden = env_flag("CAGEMALLOC_HARDEN", true);
    o.empty_keep = env_size("CAGEMALLOC_EMPTY_KEEP", o.empty_keep);
    o.large_cache = env_size("CAGEMALLOC_LARGE_CACHE", o.large_cache);
    o.decay_ns = (uint64_t)env_size("CAGEMALLOC_DECAY_MS", o.decay_ns / 1000000) * 1000000ull;
    __atomic_store_n(&cm_options.show_stats, o.show_stats, __ATOMIC_RELAXED);
    __atomic_store_n(&cm_options.harden, o.harden, __ATOMIC_RELAXED);
    __atomic_store_n(&cm_options.empty_keep, o.empty_keep, __ATOMIC_RELAXED);
    __atomic_store_n(&cm_options.large_cache, o.large_cache, __ATOMIC_RELAXED);
    __atomic_store_n(&cm_options.decay_ns, o.decay_ns, __ATOMIC_RELAXED);
}
