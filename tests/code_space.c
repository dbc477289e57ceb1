/* code_space: the code space (cm_code_*, cm_rel32_reachable).
 *  - cm_rel32_reachable at the edges of rel32 (+2^31-1, -2^31, one past
 *    each) and where an XOR-and-shift test goes wrong (addresses 32 bytes
 *    apart on either side of a 2^31 boundary);
 *  - round trip: a function written through cm_code_write calls a C function
 *    of this test with `call rel32` and returns its result;
 *  - every byte of every block reaches, and is reached from, all of the
 *    text of the module `near` names (this program, and libc);
 *  - W^X: no mapping of the process is writable and executable;
 *  - under the kernel's MDWE (PR_SET_MDWE) and under a seccomp filter like
 *    systemd's MemoryDenyWriteExecute, which refuse to make a mapping
 *    executable later: code still written and run, within and past the
 *    first megabyte of a range;
 *  - exhaustion: blocks of 256 MiB until NULL with ENOMEM, each within
 *    reach; after a free, allocation works again;
 *  - four threads use the code space first at the same moment (ten fresh
 *    children), each writing and running a call;
 *  - four threads allocate, write (and run) code and free it, some blocks
 *    freed by another thread, each checked before it is freed;
 *  - misuse: writing outside the code space gives EINVAL; freeing what is
 *    not a block aborts with the one-line report. */
#include "core_util.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#ifndef PR_SET_MDWE /* glibc before 2.38 */
#define PR_SET_MDWE 65
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

#include "cagemalloc.h"
#include "seccomp_util.h"

static int triple_plus_one(int x) { return 3 * x + 1; }

/* The span of the executable segments of the module holding `at`. */
static uintptr_t text_lo, text_hi, text_at;
static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (text_at >= a && text_at < a + ph->p_memsz) mine = 1;
        if (ph->p_flags & PF_X) {
            if (a < lo) lo = a;
            if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
        }
    }
    if (mine) text_lo = lo, text_hi = hi;
    return mine;
}
static void module_text(const void *at)
{
    text_at = (uintptr_t)at;
    text_lo = text_hi = 0;
    dl_iterate_phdr(find_text, NULL);
    CMT_CHECK(text_hi > text_lo, "no text found for %p", at);
}

/* Both ends of the block reach both ends of the text, both ways. */
static void check_reach(const char *block, size_t size)
{
    const char *ends[2] = {block, block + size}, *text[2] = {(const char *)text_lo, (const char *)text_hi - 1};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            CMT_CHECK(cm_rel32_reachable(ends[i], text[j]) && cm_rel32_reachable(text[j] + 1, ends[i]),
                      "block %p+%zu does not reach text [%#lx, %#lx)", (const void *)block, size,
                      (unsigned long)text_lo, (unsigned long)text_hi);
}

static void check_rel32_edges(void)
{
    const char *at = (const char *)((uintptr_t)1 << 40);
    const intptr_t max = INT32_MAX, min = INT32_MIN;
    CMT_CHECK(cm_rel32_reachable(at, at + max) && cm_rel32_reachable(at, at + min) && cm_rel32_reachable(at, at),
              "the extremes of rel32 are reachable");
    CMT_CHECK(!cm_rel32_reachable(at, at + max + 1) && !cm_rel32_reachable(at, at + min - 1),
              "one past the extremes is not");
    const char *below = (const char *)(uintptr_t)0x7ffffff0, *above = (const char *)(uintptr_t)0x80000010;
    CMT_CHECK(cm_rel32_reachable(below, above) && cm_rel32_reachable(above, below),
              "32 bytes apart across 2^31 (an XOR-and-shift test says no)");
    const char *top = (const char *)(uintptr_t)0x7fff00000000;
    CMT_CHECK(cm_rel32_reachable(top - 16, top + 16) && !cm_rel32_reachable(top - 0x80000000, top + 1),
              "across a 2^32 boundary");
    printf("rel32 edges                      ok\n");
}

/* sub rsp,8; mov edi,arg; call rel32 fn; add rsp,8; ret */
#define CALL_STUB_SIZE 19

/* Write at `at` (code space) a function that calls fn(arg) and returns its result. */
static void write_call_at(char *at, const void *fn, int arg)
{
    unsigned char code[CALL_STUB_SIZE] = {0x48, 0x83, 0xec, 0x08, 0xbf, 0, 0, 0, 0, 0xe8,
                                          0,    0,    0,    0,    0x48, 0x83, 0xc4, 0x08, 0xc3};
    CMT_CHECK(cm_rel32_reachable(at + 14, fn), "code at %p cannot call %p", (void *)at, fn);
    int32_t rel = (int32_t)((intptr_t)fn - (intptr_t)(at + 14));
    memcpy(code + 5, &arg, 4);
    memcpy(code + 10, &rel, 4);
    CMT_CHECK(cm_code_write(at, code, sizeof code) == 0, "cm_code_write failed");
}

static void *write_call(const void *fn, int arg)
{
    char *block = cm_code_alloc(CALL_STUB_SIZE, fn);
    CMT_CHECK(block != NULL, "cm_code_alloc failed");
    write_call_at(block, fn, arg);
    return block;
}

