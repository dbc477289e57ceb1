// override_new.cpp: the C++ operators new and delete, all forms (plain,
// array, nothrow, sized, aligned), exported by libcagemalloc.so.
//
// The library does not link libstdc++ (a C program preloading it should not
// load a C++ runtime). The two things operator new needs from it, the
// new-handler and throwing std::bad_alloc, are weak references: any program
// that can call operator new has libstdc++ loaded, so they resolve there.
#include <cstddef>
#include <cstdlib>
#include <new>

extern "C" {
__attribute__((visibility("hidden"))) void *cm_impl_malloc(std::size_t size);
__attribute__((visibility("hidden"))) void cm_impl_free(void *p);
__attribute__((visibility("hidden"))) void *cm_impl_aligned_alloc(std::size_t align, std::size_t size);
__attribute__((visibility("hidden"))) void *cm_impl_new(std::size_t size);  // override.c
}

namespace std {
__attribute__((weak)) new_handler get_new_handler() noexcept;
[[noreturn]] __attribute__((weak)) void __throw_bad_alloc();
}  // namespace std

namespace {

void *allocate(std::size_t size, std::size_t align) {
    return align ? cm_impl_aligned_alloc(align, size) : cm_impl_malloc(size);
}

// The standard's loop: call the new-handler until memory comes or there is
// no handler; then throw (or, for nothrow forms, return nullptr).
__attribute__((noinline)) void *allocate_slow(std::size_t size, std::size_t align, bool nothrow) {
    for (;;) {
        void *p = allocate(size, align);
        if (p) return p;
        std::new_handler handler = std::get_new_handler ? std::get_new_handler() : nullptr;
        if (!handler) {
            if (nothrow) return nullptr;
            if (std::__throw_bad_alloc) std::__throw_bad_alloc();
            std::abort();
        }
        handler();
    }
}

inline void *allocate_or_throw(std::size_t size, std::size_t align) {
    void *p = allocate(size, align);
    return p ? p : allocate_slow(size, align, false);
}

inline void *allocate_nothrow(std::size_t size, std::size_t align) noexcept {
    void *p = allocate(size, align);
    return p ? p : allocate_slow(size, align, true);
}

}  // namespace

// operator new's slow path, for cm_impl_new (override.c), whose fast path
// is malloc's: an empty bin, a large block, or no memory.
extern "C" __attribute__((visibility("hidden"))) void *cm_new_slow(std::size_t size) {
    return allocate_or_throw(size, 0);
}

#define CM_EXPORT __attribute__((visibility("default")))
using std::align_val_t;
using std::nothrow_t;
using std::size_t;

CM_EXPORT void *operator new(size_t n) { return cm_impl_new(n); }
CM_EXPORT void *operator new[](size_t n) { return cm_impl_new(n); }
CM_EXPORT void *operator new(size_t n, const nothrow_t &) noexcept { return allocate_nothrow(n, 0); }
CM_EXPORT void *operator new[](size_t n, const nothrow_t &) noexcept { return allocate_nothrow(n, 0); }
CM_EXPORT void *operator new(size_t n, align_val_t a) { return allocate_or_throw(n, size_t(a)); }
CM_EXPORT void *operator new[](size_t n, align_val_t a) { return allocate_or_throw(n, size_t(a)); }
CM_EXPORT void *operator new(size_t n, align_val_t a, const nothrow_t &) noexcept {
    return allocate_nothrow(n, size_t(a));
}
CM_EXPORT void *operator new[](size_t n, align_val_t a, const nothrow_t &) noexcept {
    return allocate_nothrow(n, size_t(a));
}

CM_EXPORT void operator delete(void *p) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete[](void *p) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete(void *p, const nothrow_t &) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete[](void *p, const nothrow_t &) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete(void *p, size_t) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete[](void *p, size_t) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete(void *p, align_val_t) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete[](void *p, align_val_t) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete(void *p, size_t, align_val_t) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete[](void *p, size_t, align_val_t) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete(void *p, align_val_t, const nothrow_t &) noexcept { cm_impl_free(p); }
CM_EXPORT void operator delete[](void *p, align_val_t, const nothrow_t &) noexcept { cm_impl_free(p); }
