//! One partition handle's bounds (ListOffsets, Fetch answers, the max-timestamp lookup) and
//! its [`PartitionSource`] seam methods.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::{ClusterPartition, MAX_TIMESTAMP_PROBE};
use crate::client::{EARLIEST, FetchedPartition, LATEST, MAX_TIMESTAMP};
use crate::{Client, ListedOffset};
use topicfs_executor::{Blocking, Class};
use topicfs_format::{EncodeRecord, Offset};
use topicfs_source::error::{Error, Result};
use topicfs_source::{
    AppendInfo, Committed, KeyIndex, Known, OffsetQuery, PartitionSource, PartitionSummary,
    ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
};

/// What the first max-timestamp lookup got (see [`ClusterPartition::probe`]).
enum Probe {
    /// The broker's answer, or the probe's timeout.
    Answered(Result<Option<ListedOffset>>),
    /// The lookup did not start.
    NotStarted(Error),
}

impl ClusterPartition {
    /// The client for a request made now: the background client on a worker running a
    /// deferred stat or mount sizing, the readers' otherwise (requests, read-ahead, prefetch).
    pub(super) fn client_now(&self) -> &Client {
        super::client_for(&self.client, &self.background)
    }

    /// ListOffsets `-3` for this partition, within what [`MaxTimestampLookup`] learned: the
    /// mount's first lookup runs as a task of the executor ([`ClusterPartition::probe`]) and is
    /// waited for at most [`MAX_TIMESTAMP_PROBE`] once it started.
    fn list_max_timestamp(&self) -> Result<Option<ListedOffset>> {
        use std::sync::atomic::Ordering;
        const ANSWERED: u8 = 1;
        const NOT_ANSWERED: u8 = 2;
        let lookup = &self.max_timestamp_lookup;
        match lookup.state.load(Ordering::Acquire) {
            ANSWERED => return self.client_now().list_offset(&self.topic, self.p(), MAX_TIMESTAMP),
            NOT_ANSWERED => {
                return Err(Error::UnsupportedApi {
                    broker: "the cluster".to_string(),
                    api: "ListOffsets",
                    why: "the max-timestamp lookup (-3) was not answered before".to_string(),
                });
            }
            _ => {}
        }
        let answer = match self.probe() {
            Probe::Answered(answer) => answer,
            // Not started (the executor shut down, or busy for a whole request deadline):
            // this says nothing of the broker, and the next lookup tries again.
            Probe::NotStarted(e) => return Err(e),
        };
        // A partition's own error (unknown topic, no leader) says nothing of the broker.
        let state = match &answer {
            Ok(_) => ANSWERED,
            Err(Error::Kafka { .. } | Error::NotFound(_)) => 0,
            Err(_) => NOT_ANSWERED,
        };
        if state == NOT_ANSWERED {
            log::info!(
                "{}-{}: the cluster does not answer ListOffsets -3 (max timestamp); info files \
                 show max_timestamp: unknown",
                self.topic,
                self.partition
            );
        }
        lookup.state.store(state, Ordering::Release);
        answer
    }

