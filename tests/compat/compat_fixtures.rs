//! topicfs's decoder reads every batch of the broker corpus in `tests/fixtures/broker-v1` (made
//! by kafka-python, see its README) exactly as its manifest lists it: header fields, CRCs,
//! offsets (legacy relative inner offsets, compaction gaps), timestamps (LogAppendTime), keys,
//! values and headers. Needs no Python: the manifest is checked in.

use crate::manifest;

use serde_json::Value;

fn corpus_manifest() -> Value {
    let path = manifest::repo().join("tests/fixtures/broker-v1/manifest.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

#[test]
fn every_corpus_batch_decodes_as_kafka_python_wrote_it() {
    let m = corpus_manifest();
    let log_dir =
        manifest::repo().join("tests/fixtures/broker-v1").join(m["log_dir"].as_str().unwrap());
    let mut problems = Vec::new();
    let mut batches = 0;
    for p in m["partitions"].as_array().unwrap() {
        for s in p["segments"].as_array().unwrap() {
            let path = log_dir.join(p["dir"].as_str().unwrap()).join(s["file"].as_str().unwrap());
            let log = std::fs::read(&path).unwrap();
            let expected = s["batches"].as_array().unwrap();
            batches += expected.len();
            problems.extend(manifest::compare_log(&log, expected, &path.display().to_string()));
        }
    }
    manifest::assert_no_problems(&problems);
    assert!(batches > 50, "the corpus lists only {batches} batches");
}
