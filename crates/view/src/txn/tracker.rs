//! The per-partition trackers: the forward scan that keeps a partition's transaction state
//! ([`TxnTracker`]) and one mount's set of them ([`TxnTrackers`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{Committed, PartitionSource, ReadCursor, ReadMode, SealedSpan};

use super::state::{SpanEvents, TXN_SUMMARY, TxnState};
use super::{Damage, Isolation, TxnSnapshot};

/// Bytes asked of [`PartitionSource::read`] per step of a scan.
const SCAN_CHUNK: usize = 256 * 1024;

/// The transaction state of one partition, scanned forward from the log start and extended on
/// each [`TxnTracker::refresh`] (see the module docs). Shared by every stream of the partition.
#[derive(Debug, Default)]
pub struct TxnTracker {
    state: Mutex<TxnState>,
}

impl TxnTracker {
    /// A tracker that has scanned nothing yet.
    pub fn new() -> TxnTracker {
        TxnTracker::default()
    }

    /// The state as of the last refresh, without reading anything.
    pub fn snapshot(&self) -> TxnSnapshot {
        lock(&self.state).snapshot()
    }

    /// Scans the batches appended since the last refresh and returns the new state. Starts over
    /// from the log start when the log was truncated below the scan or retention deleted the
    /// segment the scan stood in.
    pub fn refresh(&self, part: &dyn PartitionSource) -> Result<TxnSnapshot> {
        let mut st = lock(&self.state);
        let summary = part.summary()?;
        let stale = st.scanned_to < summary.log_start_offset;
        if st.cursor.is_none() || stale || summary.log_end_offset < st.scanned_to {
            *st = TxnState {
                log_start: summary.log_start_offset,
                scan_start: summary.log_start_offset,
                scanned_to: summary.log_start_offset,
                ..TxnState::default()
            };
        }
        if st.damage.is_some() {
            return Ok(st.snapshot());
        }
        let mut cursor = match st.cursor {
            Some(c) => c,
            None => st.start(part, summary.log_end_offset)?,
        };
        // The sealed span being scanned whole from its start, with its events so far.
        let mut recording: Option<(SealedSpan, SpanEvents)> = None;
        let store = part.span_store();
        let (began, from) = (Instant::now(), st.scanned_to);
        loop {
            if let Some((span, events)) = recording.take() {
                if cursor.hint == span.end.hint {
                    let payload = events.encode(span.end.next_offset);
                    if let Some(store) = store {
                        store.update(&span, TXN_SUMMARY, Box::new(|_| Some(payload)));
                    }
                } else {
                    recording = Some((span, events));
                }
            }
            let sealed = store.and_then(|s| s.sealed_span_at(&cursor));
            if let Some(span) = sealed.filter(|s| st.scanned_to <= s.base) {
                let cached = store
                    .and_then(|s| s.load(&span, TXN_SUMMARY))
                    .and_then(|b| SpanEvents::decode(&b, span.end.next_offset));
                if let Some(events) = cached {
                    // Known from the segment cache: its events instead of its batches.
                    for e in events {
                        st.apply(e);
                    }
                    st.scanned_to = st.scanned_to.max(span.end.next_offset);
                    cursor = span.end;
                    st.cursor = Some(cursor);
                    continue;
                }
                recording = Some((span, SpanEvents::default()));
                st.prefix = None;
            } else if recording.is_none() && st.prefix_tried != Some(cursor) {
                st.prefix_tried = Some(cursor);
                let cached = store
                    .and_then(|s| s.prefix_span_at(&cursor, TXN_SUMMARY))
                    .filter(|(span, _)| st.scanned_to <= span.base)
                    .and_then(|(span, b)| {
                        Some((span, SpanEvents::decode(&b, span.end.next_offset)?))
                    });
                if let Some((span, events)) = cached {
                    // The active segment's prefix, known from the segment cache.
                    let mut kept = SpanEvents::default();
                    for e in events {
                        st.apply(e);
                        kept.note(e);
                    }
                    st.scanned_to = st.scanned_to.max(span.end.next_offset);
                    st.prefix = Some((span.start, kept));
                    st.prefix_unstored = Some(0);
                    st.prefix_stored_once = true;
                    cursor = span.end;
                    st.cursor = Some(cursor);
                    st.prefix_tried = Some(cursor);
                    continue;
                }
                if st.prefix.is_none() && st.scanned_to == st.scan_start {
                    // The scan starts at a segment's start: perhaps the active segment's.
                    st.prefix = Some((cursor, SpanEvents::default()));
                }
            }
            let chunk = match part.read(&cursor, SCAN_CHUNK, ReadMode::HeadsPastDamage) {
                Ok(answer) => answer.into_heads(),
                Err(Error::Corrupt { file, position, what }) => {
                    let file = file.display().to_string();
                    st.damage = Some(Damage { file, position, what });
                    break;
                }
                Err(e) => return Err(e),
            };
            if chunk.heads.is_empty() && chunk.damaged.is_none() {
                break;
            }
            // The cursor at the batch being scanned: the run starts say where the source's runs
            // begin, `after_batch` moves past each batch.
            let mut here = cursor;
            let mut starts = chunk.starts.iter().peekable();
            let mut damaged = None;
            for i in 0..=chunk.heads.len() {
                if let Some(start) = starts.next_if(|s| s.at <= i) {
                    here = ReadCursor {
                        next_offset: here.next_offset.max(start.cursor.next_offset),
                        hint: start.cursor.hint,
                    };
                    if start.retention_boundary {
                        // A segment start: the active segment's, if this is the last one (the
                        // source stores nothing for any other).
                        st.prefix = Some((here, SpanEvents::default()));
                    }
                }
                let Some(head) = chunk.heads.get(i) else {
                    if let Some(e) = &chunk.damaged {
                        damaged = Some((part.byte_location(&here, e.at as u64), e.clone()));
                    }
                    break;
                };
                let info = &head.info;
                match st.observe(info, head.control.as_deref()) {
                    Ok(Some(event)) => {
                        if let Some((_, events)) = recording.as_mut() {
                            events.note(event);
                        }
                        if let Some((_, events)) = st.prefix.as_mut() {
                            events.note(event);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        damaged = Some((part.byte_location(&here, e.at as u64), e));
                        break;
                    }
                }
                st.scanned_to = st.scanned_to.max(info.last_offset.plus(1));
                here = here.after_batch(u64::from(info.size), info.last_offset);
            }
            if chunk.skipped.is_some() {
                // Damage stepped over: the span's events are not known whole.
                recording = None;
                st.prefix = None;
            }
            if st.prefix.is_some() {
                let scanned = chunk.bytes;
                st.prefix_unstored = Some(st.prefix_unstored.map_or(scanned, |n| n + scanned));
            }
            if let Some(((file, position), e)) = damaged {
                log::error!(
                    "transaction scan of {}-{} stopped: corrupt data in {file} at position \
                     {position}: {e}",
                    part.topic(),
                    part.partition()
                );
                st.damage = Some(Damage { file, position, what: e.to_string() });
                st.prefix = None;
                break;
            }
            match chunk.next {
                Some(next) => cursor = next,
                None => break,
            }

            st.cursor = Some(cursor);
        }
        st.cursor = Some(cursor);
        st.store_prefix(part, cursor);
        if st.scanned_to.0 - from.0 > 100_000 {
            log::debug!(
                "transaction scan of {}-{}: offsets {from}..{} in {:.1} ms",
                part.topic(),
                part.partition(),
                st.scanned_to,
                began.elapsed().as_secs_f64() * 1e3
            );
        }
        Ok(st.snapshot())
    }
}

/// One mount's [`TxnTracker`]s (one per partition, created on first use) at one [`Isolation`].
#[derive(Debug, Default)]
pub struct TxnTrackers {
    isolation: Isolation,
    trackers: Mutex<HashMap<(String, u32), Arc<TxnTracker>>>,
}

impl TxnTrackers {
    /// No tracker yet; streams at `isolation`.
    pub fn new(isolation: Isolation) -> TxnTrackers {
        TxnTrackers { isolation, trackers: Mutex::new(HashMap::new()) }
    }

    /// The isolation level of the streams these trackers serve.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The tracker of `part` in `read_committed`, created on first use; `None` in
    /// `read_uncommitted` (every record is shown, nothing needs tracking) and for a source that
    /// reads committed records itself ([`Committed::BySource`]).
    pub fn tracker(&self, part: &dyn PartitionSource) -> Option<Arc<TxnTracker>> {
        if self.isolation == Isolation::ReadUncommitted
            || matches!(part.committed(), Committed::BySource)
        {
            return None;
        }
        let key = (part.topic().to_string(), part.partition());
        Some(Arc::clone(lock(&self.trackers).entry(key).or_default()))
    }
}
