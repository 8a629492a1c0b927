//! How a value still being written is judged ([`check_value_prefix`]): each setting's kind of
//! value, as [`LogConfig::set`](super::LogConfig::set) checks it, and whether any continuation of
//! what was written so far can still be one.

use topicfs_source::error::{Error, Result};

use super::{MIN_SEGMENT_BYTES, MIN_SEGMENT_INDEX_BYTES, NAMES, invalid, shown_value};

/// What values a setting takes, as [`LogConfig::set`] checks them: what
/// [`check_value_prefix`] judges a value still being written by.
#[derive(Copy, Clone, Debug)]
enum Kind {
    /// An integer within one of the ranges (inclusive).
    Int(&'static [(i64, i64)]),
    /// A finite number in `[0, 1]`.
    Ratio,
    /// One of the words; `any_case`: compared ignoring ASCII case.
    Word { words: &'static [&'static str], any_case: bool },
    /// `cleanup.policy`'s comma-separated list of `delete` and `compact`.
    Policy,
    /// A throttled-replicas list: empty, `*`, or `partition:broker` pairs.
    Replicas,
}

const I32_MAX: i64 = i32::MAX as i64;
const NON_NEGATIVE: &[(i64, i64)] = &[(0, i64::MAX)];
const POSITIVE: &[(i64, i64)] = &[(1, i64::MAX)];
const UNLIMITED_OR_NON_NEGATIVE: &[(i64, i64)] = &[(-1, i64::MAX)];
const BOOLEAN: Kind = Kind::Word { words: &["true", "false"], any_case: true };

/// The kind of setting `name`; `None` for a name not in [`NAMES`].
fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        "cleanup.policy" => Kind::Policy,
        "compression.gzip.level" => Kind::Int(&[(-1, -1), (1, 9)]),
        "compression.lz4.level" => Kind::Int(&[(1, 17)]),
        "compression.type" => Kind::Word {
            words: &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"],
            any_case: false,
        },
        "compression.zstd.level" => Kind::Int(&[(-131_072, 22)]),
        "delete.retention.ms"
        | "file.delete.delay.ms"
        | "flush.ms"
        | "message.timestamp.after.max.ms"
        | "message.timestamp.before.max.ms"
        | "min.compaction.lag.ms"
        | "segment.jitter.ms" => Kind::Int(NON_NEGATIVE),
        "flush.messages" | "min.insync.replicas" | "max.compaction.lag.ms" | "segment.ms" => {
            Kind::Int(POSITIVE)
        }
        "follower.replication.throttled.replicas" | "leader.replication.throttled.replicas" => {
            Kind::Replicas
        }
        "index.interval.bytes" | "max.message.bytes" => Kind::Int(&[(0, I32_MAX)]),
        "local.retention.bytes" | "local.retention.ms" => Kind::Int(&[(-2, i64::MAX)]),
        "message.timestamp.type" => {
            Kind::Word { words: &["CreateTime", "LogAppendTime"], any_case: false }
        }
        "min.cleanable.dirty.ratio" => Kind::Ratio,
        "preallocate"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable"
        | "unclean.leader.election.enable" => BOOLEAN,
        // Tiered storage is not available here: only `false` is taken.
        "remote.storage.enable" => Kind::Word { words: &["false"], any_case: true },
        "retention.bytes" | "retention.ms" => Kind::Int(UNLIMITED_OR_NON_NEGATIVE),
        "segment.bytes" => Kind::Int(&[(MIN_SEGMENT_BYTES as i64, I32_MAX)]),
        "segment.index.bytes" => Kind::Int(&[(MIN_SEGMENT_INDEX_BYTES as i64, I32_MAX)]),
        _ => return None,
    })
}

