#!/bin/sh
# tables_rodata: instance-independent tables (seed 001). Every constant table
# of the allocator (the size classes with their geometry, the
# size-to-class lookup, the word free lists end at) is defined once, in
# .rodata of the built library (for the word: a stray write faults):
# shared by every process that maps it, never computed at run time (the
# library has no start-up constructor: .init_array holds only the
# compiler's frame_dummy). Also reports the library's writable data (.data,
# .bss, .lbss), which a process pays for only in pages it touches; where the
# large zero-filled arrays have a section of their own (CM_LARGE_ZEROED),
# .bss holds only small variables, which must stay on two pages with .data.
set -eu
: "${CM_LIB:?CM_LIB must name the library}" "${CM_SOURCE:?CM_SOURCE must name the source tree}"
fail=0
sections=$(readelf -SW "$CM_LIB" | sed -n 's/^ *\[ *\([0-9]*\)\] *\([^ ]*\) .*/\1 \2/p')
rodata=$(printf '%s\n' "$sections" | awk '$2 == ".rodata" {print $1}')
for table in cm_class_info cm_class_by_1 cm_class_by_128 cm_list_end; do
    where=$(readelf -sW "$CM_LIB" | awk -v t="$table" '$8 == t {print $7}')
    copies=$(printf '%s\n' "$where" | grep -c . || true)
    if [ "$copies" != 1 ] || [ "$where" != "$rodata" ]; then
        echo "FAIL: $table: $copies copies, in section(s) $(echo $where) (.rodata is $rodata)"; fail=1
    else
        echo "$table: one copy, in .rodata"
    fi
done
init_array=$(readelf -SW "$CM_LIB" | awk '$2 == ".init_array" {print $6} $3 == ".init_array" {print $7}' | head -n 1)
if [ -n "$init_array" ] && [ $((0x$init_array)) -gt 8 ]; then
    echo "FAIL: .init_array has $((0x$init_array / 8)) entries: start-up code runs in the library"; fail=1
fi
if grep -rn '__attribute__((constructor' "$CM_SOURCE/src" >/dev/null; then
    echo "FAIL: a constructor in src/:"; grep -rn '__attribute__((constructor' "$CM_SOURCE/src"; fail=1
fi
data=$(size -A "$CM_LIB" | awk '$1 == ".data" {print $2}')
bss=$(size -A "$CM_LIB" | awk '$1 == ".bss" {print $2}')
lbss=$(size -A "$CM_LIB" | awk '$1 == ".lbss" {n += $2} END {print n + 0}')
tls=$(size -A "$CM_LIB" | awk '$1 == ".tdata" || $1 == ".tbss" {n += $2} END {print n + 0}')
echo "writable data: .data $data bytes, .bss $bss bytes, .lbss $lbss bytes (zero pages until touched), TLS $tls bytes per thread"
[ "$data" -le 4096 ] || { echo "FAIL: .data over 4 KiB"; fail=1; }
[ $((bss + lbss)) -le $((1 << 20)) ] || { echo "FAIL: zero-filled data over 1 MiB"; fail=1; }
if [ "$lbss" -gt 0 ] && [ $((data + bss)) -gt 8192 ]; then
    echo "FAIL: .data and .bss take more than two pages: a large array without CM_LARGE_ZEROED?"; fail=1
fi
exit $fail
