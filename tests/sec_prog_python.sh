#!/bin/sh
# sec_prog_python: CPython's own regression tests for the parts that lean on
# malloc hardest (containers, strings, numbers, pickling, compression,
# ctypes, mmap, threads, gc and weak references, subprocesses; not sqlite3,
# whose tests fail on Debian's python3 with or without cagemalloc)
# pass with cagemalloc preloaded and every Python object allocated through
# malloc (PYTHONMALLOC=malloc: no pymalloc arenas in front of it). A test
# module that fails under cagemalloc is run again without it; this test
# fails if any of them then passes (some of CPython's tests fail as root or
# in a container whatever the allocator), or if none of them ran.
. "$(dirname "$0")/sec_prog_lib.sh"

# Debian's python3 with its test package (install-deps installs it), else
# whichever python3 has one.
python=
for p in /usr/bin/python3 "$(command -v python3 || true)"; do
    if [ -x "$p" ] && "$p" -c 'import test.libregrtest' 2>/dev/null; then
        python=$p
        break
    fi
done
[ -n "$python" ] || { echo "SKIP: no python3 with its regression tests (libpython3.X-testsuite)"; exit 77; }

modules="test_dict test_set test_list test_tuple test_deque test_heapq test_bytes test_unicode
test_codecs test_re test_json test_pickle test_marshal test_long test_float test_decimal
test_fractions test_array test_struct test_memoryview test_collections test_itertools
test_functools test_zlib test_bz2 test_lzma test_zipfile test_csv test_xml_etree test_ast
test_ctypes test_mmap test_gc test_weakref test_thread test_threading_local
test_queue test_subprocess test_os test_fork1"

# Run the modules under PRELOAD, two workers, each module under a limit;
# print the names regrtest lists as failed (crashes and timeouts included).
run_modules() { # preload, output file, modules...
    preload=$1 out=$2
    shift 2
    LD_PRELOAD="$preload" PYTHONMALLOC=malloc timeout 300 "$python" -m test -j2 --timeout 150 "$@" > "$out" 2>&1
}
failed_in() { # regrtest output: the modules its summary lists as failed
    awk '/^[0-9]+ tests? failed:/ { on = 1; next } on && /^    / { print; next } { on = 0 }' "$1" | tr -s ' ' '\n' | grep . || true
}

if run_modules "$CM_LIB" "$work/cage.log" $modules; then
    ran=$(grep -c '\] test_[a-z0-9_]* passed' "$work/cage.log" || true)
    [ "$ran" -gt 0 ] || { echo "no module ran:" >&2; tail -5 "$work/cage.log" >&2; exit 1; }
    echo "python: $ran of CPython's test modules passed under cagemalloc (PYTHONMALLOC=malloc, $python)"
    exit 0
fi
failed=$(failed_in "$work/cage.log")
[ -n "$failed" ] || { echo "regrtest failed and named no module:" >&2; tail -15 "$work/cage.log" >&2; exit 1; }
status=0
for m in $failed; do
    if run_modules "" "$work/plain-$m.log" "$m"; then
        echo "$m fails under cagemalloc and passes without it:" >&2
        grep -m1 -A10 -E "\] $m (failed|crashed|timed out)|^test $m failed" "$work/cage.log" >&2 || true
        status=1
    else
        echo "$m fails without cagemalloc too (left out)"
    fi
done
[ "$status" -eq 0 ] && echo "python: CPython's test modules pass under cagemalloc wherever they pass without it"
exit "$status"