static void check_round_trip(void)
{
    for (int arg = -3; arg < 100; arg += 7) {
        void *block = write_call((const void *)triple_plus_one, arg);
        int (*fn)(void) = (int (*)(void))block;
        CMT_CHECK(fn() == triple_plus_one(arg), "generated code returned %d, not %d", fn(), triple_plus_one(arg));
        cm_code_free(block);
    }
    printf("call rel32 round trip            ok\n");
}

static void check_reach_all_blocks(const void *near, const char *what)
{
    module_text(near ? near : (const void *)triple_plus_one);
    void *blocks[200];
    size_t sizes[200];
    uint64_t rng = 5;
    for (int i = 0; i < 200; i++) {
        sizes[i] = cmt_range(&rng, 1, i % 20 ? 4096 : (4 << 20));
        blocks[i] = cm_code_alloc(sizes[i], near);
        CMT_CHECK(blocks[i] != NULL && ((uintptr_t)blocks[i] & 63) == 0, "cm_code_alloc(%zu)", sizes[i]);
        check_reach(blocks[i], sizes[i]);
    }
    for (int i = 0; i < 200; i++) cm_code_free(blocks[i]);
    printf("reach of every block (%s) ok\n", what);
}

static void check_w_xor_x(void)
{
    void *keep = write_call((const void *)triple_plus_one, 1);
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    CMT_CHECK(f != NULL, "/proc/self/maps");
    while (fgets(line, sizeof line, f)) {
        char perms[5] = {0};
        CMT_CHECK(sscanf(line, "%*s %4s", perms) == 1, "maps line: %s", line);
        CMT_CHECK(!(perms[1] == 'w' && perms[2] == 'x'), "writable and executable mapping: %s", line);
    }
    fclose(f);
    cm_code_free(keep);
    printf("W^X                              ok\n");
}

static void exhaustion(void)
{
    enum { MAX = 64 };
    static void *blocks[MAX];
    size_t size = (size_t)256 << 20;
    int n = 0;
    module_text((const void *)triple_plus_one);
    for (;;) {
        errno = 0;
        void *p = cm_code_alloc(size, (const void *)triple_plus_one);
        if (!p) {
            CMT_CHECK(errno == ENOMEM, "exhaustion: errno %d", errno);
            break;
        }
        CMT_CHECK(n < MAX, "more than 16 GiB of code within reach of one module");
        check_reach(p, size);
        blocks[n++] = p;
    }
    CMT_CHECK(n >= 1 && n <= 16, "%d blocks of 256 MiB within +-2 GiB", n);
    cm_code_free(blocks[n / 2]);
    blocks[n / 2] = cm_code_alloc(size, (const void *)triple_plus_one);
    CMT_CHECK(blocks[n / 2] != NULL, "the freed space was not reused");
    void *call = write_call((const void *)triple_plus_one, 7); /* still works when full: a freed small run */
    (void)call;
}

static void write_outside(void)
{
    char stack[16];
    CMT_CHECK(cm_code_write(stack, "x", 1) == EINVAL, "cm_code_write to the stack");
    char *block = cm_code_alloc(64, NULL);
    CMT_CHECK(cm_code_write(block, "\xc3", 1) == 0, "cm_code_write into a block");
    CMT_CHECK(cm_code_write(block - ((uintptr_t)1 << 40), "x", 1) == EINVAL, "cm_code_write far below the space");
    cm_code_free(block);
}
static void near_unmapped(void)
{
    errno = 0;
    CMT_CHECK(cm_code_alloc(64, (const void *)(uintptr_t)4096) == NULL && errno == EINVAL,
              "near an unmapped address: NULL with EINVAL");
}
static void free_not_a_block(void)
{
    char *block = cm_code_alloc(256, NULL);
    cm_code_free(block + 64);
}
static void free_twice(void)
{
    void *block = cm_code_alloc(256, NULL), *keep = cm_code_alloc(64, NULL);
    cm_code_free(block);
    cm_code_free(block);
    cm_code_free(keep);
}

/* ---- threads ---- */
static struct cmt_xchg xchg;

/* Four threads use the code space first at the same moment (a fresh child
 * each time: the parent uses it only after these cases), each writing and
 * running a call to a function of this program. */
static void *first_user(void *arg)
{
    int me = (int)(uintptr_t)arg;
    void *block = write_call((const void *)triple_plus_one, me);
    CMT_CHECK(((int (*)(void))block)() == triple_plus_one(me), "code written at the first use returned the wrong value");
    cm_code_free(block);
    return NULL;
}
static void first_use_race(void) { cmt_run_at_once(4, first_user); }

