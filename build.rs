//! Build script: records the commit the binary is built from, for `topicfs --version`.
//!
//! `TOPICFS_COMMIT` is, in order: `$TOPICFS_BUILD_COMMIT` when set and not empty (for builds
//! from a source tarball, where the packager knows the commit); in release builds (the
//! package, `cargo install`, scripts/try), the abbreviated commit of `git rev-parse HEAD` when
//! building in a git checkout; `unknown` otherwise (no git, not a checkout, git failing for
//! any reason: the build never fails over this), and `unknown, debug build` in debug builds.
//!
//! Why not in debug builds: Cargo rebuilds every target of a package when its build script's
//! output changes, so watching HEAD there would recompile the library and every test binary on
//! each commit during development.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TOPICFS_BUILD_COMMIT");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let given = std::env::var("TOPICFS_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty());
    let commit = match given {
        Some(commit) => commit,
        None if !release => "unknown, debug build".to_string(),
        None => git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=TOPICFS_COMMIT={commit}");
    if !release {
        return;
    }
    // Build again when HEAD moves: HEAD itself (a branch switch or a detached checkout), the
    // branch's ref file (a commit) and packed-refs. Only existing files: a missing one would
    // make Cargo run this script on every build.
    let mut watched: Vec<PathBuf> = Vec::new();
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        watched.push(PathBuf::from(&git_dir).join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        watched.push(PathBuf::from(&common).join("packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(PathBuf::from(&common).join(branch));
        }
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `git ARGS` in the package directory: its trimmed output, or `None` on any failure.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
