/* klass: the seed-002 experiment (OpenJDK Lilliput, "Reducing class pointer
 * size") on cagemalloc's class space, with a generated workload.
 *
 * 40,000 classes: 80% of 512-1024 bytes (peaking near 700, as the seed saw
 * most Klass structures), 15% of 1-4 KiB, 4% of 4-16 KiB, 1% of 16-100 KiB;
 * each with 2-8 metadata blocks of 16-256 bytes (what the seed kept in
 * non-class space: method tables, constant pools). Run in a fresh process
 * per configuration (shift 3, 9, 10; gap filling off and on), it reports
 * the class space committed, metadata kept outside it, the increase over
 * shift 3 and the average loss per class; then a churn run: 10 generations
 * of 10,000 classes loaded while the generation before the last is unloaded,
 * with the committed class space after each.
 *
 *   bench/klass                 # builds and prints the tables (markdown)
 *   klass run SHIFT GAPS        # one configuration (what bench/klass runs)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cagemalloc.h"

#define CLASSES 40000
#define MAX_META 8
#define CHURN_GENERATIONS 10
#define CHURN_CLASSES 10000

typedef struct loaded {
    void *klass;
    size_t size;
    void *meta[MAX_META];
    int metas;
} loaded_t;

static uint64_t rng_state;
static uint64_t next_rand(void) {
    rng_state += 0x9E3779B97F4A7C15ull;
    uint64_t x = rng_state;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static size_t between(size_t lo, size_t hi) { return lo + (size_t)(next_rand() % (hi - lo + 1)); }

static size_t class_size(void) {
    unsigned r = (unsigned)(next_rand() % 100);
    if (r < 80) return (between(512, 1024) + between(512, 900)) / 2; /* peaks near 700 */
    if (r < 95) return between(1025, 4096);
    if (r < 99) return between(4097, 16384);
    return between(16385, 102400);
}

static size_t exact_class_bytes, exact_meta_bytes;

static void load(loaded_t *c) {
    c->size = class_size();
    c->klass = cm_klass_alloc(c->size);
    if (!c->klass) {
        perror("cm_klass_alloc");
        exit(1);
    }
    memset(c->klass, 0x4b, c->size); /* a runtime fills its Klass */
    exact_class_bytes += c->size;
    c->metas = (int)between(2, MAX_META);
    for (int j = 0; j < c->metas; j++) {
        size_t n = between(16, 256);
        c->meta[j] = cm_meta_alloc(n);
        if (!c->meta[j]) {
            perror("cm_meta_alloc");
            exit(1);
        }
        memset(c->meta[j], 0x4d, n);
        exact_meta_bytes += n;
    }
}

