//! `cargo run -p xtask -- assets OUT_DIR`: generates from topicfs's clap definition what the
//! Debian package installs besides the binary (`scripts/package` runs it):
//!
//! - `OUT_DIR/man/topicfs.1`, `topicfs-mount.1`, `topicfs-unmount.1` (clap_mangen);
//! - `OUT_DIR/completions/topicfs.bash`, `_topicfs` (zsh), `topicfs.fish` (clap_complete).
//!
//! Everything is written anew on each run; the output depends only on the clap definition and
//! the version string, so two runs at one commit produce identical files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;
use topicfs::cli::Cli;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["assets", out] => assets(Path::new(out)),
        _ => Err("usage: cargo run -p xtask -- assets OUT_DIR".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err}");
            ExitCode::FAILURE
        }
    }
}

fn assets(out: &Path) -> Result<(), String> {
    let man = out.join("man");
    let completions = out.join("completions");
    for dir in [&man, &completions] {
        if dir.exists() {
            fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    clap_mangen::generate_to(Cli::command(), &man)
        .map_err(|e| format!("man pages in {}: {e}", man.display()))?;
    let mut written: Vec<PathBuf> = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = clap_complete::generate_to(shell, &mut Cli::command(), "topicfs", &completions)
            .map_err(|e| format!("{shell} completions in {}: {e}", completions.display()))?;
        written.push(path);
    }
    let mut pages: Vec<PathBuf> = fs::read_dir(&man)
        .map_err(|e| format!("{}: {e}", man.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    pages.sort();
    for path in pages.iter().chain(&written) {
        println!("{}", path.display());
    }
    Ok(())
}
