//! The text of the `info` files.
//!
//! `<topic>/<p>/info` is `key: value` lines, one fact each:
//!
//! ```text
//! topic: orders
//! partition: 0
//! log_start_offset: 0
//! log_end_offset: 42
//! segment_count: 1
//! size_bytes: 4096
//! cleaner_swaps: 0
//! first_timestamp: 1764662400000
//! first_time: 2025-12-02T08:00:00.000Z
//! max_timestamp: 1764662460000
//! max_time: 2025-12-02T08:01:00.000Z
//! ```
//!
//! (`none` for the timestamps of a partition without records; `unknown` for one with records
//! whose timestamp could not be learned: a broker that does not answer the max-timestamp
//! lookup, or records without timestamps. `cleaner_swaps`, shown beside the segment lines: the
//! log cleaner's outputs swapped in for segments since the mount, [`topicfs_source::Known::rewrites`].)
//! `<topic>/info` has the topic's
//! partition count and one `partition.<p>.log_start_offset` / `partition.<p>.log_end_offset` pair
//! per partition, in partition order. Both are rendered when read, so their size is exact.

use std::fmt::Write;

use topicfs_format::Timestamp;
use topicfs_source::PartitionSummary;
use topicfs_view::spec::time_name;

/// The text of a partition's `info` file (`cleaner_swaps`: the source's
/// [`topicfs_source::Known::rewrites`]).
pub fn partition_info(
    topic: &str,
    partition: u32,
    summary: &PartitionSummary,
    cleaner_swaps: u64,
) -> String {
    let mut out = String::new();
    line(&mut out, "topic", topic);
    line(&mut out, "partition", partition);
    line(&mut out, "log_start_offset", summary.log_start_offset);
    line(&mut out, "log_end_offset", summary.log_end_offset);
    // Only a source with segment files knows them (a cluster shows neither line).
    if let Some(n) = summary.segment_count {
        line(&mut out, "segment_count", n);
    }
    if let Some(n) = summary.size_bytes {
        line(&mut out, "size_bytes", n);
    }
    if summary.segment_count.is_some() {
        line(&mut out, "cleaner_swaps", cleaner_swaps);
    }
    // `none` means "no records"; a partition that holds records but whose timestamp is not
    // known says so.
    let missing =
        if summary.log_end_offset > summary.log_start_offset { "unknown" } else { "none" };
    timestamp_lines(&mut out, "first", summary.first_timestamp, missing);
    timestamp_lines(&mut out, "max", summary.max_timestamp, missing);
    out
}

/// The text of the mount's `@info`: its log dirs, each with its state, and the partitions
/// found in more than one (served by none).
///
/// ```text
/// log_dirs: 2
/// log_dirs_offline: 1
/// log_dir.0.path: /data/a
/// log_dir.0.state: online
/// log_dir.0.partitions: 4
/// log_dir.1.path: /data/b
/// log_dir.1.state: offline
/// log_dir.1.error: read /data/b/t-1/00000000000000000000.log: Input/output error (os error 5)
/// log_dir.1.partitions: 3
/// duplicate_partitions: 1
/// duplicate.t.2: /data/a /data/b
/// log: /var/log/topicfs/mnt-kafka.log
/// ```
///
/// A cluster mount has no log dirs of its own: `log_dirs: 0`. `log` (where the daemon's log
/// goes: a file, `syslog (identifier topicfs)` or `stderr`) only when `log` is given.
pub fn mount_info(report: &topicfs_source::LogDirsReport, log: Option<&str>) -> String {
    let mut out = String::new();
    line(&mut out, "log_dirs", report.dirs.len());
    line(&mut out, "log_dirs_offline", report.dirs.iter().filter(|d| d.offline.is_some()).count());
    for (i, dir) in report.dirs.iter().enumerate() {
        line(&mut out, &format!("log_dir.{i}.path"), dir.path.display());
        let state = if dir.offline.is_some() { "offline" } else { "online" };
        line(&mut out, &format!("log_dir.{i}.state"), state);
        if let Some(reason) = &dir.offline {
            // One line: a reason never breaks the key: value form.
            line(&mut out, &format!("log_dir.{i}.error"), reason.replace('\n', " "));
        }
        line(&mut out, &format!("log_dir.{i}.partitions"), dir.partitions);
    }
    line(&mut out, "duplicate_partitions", report.duplicates.len());
    for (topic, partition, held) in &report.duplicates {
        let dirs: Vec<String> = held.iter().map(|p| p.display().to_string()).collect();
        line(&mut out, &format!("duplicate.{topic}.{partition}"), dirs.join(" "));
    }
    if let Some(log) = log {
        line(&mut out, "log", log);
    }
    out
}

