/* dlopen_util.h: for the tests that load libcagemalloc.so with dlopen
 * instead of linking it: open the library named by CM_LIB and find one of
 * its cm_ functions (exiting with a message if either fails). */
#ifndef DLOPEN_UTIL_H
#define DLOPEN_UTIL_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *cmt_dlopen_cm_lib(void) {
    const char *path = getenv("CM_LIB");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        fprintf(stderr, "dlopen failed: %s\n", path ? dlerror() : "CM_LIB not set");
        exit(1);
    }
    return lib;
}

static void *cmt_dlsym(void *lib, const char *name) {
    void *fn = dlsym(lib, name);
    if (!fn) {
        fprintf(stderr, "%s not found in the library\n", name);
        exit(1);
    }
    return fn;
}
#endif
