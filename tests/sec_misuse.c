/* sec_misuse: misuse is reported with one line and abort(), never silent.
 * Each case runs in a forked child; the parent checks it died of SIGABRT
 * and that its stderr is exactly the expected line naming the pointer. A
 * forged free-list link must abort before the forged address is handed out.
 * Valid heavy use must exit cleanly with nothing on stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cagemalloc.h"

static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;
static void *(*volatile do_realloc)(void *, size_t) = realloc;

static char forged_target[256] __attribute__((aligned(64)));
static int expect_fd = -1; /* in the child: where the case says which line it expects */
static int failures;

typedef void (*case_fn)(void);

static void expect(const char *func, const char *what, const void *p) {
    char line[160];
    int n = snprintf(line, sizeof line, "cagemalloc: %s(): %s %p\n", func, what, p);
    if (write(expect_fd, line, (size_t)n) != n) _exit(4);
}

/* ---- the cases: each sets `expected` and then misbehaves ---- */
static void double_free(void) {
    char *p = do_malloc(64);
    expect("free", "double free", p);
    do_free(p);
    do_free(p);
}
/* cm_cage_free reports misuse as free does (as cm_free does) */
static void cage_double_free(void) {
    char *p = cm_cage_malloc(64);
    expect("free", "double free", p);
    cm_cage_free(p);
    cm_cage_free(p);
}
static void cage_free_interior(void) {
    char *p = cm_cage_malloc(64);
    expect("free", "invalid pointer", p + 16);
    cm_cage_free(p + 16);
}
static void double_free_later(void) {
    char *p = do_malloc(64), *others[10];
    for (int i = 0; i < 10; i++) others[i] = do_malloc(64);
    expect("free", "double free", p);
    do_free(p);
    for (int i = 0; i < 10; i++) do_free(others[i]);
    do_free(p);
}
/* Blocks freed by a thread that does not own them wait in its remote batch
 * (remote.c): a second free is caught there, by that thread or the owner. */
static char *remote_blocks[4];
static void *free_twice_remotely(void *arg) {
    (void)arg;
    expect("free", "double free", remote_blocks[2]);
    for (int i = 0; i < 4; i++) do_free(remote_blocks[i]);
    do_free(remote_blocks[2]);
    return NULL;
}
static void remote_double_free(void) {
    for (int i = 0; i < 4; i++) remote_blocks[i] = do_malloc(64);
    pthread_t t;
    pthread_create(&t, NULL, free_twice_remotely, NULL);
    pthread_join(t, NULL);
}
static int remote_freed;
static void *free_and_stay(void *arg) {
    for (int i = 0; i < 4; i++) do_free(remote_blocks[i]);
    __atomic_store_n(&remote_freed, 1, __ATOMIC_RELEASE);
    pause(); /* alive: its batch keeps waiting */
    return arg;
}
static void remote_then_owner_double_free(void) {
    for (int i = 0; i < 4; i++) remote_blocks[i] = do_malloc(64);
    pthread_t t;
    pthread_create(&t, NULL, free_and_stay, NULL);
    while (!__atomic_load_n(&remote_freed, __ATOMIC_ACQUIRE)) usleep(1000);
    expect("free", "double free", remote_blocks[1]);
    do_free(remote_blocks[1]);
}
/* The owner's second free finds the block where the first one's left it:
 * the anchor list, once the freeing thread has exited (its batch handed
 * over), or the bin, which a refill filled from the local list. */
static void *free_and_exit(void *arg) {
    for (int i = 0; i < 4; i++) do_free(remote_blocks[i]);
    return arg;
}
static void remote_exit_then_owner_double_free(void) {
    for (int i = 0; i < 4; i++) remote_blocks[i] = do_malloc(64);
    pthread_t t;
    pthread_create(&t, NULL, free_and_exit, NULL);
    pthread_join(t, NULL);
    expect("free", "double free", remote_blocks[3]);
    do_free(remote_blocks[3]);
}
static void double_free_in_bin(void) {
    char *first = do_malloc(96), *second = do_malloc(96);
    do_free(first);
    do_free(second);
    char *again; /* the bin's blocks first, then what the refill took from the local list */
    do again = do_malloc(96);
    while (again != first && again != second);
    char *waiting = again == second ? first : second;
    expect("free", "double free", waiting);
    do_free(waiting);
}
/* A second free by a thread that does not own the block finds it on its
 * owner's lists, read as they stand: the local list, the bin; or, the owner
 * gone, the anchor (abandoned superblocks keep their free blocks there). */
