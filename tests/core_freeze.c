/* Lock-freedom, tested: a thread stopped at any instruction inside
 * libcagemalloc.so must never stop the others.
 *
 * Workers loop on malloc/free, with some class-space and code-space blocks
 * among them (cm_klass_alloc, cm_meta_alloc, cm_code_alloc written through
 * cm_code_write), blocks of a heap of their own (cm_heap_malloc; the heap
 * is collected, and deleted and made anew, as they go) and blocks in the
 * cage (cm_cage_malloc, and a cage heap of their own, handled likewise):
 * mixed sizes, some
 * blocks freed by another thread, data verified on every block. They count
 * their operations. The
 * controller signals a worker; the handler looks at the interrupted
 * instruction pointer and, if it lies in libcagemalloc's text, freezes the
 * thread there (else the controller tries again). While one or two workers
 * are frozen, every other worker must complete MIN_PROGRESS operations within
 * WINDOW_S seconds. Finally two workers stay frozen for good and the rest
 * must still finish their work.
 *
 * How a lock-based allocator fails: sooner or later a freeze lands while the
 * frozen thread holds a lock (glibc: an arena mutex, taken also by remote
 * frees into that arena); the next worker to need that lock blocks, its
 * counter stops, and the progress check fails naming the frozen thread's
 * instruction. (Build with -DCMT_FREEZE_LIB='"libc.so"' against plain glibc
 * to watch that happen.) The window is generous, so only a real wait on the
 * frozen thread can fail it, not slowness. */
#include "core_util.h"

#include <errno.h>

#include "cagemalloc.h"
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <ucontext.h>

#ifndef CMT_FREEZE_LIB
#define CMT_FREEZE_LIB "libcagemalloc"
#endif
#define WORKERS 4
#define FREEZES 200
#define FOREVER 2         /* workers left frozen until the end */
#define MIN_PROGRESS 2000 /* operations each running worker must complete ... */
#define WINDOW_S 5        /* ... within this many seconds */
#define FINISH_OPS 200000 /* work the others finish while FOREVER are frozen */
#define LIVE 64

enum { RUNNING, ASKED, MISSED, FROZEN };

static struct worker {
    pthread_t tid;
    _Atomic uint64_t ops;
    _Atomic uint64_t target; /* stop after this many operations */
    _Atomic int state;
    _Atomic int release;
    _Atomic int done;
    _Atomic uintptr_t rip;
} __attribute__((aligned(64))) workers[WORKERS];

static uintptr_t text_lo, text_hi, lib_base;
static _Atomic int stop, ready; /* ready: workers that can take a signal */
static struct cmt_xchg xchg;
static __thread struct worker *self;

static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
    int i;
    (void)size;
    (void)data;
    if (!strstr(info->dlpi_name, CMT_FREEZE_LIB))
        return 0;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            text_lo = info->dlpi_addr + ph->p_vaddr;
            text_hi = text_lo + ph->p_memsz;
            lib_base = info->dlpi_addr;
            return 1;
        }
    }
    return 0;
}

/* Async-signal-safe: atomics and nanosleep only. */
static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    uintptr_t rip = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
    struct worker *w = self;
    struct timespec ms = {0, 1000000};
    int saved = errno;
    (void)sig;
    (void)si;
    if (rip < text_lo || rip >= text_hi) {
        atomic_store(&w->state, MISSED);
        return;
    }
    atomic_store(&w->rip, rip);
    atomic_store(&w->state, FROZEN);
    while (!atomic_load(&w->release))
        nanosleep(&ms, NULL);
    atomic_store(&w->release, 0);
    atomic_store(&w->state, RUNNING);
    errno = saved;
}

static size_t random_size(uint64_t *rng)
{
    uint64_t r = cmt_rand(rng) % 1024;
    if (r == 0)
        return cmt_range(rng, 256 << 10, 1 << 20);
    if (r < 16)
        return cmt_range(rng, 513, 32 << 10);
    return cmt_range(rng, 1, 512);
}

static __thread cm_heap_t *my_heap, *my_cage_heap;
static __thread unsigned cage_turn;

static void *allocate(unsigned kind, size_t n)
{
    switch (kind) {
    case CMT_HEAP: return cm_heap_malloc(my_heap, n);
    case CMT_CAGE: return cage_turn++ % 2 ? cm_cage_malloc(n) : cm_heap_malloc(my_cage_heap, n);
    case CMT_KLASS: return cm_klass_alloc(n);
    case CMT_META: return cm_meta_alloc(n);
    case CMT_CODE: return cm_code_alloc(n, NULL);
    default: return malloc(n);
    }
}

