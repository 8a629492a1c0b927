//! Planning a pass: the dirty section, whether the log is due, and the size groups.

use super::*;

/// Kafka's `cleanableOffsets` and the decision whether to clean now.
pub(super) fn plan(
    log: &Log,
    settings: &CleanerSettings,
    checkpoint: Option<Offset>,
    opts: &CleanOptions<'_>,
) -> Result<Option<Plan>> {
    let segments = log.segment_list();
    let Some(active) = segments.last() else { return Ok(None) };
    if segments.len() < 2 {
        return Ok(None);
    }
    let log_start = log.log_start_offset();
    let log_end = log.log_end_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= log_start && c <= log_end => c,
        _ => log_start,
    };
    // Decided first with the active segment as the bound (sizes and timestamps only); the
    // header scan for producers and open transactions only runs for a log that is due.
    let Some(bound) = due_up_to(log, settings, &segments, first_dirty, active.base_offset(), opts)?
    else {
        return Ok(None);
    };
    let producers = scan_producers(&segments, &|| opts.aborted())?;
    let lso = producers.last_stable_offset(log_end);
    let first_uncleanable = if lso < bound {
        // An open transaction cuts the dirty section: decided again with it.
        match due_up_to(log, settings, &segments, first_dirty, lso, opts)? {
            Some(b) => b,
            None => return Ok(None),
        }
    } else {
        bound
    };
    Ok(Some(Plan { segments, first_dirty, first_uncleanable, producers }))
}

/// Whether `log` is due for a pass with the dirty section `[first_dirty, bound)` cut by
/// `min.compaction.lag.ms`: the first uncleanable offset so far when it is.
fn due_up_to(
    log: &Log,
    settings: &CleanerSettings,
    segments: &[Arc<LogSegment>],
    first_dirty: Offset,
    bound: Offset,
    opts: &CleanOptions<'_>,
) -> Result<Option<Offset>> {
    let log_end = log.log_end_offset();
    let sealed = segments.len().saturating_sub(1);
    let mut first_uncleanable = bound;
    if settings.min_compaction_lag_ms > 0 {
        let limit = opts.now.saturating_sub(settings.min_compaction_lag_ms);
        for (i, seg) in segments.iter().enumerate().take(sealed) {
            let ends_before_dirty =
                segments.get(i + 1).is_some_and(|n| n.base_offset() <= first_dirty);
            if ends_before_dirty {
                continue;
            }
            if seg.largest_timestamp()? > limit {
                first_uncleanable = first_uncleanable.min(seg.base_offset().max(first_dirty));
                break;
            }
        }
    }
    let first_uncleanable = first_uncleanable.max(first_dirty);
    let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
    let mut first_dirty_segment = None;
    for (i, seg) in segments.iter().enumerate().take(sealed) {
        let end = segments.get(i + 1).map_or(log_end, |n| n.base_offset());
        if seg.base_offset() < first_dirty {
            clean_bytes += seg.size();
        }
        if end > first_dirty && seg.base_offset() < first_uncleanable {
            dirty_bytes += seg.size();
            first_dirty_segment.get_or_insert_with(|| Arc::clone(seg));
        }
    }
    let total = clean_bytes + dirty_bytes;
    let ratio = if total == 0 { 0.0 } else { dirty_bytes as f64 / total as f64 };
    let has_dirty = first_dirty < first_uncleanable && dirty_bytes > 0;
    let mut overdue = false;
    if settings.max_compaction_lag_ms > 0
        && settings.max_compaction_lag_ms < i64::MAX
        && let Some(seg) = &first_dirty_segment
    {
        let (heads, _) = seg.read_heads(Position(0), 1)?;
        if let Some(h) = heads.first()
            && h.info.max_timestamp >= 0
        {
            overdue =
                opts.now.saturating_sub(h.info.max_timestamp) > settings.max_compaction_lag_ms;
        }
    }
    let horizon = log.latest_delete_horizon();
    let horizon_due = horizon != NO_TIMESTAMP && horizon <= opts.now;
    let due =
        (has_dirty && (ratio >= settings.min_cleanable_dirty_ratio || overdue)) || horizon_due;
    log::debug!(
        "{}: cleaner plan: dirty {first_dirty}..{first_uncleanable}, ratio {ratio:.3}, overdue \
         {overdue}, horizon due {horizon_due}: {}",
        log.dir().display(),
        if due { "clean" } else { "skip" }
    );
    Ok(due.then_some(first_uncleanable))
}

fn index_file_len(seg: &LogSegment, kind: &str) -> u64 {
    std::fs::metadata(seg.file_path(kind)).map_or(0, |m| m.len())
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose total log bytes stay within
/// `segment.bytes`, each index's total bytes within `segment.index.bytes`, and whose offsets
/// span at most `i32::MAX` from the group's base offset.
pub(super) fn group_by_size(
    segments: &[Arc<LogSegment>],
    settings: &CleanerSettings,
    first_uncleanable: Offset,
) -> Result<Vec<Vec<Arc<LogSegment>>>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while let Some(first) = segments.get(i) {
        let mut group = vec![Arc::clone(first)];
        let mut log_size = first.size();
        let mut index_size = index_file_len(first, ".index");
        let mut time_size = index_file_len(first, ".timeindex");
        i += 1;
        while let Some(next) = segments.get(i) {
            let last_offset = match segments.get(i + 1) {
                Some(after) => Offset(after.base_offset().0 - 1),
                None => Offset(first_uncleanable.0 - 1),
            };
            let (idx, time) = (index_file_len(next, ".index"), index_file_len(next, ".timeindex"));
            let fits = log_size + next.size() <= settings.segment_bytes
                && index_size + idx <= u64::from(settings.segment_index_bytes)
                && time_size + time <= u64::from(settings.segment_index_bytes)
                && (next.size() == 0
                    || last_offset.0 - first.base_offset().0 <= i64::from(i32::MAX));
            if !fits {
                break;
            }
            log_size += next.size();
            index_size += idx;
            time_size += time;
            group.push(Arc::clone(next));
            i += 1;
        }
        groups.push(group);
    }
    Ok(groups)
}
