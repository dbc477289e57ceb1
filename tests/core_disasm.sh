#!/bin/sh
# The hot path, read from the machine code of $CM_LIB: the bodies of the
# exported malloc, free, cm_malloc and cm_free must contain no indirect call
# or jump (call *, jmp *), no call through the PLT, and no atomic instruction
# (lock prefix, xchg with memory, cmpxchg). Direct calls/jumps to internal
# slow-path functions are fine. Bodies are cut by address and size from the
# dynamic symbol table, so aliases (malloc = cm_malloc) are handled.
set -eu
: "${CM_LIB:?CM_LIB must name the library}"
fail=0

for fn in malloc free cm_malloc cm_free; do
  line=$(nm -D -S --defined-only "$CM_LIB" | awk -v f="$fn" '{s=$NF; sub(/@.*/, "", s)} s == f && NF == 4')
  if [ -z "$line" ]; then
    echo "FAIL: $fn is not exported with a size"; fail=1; continue
  fi
  start=$((0x$(echo "$line" | awk '{print $1}')))
  size=$((0x$(echo "$line" | awk '{print $2}')))
  body=$(objdump -d --no-show-raw-insn --start-address=$start \
    --stop-address=$((start + size)) "$CM_LIB" | grep -E '^ +[0-9a-f]+:')
  if [ -z "$body" ]; then
    echo "FAIL: no instructions found for $fn"; fail=1; continue
  fi
  bad=$(printf '%s\n' "$body" | grep -E \
    '(call|jmp)[a-z]*[[:space:]]+\*|@plt|[[:space:]]lock[[:space:]]|cmpxchg|xchg[a-z]*[[:space:]].*\(' \
    || true)
  if [ -n "$bad" ]; then
    echo "FAIL: $fn ($size bytes) has indirect, PLT or atomic instructions:"
    printf '%s\n' "$bad"; fail=1
  else
    echo "$fn: $(printf '%s\n' "$body" | wc -l) instructions, clean"
  fi
done
exit $fail
