//! The mount's most recent warnings and errors, as `MNT/@log` shows them, and where its whole
//! log goes (`log:` in `MNT/@info`).
//!
//! The daemon's logger (in the root crate) pushes every record of level warn and above into
//! one [`RecentLog`], which the filesystem reads; neither knows the other's types. The ring is
//! bounded: the oldest record goes when a new one would make it longer than its capacity, and
//! a record's message is cut at [`MAX_MESSAGE_BYTES`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use topicfs_view::spec::time_name;

/// How many records `MNT/@log` keeps by default.
pub const DEFAULT_CAPACITY: usize = 100;
/// The longest message a record keeps (bytes, cut at a character boundary, then `...`).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// A bounded ring of log lines, one per record: `<time> <LEVEL> <target>: <message>`.
#[derive(Debug)]
pub struct RecentLog {
    lines: Mutex<VecDeque<String>>,
    capacity: usize,
    /// Where the whole log goes (a file's path, `syslog (identifier topicfs)`, `stderr`).
    destination: String,
}

impl RecentLog {
    /// An empty ring of at most `capacity` records, of a log that goes to `destination`.
    pub fn new(capacity: usize, destination: impl Into<String>) -> RecentLog {
        RecentLog {
            lines: Mutex::new(VecDeque::with_capacity(capacity.min(DEFAULT_CAPACITY))),
            capacity,
            destination: destination.into(),
        }
    }

    /// Where the whole log goes.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// Keeps one record (dropping the oldest past the capacity). Line breaks in `message`
    /// become spaces: one record is one line.
    pub fn push(&self, time: SystemTime, level: log::Level, target: &str, message: &str) {
        if self.capacity == 0 {
            return;
        }
        let ms = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let when = time_name(ms).unwrap_or_else(|| ms.to_string());
        let mut text = message.replace(['\n', '\r'], " ");
        if text.len() > MAX_MESSAGE_BYTES {
            let mut cut = MAX_MESSAGE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("...");
        }
        let line = format!("{when} {level} {target}: {text}\n");
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == self.capacity {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The records kept, oldest first, one per line.
    pub fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_ring_keeps_the_newest_records_one_line_each() {
        let log = RecentLog::new(2, "/var/log/topicfs/mnt.log");
        let at = UNIX_EPOCH + Duration::from_millis(1_764_662_400_000);
        log.push(at, log::Level::Warn, "a", "first");
        log.push(at, log::Level::Error, "b", "second\nline");
        log.push(at, log::Level::Warn, "c", "third");
        assert_eq!(
            log.text(),
            "2025-12-02T08:00:00.000Z ERROR b: second line\n\
             2025-12-02T08:00:00.000Z WARN c: third\n"
        );
        assert_eq!(log.destination(), "/var/log/topicfs/mnt.log");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        log.push(at, log::Level::Warn, "d", &long);
        let last = log.text().lines().last().unwrap().to_string();
        assert!(last.ends_with("é..."), "{last}");
        assert!(last.len() < MAX_MESSAGE_BYTES + 64, "{}", last.len());
    }
}
