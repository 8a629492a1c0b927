//! The background executor's promises on the filesystem logic, without a kernel: a deferred
//! `st_size` becomes exact within a bounded time however steadily other partitions are read,
//! and a partition whose source stalls delays no other partition's open.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Result;
use topicfs::format::Offset;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::source::{
    AppendInfo, Committed, ConfigChange, ConfigEntry, KeyIndex, Known, OffsetQuery,
    PartitionSource, PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
    SpaceStats, SpanStore, TopicSource,
};
use topicfs::storage::{LogConfig, LogDirs};
use topicfs::view::spec::Format;
use topicfs::view::stream::SIZED_AT_ONCE;

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };

/// What the tests wait at most for something that takes milliseconds.
const BOUND: Duration = Duration::from_secs(30);

fn append(fs: &TopicFs, path: &str, data: &[u8]) {
    let fh = fs.open(fs_fixture::ino(fs, path).unwrap(), WRITE).unwrap().fh;
    fs.write(fh, data, None).unwrap();
    fs.flush(fh, None).unwrap();
    fs.release(fh).unwrap();
}

fn size(fs: &TopicFs, path: &str) -> u64 {
    fs.getattr(fs_fixture::ino(fs, path).unwrap(), None).unwrap().attr.size
}

/// Reads `path` whole, in reads of 128 KiB (enough for read-ahead to start).
fn read_whole(fs: &TopicFs, path: &str) -> usize {
    let fh = fs.open(fs_fixture::ino(fs, path).unwrap(), READ).unwrap().fh;
    let bytes = fs_fixture::read_to_end(fs, fh, 128 << 10).unwrap();
    fs.release(fh).unwrap();
    bytes.len()
}

#[test]
fn a_deferred_stat_becomes_exact_while_another_partition_is_read_without_pause() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), LogConfig::default());
    log_dir.create_topic("t", 2).unwrap();
    let fs = FsFixture::local(&log_dir).build();
    // About 2 MiB of log in t/0: more than a request sizes itself (1 MiB), so its first stat
    // is deferred; t/1 is what a reader keeps reading meanwhile.
    let line = format!("{:0>99}\n", 7);
    let chunk: String = std::iter::repeat_n(line.as_str(), 1_000).collect();
    for _ in 0..20 {
        append(&fs, "t/0/append", chunk.as_bytes());
    }
    for _ in 0..5 {
        append(&fs, "t/1/append", chunk.as_bytes());
    }
    let total = 20 * chunk.len() as u64;
    let stop = AtomicBool::new(false);
    let rounds = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(read_whole(&fs, "t/1/by-offset/0"), 5 * chunk.len());
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        });
        // Whatever fails below, the reader stops (else the scope would wait for it forever).
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        let started = Instant::now();
        while rounds.load(Ordering::Relaxed) == 0 {
            assert!(started.elapsed() < BOUND, "the reader never read t/1");
            std::thread::yield_now();
        }
        // The first stat is the lookup's own (nothing is queued before it, so it is
        // deterministic): deferred. Its step may then finish before any later stat.
        let dir = fs_fixture::ino(&fs, "t/0/by-offset").unwrap();
        let first = fs.lookup(dir, std::ffi::OsStr::new("0")).unwrap();
        assert_eq!(first.attr.size, 0, "deferred at the first stat");
        let asked = Instant::now();
        let mut sizes = 1;
        let exact = loop {
            let now = size(&fs, "t/0/by-offset/0");
            if now != 0 || asked.elapsed() > BOUND {
                break now;
            }
            sizes += 1;
            std::thread::sleep(Duration::from_millis(10));
        };
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        assert_eq!(
            exact,
            total,
            "exact within {BOUND:?} ({sizes} stats, {} reads of t/1 meanwhile)",
            rounds.load(Ordering::Relaxed)
        );
    });
}

/// A source over a log dir whose partition `t-0` calls its hook at every `seek` and `read`
/// ([`Gate`]: stalls while `stall` is set, reporting each stall on `stalled`, until the gate
/// is opened; [`Watch`]: counts and stalls reads).
struct Stalling {
    inner: Arc<LogDirs>,
    gate: Arc<dyn Hook>,
}

