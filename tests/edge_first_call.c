/* edge_first_call: what a program may call before its first allocation,
 * each case as the very first allocator call of a fresh process (this
 * program executed again with the case's name). free(NULL) and its kin
 * return; a pointer that is not ours is reported with one line and aborts,
 * as after initialisation. Before the fix, free(NULL) and free of a pointer
 * not ours, made first, read through a null descriptor base: SIGSEGV.
 *
 * The child runs with CAGEMALLOC_VERBOSE=1, so the allocator's
 * initialisation prints its report: it must come after the case's own line
 * (or the case ran on an initialised allocator and tested nothing), and an
 * aborting case must print nothing but its one line. After a case that
 * returns, the child allocates, fills, verifies and frees blocks, so the
 * allocator starts normally after it. */
#include "core_util.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "cagemalloc.h"

#define RETURNED "first call returned\n"
#define REPORT "cagemalloc: version "

static void (*volatile do_free)(void *) = free;
static void *(*volatile do_realloc)(void *, size_t) = realloc;
static size_t (*volatile do_usable_size)(void *) = malloc_usable_size;
static char not_ours[64] __attribute__((aligned(16)));

/* ---- in the child: no stdio and no allocation before the case ---- */

static void say(int fd, const char *s) {
    if (write(fd, s, strlen(s)) != (ssize_t)strlen(s)) _exit(5);
}

/* The line an aborting case must print, written to stdout for the parent. */
static void expect_abort(const char *func, const void *p) {
    char line[128];
    int n = snprintf(line, sizeof line, "cagemalloc: %s(): invalid pointer %p\n", func, p);
    if (write(1, line, (size_t)n) != n) _exit(5);
}

static void use_normally(void) {
    void *blocks[64];
    for (unsigned i = 0; i < 64; i++) {
        size_t n = 16 + 48 * (size_t)i;
        blocks[i] = malloc(n);
        if (!blocks[i]) _exit(6);
        cmt_fill(blocks[i], n, cmt_seed(blocks[i], n, 0, i));
    }
    for (unsigned i = 0; i < 64; i++) {
        size_t n = 16 + 48 * (size_t)i;
        if (cmt_mismatch(blocks[i], n, cmt_seed(blocks[i], n, 0, i)) != n) _exit(7);
        do_free(blocks[i]);
    }
}

/* The process's address space now, read without stdio (whose FILE would be
 * the first allocation). */
static size_t vm_bytes(void) {
    char buf[64] = {0};
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0 || read(fd, buf, sizeof buf - 1) <= 0) _exit(11);
    close(fd);
    return strtoul(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

/* No room for the descriptor region: the allocator never starts, every
 * allocation fails with ENOMEM, and free(NULL) still returns. */
static int without_address_space(void) {
    struct rlimit lim = {vm_bytes() + (256 << 10), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &lim) != 0) return 12;
    errno = 0;
    void *p = malloc(64);
    if (p != NULL || errno != ENOMEM) return 13;
    do_free(NULL);
    do_free(p);
    say(2, RETURNED);
    return 0;
}

static int run_case(const char *name) {
    if (!strcmp(name, "no_address_space")) return without_address_space();
    void *p = not_ours + 16;
    if (!strcmp(name, "free_null")) {
        do_free(NULL);
    } else if (!strcmp(name, "cm_free_null")) {
        cm_free(NULL);
    } else if (!strcmp(name, "usable_size_null")) {
        if (do_usable_size(NULL) != 0) return 8;
    } else if (!strcmp(name, "in_cage")) {
        if (cm_in_cage(p) || cm_in_cage(NULL)) return 8;
    } else if (!strcmp(name, "free_not_ours")) {
        expect_abort("free", p);
        do_free(p);
    } else if (!strcmp(name, "usable_size_not_ours")) {
        expect_abort("malloc_usable_size", p);
        do_usable_size(p);
    } else if (!strcmp(name, "realloc_not_ours")) {
        expect_abort("realloc", p);
        do_realloc(p, 32);
    } else {
        return 9;
    }
    say(2, RETURNED);
    use_normally();
    return 0;
}

/* ---- in the parent ---- */

struct outcome {
    int status;
    char out[256], err[4096];
};

static void read_all(int fd, char *buf, size_t cap) {
    size_t len = 0;
    ssize_t n;
    while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)n;
    buf[len] = '\0';
}

static void run_child(const char *name, struct outcome *o) {
    int out[2], err[2];
    CMT_CHECK(pipe(out) == 0 && pipe(err) == 0, "pipe failed");
    pid_t pid = fork();
    CMT_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        setenv("CAGEMALLOC_VERBOSE", "1", 1);
        execl("/proc/self/exe", "edge_first_call", name, (char *)NULL);
        _exit(10);
    }
    close(out[1]);
    close(err[1]);
    read_all(err[0], o->err, sizeof o->err); /* the report is short: the pipe never fills */
    read_all(out[0], o->out, sizeof o->out);
    close(out[0]);
    close(err[0]);
    CMT_CHECK(waitpid(pid, &o->status, 0) == pid, "waitpid failed");
}

static int check_returns(const char *name) {
    struct outcome o;
    run_child(name, &o);
    if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0) {
        printf("FAIL %s: %s %d; stderr: %s\n", name, WIFEXITED(o.status) ? "exit status" : "killed by signal",
               WIFEXITED(o.status) ? WEXITSTATUS(o.status) : WTERMSIG(o.status), o.err);
        return 0;
    }
    if (strncmp(o.err, RETURNED, strlen(RETURNED)) != 0 || !strstr(o.err, REPORT)) {
        printf("FAIL %s: the case was not the first call, or the allocator did not start after it; stderr:\n%s",
               name, o.err);
        return 0;
    }
    printf("ok %s\n", name);
    return 1;
}

static int check_without_address_space(void) {
    struct outcome o;
    run_child("no_address_space", &o);
    if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0 || strcmp(o.err, RETURNED) != 0) {
        printf("FAIL no_address_space: %s %d; stderr: %s\n", WIFEXITED(o.status) ? "exit status" : "signal",
               WIFEXITED(o.status) ? WEXITSTATUS(o.status) : WTERMSIG(o.status), o.err);
        return 0;
    }
    printf("ok no_address_space\n");
    return 1;
}

static int check_aborts(const char *name) {
    struct outcome o;
    run_child(name, &o);
    if (!WIFSIGNALED(o.status) || WTERMSIG(o.status) != SIGABRT || strcmp(o.err, o.out) != 0) {
        printf("FAIL %s: expected SIGABRT and \"%.*s\", got %s %d and stderr \"%s\"\n", name,
               (int)strcspn(o.out, "\n"), o.out, WIFSIGNALED(o.status) ? "signal" : "exit status",
               WIFSIGNALED(o.status) ? WTERMSIG(o.status) : WEXITSTATUS(o.status), o.err);
        return 0;
    }
    printf("ok %s\n", name);
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 2) return run_case(argv[1]);
    static const char *const returning[] = {"free_null", "cm_free_null", "usable_size_null", "in_cage"};
    static const char *const aborting[] = {"free_not_ours", "usable_size_not_ours", "realloc_not_ours"};
    int failures = 0;
    for (size_t i = 0; i < sizeof returning / sizeof *returning; i++) failures += !check_returns(returning[i]);
    for (size_t i = 0; i < sizeof aborting / sizeof *aborting; i++) failures += !check_aborts(aborting[i]);
    failures += !check_without_address_space();
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
