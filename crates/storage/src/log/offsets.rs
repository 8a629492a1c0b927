//! A partition's offsets: the log start offset, the log end offset and the recovery point
//! (Kafka's `logStartOffset`, `nextOffsetMetadata` and `recoveryPoint`), each one atomic, read
//! without a lock.
//!
//! **Invariants.**
//! - Between loads the log start offset and the recovery point only move up
//!   ([`LogOffsets::advance_start`], [`LogOffsets::advance_recovery_point`] keep the larger);
//!   a load sets all three ([`LogOffsets::set_loaded`]).
//! - The log end offset is published ([`LogOffsets::publish_end`], release) after the batch
//!   bytes and their segment's size: a reader that sees an offset below it (acquire) finds the
//!   batch. Only the writer (under the append lock) or a read-only log's refresh publishes it.
//! - Retention raises the log start offset before it drops a segment from the map (see
//!   `retention.rs`), so a reader that found no segment for an offset sees it out of range.

use std::sync::atomic::{AtomicI64, Ordering};

use topicfs_format::Offset;

/// The three offsets; see the module doc.
#[derive(Debug, Default)]
pub(super) struct LogOffsets {
    start: AtomicI64,
    end: AtomicI64,
    recovery_point: AtomicI64,
}

impl LogOffsets {
    /// First offset readers may see.
    pub(super) fn start(&self) -> Offset {
        Offset(self.start.load(Ordering::Acquire))
    }

    /// Offset the next appended record gets.
    pub(super) fn end(&self) -> Offset {
        Offset(self.end.load(Ordering::Acquire))
    }

    /// Offset below which everything is known to be on disk (fsynced).
    pub(super) fn recovery_point(&self) -> Offset {
        Offset(self.recovery_point.load(Ordering::Acquire))
    }

    /// What a load found (the only place the offsets may move down: a read-only log's reload
    /// after a broker truncated or deleted segments).
    pub(super) fn set_loaded(&self, start: Offset, end: Offset, recovery_point: Offset) {
        self.start.store(start.0, Ordering::Release);
        self.end.store(end.0, Ordering::Release);
        self.recovery_point.store(recovery_point.0, Ordering::Release);
    }

    /// Moves the log start offset up to `to` (never down).
    pub(super) fn advance_start(&self, to: Offset) {
        self.start.fetch_max(to.0, Ordering::AcqRel);
    }

    /// Publishes `end` as the log end offset, once the batches below it are readable.
    pub(super) fn publish_end(&self, end: Offset) {
        self.end.store(end.0, Ordering::Release);
    }

    /// Moves the recovery point up to `to` (never down): everything below it is durable.
    pub(super) fn advance_recovery_point(&self, to: Offset) {
        self.recovery_point.fetch_max(to.0, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_start_offset_and_the_recovery_point_only_move_up_between_loads() {
        let offsets = LogOffsets::default();
        offsets.set_loaded(Offset(10), Offset(50), Offset(20));
        offsets.advance_start(Offset(30));
        offsets.advance_start(Offset(15));
        assert_eq!(offsets.start(), Offset(30));
        offsets.advance_recovery_point(Offset(40));
        offsets.advance_recovery_point(Offset(25));
        assert_eq!(offsets.recovery_point(), Offset(40));
        offsets.publish_end(Offset(60));
        assert_eq!(offsets.end(), Offset(60));
        // A load (a read-only log's reload) sets them as found, lower ones included.
        offsets.set_loaded(Offset(0), Offset(5), Offset(0));
        let now = (offsets.start(), offsets.end(), offsets.recovery_point());
        assert_eq!(now, (Offset(0), Offset(5), Offset(0)));
    }
}
