/* sec_fuzz: a libFuzzer harness. The input is a program of allocation
 * operations on a table of 64 slots, run against the cm_ API: malloc, calloc,
 * realloc, aligned allocation (powers of two to 1 MiB) and free, sizes from 0
 * to 2 MiB (biased small). A shadow model keeps each slot's size and fill
 * byte; every block is checked in full before it is freed or reallocated,
 * the kept prefix after realloc, alignment, usable size and calloc's zeros. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cagemalloc.h"

#define SLOTS 64

struct slot {
    unsigned char *p;
    size_t n;
    unsigned char fill;
};

static void check_fill(const struct slot *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s->p[i] != s->fill) abort();
}

static size_t size_from(const uint8_t *d) {
    uint32_t v = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16;
    switch (d[0] & 3) {
    case 0: return v % 64;                /* tiny, 0 included */
    case 1: return v % 4096;              /* small */
    case 2: return v % (256u << 10);      /* medium */
    default: return v % (2u << 20);       /* large */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct slot slots[SLOTS] = {{0}};
    for (size_t at = 0; at + 5 <= size; at += 5) {
        const uint8_t *op = data + at;
        struct slot *s = &slots[op[1] % SLOTS];
        size_t n = size_from(op + 2);
        unsigned char fill = op[4];
        switch (op[0] % 6) {
        case 0: /* malloc */
        case 1: /* calloc */
        case 2: /* aligned */
            if (s->p) {
                check_fill(s, s->n);
                cm_free(s->p);
            }
            if (op[0] % 6 == 0) {
                s->p = cm_malloc(n);
            } else if (op[0] % 6 == 1) {
                s->p = cm_calloc(1, n);
                for (size_t i = 0; s->p && i < n; i++)
                    if (s->p[i]) abort();
            } else {
                size_t align = (size_t)1 << (op[4] % 21);
                s->p = cm_aligned_alloc(align, n);
                if (s->p && (uintptr_t)s->p % align) abort();
            }
            if (!s->p) abort(); /* every size here can be served */
            if (cm_usable_size(s->p) < n) abort();
            s->n = n;
            s->fill = fill;
            memset(s->p, fill, n);
            break;
        case 3: /* realloc */
            if (s->p) check_fill(s, s->n);
            {
                unsigned char *q = cm_realloc(s->p, n);
                if (n == 0 && s->p) { /* freed, as glibc does */
                    if (q) abort();
                    s->p = NULL;
                    break;
                }
                if (!q) abort();
                s->p = q;
                check_fill(s, s->n < n ? s->n : n);
                if (cm_usable_size(q) < n) abort();
                s->n = n;
                s->fill = fill;
                memset(q, fill, n);
            }
            break;
        default: /* free */
            if (s->p) {
                check_fill(s, s->n);
                cm_free(s->p);
                s->p = NULL;
            }
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p) {
            check_fill(&slots[i], slots[i].n);
            cm_free(slots[i].p);
        }
    return 0;
}
