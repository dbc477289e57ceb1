/* klass_space: the class space (cm_klass_*, cm_meta_*). Each case that needs
 * its own configuration runs in a forked child, as the configuration is
 * fixed at first use.
 *  - every shift 3..12: every block aligned to 2^shift, inside the range,
 *    narrow pointers round-trip and fit in cm_klass_bits() bits;
 *  - a small range (1 MiB at shift 10): filled to exhaustion (NULL + ENOMEM),
 *    the first and last slots round-trip, everything freed is reused;
 *  - huge classes spanning many slots, mixed with small ones;
 *  - metadata in the gaps never overlaps a class (patterns verified), and is
 *    found in the gaps (the loss per class stays small);
 *  - cm_klass_configure: EINVAL out of bounds, EBUSY after first use;
 *  - misuse: freeing a non-class or a metadata block twice aborts with the
 *    one-line report;
 *  - four threads use the space first at the same moment (ten times, each
 *    in a fresh child);
 *  - four threads allocate classes and metadata, hand some to each other to
 *    free, and verify every block before freeing it. */
#include "core_util.h"

#include <errno.h>
#include <pthread.h>

#include "cagemalloc.h"

static void check_block(void *k, unsigned shift)
{
    CMT_CHECK(k != NULL, "cm_klass_alloc failed at shift %u", shift);
    CMT_CHECK(((uintptr_t)k & (((uintptr_t)1 << shift) - 1)) == 0, "%p not aligned to 2^%u", k, shift);
    uint32_t n = cm_klass_encode(k);
    CMT_CHECK(cm_klass_decode(n) == k, "narrow pointer of %p does not round-trip", k);
    CMT_CHECK(n != 0, "narrow 0 names a class");
    CMT_CHECK(cm_klass_bits() == 32 || (n >> cm_klass_bits()) == 0, "narrow %u needs more than %u bits", n,
              cm_klass_bits());
}

/* ---- alignment at every shift ---- */
static unsigned the_shift;
static void alignment_at_shift(void)
{
    CMT_CHECK(cm_klass_configure(the_shift, 30) == 0, "configure(%u, 30)", the_shift);
    CMT_CHECK(cm_klass_bits() == 30 - the_shift, "cm_klass_bits %u at shift %u", cm_klass_bits(), the_shift);
    uint64_t rng = the_shift;
    void *k[300];
    size_t n[300];
    for (int i = 0; i < 300; i++) {
        n[i] = cmt_range(&rng, 1, i % 50 == 0 ? 100000 : 2000);
        k[i] = cm_klass_alloc(n[i]);
        check_block(k[i], the_shift);
        cmt_fill(k[i], n[i], cmt_seed(k[i], n[i], 0, (uint64_t)i));
    }
    for (int i = 0; i < 300; i++) {
        CMT_VERIFY(k[i], n[i], cmt_seed(k[i], n[i], 0, (uint64_t)i), "class block");
        cm_klass_free(k[i]);
    }
}

/* ---- a small range: exhaustion, edges, reuse ---- */
static void small_range(void)
{
    CMT_CHECK(cm_klass_configure(10, 20) == 0, "configure(10, 20)");
    static void *k[1100];
    int count = 0;
    for (;;) {
        errno = 0;
        void *p = cm_klass_alloc(700);
        if (!p) {
            CMT_CHECK(errno == ENOMEM, "exhaustion: errno %d", errno);
            break;
        }
        CMT_CHECK(count < 1100, "more classes than a 1 MiB space holds");
        check_block(p, 10);
        memset(p, count & 0xff, 700);
        k[count++] = p;
    }
    /* slot 0 is never handed out: 1,023 slots of 1 KiB */
    CMT_CHECK(count == 1023, "%d classes of 700 B in a 1 MiB space at shift 10, not 1023", count);
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < count; i++) {
        uint32_t n = cm_klass_encode(k[i]);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        CMT_CHECK(((unsigned char *)k[i])[699] == (unsigned char)(i & 0xff), "class %d corrupted", i);
    }
    CMT_CHECK(lo == 1 && hi == (1u << 10) - 1, "narrow range [%u, %u], not [1, 1023]", lo, hi);
    CMT_CHECK(cm_klass_decode(hi) == (char *)cm_klass_decode(1) + (size_t)(hi - 1) * 1024, "the last slot decodes");
    errno = 0;
    CMT_CHECK(cm_klass_alloc(1 << 20) == NULL && errno == ENOMEM, "a class larger than the space");
    for (int i = 0; i < count; i += 2) cm_klass_free(k[i]);
    for (int i = 0; i < count; i += 2) {
        k[i] = cm_klass_alloc(1000);
        CMT_CHECK(k[i] != NULL, "freed space was not reused");
    }
    CMT_CHECK(cm_klass_alloc(100) == NULL, "more than was freed");
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    CMT_CHECK(s.bytes_committed == (size_t)1023 << 10 && s.classes_live == 1023, "committed %zu, live %zu",
              s.bytes_committed, s.classes_live);
}

