//! A broker's `log.dirs` entry mounted read-only: the corpus in `tests/fixtures/broker-v1`
//! (written by kafka-python's record builders, not by topicfs; see its README) through a real
//! `topicfs mount --read-only`.
//!
//! * the data dir is untouched: every name, size, mode, mtime, ctime and byte is the same after
//!   unmount as before mount, and no lock is taken on `.lock` while mounted;
//! * every record reads back as the generator recorded it (offset, timestamp type and value, key,
//!   value, headers), control batches never, aborted records only with
//!   `--isolation read_uncommitted`;
//! * `-delete`, `-future` and `-stray` partition directories are not topics; `__consumer_offsets`
//!   and `__cluster_metadata` are.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::corpus::{copy_corpus, copy_tree, corpus, manifest};
use common::{Dirs, MountGuard, sh, sh_output};
use serde_json::Value;

/// Everything observable about one file or directory except its access time.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    is_dir: bool,
    size: u64,
    mode: u32,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    bytes: Vec<u8>,
}

/// The whole tree under `root`, by relative path.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let is_dir = meta.is_dir();
            let bytes = if is_dir { Vec::new() } else { fs::read(&path).unwrap() };
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            out.insert(
                rel,
                Entry {
                    is_dir,
                    size: meta.len(),
                    mode: meta.mode(),
                    ino: meta.ino(),
                    mtime: (meta.mtime(), meta.mtime_nsec()),
                    ctime: (meta.ctime(), meta.ctime_nsec()),
                    bytes,
                },
            );
            if is_dir {
                walk(root, &path, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    let meta = fs::metadata(root).unwrap();
    out.insert(
        PathBuf::from("."),
        Entry {
            is_dir: true,
            size: meta.len(),
            mode: meta.mode(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            bytes: Vec::new(),
        },
    );
    walk(root, root, &mut out);
    out
}

/// Whether any process holds a lock (flock or POSIX) on the file with inode `ino`.
fn is_locked(ino: u64) -> bool {
    let locks = fs::read_to_string("/proc/locks").unwrap();
    // Fields: id: class mode type pid major:minor:inode start end
    locks.lines().any(|line| {
        line.split_whitespace()
            .find(|f| f.matches(':').count() == 2)
            .and_then(|f| f.rsplit(':').next())
            .and_then(|i| i.parse::<u64>().ok())
            == Some(ino)
    })
}

fn mount_read_only(dirs: Dirs, extra: &[&str]) -> MountGuard {
    let mut args = vec!["--read-only"];
    args.extend_from_slice(extra);
    MountGuard::foreground_on(dirs, &args)
}

/// The manifest's records of one partition that a reader should see, in offset order.
fn expected_records(m: &Value, topic: &str, partition: u64, uncommitted: bool) -> Vec<Value> {
    let log_start = m["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["topic"] == topic && p["partition"] == partition)
        .unwrap()["log_start_offset"]
        .as_i64()
        .unwrap();
    m["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["topic"] == topic && r["partition"] == partition)
        .filter(|r| r["offset"].as_i64().unwrap() >= log_start)
        .filter(|r| r["is_control"] == false)
        .filter(|r| uncommitted || r["transaction"] != "aborted")
        .cloned()
        .collect()
}

fn b64(v: &Value) -> Option<Vec<u8>> {
    v.as_str().map(|s| STANDARD.decode(s).unwrap())
}

/// A field of a `.json` line as bytes: base64 when `<field>_encoding` says so, else UTF-8 text.
fn field_bytes(line: &Value, field: &str, encoding: &str) -> Option<Vec<u8>> {
    let v = &line[field];
    if v.is_null() {
        return None;
    }
    let s = v.as_str().unwrap();
    if line[encoding] == "base64" {
        Some(STANDARD.decode(s).unwrap())
    } else {
        Some(s.as_bytes().to_vec())
    }
}

/// Differences between one `.json` line and the manifest's record.
fn compare_record(line: &Value, want: &Value, topic: &str, partition: u64) -> Vec<String> {
    let mut problems = Vec::new();
    let what = format!("{topic}-{partition} offset {}", want["offset"]);
    let mut check = |name: &str, ok: bool, got: String, wanted: String| {
        if !ok {
            problems.push(format!("{what}: {name} is {got}, want {wanted}"));
        }
    };
    check("topic", line["topic"] == topic, line["topic"].to_string(), topic.into());
    check(
        "partition",
        line["partition"] == partition,
        line["partition"].to_string(),
        partition.to_string(),
    );
    check(
        "offset",
        line["offset"] == want["offset"],
        line["offset"].to_string(),
        want["offset"].to_string(),
    );
    let ts = want["timestamp"].as_i64().unwrap();
    if ts == -1 {
        check("ts", line.get("ts").is_none(), line["ts"].to_string(), "absent (v0)".into());
    } else {
        check("ts", line["ts"] == ts, line["ts"].to_string(), ts.to_string());
    }
    let key = field_bytes(line, "key", "key_encoding");
    check("key", key == b64(&want["key"]), format!("{key:?}"), format!("{:?}", b64(&want["key"])));
    let value = field_bytes(line, "payload", "payload_encoding");
    let wanted_value = b64(&want["value"]);
    check("payload", value == wanted_value, format!("{value:?}"), format!("{wanted_value:?}"));
    let wanted_headers: Vec<(String, Option<Vec<u8>>)> = want["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h[0].as_str().unwrap().to_string(), b64(&h[1])))
        .collect();
    let base64_headers = line["headers_encoding"] == "base64";
    let headers: Vec<(String, Option<Vec<u8>>)> = match line.get("headers") {
        None => Vec::new(),
        Some(flat) => flat
            .as_array()
            .unwrap()
            .chunks(2)
            .map(|pair| {
                let value = pair[1].as_str().map(|s| {
                    if base64_headers { STANDARD.decode(s).unwrap() } else { s.as_bytes().to_vec() }
                });
                (pair[0].as_str().unwrap().to_string(), value)
            })
            .collect(),
    };
    check(
        "headers",
        headers == wanted_headers,
        format!("{headers:?}"),
        format!("{wanted_headers:?}"),
    );
    problems
}

/// Compares `by-offset/<log start>.json` of every partition with the manifest.
fn check_every_partition(mount: &MountGuard, uncommitted: bool) -> usize {
    let m = manifest();
    let mut problems = Vec::new();
    let mut compared = 0;
    for p in m["partitions"].as_array().unwrap() {
        let topic = p["topic"].as_str().unwrap();
        let partition = p["partition"].as_u64().unwrap();
        let log_start = p["log_start_offset"].as_i64().unwrap();
        let path = mount.path(&format!("{topic}/{partition}/by-offset/{log_start}.json"));
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let want = expected_records(&m, topic, partition, uncommitted);
        if lines.len() != want.len() {
            let got: Vec<&Value> = lines.iter().map(|l| &l["offset"]).collect();
            let wanted: Vec<&Value> = want.iter().map(|r| &r["offset"]).collect();
            problems.push(format!("{topic}-{partition}: offsets {got:?}, want {wanted:?}"));
            continue;
        }
        for (line, want) in lines.iter().zip(&want) {
            problems.extend(compare_record(line, want, topic, partition));
            compared += 1;
        }
    }
    assert!(problems.is_empty(), "{} differences:\n{}", problems.len(), problems.join("\n"));
    compared
}

#[test]
fn read_only_mount_leaves_every_byte_name_and_time_of_the_data_dir_untouched() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let before = snapshot(&dirs.data());
    let lock_ino = before[Path::new(".lock")].ino;
    let mount = mount_read_only(dirs, &[]);
    assert!(!is_locked(lock_ino), "the read-only mount locked .lock");
    let mnt = mount.mnt();
    let mnt = mnt.display();
    // Read everything there is to read, and try to change things.
    sh(&format!(
        "cd {mnt} && for p in */[0-9]*; do cat $p/info $p/by-offset/-100 $p/by-offset/-100.json \
         $p/by-offset/-100.raw $p/segments/* > /dev/null; done; cat */info > /dev/null"
    ));
    for script in [
        format!("echo x >> {mnt}/orders/0/append"),
        format!("mkdir {mnt}/newtopic"),
        format!("rm {mnt}/orders/0/segments/00000000000000000000.log"),
        format!("touch {mnt}/orders/0/segments/00000000000000000000.index"),
    ] {
        let out = sh_output(&script);
        assert!(!out.status.success(), "`{script}` succeeded on a read-only mount");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Read-only file system"), "`{script}`: {stderr}");
    }
    assert!(!is_locked(lock_ino), "the read-only mount locked .lock");
    let dirs = mount.unmount();
    let after = snapshot(&dirs.data());
    let changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| k.display().to_string())
        .collect();
    assert!(changed.is_empty(), "changed under the data dir: {changed:?}");
}

#[test]
fn every_committed_corpus_record_reads_back_as_the_generator_wrote_it() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let mount = mount_read_only(dirs, &[]);
    let compared = check_every_partition(&mount, false);
    assert!(compared > 100, "only {compared} records compared");
}

#[test]
fn aborted_records_appear_only_with_read_uncommitted() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let mount = mount_read_only(dirs, &["--isolation", "read_uncommitted"]);
    check_every_partition(&mount, true);
    // The transactions partition holds aborted records, so the two isolation levels differ.
    let m = manifest();
    let all = expected_records(&m, "transactions", 0, true).len();
    let committed = expected_records(&m, "transactions", 0, false).len();
    assert!(all > committed, "the corpus has no aborted records");
}

#[test]
fn control_batches_stay_in_raw_streams_and_never_become_records() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let mount = mount_read_only(dirs, &[]);
    let raw = fs::read(mount.path("transactions/0/by-offset/0.raw")).unwrap();
    let mut on_disk = Vec::new();
    for seg in ["00000000000000000000", "00000000000000000013", "00000000000000000017"] {
        on_disk
            .extend(fs::read(corpus().join(format!("log-dir/transactions-0/{seg}.log"))).unwrap());
    }
    assert_eq!(raw, on_disk, "raw streams are the batches as stored, markers included");
    let values = fs::read_to_string(mount.path("transactions/0/by-offset/0.json")).unwrap();
    let m = manifest();
    for r in m["records"].as_array().unwrap() {
        if r["topic"] == "transactions" && r["is_control"] == true {
            let offset = format!("\"offset\":{},", r["offset"]);
            assert!(!values.contains(&offset), "control record {offset} shown");
        }
    }
}

