//! A seeded model of streams under appends and retention: followers reading on, streams opened
//! at relative offsets (`by-offset/-N`) read in the small doubling reads of Rust's
//! `read_to_end`, sizes asked, and segments deleted between any two steps. Every byte any
//! stream returns is the byte a partition that never deleted anything renders at that place;
//! a read may only fail as stale (its records were deleted).

use crate::view_support;

use std::sync::Arc;

use proptest::prelude::*;
use topicfs::error::Error;
use topicfs::format::{NewRecord, Offset};
use topicfs::source::PartitionSource;
use topicfs::view::spec::{Format, StreamSpec};
use topicfs::view::stream::{Stream, StreamRegistry};
use view_support::{MemPartition, plain};

const FORMATS: [Format; 3] = [Format::Values, Format::Json, Format::Raw];

#[derive(Clone, Debug)]
enum Step {
    /// A batch of `n` records (values of their offset, padded by `pad`).
    Append { n: usize, pad: usize },
    /// Retention: keeps the last `keep` segments.
    Retain { keep: usize },
    /// A follower of a format reads its next window of `len` bytes.
    Follow { format: usize, len: usize },
    /// A stream opened at `-back` and read from its start in reads of 32, 32, 64, ... bytes.
    OpenTail { format: usize, back: i64 },
    /// A stream opened at `-back`, its size asked, then read in one read.
    SizeThenRead { format: usize, back: i64 },
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1usize..6, 0usize..40).prop_map(|(n, pad)| Step::Append { n, pad }),
        1 => (1usize..4).prop_map(|keep| Step::Retain { keep }),
        2 => (0usize..3, 1usize..400).prop_map(|(format, len)| Step::Follow { format, len }),
        2 => (0usize..3, 1i64..60).prop_map(|(format, back)| Step::OpenTail { format, back }),
        1 => (0usize..3, 1i64..60).prop_map(|(format, back)| Step::SizeThenRead { format, back }),
    ]
}

/// What a stream from `start` shows, rendered from `all` (which keeps every batch).
fn expected(all: &MemPartition, format: Format, start: Offset) -> Vec<u8> {
    crate::view_stream::model(all, format, start.0, None)
}

fn open(reg: &StreamRegistry, part: &Arc<MemPartition>, name: &str) -> Result<Arc<Stream>, Error> {
    let spec = StreamSpec::parse_by_offset(name).unwrap();
    reg.open(Arc::clone(part) as Arc<dyn PartitionSource>, &spec, 0)
}

/// Checks `got`, read at `at` of a stream from `start`, against the partition that keeps all.
fn check(all: &MemPartition, format: Format, start: Offset, at: u64, got: &[u8], what: &str) {
    let want = expected(all, format, start);
    let lo = (at as usize).min(want.len());
    let hi = (lo + got.len()).min(want.len());
    assert!(
        got == &want[lo..hi],
        "{what}: {format:?} stream from {start:?}, {} bytes at {at}: got {:?}, want {:?}",
        got.len(),
        String::from_utf8_lossy(&got[..got.len().min(80)]),
        String::from_utf8_lossy(&want[lo..hi.min(lo + 80)]),
    );
}

/// `n` records whose values number on from `*last` (then the last one's number), padded by
/// `pad(number)` bytes, appended as one batch to `all` first and then to `part`: whatever a
/// stream of `part` can read, `all` holds.
fn append(
    part: &MemPartition,
    all: &MemPartition,
    last: &mut u64,
    n: usize,
    pad: impl Fn(u64) -> usize,
) {
    let records: Vec<NewRecord> = (0..n)
        .map(|_| {
            *last += 1;
            let v = format!("r{:06}{}", *last, "p".repeat(pad(*last)));
            NewRecord {
                timestamp: *last as i64,
                key: None,
                value: Some(v.into_bytes()),
                headers: vec![],
            }
        })
        .collect();
    all.append_batch(&plain(), &records);
    part.append_batch(&plain(), &records);
}

/// Retention that keeps the last `keep` segments of `part`.
fn retain_last(part: &MemPartition, keep: usize) {
    let segs = part.segment_files().unwrap().segments().unwrap();
    if segs.len() > keep {
        part.delete_segments_below(segs[segs.len() - keep].base_offset);
    }
}

