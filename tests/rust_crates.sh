#!/bin/sh
# The Rust crates (bindings/rust): `cargo test` of the workspace (the global
# allocator, heaps, the cage, the doc examples), again with the nightly
# feature (Heap as an Allocator, compiled by this stable compiler through
# RUSTC_BOOTSTRAP), and `cargo package` of both crates, which builds them
# from the packaged sources alone; then the assembly of Compressed::get and
# Box::compressed (tests/rust_disasm): straight-line code, no branch. The C library is built by cagemalloc-sys
# with the default S; CAGEMALLOC_CAGE_SHIFT is not passed to cargo here.
set -eu
[ -x "$HOME/.cargo/bin/cargo" ] && PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null 2>&1 || { echo "SKIP: cargo not installed"; exit 77; }
export CARGO_TARGET_DIR="$CM_BUILD/rust-target"
unset CAGEMALLOC_CAGE_SHIFT
cd "$CM_SOURCE/bindings/rust"
cargo test --locked --quiet
RUSTC_BOOTSTRAP=1 cargo test --locked --quiet --features nightly
# cargo package unpacks the packaged cagemalloc-sys into CARGO_HOME and
# would reuse an earlier unpack of the same version: it gets a home of its
# own whose unpacked sources are cleared first.
package_home="$CM_BUILD/cargo-home-package"
rm -rf "$package_home/registry/src"
CARGO_HOME="$package_home" cargo package --locked --workspace --quiet --allow-dirty

cd "$CM_SOURCE/tests/rust_disasm"
cargo rustc --locked --quiet --release --lib -- --emit asm
asm=$(ls -t "$CARGO_TARGET_DIR"/release/deps/cagemalloc_rust_disasm-*.s | head -1)
for f in decompress_one compress_one; do
    body=$(awk -v f="$f" '$0 == f ":" { on = 1; next } on && /^\.Lfunc_end/ { exit } on' "$asm" | grep -vE '^\s*\.')
    [ -n "$body" ] || { echo "FAIL: $f not found in $asm"; exit 1; }
    if printf '%s\n' "$body" | grep -qE '^\s*(j[a-z]*|call[a-z]*|cmov[a-z]*)\s'; then
        echo "FAIL: $f branches or calls:"; printf '%s\n' "$body"; exit 1
    fi
    echo "$f:"; printf '%s\n' "$body"
done
echo "rust crates: tests passed (stable and nightly feature), both crates package, get() is branch-free"
