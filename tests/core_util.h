/* Shared helpers for the core_ tests: failure reporting, a per-thread PRNG,
 * pattern fill/verify of blocks, RSS, and a lock-free block exchange used to
 * free blocks on another thread. Include it first (it defines _GNU_SOURCE). */
#ifndef CORE_UTIL_H
#define CORE_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

/* _exit, not exit: failures may be reported from worker threads and forked
 * children, where running atexit handlers would race with live threads. */
__attribute__((noreturn, format(printf, 3, 4)))
static inline void cmt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(1);
}

#define CMT_FAIL(...) cmt_fail(__FILE__, __LINE__, __VA_ARGS__)
#define CMT_CHECK(cond, ...) do { if (!(cond)) CMT_FAIL(__VA_ARGS__); } while (0)

/* Keeps the compiler from deleting an allocation whose block looks unused. */
static inline void cmt_escape(const void *p)
{
    __asm__ volatile("" : : "g"(p) : "memory");
}

/* ---------------------------------------------------------------- PRNG */

static inline uint64_t cmt_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t cmt_rand(uint64_t *state)
{
    *state += 0x9E3779B97F4A7C15ull;
    return cmt_mix(*state);
}

/* Uniform in [lo, hi]. */
static inline size_t cmt_range(uint64_t *state, size_t lo, size_t hi)
{
    return lo + (size_t)(cmt_rand(state) % (hi - lo + 1));
}

/* A seed unique to one block: where it is, how big, who made it, when. */
static inline uint64_t cmt_seed(const void *p, size_t n, uint64_t thread, uint64_t seq)
{
    return cmt_mix((uint64_t)(uintptr_t)p ^ cmt_mix(n ^ cmt_mix(thread ^ cmt_mix(seq))));
}

/* ------------------------------------------------------------- patterns */

/* Byte k of a pattern is byte k%8 of word k/8, so any prefix of a filled
 * block verifies against the same seed (needed after realloc). */
static inline uint64_t cmt_word(uint64_t seed, size_t i)
{
    return seed ^ (i * 0xD6E8FEB86659FD93ull);
}

static inline void cmt_fill(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = (unsigned char *)p;
    size_t i, words = n / 8;
    for (i = 0; i < words; i++) {
        uint64_t w = cmt_word(seed, i);
        memcpy(b + 8 * i, &w, 8);
    }
    if (n % 8) {
        uint64_t w = cmt_word(seed, words);
        memcpy(b + 8 * words, &w, n % 8);
    }
}

/* Index of the first byte that differs from the pattern, or n. */
static inline size_t cmt_mismatch(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i, words = n / 8;
    for (i = 0; i < words; i++) {
        uint64_t w = cmt_word(seed, i), v;
        memcpy(&v, b + 8 * i, 8);
        if (v != w)
            break;
    }
    for (i *= 8; i < n; i++) {
        uint64_t w = cmt_word(seed, i / 8);
        if (b[i] != (unsigned char)(w >> (8 * (i % 8))))
            return i;
    }
    return n;
}

#define CMT_VERIFY(p, n, seed, what) do { \
    size_t cmt_at_ = cmt_mismatch((p), (n), (seed)); \
    if (cmt_at_ != (size_t)(n)) \
        CMT_FAIL("%s: block %p of %zu bytes corrupted at offset %zu", \
                 (what), (const void *)(p), (size_t)(n), cmt_at_); \
} while (0)

/* ------------------------------------------------------------ child cases */

/* Runs fn in a forked child whose stderr is captured into out (at most
 * cap - 1 bytes, NUL-ended); returns its wait status. */
