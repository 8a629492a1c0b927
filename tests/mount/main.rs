//! Real-mount tests (`fuse` and `mount`), driven with shell tools: every mount is unmounted by a
//! guard from `tests/common`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../compat/manifest.rs"]
mod manifest;

mod access;
mod bykey_mount;
mod cache_mount;
mod config_mount;
mod filtered_mount;
mod filtered_topic_mount;
mod groups;
mod inspect_memory;
mod memory_bounds;
mod mount_passthrough;
mod mount_shell_tools;
mod refusals_mount;
mod rejected_writes_mount;
mod semantics_mount;
mod topic_mount;