static char *freed_block;
static void *free_freed_block(void *arg) {
    expect("free", "double free", freed_block);
    do_free(freed_block);
    return arg;
}
static void free_in_other_thread(char *p) {
    freed_block = p;
    pthread_t t;
    pthread_create(&t, NULL, free_freed_block, NULL);
    pthread_join(t, NULL);
}
static void owner_then_remote_double_free(void) {
    char *p = do_malloc(64), *live = do_malloc(64);
    do_free(p);
    free_in_other_thread(p);
    do_free(live);
}
static void bin_then_remote_double_free(void) {
    char *first = do_malloc(96), *second = do_malloc(96);
    do_free(first);
    do_free(second);
    char *again;
    do again = do_malloc(96);
    while (again != first && again != second);
    free_in_other_thread(again == second ? first : second);
}
static void *free_one_and_exit(void *arg) {
    freed_block = do_malloc(64);
    remote_blocks[0] = do_malloc(64); /* stays live: the superblock stays partial */
    do_free(freed_block);
    return arg;
}
static void abandoned_double_free(void) {
    pthread_t t;
    pthread_create(&t, NULL, free_one_and_exit, NULL);
    pthread_join(t, NULL);
    expect("free", "double free", freed_block);
    do_free(freed_block);
}
static void free_stack(void) {
    char on_stack[32];
    expect("free", "invalid pointer", on_stack);
    do_free(on_stack);
}
static void free_interior_small(void) {
    char *p = do_malloc(64);
    expect("free", "invalid pointer", p + 16);
    do_free(p + 16);
}
static void free_interior_large(void) {
    char *p = do_malloc(1 << 20);
    expect("free", "invalid pointer", p + 4096);
    do_free(p + 4096);
}
static void free_foreign_mmap(void) {
    void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect("free", "invalid pointer", m);
    do_free(m);
}
static void realloc_stack(void) {
    char on_stack[32];
    expect("realloc", "invalid pointer", on_stack);
    do_realloc(on_stack, 100);
}
static void double_free_of(size_t size) {
    char *p = do_malloc(size);
    p[0] = 1;
    expect("free", "double free", p);
    do_free(p);
    do_free(p);
}
static void double_free_large(void) { double_free_of(2 << 20); }
/* a block of 128 KiB - 1 MiB is a span of the arena, not a mapping */
static void double_free_span(void) { double_free_of(300 << 10); }
/* A use-after-free write over a freed block's first word: a later malloc of
 * its class must abort, not hand out the forged or a wild address. The block
 * waits on its superblock's local free list, which malloc takes when the
 * blocks before it are used up: within a superblock's worth of mallocs. */
static void write_after_free(void (*write)(char *freed)) {
    char *p = do_malloc(64);
    do_free(p);
    write(p);
    expect("malloc", "corrupted free list", p);
    for (int i = 0; i < 4096; i++)
        if ((char *)do_malloc(64) == forged_target) {
            fprintf(stderr, "FORGED: malloc returned the forged address\n");
            _exit(0);
        }
}
static void write_pointer(char *freed) {
    void *target = forged_target;
    memcpy(freed, &target, sizeof target);
}
static void write_int_at_4(char *freed) {
    uint32_t v = 0x12345678;
    memcpy(freed + 4, &v, sizeof v);
}
static void decrement_first_word(char *freed) {
    uintptr_t w;
    memcpy(&w, freed, sizeof w);
    w--;
    memcpy(freed, &w, sizeof w);
}
static void forged_link(void) { write_after_free(write_pointer); }
/* The same forgery deeper in the local free list of a superblock that
 * malloc_trim settles (counting its free blocks, its list not walked: the
 * superblock's count knows its length) and keeps for a live block: the
 * malloc that reaches the forged link stops there. */
