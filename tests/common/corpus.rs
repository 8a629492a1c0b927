//! The broker corpus of `tests/fixtures/broker-v1` (written by kafka-python, see its README):
//! where it is, its manifest, and copies of it for tests that mount or damage it.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The corpus directory (`log-dir/` and `manifest.json`).
pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broker-v1")
}

/// What the generator recorded: every partition, segment, batch and record.
pub fn manifest() -> Value {
    serde_json::from_slice(&fs::read(corpus().join("manifest.json")).unwrap()).unwrap()
}

/// Copies the corpus log dir into `to` (a fresh copy per test: the checked-in corpus is never
/// mounted itself).
pub fn copy_corpus(to: &Path) {
    copy_tree(&corpus().join("log-dir"), to);
}

/// Copies the tree `from` into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}
