//! Fetch reads of one partition handle: `read_uncommitted` with read-ahead and the mount's
//! answers, `read_committed` with the transaction filter.

use std::time::{Duration, Instant};

use super::{
    ANSWER_SLOTS, Ahead, Answer, ClusterPartition, READ_AHEAD_MIN_ASK, READ_AHEAD_SLOTS,
    whole_batches,
};
use crate::client::FetchOptions;
use crate::committed::committed_batches;
use crate::config::IsolationLevel;
use topicfs_format::{Offset, parse_batch_info, peek_entry};
use topicfs_source::error::{Error, Result};
use topicfs_source::{BatchChunk, ReadCursor};

impl ClusterPartition {
    /// [`PartitionSource::read`] as a `read_uncommitted` consumer, with read-ahead (see
    /// [`Ahead`]).
    pub(super) fn read_uncommitted(
        &self,
        cursor: &ReadCursor,
        max_bytes: usize,
    ) -> Result<BatchChunk> {
        let from = cursor.next_offset;
        let taken = {
            let mut ahead = topicfs_source::sync::lock(&self.ahead);
            ahead.iter().position(|a| a.from == from).map(|i| ahead.remove(i))
        };
        if let Some(a) = taken {
            let (chunk, rest) = self.split(&a.bytes, from, max_bytes)?;
            if chunk.next.is_some() {
                if let (Some(next), Some(rest)) = (chunk.next, rest) {
                    let bytes = a.bytes[rest..].to_vec();
                    self.keep_ahead(Ahead { from: next.next_offset, bytes });
                }
                return Ok(chunk);
            }
        }
        let cap = usize::try_from(self.client.config().max_partition_fetch_bytes).unwrap_or(0);
        let ask = if max_bytes >= READ_AHEAD_MIN_ASK { max_bytes.max(cap) } else { max_bytes };
        let opts = FetchOptions {
            max_bytes: Some(i32::try_from(ask.max(1)).unwrap_or(i32::MAX)),
            max_wait: Duration::ZERO,
            isolation: Some(IsolationLevel::ReadUncommitted),
        };
        let _held = self.hold(ask)?;
        let asked = Instant::now();
        let fetched =
            self.client.fetch(&self.topic, self.p(), from, opts).map_err(|e| self.named(e))?;
        self.learn_from_fetch(&fetched, asked);
        let buf: &[u8] = &fetched.records;
        let (chunk, rest) = self.split(buf, from, max_bytes)?;
        if let (Some(next), Some(rest)) = (chunk.next, rest) {
            let end = buf.len().min(rest.saturating_add(cap));
            let kept = whole_batches(&buf[rest..end]);
            if kept > 0 {
                let bytes = buf[rest..rest + kept].to_vec();
                self.keep_ahead(Ahead { from: next.next_offset, bytes });
            }
        }
        self.keep_answer(from, &chunk);
        Ok(chunk)
    }

    /// A read from `from` served by a kept Fetch answer (see [`Answers`]): its batches,
    /// `max_bytes` of them at most (at least one); `None` when no answer starts there.
    pub(super) fn answered(&self, from: Offset, max_bytes: usize) -> Result<Option<BatchChunk>> {
        if self.stated_bounds().is_none_or(|(start, _)| start > from) {
            return Ok(None);
        }
        let mut answers = topicfs_source::sync::lock(&self.answers.0);
        let Some(i) = answers.iter().position(|a| {
            a.from == from
                && a.partition == self.partition
                && a.committed == self.committed
                && a.topic == self.topic
        }) else {
            return Ok(None);
        };
        let Some(a) = answers.remove(i) else { return Ok(None) };
        let chunk = if a.bytes.len() <= max_bytes {
            BatchChunk {
                bytes: a.bytes.clone(),
                starts: Vec::new(),
                next: Some(ReadCursor::at(a.next)),
                crc_checked: false,
                skipped: None,
            }
        } else {
            self.split(&a.bytes, from, max_bytes)?.0
        };
        answers.push_back(a);
        Ok(chunk.next.is_some().then_some(chunk))
    }

    /// Keeps what a read from `from` fetched (see [`Answers`]), dropping the least recently
    /// used answer beyond [`ANSWER_SLOTS`].
    fn keep_answer(&self, from: Offset, chunk: &BatchChunk) {
        let Some(next) = chunk.next.as_ref().map(|c| c.next_offset) else { return };
        if chunk.bytes.is_empty() {
            return;
        }
        let mut answers = topicfs_source::sync::lock(&self.answers.0);
        answers.retain(|a| {
            !(a.from == from
                && a.partition == self.partition
                && a.committed == self.committed
                && a.topic == self.topic)
        });
        if answers.len() >= ANSWER_SLOTS {
            answers.pop_front();
        }
        answers.push_back(Answer {
            topic: self.topic.clone(),
            partition: self.partition,
            committed: self.committed,
            from,
            bytes: chunk.bytes.clone(),
            next,
        });
    }
}

