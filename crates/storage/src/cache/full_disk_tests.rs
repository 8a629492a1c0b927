//! The full-disk case, on a real filesystem that fills up: a 16 KiB tmpfs mounted for the test
//! (root only; the guard unmounts it even when the test fails).
use super::*;

struct TmpfsGuard(PathBuf);

impl Drop for TmpfsGuard {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_cache_dir_on_a_full_disk_stores_what_fits_and_never_fails() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16k", "topicfs-cache-test"])
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(status.success(), "mount tmpfs");
    let _guard = TmpfsGuard(tmp.path().to_path_buf());
    let c = SegmentCache::open(&CacheSettings {
        dir: Some(tmp.path().join("cache")),
        max_bytes: 1 << 30,
    });
    assert!(c.dir().is_some());
    let payload = vec![7u8; 3000];
    let id = |base| SegmentIdentity {
        data_dir: PathBuf::from("/data"),
        topic: "t".into(),
        partition: 0,
        base_offset: Offset(base),
        size: 1,
        mtime_ns: 1,
        inode: 1,
        device: 1,
        fingerprint: 1,
    };
    for base in 0..20 {
        c.store(&id(base), EntryKind { extension: "render", tag: 1, prefix: false }, &payload);
    }
    assert!(c.store_warned.load(Ordering::Relaxed), "the full disk was logged");
    // Whatever is there is whole: every entry loads or is absent, none is damaged, and no
    // temporary file is left.
    let mut loaded = 0;
    for base in 0..20 {
        if let Some(p) = c.load(&id(base), EntryKind { extension: "render", tag: 1, prefix: false })
        {
            assert_eq!(p, payload);
            loaded += 1;
        }
    }
    assert!(loaded > 0, "some entries fit");
    assert!(lock(&c.warned).is_empty(), "no entry was damaged");
    let temps = std::fs::read_dir(tmp.path().join("cache"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".tmp"))
        .count();
    assert_eq!(temps, 0);
}
