/* Generates, at build time, size_class_table.h (the constants and the
 * tables' declarations) and size_class_table.c (the tables): the size
 * classes, their superblock geometry and the size -> class lookup tables,
 * all const arrays defined once, so they land in .rodata, one copy shared by
 * every process that maps the library and never built at run time (the
 * embedded-builtins idea, seed 001).
 *
 * Classes: 8 B, then 16-byte steps up to 128 B, then four classes per
 * doubling (2^x + {1,2,3,4} * 2^(x-2)) up to 128 KiB, and 4.5 and 9 KiB
 * (a page or two plus a header, below). Class 0 is "not a
 * small block". The 8-byte class holds requests of 1-8 bytes 8-aligned (no
 * object that small needs more, C11 7.22.3 as amended by DR 445; jemalloc,
 * tcmalloc and mimalloc do the same); every larger block is 16-aligned.
 * It took 0.2-0.4 MiB (2-3%) off alloc-test's peak RSS (BENCHMARKS.md).
 * Each class gets the smallest superblock (64 KiB .. 1 MiB, a power of two,
 * aligned to its size) holding at least 8 blocks (4 from 64 KiB up) with at
 * most 1/8 waste.
 *
 * Why 128 KiB, measured on a random mixed-size workload with realloc
 * (blocks up to 256 KiB): with classes up to 32 KiB, the rest served as
 * their own mappings, it ran 1.6x slower than tcmalloc (a system call and
 * page faults whenever the mapping cache missed); up to 256 KiB it matched
 * tcmalloc but held 1.33x mimalloc's peak RSS in sparsely used 2 MiB
 * superblocks; up to 128 KiB: 1.2x tcmalloc's time at mimalloc's RSS. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define INFO_LEN 64             /* class info entries: one per value of a page-map entry's class field */
#define MAX_CLASSES INFO_LEN
#define SMALL_MAX 131072u
/* Sizes up to FINE_MAX (malloc's fast path) look their class up at 8-byte
 * granularity, larger ones at 128 bytes (every class boundary above FINE_MAX
 * is a multiple of 128): 1.2 KiB of tables, not the 16 KiB one table at
 * 8 bytes took, which the kernel's fault-around kept resident in every
 * process (BENCHMARKS.md). */
#define FINE_MAX 1024u
#define COARSE_STEP 128u
#define CARVE_BYTES (4u * 1024) /* bytes a heap carves from a fresh superblock at once */
/* One page (and two) plus a header, the buffers of page caches and I/O
 * layers (SQLite's page cache asks for 4,096 + 272 bytes), get a class an
 * eighth above the power of two: in the 5 KiB class they wasted 15-25%,
 * 18 MiB of a SQLite run's 120 (BENCHMARKS.md). Two classes, because the
 * heap record has room for two more bins within its 960 bytes. */
#define PAGE_PLUS_HEADER_MIN 4096u

static uint32_t block_size[MAX_CLASSES];
static uint32_t span_shift[MAX_CLASSES];
static int nclasses; /* classes 1..nclasses */

static void add_class(uint32_t size) { block_size[++nclasses] = size; }

static uint32_t choose_span_shift(uint32_t size) {
    for (uint32_t shift = 16; shift <= 20; shift++) {
        uint32_t span = 1u << shift, count = span / size, waste = span - count * size;
        if (count >= (size >= 65536 ? 4u : 8u) && waste * 8 <= span) return shift;
    }
    return 20;
}

/* ceil(2^64 / size): the multiplier of the block-start test and index. */
static uint64_t start_mult(uint32_t size) { return UINT64_MAX / size + 1; }

/* The bound under which offset * start_mult means a block start
 * (internal.h, cm_is_block_start): count * e, where mult * size = 2^64 + e;
 * 1 when e = 0 (a power of two, which divides the span). */
static uint64_t start_limit(uint32_t size, uint32_t count) {
    uint64_t e = start_mult(size) * size;
    return e ? count * e : 1;
}

/* Prove the fast path's test and the index (cm_block_index) on every
 * offset of the span: a block start exactly where one of the count blocks
 * starts, and there the block's index. */
static void prove_start(uint32_t size, uint32_t span, uint32_t count) {
    uint64_t mult = start_mult(size), limit = start_limit(size, count);
    for (uint64_t off = 0; off < span; off++) {
        bool start = off % size == 0 && off / size < count;
        __extension__ uint64_t index = (uint64_t)(((unsigned __int128)off * mult) >> 64);
        if ((off * mult < limit) != start || (start && index != off / size)) {
            fprintf(stderr, "block-start test of size %u wrong at %llu\n", size, (unsigned long long)off);
            exit(1);
        }
    }
}

