//! Process-level tests of the `topicfs` binary: the daemon's life cycle, installing and booting, and
//! the (ignored) topic-level benchmark.

#[path = "../common/mod.rs"]
mod common;

mod daemon_edges;
mod daemon_lifecycle;
mod daemon_logs;
mod install;
mod mount_options_process;
mod refusals_process;
mod topic_bench;
