//! A broker's log dir, read-only: the checked-in corpus, inspection, a live writer, new topics and
//! the log cleaner's swap files, through the engine and through real mounts.

#[path = "../common/mod.rs"]
mod common;

mod broker_cache;
mod broker_confluent_serde;
mod broker_corpus;
mod broker_inspect;
mod broker_jbod;
mod broker_live;
mod broker_new_topics;
mod broker_schemas;
mod broker_swap;
