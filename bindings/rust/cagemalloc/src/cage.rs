//! The cage: values placed in one reservation of 4 GiB (8 or 16 with
//! `CAGEMALLOC_CAGE_SHIFT` = 2 or 3 at build time), named by 32-bit
//! compressed references, as V8 and Oilpan do.
//!
//! [`Box`] puts a value in the cage; [`Compressed`] names it in 4 bytes, and
//! `Option<Compressed<T>>` is 4 bytes too. A linked structure of compressed
//! references takes half the pointer bytes:
//!
//! ```
//! use cagemalloc::cage::{self, Compressed};
//!
//! struct Node {
//!     value: u32,
//!     next: Option<Compressed<Node>>, // 4 bytes, where Option<Box<Node>> takes 8
//! }
//! assert_eq!(std::mem::size_of::<Node>(), 8); // 16 with a Box
//!
//! // A list 0 -> 1 -> ... -> 999, every node in the cage.
//! let mut head: Option<Compressed<Node>> = None;
//! for value in (0..1000).rev() {
//!     head = Some(cage::Box::into_compressed(cage::Box::new(Node { value, next: head })));
//! }
//! let (mut sum, mut at) = (0, head);
//! while let Some(c) = at {
//!     let node = unsafe { c.as_ref() }; // the node is alive: nothing freed it
//!     sum += node.value;
//!     at = node.next;
//! }
//! assert_eq!(sum, 499_500);
//!
//! // Free the list: each node back into a Box, dropped.
//! while let Some(c) = head {
//!     let node = unsafe { cage::Box::from_compressed(c) };
//!     head = node.next;
//! }
//! ```
use core::cmp::Ordering;
use core::ffi::c_void;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::marker::PhantomData;
use core::mem;
use core::num::NonZeroU32;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;

use cagemalloc_sys as sys;

use crate::malloc_aligns;

/// The compression shift S: references are the address shifted right by S,
/// so the cage spans 2^(31 + S) bytes.
pub const SHIFT: u32 = sys::CAGE_SHIFT;

/// The cage's size in bytes: 2^(31 + S).
pub const SIZE: usize = 1 << (31 + SHIFT);

/// True if `p` points into the cage's reservation.
pub fn contains<T: ?Sized>(p: *const T) -> bool {
    unsafe { sys::cm_in_cage(p as *const c_void) != 0 }
}

/// A 32-bit reference to a `T` in the cage: the address shifted right by
/// [`SHIFT`] (whose top bit is then set, every cage address having bit
/// 31 + S set). `Copy`; equality, hashing and order are on the 32 bits,
/// without decompressing ([`Ord`] is the order of the addresses);
/// [`Compressed::get`] decompresses without a branch. Like a raw pointer it
/// does not keep its target alive, and is neither `Send` nor `Sync`.
///
/// Null is not a `Compressed`: `Option<Compressed<T>>` is 4 bytes and
/// `None` compresses null. [`Compressed::sentinel`] is a non-null "no
/// object" marker (the value 1).
pub struct Compressed<T> {
    raw: NonZeroU32,
    _target: PhantomData<*const T>,
}

impl<T> Compressed<T> {
    /// The reference to `p`, or `None` if `p` is not in the cage.
    pub fn new(p: *const T) -> Option<Compressed<T>> {
        if contains(p) {
            // a cage address has bit 31 + S set, so the value is not zero
            NonZeroU32::new(((p as usize) >> SHIFT) as u32).map(Compressed::from_nonzero)
        } else {
            None
        }
    }

    /// The sentinel: a non-null reference to no object, whose value is 1
    /// (it decompresses to the address 2^S, never a cage address).
    pub const fn sentinel() -> Compressed<T> {
        // SAFETY: 1 is not zero.
        Compressed::from_nonzero(unsafe { NonZeroU32::new_unchecked(1) })
    }

    const fn from_nonzero(raw: NonZeroU32) -> Compressed<T> {
        Compressed {
            raw,
            _target: PhantomData,
        }
    }

    /// True for the sentinel.
    pub fn is_sentinel(self) -> bool {
        self.raw.get() == 1
    }

    /// The 32-bit value.
    pub fn raw(self) -> u32 {
        self.raw.get()
    }

    /// The reference whose value is `raw` (as [`Compressed::raw`] gave it);
    /// `None` for 0.
    ///
    /// # Safety
    /// `raw` came from `Compressed::<T>::raw` of this process (or is 1, the
    /// sentinel): any other value decompresses to an arbitrary address.
    pub unsafe fn from_raw(raw: u32) -> Option<Compressed<T>> {
        NonZeroU32::new(raw).map(Compressed::from_nonzero)
    }