impl ClusterPartition {
    /// [`PartitionSource::read`] as a `read_committed` consumer: Fetch at isolation level 1,
    /// the response filtered by its own aborted-transaction list and cut at its last stable
    /// offset ([`committed_batches`]). A response whose batches were all dropped (an aborted
    /// transaction longer than one response) is followed by the next Fetch from past them, each
    /// with its own deadline; the walk ends empty at the last stable offset.
    pub(super) fn read_committed(
        &self,
        cursor: &ReadCursor,
        max_bytes: usize,
    ) -> Result<BatchChunk> {
        let opts = FetchOptions {
            max_bytes: Some(i32::try_from(max_bytes.max(1)).unwrap_or(i32::MAX)),
            max_wait: Duration::ZERO,
            isolation: Some(IsolationLevel::ReadCommitted),
        };
        let mut from = cursor.next_offset;
        loop {
            let _held = self.hold(max_bytes)?;
            let asked = Instant::now();
            let fetched =
                self.client.fetch(&self.topic, self.p(), from, opts).map_err(|e| self.named(e))?;
            self.learn_from_fetch(&fetched, asked);
            // A broker that does not say (-1): nothing is pending, the high watermark.
            let lso = if fetched.last_stable_offset.0 >= 0 {
                fetched.last_stable_offset
            } else {
                fetched.high_watermark
            };
            let aborted: Vec<(i64, Offset)> = fetched
                .aborted_transactions
                .iter()
                .map(|a| (a.producer_id, a.first_offset))
                .collect();
            let kept = committed_batches(&fetched.records, from, lso, &aborted, max_bytes)
                .map_err(|(at, e)| self.bad_bytes(at, &e.to_string()))?;
            if !kept.bytes.is_empty() {
                let next = Some(ReadCursor::at(kept.next));
                let chunk = BatchChunk {
                    bytes: kept.bytes,
                    starts: Vec::new(),
                    next,
                    crc_checked: false,
                    skipped: None,
                };
                self.keep_answer(cursor.next_offset, &chunk);
                return Ok(chunk);
            }
            if kept.next <= from || kept.next >= lso {
                return Ok(BatchChunk {
                    bytes: Vec::new(),
                    starts: Vec::new(),
                    next: None,
                    crc_checked: false,
                    skipped: None,
                });
            }
            from = kept.next;
        }
    }

    /// Room for a Fetch of `max_bytes` in the mount's fetch memory, held until dropped (nothing
    /// without a cap); waits for other fetches at most the request deadline.
    fn hold(&self, max_bytes: usize) -> Result<Option<Box<dyn std::any::Any + Send>>> {
        let Some(cap) = &self.fetch_memory else { return Ok(None) };
        match cap.memory.hold(max_bytes, Instant::now() + cap.wait) {
            Some(held) => Ok(Some(held)),
            None => Err(Error::Timeout {
                broker: format!("leader of {}/{}", self.topic, self.partition),
                what: format!(
                    "partition {}/{}: waiting for fetch memory ({} bytes asked, other fetches \
                     hold the memory budget of {} bytes)",
                    self.topic,
                    self.partition,
                    max_bytes,
                    cap.memory.limit()
                ),
                after_ms: u64::try_from(cap.wait.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// `e` naming this partition where the client's error names only a broker (a connection
    /// that failed or a deadline that passed), so the log line of a failed read says which
    /// partition it was reading: `broker B: partition T/P: Fetch: ...`.
    pub(super) fn named(&self, e: Error) -> Error {
        let part = format!("partition {}/{}", self.topic, self.partition);
        match e {
            Error::BrokerUnreachable { broker, op, source } => {
                Error::BrokerUnreachable { broker, op: format!("{part}: {op}"), source }
            }
            Error::Timeout { broker, what, after_ms } => {
                Error::Timeout { broker, what: format!("{part}: {what}"), after_ms }
            }
            Error::Protocol { broker, what } => {
                Error::Protocol { broker, what: format!("{part}: {what}") }
            }
            other => other,
        }
    }

    /// Keeps a surplus for the next sequential read, dropping the oldest beyond
    /// [`READ_AHEAD_SLOTS`].
    fn keep_ahead(&self, a: Ahead) {
        let mut ahead = topicfs_source::sync::lock(&self.ahead);
        ahead.retain(|b| b.from != a.from);
        if ahead.len() >= READ_AHEAD_SLOTS {
            ahead.remove(0);
        }
        ahead.push(a);
    }

    /// The first batches of `buf` (a Fetch response's records) holding `from` or a later
    /// offset, `max_bytes` of them at most (but at least one), as a chunk; and where the
    /// batches after them start in `buf`, when some follow.
    fn split(
        &self,
        buf: &[u8],
        from: Offset,
        max_bytes: usize,
    ) -> Result<(BatchChunk, Option<usize>)> {
        let mut out = Vec::new();
        let mut next = from;
        let mut pos = 0;
        let mut more = None;
        while pos < buf.len() {
            let rest = &buf[pos..];
            let Some(h) = peek_entry(rest).map_err(|e| self.bad_bytes(pos, &e.to_string()))? else {
                break;
            };
            let size = h.total_size();
            if size > rest.len() {
                break; // A batch cut at the size limit: the broker's way to say "more".
            }
            let entry = &rest[..size];
            let info = parse_batch_info(entry).map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
            if info.last_offset < next {
                pos += size;
                continue; // Before the cursor (a fetch may start with the batch holding it).
            }
            if !out.is_empty() && out.len() + size > max_bytes {
                more = Some(pos);
                break;
            }
            pos += size;
            out.extend_from_slice(entry);
            next = info.last_offset.plus(1);
        }
        let next = if out.is_empty() { None } else { Some(ReadCursor::at(next)) };
        let chunk =
            BatchChunk { bytes: out, starts: Vec::new(), next, crc_checked: false, skipped: None };
        Ok((chunk, more))
    }

    /// Bytes in a Fetch response that do not frame a batch.
    pub(super) fn bad_bytes(&self, at: usize, what: &str) -> Error {
        Error::Protocol {
            broker: format!("leader of {}/{}", self.topic, self.partition),
            what: format!("Fetch response records at byte {at}: {what}"),
        }
    }
}
