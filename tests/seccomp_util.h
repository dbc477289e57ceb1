/* seccomp_util.h: a seccomp filter for the tests that run under one. The
 * caller's rules follow the prologue every filter needs: calls of another
 * architecture are allowed, and the system call number is loaded. */
#ifndef CM_SECCOMP_UTIL_H
#define CM_SECCOMP_UTIL_H

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>

/* 0, or -1 with errno set. Sets no_new_privs, as an unprivileged filter needs. */
static inline int seccomp_install(const struct sock_filter *rules, unsigned short n)
{
    struct sock_filter prog[64] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    };
    enum { PROLOGUE = 4 };
    if (n > sizeof prog / sizeof prog[0] - PROLOGUE) return -1;
    memcpy(prog + PROLOGUE, rules, n * sizeof *rules);
    struct sock_fprog fprog = {.len = (unsigned short)(n + PROLOGUE), .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog);
}

#endif
