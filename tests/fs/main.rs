//! Filesystem-logic tests (`fs`), without a kernel: `TopicFs` driven the way the kernel drives it,
//! the consumer-group tree, and the promises of SEMANTICS.md (including the check that SEMANTICS.md's
//! tags and its test index, doc/SEMANTICS-TESTS.md, agree and every test it names exists).

#[path = "../common/mod.rs"]
mod common;

mod background_fs;
mod cache_fs;
mod config_fs;
mod field_index_fs;
mod filtered_fs;
mod filtered_topic_fs;
mod fs_ops;
mod groups_fs;
mod json_payload_fs;
mod refusals_fs;
mod rejected_writes_fs;
mod semantics_fs;
