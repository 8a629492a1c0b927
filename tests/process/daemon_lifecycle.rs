//! Process-level behaviour of `topicfs mount`: background start, start failures, and every way
//! of ending it (SIGTERM, SIGINT, fusermount3 -u, umount), each leaving a cleanly shut down
//! data dir.

use crate::common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use common::{Dirs, MountGuard, is_mounted, sh, topicfs, wait_until};
use nix::sys::signal::Signal;

const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// Appends `lines` to a new topic `t` through the mount.
fn produce(m: &MountGuard, lines: &str) {
    if !m.path("t").exists() {
        fs::create_dir(m.path("t")).unwrap();
    }
    fs::write(m.path("t/0/append"), lines).unwrap();
}

/// The data dir was shut down cleanly: marker present, and the active segment's indexes are
/// trimmed to their entries (not the preallocated segment.index.bytes).
fn assert_clean_shutdown(data: &Path) {
    assert!(data.join(CLEAN_SHUTDOWN_MARKER).exists(), "no clean-shutdown marker");
    let partition = data.join("t-0");
    for (suffix, entry) in [("index", 8), ("timeindex", 12)] {
        let index = partition.join(format!("00000000000000000000.{suffix}"));
        let len = fs::metadata(&index).unwrap().len();
        assert!(len < 10 * 1024 * 1024, "{} not trimmed: {len}", index.display());
        assert_eq!(len % entry, 0, "{}: {len} is not whole entries", index.display());
    }
}

#[test]
fn background_parent_exits_zero_only_once_mounted() {
    // MountGuard::background checks the mount is live when the parent has exited 0.
    let m = MountGuard::background(&[]);
    produce(&m, "x\n");
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "x\n");
}

#[test]
fn missing_data_dir_fails_with_a_message_and_mounts_nothing() {
    let dirs = Dirs::new();
    let missing = dirs.root.path().join("nope");
    let out = topicfs().arg("mount").arg(&missing).arg(dirs.mnt()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope"), "message names the dir: {stderr}");
    assert!(!is_mounted(&dirs.mnt()));
}

#[test]
fn mountpoint_that_is_a_file_fails_with_a_message() {
    let dirs = Dirs::new();
    let file = dirs.root.path().join("file");
    fs::write(&file, "").unwrap();
    let out = topicfs().arg("mount").arg(dirs.data()).arg(&file).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a directory"), "{stderr}");
}

#[test]
fn busy_mountpoint_fails_with_a_message() {
    let m = MountGuard::foreground(&[]);
    let other = Dirs::new();
    let out = topicfs().arg("mount").arg(other.data()).arg(m.mnt()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("busy"), "{stderr}");
    // The first mount still works.
    produce(&m, "still\n");
}

#[test]
fn locked_data_dir_fails_in_the_foreground_too() {
    let m = MountGuard::foreground(&[]);
    let other = Dirs::new();
    let out = topicfs().arg("mount").arg("-f").arg(m.data()).arg(other.mnt()).output().unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    assert!(!is_mounted(&other.mnt()));
}

#[test]
fn sigterm_ends_the_daemon_cleanly() {
    let mut m = MountGuard::foreground(&[]);
    produce(&m, "a\nb\n");
    m.signal(Signal::SIGTERM);
    let status = m.wait_ended().unwrap();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&m.mnt()));
    assert_clean_shutdown(&m.data());
}

#[test]
fn sigint_ends_the_daemon_cleanly() {
    let mut m = MountGuard::foreground(&[]);
    produce(&m, "a\n");
    m.signal(Signal::SIGINT);
    let status = m.wait_ended().unwrap();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&m.mnt()));
    assert_clean_shutdown(&m.data());
}

