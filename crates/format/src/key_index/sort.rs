//! The radix sort of a bulk build's records by (hash, offset). It knows nothing of what it
//! sorts but its sort key (a `u64` hash, then a `u32` offset), so the builder depends on it and
//! not the other way round.

use super::RunJobs;

/// `items` by `key` (hash, relative offset): partitioned by the hash's top bits into parts of
/// about 4,096 records (so each part sorts in cache), the parts sorted on up to
/// jobs of `run` (as many runs of parts as it runs jobs at once).
pub(super) fn sort_by_hash<T, K>(items: Vec<T>, key: K, run: &dyn RunJobs) -> Vec<T>
where
    T: Copy + Default + Send,
    K: Fn(&T) -> (u64, u32) + Copy + Send + Sync,
{
    let hash = move |p: &T| key(p).0;
    let n = items.len();
    if n < 1 << 14 {
        let mut p = items;
        p.sort_unstable_by_key(key);
        return p;
    }
    let bits = (usize::BITS - (n >> 12).leading_zeros()).clamp(1, 16);
    let shift = 64 - bits;
    let mut counts = vec![0usize; (1 << bits) + 1];
    for p in &items {
        if let Some(c) = counts.get_mut((hash(p) >> shift) as usize + 1) {
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
    let mut sorted = vec![T::default(); n];
    for p in &items {
        let b = (hash(p) >> shift) as usize;
        if let Some(at) = counts.get_mut(b)
            && let Some(slot) = sorted.get_mut(*at)
        {
            *slot = *p;
            *at += 1;
        }
    }
    drop(items);
    let threads = run.width().max(1);
    // Split at part boundaries into `threads` runs of about equal length.
    let mut cuts: Vec<usize> = (1..threads)
        .map(|t| starts.get(starts.partition_point(|s| *s < n * t / threads)).copied().unwrap_or(n))
        .collect();
    cuts.push(n);
    cuts.dedup();
    let mut runs: Vec<&mut [T]> = Vec::new();
    let mut rest: &mut [T] = &mut sorted;
    let mut done = 0usize;
    for cut in cuts {
        let (run, tail) = rest.split_at_mut(cut.saturating_sub(done).min(rest.len()));
        done += run.len();
        runs.push(run);
        rest = tail;
    }
    let jobs: Vec<Box<dyn FnOnce() + Send + '_>> = runs
        .into_iter()
        .map(|part| Box::new(move || sort_parts(part, shift, key)) as Box<dyn FnOnce() + Send + '_>)
        .collect();
    run.run_jobs(jobs);
    sorted
}

/// Sorts each part (records of equal top hash bits) of `run` by `key` (hash, relative offset).
fn sort_parts<T, K: Fn(&T) -> (u64, u32) + Copy>(run: &mut [T], shift: u32, key: K) {
    let mut rest = run;
    while let Some(first) = rest.first() {
        let top = key(first).0 >> shift;
        let len = rest.partition_point(|p| key(p).0 >> shift == top);
        let (part, tail) = rest.split_at_mut(len.max(1));
        part.sort_unstable_by_key(key);
        rest = tail;
    }
}
