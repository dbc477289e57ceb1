#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    cagemalloc_rust_bench::main("mimalloc")
}
