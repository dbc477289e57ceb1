#[global_allocator]
static GLOBAL: cagemalloc::CageMalloc = cagemalloc::CageMalloc;

fn main() {
    cagemalloc_rust_bench::main("cagemalloc")
}
