#!/bin/sh
# core_programs: real programs give the same output with cagemalloc preloaded
# as without it: python3 building and hashing many objects in threads, and a
# sort | uniq | grep pipeline over 200k generated lines (every stage preloaded).
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/objects.py" <<'PY'
import hashlib, json, threading
def build(seed):
    d = {}
    for i in range(60000):
        key = "k%d-%d" % (seed, i * 7919 % 100003)
        d[key] = [i, str(i) * (i % 9), {"x": i % 13}]
    return hashlib.sha256(json.dumps(sorted(d.items())).encode()).hexdigest()
results = [None] * 4
def run(n):
    results[n] = build(n)
threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("\n".join(results))
print(sum(len(s) for s in (str(i) * 3 for i in range(300000))))
PY

check() { # name, command...
    name=$1; shift
    "$@" > "$work/$name.plain"
    LD_PRELOAD="$CM_LIB" "$@" > "$work/$name.cage"
    if ! cmp -s "$work/$name.plain" "$work/$name.cage"; then
        echo "$name: output differs under cagemalloc" >&2
        diff "$work/$name.plain" "$work/$name.cage" | head -5 >&2
        exit 1
    fi
}

check python timeout 120 python3 "$work/objects.py"

i=0
while [ $i -lt 200000 ]; do echo "line $(( (i * 7919) % 100003 )) word$(( i % 97 ))"; i=$((i + 1)); done > "$work/lines.txt"
pipeline() {
    LD_PRELOAD="${PRELOAD:-}" sort "$work/lines.txt" | LD_PRELOAD="${PRELOAD:-}" uniq -c |
        LD_PRELOAD="${PRELOAD:-}" grep "word4" | LD_PRELOAD="${PRELOAD:-}" sort -k1,1n -k2 | tail -n 50
}
pipeline > "$work/pipe.plain"
PRELOAD="$CM_LIB" pipeline > "$work/pipe.cage"
cmp -s "$work/pipe.plain" "$work/pipe.cage" || { echo "pipeline: output differs under cagemalloc" >&2; exit 1; }
[ -s "$work/pipe.plain" ] || { echo "pipeline produced nothing" >&2; exit 1; }
echo "programs: python3 and a sort/uniq/grep pipeline give identical output under cagemalloc"
