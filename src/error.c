/* error.c: the one-line reports: a misuse (then abort()), and a setting
 * that cannot be used. They format by hand and write with a raw system
 * call: no stdio, no malloc, safe wherever the misuse is found and during
 * initialisation. */
#include <stdlib.h>

#include "internal.h"

/* "cagemalloc: " and the parts (up to a NULL) into buf; returns the length.
 * At most 200 bytes of text, so a hex address and the newline still fit. */
static size_t begin_line(char *buf, const char *const parts[]) {
    size_t n = 0;
    for (const char *s = "cagemalloc: "; *s; s++) buf[n++] = *s;
    for (unsigned i = 0; parts[i]; i++)
        for (const char *s = parts[i]; *s && n < 200; s++) buf[n++] = *s;
    return n;
}

static void end_line(char *buf, size_t n) {
    buf[n++] = '\n';
    cm_os_write(2, buf, n);
}

void cm_fatal(const char *func, const char *what, const void *p) {
    char buf[256];
    size_t n = begin_line(buf, (const char *const[]){func, "(): ", what, " 0x", NULL});
    uintptr_t v = (uintptr_t)p;
    int shift = 60;
    while (shift > 0 && ((v >> shift) & 15) == 0) shift -= 4;
    for (; shift >= 0; shift -= 4) buf[n++] = "0123456789abcdef"[(v >> shift) & 15];
    end_line(buf, n);
    abort();
}

void cm_report_ignored(const char *name, const char *value, const char *why) {
    char buf[256];
    end_line(buf, begin_line(buf, (const char *const[]){name, "=", value, " ignored: ", why, NULL}));
}
