/* fork() while other threads allocate and free: 50 times the main thread
 * forks; each child (which has a copy of the heap taken at an arbitrary
 * moment of the other threads' work) must allocate and free normally, small
 * and large, from its own new thread too, and free blocks it inherited.
 * The parent checks every child's exit status; its own threads keep
 * verifying their data throughout. */
#include "core_util.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#define FORKS 50
#define WORKERS 2
#define WINDOW 256
#define INHERITED 64
#define CHILD_TIMEOUT 20 /* seconds: a child stuck on a lock dies of SIGALRM */

static _Atomic int stop;
static struct cmt_blk inherited[INHERITED];

static void make_block(struct cmt_blk *b, size_t n, uint64_t tag, uint64_t seq)
{
    b->p = malloc(n);
    CMT_CHECK(b->p != NULL, "malloc(%zu) returned NULL", n);
    b->n = n;
    b->seed = cmt_seed(b->p, n, tag, seq);
    cmt_fill(b->p, n, b->seed);
}

static void check_free(struct cmt_blk *b, const char *what)
{
    CMT_VERIFY(b->p, b->n, b->seed, what);
    free(b->p);
    b->p = NULL;
}

static size_t random_size(uint64_t *rng)
{
    return cmt_rand(rng) % 64 ? cmt_range(rng, 1, 4096) : cmt_range(rng, 4097, 1 << 20);
}

static void *parent_worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    struct cmt_blk win[WINDOW] = {{0}};
    uint64_t rng = cmt_mix(id), seq = 0;
    size_t i;
    while (!atomic_load(&stop)) {
        struct cmt_blk *b = &win[cmt_rand(&rng) % WINDOW];
        if (b->p)
            check_free(b, "parent thread's block");
        else
            make_block(b, random_size(&rng), id, seq++);
    }
    for (i = 0; i < WINDOW; i++)
        if (win[i].p)
            check_free(&win[i], "parent thread's block");
    return NULL;
}

/* Work done in the child, by its main thread and by a new thread. */
static void *child_work(void *arg)
{
    static const size_t sizes[] = {0, 1, 16, 100, 1000, 4096, 40000, 300000, 1 << 20,
                                   8 << 20};
    struct cmt_blk b[200];
    uint64_t rng = (uintptr_t)arg;
    size_t i, k;
    for (i = 0; i < 200; i++)
        make_block(&b[i], i < 10 ? sizes[i] : random_size(&rng), 99, i);
    for (i = 0; i < 200; i += 2)
        check_free(&b[i], "child block");
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 200; i += 2)
            make_block(&b[i], random_size(&rng), 98, i);
        for (i = 0; i < 200; i += 2)
            check_free(&b[i], "child block");
    }
    for (i = 1; i < 200; i += 2) {
        unsigned char *q;
        size_t n = random_size(&rng);
        CMT_VERIFY(b[i].p, b[i].n, b[i].seed, "child block before realloc");
        q = realloc(b[i].p, n);
        CMT_CHECK(q != NULL, "realloc(%zu) in the child returned NULL", n);
        CMT_VERIFY(q, b[i].n < n ? b[i].n : n, b[i].seed, "realloc in the child lost data");
        free(q);
    }
    return NULL;
}

static void child(unsigned round)
{
    pthread_t t;
    size_t i;
    alarm(CHILD_TIMEOUT);
    child_work((void *)(uintptr_t)(round + 1));
    CMT_CHECK(pthread_create(&t, NULL, child_work, (void *)(uintptr_t)(round + 1000)) == 0,
              "pthread_create in the child failed");
    pthread_join(t, NULL);
    for (i = 0; i < INHERITED; i++)
        check_free(&inherited[i], "block inherited by the child");
    _exit(0);
}

int main(void)
{
    pthread_t t[WORKERS];
    unsigned i, round;
    uint64_t rng = 5;
    for (i = 0; i < INHERITED; i++)
        make_block(&inherited[i], random_size(&rng), 1, i);
    for (i = 0; i < WORKERS; i++)
        CMT_CHECK(pthread_create(&t[i], NULL, parent_worker, (void *)(uintptr_t)(i + 10)) == 0,
                  "pthread_create failed");
    for (round = 0; round < FORKS; round++) {
        int status;
        pid_t pid;
        usleep(cmt_range(&rng, 0, 20000)); /* fork at varied points of the workers' work */
        pid = fork();
        CMT_CHECK(pid >= 0, "fork failed");
        if (pid == 0)
            child(round);
        CMT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
        if (WIFSIGNALED(status))
            CMT_FAIL("child %u killed by signal %d (%s)%s", round, WTERMSIG(status),
                     strsignal(WTERMSIG(status)),
                     WTERMSIG(status) == SIGALRM ? ": stuck, a lock held across fork?" : "");
        CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %u exited with status %d", round, WEXITSTATUS(status));
    }
    atomic_store(&stop, 1);
    for (i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    for (i = 0; i < INHERITED; i++)
        check_free(&inherited[i], "parent block after the forks");
    printf("core_fork: %d children passed\n", FORKS);
    return 0;
}
