#!/bin/sh
# The Rust crates (bindings/rust): `cargo test` of the workspace (the global
# allocator, heaps, the cage, the doc examples), again with the nightly
# feature (Heap as an Allocator, compiled by this stable compiler through
# RUSTC_BOOTSTRAP), and `cargo package` of both crates, which builds them
# from the packaged sources alone. The C library is built by cagemalloc-sys
# with the default S; CAGEMALLOC_CAGE_SHIFT is not passed to cargo here.
set -eu
[ -x "$HOME/.cargo/bin/cargo" ] && PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null 2>&1 || { echo "SKIP: cargo not installed"; exit 77; }
export CARGO_TARGET_DIR="$CM_BUILD/rust-target"
unset CAGEMALLOC_CAGE_SHIFT
cd "$CM_SOURCE/bindings/rust"
cargo test --locked --quiet
RUSTC_BOOTSTRAP=1 cargo test --locked --quiet --features nightly
cargo package --locked --workspace --quiet --allow-dirty
echo "rust crates: tests passed (stable and nightly feature), both crates package"
