//! The entry format: a segment's identity and fingerprint, and the bytes of an entry file
//! (encoding, and the checks of the module docs in order).

use super::*;

const MAGIC: &[u8; 8] = b"TFSCACHE";
/// Bytes at the start and at the end of a segment that its fingerprint covers.
const FINGERPRINT_HEAD: u64 = 512;
const FINGERPRINT_TAIL: u64 = 4096;

/// Which sealed segment an entry describes, and what proves it is still the same bytes.
///
/// The *key* (data dir, topic, partition, base offset) names the segment; the rest proves that
/// the file is unchanged since the entry was written. A broker that deletes a segment and writes
/// a new one with the same base offset (compaction's `.cleaned` → `.swap` → `.log`, a
/// replacement after truncation) changes the inode and almost always the size and mtime; the
/// fingerprint (CRC-32C of the first 512 and last 4096 bytes) catches a rewrite in place that
/// kept all three.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentIdentity {
    /// The data dir, canonical (so two spellings of one directory share entries).
    pub data_dir: PathBuf,
    pub topic: String,
    pub partition: u32,
    pub base_offset: Offset,
    /// The `.log` file's length in bytes.
    pub size: u64,
    /// The `.log` file's mtime, nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub inode: u64,
    pub device: u64,
    /// CRC-32C of the file's first 512 and last 4096 bytes (see [`SegmentIdentity::of_file`]).
    pub fingerprint: u32,
}

impl SegmentIdentity {
    /// The identity of the open `.log` file `file` of segment `base_offset` of
    /// `topic`-`partition` in `data_dir` (canonical): one `fstat` and two small `pread`s.
    pub fn of_file(
        data_dir: &Path,
        topic: &str,
        partition: u32,
        base_offset: Offset,
        file: &File,
    ) -> io::Result<SegmentIdentity> {
        use std::os::unix::fs::FileExt;
        let meta = file.metadata()?;
        let size = meta.len();
        let mut crc = 0u32;
        let mut buf = vec![0u8; (FINGERPRINT_HEAD + FINGERPRINT_TAIL) as usize];
        let head = size.min(FINGERPRINT_HEAD) as usize;
        let head_buf = buf.get_mut(..head).unwrap_or_default();
        file.read_exact_at(head_buf, 0)?;
        crc = crc32c::crc32c_append(crc, head_buf);
        let tail = size.min(FINGERPRINT_TAIL) as usize;
        let tail_buf = buf.get_mut(..tail).unwrap_or_default();
        file.read_exact_at(tail_buf, size - tail as u64)?;
        crc = crc32c::crc32c_append(crc, tail_buf);
        Ok(SegmentIdentity {
            data_dir: data_dir.to_path_buf(),
            topic: topic.to_string(),
            partition,
            base_offset,
            size,
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()),
            inode: meta.ino(),
            device: meta.dev(),
            fingerprint: crc,
        })
    }

    /// The identity of the first `prefix` bytes of the open `.log` file `file` of the *active*
    /// segment `base_offset`: `None` when the file is now shorter than `prefix` (truncated
    /// since). Bytes of an active segment below a batch boundary it has passed never change
    /// while the file exists (appends go after them); what proves them unchanged is the inode,
    /// the device and the fingerprint of the prefix's first 512 and last 4096 bytes. The size
    /// recorded is `prefix` and the mtime 0: the active file's own size and mtime move with
    /// every append, which leaves the prefix as it was.
    pub fn of_prefix(
        data_dir: &Path,
        topic: &str,
        partition: u32,
        base_offset: Offset,
        file: &File,
        prefix: u64,
    ) -> io::Result<Option<SegmentIdentity>> {
        use std::os::unix::fs::FileExt;
        let meta = file.metadata()?;
        if meta.len() < prefix {
            return Ok(None);
        }
        let mut crc = 0u32;
        let mut buf = vec![0u8; (FINGERPRINT_HEAD + FINGERPRINT_TAIL) as usize];
        let head = prefix.min(FINGERPRINT_HEAD) as usize;
        let head_buf = buf.get_mut(..head).unwrap_or_default();
        file.read_exact_at(head_buf, 0)?;
        crc = crc32c::crc32c_append(crc, head_buf);
        let tail = prefix.min(FINGERPRINT_TAIL) as usize;
        let tail_buf = buf.get_mut(..tail).unwrap_or_default();
        file.read_exact_at(tail_buf, prefix - tail as u64)?;
        crc = crc32c::crc32c_append(crc, tail_buf);
        Ok(Some(SegmentIdentity {
            data_dir: data_dir.to_path_buf(),
            topic: topic.to_string(),
            partition,
            base_offset,
            size: prefix,
            mtime_ns: 0,
            inode: meta.ino(),
            device: meta.dev(),
            fingerprint: crc,
        }))
    }

    /// The entry's file name for `kind`.
    pub(super) fn file_name(&self, kind: EntryKind) -> String {
        let mut h = Fnv::new();
        h.write(self.data_dir.as_os_str().as_encoded_bytes());
        h.write(&[0]);
        h.write(self.topic.as_bytes());
        h.write(&[0]);
        h.write(&self.partition.to_be_bytes());
        format!("{:016x}-{:020}.{}", h.0, self.base_offset.0, kind.extension())
    }

    fn encode_key(&self, out: &mut Vec<u8>) {
        put_str(out, self.data_dir.as_os_str().as_encoded_bytes());
        put_str(out, self.topic.as_bytes());
        out.extend_from_slice(&self.partition.to_be_bytes());
        out.extend_from_slice(&self.base_offset.0.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.mtime_ns.to_be_bytes());
        out.extend_from_slice(&self.inode.to_be_bytes());
        out.extend_from_slice(&self.device.to_be_bytes());
        out.extend_from_slice(&self.fingerprint.to_be_bytes());
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    let len = u16::try_from(s.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.get(..usize::from(len)).unwrap_or(s));
}