    /// The first max-timestamp lookup, bounded by [`MAX_TIMESTAMP_PROBE`] without a thread
    /// of its own: a [`Blocking::Network`] task of the executor's read-ahead class (the caller
    /// waits for it) sends it, and the caller waits for its start (at most the request deadline)
    /// and then for its answer (at most the probe's bound; the task goes on waiting for the
    /// answer until the request deadline, so the connection is not given up). Without an
    /// executor it runs on the caller, bounded by the request deadline.
    fn probe(&self) -> Probe {
        let Some(executor) = &self.executor else {
            return Probe::Answered(self.client.list_offset(&self.topic, self.p(), MAX_TIMESTAMP));
        };
        let (client, topic, p) = (Arc::clone(&self.client), self.topic.clone(), self.p());
        let (tx, rx) = std::sync::mpsc::channel();
        executor.submit(Class::ReadAhead, Blocking::Network, move || {
            if tx.send(None).is_ok() {
                let _ = tx.send(Some(client.list_offset(&topic, p, MAX_TIMESTAMP)));
            }
        });
        let request_timeout = self.client.config().request_timeout;
        let after_ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        match rx.recv_timeout(request_timeout) {
            Ok(None) => {}
            Ok(Some(answer)) => return Probe::Answered(answer),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                return Probe::NotStarted(Error::Timeout {
                    broker: "the cluster".to_string(),
                    what: "ListOffsets -3 (max timestamp): the lookup did not start".to_string(),
                    after_ms: after_ms(request_timeout),
                });
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Probe::NotStarted(Error::io(
                    "the max-timestamp lookup",
                    "queue (the mount's executor stopped)",
                    std::io::Error::from(std::io::ErrorKind::Interrupted),
                ));
            }
        }
        Probe::Answered(match rx.recv_timeout(MAX_TIMESTAMP_PROBE) {
            Ok(Some(answer)) => answer,
            Ok(None) | Err(_) => Err(Error::Timeout {
                broker: "the cluster".to_string(),
                what: "ListOffsets -3 (max timestamp)".to_string(),
                after_ms: after_ms(MAX_TIMESTAMP_PROBE),
            }),
        })
    }

    pub(super) fn p(&self) -> i32 {
        // Made from a u32 that fitted an i32 in `ClusterSource::partition`.
        self.partition as i32
    }

    /// (log start offset, log end offset): the learned [`Bounds`] while fresh, else ListOffsets
    /// earliest and latest (two requests, pipelined: one round trip). Reading uncommitted, the log end is the high watermark;
    /// reading committed, the last stable offset (ListOffsets asks at the client's isolation
    /// level, which the mount makes the streams' own).
    fn bounds(&self) -> Result<(Offset, Offset)> {
        {
            let b = topicfs_source::sync::lock(&self.bounds);
            if b.current(self.bounds_fresh) {
                return Ok((b.start, b.end.max(b.start)));
            }
        }
        let asked = Instant::now();
        let queries = [EARLIEST, LATEST].map(|ts| (self.topic.clone(), self.p(), ts));
        let answers = self.client_now().list_offsets(&queries).map_err(|e| self.named(e))?;
        let mut answers = answers.into_iter().map(|(_, answer)| answer);
        let mut offset = || -> Result<Offset> {
            let listed = answers
                .next()
                .unwrap_or_else(|| Err(Error::NotFound(format!("{}/{}", self.topic, self.p()))))
                .map_err(|e| self.named(e))?;
            Ok(listed.map_or(Offset(0), |l: ListedOffset| l.offset).max(Offset(0)))
        };
        let (start, end) = (offset()?, offset()?);
        let mut b = topicfs_source::sync::lock(&self.bounds);
        b.start = start;
        b.end = b.end.max(end);
        b.learned = Some(asked);
        b.stated = true;
        Ok((b.start, b.end.max(b.start)))
    }

    /// Takes in what a Fetch response stated (asked at `asked`): its log start offset (when
    /// the broker says), and its high watermark or, reading committed, its last stable offset
    /// (the high watermark when the broker does not say) as a floor of the log end.
    pub(super) fn learn_from_fetch(&self, fetched: &FetchedPartition, asked: Instant) {
        let end = if self.committed && fetched.last_stable_offset.0 >= 0 {
            fetched.last_stable_offset
        } else {
            fetched.high_watermark
        };
        let mut b = topicfs_source::sync::lock(&self.bounds);
        b.end = b.end.max(end);
        b.stated = true;
        if fetched.log_start_offset.0 >= 0 {
            b.start = fetched.log_start_offset;
            if b.learned.is_none_or(|t| t < asked) {
                b.learned = Some(asked);
            }
        }
    }

    /// The bounds as last stated by a ListOffsets or Fetch answer (see [`Bounds`]); `None`
    /// before any did.
    ///
    /// [`Bounds`]: super::Bounds
    pub(super) fn stated_bounds(&self) -> Option<(Offset, Offset)> {
        let b = topicfs_source::sync::lock(&self.bounds);
        b.stated.then_some((b.start, b.end.max(b.start)))
    }

    /// After an append: the bounds are asked again by the next question, so the appended
    /// records are visible to the next read (the log end a Produce answer implies is the high
    /// watermark only with `acks=all`, and not the last stable offset).
    fn forget_bounds(&self) {
        topicfs_source::sync::lock(&self.bounds).learned = None;
    }

    /// One Produce of `records` (see [`PartitionSource::append`]).
    fn produce<R: EncodeRecord>(&self, records: &[R]) -> Result<AppendInfo> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let produced = self.client.produce(&self.topic, self.p(), records);
        self.forget_bounds();
        let produced = produced.map_err(|e| self.named(e))?;
        Ok(self.produced(produced.base_offset, records.len()))
    }

    fn produced(&self, base: Offset, count: usize) -> AppendInfo {
        AppendInfo {
            first_offset: base,
            last_offset: Offset(base.0.saturating_add(count as i64 - 1)),
            batches: 1,
        }
    }
}

