// Heap: allocation with data checks, visit, contains, collect, destroy
// (arena style), drop keeping blocks valid (freed later by another thread),
// realloc into the heap, and, with the nightly feature, collections
// allocating in a heap through the Allocator trait.
#![cfg_attr(feature = "nightly", feature(allocator_api))]
use std::alloc::Layout;
use std::ptr::NonNull;
use std::thread;

use cagemalloc::Heap;

fn fill(p: NonNull<u8>, n: usize, seed: u8) {
    for i in 0..n {
        unsafe { p.as_ptr().add(i).write(seed ^ (i as u8)) };
    }
}

fn check(p: NonNull<u8>, n: usize, seed: u8) {
    for i in 0..n {
        assert_eq!(
            unsafe { p.as_ptr().add(i).read() },
            seed ^ (i as u8),
            "byte {i} of {n}"
        );
    }
}

fn sizes() -> impl Iterator<Item = (usize, Layout)> {
    [
        (8usize, 8usize),
        (48, 16),
        (100, 64),
        (3000, 8),
        (70_000, 4096),
        (500_000, 1 << 16),
    ]
    .into_iter()
    .cycle()
    .enumerate()
    .map(|(i, (size, align))| (i, Layout::from_size_align(size, align).unwrap()))
}

#[test]
fn alloc_visit_contains_and_destroy() {
    let mut heap = Heap::new();
    let other = Heap::new();
    let blocks: Vec<(NonNull<u8>, Layout)> = sizes()
        .take(600)
        .map(|(i, layout)| {
            let p = heap.alloc(layout).unwrap();
            assert_eq!(p.as_ptr() as usize % layout.align(), 0);
            fill(p, layout.size(), i as u8);
            (p, layout)
        })
        .collect();
    for (i, (p, layout)) in blocks.iter().enumerate() {
        check(*p, layout.size(), i as u8);
        assert!(heap.contains(p.as_ptr()));
        assert!(!other.contains(p.as_ptr()));
    }
    // free every other block, then the walk sees exactly the rest
    for (p, layout) in blocks.iter().step_by(2) {
        unsafe { heap.dealloc(*p, *layout) };
    }
    let mut seen = 0;
    assert!(heap.visit(|block, usable| {
        let (i, (p, layout)) = blocks
            .iter()
            .enumerate()
            .find(|(_, (p, _))| *p == block)
            .expect("a live block");
        assert_eq!(i % 2, 1, "a freed block was visited");
        assert!(usable >= layout.size());
        check(*p, layout.size(), i as u8);
        seen += 1;
        true
    }));
    assert_eq!(seen, 300);
    // a false return stops the walk
    let mut calls = 0;
    assert!(!heap.visit(|_, _| {
        calls += 1;
        calls < 10
    }));
    assert_eq!(calls, 10);
    heap.collect(true);
    heap.destroy(); // the 300 live blocks go at once
    drop(other);
}

#[test]
fn dropped_heap_keeps_its_blocks_for_any_thread() {
    let heap = Heap::new();
    let blocks: Vec<(usize, usize, Layout)> = sizes()
        .take(200)
        .map(|(i, layout)| {
            let p = heap.alloc(layout).unwrap();
            fill(p, layout.size(), i as u8);
            (i, p.as_ptr() as usize, layout)
        })
        .collect();
    drop(heap); // deleted: the blocks stay valid
    thread::spawn(move || {
        for (i, p, layout) in blocks {
            let p = NonNull::new(p as *mut u8).unwrap();
            check(p, layout.size(), i as u8);
            unsafe { cagemalloc::sys::cm_free(p.as_ptr().cast()) };
        }
    })
    .join()
    .unwrap();
}

#[test]
fn zeroed_and_realloc_in_the_heap() {
    let heap = Heap::new();
    for (i, layout) in sizes().take(12) {
        let p = heap.alloc_zeroed(layout).unwrap();
        assert!((0..layout.size()).all(|k| unsafe { *p.as_ptr().add(k) } == 0));
        fill(p, layout.size(), i as u8);
        let grown = layout.size() * 3 + 5;
        let q = unsafe { heap.realloc(p, layout, grown) }.unwrap();
        assert_eq!(q.as_ptr() as usize % layout.align(), 0);
        check(q, layout.size(), i as u8);
        assert!(heap.contains(q.as_ptr()));
        unsafe { heap.dealloc(q, Layout::from_size_align(grown, layout.align()).unwrap()) };
    }
    // a block of another heap (the default one) moves into this one
    let elsewhere = unsafe { cagemalloc::sys::cm_malloc(40) } as *mut u8;
    unsafe { elsewhere.write_bytes(7, 40) };
    let moved = unsafe {
        heap.realloc(
            NonNull::new(elsewhere).unwrap(),
            Layout::new::<[u8; 40]>(),
            4000,
        )
    }
    .unwrap();
    assert!(heap.contains(moved.as_ptr()));
    assert!((0..40).all(|k| unsafe { *moved.as_ptr().add(k) } == 7));
    unsafe { heap.dealloc(moved, Layout::from_size_align(4000, 1).unwrap()) };
}

#[test]
fn many_empty_heaps() {
    let heaps: Vec<Heap> = (0..10_000).map(|_| Heap::new()).collect();
    let p = heaps[9_999].alloc(Layout::new::<u64>()).unwrap();
    assert!(heaps[9_999].contains(p.as_ptr()));
    drop(heaps);
    unsafe { cagemalloc::sys::cm_free(p.as_ptr().cast()) };
}

#[test]
fn cage_heap_blocks_are_in_the_cage() {
    let heap = Heap::try_new_in_cage().unwrap();
    let p = heap.alloc(Layout::new::<[u64; 4]>()).unwrap();
    assert!(cagemalloc::cage::contains(p.as_ptr()));
    heap.destroy();
}

#[cfg(feature = "nightly")]
#[test]
fn collections_in_a_heap() {
    let heap = Heap::new();
    let mut v: Vec<u64, &Heap> = Vec::new_in(&heap);
    v.extend(0..100_000u64);
    assert!(heap.contains(v.as_ptr()));
    let b = Box::new_in([3u32; 100], &heap);
    assert!(heap.contains(&*b as *const [u32; 100]));
    assert_eq!(v.iter().sum::<u64>(), 4_999_950_000);
    v.shrink_to(10);
    v.truncate(10);
    assert_eq!(v.iter().sum::<u64>(), 45);
    assert_eq!(b.iter().sum::<u32>(), 300);
    drop((v, b));
    heap.destroy();
}
