//! Reliability: crashes (kill -9), power cuts and damaged data, the fuzz corpus, hostile input and
//! a full disk, and bounded concurrency stress. See RELIABILITY.md.

#[path = "../common/mod.rs"]
mod common;

mod reliability_crash;
mod reliability_damage;
mod reliability_fuzz_corpus;
mod reliability_hostile;
mod reliability_hostile_files;
mod reliability_stress;