    /// The address: sign-extend the 32 bits, shift left by S, AND with the
    /// cage base (its start with every bit below 31 + S set). No branch.
    #[inline(always)]
    pub fn get(self) -> *mut T {
        // Relaxed is enough: the base is written once, before any cage
        // block exists, and this reference was made from a cage block that
        // the calling thread received through some synchronization; that
        // chain orders the base's publication (a release CAS in the C
        // library) before this load.
        let base = unsafe { sys::cm_cage_base.load(Relaxed) };
        (((self.raw.get() as i32 as isize as usize) << SHIFT) & base) as *mut T
    }

    /// The target, borrowed.
    ///
    /// # Safety
    /// The target is alive (not freed) for `'a`, is not the sentinel, and is
    /// not mutated during `'a` except through interior mutability.
    #[inline(always)]
    pub unsafe fn as_ref<'a>(self) -> &'a T {
        &*self.get()
    }

    /// The target, borrowed mutably.
    ///
    /// # Safety
    /// As [`Compressed::as_ref`], and no other reference to the target is
    /// used during `'a`.
    #[inline(always)]
    pub unsafe fn as_mut<'a>(self) -> &'a mut T {
        &mut *self.get()
    }
}

impl<T> Clone for Compressed<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Compressed<T> {}

impl<T> PartialEq for Compressed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl<T> Eq for Compressed<T> {}

impl<T> PartialOrd for Compressed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Compressed<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.raw.cmp(&other.raw)
    }
}

impl<T> Hash for Compressed<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u32(self.raw.get())
    }
}

impl<T> fmt::Debug for Compressed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Compressed({:#010x} -> {:p})",
            self.raw.get(),
            self.get()
        )
    }
}

/// A value in the cage, owned: [`alloc::boxed::Box`] whose memory comes
/// from the calling thread's default cage heap. Any thread may drop it.
///
/// [`alloc::boxed::Box`]: https://doc.rust-lang.org/std/boxed/struct.Box.html
pub struct Box<T> {
    ptr: NonNull<T>,
    _owns: PhantomData<T>,
}

// Like std's Box: sending or sharing the box sends or shares the T.
unsafe impl<T: Send> Send for Box<T> {}
unsafe impl<T: Sync> Sync for Box<T> {}

impl<T> Box<T> {
    /// `value` moved into the cage. Aborts, as `handle_alloc_error` does,
    /// when the cage is full; [`Box::try_new`] gives the value back instead.
    pub fn new(value: T) -> Box<T> {
        match Box::try_new(value) {
            Ok(b) => b,
            Err(_) => {
                extern crate alloc;
                alloc::alloc::handle_alloc_error(core::alloc::Layout::new::<T>())
            }
        }
    }

    /// `value` moved into the cage, or given back when the cage is full.
    pub fn try_new(value: T) -> Result<Box<T>, T> {
        let (size, align) = (mem::size_of::<T>(), mem::align_of::<T>());
        let p = unsafe {
            if malloc_aligns(align, size) {
                sys::cm_cage_malloc(size)
            } else {
                sys::cm_cage_aligned_alloc(align, size)
            }
        } as *mut T;
        match NonNull::new(p) {
            Some(ptr) => {
                unsafe { ptr.as_ptr().write(value) };
                Ok(Box {
                    ptr,
                    _owns: PhantomData,
                })
            }
            None => Err(value),
        }
    }

    /// The compressed reference to the value (valid while the box lives).
    pub fn compressed(this: &Box<T>) -> Compressed<T> {
        // a cage block's address compresses to a value with its top bit set
        Compressed::from_nonzero(unsafe {
            NonZeroU32::new_unchecked(((this.ptr.as_ptr() as usize) >> SHIFT) as u32)
        })
    }

    /// Give up ownership: the value stays in the cage, named by the
    /// reference, until [`Box::from_compressed`] takes it back.
    pub fn into_compressed(this: Box<T>) -> Compressed<T> {
        let c = Box::compressed(&this);
        mem::forget(this);
        c
    }

    /// Take back the value a [`Box::into_compressed`] gave up.
    ///
    /// # Safety
    /// `c` came from `into_compressed` and no other box owns its value.
    pub unsafe fn from_compressed(c: Compressed<T>) -> Box<T> {
        Box {
            ptr: NonNull::new_unchecked(c.get()),
            _owns: PhantomData,
        }
    }

    /// The value's address (in the cage).
    pub fn as_ptr(this: &Box<T>) -> *mut T {
        this.ptr.as_ptr()
    }
}

impl<T> Deref for Box<T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> DerefMut for Box<T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> Drop for Box<T> {
    fn drop(&mut self) {
        unsafe {
            self.ptr.as_ptr().drop_in_place();
            sys::cm_cage_free(self.ptr.as_ptr() as *mut c_void);
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Box<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
