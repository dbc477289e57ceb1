#!/bin/sh
# sec_prog_gcc: gcc -O2 compiles a generated program of a few hundred lines
# under cagemalloc; the binary must be byte-identical to the one gcc builds
# without it, and run with the same output.
. "$(dirname "$0")/sec_prog_lib.sh"
need gcc
{
    echo '#include <stdio.h>'
    i=0
    while [ $i -lt 300 ]; do
        echo "static int f$i(int x) { return x * $((i + 3)) % 1009 + $i; }"
        i=$((i + 1))
    done
    echo 'int main(void) { long s = 0;'
    i=0
    while [ $i -lt 300 ]; do echo "  s += f$i((int)s % 1000 + $i);"; i=$((i + 1)); done
    printf '%s\n' '  printf("%ld\\n", s); return 0; }'
} > "$work/prog.c"
gcc -O2 -o "$work/prog.plain" "$work/prog.c"
LD_PRELOAD="$CM_LIB" timeout 120 gcc -O2 -o "$work/prog.cage" "$work/prog.c"
cmp -s "$work/prog.plain" "$work/prog.cage" || { echo "gcc produced a different binary under cagemalloc" >&2; exit 1; }
printf '%s\n' "$work/prog.cage" > "$work/run.sh"
compare run "$work/run.sh"
echo "gcc: identical binary and output under cagemalloc"
