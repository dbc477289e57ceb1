// bench/src/cage.cpp: a pointer-heavy workload run two ways, raw pointers
// from malloc and cm::Member<T> references in the cage (bench/cage runs it).
//
//   cage raw|member|raw-in-cage|raw-and tree|graph [nodes]
//   cage pairs malloc|cage [pairs]
//                                       (the cage's fast path against malloc's)
//   cage handoff malloc|cage 1|8 [blocks]
//                                       (one thread allocates, another frees)
//
// raw-in-cage and raw-and are controls, to tell what a difference between
// raw and member comes from: raw pointers to nodes allocated in the cage
// (placement alone), and raw pointers ANDed with a run-time mask of all ones
// at every dereference (one dependent ALU operation, as decompression adds).
//
// tree:  a balanced binary search tree of `nodes` nodes {left, right, key,
//        value}: built, traversed (a depth-first sum, and 2M lookups by key),
//        mutated (mirrored: every reference rewritten, then looked up again).
// graph: `nodes` nodes with 2-4 references each {id, degree, mark, edges[4]}
//        and a table of references to them: built (random edges), traversed
//        (breadth-first from node 0, a queue of references), mutated (a
//        quarter of the edges rewired), then a hash set keyed by references
//        (open addressing, linear probing; 64-bit keys and a 64-bit
//        multiplicative hash for raw pointers, 32-bit keys and a 32-bit hash
//        for Members): every node inserted, then `nodes` lookups, half hits,
//        then every node inserted again into the emptied set in a shuffled
//        order (i * 2654435761 mod nodes, a permutation: that factor is prime).
// Prints one line per phase, "PHASE name seconds", then the node block's
// usable size, the peak RSS (VmHWM) after the tree or graph phases, and a
// checksum that both ways must agree on.
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <new>
#include <thread>
#include <string>
#include <vector>

#include "cagemalloc/member.hpp"

namespace {

double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Timer {
    const char *name;
    double start = now();
    explicit Timer(const char *n) : name(n) {}
    ~Timer() { std::printf("PHASE %s %.4f\n", name, now() - start); }
};

size_t peak_rss_kib() {
    FILE *f = std::fopen("/proc/self/status", "r");
    char line[256];
    size_t kib = 0;
    while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmHWM: %zu kB", &kib) == 1) break;
    if (f) std::fclose(f);
    return kib;
}

uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// ------------------------------------------------------------ the two ways

struct Raw {
    template <typename T>
    using Ref = T *;
    template <typename T>
    using Alloc = std::allocator<T>;
    using Key = uint64_t;
    template <typename T, typename... A>
    static T *make(A &&...a) {
        void *p = std::malloc(sizeof(T));
        if (!p) throw std::bad_alloc();
        return new (p) T(std::forward<A>(a)...);
    }
    template <typename T>
    static void destroy(T *p) {
        p->~T();
        std::free(p);
    }
    template <typename T>
    static T *get(T *r) { return r; }
    template <typename T>
    static Key key(T *r) { return reinterpret_cast<uintptr_t>(r); }
    static uint32_t slot(Key k, unsigned bits) { return uint32_t((k * 0x9E3779B97F4A7C15ull) >> (64 - bits)); }
};

// The controls: Raw with the nodes in the cage, and Raw with an AND at every
// dereference. and_mask is a global the compiler cannot fold (set from main,
// reloaded after calls, as cm_cage_base is).
struct RawInCage : Raw {
    template <typename T, typename... A>
    static T *make(A &&...a) { return cm::make_caged<T>(std::forward<A>(a)...); }
    template <typename T>
    static void destroy(T *p) { cm::delete_caged(p); }
};

uintptr_t and_mask;

struct RawAnd : Raw {
    template <typename T>
    static T *get(T *r) { return reinterpret_cast<T *>(reinterpret_cast<uintptr_t>(r) & and_mask); }
};

struct Caged {
    template <typename T>
    using Ref = cm::Member<T>;
    template <typename T>
    using Alloc = cm::CageAllocator<T>;
    using Key = uint32_t;
    template <typename T, typename... A>
    static T *make(A &&...a) { return cm::make_caged<T>(std::forward<A>(a)...); }
    template <typename T>
    static void destroy(T *p) { cm::delete_caged(p); }
    template <typename T>
    static T *get(cm::Member<T> r) { return r.get(); }
    template <typename T>
    static Key key(cm::Member<T> r) { return r.raw(); }
    static uint32_t slot(Key k, unsigned bits) { return (k * 0x9E3779B1u) >> (32 - bits); }
};

// ------------------------------------------------------------ tree

template <typename P>
struct TreeNode {
    typename P::template Ref<TreeNode> left, right;
    uint32_t key, value;
    TreeNode(uint32_t k, uint32_t v) : key(k), value(v) {}
};

template <typename P>
typename P::template Ref<TreeNode<P>> build(uint32_t lo, uint32_t hi) { // keys [lo, hi)
    if (lo >= hi) return nullptr;
    uint32_t mid = lo + (hi - lo) / 2;
    TreeNode<P> *n = P::template make<TreeNode<P>>(mid * 2 + 1, uint32_t(mix(mid)));
    n->left = build<P>(lo, mid);
    n->right = build<P>(mid + 1, hi);
    return n;
}

// Every node of the tree once, depth first; visit(n) runs after n's
// children are taken, so it may rewrite or free n.
template <typename P, typename Visit>
void walk(typename P::template Ref<TreeNode<P>> root, Visit visit) {
    using Ref = typename P::template Ref<TreeNode<P>>;
    std::vector<Ref, typename P::template Alloc<Ref>> stack;
    if (root) stack.push_back(root);
    while (!stack.empty()) {
        TreeNode<P> *n = P::get(stack.back());
        stack.pop_back();
        if (n->left) stack.push_back(n->left);
        if (n->right) stack.push_back(n->right);
        visit(n);
    }
}

// Lookups by key; `mirrored` flips the comparison after the mirror phase.
template <typename P>
uint64_t lookups(typename P::template Ref<TreeNode<P>> root, uint32_t nodes, uint32_t count, bool mirrored) {
    uint64_t found = 0, rng = 12345;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t key = uint32_t(mix(rng++) % (2 * uint64_t(nodes) + 1));
        for (typename P::template Ref<TreeNode<P>> r = root; r;) {
            TreeNode<P> *n = P::get(r);
            if (n->key == key) {
                found += n->value;
                break;
            }
            r = (key < n->key) != mirrored ? n->left : n->right;
        }
    }
    return found;
}

