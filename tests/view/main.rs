//! View tests (`view`): spec grammar, rendering, streams over the real engine, topic-level views.

mod view_support;

mod shared_trackers;
mod topic_views;
mod txn_engine;
mod view_engine;
mod view_filter;
mod view_render;
mod view_retention_model;
mod view_spec;
mod view_stream;