/// What [`Stalling`] calls on partition `t-0`.
trait Hook: Send + Sync {
    /// Before a `seek` or `read`.
    fn before(&self);
    /// After a `read` that returned `bytes` bytes.
    fn read(&self, _bytes: usize) {}
}

impl Hook for Gate {
    fn before(&self) {
        self.wait();
    }
}

struct Gate {
    stall: AtomicBool,
    stalled: Mutex<Option<mpsc::Sender<()>>>,
    open: Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        if !self.stall.load(Ordering::SeqCst) {
            return;
        }
        if let Some(tx) = self.stalled.lock().unwrap().as_ref() {
            let _ = tx.send(());
        }
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

struct StallingPartition {
    inner: Arc<dyn PartitionSource>,
    gate: Option<Arc<dyn Hook>>,
}

impl StallingPartition {
    fn stall(&self) {
        if let Some(gate) = &self.gate {
            gate.before();
        }
    }
}

impl TopicSource for Stalling {
    fn topics(&self) -> Result<Vec<String>> {
        TopicSource::topics(self.inner.as_ref())
    }
    fn partitions(&self, topic: &str) -> Result<Vec<u32>> {
        TopicSource::partitions(self.inner.as_ref(), topic)
    }
    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>> {
        let gate = (topic == "t" && partition == 0).then(|| Arc::clone(&self.gate));
        Ok(Arc::new(StallingPartition {
            inner: TopicSource::partition(self.inner.as_ref(), topic, partition)?,
            gate,
        }))
    }
    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        TopicSource::create_topic(self.inner.as_ref(), topic, partitions)
    }
    fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        TopicSource::create_partition(self.inner.as_ref(), topic, partition)
    }
    fn is_read_only(&self) -> bool {
        TopicSource::is_read_only(self.inner.as_ref())
    }
    fn shutdown(&self) -> Result<()> {
        TopicSource::shutdown(self.inner.as_ref())
    }
    fn space(&self) -> Result<SpaceStats> {
        self.inner.space()
    }
    fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        self.inner.topic_config(topic)
    }
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.inner.alter_topic_config(topic, changes)
    }
    fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.inner.check_topic_config(topic, changes)
    }
    fn check_value_prefix(&self, name: &str, value: &str) -> Result<()> {
        self.inner.check_value_prefix(name, value)
    }
    fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>> {
        self.inner.max_message_bytes(topic)
    }

    fn offsets_for(
        &self,
        topic: &str,
        query: topicfs::source::OffsetQuery,
    ) -> Result<Vec<(u32, topicfs::format::Offset)>> {
        self.inner.offsets_for(topic, query)
    }

    fn state_bounds(&self, topic: &str) -> Result<()> {
        self.inner.state_bounds(topic)
    }

    fn prefetch(&self, topic: &str, reads: &[(u32, topicfs::source::ReadCursor)]) -> Result<()> {
        self.inner.prefetch(topic, reads)
    }

    fn log_dirs(&self) -> topicfs::source::LogDirsReport {
        self.inner.log_dirs()
    }
}

impl PartitionSource for StallingPartition {
    fn topic(&self) -> &str {
        self.inner.topic()
    }
    fn partition(&self) -> u32 {
        self.inner.partition()
    }
    fn summary(&self) -> Result<PartitionSummary> {
        self.inner.summary()
    }
    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        self.inner.offset_for(query)
    }
    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        self.stall();
        self.inner.seek(target)
    }
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer> {
        self.stall();
        let answer = self.inner.read(cursor, max_bytes, mode)?;
        if let (Some(hook), ReadAnswer::Batches(chunk)) = (&self.gate, &answer) {
            hook.read(chunk.bytes.len());
        }
        Ok(answer)
    }
    fn known(&self) -> Known {
        self.inner.known()
    }
    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.inner.holds(cursor)
    }
    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        self.inner.append(records)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        self.inner.segment_files()
    }
    fn key_index(&self) -> Option<&dyn KeyIndex> {
        self.inner.key_index()
    }
    fn committed(&self) -> Committed<'_> {
        self.inner.committed()
    }
    fn span_store(&self) -> Option<&dyn SpanStore> {
        self.inner.span_store()
    }
}