template <typename P>
uint64_t run_tree(uint32_t nodes) {
    typename P::template Ref<TreeNode<P>> root;
    uint64_t check = 0;
    {
        Timer t("build");
        root = build<P>(0, nodes);
    }
    {
        Timer t("traverse");
        walk<P>(root, [&](TreeNode<P> *n) { check += n->value ^ n->key; });
        check += lookups<P>(root, nodes, 2000000, false);
    }
    {
        Timer t("mutate");
        walk<P>(root, [](TreeNode<P> *n) { std::swap(n->left, n->right); });
        check += lookups<P>(root, nodes, 2000000, true);
    }
    std::printf("NODE_BYTES %zu\n", malloc_usable_size(P::get(root)));
    std::printf("PEAK_RSS_KIB %zu\n", peak_rss_kib());
    {
        Timer t("free");
        walk<P>(root, [](TreeNode<P> *n) { P::destroy(n); });
    }
    return check;
}

// ------------------------------------------------------------ graph

template <typename P>
struct GraphNode {
    uint32_t id;
    uint16_t degree, mark;
    typename P::template Ref<GraphNode> edges[4];
    explicit GraphNode(uint32_t i) : id(i), degree(0), mark(0) {}
};

template <typename P>
struct HashSet { // open addressing, key 0 = empty
    using Key = typename P::Key;
    std::vector<Key, typename P::template Alloc<Key>> slots;
    unsigned bits;
    explicit HashSet(size_t n) {
        bits = 1;
        while ((size_t(1) << bits) < 2 * n) bits++;
        slots.assign(size_t(1) << bits, 0);
    }
    void insert(Key k) {
        size_t mask = slots.size() - 1;
        for (size_t i = P::slot(k, bits);; i = (i + 1) & mask) {
            if (slots[i] == k) return;
            if (slots[i] == 0) {
                slots[i] = k;
                return;
            }
        }
    }
    bool contains(Key k) const {
        size_t mask = slots.size() - 1;
        for (size_t i = P::slot(k, bits);; i = (i + 1) & mask) {
            if (slots[i] == k) return true;
            if (slots[i] == 0) return false;
        }
    }
};

