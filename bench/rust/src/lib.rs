//! The workload each allocator binary runs (bench/rust-alloc drives them):
//!
//!   <bin> hashmap [keys]      a HashMap<String, Vec<u64>>: built (3 pushes per
//!                             key on average, so the vectors grow by realloc),
//!                             queried (as many lookups as keys times 2, half of
//!                             them misses, each with a freshly formatted key),
//!                             updated (a quarter of the keys removed, as many
//!                             new ones inserted), dropped
//!   <bin> channel [messages]  two pipelines, each a producer thread sending
//!                             boxed messages (a 16 B - 2 KiB payload and a
//!                             String) through a bounded std::sync::mpsc channel
//!                             to a consumer thread that checks and frees them:
//!                             4 threads on this machine's 2 cores
//!
//! Prints "PHASE name seconds" per phase, then PEAK_RSS_KIB (VmHWM) and a
//! CHECK value that every allocator must agree on.
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn phase<R>(name: &str, f: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let r = f();
    println!("PHASE {name} {:.4}", start.elapsed().as_secs_f64());
    r
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn key(i: u64) -> String {
    format!("user:{:016x}", mix(i))
}

fn hashmap(keys: u64) -> u64 {
    let mut map: HashMap<String, Vec<u64>> = HashMap::new();
    let mut check = 0u64;
    phase("build", || {
        for j in 0..3 * keys {
            let i = mix(j ^ 0xABCD) % keys;
            map.entry(key(i)).or_default().push(j);
        }
    });
    phase("query", || {
        for j in 0..2 * keys {
            // odd j: a key of the map; even j: one that is not (its index is past keys)
            let i = if j % 2 == 1 {
                mix(j) % keys
            } else {
                keys + mix(j) % keys
            };
            if let Some(v) = map.get(&key(i)) {
                check = check.wrapping_add(v.len() as u64 + v[0]);
            }
        }
    });
    phase("update", || {
        for j in 0..keys / 4 {
            if let Some(v) = map.remove(&key(mix(j ^ 0x5555) % keys)) {
                check = check.wrapping_add(v.iter().sum::<u64>());
            }
            map.insert(key(keys + j), (0..j % 8).collect());
        }
    });
    check = check.wrapping_add(map.len() as u64);
    phase("drop", || drop(black_box(map)));
    check
}

struct Message {
    id: u64,
    payload: Vec<u8>,
    tag: String,
}

fn payload_byte(id: u64, i: usize) -> u8 {
    (id as u8).wrapping_add(i as u8)
}

fn channel(messages: u64) -> u64 {
    const PIPELINES: u64 = 2;
    phase("pipelines", || {
        let consumers: Vec<_> = (0..PIPELINES)
            .map(|p| {
                let (tx, rx) = mpsc::sync_channel::<Box<Message>>(4096);
                let per = messages / PIPELINES;
                thread::spawn(move || {
                    for k in 0..per {
                        let id = p * per + k;
                        let len = 16 + (mix(id) % 2033) as usize;
                        let payload = (0..len).map(|i| payload_byte(id, i)).collect();
                        tx.send(Box::new(Message {
                            id,
                            payload,
                            tag: format!("message {id}"),
                        }))
                        .unwrap();
                    }
                });
                thread::spawn(move || {
                    let mut sum = 0u64;
                    for m in rx {
                        assert!(m
                            .payload
                            .iter()
                            .enumerate()
                            .all(|(i, &b)| b == payload_byte(m.id, i)));
                        assert_eq!(m.tag, format!("message {}", m.id));
                        sum = sum.wrapping_add(m.id ^ m.payload.len() as u64);
                    }
                    sum
                })
            })
            .collect();
        consumers
            .into_iter()
            .map(|c| c.join().unwrap())
            .fold(0u64, u64::wrapping_add)
    })
}

/// Runs the workload named by the first argument with the allocator of
/// the calling binary (`allocator` names it in the output).
pub fn main(allocator: &str) {
    let args: Vec<String> = std::env::args().collect();
    let workload = args.get(1).map(String::as_str).unwrap_or("hashmap");
    let n = |default: u64| args.get(2).and_then(|s| s.parse().ok()).unwrap_or(default);
    let check = match workload {
        "hashmap" => hashmap(n(2_000_000)),
        "channel" => channel(n(2_000_000)),
        other => {
            eprintln!("usage: {allocator} hashmap|channel [count] (not {other:?})");
            std::process::exit(2);
        }
    };
    println!("PEAK_RSS_KIB {}", peak_rss_kib());
    println!("CHECK {check}");
}
