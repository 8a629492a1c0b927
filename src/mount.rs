//! Mount and daemon lifecycle (in progress).