template <typename P>
uint64_t run_graph(uint32_t nodes) {
    using Node = GraphNode<P>;
    using Ref = typename P::template Ref<Node>;
    std::vector<Ref, typename P::template Alloc<Ref>> table(nodes);
    uint64_t check = 0, rng = 99;
    {
        Timer t("build");
        for (uint32_t i = 0; i < nodes; i++) table[i] = P::template make<Node>(i);
        for (uint32_t i = 0; i < nodes; i++) {
            Node *n = P::get(table[i]);
            n->degree = uint16_t(2 + mix(rng++) % 3);
            n->edges[0] = table[(i + 1) % nodes]; // a ring keeps every node reachable
            for (unsigned e = 1; e < n->degree; e++) n->edges[e] = table[mix(rng++) % nodes];
        }
    }
    auto bfs = [&](uint16_t mark) {
        std::vector<Ref, typename P::template Alloc<Ref>> queue;
        queue.reserve(nodes);
        queue.push_back(table[0]);
        P::get(table[0])->mark = mark;
        uint64_t s = 0;
        for (size_t head = 0; head < queue.size(); head++) {
            Node *n = P::get(queue[head]);
            s += n->id * uint64_t(head + 1);
            for (unsigned e = 0; e < n->degree; e++) {
                Node *m = P::get(n->edges[e]);
                if (m->mark != mark) {
                    m->mark = mark;
                    queue.push_back(n->edges[e]);
                }
            }
        }
        return s + queue.size();
    };
    {
        Timer t("traverse");
        check += bfs(1);
    }
    {
        Timer t("mutate");
        for (uint32_t k = 0; k < nodes; k++) {
            Node *n = P::get(table[mix(rng++) % nodes]);
            unsigned e = 1 + unsigned(mix(rng++) % (n->degree - 1u));
            n->edges[e] = table[mix(rng++) % nodes];
        }
        check += bfs(2);
    }
    std::printf("NODE_BYTES %zu\n", malloc_usable_size(P::get(table[0])));
    std::printf("PEAK_RSS_KIB %zu\n", peak_rss_kib());
    {
        HashSet<P> set(nodes);
        {
            Timer t("hash_insert");
            for (uint32_t i = 0; i < nodes; i++) set.insert(P::key(table[i]));
        }
        {
            Timer t("hash_lookup");
            uint64_t hits = 0;
            for (uint32_t i = 0; i < nodes; i++) {
                Ref r = table[mix(rng++) % nodes];
                // a miss: a key of the same kind that names no node (the address of an edge slot)
                typename P::Key k = (i & 1) ? P::key(r) : P::key(r) + 2;
                hits += set.contains(k);
            }
            check += hits;
        }
        std::printf("HASH_BYTES %zu\n", set.slots.size() * sizeof(typename P::Key));
        // Node order hands the hash keys a fixed stride (the nodes' spacing),
        // so its probes follow a pattern; shuffled, each insert is a miss.
        std::fill(set.slots.begin(), set.slots.end(), typename P::Key(0));
        {
            Timer t("hash_insert_shuffled");
            for (uint32_t i = 0; i < nodes; i++) set.insert(P::key(table[uint32_t(uint64_t(i) * 2654435761u % nodes)]));
        }
    }
    {
        Timer t("free");
        for (uint32_t i = 0; i < nodes; i++) P::destroy(P::get(table[i]));
    }
    return check;
}

// ------------------------------------------------------------ fast path

void *(*volatile pair_malloc)(size_t);
void (*volatile pair_free)(void *);

// ns per malloc+free pair, 16 B .. 1 KiB, through volatile pointers (as
// bench/src/fastpath.c): cm_malloc + cm_free ("malloc") or cm_cage_malloc +
// cm_cage_free ("cage", what Member's helpers use).
int run_pairs(const char *way, long pairs) {
    bool cage = std::strcmp(way, "malloc") != 0;
    pair_malloc = cage ? cm_cage_malloc : cm_malloc;
    pair_free = cage ? cm_cage_free : cm_free;
    static const size_t sizes[] = {16, 32, 64, 128, 256, 512, 1024};
    unsigned sink = 0;
    double start = now();
    for (size_t size : sizes)
        for (long i = 0; i < pairs; i++) {
            volatile unsigned char *p = static_cast<unsigned char *>(pair_malloc(size));
            p[0] = static_cast<unsigned char>(i);
            sink += p[0];
            pair_free(const_cast<unsigned char *>(p));
        }
    std::printf("PHASE pairs %.4f\nNS_PER_PAIR %.2f\nSINK %u\n", now() - start, (now() - start) * 1e9 / (7.0 * double(pairs)),
                sink & 1);
    return 0;
}

// ------------------------------------------------------------ cross-thread frees

