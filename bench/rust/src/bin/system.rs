// The workload with Rust's default allocator (glibc malloc).
fn main() {
    cagemalloc_rust_bench::main("system")
}
