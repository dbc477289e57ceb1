//! cagemalloc for Rust: a lock-free malloc as the global allocator, heaps
//! that free all their blocks at once, and 32-bit compressed references to
//! objects in a cage.
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: cagemalloc::CageMalloc = cagemalloc::CageMalloc;
//!
//! let v: Vec<u64> = (0..1000).collect();
//! assert_eq!(v.iter().sum::<u64>(), 499_500);
//! ```
//!
//! - [`CageMalloc`]: the [`GlobalAlloc`] (alloc, dealloc, alloc_zeroed,
//!   realloc; any power-of-two alignment).
//! - [`Heap`]: a heap of the calling thread ([`Heap::destroy`] frees all its
//!   blocks at once; dropping it keeps them valid).
//! - [`cage`]: [`cage::Box`] puts a value in the cage, [`cage::Compressed`]
//!   names it in 4 bytes.
//!
//! The C library is built from source by `cagemalloc-sys` (x86-64 Linux).
#![cfg_attr(feature = "nightly", feature(allocator_api))]
#![no_std]

#[cfg(test)]
extern crate std;

pub mod cage;
mod heap;

/// The raw C API, for what the safe one does not cover (class space, code
/// space, statistics).
pub use cagemalloc_sys as sys;
pub use heap::Heap;

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use core::ptr;

/// True if a block of `size` bytes from cm_malloc is aligned to `align` as
/// it is (its size class, no padding): every block is 16-aligned but those
/// of the 8-byte class (requests of 8 bytes or less), which are 8-aligned.
#[inline]
const fn malloc_aligns(align: usize, size: usize) -> bool {
    align <= 8 || (align <= 16 && size > 8)
}

/// cagemalloc as the global allocator:
///
/// ```
/// #[global_allocator]
/// static GLOBAL: cagemalloc::CageMalloc = cagemalloc::CageMalloc;
/// ```
///
/// Blocks come from the calling thread's default heap, through the same
/// lock-free paths as the C library's `malloc`; any thread may free them.
/// `alloc_zeroed` is calloc, which does not clear memory fresh from the OS.
pub struct CageMalloc;

unsafe impl GlobalAlloc for CageMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            sys::cm_malloc(layout.size()) as *mut u8
        } else {
            sys::cm_aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            sys::cm_calloc(1, layout.size()) as *mut u8
        } else {
            cleared(
                sys::cm_aligned_alloc(layout.align(), layout.size()),
                layout.size(),
            )
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        sys::cm_free(ptr as *mut c_void);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_aligns(layout.align(), new_size) {
            return sys::cm_realloc(ptr as *mut c_void, new_size) as *mut u8;
        }
        realloc_aligned(ptr, layout, new_size, |align, size| {
            sys::cm_aligned_alloc(align, size)
        })
    }
}

/// The block p (null or size bytes) cleared: aligned_alloc has no calloc twin.
#[inline]
unsafe fn cleared(p: *mut c_void, size: usize) -> *mut u8 {
    let p = p as *mut u8;
    if !p.is_null() {
        p.write_bytes(0, size);
    }
    p
}

/// Realloc of a block aligned beyond 16 bytes, which cm_realloc would not
/// keep aligned: the block stays where it is if it fits without wasting half
/// of it, else moves to a block from `aligned_alloc(align, size)`.
#[inline]
unsafe fn realloc_aligned(
    ptr: *mut u8,
    layout: Layout,
    new_size: usize,
    aligned_alloc: impl FnOnce(usize, usize) -> *mut c_void,
) -> *mut u8 {
    let usable = sys::cm_usable_size(ptr as *const c_void);
    if new_size <= usable && new_size > usable / 2 {
        return ptr;
    }
    let new = aligned_alloc(layout.align(), new_size) as *mut u8;
    if !new.is_null() {
        ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
        sys::cm_free(ptr as *mut c_void);
    }
    new
}

/// The number of bytes usable in a block of cagemalloc's (at least the
/// size asked for; all may be written). 0 for null.
///
/// # Safety
/// `ptr` is null or a live block of cagemalloc's.
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    sys::cm_usable_size(ptr as *const c_void)
}

/// Return to the OS every page that can be returned (empty superblocks,
/// cached large mappings, the calling thread's unused memory); true if
/// memory was returned.
pub fn trim() -> bool {
    unsafe { sys::cm_trim() != 0 }
}
