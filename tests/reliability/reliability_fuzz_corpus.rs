//! Replays every fuzz input kept in the repository (the seed corpus `fuzz/seeds/<target>/` and
//! the inputs that once crashed, `fuzz/regressions/<target>/`) through the same target bodies
//! the libFuzzer binaries run (`fuzz/src/targets.rs`). This is CI's fuzz smoke test on stable
//! Rust: no nightly flags, no cargo-fuzz, and every crash the fuzzer ever found stays fixed.

#[path = "../../fuzz/src/targets.rs"]
#[allow(dead_code)]
mod targets;

use std::path::{Path, PathBuf};

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

fn replay(kind: &str) -> usize {
    let mut replayed = 0;
    for (name, run) in targets::TARGETS {
        for input in inputs(kind, name) {
            let data = std::fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "fuzz target {name} panics on {}", input.display());
            replayed += 1;
        }
    }
    replayed
}

#[test]
fn every_seed_and_regression_input_is_handled_without_panic() {
    // The seed corpus is generated from the broker-v1 fixtures by fuzz/make-seeds.py; an empty
    // replay would mean the test checks nothing.
    let seeds = replay("seeds");
    assert!(seeds > 100, "only {seeds} seed inputs found under fuzz/seeds");
    replay("regressions");
}

#[test]
fn every_target_has_seeds() {
    for (name, _) in targets::TARGETS {
        assert!(!inputs("seeds", name).is_empty(), "fuzz target {name} has no seed inputs");
    }
}
