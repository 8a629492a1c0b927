//! fuser adapter (in progress).
