/* directcall: what a direct `call rel32` saves over `mov r11, imm64; call r11`
 * (seed 003: PHP's JIT placed its code within +-2 GiB of its helpers).
 *
 * Generates, at run time, one function with `sites` call sites (1,000, then
 * 16,000: more than the branch target buffers hold), site i calling helper
 * (i * 37 + i / 8) % 64 of 64 C functions, and places it twice:
 *  - in cm_code_alloc memory near the helpers, each site a `call rel32`;
 *  - in an ordinary mapping over 2 GiB away (rel32 cannot reach), each site
 *    `mov r11, imm64; call r11`.
 * The two run alternately, REPS rounds of about 200,000 calls each; reports
 * the median ns per call of each and their ratio.
 *
 *   bench/directcall                  # builds and runs it (and perf stat, where it counts)
 *   directcall SITES direct|indirect  # one kind only (what perf stat measures)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cagemalloc.h"

#define HELPERS 64
#define REPS 21
#define CALLS_PER_ROUND 200000

static int sites;

#define H(k) __attribute__((noinline)) static int64_t helper##k(int64_t x) { return x + k; }
#define H8(k) H(k##0) H(k##1) H(k##2) H(k##3) H(k##4) H(k##5) H(k##6) H(k##7)
H8(0) H8(1) H8(2) H8(3) H8(4) H8(5) H8(6) H8(7)
#define A(k) helper##k,
#define A8(k) A(k##0) A(k##1) A(k##2) A(k##3) A(k##4) A(k##5) A(k##6) A(k##7)
static int64_t (*const helpers[HELPERS])(int64_t) = {A8(0) A8(1) A8(2) A8(3) A8(4) A8(5) A8(6) A8(7)};

typedef int64_t (*generated_t)(int64_t);

static size_t generate(unsigned char *buf, const char *at, int indirect) {
    size_t n = 0;
#define PUT(...)                                                                  \
    do {                                                                          \
        const unsigned char b_[] = {__VA_ARGS__};                                 \
        memcpy(buf + n, b_, sizeof b_);                                           \
        n += sizeof b_;                                                           \
    } while (0)
    PUT(0x53, 0x48, 0x89, 0xf8); /* push rbx (rsp now on 16 bytes); mov rax, rdi */
    for (int i = 0; i < sites; i++) {
        const void *target = (const void *)helpers[(i * 37 + i / 8) % HELPERS];
        PUT(0x48, 0x89, 0xc7); /* mov rdi, rax */
        if (indirect) {
            uint64_t imm = (uintptr_t)target;
            PUT(0x49, 0xbb); /* mov r11, imm64 */
            memcpy(buf + n, &imm, 8);
            n += 8;
            PUT(0x41, 0xff, 0xd3); /* call r11 */
        } else {
            int32_t rel = (int32_t)((intptr_t)target - (intptr_t)(at + n + 5));
            if (!cm_rel32_reachable(at + n + 5, target)) {
                fprintf(stderr, "directcall: a helper is out of rel32 reach\n");
                exit(1);
            }
            PUT(0xe8); /* call rel32 */
            memcpy(buf + n, &rel, 4);
            n += 4;
        }
    }
    PUT(0x5b, 0xc3); /* pop rbx; ret */
    return n;
}

static size_t code_size(void) { return (size_t)sites * 16 + 64; }

static generated_t place_direct(void) {
    unsigned char *buf = malloc(code_size());
    char *code = cm_code_alloc(code_size(), (const void *)helpers[0]);
    if (!code || !buf) {
        perror("cm_code_alloc");
        exit(1);
    }
    size_t n = generate(buf, code, 0);
    if (cm_code_write(code, buf, n) != 0) exit(1);
    free(buf);
    return (generated_t)code;
}

/* An ordinary mapping far from the text: written, then made executable. */
static generated_t place_indirect(void) {
    size_t size = code_size();
    char *hint = (char *)(((uintptr_t)helpers[0] + ((uintptr_t)64 << 30)) & ~(uintptr_t)0xfff);
    char *code = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    if (cm_rel32_reachable(code, (const void *)helpers[0]))
        fprintf(stderr, "directcall: note: the far mapping landed within rel32 reach (it uses indirect calls anyway)\n");
    generate((unsigned char *)code, code, 1);
    if (mprotect(code, size, PROT_READ | PROT_EXEC) != 0) exit(1);
    return (generated_t)code;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t sink;

/* ns per call over one round of about CALLS_PER_ROUND calls. */
static double time_round(generated_t fn) {
    int runs = CALLS_PER_ROUND / sites;
    double t0 = now();
    int64_t x = 0;
    for (int r = 0; r < runs; r++) x = fn(x) & 0xffff;
    sink += x;
    return (now() - t0) / ((double)runs * sites) * 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void measure(void) {
    generated_t direct = place_direct(), indirect = place_indirect();
    int64_t want = 0;
    for (int i = 0; i < sites; i++) want = helpers[(i * 37 + i / 8) % HELPERS](want);
    if (direct(0) != want || indirect(0) != want) {
        fprintf(stderr, "directcall: generated code computes %lld / %lld, not %lld\n", (long long)direct(0),
                (long long)indirect(0), (long long)want);
        exit(1);
    }
    double d[REPS], in[REPS];
    for (int r = 0; r < REPS; r++) {
        d[r] = time_round(direct);
        in[r] = time_round(indirect);
    }
    qsort(d, REPS, sizeof d[0], cmp);
    qsort(in, REPS, sizeof in[0], cmp);
    printf("| %d | %d | %.2f | %.2f | %.2f |\n", sites, HELPERS, d[REPS / 2], in[REPS / 2], in[REPS / 2] / d[REPS / 2]);
}

int main(int argc, char **argv) {
    if (argc > 2) { /* one kind only, for perf stat */
        sites = atoi(argv[1]);
        generated_t fn = strcmp(argv[2], "direct") == 0 ? place_direct() : place_indirect();
        for (int r = 0; r < REPS; r++) time_round(fn);
        return 0;
    }
    printf("| call sites | helpers | direct `call rel32` (ns per call) | indirect `mov r11, imm64; call r11` | indirect / direct |\n");
    printf("|---|---|---|---|---|\n");
    static const int counts[] = {1000, 16000};
    for (int i = 0; i < 2; i++) {
        sites = counts[i];
        measure();
    }
    printf("\n(medians of %d alternating rounds of about %d calls each)\n", REPS, CALLS_PER_ROUND);
    return 0;
}
