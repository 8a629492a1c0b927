//! The read side: finding a batch by offset ([`LogSegment::translate_offset`]), whole
//! CRC-checked batches from a position ([`LogSegment::read`]), the next offset, max
//! timestamps, and record lookups by timestamp (Kafka's `findOffsetByTimestamp`).

use super::*;

fn mtime_ms(t: SystemTime) -> Timestamp {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// What [`LogSegment::read`] returns: whole batches and where they end.
#[derive(Clone, Debug, Default)]
pub struct SegmentRead {
    /// Concatenated whole batches.
    pub bytes: Vec<u8>,
    /// Position after the last batch in `bytes`.
    pub next_position: Position,
    /// Last offset of the last batch in `bytes` plus one.
    pub next_offset: Offset,
}

/// Result of [`LogSegment::translate_offset`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Translated {
    /// The first batch whose last offset is `>= target`.
    Batch(BatchLocation),
    /// No such batch: the scan reached this position (the committed end, or a torn tail).
    End(Position),
}

impl LogSegment {
    /// The batch containing `target` or the first after it: the first batch whose last offset
    /// is `>= target`, found from the floor index entry by a forward header scan (Kafka's
    /// `translateOffset`). [`Translated::End`] with the committed end when no batch of the
    /// segment qualifies.
    pub fn translate_offset(&self, target: Offset) -> Result<Translated> {
        let end = self.size();
        let (_, mut position) = self.with_offset_index(|idx| idx.lookup(target))?;
        if position.0 > end {
            // A read-only copy can be newer than our view of the `.log`; scan from the start.
            position = Position(0);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut pos = position.0;
        while let Some(batch) = reader.batch_at(pos)? {
            if batch.info.last_offset >= target {
                return Ok(Translated::Batch(batch));
            }
            pos = batch.end();
        }
        Ok(Translated::End(Position(pos)))
    }

    /// Whether the committed bytes of this segment stay as they are while this object exists:
    /// a sealed segment (only whole files are replaced or deleted), and the active one of a
    /// writable log (this process is its only writer, under the data dir's lock, and only
    /// appends; recovery truncates before any read). Not the active segment of a read-only
    /// log: a broker may truncate it and write other batches in its place.
    fn bytes_kept(&self) -> bool {
        !self.is_active() || self.mode != SegmentMode::ReadOnly
    }

    /// How many batches of a read-only log's active segment are remembered as checked (at most
    /// [`super::MAX_CHECKED_BATCHES`]; see `checked_batches`). For tests and diagnostics.
    pub fn remembered_checked_batches(&self) -> usize {
        lock(&self.checked_batches).len()
    }

    /// Whole batches starting at `position`, at most `max_bytes` unless the first batch alone is
    /// larger (then exactly that batch). Each batch's CRC is checked (once per object where
    /// [`LogSegment::bytes_kept`], see `crc_checked_to`): a bad first batch is an error naming the file and
    /// position, a bad later batch ends the chunk before it. `None` when `position` is at (or
    /// past) the committed end.
    pub fn read(&self, position: Position, max_bytes: usize) -> Result<Option<SegmentRead>> {
        let end = self.size();
        if position.0 >= end {
            return Ok(None);
        }
        let available = end - position.0;
        let span = available.min(max_bytes.max(HEADER_SIZE_UP_TO_MAGIC) as u64) as usize;
        let read = |len: usize| {
            read_vec_at(&self.log, len, position.0)
                .map_err(|e| Error::io(&self.log_path, "read", e))
        };
        let mut bytes = read(span)?;
        // The first batch alone may be larger than `max_bytes`: then read exactly it (the rest
        // of it, after what was read).
        if let Some(first) =
            peek_entry(&bytes).map_err(|e| corrupt_at(&self.log_path, position.0, e))?
            && first.total_size() > bytes.len()
            && first.total_size() as u64 <= available
        {
            let have = bytes.len();
            read_more_at(
                &self.log,
                &mut bytes,
                first.total_size() - have,
                position.0 + have as u64,
            )
            .map_err(|e| Error::io(&self.log_path, "read", e))?;
        }
        // Batches below this were checked by an earlier read (see `crc_checked_to`).
        let kept = self.bytes_kept();
        let checked_to = if kept { self.crc_checked_to.load(Ordering::Acquire) } else { 0 };
        let mut cut = 0usize;
        let mut next_offset = Offset(0);
        // Not kept: batches a read checked, by position (see `checked_batches`), and those
        // this read checks.
        let mut newly_checked = Vec::new();
        while let Some(rest) = bytes.get(cut..) {
            let pos = position.0 + cut as u64;
            let header = match peek_entry(rest) {
                Ok(Some(h)) => h,
                Ok(None) => break,
                Err(e) if cut == 0 => return Err(corrupt_at(&self.log_path, pos, e)),
                Err(_) => break,
            };
            let Some(entry) = rest.get(..header.total_size()) else { break };
            let checked = parse_batch_info(entry).and_then(|info| {
                let known = if kept {
                    pos + entry.len() as u64 <= checked_to
                } else {
                    lock(&self.checked_batches).get(&pos) == Some(&(info.size, info.crc))
                };
                if known {
                    return Ok(info);
                }
                verify_crc(entry)?;
                if !kept {
                    newly_checked.push((pos, (info.size, info.crc)));
                }
                Ok(info)
            });
            match checked {
                Ok(info) => {
                    cut += entry.len();
                    next_offset = info.last_offset.plus(1);
                }
                Err(e) if cut == 0 => return Err(corrupt_at(&self.log_path, pos, e)),
                Err(_) => break,
            }
        }
        if !newly_checked.is_empty() {
            let mut checked = lock(&self.checked_batches);
            if checked.len() + newly_checked.len() > super::MAX_CHECKED_BATCHES {
                checked.clear();
            }
            checked.extend(newly_checked);
        }
        if cut == 0 {
            return Ok(None);
        }
        bytes.truncate(cut);
        let next_position = Position(position.0 + cut as u64);
        if kept && position.0 <= checked_to && self.bytes_kept() {
            // Every batch from 0 to here is checked now (reads from at most the mark on).
            self.crc_checked_to.fetch_max(next_position.0, Ordering::AcqRel);
        }
        Ok(Some(SegmentRead { bytes, next_position, next_offset }))
    }

    /// The headers of the v2 batches starting at `position`, covering at most `max_bytes`
    /// unless the first batch alone is larger, without reading their records (one `pread` of
    /// about a page per batch header, or of the header alone after a batch larger than a page,
    /// see [`ChunkReader`]); a control batch comes whole, read
    /// but not CRC-checked here (its decoder checks it). Stops before the first batch that is
    /// not a whole v2 batch inside the committed end (a legacy message, a torn or damaged
    /// header, the end), which [`LogSegment::read`] then decides about. Empty at the end.
    /// Returns the heads and the position after the last one.
    pub fn read_heads(
        &self,
        position: Position,
        max_bytes: usize,
    ) -> Result<(Vec<topicfs_source::BatchHead>, Position)> {
        let end = self.size();
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut heads = Vec::new();
        let mut pos = position.0;
        while pos < end && (heads.is_empty() || pos - position.0 < max_bytes as u64) {
            let Ok(Some(batch)) = reader.batch_at(pos) else { break };
            if batch.info.magic < 2 {
                break;
            }
            let control = if batch.info.is_control {
                match reader.entry(&batch) {
                    Ok(Some(entry)) => Some(entry.to_vec()),
                    _ => break,
                }
            } else {
                None
            };
            pos = batch.end();
            // Batches larger than a scan chunk: the next header is never in this one.
            reader.read_at_least(if batch.info.size as usize > 4096 { 64 } else { usize::MAX });
            heads.push(topicfs_source::BatchHead { info: batch.info, control });
        }
        Ok((heads, Position(pos)))
    }

    /// Offset after the last batch (the log end offset when active), computed from the last
    /// index entry and a scan to the committed end on first use.
    pub fn next_offset(&self) -> Result<Offset> {
        let cached = self.next_offset.load(Ordering::Acquire);
        if cached != i64::MIN {
            return Ok(Offset(cached));
        }
        let end = self.size();
        let (_, mut pos) = self.with_offset_index(|idx| idx.lookup(Offset(i64::MAX)))?;
        if pos.0 > end {
            pos = Position(0);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut next = self.base_offset;
        let mut at = pos.0;
        while let Some(batch) = reader.batch_at(at)? {
            next = batch.info.last_offset.plus(1);
            at = batch.end();
        }
        self.next_offset.store(next.0, Ordering::Release);
        Ok(next)
    }

    /// `(max timestamp, shallow offset)` of the segment, `None` if no batch has a timestamp.
    /// Taken from memory, or on first use from the time index's last entry.
    pub fn max_timestamp_so_far(&self) -> Result<Option<(Timestamp, Offset)>> {
        let known = *lock(&self.max_timestamp);
        let value = match known {
            Some(v) => v,
            None => {
                let v = self.with_time_index(|idx| idx.last_entry())?;
                let mut guard = lock(&self.max_timestamp);
                *guard.get_or_insert(v)
            }
        };
        Ok((value.0 >= 0).then_some(value))
    }

    /// Kafka's `largestTimestamp`: the max timestamp, or the `.log` file's mtime when the
    /// segment has no timestamps (v0 data, empty time index).
    pub fn largest_timestamp(&self) -> Result<Timestamp> {
        match self.max_timestamp_so_far()? {
            Some((ts, _)) => Ok(ts),
            None => {
                let meta = self.log.metadata().map_err(|e| Error::io(&self.log_path, "stat", e))?;
                Ok(meta.modified().map(mtime_ms).unwrap_or(0))
            }
        }
    }

    /// The first record (in log order) with timestamp `>= target` and offset `>=
    /// start_offset`, as `(offset, its timestamp)` (Kafka's `findOffsetByTimestamp`): time
    /// index floor, offset index floor, skip batches whose max timestamp is older, then the
    /// first qualifying record. `None` if this segment has none.
    pub fn find_offset_by_timestamp(
        &self,
        target: Timestamp,
        start_offset: Offset,
    ) -> Result<Option<(Offset, Timestamp)>> {
        let (_, indexed_offset) = self.with_time_index(|idx| idx.lookup(target))?;
        let from = indexed_offset.max(start_offset);
        self.scan_records(
            from,
            |batch_max| batch_max >= target,
            |offset, ts| ts >= target && offset >= start_offset,
        )
    }

    /// The first record carrying the segment's max timestamp (KIP-734 / KAFKA-16310), as
    /// `(offset, timestamp)`; `None` without timestamps.
    pub fn find_max_timestamp_record(&self) -> Result<Option<(Offset, Timestamp)>> {
        let Some((max_ts, shallow_offset)) = self.max_timestamp_so_far()? else { return Ok(None) };
        self.scan_records(shallow_offset, |batch_max| batch_max == max_ts, |_, ts| ts == max_ts)
    }

    /// Scans batches from the offset-index floor of `from`: in each batch accepted by
    /// `batch_filter(max timestamp)`, returns the first record accepted by `record_filter`.
    fn scan_records(
        &self,
        from: Offset,
        batch_filter: impl Fn(Timestamp) -> bool,
        record_filter: impl Fn(Offset, Timestamp) -> bool,
    ) -> Result<Option<(Offset, Timestamp)>> {
        let end = self.size();
        let (_, mut position) = self.with_offset_index(|idx| idx.lookup(from))?;
        if position.0 > end {
            position = Position(0);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut pos = position.0;
        while let Some(batch) = reader.batch_at(pos)? {
            pos = batch.end();
            if !batch_filter(batch.info.max_timestamp) || batch.info.is_control {
                continue;
            }
            let at = batch.position.0;
            if batch.info.magic >= 2 && batch.info.compression == Compression::None {
                match first_stamp_uncompressed(&mut reader, &batch, &record_filter)? {
                    Some(stamp) => return Ok(Some((stamp.offset, stamp.timestamp))),
                    None => continue,
                }
            }
            let Some(entry) = reader.entry(&batch)? else { break };
            // Only the records' offsets and timestamps are read, up to the first match, and the
            // CRC is not checked, as in Kafka's `searchForTimestamp`: a lookup serves no record
            // bytes, and whoever reads from the answer checks the batches it gets.
            let decoded =
                decode_batch_unverified(entry).map_err(|e| corrupt_at(&self.log_path, at, e))?;
            for stamp in decoded.record_stamps() {
                let stamp = stamp.map_err(|e| corrupt_at(&self.log_path, at, e))?;
                if record_filter(stamp.offset, stamp.timestamp) {
                    return Ok(Some((stamp.offset, stamp.timestamp)));
                }
            }
        }
        Ok(None)
    }
}

/// Bytes of an uncompressed batch's records read at once by [`first_stamp_uncompressed`]: a
/// few pages, so a lookup that stops early in a large batch copies little more than it needs
/// while a batch read to its end costs a handful of system calls.
const STAMP_WINDOW: usize = 16 * 1024;

/// The first record of the uncompressed v2 `batch` accepted by `record_filter`, reading the
/// batch in [`STAMP_WINDOW`]s only up to that record, with the rules of
/// [`topicfs_format::Batch::record_stamps`] up to there (each record's framing, then the record
/// count and no trailing bytes if the whole batch is read). `None` if no record qualifies or the
/// batch is cut off by the end of the file (a concurrent truncation).
fn first_stamp_uncompressed(
    reader: &mut ChunkReader<'_>,
    batch: &BatchLocation,
    record_filter: &impl Fn(Offset, Timestamp) -> bool,
) -> Result<Option<RecordStamp>> {
    let path = reader.path();
    let batch_end = batch.end();
    let mut pos = batch.position.0.saturating_add(RECORD_BATCH_OVERHEAD as u64);
    let mut left = batch.info.records_count;
    let mut window = STAMP_WINDOW;
    // The first window is what the header read already brought in, if anything.
    let mut first = reader.buffered_from(pos);
    while left > 0 {
        let want = if first > 0 { std::mem::take(&mut first) } else { window };
        let len = (want as u64).min(batch_end.saturating_sub(pos)) as usize;
        let at_end = pos.saturating_add(len as u64) >= batch_end;
        let Some(bytes) = reader.get(pos, len)? else { return Ok(None) };
        let mut from = 0usize;
        while left > 0 {
            let rest = bytes.get(from..).unwrap_or_default();
            match peek_record_stamp(&batch.info, rest, at_end)
                .map_err(|e| corrupt_at(path, pos + from as u64, e))?
            {
                StampPeek::Stamp { stamp, len } => {
                    if record_filter(stamp.offset, stamp.timestamp) {
                        return Ok(Some(stamp));
                    }
                    from += len;
                    left -= 1;
                }
                StampPeek::NeedMore { need } => {
                    // A record longer than the window: read from its start with room for it.
                    if from == 0 {
                        window = window.max(need);
                    }
                    break;
                }
            }
        }
        pos = pos.saturating_add(from as u64);
    }
    check_no_trailing_records(batch_end.saturating_sub(pos) as usize)
        .map_err(|e| corrupt_at(path, pos, e))?;
    Ok(None)
}
