//! The segment cache on a real mount: a cache dir on a full disk (a 16 KiB tmpfs mounted for
//! the test, unmounted by a guard) and a damaged cache file change nothing that `cat`, `stat`
//! and `tail` see; the log names the files and the cause.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::{Dirs, MountGuard, sh};

/// A tmpfs of `size` mounted on `path` for the test; unmounted on drop, even on failure.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        fs::create_dir_all(path).unwrap();
        sh(&format!("mount -t tmpfs -o size={size} topicfs-test-cache {}", path.display()));
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes `seq 1 N` into topic `t` through a read-write mount with small segments; returns the
/// dirs (unmounted) and what `by-offset/0` reads. The partition is left as a broker would have
/// written it: without what the mount kept beside its segments (these tests are about the
/// cache dir).
fn written(n: usize) -> (Dirs, String) {
    let m = MountGuard::foreground(&["--config", "segment.bytes=16384", "-o", "cache_dir=none"]);
    let p = m.path("t");
    sh(&format!("mkdir {} && seq 1 {n} >> {}/0/append", p.display(), p.display()));
    let expected: String = (1..=n).map(|i| format!("{i}\n")).collect();
    let dirs = m.unmount();
    common::strip_beside_entries(&dirs.data().join("t-0"));
    (dirs, expected)
}

/// What a writable mount without a cache dir learns of what it appended is kept beside the
/// segments, so a later read-only mount without a cache dir, allowed to size only 1 KiB of log
/// per `stat`, shows the exact size at the first `stat` and `tail -n` seeks; the read-only
/// mount writes nothing into the data dir.
#[test]
fn a_log_topicfs_wrote_has_exact_sizes_on_any_later_mount() {
    let m = MountGuard::foreground(&["--config", "segment.bytes=16384", "-o", "cache_dir=none"]);
    let p = m.path("t");
    sh(&format!("mkdir {} && seq 1 100000 >> {}/0/append", p.display(), p.display()));
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    // The sizing that follows the close runs in the background: wait for the active
    // segment's prefix (written after the sealed segments').
    let part = m.dirs_root().join("data").join("t-0");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !common::beside_entries(&part)
        .iter()
        .any(|p| p.to_string_lossy().ends_with(".topicfs-prefix"))
    {
        assert!(std::time::Instant::now() < deadline, "no sizes kept beside the segments");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let dirs = m.unmount();
    let before = sh(&format!("ls -l --time-style=full-iso {}", part.display()));
    let m = MountGuard::foreground_on(
        dirs,
        &["--read-only", "--sizing-budget", "1K", "-o", "cache_dir=none"],
    );
    let stream = m.path("t/0/by-offset/0");
    let size = sh(&format!("stat -c %s {}", stream.display()));
    assert_eq!(size.trim(), expected.len().to_string(), "exact at the first stat");
    assert_eq!(sh(&format!("tail -n 2 {}", stream.display())), "99999\n100000\n");
    assert_eq!(sh(&format!("cat {}", stream.display())), expected);
    let dirs = m.unmount();
    let after = sh(&format!("ls -l --time-style=full-iso {}", dirs.data().join("t-0").display()));
    assert_eq!(after, before, "a read-only mount wrote nothing into the data dir");
}

fn stderr_file(dirs: &Dirs, name: &str) -> (PathBuf, Stdio) {
    let path = dirs.root.path().join(name);
    let file = fs::File::create(&path).unwrap();
    (path, Stdio::from(file))
}

#[test]
fn a_cache_dir_on_a_full_disk_is_logged_and_every_read_stays_exact() {
    let (dirs, expected) = written(100_000);
    let cache = dirs.root.path().join("cache");
    let tmpfs = Tmpfs::mount(&cache, "16k");
    let cache_opt = format!("cache_dir={}", cache.display());
    let (log, stderr) = stderr_file(&dirs, "log");
    let m = MountGuard::foreground_logging_to(dirs, &["--read-only", "-o", &cache_opt], stderr);
    let stream = m.path("t/0/by-offset/0");
    assert_eq!(sh(&format!("cat {}", stream.display())), expected);
    let size = sh(&format!("stat -c %s {}", stream.display()));
    assert_eq!(size.trim(), expected.len().to_string());
    assert_eq!(sh(&format!("tail -n 2 {}", stream.display())), "99999\n100000\n");
    let json = sh(&format!("wc -l < {}", m.path("t/0/by-offset/0.json").display()));
    assert_eq!(json.trim(), "100000");
    let dirs = m.unmount();
    let log = fs::read_to_string(&log).unwrap();
    assert!(log.contains("segment cache: cannot store") && log.contains("No space left"), "{log}");
    // Whatever fit is whole: no entry is damaged, no temporary file is left.
    assert!(!log.contains("damaged"), "{log}");
    assert!(
        fs::read_dir(&cache).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".tmp"))
    );
    drop(tmpfs);
    drop(dirs);
}

#[test]
fn a_damaged_cache_file_is_logged_by_name_ignored_and_rebuilt() {
    let (dirs, expected) = written(50_000);
    let cache = dirs.root.path().join("cache");
    let cache_opt = format!("cache_dir={}", cache.display());
    let m = MountGuard::foreground_on(dirs, &["--read-only", "-o", &cache_opt]);
    assert_eq!(sh(&format!("cat {}", m.path("t/0/by-offset/0").display())), expected);
    let dirs = m.unmount();
    let mut entries: Vec<PathBuf> = fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "render"))
        .collect();
    entries.sort();
    assert!(entries.len() > 5, "{entries:?}");
    let damaged = &entries[1];
    let mut bytes = fs::read(damaged).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(damaged, &bytes).unwrap();

    let (log, stderr) = stderr_file(&dirs, "log");
    let m = MountGuard::foreground_logging_to(
        dirs,
        &["--read-only", "--sizing-budget", "1K", "-o", &cache_opt],
        stderr,
    );
    let stream = m.path("t/0/by-offset/0");
    // Not yet known (the damaged segment must be rendered again), never wrong.
    let size = sh(&format!("stat -c %s {}", stream.display()));
    assert!(size.trim() == "0" || size.trim() == expected.len().to_string(), "{size}");
    assert_eq!(sh(&format!("cat {}", stream.display())), expected);
    assert_eq!(sh(&format!("stat -c %s {}", stream.display())).trim(), expected.len().to_string());
    let _dirs = m.unmount();
    let log = fs::read_to_string(&log).unwrap();
    let named = format!("segment cache entry {}: damaged", damaged.display());
    assert_eq!(log.matches(&named).count(), 1, "{log}");
}
