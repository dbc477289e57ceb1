#!/bin/sh
# The CAGEMALLOC_* variables are ignored in a privileged process (AT_SECURE),
# so CAGEMALLOC_HARDEN=0 cannot turn hardening off in a set-user-ID program.
# An ordinary process honours it (a double free then goes unnoticed); a
# set-user-ID copy (owner nobody, started by root) must still abort on it.
set -u
: "${CM_BUILD:?CM_BUILD must name the build tree}"
prog="$CM_BUILD/tests/sec_secure_env"

out=$(CAGEMALLOC_HARDEN=0 "$prog" 2>&1)
case "$out" in
*survived*) ;;
*) echo "FAIL: an ordinary process ignored CAGEMALLOC_HARDEN=0: $out"; exit 1 ;;
esac

[ "$(id -u)" = 0 ] || { echo "SKIP: making a set-user-ID copy needs root"; exit 77; }
dir=$(mktemp -d "$CM_BUILD/tests/secure.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cp "$prog" "$dir/" && chmod 755 "$dir" && chown nobody "$dir/sec_secure_env" && chmod 4755 "$dir/sec_secure_env" || exit 1
out=$(CAGEMALLOC_HARDEN=0 "$dir/sec_secure_env" 2>&1)
status=$?
case "$out" in
*secure=0*) echo "SKIP: the set-user-ID copy did not run privileged (nosuid mount?)"; exit 77 ;;
esac
case "$out" in
*"cagemalloc: free(): double free "*)
  [ "$status" -ne 0 ] || { echo "FAIL: reported the double free but exited 0"; exit 1; }
  echo "ok: set-user-ID process kept hardening on despite CAGEMALLOC_HARDEN=0"; exit 0 ;;
*) echo "FAIL: set-user-ID process (status $status) did not catch the double free: $out"; exit 1 ;;
esac