#[test]
fn deleted_moving_and_stray_replicas_are_not_topics_but_internal_topics_are() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let data = dirs.data();
    let uuid = "0123456789abcdef0123456789abcdef";
    for special in [
        format!("orders-0.{uuid}-delete"),
        format!("ghost-0.{uuid}-delete"),
        format!("orders-1.{uuid}-future"),
        format!("orders-2.{uuid}-stray"),
    ] {
        copy_tree(&data.join("orders-0"), &data.join(special));
    }
    copy_tree(&data.join("transactions-0"), &data.join("__consumer_offsets-0"));
    copy_tree(&data.join("orders-0"), &data.join("__cluster_metadata-0"));
    // What KRaft keeps next to its log: the quorum state and snapshots.
    let metadata = data.join("__cluster_metadata-0");
    fs::write(metadata.join("quorum-state"), "{\"leaderId\":1,\"leaderEpoch\":3}").unwrap();
    fs::write(metadata.join("00000000000000000030-0000000003.checkpoint"), [0u8; 64]).unwrap();
    // Internal topics are listed with -o show_internal only (they can be looked up either way).
    let mount = mount_read_only(dirs, &[]);
    let hidden = sh(&format!("ls {}", mount.mnt().display()));
    assert!(!hidden.contains("__"), "{hidden}");
    assert!(mount.path("__consumer_offsets/0/info").exists());
    let mount = mount_read_only(mount.into_dirs(), &["-o", "show_internal"]);
    let topics = sh(&format!("ls {}", mount.mnt().display()));
    let topics: Vec<&str> = topics.lines().collect();
    assert!(topics.contains(&"__consumer_offsets"), "{topics:?}");
    assert!(topics.contains(&"__cluster_metadata"), "{topics:?}");
    assert!(
        !topics.iter().any(|t| t.contains("delete")
            || t.contains("future")
            || t.contains("stray")
            || *t == "ghost"),
        "{topics:?}"
    );
    let orders = sh(&format!("ls {}", mount.path("orders").display()));
    let partitions: Vec<&str> =
        orders.lines().filter(|n| n.bytes().all(|b| b.is_ascii_digit())).collect();
    assert_eq!(partitions, ["0", "1"], "{orders}");
    // Internal topics read like any other.
    let offsets = fs::read_to_string(mount.path("__consumer_offsets/0/by-offset/0.json")).unwrap();
    let committed = expected_records(&manifest(), "transactions", 0, false).len();
    assert_eq!(offsets.lines().count(), committed);
    let metadata = fs::read(mount.path("__cluster_metadata/0/by-offset/0.json")).unwrap();
    let orders = fs::read(mount.path("orders/0/by-offset/0.json")).unwrap();
    assert_eq!(metadata.len(), orders.len() + 47 * ("__cluster_metadata".len() - "orders".len()));
}

