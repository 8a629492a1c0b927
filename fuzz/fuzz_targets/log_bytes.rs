#![no_main]
//! libFuzzer entry point for [`topicfs_fuzz::targets::log_bytes`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| topicfs_fuzz::targets::log_bytes(data));
