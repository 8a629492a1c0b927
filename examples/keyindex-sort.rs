//! Times the encode of one segment's key index (issue 33): a bulk build of `RECORDS` records
//! with `RECORDS / 10` keys (as `scripts/bench --by-key` and the bykey-profile example spread
//! them), its records sorted one part after another on the caller's thread (the format's
//! [`InOrder`], what the format does by itself) and on up to 4 scoped threads (what the log
//! engine lends it), alternating `REPS` repetitions of each; prints the medians and the ratio.
//!
//! `cargo run --release --example keyindex-sort -- [RECORDS] [REPS]`

use std::time::Instant;

use topicfs::format::Offset;
use topicfs::format::key_index::{BulkKeyIndexBuilder, InOrder, RunJobs};

/// Up to 4 scoped threads, as the log engine's `SortThreads`.
struct Threads;

impl RunJobs for Threads {
    fn width(&self) -> usize {
        4usize.min(std::thread::available_parallelism().map_or(1, |t| t.get())).max(1)
    }

    fn run_jobs<'a>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
        std::thread::scope(|scope| {
            for job in jobs {
                scope.spawn(job);
            }
        });
    }
}

/// The key of record `n` among `keys` keys (xorshift, as the benchmark's).
fn key_of(n: u64, keys: u64) -> String {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    format!("user-{:07}", x.wrapping_mul(0x2545_F491_4F6C_DD1D) % keys)
}

fn builder(records: u64) -> BulkKeyIndexBuilder {
    let mut b = BulkKeyIndexBuilder::new(Offset(0));
    for n in 0..records {
        b.add(Some(key_of(n, records / 10).as_bytes()), Offset(n as i64));
    }
    b
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let records: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let (mut one, mut threads) = (Vec::new(), Vec::new());
    let mut sizes = (0, 0);
    for _ in 0..reps {
        let b = builder(records);
        let start = Instant::now();
        sizes.0 = b.encode_with(Offset(records as i64), 1, &InOrder).len();
        one.push(start.elapsed().as_secs_f64());
        let b = builder(records);
        let start = Instant::now();
        sizes.1 = b.encode_with(Offset(records as i64), 1, &Threads).len();
        threads.push(start.elapsed().as_secs_f64());
    }
    assert_eq!(sizes.0, sizes.1, "both encodes give one index");
    let (one, threads) = (median(one), median(threads));
    println!(
        "key index encode of {records} records: in order {:.1} ms, on {} threads {:.1} ms, \
         ratio {:.2}",
        one * 1e3,
        Threads.width(),
        threads * 1e3,
        one / threads
    );
}
