//! Opening a segment: creating a new active one, opening an existing one without reading its
//! `.log` (KIP-263) or a finished compaction's `.swap` files, and loading its indexes lazily on
//! first use (sealed ones mapped read-only, active ones read-write and preallocated, read-only
//! mode's copied into memory, or rebuilt in memory when their file fails its sanity check).

use super::*;

/// An index file a read-only segment serves rebuilt in memory because the file on disk failed
/// its sanity check (the file itself is left as it is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexRepair {
    /// The time index (`false`: the offset index).
    pub time: bool,
    /// Byte position in the index file of the first entry found wrong.
    pub position: u64,
    /// What is wrong there.
    pub what: String,
}

impl LogSegment {
    /// Creates a new, empty active segment (writable mode); existing files with this base offset
    /// are replaced (KAFKA-6388).
    pub fn create(
        dir: &Path,
        base_offset: Offset,
        max_index_size: u32,
        index_interval_bytes: u32,
    ) -> Result<LogSegment> {
        for suffix in [".log", ".index", ".timeindex", ".txnindex"] {
            let path = segment_file_path(dir, base_offset, suffix);
            match std::fs::remove_file(&path) {
                Ok(()) => log::warn!("replaced existing segment file {}", path.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, "remove", e)),
            }
        }
        let log_path = segment_file_path(dir, base_offset, ".log");
        let log = open_regular(
            &log_path,
            OpenOptions::new().read(true).write(true).create_new(true),
            "create",
        )?;
        let segment = LogSegment::new(
            dir,
            base_offset,
            log_path,
            log,
            SegmentMode::Writable,
            max_index_size,
            index_interval_bytes,
            0,
            true,
        );
        segment.next_offset.store(base_offset.0, Ordering::Release);
        *lock(&segment.max_timestamp) = Some((NO_TIMESTAMP, base_offset));
        lock(&segment.writer).rolling_based_timestamp = None;
        // Create the index files now (Kafka creates them at first access, i.e. first append).
        segment.with_offset_index(|_| ())?;
        segment.with_time_index(|_| ())?;
        Ok(segment)
    }

    /// Opens an existing segment without reading its `.log` (KIP-263): only its size is taken.
    pub fn open(
        dir: &Path,
        base_offset: Offset,
        mode: SegmentMode,
        max_index_size: u32,
        index_interval_bytes: u32,
        active: bool,
    ) -> Result<LogSegment> {
        let log_path = segment_file_path(dir, base_offset, ".log");
        let log = open_regular(
            &log_path,
            OpenOptions::new().read(true).write(mode == SegmentMode::Writable),
            "open",
        )?;
        LogSegment::opened(
            dir,
            base_offset,
            log_path,
            log,
            mode,
            max_index_size,
            index_interval_bytes,
            active,
        )
    }

    /// Opens the `.swap` files of a finished compaction (`<base>.log.swap`, `.index.swap`, ...)
    /// as a sealed read-only segment, without renaming anything (Kafka's loader would rename
    /// them; a read-only mount serves them under their final names instead).
    pub fn open_swap(
        dir: &Path,
        base_offset: Offset,
        max_index_size: u32,
        index_interval_bytes: u32,
    ) -> Result<LogSegment> {
        let log_path = segment_file_path(dir, base_offset, ".log.swap");
        let log = open_read(&log_path)?;
        let mut segment = LogSegment::opened(
            dir,
            base_offset,
            log_path,
            log,
            SegmentMode::ReadOnly,
            max_index_size,
            index_interval_bytes,
            false,
        )?;
        segment.state_suffix = ".swap";
        Ok(segment)
    }

    #[allow(clippy::too_many_arguments)]
    fn opened(
        dir: &Path,
        base_offset: Offset,
        log_path: PathBuf,
        log: File,
        mode: SegmentMode,
        max_index_size: u32,
        index_interval_bytes: u32,
        active: bool,
    ) -> Result<LogSegment> {
        let meta = log.metadata().map_err(|e| Error::io(&log_path, "stat", e))?;
        let segment = LogSegment::new(
            dir,
            base_offset,
            log_path,
            log,
            mode,
            max_index_size,
            index_interval_bytes,
            meta.len(),
            active,
        );
        if let Ok(t) = meta.modified() {
            *lock(&segment.last_modified) = t;
        }
        Ok(segment)
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        dir: &Path,
        base_offset: Offset,
        log_path: PathBuf,
        log: File,
        mode: SegmentMode,
        max_index_size: u32,
        index_interval_bytes: u32,
        size: u64,
        active: bool,
    ) -> LogSegment {
        LogSegment {
            base_offset,
            dir: dir.to_path_buf(),
            log_path,
            state_suffix: "",
            log,
            mode,
            max_index_size,
            index_interval_bytes,
            active: AtomicBool::new(active),
            size: AtomicU64::new(size),
            next_offset: AtomicI64::new(i64::MIN),
            offset_index: RwLock::new(None),
            time_index: RwLock::new(None),
            max_timestamp: Mutex::new(None),
            writer: Mutex::new(WriterState {
                bytes_since_last_index_entry: 0,
                rolling_based_timestamp: None,
                created: Instant::now(),
            }),
            last_modified: Mutex::new(SystemTime::now()),
            index_repairs: Mutex::new(Vec::new()),
            sealed_txn_index_size: Mutex::new(None),
            generation: std::sync::atomic::AtomicU32::new(0),
            crc_checked_to: AtomicU64::new(0),
            checked_batches: Mutex::new(std::collections::HashMap::new()),
        }
    }

    pub(super) fn load_offset_index(&self) -> Result<OffsetIndex> {
        let path = self.file_path(".index");
        match self.mode {
            SegmentMode::Writable if self.is_active() => {
                OffsetIndex::open_writable(&path, self.base_offset, self.max_index_size, true)
            }
            SegmentMode::Writable => OffsetIndex::open_sealed(&path, self.base_offset),
            SegmentMode::ReadOnly => self.checked_or_rebuilt(
                false,
                OffsetIndex::load_read_only(&path, self.base_offset, self.max_index_size),
                OffsetIndex::sanity_check,
                |(offset_index, _)| offset_index,
            ),
        }
    }

    pub(super) fn load_time_index(&self) -> Result<TimeIndex> {
        let path = self.file_path(".timeindex");
        match self.mode {
            SegmentMode::Writable if self.is_active() => {
                TimeIndex::open_writable(&path, self.base_offset, self.max_index_size, true)
            }
            SegmentMode::Writable => TimeIndex::open_sealed(&path, self.base_offset),
            SegmentMode::ReadOnly => self.checked_or_rebuilt(
                true,
                TimeIndex::load_read_only(&path, self.base_offset, self.max_index_size),
                TimeIndex::sanity_check,
                |(_, time_index)| time_index,
            ),
        }
    }

    /// A read-only mount's index as loaded when it is a regular file that passes its sanity
    /// check; otherwise (refused file kind, failed check) noted as repaired and rebuilt in
    /// memory from the `.log`, the broker's file left untouched. `time` names the time index.
    fn checked_or_rebuilt<I>(
        &self,
        time: bool,
        loaded: Result<I>,
        sanity_check: impl Fn(&I) -> Result<()>,
        pick: impl FnOnce((OffsetIndex, TimeIndex)) -> I,
    ) -> Result<I> {
        let problem = match loaded {
            Ok(index) => match sanity_check(&index) {
                Ok(()) => return Ok(index),
                Err(e) => {
                    let which = if time { "time" } else { "offset" };
                    log::warn!("{e}; rebuilding the {which} index in memory");
                    e
                }
            },
            Err(e @ Error::WrongFileType { .. }) => e,
            Err(e) => return Err(e),
        };
        self.note_repair(time, problem);
        Ok(pick(self.rebuild_in_memory()?))
    }

    fn note_repair(&self, time: bool, e: Error) {
        let (position, what) = match e {
            Error::Corrupt { position, what, .. } => (position, what),
            other => (0, other.to_string()),
        };
        let mut repairs = lock(&self.index_repairs);
        repairs.retain(|r| r.time != time);
        repairs.push(IndexRepair { time, position, what });
    }

    /// The indexes of this segment served rebuilt in memory, and why (loading each index
    /// first, so that the answer is final).
    pub fn index_repairs(&self) -> Result<Vec<IndexRepair>> {
        self.with_offset_index(|_| ())?;
        self.with_time_index(|_| ())?;
        Ok(lock(&self.index_repairs).clone())
    }

    /// Builds both indexes in memory from the `.log` (read-only mode), without changing files.
    fn rebuild_in_memory(&self) -> Result<(OffsetIndex, TimeIndex)> {
        let mut offset_index = OffsetIndex::in_memory(
            &self.file_path(".index"),
            self.base_offset,
            self.max_index_size,
        );
        let mut time_index = TimeIndex::in_memory(
            &self.file_path(".timeindex"),
            self.base_offset,
            self.max_index_size,
        );
        self.walk_and_index(&mut offset_index, &mut time_index, self.size())?;
        Ok((offset_index, time_index))
    }
}
