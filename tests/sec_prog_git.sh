#!/bin/sh
# sec_prog_git: git creates a repository of 1,000 files, commits, logs, packs
# (gc) and checks it (fsck), identically with and without cagemalloc (names
# and dates are fixed, so the hashes are the same).
. "$(dirname "$0")/sec_prog_lib.sh"
need git
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t \
       GIT_COMMITTER_EMAIL=t@example.invalid GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" \
       GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" GIT_CONFIG_NOSYSTEM=1 HOME="$work"
cat > "$work/run.sh" <<'RUN'
repo="$work/repo"
rm -rf "$repo"
git init -q -b main "$repo"
i=0
while [ $i -lt 1000 ]; do
    mkdir -p "$repo/d$((i % 20))"
    printf 'file %d\n%s\n' "$i" "$(seq $((i % 50)))" > "$repo/d$((i % 20))/f$i.txt"
    i=$((i + 1))
done
git -C "$repo" add -A
git -C "$repo" commit -q -m "one thousand files"
sed -i 's/file/FILE/' "$repo"/d1/*.txt
git -C "$repo" commit -q -am "second"
git -C "$repo" log --stat --format='%H %s' | tail -n 5
git -C "$repo" gc -q
git -C "$repo" fsck --strict 2>&1
git -C "$repo" count-objects -v | grep -v size
git -C "$repo" rev-parse 'HEAD^{tree}'
RUN
export work
compare git "$work/run.sh"
echo "git: 1,000 files, commits, log, gc and fsck identical under cagemalloc"