#[test]
fn a_stalled_read_of_one_partition_does_not_delay_opens_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), LogConfig::default());
    log_dir.create_topic("t", 2).unwrap();
    let gate = Arc::new(Gate {
        stall: AtomicBool::new(false),
        stalled: Mutex::new(None),
        open: Mutex::new(false),
        opened: std::sync::Condvar::new(),
    });
    let source = Stalling { inner: Arc::clone(&log_dir), gate: Arc::clone(&gate) as Arc<dyn Hook> };
    // read_uncommitted: resolving a name asks only the partition's bounds (no transaction
    // scan), so A's source is first asked to read where its render index is made.
    let fs = FsFixture::over(Arc::new(source))
        .partitions_per_topic(2)
        .build()
        .with_isolation(topicfs::view::txn::Isolation::ReadUncommitted);
    append(&fs, "t/0/append", b"zero\n");
    append(&fs, "t/1/append", b"one\n");
    // B's name is known; A's render index does not exist yet (its lookup makes it).
    let b = fs_fixture::ino(&fs, "t/1/by-offset/0").unwrap();
    let (stalled_tx, stalled) = mpsc::channel();
    *gate.stalled.lock().unwrap() = Some(stalled_tx);
    gate.stall.store(true, Ordering::SeqCst);
    std::thread::scope(|scope| {
        // Partition A's source stalls (a broker that does not answer) inside its lookup and
        // open (making its render index: a seek).
        let stuck = scope.spawn(|| {
            let a = fs_fixture::ino(&fs, "t/0/by-offset/0").unwrap();
            let fh = fs.open(a, READ).unwrap().fh;
            let bytes = fs.read(fh, 0, 4096).unwrap().to_vec();
            fs.release(fh).unwrap();
            bytes
        });
        stalled.recv_timeout(BOUND).expect("partition A's open reached its source");
        // Meanwhile partition B opens and reads.
        let (done_tx, done) = mpsc::channel();
        let fs = &fs;
        let other = scope.spawn(move || {
            let fh = fs.open(b, READ).unwrap().fh;
            let bytes = fs.read(fh, 0, 4096).unwrap().to_vec();
            fs.release(fh).unwrap();
            let _ = done_tx.send(bytes);
        });
        let got = done.recv_timeout(BOUND);
        gate.release();
        assert_eq!(got.expect("partition B's open waited for partition A's source"), b"one\n");
        other.join().unwrap();
        assert_eq!(stuck.join().unwrap(), b"zero\n");
    });
}

thread_local! {
    /// Set on the threads of a test's requests: reads on other threads are the background's.
    static REQUEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A [`Hook`] counting the bytes read from `t-0` by requests and by the background while a
/// request waits for or holds the partition's shared render index in `values` (the
/// filesystem's [`TopicFs::index_requests`]), and stalling the background's `stall_at`-th read
/// until opened.
#[derive(Default)]
struct Watch {
    fs: std::sync::OnceLock<std::sync::Weak<TopicFs>>,
    request_bytes: AtomicUsize,
    background_bytes_while_requested: AtomicUsize,
    background_reads: AtomicUsize,
    stall_at: AtomicUsize,
    stalled: Mutex<Option<mpsc::Sender<()>>>,
    gate: Gate,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            stall: AtomicBool::new(true),
            stalled: Mutex::new(None),
            open: Mutex::new(false),
            opened: std::sync::Condvar::new(),
        }
    }
}

impl Watch {
    fn requested(&self) -> bool {
        let fs = self.fs.get().and_then(std::sync::Weak::upgrade);
        fs.is_some_and(|fs| fs.index_requests("t", 0, Format::Values) > 0)
    }
}

impl Hook for Watch {
    fn before(&self) {
        if REQUEST.get() {
            return;
        }
        let n = self.background_reads.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.stall_at.load(Ordering::SeqCst) {
            if let Some(tx) = self.stalled.lock().unwrap().as_ref() {
                let _ = tx.send(());
            }
            self.gate.wait();
        }
    }

