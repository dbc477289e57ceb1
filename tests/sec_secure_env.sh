#!/bin/sh
# The CAGEMALLOC_* variables are ignored in a privileged process (AT_SECURE):
# nobody who can start a set-user-ID program can change how it allocates.
# An ordinary process honours CAGEMALLOC_VERBOSE=1 (init reports on stderr);
# a set-user-ID copy (owner nobody, started by root) must stay silent.
set -u
: "${CM_BUILD:?CM_BUILD must name the build tree}"
prog="$CM_BUILD/tests/sec_secure_env"

out=$(CAGEMALLOC_VERBOSE=1 "$prog" 2>&1)
case "$out" in
*"cagemalloc: version"*) ;;
*) echo "FAIL: an ordinary process ignored CAGEMALLOC_VERBOSE=1: $out"; exit 1 ;;
esac

[ "$(id -u)" = 0 ] || { echo "SKIP: making a set-user-ID copy needs root"; exit 77; }
dir=$(mktemp -d "$CM_BUILD/tests/secure.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cp "$prog" "$dir/" && chmod 755 "$dir" && chown nobody "$dir/sec_secure_env" && chmod 4755 "$dir/sec_secure_env" || exit 1
out=$(CAGEMALLOC_VERBOSE=1 "$dir/sec_secure_env" 2>&1)
status=$?
case "$out" in
*secure=0*) echo "SKIP: the set-user-ID copy did not run privileged (nosuid mount?)"; exit 77 ;;
esac
[ "$status" -eq 0 ] || { echo "FAIL: the set-user-ID process exited $status: $out"; exit 1; }
case "$out" in
*"cagemalloc:"*) echo "FAIL: the set-user-ID process read CAGEMALLOC_VERBOSE: $out"; exit 1 ;;
*done*) echo "ok: the set-user-ID process ignored CAGEMALLOC_VERBOSE=1"; exit 0 ;;
*) echo "FAIL: unexpected output: $out"; exit 1 ;;
esac
