# sec_prog_lib.sh: sourced by the sec_prog_* tests. Gives them a scratch
# directory $work and `compare NAME SCRIPT`, which runs the shell script
# SCRIPT without and with cagemalloc preloaded (each under a time limit) and
# fails if either run fails or their outputs differ.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

need() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 not installed"; exit 77; }; }

compare() {
    name=$1 script=$2
    timeout 120 sh -eu "$script" > "$work/$name.plain" 2>&1 ||
        { echo "$name failed without cagemalloc:" >&2; tail -5 "$work/$name.plain" >&2; exit 1; }
    LD_PRELOAD="$CM_LIB" timeout 120 sh -eu "$script" > "$work/$name.cage" 2>&1 ||
        { echo "$name failed under cagemalloc:" >&2; tail -5 "$work/$name.cage" >&2; exit 1; }
    if ! cmp -s "$work/$name.plain" "$work/$name.cage"; then
        echo "$name: output differs under cagemalloc" >&2
        diff "$work/$name.plain" "$work/$name.cage" | head -10 >&2
        exit 1
    fi
}
