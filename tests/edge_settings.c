/* edge_settings: a CAGEMALLOC_* size, time or class-space bound that cannot
 * be used (not a number, an unknown suffix, out of bounds) keeps its
 * default and is named on stderr once, even when four threads make the
 * first allocation at the same moment; usable values, up to the largest,
 * take effect and print nothing. Before, such values were dropped silently
 * or wrapped around (CAGEMALLOC_DECAY_MS=99999999999999999999 became
 * 15,908,979,783,593 ms). Each case is this program run again with the
 * settings and CAGEMALLOC_VERBOSE=1, whose start-up report shows the values
 * in effect (and the class space's statistics, its bounds). */
#include "core_util.h"

#include <sys/wait.h>

#include "cagemalloc.h"

struct setting {
    const char *name, *value;
};

struct scenario {
    const char *label;
    struct setting set[6];
    const char *expect[10]; /* lines stderr must hold exactly once */
    int ignored;           /* how many "ignored" lines stderr holds in all */
};

static const struct scenario scenarios[] = {
    {"unusable values",
     {{"CAGEMALLOC_EMPTY_KEEP", "64x"},
      {"CAGEMALLOC_LARGE_CACHE", "99999999999999999999"},
      {"CAGEMALLOC_DECAY_MS", "18446744073710"},
      {"CAGEMALLOC_ARENA_RESERVE", ""},
      {"CAGEMALLOC_KLASS_SHIFT", "13"},
      {"CAGEMALLOC_KLASS_RANGE", "19"}},
     {"cagemalloc: CAGEMALLOC_EMPTY_KEEP=64x ignored: a number may end in k, m or g only\n",
      "cagemalloc: CAGEMALLOC_LARGE_CACHE=99999999999999999999 ignored: too large\n",
      "cagemalloc: CAGEMALLOC_DECAY_MS=18446744073710 ignored: too large\n",
      "cagemalloc: CAGEMALLOC_ARENA_RESERVE= ignored: not a number\n",
      "cagemalloc: CAGEMALLOC_KLASS_SHIFT=13 ignored: too large\n",
      "cagemalloc: CAGEMALLOC_KLASS_RANGE=19 ignored: too small\n",
      "empty superblocks kept up to 65536 KiB (CAGEMALLOC_EMPTY_KEEP)\n",
      "large mappings cached up to 131072 KiB (CAGEMALLOC_LARGE_CACHE)\n",
      "kept memory returned after 1000 ms idle (CAGEMALLOC_DECAY_MS)\n",
      "class space: shift 10, range 32\n"},
     6},
    {"usable values",
     {{"CAGEMALLOC_EMPTY_KEEP", "16m"},
      {"CAGEMALLOC_LARGE_CACHE", "1G"},
      {"CAGEMALLOC_DECAY_MS", "250"},
      {"CAGEMALLOC_KLASS_SHIFT", "12"},
      {"CAGEMALLOC_KLASS_RANGE", "20"}},
     {"empty superblocks kept up to 16384 KiB (CAGEMALLOC_EMPTY_KEEP)\n",
      "large mappings cached up to 1048576 KiB (CAGEMALLOC_LARGE_CACHE)\n",
      "kept memory returned after 250 ms idle (CAGEMALLOC_DECAY_MS)\n",
      "class space: shift 12, range 20\n"},
     0},
    {"the largest values",
     {{"CAGEMALLOC_EMPTY_KEEP", "17179869183g"}, {"CAGEMALLOC_DECAY_MS", "18446744073709"}},
     {"empty superblocks kept up to 18014398508433408 KiB (CAGEMALLOC_EMPTY_KEEP)\n",
      "kept memory returned after 18446744073709 ms idle (CAGEMALLOC_DECAY_MS)\n"},
     0},
};

/* ---- in the child: four threads make the first allocation at once ---- */

static void *first_user(void *arg) {
    unsigned me = (unsigned)(uintptr_t)arg;
    size_t n = 40 + 24 * me;
    unsigned char *p = malloc(n);
    CMT_CHECK(p != NULL, "malloc(%zu) failed", n);
    uint64_t seed = cmt_seed(p, n, me, 0);
    cmt_fill(p, n, seed);
    CMT_VERIFY(p, n, seed, "a block of the first use");
    free(p);
    return NULL;
}

/* ---- in the parent ---- */

static const struct scenario *current;

static void exec_with_settings(void) {
    for (int i = 0; i < 6 && current->set[i].name; i++) setenv(current->set[i].name, current->set[i].value, 1);
    setenv("CAGEMALLOC_VERBOSE", "1", 1);
    execl("/proc/self/exe", "edge_settings", "child", (char *)NULL);
    _exit(127);
}

static int occurrences(const char *text, const char *line) {
    int n = 0;
    for (const char *at = text; (at = strstr(at, line)) != NULL; at++) n++;
    return n;
}

static int check(const struct scenario *s) {
    char err[8192];
    current = s;
    int status = cmt_run_child(exec_with_settings, err, sizeof err);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && occurrences(err, " ignored: ") == s->ignored;
    for (int i = 0; ok && i < 10 && s->expect[i]; i++) ok = occurrences(err, s->expect[i]) == 1;
    printf("%-20s %s\n", s->label, ok ? "ok" : "FAILED");
    if (!ok) printf("   status 0x%x, stderr:\n%s", status, err);
    return ok;
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        cmt_run_at_once(4, first_user);
        struct cm_klass_stats klass;
        cm_klass_stats(&klass); /* before its first use: what the settings give it */
        fprintf(stderr, "class space: shift %u, range %u\n", klass.shift, klass.range_log2);
        return 0;
    }
    int failures = 0;
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) failures += !check(&scenarios[i]);
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
