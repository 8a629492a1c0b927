//! Inspection files and damaged data through a read-only mount of the broker corpus
//! (`tests/fixtures/broker-v1`, written by kafka-python).
//!
//! * `segments/<file>.dump` prints what `kafka-dump-log.sh --print-data-log` prints for every
//!   batch and record the generator recorded, and every index entry;
//! * `check` finds nothing wrong in the corpus but its compaction gaps, and names file and
//!   position of every kind of damage: flipped bits, garbage tails, index entries pointing at
//!   garbage;
//! * damaged data never panics or hangs the mount: the damaged range reads as `EIO`, intact
//!   partitions and ranges stay readable.

use crate::common;

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;

use common::corpus::{copy_corpus, corpus, manifest};
use common::{Dirs, MountGuard};
use serde_json::Value;

fn mount_corpus(damage: impl FnOnce(&Path)) -> MountGuard {
    mount_corpus_logging_to(Stdio::inherit(), damage)
}

/// [`mount_corpus`] with the daemon's log going to `log`.
fn mount_corpus_logging(log: &Path, damage: impl FnOnce(&Path)) -> MountGuard {
    mount_corpus_logging_to(fs::File::create(log).unwrap().into(), damage)
}

fn mount_corpus_logging_to(stderr: Stdio, damage: impl FnOnce(&Path)) -> MountGuard {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    damage(&dirs.data());
    MountGuard::foreground_logging_to(dirs, &["--read-only"], stderr)
}

fn segment_path(p: &Value, file: &str) -> String {
    format!("{}/{}/segments/{file}", p["topic"].as_str().unwrap(), p["partition"])
}

#[test]
fn log_dumps_show_every_batch_and_record_the_generator_wrote() {
    let mount = mount_corpus(|_| {});
    let m = manifest();
    let mut batches = 0;
    for p in m["partitions"].as_array().unwrap() {
        for s in p["segments"].as_array().unwrap() {
            let file = s["file"].as_str().unwrap();
            let path = mount.path(&format!("{}.dump", segment_path(p, file)));
            let text = fs::read_to_string(&path).unwrap();
            assert_eq!(fs::metadata(&path).unwrap().size(), text.len() as u64, "{path:?}");
            let mut lines = text.lines();
            let dir = p["dir"].as_str().unwrap();
            assert_eq!(lines.next(), Some(format!("Dumping {dir}/{file}").as_str()));
            assert_eq!(
                lines.next(),
                Some(format!("Log starting offset: {}", s["base_offset"]).as_str())
            );
            let rest: Vec<&str> = lines.collect();
            // Payloads are printed verbatim, so a value holding `\n` continues on the next
            // line, as with kafka-dump-log.sh.
            let batch_lines: Vec<&&str> = rest
                .iter()
                .filter(|l| l.starts_with("baseOffset: ") || l.starts_with("offset: "))
                .collect();
            let record_lines: Vec<&&str> = rest.iter().filter(|l| l.starts_with("| ")).collect();
            let want = s["batches"].as_array().unwrap();
            assert_eq!(batch_lines.len(), want.len(), "{path:?}:\n{text}");
            for (line, b) in batch_lines.iter().zip(want) {
                for field in [
                    format!("position: {} ", b["position"]),
                    format!("size: {} ", b["size"]),
                    format!("magic: {} ", b["magic"]),
                    format!("crc: {} isvalid: true", b["crc"]),
                ] {
                    assert!(line.contains(&field), "{path:?}: {line:?} lacks {field:?}");
                }
                let offset = if b["magic"] == 2 { "lastOffset" } else { "offset" };
                let field = format!("{offset}: {} ", b["last_offset"]);
                assert!(line.starts_with(&field) || line.contains(&format!(" {field}")), "{line}");
                batches += 1;
            }
            let records: Vec<&Value> =
                want.iter().flat_map(|b| b["records"].as_array().unwrap()).collect();
            assert_eq!(record_lines.len(), records.len(), "{path:?}:\n{text}");
            for (line, r) in record_lines.iter().zip(&records) {
                assert!(line.starts_with(&format!("| offset: {} ", r["offset"])), "{line}");
            }
        }
    }
    assert!(batches > 50);
    // One record line in full, with its data (`--print-data-log`).
    let orders =
        fs::read_to_string(mount.path("orders/0/segments/00000000000000000000.log.dump")).unwrap();
    assert!(
        orders.contains(
            "| offset: 0 CreateTime: 1767225600000 keySize: 5 valueSize: 45 sequence: -1 \
             headerKeys: [source] key: alice payload: {\"id\":0,\"user\":\"alice\",\"item\":\"book\",\"qty\":1}\n"
        ),
        "{orders}"
    );
    let txn =
        fs::read_to_string(mount.path("transactions/0/segments/00000000000000000000.log.dump"))
            .unwrap();
    assert!(txn.contains("endTxnMarker: ABORT coordinatorEpoch: "), "{txn}");
}

