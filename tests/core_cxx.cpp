// The C++ allocation operators exported by libcagemalloc.so: plain, array,
// nothrow, sized, aligned and nothrow aligned forms; alignment; usable
// memory; bad_alloc / nullptr on huge sizes and the new_handler protocol;
// and that the blocks are cagemalloc's (cm_usable_size accepts them).
#include "core_util.h"

#include <malloc.h>
#include <cstdint>
#include <new>

#include "cagemalloc.h"

namespace {

volatile size_t v_huge = SIZE_MAX / 2;
uint64_t seq;

// n bytes at p are usable, aligned to align, and belong to cagemalloc.
void use(void *p, size_t n, size_t align, const char *what)
{
    CMT_CHECK(p != nullptr, "%s(%zu) returned nullptr", what, n);
    CMT_CHECK(reinterpret_cast<uintptr_t>(p) % align == 0, "%s(%zu) = %p not %zu-aligned",
              what, n, p, align);
    CMT_CHECK(cm_usable_size(p) >= n, "%s(%zu) = %p: cm_usable_size %zu", what, n, p,
              cm_usable_size(p));
    CMT_CHECK(malloc_usable_size(p) == cm_usable_size(p),
              "%s: malloc_usable_size %zu != cm_usable_size %zu", what,
              malloc_usable_size(p), cm_usable_size(p));
    uint64_t seed = cmt_seed(p, n, 0, ++seq);
    cmt_fill(p, n, seed);
    cmt_escape(p);
    CMT_VERIFY(p, n, seed, what);
}

struct alignas(64) Line { char b[64]; };
struct alignas(4096) Page { char b[5000]; };

void test_plain_array_sized()
{
    for (size_t n = 1; n <= (size_t)1 << 22; n = n * 3 + 1) {
        void *p = ::operator new(n);
        use(p, n, n >= 16 ? 16 : 1, "operator new");
        if (n % 2)
            ::operator delete(p);
        else
            ::operator delete(p, n);
        p = ::operator new[](n);
        use(p, n, n >= 16 ? 16 : 1, "operator new[]");
        if (n % 2)
            ::operator delete[](p);
        else
            ::operator delete[](p, n);
        p = ::operator new(n, std::nothrow);
        use(p, n, n >= 16 ? 16 : 1, "operator new(nothrow)");
        ::operator delete(p, std::nothrow);
        p = ::operator new[](n, std::nothrow);
        use(p, n, n >= 16 ? 16 : 1, "operator new[](nothrow)");
        ::operator delete[](p, std::nothrow);
    }
    int *i = new int(7);
    use(i, sizeof *i, alignof(int), "new int");
    delete i;
    long *a = new long[1000];
    use(a, 1000 * sizeof *a, 16, "new long[1000]");
    delete[] a;
}

void test_aligned()
{
    Line *l = new Line;
    use(l, sizeof *l, 64, "new alignas(64)");
    delete l;
    Line *la = new Line[33];
    use(la, 33 * sizeof *la, 64, "new alignas(64)[33]");
    delete[] la;
    Page *pg = new Page;
    use(pg, sizeof *pg, 4096, "new alignas(4096)");
    delete pg;
    Page *pa = new Page[3];
    use(pa, 3 * sizeof *pa, 4096, "new alignas(4096)[3]");
    delete[] pa;
    Line *ln = new (std::nothrow) Line;
    use(ln, sizeof *ln, 64, "new (nothrow) alignas(64)");
    delete ln;

    for (size_t a = 32; a <= (size_t)1 << 22; a *= 8) {
        std::align_val_t al{a};
        const size_t sizes[] = {1, a, 3 * a + 1};
        for (size_t n : sizes) {
            void *p = ::operator new(n, al);
            use(p, n, a, "operator new(align_val_t)");
            ::operator delete(p, n, al);
            p = ::operator new[](n, al);
            use(p, n, a, "operator new[](align_val_t)");
            ::operator delete[](p, al);
            p = ::operator new(n, al, std::nothrow);
            use(p, n, a, "operator new(align_val_t, nothrow)");
            ::operator delete(p, al, std::nothrow);
            p = ::operator new[](n, al, std::nothrow);
            use(p, n, a, "operator new[](align_val_t, nothrow)");
            ::operator delete[](p, n, al);
        }
    }
    void *m = ::operator new(100, std::align_val_t(1 << 20));
    use(m, 100, 1 << 20, "operator new(100, align_val_t(1 MiB))");
    ::operator delete(m, std::align_val_t(1 << 20));
}

template <class F> void expect_bad_alloc(F f, const char *what)
{
    try {
        void *p = f();
        CMT_FAIL("%s returned %p instead of throwing std::bad_alloc", what, p);
    } catch (const std::bad_alloc &) {
    }
}

int handler_calls;
void new_handler()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

void test_huge()
{
    std::align_val_t al{64};
    expect_bad_alloc([] { return ::operator new(v_huge); }, "operator new(huge)");
    expect_bad_alloc([] { return ::operator new[](v_huge); }, "operator new[](huge)");
    expect_bad_alloc([al] { return ::operator new(v_huge, al); }, "operator new(huge, align)");
    expect_bad_alloc([al] { return ::operator new[](v_huge, al); },
                     "operator new[](huge, align)");
    CMT_CHECK(::operator new(v_huge, std::nothrow) == nullptr, "new(huge, nothrow) != nullptr");
    CMT_CHECK(::operator new[](v_huge, std::nothrow) == nullptr,
              "new[](huge, nothrow) != nullptr");
    CMT_CHECK(::operator new(v_huge, al, std::nothrow) == nullptr,
              "new(huge, align, nothrow) != nullptr");
    CMT_CHECK(::operator new[](v_huge, al, std::nothrow) == nullptr,
              "new[](huge, align, nothrow) != nullptr");

    // operator new must call the installed new_handler until it gives up.
    std::set_new_handler(new_handler);
    expect_bad_alloc([] { return ::operator new(v_huge); }, "operator new(huge) with handler");
    CMT_CHECK(handler_calls == 3, "new_handler called %d times, expected 3", handler_calls);
}

} // namespace

int main()
{
    test_plain_array_sized();
    test_aligned();
    test_huge();
    printf("core_cxx: all checks passed\n");
    return 0;
}
