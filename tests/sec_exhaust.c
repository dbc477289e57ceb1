/* sec_exhaust: memory exhaustion under RLIMIT_AS. In a child limited to its
 * current address space plus 256 MiB, two threads allocate mixed sizes
 * (small, medium, large, calloc) until malloc fails: the failure must be NULL
 * with errno ENOMEM, never a crash; every block allocated before must still
 * hold its pattern; after half is freed allocation works again (the heap was
 * left consistent by the failed refills); after everything is freed, normal
 * allocation works. A request that can never be served fails the same way. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_BLOCKS 200000

struct hog {
    unsigned char *block[MAX_BLOCKS];
    size_t size[MAX_BLOCKS];
    int n;
    int enomem; /* the failure ended with errno ENOMEM */
};

static void *(*volatile do_malloc)(size_t) = malloc;
static void *(*volatile do_calloc)(size_t, size_t) = calloc;
static void (*volatile do_free)(void *) = free;

static void fail(const char *what) {
    fprintf(stderr, "sec_exhaust: %s\n", what);
    _exit(1);
}

static size_t size_for(int i) {
    switch (i % 4) {
    case 0: return 16 + (size_t)(i * 37) % 4080;
    case 1: return 64 << 10;
    case 2: return ((size_t)1 << 20) + (size_t)(i % 8) * ((size_t)1 << 20);
    default: return 200 + (size_t)i % 3000;
    }
}

static void fill(unsigned char *p, size_t n, int i) {
    p[0] = (unsigned char)i;
    p[n / 2] = (unsigned char)(i >> 8);
    p[n - 1] = (unsigned char)~i;
}
static int intact(const unsigned char *p, size_t n, int i) {
    return p[0] == (unsigned char)i && p[n / 2] == (unsigned char)(i >> 8) && p[n - 1] == (unsigned char)~i;
}

/* Allocate until failure; record whether it failed as it must. */
static void *hog(void *arg) {
    struct hog *h = arg;
    for (h->n = 0; h->n < MAX_BLOCKS; h->n++) {
        size_t n = size_for(h->n);
        errno = 0;
        unsigned char *p = h->n % 4 == 3 ? do_calloc(1, n) : do_malloc(n);
        if (!p) {
            h->enomem = errno == ENOMEM;
            return NULL;
        }
        if (h->n % 4 == 3 && (p[0] || p[n - 1])) fail("calloc returned dirty memory");
        fill(p, n, h->n);
        h->block[h->n] = p;
        h->size[h->n] = n;
    }
    fail("memory never ran out: RLIMIT_AS not effective");
    return NULL;
}

static long address_space_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib * 1024;
}

static void child(void) {
    static struct hog hogs[2];
    do_free(do_malloc(100)); /* initialise before the limit */
    struct rlimit lim = {(rlim_t)address_space_bytes() + (256 << 20), RLIM_INFINITY};
    lim.rlim_max = lim.rlim_cur;
    if (setrlimit(RLIMIT_AS, &lim) != 0) fail("setrlimit");
    pthread_t t;
    if (pthread_create(&t, NULL, hog, &hogs[1]) != 0) fail("pthread_create");
    hog(&hogs[0]);
    pthread_join(t, NULL);
    for (int k = 0; k < 2; k++) {
        if (!hogs[k].enomem) fail("allocation failed without errno ENOMEM");
        for (int i = 0; i < hogs[k].n; i++)
            if (!intact(hogs[k].block[i], hogs[k].size[i], i)) fail("a block was damaged by the exhaustion");
    }
    printf("exhausted after %d + %d blocks\n", hogs[0].n, hogs[1].n);
    fflush(stdout);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < hogs[k].n; i += 2) do_free(hogs[k].block[i]), hogs[k].block[i] = NULL;
    for (int i = 0; i < 1000; i++) {
        unsigned char *p = do_malloc(size_for(i));
        if (!p) fail("allocation failed after half was freed");
        fill(p, size_for(i), i);
        if (!intact(p, size_for(i), i)) fail("fresh block unusable");
        do_free(p);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 1; i < hogs[k].n; i += 2) {
            if (!intact(hogs[k].block[i], hogs[k].size[i], i)) fail("a surviving block was damaged");
            do_free(hogs[k].block[i]);
        }
    errno = 0;
    if (do_malloc((size_t)1 << 46) != NULL || errno != ENOMEM) fail("malloc(2^46) did not give NULL + ENOMEM");
    char *p = do_malloc(32 << 20);
    if (!p) fail("a 32 MiB block after freeing everything failed");
    memset(p, 1, 32 << 20);
    do_free(p);
    _exit(0);
}

int main(void) {
    pid_t pid = fork();
    if (pid == 0) child();
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "sec_exhaust: child ended with status 0x%x\n", status);
        return 1;
    }
    printf("exhaustion: NULL + ENOMEM, blocks intact, allocation works again after frees\n");
    return 0;
}
