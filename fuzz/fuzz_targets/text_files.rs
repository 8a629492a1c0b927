#![no_main]
//! libFuzzer entry point for [`topicfs_fuzz::targets::text_files`].

libfuzzer_sys::fuzz_target!(|data: &[u8]| topicfs_fuzz::targets::text_files(data));