/// The text of a topic's `info` file.
pub fn topic_info(topic: &str, partitions: &[(u32, PartitionSummary)]) -> String {
    let mut out = String::new();
    line(&mut out, "topic", topic);
    line(&mut out, "partitions", partitions.len());
    for (p, summary) in partitions {
        line(&mut out, &format!("partition.{p}.log_start_offset"), summary.log_start_offset);
        line(&mut out, &format!("partition.{p}.log_end_offset"), summary.log_end_offset);
    }
    out
}

fn line(out: &mut String, key: &str, value: impl std::fmt::Display) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{key}: {value}");
}

/// `<which>_timestamp` (epoch ms) and `<which>_time` (RFC 3339, usable as a `by-time/` name);
/// `missing` (`none` or `unknown`) when there is no timestamp.
fn timestamp_lines(out: &mut String, which: &str, timestamp: Option<Timestamp>, missing: &str) {
    let ms = timestamp.map_or_else(|| missing.to_string(), |t| t.to_string());
    let rfc3339 = timestamp.and_then(time_name).unwrap_or_else(|| missing.to_string());
    line(out, &format!("{which}_timestamp"), ms);
    line(out, &format!("{which}_time"), rfc3339);
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use topicfs_format::Offset;

    fn summary(start: i64, end: i64, first: Option<Timestamp>) -> PartitionSummary {
        PartitionSummary {
            log_start_offset: Offset(start),
            log_end_offset: Offset(end),
            segment_count: Some(1),
            size_bytes: Some(100),
            first_timestamp: first,
            max_timestamp: first,
            last_modified: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn partition_info_is_one_key_value_per_line() {
        let text = partition_info("t", 0, &summary(3, 10, Some(1764662400000)), 2);
        assert!(text.contains("cleaner_swaps: 2\n"), "{text}");
        assert!(text.contains("log_start_offset: 3\n"), "{text}");
        assert!(text.contains("log_end_offset: 10\n"), "{text}");
        assert!(text.contains("first_timestamp: 1764662400000\n"), "{text}");
        assert!(text.contains("first_time: 2025-12-02T08:00:00.000Z\n"), "{text}");
        assert!(text.lines().all(|l| l.split_once(": ").is_some()), "{text}");
    }

    #[test]
    fn empty_partition_has_no_timestamps() {
        let text = partition_info("t", 0, &summary(0, 0, None), 0);
        assert!(text.contains("first_timestamp: none\n"), "{text}");
        assert!(text.contains("max_time: none\n"), "{text}");
    }

    #[test]
    fn a_partition_with_records_but_no_known_timestamp_says_unknown_not_none() {
        let text = partition_info("t", 0, &summary(0, 52, None), 0);
        assert!(text.contains("first_timestamp: unknown\n"), "{text}");
        assert!(text.contains("first_time: unknown\n"), "{text}");
        assert!(text.contains("max_timestamp: unknown\n"), "{text}");
        assert!(!text.contains("none"), "{text}");
    }

    #[test]
    fn topic_info_lists_each_partition() {
        let text = topic_info("t", &[(0, summary(0, 5, None)), (1, summary(2, 7, None))]);
        assert!(text.contains("partitions: 2\n"), "{text}");
        assert!(text.contains("partition.1.log_start_offset: 2\n"), "{text}");
        assert!(text.contains("partition.1.log_end_offset: 7\n"), "{text}");
    }
}
