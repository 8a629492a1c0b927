//! Mounts refused before anything is written (issue 31): a directory that is not a Kafka log
//! dir (writable or read-only, unless `--allow-non-log-dir` for read-only), a mountpoint inside
//! the data dir, and a partition count past the mount's maximum. Each leaves the data dir as it
//! was: the same names, sizes and contents.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::common::{Dirs, MountGuard, failed_mount, is_mounted, topicfs};

/// Every path under `dir` with its contents (`None` for a directory), recursively.
fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            if path.is_dir() {
                stack.push(path);
                out.insert(rel, None);
            } else {
                out.insert(rel, Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// A small copy of `/etc` as the issue found it mounted: `dbus-1/` and `polkit-1/` are named
/// like partitions and hold configuration files.
fn etc_copy(data: &Path) {
    fs::create_dir_all(data.join("dbus-1/system.d")).unwrap();
    fs::write(data.join("dbus-1/system.conf"), "<busconfig/>\n").unwrap();
    fs::write(data.join("dbus-1/system.d/org.freedesktop.conf"), "<busconfig/>\n").unwrap();
    fs::create_dir_all(data.join("polkit-1/rules.d")).unwrap();
    fs::write(data.join("hostname"), "box\n").unwrap();
    fs::write(data.join("passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
}

#[test]
fn a_copy_of_etc_is_refused_writable_and_read_only_and_left_as_it_was() {
    let dirs = Dirs::new();
    etc_copy(&dirs.data());
    let before = snapshot(&dirs.data());
    for args in [&[][..], &["--read-only"], &["--allow-non-log-dir"], &["-o", "allow_non_log_dir"]]
    {
        let (code, stderr) = failed_mount(dirs.data(), &dirs.mnt(), args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("is not a Kafka log dir"), "{args:?}: {stderr}");
        assert!(stderr.contains("dbus-1/system.conf"), "names the entry: {stderr}");
        if args == ["--read-only"] {
            assert!(stderr.contains("--allow-non-log-dir"), "hints at the flag: {stderr}");
        }
        assert_eq!(snapshot(&dirs.data()), before, "{args:?}: the data dir was changed");
    }
    // Read-only with the flag: served, and still nothing written.
    let m = MountGuard::foreground_on(dirs, &["--read-only", "--allow-non-log-dir"]);
    assert!(m.mnt().join("dbus").is_dir(), "dbus-1 shown as a partition of topic dbus");
    let dirs = m.unmount();
    assert_eq!(snapshot(&dirs.data()), before, "a read-only mount wrote into it");
    // Background mode reports the refusal the same way.
    let out = topicfs().arg("mount").arg(dirs.data()).arg(dirs.mnt()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a Kafka log dir"));
    assert!(!is_mounted(&dirs.mnt()));
    assert_eq!(snapshot(&dirs.data()), before);
}

#[test]
fn an_empty_dir_and_a_broker_layout_without_meta_properties_are_mounted() {
    // Empty: a new log dir (topicfs writes meta.properties).
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    let dirs = m.unmount();
    assert!(dirs.data().join("meta.properties").is_file());
    // A broker's names alone, without meta.properties.
    fs::remove_file(dirs.data().join("meta.properties")).unwrap();
    fs::write(dirs.data().join("topicfs-topic-settings"), "").unwrap();
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert!(m.path("t/0/by-offset").is_dir());
}

#[test]
fn a_mountpoint_inside_the_data_dir_is_refused_also_through_a_symlink() {
    let dirs = Dirs::new();
    let inside = dirs.data().join("sub");
    fs::create_dir(&inside).unwrap();
    let before = snapshot(&dirs.data());
    let (code, stderr) = failed_mount(dirs.data(), &inside, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is inside the data dir"), "{stderr}");
    // The same mountpoint reached through a symlink outside the data dir.
    let link = dirs.root.path().join("link");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let (code, stderr) = failed_mount(dirs.data(), &link, &["--read-only"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is inside the data dir"), "{stderr}");
    assert_eq!(snapshot(&dirs.data()), before, "nothing written");
}

#[test]
fn partitions_past_the_mount_maximum_fail_at_once_as_a_usage_error() {
    let dirs = Dirs::new();
    for args in [
        &["--partitions", "4294967295"][..],
        &["--partitions", "11", "--max-partitions", "10"],
        &["--max-partitions", "4294967295"],
    ] {
        let (code, stderr) = failed_mount(dirs.data(), &dirs.mnt(), args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("partitions"), "{args:?}: {stderr}");
    }
    assert!(snapshot(&dirs.data()).is_empty(), "nothing written");
}
