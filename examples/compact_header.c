/* compact_header: what a runtime does with the class space.
 *
 * A compact object header (Lilliput, seed 002) is one 64-bit word:
 *
 *    63            42 41                    11 10       0
 *   +----------------+------------------------+----------+
 *   | narrow class   | identity hash (31 bits) | GC bits  |
 *   |   (22 bits)    |                         | (11 bits)|
 *   +----------------+------------------------+----------+
 *
 * The class structure lives in the class space (cm_klass_alloc, aligned to
 * 1 KiB), so its pointer fits in 22 bits; its method table and field map are
 * metadata (cm_meta_alloc), which the space packs into the gaps alignment
 * leaves after each class. Objects come from malloc here (the pointer-
 * compression cage, when it exists, is where they would go). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cagemalloc.h"

#define KLASS_BITS 22
#define HASH_BITS 31
#define GC_BITS 11
#define KLASS_SHIFT (HASH_BITS + GC_BITS)
#define HASH_SHIFT GC_BITS
#define GC_MARK 1u

typedef struct klass {
    char name[32];
    uint32_t instance_size; /* bytes, header included */
    uint32_t methods;
    const char **method_names; /* metadata */
    uint16_t *field_offsets;   /* metadata */
    uint32_t fields;
    char rest[600];            /* what a real Klass also holds (vtables, ...): ~700 bytes */
} klass_t;

typedef struct object {
    uint64_t header;
    /* fields follow */
} object_t;

static klass_t *define_class(const char *name, uint32_t fields, uint32_t methods) {
    klass_t *k = cm_klass_alloc(sizeof(klass_t));
    if (!k) abort();
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->fields = fields;
    k->methods = methods;
    k->instance_size = (uint32_t)(sizeof(object_t) + fields * sizeof(uint64_t));
    k->field_offsets = cm_meta_alloc(fields * sizeof(uint16_t));
    k->method_names = cm_meta_alloc(methods * sizeof(char *));
    for (uint32_t i = 0; i < fields; i++) k->field_offsets[i] = (uint16_t)(sizeof(object_t) + i * 8);
    for (uint32_t i = 0; i < methods; i++) k->method_names[i] = i % 2 ? "toString" : "hashCode";
    return k;
}

static void unload_class(klass_t *k) {
    cm_meta_free(k->field_offsets);
    cm_meta_free(k->method_names);
    cm_klass_free(k);
}

static object_t *new_object(klass_t *k) {
    object_t *o = calloc(1, k->instance_size);
    if (!o) abort();
    o->header = (uint64_t)cm_klass_encode(k) << KLASS_SHIFT; /* no hash yet, GC bits clear */
    return o;
}

static klass_t *klass_of(const object_t *o) { return cm_klass_decode((uint32_t)(o->header >> KLASS_SHIFT)); }

/* The identity hash, made on first request and kept in the header. */
static uint32_t identity_hash(object_t *o) {
    uint32_t h = (uint32_t)(o->header >> HASH_SHIFT) & ((1u << HASH_BITS) - 1);
    if (h == 0) {
        uint64_t x = (uintptr_t)o * 0x9e3779b97f4a7c15ull;
        h = (uint32_t)(x >> 33) & ((1u << HASH_BITS) - 1);
        h += h == 0;
        o->header |= (uint64_t)h << HASH_SHIFT;
    }
    return h;
}

int main(void) {
    if (cm_klass_bits() != KLASS_BITS) {
        fprintf(stderr, "expected %d-bit narrow class pointers, the space gives %u\n", KLASS_BITS, cm_klass_bits());
        return 1;
    }
    klass_t *point = define_class("Point", 2, 4), *string = define_class("String", 3, 12);
    object_t *objects[6];
    for (int i = 0; i < 6; i++) objects[i] = new_object(i % 2 ? string : point);

    for (int i = 0; i < 6; i++) {
        klass_t *k = klass_of(objects[i]);
        uint32_t hash = identity_hash(objects[i]);
        if (k != (i % 2 ? string : point) || identity_hash(objects[i]) != hash || klass_of(objects[i]) != k) {
            fprintf(stderr, "header %d does not hold its class and hash\n", i);
            return 1;
        }
        objects[i]->header |= GC_MARK; /* a collector marks it */
        printf("object %d: header 0x%016llx -> class %-6s (narrow %u), hash %u, %s\n", i,
               (unsigned long long)objects[i]->header, k->name, cm_klass_encode(k), hash,
               objects[i]->header & GC_MARK ? "marked" : "unmarked");
    }

    struct cm_klass_stats s;
    cm_klass_stats(&s);
    printf("class space: %zu classes, %u-bit narrow pointers (shift %u over 2^%u bytes), %zu bytes of metadata in the "
           "alignment gaps, %zu bytes lost per class\n",
           s.classes_live, s.narrow_bits, s.shift, s.range_log2, s.gap_bytes_reused, s.loss_per_class);
    for (int i = 0; i < 6; i++) free(objects[i]);
    unload_class(point);
    unload_class(string);
    cm_klass_stats(&s);
    return s.classes_live == 0 && s.gap_bytes_reused == 0 ? 0 : 1;
}
