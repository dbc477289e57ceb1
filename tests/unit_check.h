/* unit_check.h: the CHECK macro of the unit tests: print the failed
 * condition with its location and exit non-zero. */
#ifndef UNIT_CHECK_H
#define UNIT_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            exit(1);                                                                \
        }                                                                           \
    } while (0)
#endif
