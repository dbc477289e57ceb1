// cagemalloc/member.hpp: compressed references for C++ (Oilpan's Member<T>),
// header-only, C++17. Objects live in the cage (cm_cage_malloc); a
// cm::Member<T> names one in 4 bytes, decompressed without a branch.
//
//   struct Node { int value; cm::Member<Node> left, right; };
//   Node *n = cm::make_caged<Node>();        // in the cage
//   n->left = cm::make_caged<Node>();        // 4 bytes per reference
//   std::vector<int, cm::CageAllocator<int>> v;   // a container in the cage
//   cm::delete_caged(n);                      // or cm_cage_free / cm_free / free
//
// A Member holds null, the sentinel (Member<T>::sentinel(), a non-null
// "no object" marker that compresses to 1) or a pointer into the cage:
// anything else cannot be compressed (checked when NDEBUG is not defined).
// Comparisons and std::hash use the 32-bit value alone; as in Oilpan, a
// Member converts to true when it is not null (the sentinel included).
#ifndef CAGEMALLOC_MEMBER_HPP
#define CAGEMALLOC_MEMBER_HPP

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "../cagemalloc.h"

namespace cm {

template <typename T>
class Member {
  public:
    constexpr Member() noexcept = default;
    constexpr Member(std::nullptr_t) noexcept {}
    Member(T *p) noexcept : raw_(cm_compress(p)) { assert(compressible(p)); }
    template <typename U, typename = std::enable_if_t<std::is_convertible_v<U *, T *>>>
    Member(const Member<U> &other) noexcept : Member(static_cast<T *>(other.get())) {}

    static Member sentinel() noexcept { return from_raw(1); }
    // The Member whose compressed value is raw (as raw() gave it).
    static Member from_raw(uint32_t raw) noexcept {
        Member m;
        m.raw_ = raw;
        return m;
    }

    T *get() const noexcept { return static_cast<T *>(cm_decompress(raw_)); }
    T *operator->() const noexcept { return get(); }
    T &operator*() const noexcept { return *get(); }
    explicit operator bool() const noexcept { return raw_ != 0; }
    uint32_t raw() const noexcept { return raw_; }

    friend bool operator==(Member a, Member b) noexcept { return a.raw_ == b.raw_; }
    friend bool operator!=(Member a, Member b) noexcept { return a.raw_ != b.raw_; }
    // An order on the compressed values (the order of the addresses, as
    // every cage address has the top bit of its value set).
    friend bool operator<(Member a, Member b) noexcept { return a.raw_ < b.raw_; }

  private:
    static bool compressible(const void *p) noexcept {
        return p == nullptr || p == CM_SENTINEL || cm_in_cage(p);
    }
    uint32_t raw_ = 0;
};

// Standard containers in the cage: std::vector<T, cm::CageAllocator<T>>.
template <typename T>
struct CageAllocator {
    using value_type = T;
    CageAllocator() noexcept = default;
    template <typename U>
    CageAllocator(const CageAllocator<U> &) noexcept {}

    T *allocate(std::size_t n) {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
        void *p = alignof(T) > 16 ? cm_cage_aligned_alloc(alignof(T), n * sizeof(T)) : cm_cage_malloc(n * sizeof(T));
        if (!p) throw std::bad_alloc();
        return static_cast<T *>(p);
    }
    void deallocate(T *p, std::size_t) noexcept { cm_cage_free(p); }

    friend bool operator==(const CageAllocator &, const CageAllocator &) noexcept { return true; }
    friend bool operator!=(const CageAllocator &, const CageAllocator &) noexcept { return false; }
};

// A T constructed in the cage; std::bad_alloc when the cage is full.
template <typename T, typename... Args>
T *make_caged(Args &&...args) {
    T *p = CageAllocator<T>().allocate(1);
    try {
        return ::new (static_cast<void *>(p)) T(std::forward<Args>(args)...);
    } catch (...) {
        cm_cage_free(p);
        throw;
    }
}

// Destroy and free an object of make_caged.
template <typename T>
void delete_caged(T *p) noexcept {
    if (!p) return;
    p->~T();
    cm_cage_free(const_cast<std::remove_cv_t<T> *>(p));
}

static_assert(sizeof(Member<int>) == 4, "a Member is 4 bytes");
static_assert(std::is_trivially_copyable_v<Member<int>>, "copying a Member copies 32 bits");

}  // namespace cm

template <typename T>
struct std::hash<cm::Member<T>> {
    std::size_t operator()(cm::Member<T> m) const noexcept { return std::hash<uint32_t>{}(m.raw()); }
};

#endif  // CAGEMALLOC_MEMBER_HPP
