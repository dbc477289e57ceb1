#!/bin/sh
# The dynamic symbols of libcagemalloc.so ($CM_LIB):
#  - it imports no locking or waiting function (mutex, spinlock, rwlock,
#    semaphore, condition variable, once, futex, C11 threads, C++ guards);
#  - it exports the whole malloc family, the cm_ API and the C++ operators;
#  - it exports nothing else: every other exported name must be a cm_ function
#    or variable declared in a public header (include/), or a linker symbol;
#  - it needs no library but the C library's (libc, libpthread, the loader):
#    a C++ runtime loaded with it runs initialisers that allocate before main.
set -eu
: "${CM_LIB:?CM_LIB must name the library}" "${CM_SOURCE:?CM_SOURCE must name the source tree}"
fail=0

imports=$(nm -D --undefined-only "$CM_LIB" | awk '{print $NF}' | sed 's/@.*//')
locks=$(printf '%s\n' "$imports" | grep -E \
  '^(pthread_(mutex|spin|rwlock|cond|barrier)_|pthread_once$|sem_|mtx_|cnd_|call_once$|__lll_|__cxa_guard_|.*futex|flock$|lockf$|__pthread_(mutex|rwlock|once))' \
  || true)
if [ -n "$locks" ]; then
  echo "FAIL: $CM_LIB imports lock/wait functions:"; printf '  %s\n' $locks; fail=1
fi
if printf '%s\n' "$imports" | grep -qx syscall; then
  echo "note: $CM_LIB imports syscall(); a futex made through it cannot be seen here"
fi

exports=$(nm -D --defined-only "$CM_LIB" | awk '$2 != "A" && $2 != "a" {print $NF}' \
  | sed 's/@.*//' | sort -u)

libc_api="malloc free calloc realloc reallocarray aligned_alloc posix_memalign memalign
valloc pvalloc malloc_usable_size malloc_trim malloc_stats mallinfo2 mallinfo mallopt malloc_info cfree
free_sized free_aligned_sized
__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc __libc_pvalloc"
cm_api="cm_malloc cm_free cm_calloc cm_realloc cm_aligned_alloc cm_usable_size cm_trim
cm_stats_print cm_stats_get"
cxx_api="_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t
_ZnwmSt11align_val_t _ZnamSt11align_val_t
_ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t
_ZdlPvSt11align_val_t _ZdaPvSt11align_val_t _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t
_ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t"
for s in $libc_api $cm_api $cxx_api; do
  if ! printf '%s\n' "$exports" | grep -qx "$s"; then
    echo "FAIL: $CM_LIB does not export $s"; fail=1
  fi
done

# Also allowed: cm_ functions declared in the public headers, and
# linker-defined symbols.
public_cm=$( (grep -rhoE '\bcm_[A-Za-z0-9_]+[[:space:]]*\(' "$CM_SOURCE/include" | sed 's/[[:space:](]//g';
  grep -rhoE '^CM_API extern [^;]*\bcm_[A-Za-z0-9_]+;' "$CM_SOURCE/include" | grep -oE 'cm_[A-Za-z0-9_]+;$' | tr -d ';';
  # names the header spells with the cage shift appended (cm_cage_base)
  for shift in 1 2 3; do
    grep -rhoE '^#define cm_[A-Za-z0-9_]+ CM_CAGE_JOIN\(cm_[A-Za-z0-9_]+,' "$CM_SOURCE/include" |
      sed -E "s/.*JOIN\((cm_[A-Za-z0-9_]+),/\1$shift/"
  done) \
  | sort -u)
allowed=$(printf '%s\n' $libc_api $cxx_api $public_cm \
  _init _fini _edata _end __bss_start | sort -u)
extra=$(printf '%s\n' "$exports" | grep -vxF "$allowed" || true)
if [ -n "$extra" ]; then
  echo "FAIL: $CM_LIB exports internal symbols (not in the public API):"
  printf '  %s\n' $extra; fail=1
fi

needed=$(readelf -d "$CM_LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
unexpected=$(printf '%s\n' "$needed" | grep -vE '^(libc|libpthread|ld-linux[-a-z0-9_]*)\.so' || true)
if [ -n "$unexpected" ]; then
  echo "FAIL: $CM_LIB needs libraries beyond libc:"; printf '  %s\n' $unexpected; fail=1
fi

[ $fail -eq 0 ] && echo "core_symbols: $(printf '%s\n' "$exports" | wc -l) exports, no lock imports"
exit $fail