/// Reads `s` (format `f`) from its start in reads of 32, 32, 64, ... bytes (Rust's
/// `read_to_end`), checking each against `all`, until its end or until it is stale.
fn read_in_doubling_reads(s: &Stream, all: &MemPartition, f: Format, what: &str) {
    let (mut at, mut len) = (0u64, 32usize);
    loop {
        match s.read_at(at, len) {
            Ok(got) if got.is_empty() => return,
            Ok(got) => {
                check(all, f, s.start(), at, &got, what);
                at += got.len() as u64;
                len = (len * 2).min(64 << 10);
            }
            Err(Error::StaleHandle) => return,
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn run(steps: &[Step], segment_bytes: usize) {
    let part = Arc::new(MemPartition::new("m", 0, segment_bytes));
    let all = MemPartition::new("m", 0, usize::MAX);
    let reg = StreamRegistry::new();
    let mut next_value = 0u64;
    let mut followers: Vec<Option<(Arc<Stream>, u64)>> = vec![None, None, None];
    for (i, step) in steps.iter().enumerate() {
        let what = format!("step {i} {step:?}");
        match *step {
            Step::Append { n, pad } => append(&part, &all, &mut next_value, n, |_| pad),
            Step::Retain { keep } => retain_last(&part, keep),
            Step::Follow { format, len } => {
                let f = FORMATS[format];
                if followers[format].is_none() {
                    followers[format] =
                        open(&reg, &part, &format!("-1000000{}", f.suffix())).ok().map(|s| (s, 0));
                }
                let Some((s, at)) = followers[format].as_mut() else { continue };
                match s.read_at(*at, len) {
                    Ok(got) => {
                        check(&all, f, s.start(), *at, &got, &what);
                        *at += got.len() as u64;
                    }
                    Err(Error::StaleHandle) => followers[format] = None,
                    Err(e) => panic!("{what}: {e}"),
                }
            }
            Step::OpenTail { format, back } => {
                let f = FORMATS[format];
                let Ok(s) = open(&reg, &part, &format!("-{back}{}", f.suffix())) else { continue };
                read_in_doubling_reads(&s, &all, f, &what);
            }
            Step::SizeThenRead { format, back } => {
                let f = FORMATS[format];
                let Ok(s) = open(&reg, &part, &format!("-{back}{}", f.suffix())) else { continue };
                let size = s.size().unwrap();
                match s.read_at(0, size as usize + 10) {
                    Ok(got) => {
                        check(&all, f, s.start(), 0, &got, &what);
                        assert_eq!(got.len() as u64, size, "{what}: size");
                    }
                    Err(Error::StaleHandle) => {}
                    Err(e) => panic!("{what}: {e}"),
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn streams_under_appends_and_retention_return_the_bytes_of_a_log_that_deleted_nothing(
        steps in prop::collection::vec(arb_step(), 1..200),
        segment_bytes in 150usize..1500,
    ) {
        run(&steps, segment_bytes);
    }
}

/// The same model with every kind of step on its own thread at once: an appender, retention,
/// two followers and four readers opening relative offsets (each in a random format). Seeded
/// per thread; the interleaving is the machine's. Runs 1.5 s, or `TOPICFS_MODEL_MS`.
#[test]
fn concurrent_streams_under_appends_and_retention_return_the_bytes_of_a_log_that_deleted_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let run_for_ms: u64 =
        std::env::var("TOPICFS_MODEL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let part = Arc::new(MemPartition::new("m", 0, 700));
    let all = Arc::new(MemPartition::new("m", 0, usize::MAX));
    let reg = Arc::new(StreamRegistry::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (part, all, stop) = (Arc::clone(&part), Arc::clone(&all), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut v = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = 1 + (v % 5) as usize;
                append(&part, &all, &mut v, n, |v| (v * 7 % 40) as usize);
                std::thread::sleep(Duration::from_micros(200));
            }
        }));
    }
    {
        let (part, stop) = (Arc::clone(&part), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                retain_last(&part, 3);
                std::thread::sleep(Duration::from_millis(3));
            }
        }));
    }
    for t in 0..6usize {
        let (part, all, reg, stop) =
            (Arc::clone(&part), Arc::clone(&all), Arc::clone(&reg), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut rng = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(t as u64 + 1);
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut follower: Option<(Arc<Stream>, u64, Format)> = None;
            while !stop.load(Ordering::Relaxed) {
                let f = FORMATS[(next() % 3) as usize];
                if t < 2 {
                    // A follower: reads on in windows of random size.
                    if follower.is_none() {
                        follower = open(&reg, &part, &format!("-1000000{}", f.suffix()))
                            .ok()
                            .map(|s| (s, 0, f));
                    }
                    let Some((s, at, fmt)) = follower.as_mut() else { continue };
                    let len = 1 + (next() % 3000) as usize;
                    match s.read_at(*at, len) {
                        Ok(got) => {
                            check(&all, *fmt, s.start(), *at, &got, &format!("follower {t}"));
                            *at += got.len() as u64;
                            if got.is_empty() {
                                std::thread::sleep(Duration::from_micros(300));
                            }
                        }
                        Err(Error::StaleHandle) => follower = None,
                        Err(e) => panic!("follower {t}: {e}"),
                    }
                    continue;
                }
                let back = 1 + next() % 80;
                let Ok(s) = open(&reg, &part, &format!("-{back}{}", f.suffix())) else { continue };
                if next() % 3 == 0 {
                    let _ = s.size();
                }
                read_in_doubling_reads(&s, &all, f, &format!("reader {t} -{back}"));
            }
        }));
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(run_for_ms) {
        std::thread::sleep(Duration::from_millis(20));
        if threads.iter().any(|t| t.is_finished()) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}