#[test]
fn sigterm_with_a_file_held_open_still_ends_the_daemon() {
    let mut m = MountGuard::foreground(&[]);
    produce(&m, "a\n");
    let held = fs::File::open(m.path("t/0/by-offset/0")).unwrap();
    m.signal(Signal::SIGTERM);
    let status = m.wait_ended().unwrap();
    assert!(status.success(), "{status}");
    drop(held);
    assert!(!is_mounted(&m.mnt()));
    assert_clean_shutdown(&m.data());
}

#[test]
fn fusermount_u_ends_the_background_daemon_cleanly() {
    let mut m = MountGuard::background(&[]);
    produce(&m, "a\n");
    assert!(Command::new("fusermount3").arg("-u").arg(m.mnt()).status().unwrap().success());
    m.wait_ended();
    assert_clean_shutdown(&m.data());
}

#[test]
fn umount_ends_the_background_daemon_cleanly() {
    let mut m = MountGuard::background(&[]);
    produce(&m, "a\n");
    assert!(Command::new("umount").arg(m.mnt()).status().unwrap().success());
    m.wait_ended();
    assert_clean_shutdown(&m.data());
}

#[test]
fn topicfs_unmount_ends_the_daemon_cleanly() {
    let mut m = MountGuard::background(&[]);
    produce(&m, "a\n");
    assert!(topicfs().arg("unmount").arg(m.mnt()).status().unwrap().success());
    m.wait_ended();
    assert_clean_shutdown(&m.data());
}

#[test]
fn pending_partial_line_is_appended_at_shutdown() {
    use std::io::Write;
    let mut m = MountGuard::foreground(&[]);
    produce(&m, "whole\n");
    let mut file = fs::OpenOptions::new().append(true).open(m.path("t/0/append")).unwrap();
    file.write_all(b"tail-without-newline").unwrap();
    m.signal(Signal::SIGTERM);
    m.wait_ended();
    drop(file);
    let m = MountGuard::foreground_on(restart_dirs(m), &[]);
    assert_eq!(
        fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(),
        "whole\ntail-without-newline\n"
    );
}

#[test]
fn restart_on_the_same_data_dir_loses_nothing() {
    let m = MountGuard::foreground(&[]);
    produce(&m, &(1..=1000).map(|i| format!("{i}\n")).collect::<String>());
    let before = fs::read(m.path("t/0/by-offset/0.json")).unwrap();
    let dirs = m.unmount();
    let m = MountGuard::background_on(dirs, &[]);
    assert_eq!(fs::read(m.path("t/0/by-offset/0.json")).unwrap(), before);
    produce(&m, "1001\n");
    assert_eq!(sh(&format!("tail -n 2 {}", m.path("t/0/by-offset/0").display())), "1000\n1001\n");
}

/// The dirs of a guard whose process already ended.
fn restart_dirs(m: MountGuard) -> Dirs {
    wait_until("the mount to go away", || !is_mounted(&m.mnt()));
    m.into_dirs()
}

#[test]
fn mount_options_reach_the_kernel() {
    let m = MountGuard::foreground(&["-o", "fsname=kafka-test,noatime", "-o", "allow_other"]);
    let line = mountinfo_line(&m.mnt());
    assert!(line.contains(" kafka-test "), "{line}");
    assert!(line.contains("noatime"), "{line}");
    assert!(line.contains("allow_other"), "{line}");
    assert!(line.contains("default_permissions"), "{line}");
}

/// `mnt`'s line in /proc/self/mountinfo.
fn mountinfo_line(mnt: &Path) -> String {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
        .unwrap()
        .to_string()
}

/// The file system type and the source of `mnt` (the fields after the ` - ` separator).
fn mount_type_and_source(mnt: &Path) -> (String, String) {
    let line = mountinfo_line(mnt);
    let after = line.split(" - ").nth(1).unwrap().to_string();
    let mut fields = after.split(' ');
    (fields.next().unwrap().to_string(), fields.next().unwrap().to_string())
}

