/* edge_syscall_filter: a process under a seccomp allowlist made the way
 * tools make them, by tracing a program's system calls under glibc, which
 * opens files with openat and never with open. With the legacy open
 * killing the process (SECCOMP_RET_KILL_PROCESS), this program executes
 * itself and allocates: initialisation reads /proc/self/auxv (the vDSO's
 * clock must be found, so the read happened) and the code space reads
 * /proc/self/maps. Before the fix both opened with `open`: killed.
 * And under a filter that refuses mremap (EPERM), realloc of a large block
 * still grows it, by a copy (it returned NULL). */
#include "core_util.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cagemalloc.h"
#include "seccomp_util.h"

static int seven(void) { return 7; }

/* The child, under the filter: blocks in every size range, and code that
 * calls back into this program. */
static int run_filtered(void) {
    void *blocks[40];
    for (unsigned i = 0; i < 40; i++) {
        size_t n = (size_t)1 << (i % 24);
        blocks[i] = malloc(n);
        CMT_CHECK(blocks[i], "malloc(%zu)", n);
        cmt_fill(blocks[i], n, cmt_seed(blocks[i], n, 0, i));
    }
    for (unsigned i = 0; i < 40; i++) {
        size_t n = (size_t)1 << (i % 24);
        CMT_CHECK(cmt_mismatch(blocks[i], n, cmt_seed(blocks[i], n, 0, i)) == n, "block %u", i);
        free(blocks[i]);
    }
    unsigned char jmp[5] = {0xe9};
    char *code = cm_code_alloc(sizeof jmp, (const void *)seven);
    CMT_CHECK(code, "cm_code_alloc under the filter: errno %d", errno);
    int32_t rel = (int32_t)((intptr_t)seven - (intptr_t)(code + 5));
    memcpy(jmp + 1, &rel, 4);
    CMT_CHECK(cm_code_write(code, jmp, sizeof jmp) == 0, "cm_code_write");
    CMT_CHECK(((int (*)(void))code)() == 7, "generated jump to seven()");
    cm_code_free(code);
    return 0;
}

/* In the child of cmt_run_child (stderr captured): the filter, then this
 * program again, reporting its start-up. */
static void exec_filtered(void) {
    struct sock_filter rules[] = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    CMT_CHECK(seccomp_install(rules, sizeof rules / sizeof rules[0]) == 0, "seccomp filter: errno %d", errno);
    setenv("CAGEMALLOC_VERBOSE", "1", 1);
    execl("/proc/self/exe", "edge_syscall_filter", "filtered", (char *)NULL);
    _exit(127);
}

/* In a child: with mremap refused (EPERM), a large block grown by realloc
 * (to 8x, past whatever follows it) moves by a copy, contents kept, as
 * glibc's does. Before the fix: NULL and ENOMEM. */
static void realloc_without_mremap(void) {
    size_t small = (size_t)8 << 20, big = (size_t)64 << 20;
    unsigned char *p = malloc(small);
    CMT_CHECK(p, "malloc(8 MiB)");
    cmt_fill(p, small, 77);
    struct sock_filter rules[] = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mremap, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    CMT_CHECK(seccomp_install(rules, sizeof rules / sizeof rules[0]) == 0, "seccomp filter: errno %d", errno);
    unsigned char *q = realloc(p, big);
    CMT_CHECK(q, "realloc(8 MiB -> 64 MiB) with mremap refused: errno %d", errno);
    CMT_VERIFY(q, small, 77, "the grown block");
    memset(q + small, 1, big - small);
    free(q);
}

int main(int argc, char **argv) {
    (void)argc;
    if (argv[1] && strcmp(argv[1], "filtered") == 0) return run_filtered();
    char text[8192];
    int status = cmt_run_child(exec_filtered, text, sizeof text);
    CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the filtered child died (status 0x%x; %s)\n%s", status,
              WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS ? "killed for a system call" : "", text);
    CMT_CHECK(strstr(text, "clock: clock_gettime in the vDSO"), "initialisation did not find the vDSO clock:\n%s",
              text);
    printf("under a filter that kills `open`: allocation, the vDSO clock and the code space work\n");
    status = cmt_run_child(realloc_without_mremap, text, sizeof text);
    CMT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "realloc with mremap refused failed (status 0x%x)\n%s",
              status, text);
    printf("under a filter that refuses mremap: a large realloc copies\n");
    return 0;
}
