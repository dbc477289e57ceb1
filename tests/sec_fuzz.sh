#!/bin/sh
# sec_fuzz: build the libFuzzer harness (tests/sec_fuzz.c) with clang against
# the allocator core, with AddressSanitizer, and run it from an empty corpus
# with a fixed seed. Skips (77) when clang or its fuzzer runtime is missing.
set -eu
command -v clang >/dev/null 2>&1 || { echo "SKIP: clang not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src="$CM_SOURCE/src"
core="$(ls "$src"/*.c | grep -v '/override\.c$') $CM_BUILD/generated/size_class_table.c"
if ! clang -g -O1 -fsanitize=fuzzer,address -fno-builtin -I"$CM_SOURCE/include" -I"$src" \
    -I"$CM_BUILD/generated" "$CM_SOURCE/tests/sec_fuzz.c" $core -lpthread -o "$work/fuzz" 2> "$work/build.log"; then
    if grep -q "libclang_rt.fuzzer\|cannot find.*fuzzer" "$work/build.log"; then
        echo "SKIP: clang's fuzzer runtime (libclang-rt-14-dev) not installed"; exit 77
    fi
    cat "$work/build.log" >&2; exit 1
fi
mkdir "$work/corpus"
"$work/fuzz" -seed=1 -runs="${CM_FUZZ_RUNS:-200000}" -max_len=4096 "$work/corpus" 2>&1 | tail -n 3