#[test]
fn index_dumps_list_every_entry_with_absolute_offsets() {
    let mount = mount_corpus(|_| {});
    let m = manifest();
    for p in m["partitions"].as_array().unwrap() {
        for s in p["segments"].as_array().unwrap() {
            let stem = s["file"].as_str().unwrap().trim_end_matches(".log");
            let index =
                fs::read_to_string(mount.path(&format!("{}.index.dump", segment_path(p, stem))))
                    .unwrap();
            let want: Vec<String> = s["index"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| format!("offset: {} position: {}", e[0], e[1]))
                .collect();
            assert_eq!(index.lines().skip(1).collect::<Vec<_>>(), want, "{stem}");
            let time = fs::read_to_string(
                mount.path(&format!("{}.timeindex.dump", segment_path(p, stem))),
            )
            .unwrap();
            let want: Vec<String> = s["time_index"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| format!("timestamp: {} offset: {}", e[0], e[1]))
                .collect();
            assert_eq!(time.lines().skip(1).collect::<Vec<_>>(), want, "{stem}");
            let txn =
                fs::read_to_string(mount.path(&format!("{}.txnindex.dump", segment_path(p, stem))));
            let want: Vec<String> = s["txn_index"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    format!(
                        "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                        t["producer_id"], t["first_offset"], t["last_offset"], t["last_stable_offset"]
                    )
                })
                .collect();
            match txn {
                Ok(txn) => assert_eq!(txn.lines().skip(1).collect::<Vec<_>>(), want, "{stem}"),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::NotFound);
                    assert!(want.is_empty(), "{stem}: the .txnindex dump is missing");
                }
            }
        }
    }
}

#[test]
fn check_finds_no_problem_in_the_corpus_and_lists_its_compaction_gap() {
    let mount = mount_corpus(|_| {});
    let m = manifest();
    for p in m["partitions"].as_array().unwrap() {
        let path =
            mount.path(&format!("{}/{}/check", p["topic"].as_str().unwrap(), p["partition"]));
        let report = fs::read_to_string(&path).unwrap();
        let summary = report.lines().last().unwrap();
        assert!(
            summary.ends_with(": 0 problems, 0 offset gaps") || p["topic"] == "compacted",
            "{report}"
        );
    }
    let compacted = fs::read_to_string(mount.path("compacted/0/check")).unwrap();
    assert!(compacted.contains("offset gap"), "{compacted}");
    assert!(compacted.lines().last().unwrap().contains(": 0 problems, "), "{compacted}");
}

/// Byte position of batch `n` of a segment, from the manifest.
fn batch_position(topic: &str, file: &str, n: usize) -> u64 {
    let m = manifest();
    let p =
        m["partitions"].as_array().unwrap().iter().find(|p| p["topic"] == topic).unwrap().clone();
    let s = p["segments"].as_array().unwrap().iter().find(|s| s["file"] == file).unwrap().clone();
    s["batches"][n]["position"].as_u64().unwrap()
}

fn flip_bit(path: &Path, at: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at as usize] ^= 0x10;
    fs::write(path, bytes).unwrap();
}

