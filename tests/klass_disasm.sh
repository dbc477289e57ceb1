#!/bin/sh
# klass_disasm: cm_klass_encode and cm_klass_decode, as a program compiles
# them from the public header, are straight-line code: no branch, no call
# (encode: a subtract and a shift; decode: a shift and an add, plus the loads
# of the base and the shift).
set -eu
: "${CM_SOURCE:?CM_SOURCE must name the source tree}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/narrow.c" <<'EOF'
#include "cagemalloc.h"
uint32_t encode(const void *k) { return cm_klass_encode(k); }
void *decode(uint32_t n) { return cm_klass_decode(n); }
EOF
. "$CM_SOURCE/tests/disasm_util.sh"
fail=0
for cc in cc clang; do
    command -v $cc >/dev/null 2>&1 || continue
    $cc -O2 -I"$CM_SOURCE/include" -c "$work/narrow.c" -o "$work/narrow.o"
    for fn in encode decode; do
        body=$(function_body "$fn" "$work/narrow.o")
        bad=$(printf '%s\n' "$body" | grep -E '^(j[a-z]+|call|loop)[[:space:]]' || true)
        if [ -n "$bad" ] || [ -z "$body" ]; then
            echo "FAIL ($cc): $fn is not straight-line:"; printf '%s\n' "$body"; fail=1
        else
            echo "$cc $fn: $(printf '%s\n' "$body" | awk '{print $1}' | tr '\n' ' ')"
        fi
    done
done
exit $fail
