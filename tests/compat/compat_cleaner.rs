//! The log cleaner's output read by kafka-python (an independent codec): a keyed log with
//! tombstones and keyless records over several segments, appended with each codec, is
//! cleaned; kafka-python then checks every batch's CRC, the offsets (increasing, gaps
//! allowed), every `.index` and `.timeindex` entry (`check_log.py partition`), and decodes
//! every record (`check_log.py records`), which must be exactly the latest record of each key
//! of the cleaned segments (tombstones kept until their horizon) and every record of the
//! active segment, at their original offsets.
//!
//! Needs the venv made by `scripts/install-deps` (`TOPICFS_PYTHON`); fails in CI without it.

use crate::manifest;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use topicfs::cleaner::{CleanOptions, Cleaner, CleanerSettings};
use topicfs::format::{NewRecord, Offset};
use topicfs::storage::LogConfig;
use topicfs::storage::log::Log;

const T0: i64 = 1_767_225_600_000;

#[test]
fn kafka_python_reads_what_the_cleaner_writes() {
    let Some(python) = manifest::python() else { return };
    for codec in ["uncompressed", "gzip", "snappy", "lz4", "zstd"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let mut config = LogConfig::default();
        config.set("segment.bytes", "2000").unwrap();
        config.set("index.interval.bytes", "200").unwrap();
        config.set("retention.ms", "-1").unwrap();
        config.set("compression.type", codec).unwrap();
        let log = Log::create(&dir, "t", 0, config).unwrap();
        // (offset, key, value) of everything appended.
        let mut appended: Vec<(i64, Option<String>, Option<String>)> = Vec::new();
        for i in 0..400i64 {
            let key = (i % 23 != 0).then(|| format!("key-{}", (i * 7) % 31));
            let value =
                (i % 11 != 5).then(|| format!("value {i} {}", "x".repeat((i % 40) as usize)));
            let rec = NewRecord {
                timestamp: T0 + i,
                key: key.clone().map(String::into_bytes),
                value: value.clone().map(String::into_bytes),
                headers: if i % 5 == 0 {
                    vec![(b"h".to_vec(), Some(b"v".to_vec()))]
                } else {
                    vec![]
                },
            };
            let info = log.append(&[rec]).unwrap();
            appended.push((info.first_offset.0, key, value));
        }
        let active_base = log.segment_list().last().unwrap().base_offset().0;
        assert!(log.segment_list().len() > 5, "several segments");
        let settings = CleanerSettings {
            min_cleanable_dirty_ratio: 0.0,
            segment_bytes: 6000,
            segment_index_bytes: 4096,
            dedupe_buffer_bytes: 1 << 20,
            ..CleanerSettings::default()
        };
        let opts = CleanOptions { now: T0 + 10_000, ..CleanOptions::default() };
        let stats = Cleaner::new(1 << 20).clean(&log, &settings, None, &opts).unwrap().unwrap();
        assert_eq!(stats.end_offset, Offset(active_base));
        log.close().unwrap();

        // The model: the latest record of each key below the active segment, and the rest.
        let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
        for (offset, key, _) in &appended {
            if let Some(k) = key
                && *offset < active_base
            {
                latest.insert(k, *offset);
            }
        }
        let expected: Vec<&(i64, Option<String>, Option<String>)> = appended
            .iter()
            .filter(|(o, k, _)| {
                *o >= active_base || k.as_deref().is_some_and(|k| latest.get(k) == Some(o))
            })
            .collect();

        let out = manifest::run_script(&python, "check_log.py", &[Path::new("partition"), &dir]);
        eprint!("{codec}: {out}");
        let out = manifest::run_script(&python, "check_log.py", &[Path::new("records"), &dir]);
        let records: Vec<Value> = serde_json::from_str(&out).unwrap();
        let got: Vec<(i64, Option<String>, Option<String>)> = records
            .iter()
            .map(|r| {
                let text = |v: &Value| {
                    v.as_str()
                        .map(|s| String::from_utf8(manifest::unb64(s)).expect("utf-8 in this test"))
                };
                (r["offset"].as_i64().unwrap(), text(&r["key"]), text(&r["value"]))
            })
            .collect();
        let want: Vec<(i64, Option<String>, Option<String>)> =
            expected.into_iter().cloned().collect();
        assert_eq!(got, want, "{codec}: kafka-python reads exactly the latest record of each key");
    }
}
