//! A feature's part of the tree (`groups/`, `schemas/`, `by-key/`, `segments/` and `check`):
//! its directories and files are one enum each, held by one variant of
//! [`DirNode`](super::node::DirNode) and [`FileNode`](super::node::FileNode) and named in
//! `node.rs` with their parents (the tree's shape is in one file); every operation on them
//! ([`SubtreeDir`], [`SubtreeFile`]) is in the feature's own module. The operations
//! (`lookup.rs`, `readdir.rs`, `open.rs`) dispatch to it by that variant, so a new feature is
//! its module plus its enums and one arm in each dispatch, all forced by exhaustive matches.
//!
//! Stream files of a feature (a group's `next`, `by-key/` files) share the machinery of every
//! stream (pins, read-ahead, exact sizes): the feature says which of its files are streams
//! and resolves them; lookups, `getattr` and `open` of them go through [`TopicFs`]'s stream
//! path.

use std::time::{Duration, SystemTime};

use topicfs_source::error::Result;

use super::TopicFs;
use super::attr::{AttrReply, OpenRequest, Opened};
use super::handle::StreamRef;
use super::node::Node;

/// A directory's permission bits, mtime and how long the kernel may cache them.
#[derive(Copy, Clone, Debug)]
pub(crate) struct DirAttr {
    pub perm: u16,
    pub mtime: SystemTime,
    pub ttl: Duration,
}

/// The directories of one feature.
pub(crate) trait SubtreeDir {
    /// The node `name` names here, parsed only (whether it exists is its attributes' check);
    /// `None`: no such name can exist here.
    fn child(&self, fs: &TopicFs, name: &str) -> Result<Option<Node>>;
    /// The names listed here, each with its node.
    fn list(&self, fs: &TopicFs) -> Result<Vec<(String, Node)>>;
    /// The directory's attributes, checking that it exists.
    fn attr(&self, fs: &TopicFs) -> Result<DirAttr>;
}

/// The files of one feature.
pub(crate) trait SubtreeFile {
    /// Whether this file is a stream (resolved at each lookup and pinned while open).
    fn is_stream(&self) -> bool;
    /// The last change of what the file shows (its `st_mtime`; a stream's before its range
    /// completes).
    fn mtime(&self, fs: &TopicFs) -> Result<SystemTime>;
    /// The stream this file means now (only called when [`SubtreeFile::is_stream`]).
    fn resolve(&self, fs: &TopicFs) -> Result<StreamRef>;
    /// Whether the file takes writes (and so `O_TRUNC` and a truncation to 0, without
    /// effect) on a read-write mount.
    fn is_writable(&self) -> bool;
    /// The file's attributes, checking that it exists (`ino` 0: no inode yet); `node` is this
    /// file as a [`Node`] (for the stream path).
    fn attr(&self, fs: &TopicFs, ino: u64, node: &Node) -> Result<AttrReply>;
    /// Opens the file (`ino` is its inode, `node` this file as a [`Node`]).
    fn open(&self, fs: &TopicFs, ino: u64, node: &Node, request: OpenRequest) -> Result<Opened>;
}
