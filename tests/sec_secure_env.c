/* sec_secure_env: says whether the process runs privileged (AT_SECURE) and
 * allocates. sec_secure_env.sh runs it with CAGEMALLOC_VERBOSE=1, as an
 * ordinary and as a set-user-ID process: only the ordinary one may read the
 * CAGEMALLOC_* variables, and so report what init decided. */
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
    puts("done");
    return 0;
}
