/* smaps_util.h: the process's mappings as /proc/self/smaps lists them (bounds,
 * permissions, path, VmFlags, AnonHugePages), for the tests of what the kernel does with
 * our mappings (edge_thp, edge_core_dump). */
#ifndef SMAPS_UTIL_H
#define SMAPS_UTIL_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct smaps_entry {
    uintptr_t lo, hi;
    char perms[5];    /* "rw-p", "---p", ... */
    char path[256];   /* "" for anonymous memory */
    char flags[192];  /* the VmFlags line's two-letter flags, each after a space */
    long huge_kib;    /* AnonHugePages */
} smaps_entry_t;

#define SMAPS_MAX 8192
static smaps_entry_t smaps_table[SMAPS_MAX];

/* Read the mappings now; returns their count (exits if smaps cannot be read). */
static inline size_t smaps_read(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) {
        perror("/proc/self/smaps");
        exit(1);
    }
    char line[512];
    size_t n = 0;
    smaps_entry_t *cur = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        unsigned long lo, hi;
        int path_at = 0;
        char dash;
        char perms[5];
        if (sscanf(line, "%lx%c%lx %4s %*s %*s %*s %n", &lo, &dash, &hi, perms, &path_at) == 4 && dash == '-') {
            cur = n < SMAPS_MAX ? &smaps_table[n++] : NULL;
            if (cur) {
                *cur = (smaps_entry_t){.lo = lo, .hi = hi};
                memcpy(cur->perms, perms, sizeof perms);
                snprintf(cur->path, sizeof cur->path, "%.*s", (int)sizeof cur->path - 1, path_at ? line + path_at : "");
            }
        } else if (cur && strncmp(line, "AnonHugePages:", 14) == 0) {
            cur->huge_kib = atol(line + 14);
        } else if (cur && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(cur->flags, sizeof cur->flags, "%.*s", (int)sizeof cur->flags - 1, line + 8);
        }
    }
    fclose(f);
    return n;
}

/* The mapping holding a, NULL if none (among the n read). */
static inline const smaps_entry_t *smaps_find(size_t n, const void *a) {
    for (size_t i = 0; i < n; i++)
        if ((uintptr_t)a >= smaps_table[i].lo && (uintptr_t)a < smaps_table[i].hi) return &smaps_table[i];
    return NULL;
}

/* Whether the mapping carries a VmFlags flag ("nh": no huge pages, "dd": not dumped). */
static inline bool smaps_flag(const smaps_entry_t *e, const char *flag) {
    for (const char *p = e->flags; (p = strstr(p, flag)) != NULL; p += 2)
        if (p > e->flags && p[-1] == ' ' && (p[2] == ' ' || p[2] == '\0')) return true;
    return false;
}
#endif
