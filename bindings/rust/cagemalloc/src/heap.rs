//! `Heap`: a first-class heap of the calling thread (cm_heap_t).
use core::alloc::Layout;
use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::ptr::NonNull;

use cagemalloc_sys as sys;

use crate::{cleared, malloc_aligns, realloc_aligned};

/// A heap: blocks allocated from it stay together, and [`Heap::destroy`]
/// frees them all at once, arena style, with no work per block.
///
/// A heap belongs to the thread that made it: only that thread may allocate
/// from it, destroy, collect or visit it. So `Heap` is neither `Send` nor
/// `Sync`:
///
/// ```compile_fail
/// let heap = cagemalloc::Heap::new();
/// std::thread::spawn(move || drop(heap)); // a Heap cannot leave its thread
/// ```
///
/// Its blocks, though, are ordinary blocks: any thread may free them (with
/// [`Heap::dealloc`], or the C library's `cm_free`). Dropping a heap deletes
/// it and keeps its live blocks valid (the thread's default heap adopts
/// them); [`Heap::destroy`] frees them.
///
/// ```
/// use std::alloc::Layout;
/// let heap = cagemalloc::Heap::new();
/// let layout = Layout::array::<u64>(1000).unwrap();
/// for _ in 0..100 {
///     let p = heap.alloc(layout).unwrap().cast::<u64>();
///     unsafe { p.as_ptr().write_bytes(0, 1000) };
/// }
/// heap.destroy(); // the 100 blocks go at once
/// ```
///
/// With the `nightly` feature, `&Heap` is a `core::alloc::Allocator`:
/// `Vec::new_in(&heap)`.
pub struct Heap {
    raw: NonNull<sys::cm_heap_t>,
    // *mut () is neither Send nor Sync: the heap stays with its owner thread.
    _owner_thread_only: PhantomData<*mut ()>,
}

impl Heap {
    /// A new empty heap owned by the calling thread (a few hundred bytes
    /// until it allocates). Aborts, as `handle_alloc_error` does, when it
    /// cannot be made; [`Heap::try_new`] returns `None` instead.
    pub fn new() -> Heap {
        match Heap::try_new() {
            Some(h) => h,
            None => alloc_error(Layout::new::<usize>()),
        }
    }

    /// A new empty heap, or `None` when memory is exhausted.
    pub fn try_new() -> Option<Heap> {
        Heap::from_raw(unsafe { sys::cm_heap_new() })
    }

    /// A new empty heap inside the cage: its blocks can be named by
    /// [`crate::cage::Compressed`] references. `None` when the cage is full.
    pub fn try_new_in_cage() -> Option<Heap> {
        Heap::from_raw(unsafe { sys::cm_heap_new_in_cage() })
    }

    fn from_raw(raw: *mut sys::cm_heap_t) -> Option<Heap> {
        NonNull::new(raw).map(|raw| Heap {
            raw,
            _owner_thread_only: PhantomData,
        })
    }

    /// The C handle, for the `cm_heap_` functions of `cagemalloc-sys`.
    pub fn as_raw(&self) -> *mut sys::cm_heap_t {
        self.raw.as_ptr()
    }

