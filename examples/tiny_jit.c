/* tiny_jit: a JIT for integer expressions in x, with calls to C helpers,
 * compiled to x86-64 in cagemalloc's code space.
 *
 *   $ tiny_jit '(x + 3) * sq(x) - half(inc(x))'
 *
 * The whole protocol of the code space (seed 003, PHP's JIT):
 *  1. allocate near the functions the code calls: cm_code_alloc(size, sq),
 *     so every byte of the block reaches them with `call rel32` (E8);
 *  2. generate for that final address and write through the writable view
 *     (cm_code_write): the executable mapping is never writable (W^X);
 *  3. execute; 4. cm_code_free.
 * With --indirect, calls are `mov rax, imm64; call rax` instead: what a JIT
 * must emit when its code may lie farther than 2 GiB from its targets. Both
 * are checked against an interpreter of the same expression. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cagemalloc.h"

static int64_t sq(int64_t v) { return v * v; }
static int64_t inc(int64_t v) { return v + 1; }
static int64_t half(int64_t v) { return v / 2; }
static const struct {
    const char *name;
    int64_t (*fn)(int64_t);
} helpers[] = {{"sq", sq}, {"inc", inc}, {"half", half}};

/* ------------------------------------------------------------ parsing */

typedef struct node {
    char op;            /* '+', '-', '*', '/', 'n' (number), 'x', 'c' (call), '~' (negate) */
    int64_t value;      /* number */
    int helper;         /* call */
    struct node *a, *b;
} node_t;

static const char *src;

static void fail(const char *what) {
    fprintf(stderr, "tiny_jit: %s at \"%s\"\n", what, src);
    exit(2);
}
static void skip(void) {
    while (*src == ' ') src++;
}
static node_t *make(char op, node_t *a, node_t *b) {
    node_t *n = calloc(1, sizeof *n);
    if (!n) fail("out of memory");
    n->op = op, n->a = a, n->b = b;
    return n;
}

static node_t *expr(void);
static node_t *factor(void) {
    skip();
    if (*src == '(') {
        src++;
        node_t *n = expr();
        skip();
        if (*src++ != ')') fail("expected ')'");
        return n;
    }
    if (*src == '-') {
        src++;
        return make('~', factor(), NULL);
    }
    if (*src >= '0' && *src <= '9') {
        node_t *n = make('n', NULL, NULL);
        n->value = strtoll(src, (char **)&src, 10);
        return n;
    }
    if (*src == 'x' && !(src[1] >= 'a' && src[1] <= 'z')) {
        src++;
        return make('x', NULL, NULL);
    }
    for (int h = 0; h < (int)(sizeof helpers / sizeof helpers[0]); h++) {
        size_t len = strlen(helpers[h].name);
        if (strncmp(src, helpers[h].name, len) == 0 && src[len] == '(') {
            src += len + 1;
            node_t *n = make('c', expr(), NULL);
            n->helper = h;
            skip();
            if (*src++ != ')') fail("expected ')'");
            return n;
        }
    }
    fail("unexpected input");
    return NULL;
}
static node_t *term(void) {
    node_t *n = factor();
    for (skip(); *src == '*' || *src == '/'; skip()) {
        char op = *src++;
        n = make(op, n, factor());
    }
    return n;
}
static node_t *expr(void) {
    node_t *n = term();
    for (skip(); *src == '+' || *src == '-'; skip()) {
        char op = *src++;
        n = make(op, n, term());
    }
    return n;
}

static int64_t interpret(const node_t *n, int64_t x) {
    switch (n->op) {
    case 'n': return n->value;
    case 'x': return x;
    case '~': return -interpret(n->a, x);
    case 'c': return helpers[n->helper].fn(interpret(n->a, x));
    case '+': return interpret(n->a, x) + interpret(n->b, x);
    case '-': return interpret(n->a, x) - interpret(n->b, x);
    case '*': return interpret(n->a, x) * interpret(n->b, x);
    default: return interpret(n->a, x) / interpret(n->b, x);
    }
}

/* ------------------------------------------------------------ code generation */

typedef struct emitter {
    unsigned char *buf;  /* the code, built here and then written to the block */
    size_t len, cap;
    char *at;            /* the block's executable address: rel32 is relative to it */
    int pushed;          /* values on the stack: keeps calls 16-byte aligned */
    int indirect;
} emitter_t;

static void emit(emitter_t *e, const void *bytes, size_t n) {
    if (e->len + n > e->cap) fail("expression too long");
    memcpy(e->buf + e->len, bytes, n);
    e->len += n;
}
#define EMIT(e, ...) emit(e, (const unsigned char[]){__VA_ARGS__}, sizeof((const unsigned char[]){__VA_ARGS__}))

