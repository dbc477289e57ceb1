/* error.c: the one-line report of a misuse, then abort(). It formats by hand
 * and writes with a raw system call: no stdio, no malloc, safe wherever the
 * misuse is found. */
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