static uint32_t clamp(uint32_t v, uint32_t lo, uint32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* One array of cm_block_check: `.name = {[1] = v1, ...}`, the classes' values. */
static void emit_field(FILE *f, const char *name, const uint64_t *v, const char *suffix) {
    fprintf(f, "    .%s = {", name);
    for (int c = 1; c <= nclasses; c++) fprintf(f, "%s[%d] = %llu%s", c > 1 ? ", " : "", c, (unsigned long long)v[c], suffix);
    fprintf(f, "},\n");
}

static int class_of(uint32_t size) {
    for (int c = 1; c <= nclasses; c++)
        if (block_size[c] >= size) return c;
    return 0;
}
/* cm_class_by_<step>: the class of sizes 0..max, indexed by (size + step - 1) / step
 * (by the size itself for step 1) */
static void emit_lookup(FILE *f, uint32_t step, uint32_t max) {
    fprintf(f, "\n/* class for sizes 0..%u, indexed by (size + %u) / %u */\n", max, step - 1, step);
    fprintf(f, "const uint8_t cm_class_by_%u[%u] = {", step, max / step + 1);
    for (uint32_t i = 0; i <= max / step; i++)
        fprintf(f, "%s%s%d", i ? "," : "", i % 16 ? " " : "\n    ", class_of(i ? i * step : 1));
    fprintf(f, "\n};\n");
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s HEADER SOURCE\n", argv[0]); return 2; }
    add_class(8);
    for (uint32_t s = 16; s <= 128; s += 16) add_class(s);
    for (uint32_t p = 128; p < SMALL_MAX; p *= 2) {
        if (p == PAGE_PLUS_HEADER_MIN || p == 2 * PAGE_PLUS_HEADER_MIN) add_class(p + p / 8);
        for (uint32_t k = 1; k <= 4; k++) add_class(p + k * (p / 4));
    }
    for (int c = 1; c <= nclasses; c++) span_shift[c] = choose_span_shift(block_size[c]);

    uint32_t count[MAX_CLASSES + 1];
    uint32_t most_blocks = 0;
    for (int c = 1; c <= nclasses; c++) {
        uint32_t span = 1u << span_shift[c];
        count[c] = span / block_size[c];
        /* the anchor's avail and count are 16 bits; free's fast test
         * (cm_free_fast_ok) needs two blocks or more (internal.h) */
        if (count[c] >= 1u << 16 || count[c] < 2) {
            fprintf(stderr, "class %d: %u blocks per superblock: not from 2 to 65535\n", c, count[c]);
            return 1;
        }
        if (count[c] > most_blocks) most_blocks = count[c];
        prove_start(block_size[c], span, count[c]);
    }

    for (int c = 1; c <= nclasses; c++)
        if (block_size[c] > FINE_MAX && block_size[c] % COARSE_STEP != 0) {
            fprintf(stderr, "class %d (%u B): above %u B but not a multiple of %u\n", c, block_size[c], FINE_MAX,
                    COARSE_STEP);
            return 1;
        }
    FILE *h = fopen(argv[1], "w");
    if (!h) { perror(argv[1]); return 1; }
    fprintf(h, "/* Generated by tools/gen_size_classes.c at build time. Do not edit. */\n");
    fprintf(h, "#define CM_NUM_CLASSES %d\n#define CM_SMALL_MAX %uu\n#define CM_FINE_MAX %uu\n", nclasses, SMALL_MAX,
            FINE_MAX);
    fprintf(h, "#define CM_MAX_BLOCKS %uu /* the most blocks one superblock holds */\n", most_blocks);
    fprintf(h, "#define CM_CLASS_INFO_LEN %d\n\n", INFO_LEN);
    fprintf(h, "CM_HIDDEN extern const cm_class_info_t cm_class_info[CM_CLASS_INFO_LEN];\n");
    fprintf(h, "CM_HIDDEN extern const cm_block_check_t cm_block_check;\n");
    fprintf(h, "CM_HIDDEN extern const uint8_t cm_class_by_1[%u];\n", FINE_MAX + 1);
    fprintf(h, "CM_HIDDEN extern const uint8_t cm_class_by_%u[%u];\n", COARSE_STEP, SMALL_MAX / COARSE_STEP + 1);
    if (fclose(h) != 0) return 1;

    FILE *f = fopen(argv[2], "w");
    if (!f) { perror(argv[2]); return 1; }
    fprintf(f, "/* Generated by tools/gen_size_classes.c at build time. Do not edit. */\n#include \"internal.h\"\n\n");
    /* entries that are no class (0, unused, CM_CLASS_LARGE) have max_count and start_limit 0 */
    fprintf(f, "const cm_class_info_t cm_class_info[CM_CLASS_INFO_LEN] = {\n");
    for (int c = 1; c <= nclasses; c++) {
        /* 4 KiB worth (a page), 1 to 64 blocks: pages are touched as blocks are used */
        uint32_t carve = clamp(CARVE_BYTES / block_size[c], 1, 64);
        fprintf(f, "    [%d] = {%uu, %uu, %uu, %uu},\n", c, block_size[c], count[c], span_shift[c], carve);
    }
    uint64_t mult[MAX_CLASSES + 1], mask[MAX_CLASSES + 1], limit[MAX_CLASSES + 1];
    for (int c = 1; c <= nclasses; c++) {
        mult[c] = start_mult(block_size[c]);
        mask[c] = (1u << span_shift[c]) - 1;
        limit[c] = start_limit(block_size[c], count[c]);
    }
    fprintf(f, "};\n\nconst cm_block_check_t cm_block_check = {\n");
    emit_field(f, "start_mult", mult, "ull");
    emit_field(f, "span_mask", mask, "ull");
    emit_field(f, "start_limit", limit, "ull");
    fprintf(f, "};\n");
    emit_lookup(f, 1, FINE_MAX);
    emit_lookup(f, COARSE_STEP, SMALL_MAX);
    return fclose(f) == 0 ? 0 : 1;
}