/// Appends stored batches to the end of a segment file, as a broker does.
fn append_to(path: &Path, batches: &[Vec<u8>]) {
    let mut file = fs::OpenOptions::new().append(true).open(path).unwrap();
    for b in batches {
        std::io::Write::write_all(&mut file, b).unwrap();
    }
}

fn txn_batch(base: i64, producer_id: i64, values: &[&str], transactional: bool) -> Vec<u8> {
    use topicfs::format::{BatchSpec, NewRecord, Offset, encode_batch};
    let spec = BatchSpec {
        base_offset: Offset(base),
        producer_id,
        producer_epoch: 0,
        base_sequence: 0,
        is_transactional: transactional,
        ..BatchSpec::default()
    };
    let records: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord {
            timestamp: 1_767_300_000_000,
            key: None,
            value: Some(v.as_bytes().to_vec()),
            headers: vec![],
        })
        .collect();
    encode_batch(&spec, &records).unwrap()
}

#[test]
fn an_open_transaction_ends_read_committed_streams_until_its_marker_arrives() {
    use topicfs::format::{Offset, control::encode_end_txn_marker_batch};
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let active = dirs.data().join("transactions-0/00000000000000000017.log");
    // Producer 7000 opens a transaction at offset 19; a plain record follows at 21.
    append_to(
        &active,
        &[txn_batch(19, 7000, &["open 0", "open 1"], true), txn_batch(21, -1, &["after"], false)],
    );
    let mount = mount_read_only(dirs, &[]);
    let committed: Vec<String> = expected_records(&manifest(), "transactions", 0, false)
        .iter()
        .map(|r| String::from_utf8(b64(&r["value"]).unwrap()).unwrap())
        .collect();
    let stream = mount.path("transactions/0/by-offset/0");
    let before = fs::read_to_string(&stream).unwrap();
    assert_eq!(before.lines().collect::<Vec<_>>(), committed, "past the last stable offset");
    // The last stable offset is the log end a name resolves against: 21 does not exist yet.
    let err = fs::metadata(mount.path("transactions/0/by-offset/21")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    let mut tail =
        common::Follower::start("tail", &["-f", "-n", "+1", "-s", "0.1", stream.to_str().unwrap()]);
    tail.wait_for(&format!("{}\n", committed.last().unwrap()));
    // The COMMIT marker arrives: the transaction's records and what follows appear, in order.
    let marker =
        encode_end_txn_marker_batch(Offset(22), 0, 7000, 0, true, 0, 1_767_300_000_001).unwrap();
    append_to(&mount.data().join("transactions-0/00000000000000000017.log"), &[marker]);
    let seen = tail.wait_for("after\n");
    let mut want = committed.join("\n");
    want.push_str("\nopen 0\nopen 1\nafter\n");
    assert_eq!(seen, want);
    let all = fs::read_to_string(mount.path("transactions/0/by-offset/21")).unwrap();
    assert_eq!(all, "after\n");
}
