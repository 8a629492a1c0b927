//! The log engine (in progress).
