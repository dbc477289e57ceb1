#!/bin/sh
# cage_disasm: cm_compress and cm_decompress, as a program compiles them
# from the public header (gcc and clang, -O2, every cage shift), are
# branch-free: compress is a shift (after a register move); decompress is a
# sign extension, a shift (or an add/lea doubling it), and one AND with the
# base in memory or a register (plus loading the base's address from the
# GOT under -fPIC).
set -eu
: "${CM_SOURCE:?CM_SOURCE must name the source tree}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/compress.c" <<'SRC'
#include "cagemalloc.h"
uint32_t compress(const void *p) { return cm_compress(p); }
void *decompress(uint32_t c) { return cm_decompress(c); }
SRC
. "$CM_SOURCE/tests/disasm_util.sh"
fail=0
count() { printf '%s\n' "$1" | grep -cE "$2" || true; }
for cc in cc clang; do
    command -v $cc >/dev/null 2>&1 || continue
    for shift in 1 2 3; do
        for pic in -fno-pic -fPIC; do
            obj="$work/c-$cc-$shift$pic.o"
            $cc -O2 $pic -DCAGEMALLOC_CAGE_SHIFT=$shift -I"$CM_SOURCE/include" -c "$work/compress.c" -o "$obj"
            c=$(function_body compress "$obj")
            d=$(function_body decompress "$obj")
            what="$cc S=$shift $pic"
            # compress: mov + shr, nothing else but ret
            if [ "$(count "$c" '^(j[a-z]+|call|loop|cmov)')" != 0 ] || [ "$(count "$c" '^shr')" != 1 ] ||
               [ "$(count "$c" '^(and|or|xor|add|sub|imul|lea)')" != 0 ]; then
                echo "FAIL ($what): compress is not one shift:"; printf '  %s\n' "$c"; fail=1
            fi
            # decompress: one sign extension, a shift or doubling, one and, no branch
            if [ "$(count "$d" '^(j[a-z]+|call|loop|cmov)')" != 0 ] ||
               [ "$(count "$d" '^(movslq|movsxd|cltq|cdqe)')" != 1 ] ||
               [ "$(count "$d" '^(shl|sal|add|lea)')" -lt 1 ] ||
               [ "$(count "$d" '^and')" != 1 ]; then
                echo "FAIL ($what): decompress is not sign-extend, shift, and:"; printf '  %s\n' "$d"; fail=1
            fi
            [ "$shift" = 1 ] && echo "$what: compress: $(printf '%s\n' "$c" | awk '{print $1}' | tr '\n' ' ')|" \
                "decompress: $(printf '%s\n' "$d" | tr '\n' ';')"
        done
    done
done
exit $fail