static void forged_link_after_trim(void) {
    char *live = do_malloc(64), *a = do_malloc(64), *p = do_malloc(64), *q = do_malloc(64);
    live[0] = 1;
    expect("malloc", "corrupted free list", p);
    do_free(a);
    do_free(p);
    do_free(q);
    write_pointer(p);
    malloc_trim(0);
    for (int i = 0; i < 100; i++) do_malloc(64); /* the settled bin's blocks come first */
}
static void uaf_int_at_4(void) { write_after_free(write_int_at_4); }
static void uaf_decrement(void) { write_after_free(decrement_first_word); }

static void *valid_worker(void *arg) {
    uint64_t x = (uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        size_t n = 1 + (x >> 33) % 70000;
        char *p = (x & 1) ? do_malloc(n) : calloc(1, n);
        memset(p, 7, n);
        p = do_realloc(p, n / 2 + 1);
        if (p[0] != 7) abort();
        do_free(p);
        void *a = aligned_alloc(64 << (x >> 60 & 7), 100);
        do_free(a);
    }
    return NULL;
}
static void valid_use(void) {
    pthread_t t[3];
    for (uintptr_t i = 0; i < 3; i++) pthread_create(&t[i], NULL, valid_worker, (void *)(i + 1));
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    _exit(0);
}

static size_t read_all(int fd, char *buf, size_t cap) {
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    buf[len] = '\0';
    close(fd);
    return len;
}

/* Run fn in a child whose stderr and expected line come back on pipes. A
 * misuse case must die of SIGABRT having printed exactly the expected line;
 * valid use must exit 0 having printed nothing. */
static void run_case(const char *name, case_fn fn) {
    int err[2], exp[2];
    if (pipe(err) != 0 || pipe(exp) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        close(err[0]);
        close(exp[0]);
        expect_fd = exp[1];
        dup2(err[1], 2);
        fn();
        _exit(3); /* the case returned: the misuse went unnoticed */
    }
    close(err[1]);
    close(exp[1]);
    char out[512], want[160];
    size_t len = read_all(err[0], out, sizeof out);
    read_all(exp[0], want, sizeof want);
    int status;
    waitpid(pid, &status, 0);
    bool ok = fn == valid_use ? WIFEXITED(status) && WEXITSTATUS(status) == 0 && len == 0
                              : WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strcmp(out, want) == 0;
    printf("%-20s: %s", name, ok ? "ok" : "FAILED");
    if (!ok) {
        failures++;
        printf(" (status 0x%x, expected: %s", status, *want ? want : "a clean exit\n");
        printf("   got: %s)\n", len ? out : "nothing\n");
    } else {
        printf("%s%s", len ? " -> " : "\n", out);
    }
}

int main(void) {
    static const struct {
        const char *name;
        case_fn fn;
    } cases[] = {
        {"double_free", double_free},         {"double_free_later", double_free_later},
        {"free_stack", free_stack},           {"free_interior_small", free_interior_small},
        {"free_interior_large", free_interior_large}, {"free_foreign_mmap", free_foreign_mmap},
        {"realloc_stack", realloc_stack},     {"double_free_large", double_free_large},
        {"double_free_span", double_free_span},
        {"forged_link", forged_link},         {"forged_link_after_trim", forged_link_after_trim},
        {"uaf_int_at_4", uaf_int_at_4},
        {"uaf_decrement", uaf_decrement},
        {"cage_double_free", cage_double_free}, {"cage_free_interior", cage_free_interior},
        {"remote_double_free", remote_double_free},
        {"remote_then_owner_double_free", remote_then_owner_double_free},
        {"remote_exit_then_owner_double_free", remote_exit_then_owner_double_free},
        {"double_free_in_bin", double_free_in_bin},
        {"owner_then_remote_double_free", owner_then_remote_double_free},
        {"bin_then_remote_double_free", bin_then_remote_double_free},
        {"abandoned_double_free", abandoned_double_free},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i].name, cases[i].fn);
    run_case("valid_use", valid_use);
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