/// The damage the tests below share: a flipped bit inside the records of orders-0's batch at
/// `flipped` (under its CRC), and garbage after the last batch of the sealed segment 15.
fn damage_orders(data: &Path, flipped: u64) {
    flip_bit(&data.join("orders-0/00000000000000000000.log"), flipped + 70);
    let mut log = fs::OpenOptions::new()
        .append(true)
        .open(data.join("orders-0/00000000000000000015.log"))
        .unwrap();
    std::io::Write::write_all(&mut log, b"not a batch at all").unwrap();
}

#[test]
fn check_names_file_and_position_of_every_kind_of_damage() {
    let seg0 = "00000000000000000000";
    // A byte in the middle of orders-0's third batch (its records, under the CRC).
    let flipped = batch_position("orders", &format!("{seg0}.log"), 2);
    let mount = mount_corpus(|data| {
        damage_orders(data, flipped);
        // An offset index entry pointing into the middle of a batch.
        let index = data.join(format!("orders-0/{seg0}.index"));
        let mut bytes = fs::read(&index).unwrap();
        bytes[7] = bytes[7].wrapping_add(3);
        fs::write(&index, bytes).unwrap();
    });
    let orders = fs::read_to_string(mount.path("orders/0/check")).unwrap();
    let log = format!("orders-0/{seg0}.log position {flipped}: CRC mismatch");
    assert!(orders.contains(&log), "{orders}");
    assert!(
        orders.contains(&format!("orders-0/{seg0}.index position 0: entry offset")),
        "{orders}"
    );
    assert!(orders.contains("does not point at a batch start"), "{orders}");
    let tail = "orders-0/00000000000000000015.log position 1335: 18 invalid bytes at the end";
    assert!(orders.contains(tail), "{orders}");
    assert!(orders.lines().last().unwrap().ends_with(": 3 problems, 0 offset gaps"), "{orders}");
    // The dump of the damaged log says which batch is invalid, and goes on.
    let dump =
        fs::read_to_string(mount.path(&format!("orders/0/segments/{seg0}.log.dump"))).unwrap();
    assert!(dump.contains(&format!("position: {flipped} ")), "{dump}");
    assert_eq!(dump.matches("isvalid: false").count(), 1, "{dump}");
}

#[test]
fn damaged_batches_read_as_eio_and_everything_intact_stays_readable() {
    let seg0 = "00000000000000000000";
    let flipped = batch_position("orders", &format!("{seg0}.log"), 2);
    let mount = mount_corpus(|data| damage_orders(data, flipped));
    // The damaged batch holds offsets 6..=8: a stream through it fails with EIO...
    let err = fs::read(mount.path("orders/0/by-offset/0.json")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // ... while a range before it, every later segment, and every other partition read whole.
    let before = fs::read_to_string(mount.path("orders/0/by-offset/0..6.json")).unwrap();
    assert_eq!(before.lines().count(), 6);
    let later = fs::read_to_string(mount.path("orders/0/by-offset/9..30.json")).unwrap();
    assert_eq!(later.lines().count(), 30 - 9);
    // Past the garbage at the end of the sealed segment 15, segment 30 reads whole.
    let last = fs::read_to_string(mount.path("orders/0/by-offset/30.json")).unwrap();
    assert_eq!(last.lines().count(), 47 - 30);
    // A read that starts at the damaged batch fails; one that reaches it ends before it. A
    // range of nothing but the damaged batch (so of size 0) fails too, in every format.
    let err = fs::read(mount.path("orders/0/by-offset/6..10.json")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    for name in ["6..9.json", "6..9", "7..8"] {
        let path = mount.path(&format!("orders/0/by-offset/{name}"));
        assert_eq!(fs::metadata(&path).unwrap().len(), 0, "{name}");
        let err = fs::read(&path).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{name}: {err}");
    }
    // An empty range that is not damaged (past the damage, or holding no records) reads empty.
    assert!(fs::read(mount.path("orders/0/by-offset/9..9.json")).unwrap().is_empty());
    let out =
        common::sh_output(&format!("cat {}", mount.path("orders/0/by-offset/0.json").display()));
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 6);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Input/output error"));
    for topic in ["codecs", "legacy-v0", "legacy-v1", "transactions", "compacted"] {
        fs::read(mount.path(&format!("{topic}/0/by-offset/0.json"))).unwrap();
    }
    // The raw segment file itself reads as stored, damage included.
    let raw = fs::read(mount.path(&format!("orders/0/segments/{seg0}.log"))).unwrap();
    assert_eq!(
        raw.len() as u64,
        fs::metadata(corpus().join(format!("log-dir/orders-0/{seg0}.log"))).unwrap().len()
    );
}

#[test]
fn damage_is_logged_once_with_file_and_position_however_often_it_is_read() {
    let seg0 = "00000000000000000000";
    let flipped = batch_position("orders", &format!("{seg0}.log"), 2);
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("daemon.log");
    let mount = mount_corpus_logging(&log, |data| {
        flip_bit(&data.join(format!("orders-0/{seg0}.log")), flipped + 70);
    });
    // stat (sizes count every batch), then reads through the damage in every way.
    for _ in 0..3 {
        for name in ["0.json", "0", "6..9", "6..10.json"] {
            let path = mount.path(&format!("orders/0/by-offset/{name}"));
            let _ = fs::metadata(&path);
            let err = fs::read(&path).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EIO), "{name}: {err}");
        }
    }
    drop(mount);
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("corrupt data")).collect();
    assert_eq!(lines.len(), 1, "one line for one damaged batch:\n{text}");
    assert!(lines[0].contains(&format!("orders-0/{seg0}.log at position ")), "{text}");
    assert!(lines[0].contains("CRC mismatch"), "{text}");
}

