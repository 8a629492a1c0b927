//! The radix sort of a bulk build's records by (hash, offset).

use super::bulk::Posting;
use super::*;

/// `postings` by (hash, relative offset): partitioned by the hash's top bits into parts of
/// about 4,096 records (so each part sorts in cache), the parts sorted on up to
/// jobs of `run` (as many runs of parts as it runs jobs at once).
pub(super) fn sort_postings(postings: Vec<Posting>, run: &dyn RunJobs) -> Vec<Posting> {
    let n = postings.len();
    if n < 1 << 14 {
        let mut p = postings;
        p.sort_unstable_by_key(|p| (p.hash, p.relative));
        return p;
    }
    let bits = (usize::BITS - (n >> 12).leading_zeros()).clamp(1, 16);
    let shift = 64 - bits;
    let mut counts = vec![0usize; (1 << bits) + 1];
    for p in &postings {
        if let Some(c) = counts.get_mut((p.hash >> shift) as usize + 1) {
            *c += 1;
        }
    }
    for b in 1..counts.len() {
        let before = counts.get(b - 1).copied().unwrap_or(0);
        if let Some(c) = counts.get_mut(b) {
            *c += before;
        }
    }
    let starts = counts.clone();
    let mut sorted = vec![Posting::default(); n];
    for p in &postings {
        let b = (p.hash >> shift) as usize;
        if let Some(at) = counts.get_mut(b)
            && let Some(slot) = sorted.get_mut(*at)
        {
            *slot = *p;
            *at += 1;
        }
    }
    drop(postings);
    let threads = run.width().max(1);
    // Split at part boundaries into `threads` runs of about equal length.
    let mut cuts: Vec<usize> = (1..threads)
        .map(|t| starts.get(starts.partition_point(|s| *s < n * t / threads)).copied().unwrap_or(n))
        .collect();
    cuts.push(n);
    cuts.dedup();
    let mut runs: Vec<&mut [Posting]> = Vec::new();
    let mut rest: &mut [Posting] = &mut sorted;
    let mut done = 0usize;
    for cut in cuts {
        let (run, tail) = rest.split_at_mut(cut.saturating_sub(done).min(rest.len()));
        done += run.len();
        runs.push(run);
        rest = tail;
    }
    let jobs: Vec<Box<dyn FnOnce() + Send + '_>> = runs
        .into_iter()
        .map(|part| Box::new(move || sort_parts(part, shift)) as Box<dyn FnOnce() + Send + '_>)
        .collect();
    run.run_jobs(jobs);
    sorted
}

/// Sorts each part (records of equal top hash bits) of `run` by (hash, relative offset).
fn sort_parts(run: &mut [Posting], shift: u32) {
    let mut rest = run;
    while let Some(first) = rest.first() {
        let top = first.hash >> shift;
        let len = rest.partition_point(|p| p.hash >> shift == top);
        let (part, tail) = rest.split_at_mut(len.max(1));
        part.sort_unstable_by_key(|p| (p.hash, p.relative));
        rest = tail;
    }
}
