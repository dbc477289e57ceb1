#!/bin/sh
# The arena's reservation and the address-space limit. With no limit the
# first allocation reserves 64 GiB of address space (CAGEMALLOC_VERBOSE=1
# says so), or what CAGEMALLOC_ARENA_RESERVE asks; under `ulimit -v` it
# reserves none, so that the limit stays for what the program maps, and a
# program that grows by 192 MiB runs within a 1 GiB limit (edge_grow_calls:
# 96 MiB of 1 KiB blocks, freed, and again, every block pattern-checked).
set -u
: "${CM_BUILD:?CM_BUILD must name the build tree}"
prog="$CM_BUILD/tests/edge_grow_calls"

expect() { # what, command...
    what=$1; shift
    out=$("$@" 2>&1); status=$?
    [ "$status" -eq 0 ] || { echo "FAIL: exit $status: $out"; exit 1; }
    case "$out" in
    *"arena reserved: $what MiB"*) echo "ok: arena reserved: $what MiB ($*)" ;;
    *) echo "FAIL: expected 'arena reserved: $what MiB': $out"; exit 1 ;;
    esac
}
# Where this test itself runs under a limit, none is the right answer
# throughout (strict overcommit does not count: the reservation is closed).
full=65536 one_gib=1024
if [ "$(ulimit -v)" != unlimited ]; then
    full=0 one_gib=0
fi
expect $full env CAGEMALLOC_VERBOSE=1 "$prog"
expect $one_gib env CAGEMALLOC_VERBOSE=1 CAGEMALLOC_ARENA_RESERVE=1g "$prog"
expect 0 env CAGEMALLOC_VERBOSE=1 CAGEMALLOC_ARENA_RESERVE=0 "$prog"
expect 0 sh -c 'ulimit -v 1048576 && exec env CAGEMALLOC_VERBOSE=1 "$0"' "$prog"
