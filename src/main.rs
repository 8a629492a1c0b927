//! `topicfs`: see [`topicfs::cli`] for the command line.

fn main() -> std::process::ExitCode {
    topicfs::cli::main()
}
