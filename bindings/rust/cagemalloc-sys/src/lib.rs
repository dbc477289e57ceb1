//! Raw declarations of cagemalloc's C API (`include/cagemalloc.h`), and the C
//! library itself, built from source by this crate's build script with the
//! flags of the CMake build (hardening on, hidden visibility, initial-exec
//! TLS). Nothing here replaces the process's `malloc`: the `cm_` functions
//! are the only entry points. The safe API is the `cagemalloc` crate.
//!
//! Every function's contract is the one its C header comment gives; in
//! short: blocks from any `cm_` allocation function are released with
//! [`cm_free`]; a size that cannot be served gives null with `errno` ENOMEM;
//! a bad alignment (not a power of two) gives null with EINVAL; an invalid or
//! double free prints one line on stderr and aborts. Heaps belong to the
//! thread that made them: only it may allocate from them or destroy,
//! delete, collect or visit them (another thread aborts); any thread may
//! free their blocks.
//!
//! `CAGEMALLOC_CAGE_SHIFT` (1, 2 or 3) in the environment of the build sets
//! the cage's compression shift, [`CAGE_SHIFT`].
#![cfg_attr(not(test), no_std)]
#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint, c_void};

include!(concat!(env!("OUT_DIR"), "/cage.rs"));

/// A heap (`cm_heap_t`): opaque.
#[repr(C)]
pub struct cm_heap_t {
    _private: [u8; 0],
}

/// Called by [`cm_heap_visit`] for every live block; non-zero stops the walk.
pub type cm_block_visitor =
    unsafe extern "C" fn(block: *mut c_void, usable_size: usize, arg: *mut c_void) -> c_int;

/// A snapshot of the allocator's counters, in bytes unless named so.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cm_stats_t {
    pub mapped: usize,
    pub committed: usize,
    pub returned: usize,
    pub large_live: usize,
    pub large_cached: usize,
    pub superblocks_live: usize,
    pub os_calls: usize,
}

/// The class space's counters (`struct cm_klass_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cm_klass_stats {
    pub classes_live: usize,
    pub bytes_requested: usize,
    pub bytes_committed: usize,
    pub alignment_loss: usize,
    pub loss_per_class: usize,
    pub gap_bytes_reused: usize,
    pub meta_bytes_elsewhere: usize,
    pub shift: c_uint,
    pub range_log2: c_uint,
    pub narrow_bits: c_uint,
    pub gap_filling: c_int,
}

extern "C" {
    // The malloc family.
    pub fn cm_malloc(size: usize) -> *mut c_void;
    pub fn cm_free(ptr: *mut c_void);
    pub fn cm_calloc(count: usize, size: usize) -> *mut c_void;
    pub fn cm_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    pub fn cm_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
    pub fn cm_usable_size(ptr: *const c_void) -> usize;
    pub fn cm_trim() -> c_int;
    pub fn cm_stats_print(fd: c_int);
    pub fn cm_stats_get(out: *mut cm_stats_t);

    // Heaps.
    pub fn cm_heap_new() -> *mut cm_heap_t;
    pub fn cm_heap_get_default() -> *mut cm_heap_t;
    pub fn cm_heap_malloc(h: *mut cm_heap_t, size: usize) -> *mut c_void;
    pub fn cm_heap_calloc(h: *mut cm_heap_t, count: usize, size: usize) -> *mut c_void;
    pub fn cm_heap_aligned_alloc(h: *mut cm_heap_t, alignment: usize, size: usize) -> *mut c_void;
    pub fn cm_heap_realloc(h: *mut cm_heap_t, p: *mut c_void, size: usize) -> *mut c_void;
    pub fn cm_heap_destroy(h: *mut cm_heap_t);
    pub fn cm_heap_delete(h: *mut cm_heap_t);
    pub fn cm_heap_collect(h: *mut cm_heap_t, force: c_int);
    pub fn cm_heap_contains(h: *const cm_heap_t, p: *const c_void) -> c_int;
    pub fn cm_heap_visit(h: *mut cm_heap_t, visitor: cm_block_visitor, arg: *mut c_void) -> c_int;

    // The cage (cm_cage_base and CAGE_SHIFT come from the build script).
    pub fn cm_cage_malloc(size: usize) -> *mut c_void;
    pub fn cm_cage_calloc(count: usize, size: usize) -> *mut c_void;
    pub fn cm_cage_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    pub fn cm_cage_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
    pub fn cm_cage_free(p: *mut c_void);
    pub fn cm_heap_new_in_cage() -> *mut cm_heap_t;
    pub fn cm_in_cage(p: *const c_void) -> c_int;

    // Class space.
    pub fn cm_klass_configure(shift: c_uint, range_log2: c_uint) -> c_int;
    pub fn cm_klass_alloc(size: usize) -> *mut c_void;
    pub fn cm_klass_free(klass: *mut c_void);
    pub fn cm_klass_bits() -> c_uint;
    pub fn cm_meta_alloc(size: usize) -> *mut c_void;
    pub fn cm_meta_free(meta: *mut c_void);
    pub fn cm_klass_stats(out: *mut cm_klass_stats);
    /// Set at the class space's first use.
    pub static cm_klass_base: core::sync::atomic::AtomicUsize;
    /// Set at the class space's first use.
    pub static cm_klass_shift: core::sync::atomic::AtomicU32;

    // Code space.
    pub fn cm_code_alloc(size: usize, near: *const c_void) -> *mut c_void;
    pub fn cm_code_free(code: *mut c_void);
    pub fn cm_code_write(dst: *mut c_void, src: *const c_void, n: usize) -> c_int;
    pub fn cm_rel32_reachable(next_insn: *const c_void, target: *const c_void) -> c_int;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_allocates() {
        unsafe {
            let p = cm_malloc(100) as *mut u8;
            assert!(!p.is_null());
            p.write_bytes(0x5a, 100);
            assert!(cm_usable_size(p as *const c_void) >= 100);
            assert_eq!(*p.add(99), 0x5a);
            cm_free(p as *mut c_void);
        }
    }

    #[test]
    fn cage_base_is_the_one_the_library_was_built_with() {
        unsafe {
            let p = cm_cage_malloc(32);
            assert!(!p.is_null());
            assert_eq!(cm_in_cage(p), 1);
            let base = cm_cage_base.load(core::sync::atomic::Ordering::Relaxed);
            let low = (1usize << (31 + CAGE_SHIFT)) - 1;
            assert_eq!(base & low, low);
            assert_eq!(p as usize & !low, base & !low);
            cm_free(p);
        }
    }
}
