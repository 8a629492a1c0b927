//! Filesystem logic (in progress).