/// FNV-1a, 64 bits: entry names must not change between builds (std's hasher may).
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Why an entry was not used (the log line says which).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// Not a topicfs cache file, or one of another format version or kind.
    Foreign(String),
    /// A topicfs cache file whose bytes fail a check (CRC, length).
    Damaged(String),
    /// The entry of another segment (a colliding name, or a file copied from elsewhere).
    OtherSegment,
    /// The segment changed since the entry was written (deleted and replaced, compacted).
    Stale(&'static str),
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejected::Foreign(why) => write!(f, "not an entry of this cache format ({why})"),
            Rejected::Damaged(why) => write!(f, "damaged ({why})"),
            Rejected::OtherSegment => write!(f, "an entry of another segment"),
            Rejected::Stale(what) => write!(f, "stale: the segment's {what} changed"),
        }
    }
}

/// Encodes an entry file's bytes.
pub(super) fn encode(id: &SegmentIdentity, kind: EntryKind, payload: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(128);
    id.encode_key(&mut key);
    let mut out = Vec::with_capacity(64 + key.len() + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.push(kind.tag());
    out.push(0);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(&key);
    out.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A bounds-checked reader over an entry's bytes.
struct Cur<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// Checks an entry file's bytes against `id` and `kind` (rules in the module docs, in order)
/// and returns its payload.
pub(super) fn decode<'a>(
    bytes: &'a [u8],
    id: &SegmentIdentity,
    kind: EntryKind,
) -> Result<&'a [u8], Rejected> {
    let short = || Rejected::Damaged("shorter than its header".into());
    let mut c = Cur { bytes, at: 0 };
    if c.take(MAGIC.len()) != Some(MAGIC.as_slice()) {
        return Err(Rejected::Foreign("no TFSCACHE magic".into()));
    }
    let version = c.u16().ok_or_else(short)?;
    if version != FORMAT_VERSION {
        return Err(Rejected::Foreign(format!(
            "format version {version}, this topicfs reads {FORMAT_VERSION}"
        )));
    }
    let tag = c.take(2).ok_or_else(short)?;
    if tag.first() != Some(&kind.tag()) {
        return Err(Rejected::Foreign(format!(
            "kind {}, expected {}",
            tag.first().copied().unwrap_or(0),
            kind.tag()
        )));
    }
    let key_len = c.u32().ok_or_else(short)? as usize;
    let key = c.take(key_len).ok_or_else(short)?;
    let payload_len = c.u64().ok_or_else(short)?;
    let payload_crc = c.u32().ok_or_else(short)?;
    let header_end = c.at;
    let header_crc = c.u32().ok_or_else(short)?;
    let header = bytes.get(..header_end).ok_or_else(short)?;
    if crc32c::crc32c(header) != header_crc {
        return Err(Rejected::Damaged("header CRC mismatch".into()));
    }
    let mut k = Cur { bytes: key, at: 0 };
    let bad_key = || Rejected::Damaged("key shorter than stated".into());
    let data_dir = k.str().ok_or_else(bad_key)?;
    let topic = k.str().ok_or_else(bad_key)?;
    let partition = k.u32().ok_or_else(bad_key)?;
    let base = k.u64().ok_or_else(bad_key)? as i64;
    if data_dir != id.data_dir.as_os_str().as_encoded_bytes()
        || topic != id.topic.as_bytes()
        || partition != id.partition
        || base != id.base_offset.0
    {
        return Err(Rejected::OtherSegment);
    }
    let size = k.u64().ok_or_else(bad_key)?;
    let mtime = k.u64().ok_or_else(bad_key)? as i64;
    let inode = k.u64().ok_or_else(bad_key)?;
    let device = k.u64().ok_or_else(bad_key)?;
    let fingerprint = k.u32().ok_or_else(bad_key)?;
    if size != id.size {
        return Err(Rejected::Stale("size"));
    }
    if inode != id.inode || device != id.device {
        return Err(Rejected::Stale("inode"));
    }
    if mtime != id.mtime_ns {
        return Err(Rejected::Stale("mtime"));
    }
    if fingerprint != id.fingerprint {
        return Err(Rejected::Stale("bytes (fingerprint)"));
    }
    let payload = &bytes[c.at..];
    if payload.len() as u64 != payload_len {
        return Err(Rejected::Damaged(format!(
            "payload of {} bytes, header says {payload_len}",
            payload.len()
        )));
    }
    if crc32c::crc32c(payload) != payload_crc {
        return Err(Rejected::Damaged("payload CRC mismatch".into()));
    }
    Ok(payload)
}

/// The size field of an entry's key (a prefix entry's prefix length), unchecked: `None` when
/// the bytes are too short to hold it.
pub(super) fn stored_size(bytes: &[u8]) -> Option<u64> {
    let mut c = Cur { bytes, at: 0 };
    c.take(MAGIC.len() + 4)?;
    c.u32()?;
    c.str()?;
    c.str()?;
    c.take(4 + 8)?;
    c.u64()
}
