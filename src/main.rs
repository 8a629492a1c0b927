//! `topicfs`: see [`topicfs::cli`] for the command line.

/// `topicfs --version`: the crate version and the commit it was built from (`unknown` when
/// built outside a git checkout; see `build.rs`). Only this file names the commit, so a new
/// commit rebuilds the binary, not the library and everything linking it.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TOPICFS_COMMIT"), ")");

fn main() -> std::process::ExitCode {
    topicfs::cli::main(VERSION)
}
