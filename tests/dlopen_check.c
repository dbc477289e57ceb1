/* dlopen_check: the shared library can be loaded at run time with dlopen
 * (its initial-exec TLS fits glibc's static TLS surplus) and its cm_ API then
 * works from several threads, beside the system malloc it does not replace. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen_util.h"

static void *(*cm_malloc_fn)(size_t);
static void (*cm_free_fn)(void *);
static size_t (*cm_usable_fn)(const void *);

static void *work(void *arg) {
    uintptr_t seed = (uintptr_t)arg;
    for (int round = 0; round < 200; round++) {
        unsigned char *blocks[64];
        for (int i = 0; i < 64; i++) {
            size_t n = 1 + (seed = seed * 6364136223846793005u + 1442695040888963407u) % 40000;
            blocks[i] = cm_malloc_fn(n);
            if (!blocks[i] || cm_usable_fn(blocks[i]) < n) abort();
            memset(blocks[i], i, n);
        }
        for (int i = 0; i < 64; i++) {
            if (blocks[i][0] != (unsigned char)i) abort();
            cm_free_fn(blocks[i]);
        }
    }
    return NULL;
}

int main(void) {
    void *lib = cmt_dlopen_cm_lib();
    *(void **)&cm_malloc_fn = cmt_dlsym(lib, "cm_malloc");
    *(void **)&cm_free_fn = cmt_dlsym(lib, "cm_free");
    *(void **)&cm_usable_fn = cmt_dlsym(lib, "cm_usable_size");
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    char *system_block = malloc(32); /* still the system malloc */
    free(system_block);
    printf("dlopen: cm_ API works from 4 threads of a program that loaded the library at run time\n");
    return 0;
}
