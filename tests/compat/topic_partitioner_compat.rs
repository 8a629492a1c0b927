//! The topic-level `append` partitioner against kafka-python's default partitioner, an
//! implementation of Kafka's `Utils.murmur2` and `toPositive(hash) % partitions` written
//! independently of topicfs (`tests/compat/partitioner.py`).
//!
//! Needs the venv made by `scripts/install-deps` (`TOPICFS_PYTHON`); fails in CI without it.

use crate::manifest;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use topicfs::partitioner::{murmur2, partition_for_key};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Keys of every length 0..=70 (all four murmur2 tail lengths, many words), random bytes
/// (non-UTF-8 included), plus typical text keys; each with a random partition count.
fn cases() -> Vec<(Vec<u8>, u32)> {
    let mut rng = Rng(0x7069_6373_7466_6b31);
    let mut cases = Vec::new();
    for len in 0..=70 {
        for _ in 0..20 {
            let key: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            cases.push((key, 1 + rng.below(200) as u32));
        }
    }
    for i in 0..500 {
        let key = format!("user-{i}").into_bytes();
        cases.push((key, [1, 2, 3, 6, 12, 50, 1000][i % 7]));
    }
    cases
}

#[test]
fn keyed_records_land_where_kafka_python_default_partitioner_puts_them() {
    let Some(python) = manifest::python() else { return };
    let cases = cases();
    let input: Vec<Value> = cases
        .iter()
        .map(|(key, partitions)| json!({"key": manifest::b64(Some(key)), "partitions": partitions}))
        .collect();
    let mut child = Command::new(&python)
        .arg(manifest::repo().join("tests/compat/partitioner.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(Value::Array(input).to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "partitioner.py: {}", String::from_utf8_lossy(&out.stderr));
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answers.len(), cases.len());
    for ((key, partitions), answer) in cases.iter().zip(&answers) {
        let hash = answer["murmur2"].as_i64().unwrap();
        let partition = answer["partition"].as_u64().unwrap();
        assert_eq!(i64::from(murmur2(key)), hash, "murmur2 of {key:02x?}");
        assert_eq!(
            partition_for_key(key, *partitions).map(u64::from),
            Some(partition),
            "partition of {key:02x?} among {partitions}"
        );
    }
}