impl PartitionSource for ClusterPartition {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn partition(&self) -> u32 {
        self.partition
    }

    fn summary(&self) -> Result<PartitionSummary> {
        let (log_start_offset, log_end_offset) = self.bounds()?;
        Ok(PartitionSummary {
            log_start_offset,
            log_end_offset,
            segment_count: None,
            size_bytes: None,
            first_timestamp: None,
            max_timestamp: None,
            // The protocol does not say when a partition last changed: the time it was asked.
            last_modified: SystemTime::now(),
        })
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        let ts = match query {
            OffsetQuery::Latest => return Ok(self.bounds()?.1),
            OffsetQuery::Earliest => return Ok(self.bounds()?.0),
            OffsetQuery::MaxTimestamp => MAX_TIMESTAMP,
            OffsetQuery::Timestamp(t) => t.max(0),
        };
        let listed = if ts == MAX_TIMESTAMP {
            self.list_max_timestamp()
        } else {
            self.client_now().list_offset(&self.topic, self.p(), ts)
        };
        match listed.map_err(|e| self.named(e))? {
            // A broker answering a time past the last record with an older record (tansu 0.6
            // answers offset 0, doc/cluster-brokers.md): no record is that new.
            Some(l) if matches!(query, OffsetQuery::Timestamp(t) if l.timestamp >= 0 && l.timestamp < t) => {
                Ok(self.bounds()?.1)
            }
            Some(l) if l.offset.0 >= 0 => Ok(l.offset),
            // No record that new (or -3 on an empty partition): the log end offset.
            _ => Ok(self.bounds()?.1),
        }
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        let (log_start, log_end) = self.bounds()?;
        if target < log_start || target > log_end {
            return Err(Error::OffsetOutOfRange { requested: target, log_start, log_end });
        }
        Ok(ReadCursor::at(target))
    }

    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        Ok(cursor.next_offset >= self.bounds()?.0)
    }

    /// Every mode reads whole batches: nothing here steps over damage (a batch the broker
    /// returned that fails its check is an error) and Fetch has no header-only form. Reads go
    /// through the partition's read windows ([`super::window`]).
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer> {
        let _ = mode;
        self.read_windowed(cursor, max_bytes).map(ReadAnswer::Batches)
    }

    /// The bounds as last stated by a ListOffsets or Fetch answer (see [`Bounds`]): a read
    /// learns up to their end without a request, and its own Fetch answer restates them. The
    /// time asked as the last change, as in `summary`: directory attributes of a cluster mount
    /// cost no request (and answer while the broker is down).
    ///
    /// [`Bounds`]: super::Bounds
    fn known(&self) -> Known {
        Known {
            bounds: self.stated_bounds(),
            last_modified: Some(SystemTime::now()),
            rewrites: 0,
            sizing_budget: self.sizing_budget,
        }
    }

    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        match records {
            Records::Owned(records) => self.produce(records),
            Records::Borrowed(records) => self.produce(records),
            Records::ValueLines { head, lines } => {
                self.produce(&topicfs_format::value_line_records(head, lines))
            }
        }
    }

    fn sync(&self) -> Result<()> {
        // Each append was acknowledged per `acks` before it returned; there is no local copy
        // to flush.
        Ok(())
    }

    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        None
    }

    fn key_index(&self) -> Option<&dyn KeyIndex> {
        None
    }

    fn committed(&self) -> Committed<'_> {
        if self.committed { Committed::BySource } else { Committed::ByView(None) }
    }
    fn span_store(&self) -> Option<&dyn topicfs_source::SpanStore> {
        None
    }
}