/// Judges `value`, the start of a value of setting `name` as written so far (more bytes may
/// follow): `InvalidInput` naming the setting and the rule when no continuation can make it a
/// value [`LogConfig::set`] takes (`abc` for an integer, `-2` where only `-1` is below 0, `Log-`
/// for `message.timestamp.type`), or when `name` is not a setting. Whitespace after the value
/// ends it (only whitespace may follow). What this lets pass is judged whole when the line is
/// complete: it never refuses a start of a valid value.
pub fn check_value_prefix(name: &str, value: &str) -> Result<()> {
    let Some(kind) = kind(name) else {
        return Err(Error::InvalidInput(format!(
            "unknown topic setting {:?} (known: {})",
            shown_value(name),
            NAMES.join(", ")
        )));
    };
    let text = value.trim_start();
    let body = text.trim_end();
    // Whitespace after the value: it is complete.
    let complete = !body.is_empty() && body.len() < text.len();
    let possible = match kind {
        Kind::Int(ranges) => int_prefix_possible(body, complete, ranges),
        Kind::Ratio => {
            if complete {
                body.parse::<f64>().is_ok_and(|v| v.is_finite() && (0.0..=1.0).contains(&v))
            } else {
                body.bytes().all(|b| b.is_ascii_digit() || b".eE+-".contains(&b))
            }
        }
        Kind::Word { words, any_case } => words.iter().any(|w| {
            let same = |a: &str, b: &str| if any_case { a.eq_ignore_ascii_case(b) } else { a == b };
            if complete {
                same(w, body)
            } else {
                w.get(..body.len()).is_some_and(|start| same(start, body))
            }
        }),
        Kind::Policy => {
            let items: Vec<&str> = text.split(',').collect();
            let (last, done) = items.split_last().unwrap_or((&"", &[]));
            let last = last.trim_start();
            let last_body = last.trim_end();
            let words = ["delete", "compact"];
            done.iter().all(|item| words.contains(&item.trim()))
                && if !last_body.is_empty() && last_body.len() < last.len() {
                    words.contains(&last_body)
                } else {
                    words.iter().any(|w| w.starts_with(last_body))
                }
        }
        Kind::Replicas => match body.strip_prefix('*') {
            Some(rest) => rest.is_empty(),
            None => body.bytes().all(|b| b.is_ascii_digit() || b":, \t".contains(&b)),
        },
    };
    if possible {
        return Ok(());
    }
    Err(invalid(name, value.trim(), kind_rule(kind)))
}

/// Whether some integer in `ranges` is written `body` followed by more digits (or `body`
/// itself when `complete`): a sign, then digits.
fn int_prefix_possible(body: &str, complete: bool, ranges: &[(i64, i64)]) -> bool {
    if complete {
        return body
            .parse::<i64>()
            .is_ok_and(|v| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&v)));
    }
    let (negative, digits) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    // Past any i64 magnitude: no continuation parses.
    const LIMIT: i128 = 1 << 64;
    let mut magnitude: i128 = 0;
    for b in digits.bytes() {
        magnitude = magnitude * 10 + i128::from(b - b'0');
        if magnitude > LIMIT {
            return false;
        }
    }
    // The magnitudes reachable by appending k more digits: [m * 10^k, m * 10^k + 10^k - 1]
    // (k = 0: the digits as they are, when there are some).
    let (mut low, mut width) = if digits.is_empty() { (0, 10) } else { (magnitude, 1) };
    loop {
        let (lo_m, hi_m) = (low, low + width - 1);
        let (lo_v, hi_v) = if negative { (-hi_m, -lo_m) } else { (lo_m, hi_m) };
        if ranges.iter().any(|(lo, hi)| lo_v <= i128::from(*hi) && i128::from(*lo) <= hi_v) {
            return true;
        }
        if low > LIMIT || width > LIMIT {
            return false;
        }
        low *= 10;
        width *= 10;
    }
}

/// The rule of a kind, as a refusal states it.
fn kind_rule(kind: Kind) -> String {
    match kind {
        Kind::Int(ranges) if ranges == UNLIMITED_OR_NON_NEGATIVE => {
            "must be -1 (no limit) or >= 0".to_string()
        }
        Kind::Int(ranges) => {
            let parts: Vec<String> = ranges
                .iter()
                .map(|(lo, hi)| match (lo, hi) {
                    (lo, hi) if lo == hi => lo.to_string(),
                    (lo, &i64::MAX) => format!("at least {lo}"),
                    (lo, hi) => format!("between {lo} and {hi}"),
                })
                .collect();
            format!("must be an integer {}", parts.join(" or "))
        }
        Kind::Ratio => "must be a number between 0 and 1".to_string(),
        Kind::Word { words, .. } => format!("must be {}", words.join(" or ")),
        Kind::Policy => "must be delete, compact or compact,delete".to_string(),
        Kind::Replicas => {
            "must be *, empty, or partition:broker pairs separated by commas".to_string()
        }
    }
}