#[test]
fn check_reports_an_out_of_order_time_index_on_disk_that_reads_are_not_misled_by() {
    let seg0 = "00000000000000000000";
    let before = {
        let mount = mount_corpus(|_| {});
        fs::read(mount.path("orders/0/by-time/-2")).unwrap()
    };
    let mount = mount_corpus(|data| {
        // Swap the time index's second and third entries (12 bytes each) on disk.
        let path = data.join(format!("orders-0/{seg0}.timeindex"));
        let mut bytes = fs::read(&path).unwrap();
        let (a, b) = (bytes[12..24].to_vec(), bytes[24..36].to_vec());
        bytes[12..24].copy_from_slice(&b);
        bytes[24..36].copy_from_slice(&a);
        fs::write(&path, bytes).unwrap();
    });
    let check = fs::read_to_string(mount.path("orders/0/check")).unwrap();
    let label = format!("orders-0/{seg0}.timeindex");
    let disorder = format!("{label} position 24: out of order: timestamp ");
    assert!(check.contains(&disorder), "{check}");
    let note = format!("{label} position 24: failed the sanity check (entry 2 ");
    assert!(check.contains(&note), "{check}");
    assert!(check.contains("lookups use an index rebuilt from the .log in memory"), "{check}");
    assert!(check.lines().last().unwrap().ends_with(": 2 problems, 0 offset gaps"), "{check}");
    // Lookups by time use the rebuilt index: every stream reads as on the undamaged corpus.
    let after = fs::read(mount.path("orders/0/by-time/-2")).unwrap();
    assert_eq!(after, before);
    let m = manifest();
    let orders = m["partitions"].as_array().unwrap().iter().find(|p| p["topic"] == "orders");
    let records: Vec<(i64, i64)> = orders.unwrap()["segments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["batches"].as_array().unwrap())
        .flat_map(|b| b["records"].as_array().unwrap())
        .map(|r| (r["offset"].as_i64().unwrap(), r["timestamp"].as_i64().unwrap()))
        .collect();
    for &(_, ts) in &records {
        let want = records.iter().find(|r| r.1 >= ts).unwrap().0;
        let first = fs::read_to_string(mount.path(&format!("orders/0/by-time/{ts}.json"))).unwrap();
        let first: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        assert_eq!(first["offset"].as_i64().unwrap(), want, "by-time/{ts}");
    }
    // The raw file under segments/ is the file on disk, damage included.
    let shown = fs::read(mount.path(&format!("orders/0/segments/{seg0}.timeindex"))).unwrap();
    let original = fs::read(corpus().join(format!("log-dir/orders-0/{seg0}.timeindex"))).unwrap();
    assert_ne!(shown, original);
    assert_eq!(shown, fs::read(mount.data().join(format!("orders-0/{seg0}.timeindex"))).unwrap());
}