static void unload(loaded_t *c) {
    for (int j = 0; j < c->metas; j++) cm_meta_free(c->meta[j]);
    cm_klass_free(c->klass);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One configuration, in this process: print one line of numbers. */
static int run_one(unsigned shift) {
    if (cm_klass_configure(shift, 32) != 0) {
        fprintf(stderr, "cm_klass_configure(%u, 32) failed\n", shift);
        return 1;
    }
    static loaded_t classes[CLASSES];
    rng_state = 42;
    double t0 = now();
    for (int i = 0; i < CLASSES; i++) load(&classes[i]);
    double t = now() - t0;
    struct cm_klass_stats s;
    cm_klass_stats(&s);
    /* loss against the exact sizes asked for: class space neither a class nor
     * metadata placed in the gaps holds (the stats count sizes to the granule) */
    long long loss = (long long)s.bytes_committed - (long long)exact_class_bytes - (long long)s.gap_bytes_reused;
    printf("RESULT shift=%u gaps=%d bits=%u committed=%zu elsewhere=%zu gapbytes=%zu loss_exact=%lld "
           "loss_stats=%zu ns_per_class=%.0f\n",
           shift, s.gap_filling, s.narrow_bits, s.bytes_committed, s.meta_bytes_elsewhere, s.gap_bytes_reused, loss,
           s.loss_per_class, t / CLASSES * 1e9);
    for (int i = 0; i < CLASSES; i++) unload(&classes[i]);

    /* churn: generation g is loaded while generation g-2 is unloaded */
    static loaded_t gen[3][CHURN_CLASSES];
    printf("CHURN");
    for (int g = 0; g < CHURN_GENERATIONS; g++) {
        for (int i = 0; i < CHURN_CLASSES; i++) {
            if (g >= 3) unload(&gen[g % 3][i]);
            load(&gen[g % 3][i]);
        }
        cm_klass_stats(&s);
        printf(" %zu", s.bytes_committed);
    }
    printf("\n");
    return 0;
}

typedef struct result {
    unsigned shift, bits;
    int gaps;
    size_t committed, elsewhere, gapbytes, loss_stats;
    long long loss_exact;
    double ns;
    size_t churn[CHURN_GENERATIONS];
} result_t;

/* Run this program again for one configuration (a fresh process: the
 * configuration is fixed at first use, and CAGEMALLOC_KLASS_GAPS is read then). */
static int measure(const char *self, unsigned shift, int gaps, result_t *r) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        setenv("CAGEMALLOC_KLASS_GAPS", gaps ? "1" : "0", 1);
        char arg[8];
        snprintf(arg, sizeof arg, "%u", shift);
        execl(self, self, "run", arg, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char out[4096];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof out - 1 && (n = read(fd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)n;
    out[len] = 0;
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    char *churn = strstr(out, "CHURN");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !churn ||
        sscanf(out, "RESULT shift=%u gaps=%d bits=%u committed=%zu elsewhere=%zu gapbytes=%zu loss_exact=%lld "
                    "loss_stats=%zu ns_per_class=%lf",
               &r->shift, &r->gaps, &r->bits, &r->committed, &r->elsewhere, &r->gapbytes, &r->loss_exact,
               &r->loss_stats, &r->ns) != 9)
        return -1;
    char *at = churn + 5;
    for (int g = 0; g < CHURN_GENERATIONS; g++) r->churn[g] = strtoull(at, &at, 10);
    return 0;
}

static double mib(size_t b) { return (double)b / (1 << 20); }

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "run") == 0) return run_one((unsigned)atoi(argv[2]));
    static const struct { unsigned shift; int gaps; } configs[] = {{3, 0}, {9, 0}, {9, 1}, {10, 0}, {10, 1}};
    result_t r[5];
    for (int i = 0; i < 5; i++)
        if (measure("/proc/self/exe", configs[i].shift, configs[i].gaps, &r[i]) != 0) {
            fprintf(stderr, "klass: the run at shift %u failed\n", configs[i].shift);
            return 1;
        }
    const result_t *base = &r[0];
    printf("40,000 classes, 2-8 metadata blocks each (16-256 B); class space range 4 GiB.\n\n");
    printf("| shift | gap filling | narrow bits | class space committed | metadata outside | total "
           "| class space vs shift 3 | total vs shift 3 | loss per class | ns per class (with its metadata) |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < 5; i++) {
        size_t total = r[i].committed + r[i].elsewhere, base_total = base->committed + base->elsewhere;
        printf("| %u | %s | %u | %.2f MiB | %.2f MiB | %.2f MiB | %+.2f MiB | %+.2f MiB | %lld B | %.0f |\n", r[i].shift,
               r[i].gaps ? "on" : "off", r[i].bits, mib(r[i].committed), mib(r[i].elsewhere), mib(total),
               mib(r[i].committed) - mib(base->committed), mib(total) - mib(base_total),
               r[i].loss_exact / CLASSES, r[i].ns);
    }
    printf("\nChurn: %d generations of %d classes, each loaded while the one before the last is unloaded; class "
           "space committed after each generation (MiB):\n\n",
           CHURN_GENERATIONS, CHURN_CLASSES);
    printf("| shift | gap filling |");
    for (int g = 0; g < CHURN_GENERATIONS; g++) printf(" %d |", g + 1);
    printf("\n|---|---|");
    for (int g = 0; g < CHURN_GENERATIONS; g++) printf("---|");
    printf("\n");
    for (int i = 0; i < 5; i++) {
        printf("| %u | %s |", r[i].shift, r[i].gaps ? "on" : "off");
        for (int g = 0; g < CHURN_GENERATIONS; g++) printf(" %.2f |", mib(r[i].churn[g]));
        printf("\n");
    }
    return 0;
}