/* ---- huge classes among small ones; space reused after free ---- */
static void huge_classes(void)
{
    void *k[64];
    size_t n[64];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 64; i++) {
            n[i] = i % 4 == 0 ? 100000 + (size_t)i * 1000 : 300 + (size_t)i * 10;
            k[i] = cm_klass_alloc(n[i]);
            check_block(k[i], 10);
            cmt_fill(k[i], n[i], cmt_seed(k[i], n[i], 1, (uint64_t)i));
        }
        for (int i = 0; i < 64; i++) {
            CMT_VERIFY(k[i], n[i], cmt_seed(k[i], n[i], 1, (uint64_t)i), "huge or small class");
            cm_klass_free(k[i]);
        }
    }
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    CMT_CHECK(s.classes_live == 0 && s.bytes_requested == 0, "everything freed");
    size_t one_round = 0;
    for (int i = 0; i < 64; i++) one_round += (n[i] + 1023) / 1024 * 1024;
    CMT_CHECK(s.bytes_committed <= one_round + (64 << 10), "committed %zu after 3 rounds of %zu", s.bytes_committed,
              one_round);
}

/* ---- metadata in the gaps ---- */
static void metadata_in_gaps(void)
{
    enum { CLASSES = 2000, METAS = 4 };
    static struct cmt_blk k[CLASSES], m[CLASSES * METAS];
    uint64_t rng = 7;
    for (int i = 0; i < CLASSES; i++) {
        k[i].n = cmt_range(&rng, 512, 1024);
        k[i].p = cm_klass_alloc(k[i].n);
        check_block(k[i].p, 10);
        k[i].seed = cmt_seed(k[i].p, k[i].n, 2, (uint64_t)i);
        cmt_fill(k[i].p, k[i].n, k[i].seed);
        for (int j = 0; j < METAS; j++) {
            struct cmt_blk *b = &m[i * METAS + j];
            b->n = cmt_range(&rng, 16, 256);
            b->p = cm_meta_alloc(b->n);
            CMT_CHECK(b->p && ((uintptr_t)b->p & 15) == 0, "cm_meta_alloc(%zu) = %p", b->n, (void *)b->p);
            b->seed = cmt_seed(b->p, b->n, 3, (uint64_t)(i * METAS + j));
            cmt_fill(b->p, b->n, b->seed);
        }
    }
    for (int i = 0; i < CLASSES; i++) CMT_VERIFY(k[i].p, k[i].n, k[i].seed, "class after metadata was placed");
    for (int i = 0; i < CLASSES * METAS; i++) CMT_VERIFY(m[i].p, m[i].n, m[i].seed, "metadata block");
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    printf("  2000 classes: loss %zu B per class, %zu B of metadata in gaps, %zu B elsewhere\n", s.loss_per_class,
           s.gap_bytes_reused, s.meta_bytes_elsewhere);
    CMT_CHECK(s.gap_filling && s.gap_bytes_reused > CLASSES * 200, "the gaps took only %zu bytes", s.gap_bytes_reused);
    CMT_CHECK(s.loss_per_class < 32, "loss per class %zu B", s.loss_per_class);
    /* free classes first (their gaps keep live metadata), then the metadata */
    for (int i = 0; i < CLASSES; i++) cm_klass_free(k[i].p);
    for (int i = 0; i < CLASSES * METAS; i++) {
        CMT_VERIFY(m[i].p, m[i].n, m[i].seed, "metadata after its class was freed");
        cm_meta_free(m[i].p);
    }
    cm_klass_stats(&s);
    CMT_CHECK(s.classes_live == 0 && s.gap_bytes_reused == 0 && s.meta_bytes_elsewhere == 0 && s.alignment_loss == 0,
              "not everything came back: live %zu gaps %zu elsewhere %zu loss %zu", s.classes_live,
              s.gap_bytes_reused, s.meta_bytes_elsewhere, s.alignment_loss);
    size_t committed = s.bytes_committed;
    for (int i = 0; i < CLASSES; i++) k[i].p = cm_klass_alloc(k[i].n);
    cm_klass_stats(&s);
    CMT_CHECK(s.bytes_committed == committed, "space freed with its metadata was not reused");
}