// ns per block when one thread allocates (cm_malloc or cm_cage_malloc) and
// marks blocks and another checks and frees them with cm_free, through a
// ring: 64-byte blocks ("1" class), or 16..128 bytes in turn ("8" classes,
// each free then goes to another superblock than the last: what a sweeper
// freeing objects of several kinds in the order they were made does). Both
// sides spin: one thread per core. Each side keeps its state to itself (a
// flag written by the consumer next to the producer's variables cost 3x).
constexpr size_t handoff_ring_len = 4096;
std::atomic<unsigned char *> handoff_ring[handoff_ring_len];

size_t handoff_size(unsigned classes, long i) { return classes == 1 ? size_t(64) : size_t(16 + (i & 7) * 16); }

void handoff_consume(unsigned classes, long blocks, std::atomic<bool> *bad) {
    bool changed = false;
    for (long i = 0; i < blocks; i++) {
        auto &slot = handoff_ring[size_t(i) % handoff_ring_len];
        unsigned char *p;
        while (!(p = slot.load(std::memory_order_acquire))) __builtin_ia32_pause();
        slot.store(nullptr, std::memory_order_relaxed);
        size_t n = handoff_size(classes, i);
        changed |= p[0] != static_cast<unsigned char>(i) || p[n - 1] != static_cast<unsigned char>(~i);
        cm_free(p);
    }
    bad->store(changed);
}

int run_handoff(const char *way, unsigned classes, long blocks) {
    bool cage = std::strcmp(way, "malloc") != 0;
    std::atomic<bool> bad{false};
    double start = now();
    std::thread consumer(handoff_consume, classes, blocks, &bad);
    for (long i = 0; i < blocks; i++) {
        size_t n = handoff_size(classes, i);
        auto *p = static_cast<unsigned char *>(cage ? cm_cage_malloc(n) : cm_malloc(n));
        if (!p) throw std::bad_alloc();
        p[0] = static_cast<unsigned char>(i); // first and last bytes, as bench/src's mark()
        p[n - 1] = static_cast<unsigned char>(~i);
        auto &slot = handoff_ring[size_t(i) % handoff_ring_len];
        while (slot.load(std::memory_order_relaxed)) __builtin_ia32_pause();
        slot.store(p, std::memory_order_release);
    }
    consumer.join();
    double elapsed = now() - start;
    if (bad.load()) {
        std::fprintf(stderr, "handoff: a block changed between its allocation and its free\n");
        return 1;
    }
    std::printf("PHASE handoff %.4f\nNS_PER_BLOCK %.2f\n", elapsed, elapsed * 1e9 / double(blocks));
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s raw|member|raw-in-cage|raw-and tree|graph [nodes]\n       %s pairs malloc|cage [pairs]\n"
                     "       %s handoff malloc|cage 1|8 [blocks]\n",
                     argv[0], argv[0], argv[0]);
        return 2;
    }
    if (std::strcmp(argv[1], "pairs") == 0)
        return run_pairs(argv[2], argc > 3 ? std::atol(argv[3]) : 10000000);
    if (std::strcmp(argv[1], "handoff") == 0)
        return run_handoff(argv[2], argc > 3 ? unsigned(std::atoi(argv[3])) : 1u, argc > 4 ? std::atol(argv[4]) : 10000000);
    bool tree = std::strcmp(argv[2], "tree") == 0;
    if (!tree && std::strcmp(argv[2], "graph") != 0) {
        std::fprintf(stderr, "%s: unknown workload %s\n", argv[0], argv[2]);
        return 2;
    }
    uint32_t nodes = argc > 3 ? uint32_t(std::strtoul(argv[3], nullptr, 10)) : 10000000u;
    static volatile uintptr_t all_ones = ~uintptr_t(0);
    and_mask = all_ones; // a value the compiler cannot see
    const std::string way = argv[1];
    uint64_t check;
    if (way == "raw") check = tree ? run_tree<Raw>(nodes) : run_graph<Raw>(nodes);
    else if (way == "member") check = tree ? run_tree<Caged>(nodes) : run_graph<Caged>(nodes);
    else if (way == "raw-in-cage") check = tree ? run_tree<RawInCage>(nodes) : run_graph<RawInCage>(nodes);
    else if (way == "raw-and") check = tree ? run_tree<RawAnd>(nodes) : run_graph<RawAnd>(nodes);
    else {
        std::fprintf(stderr, "%s: unknown way %s\n", argv[0], argv[1]);
        return 2;
    }
    std::printf("CHECK %llu\n", static_cast<unsigned long long>(check));
    return 0;
}
