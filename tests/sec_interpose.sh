#!/bin/sh
# sec_interpose: run a threaded program under an interposer that wraps mmap,
# munmap, open and dl_iterate_phdr (resolving them with dlsym, allocating
# inside), preloaded before and after cagemalloc. No deadlock, no crash,
# no endless recursion: each run must finish in time with the right output.
set -eu
interposer="$CM_BUILD/tests/libsec_interpose_lib.so"
prog="$CM_BUILD/tests/sec_interpose_prog"
for order in "$interposer:$CM_LIB" "$CM_LIB:$interposer"; do
    out=$(LD_PRELOAD="$order" timeout 60 "$prog")
    [ "$out" = "interposed run finished" ] || { echo "LD_PRELOAD=$order: got '$out'" >&2; exit 1; }
done
echo "interposition: both preload orders finish"
