/* edge_dlclose: a program dlopens the library for its cm_ API, uses it from a
 * thread, dlcloses it, and only then lets the thread exit. The thread's exit
 * hook (a pthread key destructor inside the library) must not run code that
 * was unmapped: the library stays loaded (-z nodelete), and the thread's
 * blocks, pattern-checked, were valid until it freed them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen_util.h"

static void *(*cm_malloc_fn)(size_t);
static void (*cm_free_fn)(void *);
static atomic_int used, closed;

static void *user(void *arg) {
    (void)arg;
    unsigned char *b[32];
    for (int i = 0; i < 32; i++) {
        b[i] = cm_malloc_fn(64 + (size_t)i * 100);
        if (!b[i]) abort();
        memset(b[i], i, 64 + (size_t)i * 100);
    }
    for (int i = 0; i < 32; i += 2) { /* half freed now, half kept in the cache */
        for (size_t k = 0; k < 64 + (size_t)i * 100; k++)
            if (b[i][k] != (unsigned char)i) abort();
        cm_free_fn(b[i]);
    }
    atomic_store(&used, 1);
    while (!atomic_load(&closed)) sched_yield();
    return NULL; /* the exit hook runs now, after dlclose */
}

int main(void) {
    void *lib = cmt_dlopen_cm_lib();
    *(void **)&cm_malloc_fn = cmt_dlsym(lib, "cm_malloc");
    *(void **)&cm_free_fn = cmt_dlsym(lib, "cm_free");
    pthread_t t;
    pthread_create(&t, NULL, user, NULL);
    while (!atomic_load(&used)) sched_yield();
    if (dlclose(lib) != 0) {
        fprintf(stderr, "dlclose failed: %s\n", dlerror());
        return 1;
    }
    atomic_store(&closed, 1);
    pthread_join(t, NULL);
    printf("dlclose: a thread that used the cm_ API exits cleanly after the library was closed\n");
    return 0;
}
