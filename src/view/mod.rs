//! Views: specs and rendering (in progress).
