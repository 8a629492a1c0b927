//! Log engine tests (`storage`): invariants on real files in temporary dirs, and a model test.
//! One test binary (one link step) per layer; each file is a module named as it was.

#[path = "../common/log_fixture.rs"]
mod log_fixture;

mod engine_cleaner;
mod engine_config;
mod engine_keys;
mod engine_log;
mod engine_model;
