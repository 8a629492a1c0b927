//! View tests (`view`): spec grammar, rendering, streams over the real engine, topic-level views.

mod view_support;

mod topic_views;
mod view_engine;
mod view_render;
mod view_spec;
mod view_stream;
mod view_txn;
