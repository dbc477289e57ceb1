/* error.c: the one-line reports: a misuse (then abort()), and a setting
 * that cannot be used. They format by hand and write with a raw system
 * call: no stdio, no malloc, safe wherever the misuse is found and during
 * initialisation. */
#include <stdlib.h>

#include "internal.h"

static size_t append(char *buf, size_t at, const char *s) {
    while (*s && at < 200) buf[at++] = *s++;
    return at;
}

void cm_fatal(const char *func, const char *what, const void *p) {
    char buf[256];
    size_t n = append(buf, 0, "cagemalloc: ");
    n = append(buf, n, func);
    n = append(buf, n, "(): ");
    n = append(buf, n, what);
    n = append(buf, n, " 0x");
    uintptr_t v = (uintptr_t)p;
    int shift = 60;
    while (shift > 0 && ((v >> shift) & 15) == 0) shift -= 4;
    for (; shift >= 0; shift -= 4) buf[n++] = "0123456789abcdef"[(v >> shift) & 15];
    buf[n++] = '\n';
    cm_os_write(2, buf, n);
    abort();
}

void cm_report_ignored(const char *name, const char *value, const char *why) {
    char buf[256];
    size_t n = append(buf, 0, "cagemalloc: ");
    n = append(buf, n, name);
    n = append(buf, n, "=");
    n = append(buf, n, value);
    n = append(buf, n, " ignored: ");
    n = append(buf, n, why);
    buf[n++] = '\n';
    cm_os_write(2, buf, n);
}