/* Run in a process of its own started with CAGEMALLOC_KLASS_GAPS=0 (the
 * variable is read at the allocator's first use). */
static void no_gaps_body(void)
{
    void *k = cm_klass_alloc(600), *m = cm_meta_alloc(100);
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    CMT_CHECK(!s.gap_filling && s.gap_bytes_reused == 0 && s.meta_bytes_elsewhere >= 100 && s.loss_per_class == 416,
              "gap filling off: gaps %zu elsewhere %zu loss %zu", s.gap_bytes_reused, s.meta_bytes_elsewhere,
              s.loss_per_class);
    cm_meta_free(m);
    cm_klass_free(k);
    /* metadata in ordinary memory stays 16-aligned below 9 bytes too (the
     * 8-byte class is 8-aligned); many live, so none passes by chance */
    enum { TINY = 64 };
    void *tiny[8][TINY];
    for (size_t n = 1; n <= 8; n++)
        for (int i = 0; i < TINY; i++) {
            tiny[n - 1][i] = cm_meta_alloc(n);
            CMT_CHECK(tiny[n - 1][i] && ((uintptr_t)tiny[n - 1][i] & 15) == 0, "cm_meta_alloc(%zu) = %p", n,
                      tiny[n - 1][i]);
            memset(tiny[n - 1][i], (int)n, n);
        }
    for (size_t n = 1; n <= 8; n++)
        for (int i = 0; i < TINY; i++) cm_meta_free(tiny[n - 1][i]);
}

static void no_gaps_when_off(void)
{
    setenv("CAGEMALLOC_KLASS_GAPS", "0", 1);
    execl("/proc/self/exe", "klass_space", "no_gaps", (char *)NULL);
    _exit(127);
}

/* ---- configuration ---- */
static void configuration(void)
{
    CMT_CHECK(cm_klass_configure(2, 32) == EINVAL && cm_klass_configure(13, 32) == EINVAL &&
                  cm_klass_configure(10, 19) == EINVAL && cm_klass_configure(10, 35) == EINVAL &&
                  cm_klass_configure(3, 34) == 0 && cm_klass_configure(9, 31) == 0,
              "bounds");
    CMT_CHECK(cm_klass_bits() == 22, "bits after configure(9, 31)");
    void *k = cm_klass_alloc(10);
    check_block(k, 9);
    CMT_CHECK(cm_klass_configure(10, 32) == EBUSY, "configure after first use");
    cm_klass_free(k);
}

/* ---- misuse ---- */
static void free_not_a_class(void)
{
    char *k = cm_klass_alloc(3000);
    cm_klass_free(k + 1024);
}
static void free_class_twice(void)
{
    void *k = cm_klass_alloc(100), *keep = cm_klass_alloc(100);
    cm_klass_free(k);
    cm_klass_free(k);
    cm_klass_free(keep);
}
static void free_meta_twice(void)
{
    void *k = cm_klass_alloc(600), *m = cm_meta_alloc(64), *m2 = cm_meta_alloc(64);
    cm_meta_free(m);
    cm_meta_free(m);
    cm_meta_free(m2);
    cm_klass_free(k);
}
static void meta_free_of_class(void)
{
    void *k = cm_klass_alloc(600);
    cm_meta_free(k);
}
/* outside the space: reported as cm_meta_free's, not as the size lookup's */
static void meta_free_not_ours(void)
{
    static char not_ours[64] __attribute__((aligned(16)));
    void *k = cm_klass_alloc(600);
    cm_meta_free(not_ours + 16);
    cm_klass_free(k);
}

/* ---- first use from several threads at once ---- */
/* Every thread sets the space up at the same moment (each child process
 * uses it first here): the racers' set-up must not write what the
 * winner's readers read (under ThreadSanitizer, a data race report). */
