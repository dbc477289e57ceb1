// cage::Box and cage::Compressed: round trips of many references, null and
// the sentinel, equality/order/hash on the 32-bit value, boxes dropped on
// other threads, and over-aligned values.
use std::collections::HashSet;
use std::mem::size_of;
use std::thread;

use cagemalloc::cage::{self, Compressed};

#[test]
fn sizes() {
    assert_eq!(size_of::<Compressed<u64>>(), 4);
    assert_eq!(size_of::<Option<Compressed<u64>>>(), 4);
}

#[test]
fn round_trips() {
    let boxes: Vec<cage::Box<[u64; 3]>> = (0..50_000u64)
        .map(|i| cage::Box::new([i, !i, i * 3]))
        .collect();
    let mut seen = HashSet::new();
    for (i, b) in boxes.iter().enumerate() {
        let p = cage::Box::as_ptr(b);
        assert!(cage::contains(p));
        let c = cage::Box::compressed(b);
        assert_eq!(c.get(), p);
        assert_eq!(c.raw(), (p as usize >> cage::SHIFT) as u32);
        assert!(
            c.raw() & 0x8000_0000 != 0,
            "a cage reference has its top bit set"
        );
        assert_eq!(Compressed::new(p), Some(c));
        assert_eq!(
            unsafe { Compressed::<[u64; 3]>::from_raw(c.raw()) },
            Some(c)
        );
        let i = i as u64;
        assert_eq!(unsafe { *c.as_ref() }, [i, !i, i * 3]);
        assert!(seen.insert(c));
    }
    // the order of the references is the order of the addresses
    let mut refs: Vec<_> = boxes.iter().map(cage::Box::compressed).collect();
    refs.sort();
    assert!(refs
        .windows(2)
        .all(|w| (w[0].get() as usize) < (w[1].get() as usize)));
}

#[test]
fn null_sentinel_and_outside_pointers() {
    let s = Compressed::<u32>::sentinel();
    assert_eq!(s.raw(), 1);
    assert!(s.is_sentinel());
    assert_eq!(s.get() as usize, 1 << cage::SHIFT);
    assert!(unsafe { Compressed::<u32>::from_raw(0) }.is_none());
    assert!(Compressed::new(std::ptr::null::<u32>()).is_none());
    let outside = Box::new(5u32); // the global allocator: not in the cage
    assert!(Compressed::new(&*outside as *const u32).is_none());
}

#[test]
fn boxes_move_across_threads() {
    let boxes: Vec<cage::Box<String>> = (0..10_000)
        .map(|i| cage::Box::new(format!("node {i}")))
        .collect();
    thread::spawn(move || {
        for (i, b) in boxes.into_iter().enumerate() {
            assert_eq!(*b, format!("node {i}"));
        }
    })
    .join()
    .unwrap();
}

#[test]
fn into_and_from_compressed() {
    let mut b = cage::Box::new(vec![1u8, 2, 3]);
    b.push(4);
    let c = cage::Box::into_compressed(b);
    unsafe { c.as_mut().push(5) };
    let back = unsafe { cage::Box::from_compressed(c) };
    assert_eq!(*back, vec![1, 2, 3, 4, 5]);
}

#[test]
fn over_aligned_values() {
    #[repr(align(4096))]
    struct Page([u8; 4096]);
    let b = cage::Box::new(Page([9; 4096]));
    let p = cage::Box::as_ptr(&b);
    assert_eq!(p as usize % 4096, 0);
    assert!(cage::contains(p));
    assert!(b.0.iter().all(|&x| x == 9));
    assert_eq!(cage::Box::compressed(&b).get(), p);
}