/* Code memory is written through the code space's writable view. */
static void fill(const struct cmt_blk *b)
{
    if (b->kind != CMT_CODE) {
        cmt_fill(b->p, b->n, b->seed);
        return;
    }
    unsigned char buf[4096];
    cmt_fill(buf, b->n, b->seed);
    CMT_CHECK(cm_code_write(b->p, buf, b->n) == 0, "cm_code_write failed");
}

static void release(const struct cmt_blk *b)
{
    if (b->kind == CMT_KLASS)
        cm_klass_free(b->p);
    else if (b->kind == CMT_META)
        cm_meta_free(b->p);
    else if (b->kind == CMT_CODE)
        cm_code_free(b->p);
    else
        free(b->p);
}

static void check_free(const struct cmt_blk *b, const char *what)
{
    CMT_VERIFY(b->p, b->n, b->seed, what);
    release(b);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned me = (unsigned)(w - workers);
    struct cmt_blk live[LIVE] = {{0}}, got;
    uint64_t rng = cmt_mix(me), seq = 0;
    size_t i;
    self = w;
    my_heap = cm_heap_new();
    my_cage_heap = cm_heap_new_in_cage();
    CMT_CHECK(my_heap != NULL && my_cage_heap != NULL, "cm_heap_new or cm_heap_new_in_cage failed");
    atomic_fetch_add(&ready, 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed) &&
           atomic_load_explicit(&w->ops, memory_order_relaxed) <
               atomic_load_explicit(&w->target, memory_order_relaxed)) {
        struct cmt_blk *b = &live[cmt_rand(&rng) % LIVE];
        if (!b->p) {
            uint64_t pick = cmt_rand(&rng) % 16;
            b->kind = pick < 2 ? CMT_KLASS : pick < 4 ? CMT_META : pick == 4 ? CMT_CODE : pick < 8 ? CMT_HEAP
                    : pick < 11 ? CMT_CAGE : CMT_MALLOC;
            b->n = b->kind == CMT_META ? cmt_range(&rng, 1, 256)
                 : b->kind == CMT_CODE ? cmt_range(&rng, 1, 4096)
                                       : random_size(&rng);
            b->p = allocate(b->kind, b->n);
            CMT_CHECK(b->p != NULL, "allocation of %zu bytes returned NULL", b->n);
            CMT_CHECK((b->kind == CMT_CAGE) == (cm_in_cage(b->p) != 0), "a block in the wrong space");
            b->seed = cmt_seed(b->p, b->n, me, seq++);
            b->owner = me;
            fill(b);
        } else {
            CMT_VERIFY(b->p, b->n, b->seed, "worker's own block");
            if (cmt_rand(&rng) % 4 || !cmt_xchg_put(&xchg, b, &rng))
                release(b);
            b->p = NULL;
        }
        if (seq % 4 == 0 && cmt_xchg_take(&xchg, me, &got, &rng))
            check_free(&got, "block from another worker");
        uint64_t ops = atomic_fetch_add_explicit(&w->ops, 1, memory_order_relaxed);
        if (ops % 1000 == 999) {
            cm_heap_collect(my_heap, ops % 7000 == 6999);
            cm_heap_collect(my_cage_heap, ops % 7000 == 6999);
        }
        if (ops % 5000 == 4999) { /* their live blocks move to the default heaps */
            cm_heap_delete(my_heap);
            cm_heap_delete(my_cage_heap);
            my_heap = cm_heap_new();
            my_cage_heap = cm_heap_new_in_cage();
            CMT_CHECK(my_heap != NULL && my_cage_heap != NULL, "cm_heap_new or cm_heap_new_in_cage failed");
        }
    }
    for (i = 0; i < LIVE; i++)
        if (live[i].p)
            check_free(&live[i], "worker's own block at the end");
    atomic_store(&w->done, 1);
    return NULL;
}