static inline int cmt_run_child(void (*fn)(void), char *out, size_t cap)
{
    int err[2];
    size_t len = 0;
    ssize_t r;
    int status;
    pid_t pid;
    CMT_CHECK(pipe(err) == 0, "pipe");
    fflush(stdout);
    pid = fork();
    CMT_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(err[0]);
        dup2(err[1], 2);
        fn();
        fflush(stdout);
        _exit(0);
    }
    close(err[1]);
    while (len < cap - 1 && (r = read(err[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = 0;
    close(err[0]);
    waitpid(pid, &status, 0);
    return status;
}

/* One case of a misuse or edge test, in a child: with abort_with NULL it
 * must exit 0 having printed nothing on stderr; else die of SIGABRT having
 * printed exactly one line, which contains abort_with. Prints the verdict;
 * returns 1 if it passed. */
static inline int cmt_case(const char *name, void (*fn)(void), const char *abort_with)
{
    char out[1024];
    int status = cmt_run_child(fn, out, sizeof out);
    size_t len = strlen(out);
    int ok = abort_with ? WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(out, abort_with) &&
                              strchr(out, '\n') == out + len - 1
                        : WIFEXITED(status) && WEXITSTATUS(status) == 0 && len == 0;
    printf("%-32s %s\n", name, ok ? "ok" : "FAILED");
    if (!ok)
        printf("   status 0x%x, stderr: %s\n", status, len ? out : "nothing");
    return ok;
}

/* ------------------------------------------------------------------ RSS */

/* Resident set size in bytes, read without stdio (no allocation). */
static inline size_t cmt_rss(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    unsigned long pages = 0;
    if (fd >= 0)
        close(fd);
    CMT_CHECK(got > 0, "cannot read /proc/self/statm");
    buf[got] = 0;
    CMT_CHECK(sscanf(buf, "%*s %lu", &pages) == 1, "bad /proc/self/statm: %s", buf);
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* ------------------------------------------------------- block exchange */
#ifndef __cplusplus /* C11 atomics; the C++ test does not need it */
#include <stdatomic.h>

/* A live block, with the seed of the pattern it holds. */
struct cmt_blk {
    unsigned char *p;
    size_t n;
    uint64_t seed;
    unsigned owner; /* thread that allocated it */
    unsigned kind;  /* CMT_MALLOC, or the class-space allocator it came from */
};
enum { CMT_MALLOC, CMT_KLASS, CMT_META, CMT_CODE, CMT_HEAP, CMT_CAGE };

enum { CMT_SLOT_EMPTY, CMT_SLOT_BUSY, CMT_SLOT_FULL };
#define CMT_XCHG_SLOTS 256

/* Slots claimed by CAS: nobody ever waits for another thread, so a thread
 * frozen anywhere cannot stall the others (core_freeze relies on this). */
struct cmt_xchg {
    struct {
        _Atomic int state;
        struct cmt_blk blk;
    } slot[CMT_XCHG_SLOTS];
};

/* Hand b to some other thread; false if no empty slot was found. */
static inline int cmt_xchg_put(struct cmt_xchg *x, const struct cmt_blk *b, uint64_t *rng)
{
    size_t start = cmt_rand(rng), i;
    for (i = 0; i < 8; i++) {
        size_t k = (start + i) % CMT_XCHG_SLOTS;
        int expect = CMT_SLOT_EMPTY;
        if (atomic_compare_exchange_strong(&x->slot[k].state, &expect, CMT_SLOT_BUSY)) {
            x->slot[k].blk = *b;
            atomic_store_explicit(&x->slot[k].state, CMT_SLOT_FULL, memory_order_release);
            return 1;
        }
    }
    return 0;
}

/* Take a block allocated by a thread other than me (any owner if me is
 * UINT32_MAX); false if none was found. */
static inline int cmt_xchg_take(struct cmt_xchg *x, unsigned me, struct cmt_blk *out, uint64_t *rng)
{
    size_t start = cmt_rand(rng), i;
    for (i = 0; i < CMT_XCHG_SLOTS; i++) {
        size_t k = (start + i) % CMT_XCHG_SLOTS;
        int expect = CMT_SLOT_FULL;
        if (atomic_load_explicit(&x->slot[k].state, memory_order_relaxed) != CMT_SLOT_FULL)
            continue;
        if (!atomic_compare_exchange_strong(&x->slot[k].state, &expect, CMT_SLOT_BUSY))
            continue;
        if (x->slot[k].blk.owner == me) {
            atomic_store_explicit(&x->slot[k].state, CMT_SLOT_FULL, memory_order_release);
            continue;
        }
        *out = x->slot[k].blk;
        atomic_store_explicit(&x->slot[k].state, CMT_SLOT_EMPTY, memory_order_release);
        return 1;
    }
    return 0;
}

/* Hand every block still in the exchange to release (after the threads
 * that used it are joined). */
static inline void cmt_xchg_drain(struct cmt_xchg *x, void (*release)(const struct cmt_blk *, const char *))
{
    struct cmt_blk b;
    uint64_t rng = 1;
    while (cmt_xchg_take(x, UINT32_MAX, &b, &rng))
        release(&b, "block left in the exchange");
}

#include <pthread.h>

/* Run fn on n threads (argument: the thread's index) and join them all. */
static inline void cmt_run_threads(unsigned n, void *(*fn)(void *))
{
    pthread_t t[64];
    unsigned i;
    CMT_CHECK(n <= 64, "at most 64 threads");
    for (i = 0; i < n; i++)
        CMT_CHECK(pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)i) == 0, "pthread_create");
    for (i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

/* Run fn on n threads (argument: the thread's index) that all start it at
 * the same moment, each spinning until every one has arrived: for races
 * between first uses. */
struct cmt_at_once {
    void *(*fn)(void *);
    unsigned n;
    atomic_uint arrived;
};
static inline struct cmt_at_once *cmt_at_once(void)
{
    static struct cmt_at_once state;
    return &state;
}
static inline void *cmt_at_once_start(void *arg)
{
    struct cmt_at_once *s = cmt_at_once();
    atomic_fetch_add_explicit(&s->arrived, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&s->arrived, memory_order_acquire) < s->n) {
    }
    return s->fn(arg);
}
static inline void cmt_run_at_once(unsigned n, void *(*fn)(void *))
{
    struct cmt_at_once *s = cmt_at_once();
    s->fn = fn;
    s->n = n;
    atomic_store_explicit(&s->arrived, 0, memory_order_relaxed);
    cmt_run_threads(n, cmt_at_once_start); /* pthread_create orders the stores above before each thread */
}

#endif /* __cplusplus */

#endif /* CORE_UTIL_H */