static void check_and_free(const struct cmt_blk *b, const char *what)
{
    CMT_VERIFY(b->p, b->n, b->seed, what);
    cm_code_free(b->p);
}

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t rng = cmt_mix(me + 7);
    struct cmt_blk live[32] = {{0}}, got;
    unsigned char buf[8192];
    for (int op = 0; op < 20000; op++) {
        struct cmt_blk *b = &live[cmt_rand(&rng) % 32];
        if (b->p) {
            if (cmt_rand(&rng) % 3 || !cmt_xchg_put(&xchg, b, &rng)) check_and_free(b, "own block");
            b->p = NULL;
        } else if (op % 16 == 0) { /* run some: mov eax, imm32; ret */
            unsigned char ret_code[6] = {0xb8, 0, 0, 0, 0, 0xc3};
            uint32_t value = me * 100000u + (uint32_t)op;
            memcpy(ret_code + 1, &value, 4);
            void *fn = cm_code_alloc(sizeof ret_code, NULL);
            CMT_CHECK(fn && cm_code_write(fn, ret_code, sizeof ret_code) == 0, "write code");
            CMT_CHECK(((uint32_t(*)(void))fn)() == value, "generated function returned the wrong value");
            cm_code_free(fn);
        } else {
            b->n = cmt_range(&rng, 1, sizeof buf);
            b->p = cm_code_alloc(b->n, NULL);
            CMT_CHECK(b->p != NULL, "cm_code_alloc failed");
            b->seed = cmt_seed(b->p, b->n, me, (uint64_t)op);
            b->owner = me;
            cmt_fill(buf, b->n, b->seed);
            CMT_CHECK(cm_code_write(b->p, buf, b->n) == 0, "cm_code_write failed");
        }
        if (op % 4 == 0 && cmt_xchg_take(&xchg, me, &got, &rng)) check_and_free(&got, "block from another thread");
    }
    for (int i = 0; i < 32; i++)
        if (live[i].p) check_and_free(&live[i], "own block at the end");
    return NULL;
}

static void check_threads(void)
{
    cmt_run_threads(4, worker);
    cmt_xchg_drain(&xchg, check_and_free);
    printf("threads                          ok\n");
}

/* ------------------------------------------------ no exec gain (MDWE) */

/* What a process whose mappings may not become executable still gets: code
 * written and run, a block past the first megabyte of its range, W^X. */
static void use_code_space_without_exec_gain(void)
{
    check_round_trip();
    size_t size = (size_t)3 << 20;
    char *big = cm_code_alloc(size, (const void *)triple_plus_one);
    CMT_CHECK(big != NULL, "cm_code_alloc(3 MiB) failed: errno %d", errno);
    char *tail = big + size - 64;
    write_call_at(tail, (const void *)triple_plus_one, 7);
    CMT_CHECK(((int (*)(void))tail)() == triple_plus_one(7), "code at the end of a 3 MiB block");
    cm_code_free(big);
    check_w_xor_x();
}

/* The kernel's own: PR_SET_MDWE (Linux 6.3) refuses mprotect and mmap
 * that would make a mapping executable that was not, or writable and
 * executable. */
static void mdwe_prctl(void)
{
    if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0) {
        CMT_CHECK(errno == EINVAL, "PR_SET_MDWE: errno %d", errno);
        printf("(this kernel has no PR_SET_MDWE: nothing to check)\n");
        return;
    }
    use_code_space_without_exec_gain();
}

/* systemd's MemoryDenyWriteExecute=yes where the kernel has no MDWE: a
 * seccomp filter failing with EPERM every mprotect that asks for
 * PROT_EXEC and every mmap that asks for PROT_WRITE | PROT_EXEC. */
static void mdwe_seccomp(void)
{
    struct sock_filter rules[] = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 4, 7),
        /* mprotect, pkey_mprotect: PROT_EXEC refused */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 5),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* mmap: PROT_WRITE | PROT_EXEC refused */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    CMT_CHECK(seccomp_install(rules, sizeof rules / sizeof rules[0]) == 0, "seccomp filter: errno %d", errno);
    void *probe = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CMT_CHECK(probe != MAP_FAILED && mprotect(probe, 4096, PROT_READ | PROT_EXEC) == -1 && errno == EPERM,
              "the filter did not refuse mprotect(PROT_EXEC)");
    munmap(probe, 4096);
    use_code_space_without_exec_gain();
}

int main(void)
{
    int failures = 0;
    for (int round = 0; round < 10; round++) failures += !cmt_case("first_use_race", first_use_race, NULL);
    /* in children made before this process maps a code range of its own */
    failures += !cmt_case("mdwe_prctl", mdwe_prctl, NULL);
    failures += !cmt_case("mdwe_seccomp", mdwe_seccomp, NULL);
    check_rel32_edges();
    check_round_trip();
    check_reach_all_blocks(NULL, "main program");
    check_reach_all_blocks((const void *)printf, "libc        ");
    check_w_xor_x();
    check_threads();
    failures += !cmt_case("exhaustion", exhaustion, NULL);
    failures += !cmt_case("write_outside", write_outside, NULL);
    failures += !cmt_case("near_unmapped", near_unmapped, NULL);
    failures += !cmt_case("free_not_a_block", free_not_a_block, "cagemalloc: cm_code_free(): invalid pointer 0x");
    failures += !cmt_case("free_twice", free_twice, "cagemalloc: cm_code_free(): invalid pointer 0x");
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
