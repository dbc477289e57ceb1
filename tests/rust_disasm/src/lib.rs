//! Compressed::get and Box::compressed, each alone in an exported function.
use cagemalloc::cage::{self, Compressed};

#[no_mangle]
pub fn decompress_one(c: Compressed<u64>) -> *mut u64 {
    c.get()
}

#[no_mangle]
pub fn compress_one(b: &cage::Box<u64>) -> Compressed<u64> {
    cage::Box::compressed(b)
}
