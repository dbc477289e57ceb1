/* exit_peak: run a program and write its peak RSS (KiB) to a file, read
 * from /proc/<pid>/status (VmHWM) when its main thread stops at exit
 * (ptrace's exit event, before the process's memory is torn down).
 *
 * Why: GNU time's %M is getrusage's ru_maxrss, which since Linux 6.2 the
 * kernel takes from its approximate per-CPU RSS counters at exit: a small
 * program's peak reads 60-270 KiB low, by an amount that varies from run
 * to run (BENCHMARKS.md). /proc's VmHWM is the larger of the process's RSS
 * now, which /proc sums exactly on this kernel, and the high-water mark the
 * kernel set when memory was last unmapped (from the approximate counters):
 * exact for a program whose peak is at its end, never below ru_maxrss.
 *
 *     exit_peak OUT_FILE PROGRAM [ARGS...]
 *
 * Only the main thread is traced (a stop at every thread's creation would
 * fall inside the time measured), so a program whose main thread leaves
 * before the others is read when it leaves: the caller takes the larger of
 * this and ru_maxrss. Exits with the program's status (128 + the signal
 * that killed it); writes nothing if the exit event never came. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

static long vm_hwm_kib(pid_t pid) {
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    const char *line = strstr(text, "\nVmHWM:");
    return line ? atol(line + 7) : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: exit_peak OUT_FILE PROGRAM [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("exit_peak: fork");
        return 2;
    }
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0); /* the exec below stops with SIGTRAP */
        execvp(argv[2], argv + 2);
        fprintf(stderr, "exit_peak: %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) return 2;
    if (!WIFSTOPPED(status)) return WIFEXITED(status) ? WEXITSTATUS(status) : 2; /* exec failed */
    ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
    ptrace(PTRACE_CONT, pid, 0, 0);
    while (waitpid(pid, &status, 0) == pid) {
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
        int sig = WSTOPSIG(status), event = status >> 16;
        if (event == PTRACE_EVENT_EXIT) {
            FILE *out = fopen(argv[1], "w");
            if (out) {
                fprintf(out, "%ld\n", vm_hwm_kib(pid));
                fclose(out);
            }
        }
        if (event) sig = 0; /* an exit or exec stop, no signal */
        ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig); /* other signals go on to the program */
    }
    return 2;
}