static void *first_user(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    size_t n = 100 + 300 * me;
    void *k = cm_klass_alloc(n);
    check_block(k, 10);
    uint64_t seed = cmt_seed(k, n, me, 0);
    cmt_fill(k, n, seed);
    CMT_VERIFY(k, n, seed, "a class allocated at the first use");
    cm_klass_free(k);
    return NULL;
}

static void first_use_race(void) { cmt_run_at_once(4, first_user); }

/* ---- threads ---- */
static struct cmt_xchg xchg;

static void release(const struct cmt_blk *b, const char *what)
{
    CMT_VERIFY(b->p, b->n, b->seed, what);
    if (b->kind == CMT_KLASS)
        cm_klass_free(b->p);
    else
        cm_meta_free(b->p);
}

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t rng = cmt_mix(me + 100);
    struct cmt_blk live[64] = {{0}}, got;
    for (int op = 0; op < 60000; op++) {
        struct cmt_blk *b = &live[cmt_rand(&rng) % 64];
        if (b->p) {
            if (cmt_rand(&rng) % 3 || !cmt_xchg_put(&xchg, b, &rng)) release(b, "own block");
            b->p = NULL;
        } else {
            b->kind = cmt_rand(&rng) % 2 ? CMT_KLASS : CMT_META;
            b->n = b->kind == CMT_KLASS ? cmt_range(&rng, 1, cmt_rand(&rng) % 32 ? 1500 : 40000) : cmt_range(&rng, 1, 300);
            b->p = b->kind == CMT_KLASS ? cm_klass_alloc(b->n) : cm_meta_alloc(b->n);
            CMT_CHECK(b->p != NULL, "allocation failed");
            if (b->kind == CMT_KLASS) check_block(b->p, 10);
            b->seed = cmt_seed(b->p, b->n, me, (uint64_t)op);
            b->owner = me;
            cmt_fill(b->p, b->n, b->seed);
        }
        if (op % 4 == 0 && cmt_xchg_take(&xchg, me, &got, &rng)) release(&got, "block from another thread");
    }
    for (int i = 0; i < 64; i++)
        if (live[i].p) release(&live[i], "own block at the end");
    return NULL;
}

static void threads(void)
{
    cmt_run_threads(4, worker);
    cmt_xchg_drain(&xchg, release);
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    CMT_CHECK(s.classes_live == 0 && s.gap_bytes_reused == 0 && s.alignment_loss == 0,
              "after all threads freed everything: live %zu gaps %zu loss %zu", s.classes_live, s.gap_bytes_reused,
              s.alignment_loss);
}

int main(int argc, char **argv)
{
    int failures = 0;
    if (argc > 1 && strcmp(argv[1], "no_gaps") == 0) {
        no_gaps_body();
        return 0;
    }
    for (the_shift = 3; the_shift <= 12; the_shift++) {
        char name[32];
        snprintf(name, sizeof name, "alignment_at_shift_%u", the_shift);
        failures += !cmt_case(name, alignment_at_shift, NULL);
    }
    failures += !cmt_case("small_range", small_range, NULL);
    failures += !cmt_case("huge_classes", huge_classes, NULL);
    failures += !cmt_case("metadata_in_gaps", metadata_in_gaps, NULL);
    failures += !cmt_case("no_gaps_when_off", no_gaps_when_off, NULL);
    failures += !cmt_case("configuration", configuration, NULL);
    failures += !cmt_case("free_not_a_class", free_not_a_class, "cagemalloc: cm_klass_free(): invalid pointer 0x");
    failures += !cmt_case("free_class_twice", free_class_twice, "cagemalloc: cm_klass_free(): invalid pointer 0x");
    failures += !cmt_case("free_meta_twice", free_meta_twice, "cagemalloc: cm_meta_free(): double free 0x");
    failures += !cmt_case("meta_free_of_class", meta_free_of_class, "cagemalloc: cm_meta_free(): invalid pointer 0x");
    failures += !cmt_case("meta_free_not_ours", meta_free_not_ours, "cagemalloc: cm_meta_free(): invalid pointer 0x");
    for (int round = 0; round < 10; round++) failures += !cmt_case("first_use_race", first_use_race, NULL);
    failures += !cmt_case("threads", threads, NULL);
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
