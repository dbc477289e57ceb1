/* unit_getrandom: seeding the secret never blocks. getrandom with flags 0
 * waits until the kernel's entropy pool is initialised (early boot, some
 * containers); the allocator must ask with GRND_NONBLOCK and fall back to
 * the AT_RANDOM bytes the kernel gives every process. Two children, each
 * under a seccomp filter installed before the allocator's first use:
 *  - one kills the process on a getrandom call without GRND_NONBLOCK;
 *  - one makes every getrandom fail (ENOSYS): the allocator still starts,
 *    with a secret that is not the same in two processes. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "seccomp_util.h"
#include "unit_check.h"

static void install_filter(unsigned blocking_action, unsigned nonblocking_action) {
    struct sock_filter rules[] = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, GRND_NONBLOCK, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, nonblocking_action),
        BPF_STMT(BPF_RET | BPF_K, blocking_action),
    };
    CHECK(seccomp_install(rules, sizeof rules / sizeof rules[0]) == 0, "seccomp filter");
}

/* In a child: filter, then the allocator's first use; report its secret. */
static uintptr_t child_secret(unsigned blocking_action, unsigned nonblocking_action) {
    int fd[2];
    CHECK(pipe(fd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        install_filter(blocking_action, nonblocking_action);
        char *p = cm_malloc(100);
        if (!p) _exit(2);
        memset(p, 1, 100);
        cm_free(p);
        if (write(fd[1], &cm_link_key, sizeof cm_link_key) != sizeof cm_link_key) _exit(3);
        _exit(0);
    }
    close(fd[1]);
    uintptr_t key = 0;
    ssize_t got = read(fd[0], &key, sizeof key);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == sizeof key,
          "the allocator's first use under the filter failed (status 0x%x): a blocking getrandom?", status);
    return key;
}

int main(void) {
    child_secret(SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ALLOW);
    uintptr_t a = child_secret(SECCOMP_RET_ERRNO | ENOSYS, SECCOMP_RET_ERRNO | ENOSYS);
    uintptr_t b = child_secret(SECCOMP_RET_ERRNO | ENOSYS, SECCOMP_RET_ERRNO | ENOSYS);
    CHECK(a != b, "without getrandom two processes got the same secret");
    printf("getrandom: never blocking, and seeded from AT_RANDOM without it\n");
    return 0;
}
