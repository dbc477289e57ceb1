/* sec_secure_env: frees a small block twice, after saying whether the process
 * runs privileged (AT_SECURE). sec_secure_env.sh runs it with
 * CAGEMALLOC_HARDEN=0, as an ordinary and as a set-user-ID process: only the
 * ordinary one may turn hardening off and so survive the double free. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>

static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;

int main(void) {
    printf("secure=%lu\n", getauxval(AT_SECURE));
    fflush(stdout);
    char *p = do_malloc(64);
    p[0] = 1;
    do_free(p);
    do_free(p);
    puts("survived");
    return 0;
}