static void emit_call(emitter_t *e, const void *fn) {
    if (e->pushed % 2) EMIT(e, 0x48, 0x83, 0xec, 0x08); /* sub rsp, 8: the call needs rsp on 16 bytes */
    if (e->indirect) {
        EMIT(e, 0x48, 0xb8); /* mov rax, imm64; call rax */
        uint64_t target = (uintptr_t)fn;
        emit(e, &target, 8);
        EMIT(e, 0xff, 0xd0);
    } else {
        const char *next = e->at + e->len + 5;
        if (!cm_rel32_reachable(next, fn)) fail("helper out of rel32 reach");
        int32_t rel = (int32_t)((intptr_t)fn - (intptr_t)next);
        EMIT(e, 0xe8); /* call rel32 */
        emit(e, &rel, 4);
    }
    if (e->pushed % 2) EMIT(e, 0x48, 0x83, 0xc4, 0x08); /* add rsp, 8 */
}

/* Leaves the node's value in rax; x lives in rbx. */
static void gen(emitter_t *e, const node_t *n) {
    switch (n->op) {
    case 'n':
        EMIT(e, 0x48, 0xb8); /* mov rax, imm64 */
        emit(e, &n->value, 8);
        return;
    case 'x': EMIT(e, 0x48, 0x89, 0xd8); return; /* mov rax, rbx */
    case '~':
        gen(e, n->a);
        EMIT(e, 0x48, 0xf7, 0xd8); /* neg rax */
        return;
    case 'c':
        gen(e, n->a);
        EMIT(e, 0x48, 0x89, 0xc7); /* mov rdi, rax */
        emit_call(e, (const void *)helpers[n->helper].fn);
        return;
    }
    gen(e, n->a);
    EMIT(e, 0x50); /* push rax */
    e->pushed++;
    gen(e, n->b);
    EMIT(e, 0x48, 0x89, 0xc1, 0x58); /* mov rcx, rax; pop rax */
    e->pushed--;
    switch (n->op) {
    case '+': EMIT(e, 0x48, 0x01, 0xc8); break;       /* add rax, rcx */
    case '-': EMIT(e, 0x48, 0x29, 0xc8); break;       /* sub rax, rcx */
    case '*': EMIT(e, 0x48, 0x0f, 0xaf, 0xc1); break; /* imul rax, rcx */
    default: EMIT(e, 0x48, 0x99, 0x48, 0xf7, 0xf9);   /* cqo; idiv rcx */
    }
}

typedef int64_t (*compiled_t)(int64_t x);

/* Compile the expression into a block of the code space near the helpers. */
static compiled_t compile(const node_t *n, int indirect, size_t *code_len) {
    enum { MAX_CODE = 4096 };
    unsigned char buf[MAX_CODE];
    char *block = cm_code_alloc(MAX_CODE, (const void *)sq);
    if (!block) fail("no code memory");
    emitter_t e = {.buf = buf, .cap = MAX_CODE, .at = block, .indirect = indirect};
    EMIT(&e, 0x53, 0x48, 0x89, 0xfb); /* push rbx; mov rbx, rdi: x, and rsp is now on 16 bytes */
    gen(&e, n);
    EMIT(&e, 0x5b, 0xc3); /* pop rbx; ret */
    if (cm_code_write(block, buf, e.len) != 0) fail("cm_code_write");
    *code_len = e.len;
    return (compiled_t)block;
}

int main(int argc, char **argv) {
    const char *text = argc > 1 ? argv[1] : "(x + 3) * sq(x) - half(inc(x)) / 2 + -x";
    src = text;
    node_t *tree = expr();
    skip();
    if (*src) fail("trailing input");
    for (int indirect = 0; indirect < 2; indirect++) {
        size_t len;
        compiled_t fn = compile(tree, indirect, &len);
        printf("%s calls (%zu bytes at %p):", indirect ? "indirect, mov rax + call rax" : "direct, call rel32",
               len, (void *)fn);
        for (int64_t x = -3; x <= 3; x++) {
            int64_t got = fn(x), want = interpret(tree, x);
            if (got != want) {
                fprintf(stderr, "\nx = %lld: compiled %lld, interpreted %lld\n", (long long)x, (long long)got,
                        (long long)want);
                return 1;
            }
            printf(" %lld", (long long)got);
        }
        printf("\n");
        cm_code_free((void *)fn);
    }
    printf("%s: compiled both ways, both agree with the interpreter for x = -3..3\n", text);
    return 0;
}
