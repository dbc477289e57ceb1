// cage_member: cm::Member<T>, cm::CageAllocator<T> and cm::make_caged
// (include/cagemalloc/member.hpp). Size and copying, null and sentinel,
// get/->/*, bool, ==, != and < and std::hash on the 32-bit value, converting
// a Member<Derived> to a Member<Base>; std::vector, std::unordered_map and
// std::map with every element in the cage; make_caged of an over-aligned
// type, and of a type whose constructor throws (nothing leaks: the cage's
// block is reused); a linked list of Members whose contents are verified.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cagemalloc/member.hpp"

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            std::fprintf(stderr, __VA_ARGS__);                    \
            std::fputc('\n', stderr);                             \
            std::exit(1);                                         \
        }                                                         \
    } while (0)

struct Node {
    uint64_t value;
    cm::Member<Node> next;
    explicit Node(uint64_t v) : value(v) {}
};
static_assert(sizeof(Node) == 16, "a value and one 4-byte reference, padded to 16");

struct Base {
    uint64_t tag = 7;
};
struct Derived : Base {
    uint64_t extra = 9;
};

struct alignas(256) Wide {
    char bytes[300];
};

struct Throws {
    static int made;
    explicit Throws(bool fail) {
        if (fail) throw std::runtime_error("constructor failed");
        made++;
    }
};
int Throws::made = 0;

static void test_member() {
    static_assert(sizeof(cm::Member<Node>) == 4);
    cm::Member<Node> null, null2 = nullptr;
    CHECK(!null && null == null2 && null.raw() == 0 && null.get() == nullptr, "null Member");
    auto s = cm::Member<Node>::sentinel();
    CHECK(s.raw() == 1 && s.get() == static_cast<Node *>(CM_SENTINEL) && bool(s) && s != null, "sentinel Member");
    Node *a = cm::make_caged<Node>(1), *b = cm::make_caged<Node>(2);
    CHECK(cm_in_cage(a) && cm_in_cage(b), "make_caged outside the cage");
    cm::Member<Node> ma = a, mb = b, ma2 = ma;
    CHECK(ma.get() == a && ma->value == 1 && (*mb).value == 2 && bool(ma), "get, ->, *");
    CHECK(ma == ma2 && ma != mb && ma.raw() == cm_compress(a) && (ma.raw() >> 31) == 1, "== and raw");
    CHECK((ma < mb) == (a < b) && (null < ma) && (s < ma), "< follows the addresses");
    CHECK(std::hash<cm::Member<Node>>{}(ma) == std::hash<uint32_t>{}(ma.raw()), "hash of the 32-bit value");
    std::memcpy(&ma2, &mb, 4); // copying a Member copies 32 bits
    CHECK(ma2 == mb, "memcpy of a Member");
    CHECK(cm::Member<Node>::from_raw(ma.raw()) == ma, "from_raw");
    ma = nullptr;
    CHECK(!ma, "assigning nullptr");
    Derived *d = cm::make_caged<Derived>();
    cm::Member<Derived> md = d;
    cm::Member<Base> mbase = md;
    CHECK(mbase.get() == static_cast<Base *>(d) && mbase->tag == 7, "Member<Derived> to Member<Base>");
    cm::delete_caged(d);
    cm::delete_caged(a);
    cm::delete_caged(b);
}

static void test_containers() {
    std::vector<uint64_t, cm::CageAllocator<uint64_t>> v;
    for (uint64_t i = 0; i < 100000; i++) v.push_back(i * 3);
    CHECK(cm_in_cage(v.data()) && cm_in_cage(&v.back()), "vector storage outside the cage");
    for (uint64_t i = 0; i < v.size(); i++) CHECK(v[i] == i * 3, "vector element %llu", (unsigned long long)i);

    using Map = std::unordered_map<uint32_t, uint64_t, std::hash<uint32_t>, std::equal_to<uint32_t>,
                                   cm::CageAllocator<std::pair<const uint32_t, uint64_t>>>;
    Map m;
    for (uint32_t i = 0; i < 50000; i++) m.emplace(i, uint64_t(i) * 7);
    for (auto &kv : m) CHECK(cm_in_cage(&kv) && kv.second == uint64_t(kv.first) * 7, "unordered_map node");
    for (uint32_t i = 0; i < 50000; i += 2) m.erase(i);
    CHECK(m.size() == 25000 && m.at(1) == 7, "unordered_map after erase");

    std::map<int, int, std::less<int>, cm::CageAllocator<std::pair<const int, int>>> ordered;
    for (int i = 0; i < 1000; i++) ordered[i] = -i;
    for (auto &kv : ordered) CHECK(cm_in_cage(&kv) && kv.second == -kv.first, "map node");

    // a set of Members hashed on 32 bits
    std::unordered_set<cm::Member<Node>, std::hash<cm::Member<Node>>, std::equal_to<cm::Member<Node>>,
                       cm::CageAllocator<cm::Member<Node>>>
        set;
    std::vector<Node *> nodes;
    for (uint64_t i = 0; i < 1000; i++) nodes.push_back(cm::make_caged<Node>(i));
    for (Node *n : nodes) set.insert(n);
    for (Node *n : nodes) CHECK(set.count(n) == 1, "Member not found in the set");
    CHECK(set.size() == 1000 && set.count(nullptr) == 0, "set of Members");
    for (Node *n : nodes) cm::delete_caged(n);
}

static void test_make_caged() {
    Wide *w = cm::make_caged<Wide>();
    CHECK(cm_in_cage(w) && reinterpret_cast<uintptr_t>(w) % 256 == 0, "over-aligned make_caged");
    std::memset(w->bytes, 1, sizeof w->bytes);
    cm::delete_caged(w);
    bool thrown = false;
    try {
        cm::make_caged<Throws>(true);
    } catch (const std::runtime_error &) {
        thrown = true;
    }
    CHECK(thrown && Throws::made == 0, "the constructor's exception did not pass through");
    cm::delete_caged(cm::make_caged<Throws>(false));
    CHECK(Throws::made == 1, "make_caged did not construct");
}

// A singly linked list of 200,000 nodes through Members, built, walked and
// verified, then freed.
static void test_list() {
    cm::Member<Node> head;
    const uint64_t n = 200000;
    for (uint64_t i = 0; i < n; i++) {
        Node *x = cm::make_caged<Node>(i * 0x9E3779B97F4A7C15ull);
        x->next = head;
        head = x;
    }
    uint64_t count = 0;
    for (cm::Member<Node> x = head; x; x = x->next) {
        CHECK(x->value == (n - 1 - count) * 0x9E3779B97F4A7C15ull, "list node %llu", (unsigned long long)count);
        count++;
    }
    CHECK(count == n, "list length");
    while (head) {
        Node *x = head.get();
        head = x->next;
        cm::delete_caged(x);
    }
}

int main() {
    test_member();
    test_containers();
    test_make_caged();
    test_list();
    std::printf("cage_member: ok\n");
    return 0;
}
