/* runs.c: runs of free bits in a lock-free bitmap: the first fit of n bits
 * (runs may cross words), claimed with one CAS per word and undone if a
 * word was taken meanwhile, freed with one fetch_or per word. A hint keeps
 * searches from rescanning the full words at the bottom. Used by the class
 * space (slots), the code space (granules of code) and the cage (64 KiB
 * units, runs aligned to their size for superblocks); the bitmap's words
 * are reached through the owner's accessor, as they may live in leaves
 * mapped on demand. Nothing waits: a failed CAS means another thread took
 * bits, and the search goes on. */
#include "internal.h"

static uint64_t load_word(const cm_runs_t *r, uint32_t w) {
    _Atomic uint64_t *word = r->word(r->ctx, w);
    return word ? atomic_load_explicit(word, memory_order_relaxed) : 0;
}

/* release: the next claimer of these bits sees what was written in what
 * they stand for. The hint comes down to the lowest word freed. */
void cm_runs_free(cm_runs_t *r, uint32_t first, uint32_t n) {
    for (uint32_t b = first; b < first + n;) {
        unsigned at = b & 63, len = first + n - b < 64 - at ? first + n - b : 64 - at;
        atomic_fetch_or_explicit(r->word(r->ctx, b / 64), cm_bits_mask(len, at), memory_order_release);
        b += len;
    }
    uint32_t hint = atomic_load_explicit(&r->lowest, memory_order_relaxed);
    while (first / 64 < hint && !atomic_compare_exchange_weak_explicit(&r->lowest, &hint, first / 64,
                                                                       memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Take bits [start, start + n), or give back what was taken and fail. */
bool cm_runs_claim_at(cm_runs_t *r, uint32_t start, uint32_t n) {
    for (uint32_t b = start; b < start + n;) {
        unsigned at = b & 63, len = start + n - b < 64 - at ? start + n - b : 64 - at;
        _Atomic uint64_t *word = r->word(r->ctx, b / 64);
        uint64_t mask = cm_bits_mask(len, at), x = atomic_load_explicit(word, memory_order_acquire);
        /* acquire: the freer's release; the caller writes into what the bits stand for */
        while ((x & mask) == mask &&
               !atomic_compare_exchange_weak_explicit(word, &x, x & ~mask, memory_order_acquire, memory_order_acquire)) {
        }
        if ((x & mask) != mask) {
            if (b > start) cm_runs_free(r, start, b - start);
            return false;
        }
        b += len;
    }
    return true;
}

/* The lowest run of n set bits in words [from, words); its first bit + 1,
 * or 0. *first_seen: the first word with a set bit. */
static uint32_t find_run(const cm_runs_t *r, uint32_t from, uint32_t words, uint32_t n, uint32_t align,
                         uint32_t *first_seen) {
    uint32_t run_start = 0, run_len = 0; /* the run reaching the top of the previous word */
    for (uint32_t w = from; w < words; w++) {
        uint64_t x = load_word(r, w);
        if (x && *first_seen == UINT32_MAX) *first_seen = w;
        if (x == ~(uint64_t)0) {
            if (!run_len) run_start = w * 64;
            if ((run_len += 64) >= n) return run_start + 1;
            continue;
        }
        if (run_len && run_len + (unsigned)__builtin_ctzll(~x) >= n) return run_start + 1;
        uint64_t inside = n <= 64 ? cm_bits_runs(x, n, align) : 0;
        if (inside) return w * 64 + (uint32_t)__builtin_ctzll(inside) + 1;
        run_len = (uint32_t)__builtin_clzll(~x); /* set bits at the top of this word */
        run_start = w * 64 + 64 - run_len;
        uint32_t skip = (0u - run_start) & (align - 1); /* to the first aligned bit of that run */
        run_len = run_len > skip ? run_len - skip : 0;
        run_start += skip;
    }
    return 0;
}

uint32_t cm_runs_claim(cm_runs_t *r, uint32_t words, uint32_t n, uint32_t align) {
    uint32_t from = atomic_load_explicit(&r->lowest, memory_order_relaxed), first_seen = UINT32_MAX;
    for (uint32_t at = from;;) {
        uint32_t found = find_run(r, at, words, n, align, &first_seen);
        if (!found) break;
        if (cm_runs_claim_at(r, found - 1, n)) return found;
        at = (found - 1) / 64; /* taken meanwhile: look again from there */
    }
    /* nothing free below first_seen: raise the hint, unless a free lowered it */
    uint32_t raise_to = first_seen == UINT32_MAX ? words : first_seen;
    if (raise_to > from)
        atomic_compare_exchange_strong_explicit(&r->lowest, &from, raise_to, memory_order_relaxed,
                                                memory_order_relaxed);
    return 0;
}
