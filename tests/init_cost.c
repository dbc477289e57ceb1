/* init_cost: what the library costs a process. Loading it maps nothing
 * (nothing runs until the first allocation); the first allocation reserves
 * the descriptor region (address space only) and maps the first chunk and
 * page-map region, touching little: the resident set grows by well under
 * 4 MiB. Prints the numbers the README quotes. */
#include "core_util.h"

#include "cagemalloc.h"

static void *(*volatile do_malloc)(size_t) = malloc;

int main(void)
{
    cm_stats_t s;
    cm_stats_get(&s);
    CMT_CHECK(s.mapped == 0, "the library mapped %zu bytes before the first allocation", s.mapped);
    size_t before = cmt_rss();
    char *p = do_malloc(16);
    CMT_CHECK(p != NULL, "malloc");
    p[0] = 1;
    size_t grew = cmt_rss() - before;
    cm_stats_get(&s);
    printf("first allocation: %zu KiB of address space mapped or reserved, resident set +%zu KiB\n",
           s.mapped >> 10, grew >> 10);
    CMT_CHECK(grew < ((size_t)4 << 20), "the first allocation made %zu KiB resident", grew >> 10);
    free(p);
    return 0;
}