    /// A block for `layout` (any power-of-two alignment; a size of 0 gives
    /// a unique block), or `None` when memory is exhausted.
    #[inline]
    pub fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let h = self.as_raw();
        NonNull::new(unsafe {
            if malloc_aligns(layout.align(), layout.size()) {
                sys::cm_heap_malloc(h, layout.size()) as *mut u8
            } else {
                sys::cm_heap_aligned_alloc(h, layout.align(), layout.size()) as *mut u8
            }
        })
    }

    /// As [`Heap::alloc`], the block's bytes all zero (memory fresh from
    /// the OS is not cleared again).
    #[inline]
    pub fn alloc_zeroed(&self, layout: Layout) -> Option<NonNull<u8>> {
        let h = self.as_raw();
        NonNull::new(unsafe {
            if malloc_aligns(layout.align(), layout.size()) {
                sys::cm_heap_calloc(h, 1, layout.size()) as *mut u8
            } else {
                cleared(
                    sys::cm_heap_aligned_alloc(h, layout.align(), layout.size()),
                    layout.size(),
                )
            }
        })
    }

    /// Free a block (of this heap, or of any other: any block of
    /// cagemalloc's may be freed here).
    ///
    /// # Safety
    /// `ptr` is a live block of cagemalloc's, not used afterwards.
    #[inline]
    pub unsafe fn dealloc(&self, ptr: NonNull<u8>, _layout: Layout) {
        sys::cm_free(ptr.as_ptr() as *mut c_void);
    }

    /// Resize a block to `new_size` bytes, keeping its contents up to the
    /// smaller size and `layout`'s alignment; the result is in this heap.
    /// `None` when memory is exhausted (the old block is then untouched).
    ///
    /// # Safety
    /// `ptr` is a live block of cagemalloc's allocated with `layout`, and
    /// `new_size` is not 0; on success the old pointer is not used again.
    #[inline]
    pub unsafe fn realloc(
        &self,
        ptr: NonNull<u8>,
        layout: Layout,
        new_size: usize,
    ) -> Option<NonNull<u8>> {
        let h = self.as_raw();
        NonNull::new(if malloc_aligns(layout.align(), new_size) {
            sys::cm_heap_realloc(h, ptr.as_ptr() as *mut c_void, new_size) as *mut u8
        } else {
            realloc_aligned(ptr.as_ptr(), layout, new_size, |align, size| {
                sys::cm_heap_aligned_alloc(h, align, size)
            })
        })
    }

    /// True if `p` points into a block of this heap, live or free (for a
    /// large block: into its first 64 KiB).
    pub fn contains<T: ?Sized>(&self, p: *const T) -> bool {
        unsafe { sys::cm_heap_contains(self.as_raw(), p as *const c_void) != 0 }
    }

    /// Give back what the heap holds unused: its empty superblocks go to the
    /// shared pool; `force` also returns the pool's kept pages to the OS.
    pub fn collect(&self, force: bool) {
        unsafe { sys::cm_heap_collect(self.as_raw(), force as c_int) }
    }

    /// Call `f(block, usable_size)` for every live block of the heap once;
    /// a block freed by any thread whose free has returned is not live. The
    /// walk stops early when `f` returns false; the result is true when every
    /// block was visited. `&mut self` keeps the heap from being used during
    /// the walk, as the C library requires.
    pub fn visit<F: FnMut(NonNull<u8>, usize) -> bool>(&mut self, mut f: F) -> bool {
        unsafe extern "C" fn trampoline<F: FnMut(NonNull<u8>, usize) -> bool>(
            block: *mut c_void,
            usable: usize,
            arg: *mut c_void,
        ) -> c_int {
            let f = &mut *(arg as *mut F);
            (!f(NonNull::new_unchecked(block as *mut u8), usable)) as c_int
        }
        unsafe {
            sys::cm_heap_visit(
                self.as_raw(),
                trampoline::<F>,
                &mut f as *mut F as *mut c_void,
            ) == 0
        }
    }

    /// Free every block of the heap at once and delete it. (Safe: the blocks
    /// were handed out as raw pointers, and no `&Heap` borrow, such as a
    /// collection allocating in it, can outlive this call.)
    pub fn destroy(self) {
        let raw = self.as_raw();
        core::mem::forget(self);
        unsafe { sys::cm_heap_destroy(raw) }
    }
}

impl Default for Heap {
    fn default() -> Heap {
        Heap::new()
    }
}

/// Deleting the heap: its live blocks stay valid, adopted by the thread's
/// default heap, and are freed as usual.
impl Drop for Heap {
    fn drop(&mut self) {
        unsafe { sys::cm_heap_delete(self.as_raw()) }
    }
}

fn alloc_error(layout: Layout) -> ! {
    extern crate alloc;
    alloc::alloc::handle_alloc_error(layout)
}

/// What the Allocator methods return: the block as a slice, or AllocError.
#[cfg(feature = "nightly")]
type Allocated = Result<NonNull<[u8]>, core::alloc::AllocError>;

#[cfg(feature = "nightly")]
unsafe impl core::alloc::Allocator for &Heap {
    fn allocate(&self, layout: Layout) -> Allocated {
        as_slice(Heap::alloc(self, layout), layout)
    }

    fn allocate_zeroed(&self, layout: Layout) -> Allocated {
        as_slice(Heap::alloc_zeroed(self, layout), layout)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        Heap::dealloc(self, ptr, layout)
    }

    unsafe fn grow(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Allocated {
        self.resize(ptr, old, new)
    }

    unsafe fn grow_zeroed(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Allocated {
        let p = self.resize(ptr, old, new)?;
        (p.as_ptr() as *mut u8)
            .add(old.size())
            .write_bytes(0, new.size() - old.size());
        Ok(p)
    }

    unsafe fn shrink(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Allocated {
        self.resize(ptr, old, new)
    }
}

#[cfg(feature = "nightly")]
fn as_slice(p: Option<NonNull<u8>>, layout: Layout) -> Allocated {
    p.map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
        .ok_or(core::alloc::AllocError)
}

#[cfg(feature = "nightly")]
impl Heap {
    /// grow and shrink: realloc when the alignment stays, else a new block.
    unsafe fn resize(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Allocated {
        let p = if new.align() == old.align() && new.size() != 0 {
            self.realloc(ptr, old, new.size())
        } else {
            let p = self.alloc(new);
            if let Some(p) = p {
                core::ptr::copy_nonoverlapping(
                    ptr.as_ptr(),
                    p.as_ptr(),
                    old.size().min(new.size()),
                );
                self.dealloc(ptr, old);
            }
            p
        };
        as_slice(p, new)
    }
}