static void sleep_us(long us)
{
    struct timespec t = {us / 1000000, us % 1000000 * 1000};
    nanosleep(&t, NULL);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static unsigned long attempts, landed;
static uintptr_t seen[FREEZES + FOREVER];

/* Freeze worker w inside the allocator (retrying until a signal lands
 * there). */
static void freeze(struct worker *w, uint64_t *rng)
{
    for (;;) {
        double deadline = now() + 30;
        sleep_us(cmt_range(rng, 0, 300));
        attempts++;
        atomic_store(&w->state, ASKED);
        CMT_CHECK(pthread_kill(w->tid, SIGUSR1) == 0, "pthread_kill failed");
        while (atomic_load(&w->state) == ASKED) {
            CMT_CHECK(now() < deadline, "worker %d did not handle its signal in 30 s",
                      (int)(w - workers));
            sleep_us(50);
        }
        if (atomic_load(&w->state) == FROZEN)
            break;
        atomic_store(&w->state, RUNNING);
    }
    seen[landed++] = atomic_load(&w->rip) - lib_base;
}

static void thaw(struct worker *w)
{
    atomic_store(&w->release, 1);
    while (atomic_load(&w->state) == FROZEN)
        sleep_us(100);
}

static void report_frozen(void)
{
    int i;
    for (i = 0; i < WORKERS; i++)
        if (atomic_load(&workers[i].state) == FROZEN)
            fprintf(stderr, "  worker %d frozen at %s+0x%lx\n", i, CMT_FREEZE_LIB,
                    (unsigned long)(atomic_load(&workers[i].rip) - lib_base));
}

/* Every worker that is not frozen must make MIN_PROGRESS operations. */
static void check_progress(void)
{
    uint64_t start[WORKERS];
    double deadline = now() + WINDOW_S;
    int i, behind;
    for (i = 0; i < WORKERS; i++)
        start[i] = atomic_load(&workers[i].ops);
    do {
        sleep_us(1000);
        behind = -1;
        for (i = 0; i < WORKERS; i++)
            if (atomic_load(&workers[i].state) != FROZEN &&
                atomic_load(&workers[i].ops) - start[i] < MIN_PROGRESS)
                behind = i;
        if (behind >= 0 && now() > deadline) {
            fprintf(stderr, "FAIL: worker %d made %llu operations in %d s while others "
                    "were frozen inside the allocator (it waits for them: not lock-free)\n",
                    behind, (unsigned long long)(atomic_load(&workers[behind].ops) -
                                                 start[behind]), WINDOW_S);
            report_frozen();
            _exit(1);
        }
    } while (behind >= 0);
}

static size_t distinct_rips(void)
{
    size_t i, k, n = 0;
    for (i = 0; i < landed; i++) {
        for (k = 0; k < i && seen[k] != seen[i]; k++)
            ;
        n += k == i;
    }
    return n;
}

int main(void)
{
    struct sigaction sa;
    uint64_t rng = 3;
    struct cmt_blk got;
    double deadline;
    int i;

    dl_iterate_phdr(find_text, NULL);
    CMT_CHECK(text_lo != 0, "%s is not loaded", CMT_FREEZE_LIB);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CMT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction failed");
    for (i = 0; i < WORKERS; i++) {
        atomic_store(&workers[i].target, UINT64_MAX);
        CMT_CHECK(pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]) == 0,
                  "pthread_create failed");
    }
    while (atomic_load(&ready) < WORKERS)
        sleep_us(1000);

    /* One worker frozen at a time; every fourth time a second one too. */
    while (landed < FREEZES) {
        int a = (int)cmt_range(&rng, 0, WORKERS - 1), b = (a + 1) % WORKERS;
        freeze(&workers[a], &rng);
        if (landed % 4 == 0 && landed < FREEZES)
            freeze(&workers[b], &rng);
        check_progress();
        thaw(&workers[a]);
        if (atomic_load(&workers[b].state) == FROZEN)
            thaw(&workers[b]);
    }

    /* FOREVER workers stay frozen; the others must finish FINISH_OPS more. */
    for (i = 0; i < FOREVER; i++)
        freeze(&workers[i], &rng);
    for (i = FOREVER; i < WORKERS; i++)
        atomic_store(&workers[i].target, atomic_load(&workers[i].ops) + FINISH_OPS);
    deadline = now() + 60;
    for (i = FOREVER; i < WORKERS; i++) {
        while (!atomic_load(&workers[i].done)) {
            if (now() > deadline) {
                fprintf(stderr, "FAIL: worker %d did not finish %d operations in 60 s "
                        "while %d workers were frozen for good\n", i, FINISH_OPS, FOREVER);
                report_frozen();
                _exit(1);
            }
            sleep_us(1000);
        }
        pthread_join(workers[i].tid, NULL);
    }

    atomic_store(&stop, 1);
    for (i = 0; i < FOREVER; i++) {
        thaw(&workers[i]);
        pthread_join(workers[i].tid, NULL);
    }
    while (cmt_xchg_take(&xchg, UINT32_MAX, &got, &rng))
        check_free(&got, "block left in the exchange");
    printf("core_freeze: %lu signals, %lu landed inside %s at %zu distinct instructions; "
           "the other workers kept going every time\n",
           attempts, landed, CMT_FREEZE_LIB, distinct_rips());
    return 0;
}