    fn read(&self, bytes: usize) {
        if REQUEST.get() {
            self.request_bytes.fetch_add(bytes, Ordering::SeqCst);
        } else if self.requested() {
            self.background_bytes_while_requested.fetch_add(bytes, Ordering::SeqCst);
        }
    }
}

#[test]
fn a_stat_waits_for_no_more_than_a_batch_of_background_sizing_of_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), LogConfig::default());
    log_dir.create_topic("t", 1).unwrap();
    let watch = Arc::new(Watch::default());
    let source =
        Stalling { inner: Arc::clone(&log_dir), gate: Arc::clone(&watch) as Arc<dyn Hook> };
    // read_uncommitted: resolving a name reads nothing but what it renders (no transaction
    // scan).
    let fs = Arc::new(
        FsFixture::over(Arc::new(source))
            .build()
            .with_isolation(topicfs::view::txn::Isolation::ReadUncommitted),
    );
    watch.fs.set(Arc::downgrade(&fs)).unwrap();
    // About 8 MiB of log in batches of 50 KB (each read of the background reads one): the
    // first stat sizes 1 MiB itself and leaves the rest to a step whose first part renders
    // 4 MiB (SIZING_STEP) under the index's lock.
    let line = format!("{:0>99}\n", 7);
    let chunk: String = std::iter::repeat_n(line.as_str(), 500).collect();
    REQUEST.set(true);
    for _ in 0..160 {
        append(&fs, "t/0/append", chunk.as_bytes());
    }
    let total = 160 * chunk.len() as u64;
    // The step's first read is asked before it locks the index; the third is inside its
    // first part, with the lock held.
    let (stalled_tx, stalled) = mpsc::channel();
    *watch.stalled.lock().unwrap() = Some(stalled_tx);
    watch.stall_at.store(3, Ordering::SeqCst);
    let dir = fs_fixture::ino(&fs, "t/0/by-offset").unwrap();
    let first = fs.lookup(dir, std::ffi::OsStr::new("0")).unwrap();
    assert_eq!(first.attr.size, 0, "deferred at the first stat");
    stalled.recv_timeout(BOUND).expect("the sizing step read the log under the index's lock");
    // What the first stat read itself (its own 1 MiB) is not the next one's.
    watch.request_bytes.store(0, Ordering::SeqCst);
    std::thread::scope(|scope| {
        // Whatever fails below, the step goes on (else the scope would wait for it forever).
        struct OpenOnDrop<'a>(&'a Gate);
        impl Drop for OpenOnDrop<'_> {
            fn drop(&mut self) {
                self.0.release();
            }
        }
        let _open = OpenOnDrop(&watch.gate);
        // A stat of another stream of the partition, in the same format: its lookup and
        // getattr lock the index the step is sizing.
        let request = scope.spawn(|| {
            REQUEST.set(true);
            size(&fs, "t/0/by-offset/100")
        });
        let asked = Instant::now();
        while fs.index_requests("t", 0, Format::Values) == 0 {
            assert!(asked.elapsed() < BOUND, "the stat never asked for the index");
            std::thread::yield_now();
        }
        // The step goes on while the stat waits for the index.
        watch.gate.release();
        let shown = request.join().unwrap();
        let own = watch.request_bytes.load(Ordering::SeqCst);
        let waited = watch.background_bytes_while_requested.load(Ordering::SeqCst);
        assert!(
            own + waited <= SIZED_AT_ONCE as usize,
            "the stat read {own} bytes itself and waited for {waited} bytes of background \
             sizing: more than its own budget ({SIZED_AT_ONCE} bytes)"
        );
        assert!(shown == 0 || shown == total - 100 * line.len() as u64, "size {shown}");
    });
    // Nothing was lost: the sizing goes on to the exact size.
    assert!(fs.wait_for_sizing_steps(BOUND), "the sizing step ended");
    assert_eq!(size(&fs, "t/0/by-offset/0"), total);
}