#[test]
fn the_mount_is_of_type_fuse_topicfs_with_the_data_dir_as_source() {
    let m = MountGuard::background(&[]);
    let (fstype, source) = mount_type_and_source(&m.mnt());
    assert_eq!(fstype, "fuse.topicfs");
    assert_eq!(source, m.data().to_str().unwrap());
    // findmnt and umount -t find it by that type.
    let found = sh(&format!("findmnt -n -t fuse.topicfs -o TARGET {}", m.mnt().display()));
    assert_eq!(found.trim(), m.mnt().to_str().unwrap());
    let dirs = m.unmount();
    // subtype= and fsname= name them.
    let m = MountGuard::foreground_on(dirs, &["-o", "subtype=kafka,fsname=prod-logs"]);
    assert_eq!(mount_type_and_source(&m.mnt()), ("fuse.kafka".into(), "prod-logs".into()));
}

#[test]
fn read_only_option_mounts_read_only() {
    let m = MountGuard::foreground(&["-o", "ro"]);
    let err = fs::create_dir(m.path("t")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
}

/// fstab type `fuse.topicfs`: mount(8) runs mount.fuse3 (from fuse3), which runs
/// `topicfs SOURCE MOUNTPOINT -o OPTIONS` from PATH. Here mount.fuse3 is run as mount(8) runs
/// it, with the built binary's directory first in PATH.
#[test]
fn fstab_type_fuse_topicfs_mounts_through_mount_fuse3_with_topicfs_options() {
    let dirs = Dirs::new();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_topicfs")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let log_file = dirs.root.path().join("fstab.log");
    let options = format!(
        "rw,_netdev,nofail,partitions=2,segment.bytes=4096,log_file={}",
        log_file.display()
    );
    let mut command = Command::new("/sbin/mount.fuse3");
    command
        .arg(dirs.data())
        .arg(dirs.mnt())
        .args(["-t", "topicfs", "-o", &options])
        .env("PATH", path);
    let m = MountGuard::background_with(dirs, command);
    // log_file= reached the daemon.
    let logged = fs::read_to_string(&log_file).unwrap();
    assert!(logged.contains(&format!("mounted {}", m.data().display())), "{logged}");
    fs::create_dir(m.path("t")).unwrap();
    let mut partitions: Vec<String> = fs::read_dir(m.path("t"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.parse::<u32>().is_ok())
        .collect();
    partitions.sort();
    assert_eq!(partitions, ["0", "1"], "partitions=2 reached --partitions");
    // segment.bytes=4096 reached the log settings: 100 lines of 100 bytes roll segments.
    let line = format!("{}\n", "x".repeat(99));
    for _ in 0..100 {
        fs::OpenOptions::new()
            .append(true)
            .open(m.path("t/1/append"))
            .unwrap()
            .write_all(line.as_bytes())
            .unwrap();
    }
    let logs = fs::read_dir(m.path("t/1/segments"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".log"))
        .count();
    assert!(logs > 1, "one segment only: segment.bytes was not applied");
    let data = m.data();
    let status = Command::new("umount").arg(m.mnt()).status().unwrap();
    assert!(status.success());
    let _dirs = m.into_dirs();
    assert!(data.join(CLEAN_SHUTDOWN_MARKER).exists(), "no clean shutdown after umount");
}

/// fstab type `topicfs`: mount(8) runs `/sbin/mount.topicfs SOURCE MOUNTPOINT -o OPTIONS`
/// (a link to the binary), here run by hand through a link of that name.
#[test]
fn a_mount_topicfs_link_mounts_read_only_with_mount_8_s_options() {
    let dirs = Dirs::new();
    let link = dirs.root.path().join("mount.topicfs");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_topicfs"), &link).unwrap();
    // A topic to look at, written by a first read-write mount.
    let m = MountGuard::background_on(dirs, &[]);
    produce(&m, "a\nb\n");
    let dirs = m.unmount();
    let mut command = Command::new(&link);
    let options = format!(
        "ro,defaults,x-systemd.automount,log_file={}",
        dirs.root.path().join("ro.log").display()
    );
    command.arg(dirs.data()).arg(dirs.mnt()).args(["-n", "-o", &options]);
    let m = MountGuard::background_with(dirs, command);
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "a\nb\n");
    let err = fs::create_dir(m.path("u")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    // An option no one knows is refused before anything is mounted.
    let out = Command::new(&link)
        .arg(m.data())
        .arg(m.dirs_root().join("elsewhere"))
        .args(["-o", "rw,bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
}

/// `name: value` of `MNT/<rel>/info`.
fn info_value(m: &MountGuard, rel: &str, name: &str) -> u64 {
    let info = fs::read_to_string(m.path(&format!("{rel}/info"))).unwrap();
    let prefix = format!("{name}: ");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .parse()
        .unwrap()
}

/// The names of the daemon's threads now.
fn daemon_threads(pid: u32) -> Vec<String> {
    fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .collect()
}

/// Retention and the log cleaner run as periodic tasks of the mount's executor, not on threads
/// of their own: while both keep running passes, every thread of the daemon is its main thread,
/// a FUSE worker, an executor worker or the signal thread (doc/ARCHITECTURE.md, "Threads").
/// Threads started without a name show the process's name, so a second `topicfs` is one.
#[test]
fn a_read_write_daemon_runs_retention_and_the_cleaner_on_its_executor_only() {
    let m = MountGuard::foreground(&[
        "--segment-bytes",
        "1024",
        "--retention-bytes",
        "2048",
        "--retention-ms",
        "-1",
        "--retention-check-interval-ms",
        "100",
        "--cleaner-backoff-ms",
        "100",
    ]);
    fs::create_dir(m.path("t")).unwrap();
    fs::create_dir(m.path("kv")).unwrap();
    fs::write(m.path("kv/config"), "cleanup.policy=compact\n").unwrap();
    let lines: String = (0..400).map(|i| format!("record {i:04} of some length\n")).collect();
    fs::write(m.path("t/0/append"), &lines).unwrap();
    let keyed: String =
        (0..400).map(|i| format!("{{\"key\":\"k{}\",\"payload\":\"v{i}\"}}\n", i % 5)).collect();
    fs::write(m.path("kv/0/append.json"), &keyed).unwrap();
    // Both have run: retention deleted t's oldest segments, the cleaner swapped kv's.
    wait_until("a retention pass", || info_value(&m, "t/0", "log_start_offset") > 0);
    wait_until("a cleaner pass", || info_value(&m, "kv/0", "cleaner_swaps") > 0);
    let allowed = |name: &str| {
        name == "topicfs"
            || name == "topicfs-signals"
            || name.starts_with("fuser-")
            || name.starts_with("topicfs-bg-")
    };
    // Passes go on every 100 ms: look at the threads across at least one more of each (a
    // swap by the cleaner, a deletion by retention, both seen after the first look).
    let swaps = info_value(&m, "kv/0", "cleaner_swaps");
    let start = info_value(&m, "t/0", "log_start_offset");
    let mut looks = 0;
    let more_passes = || {
        info_value(&m, "kv/0", "cleaner_swaps") > swaps
            && info_value(&m, "t/0", "log_start_offset") > start
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while looks < 200 || !more_passes() {
        assert!(std::time::Instant::now() < deadline, "no more passes within 120 s");
        let names = daemon_threads(m.pid);
        let stray: Vec<&String> = names.iter().filter(|n| !allowed(n)).collect();
        assert!(stray.is_empty(), "threads outside the executor: {names:?}");
        let unnamed = names.iter().filter(|n| *n == "topicfs").count();
        assert_eq!(unnamed, 1, "an unnamed thread beside the main one: {names:?}");
        looks += 1;
        if looks % 20 == 0 {
            // New data for the next passes of both.
            fs::write(m.path("kv/0/append.json"), &keyed).unwrap();
            fs::write(m.path("t/0/append"), &lines).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    m.unmount();
}
