//! Real mounts of a cluster (`topicfs mount kafka://HOST:PORT MNT`) driven with shell tools,
//! against tansu 0.6.0 (SQLite engine, one broker per test, `common::tansu::Tansu`). Every
//! mount is unmounted by `MountGuard` even when a test fails. Needs root (or fusermount3),
//! /dev/fuse, jq, and the broker built by `scripts/install-deps`.

use crate::common;

use std::ffi::OsString;
use std::process::Stdio;

use common::tansu::{Tansu, free_port};
use common::{Dirs, Follower, MountGuard, is_mounted, sh, sh_output, topicfs};

fn mount(broker: &Tansu, args: &[&str]) -> MountGuard {
    let mut all = vec!["--config", "request.timeout.ms=10000"];
    all.extend_from_slice(args);
    let source = OsString::from(broker.bootstrap());
    MountGuard::foreground_source(Dirs::new(), &source, &all, Stdio::inherit())
}

#[test]
fn cluster_mount_shell_tools_list_append_and_stream() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    assert_eq!(sh(&format!("ls {mnt}")), "t\n");
    let part = sh(&format!("ls {mnt}/t/0"));
    assert!(part.contains("by-offset\n") && part.contains("append\n"), "{part}");
    assert!(!part.contains("segments"), "{part}");
    let out = sh_output(&format!("ls {mnt}/t/0/segments"));
    assert!(!out.status.success());
    sh(&format!("printf 'a\\nb\\n' >> {mnt}/t/0/append"));
    sh(&format!("printf 'c\\nd\\n' >> {mnt}/t/0/append"));
    assert_eq!(sh(&format!("cat {mnt}/t/0/by-offset/0")), "a\nb\nc\nd\n");
    assert_eq!(sh(&format!("head -n 1 {mnt}/t/0/by-offset/0")), "a\n");
    assert_eq!(sh(&format!("wc -l < {mnt}/t/0/by-offset/0")).trim(), "4");
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/0")), "c\nd\n");
    let info = sh(&format!("cat {mnt}/t/0/info"));
    assert!(info.contains("log_end_offset: 4\n"), "{info}");
    assert!(!info.contains("segments"), "{info}");
    assert_eq!(
        sh(&format!("jq -c '[.offset, .payload]' {mnt}/t/0/by-offset/0.json")),
        "[0,\"a\"]\n[1,\"b\"]\n[2,\"c\"]\n[3,\"d\"]\n"
    );
    m.unmount();
}

#[test]
fn cluster_mount_tail_f_sees_a_later_append() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    sh(&format!("mkdir {}", m.path("t").display()));
    sh(&format!("printf 'first\\n' >> {}", m.path("t/0/append").display()));
    let stream = m.path("t/0/by-offset/0");
    let mut follower = Follower::start("tail", &["-f", "-s", "0.2", stream.to_str().unwrap()]);
    follower.wait_for("first\n");
    sh(&format!("printf 'later\\n' >> {}", m.path("t/0/append").display()));
    assert_eq!(follower.wait_for("later\n"), "first\nlater\n");
    drop(follower);
    m.unmount();
}

#[test]
fn cluster_mount_with_no_broker_fails_with_the_address() {
    let port = free_port();
    let dirs = Dirs::new();
    let addr = format!("127.0.0.1:{port}");
    let out = topicfs()
        .arg("mount")
        .arg(format!("kafka://{addr}"))
        .arg(dirs.mnt())
        .args(["--config", "request.timeout.ms=2000"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
    assert!(!is_mounted(&dirs.mnt()));
}

#[test]
fn cluster_mount_refuses_an_unknown_client_setting_by_name() {
    let dirs = Dirs::new();
    let out = topicfs()
        .arg("mount")
        .arg("kafka://127.0.0.1:1")
        .arg(dirs.mnt())
        .args(["--config", "no.such.setting=1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("no.such.setting"), "{stderr}");
    assert!(!is_mounted(&dirs.mnt()));
}

#[test]
fn cluster_mount_streams_of_not_yet_known_size_read_whole_with_shell_tools() {
    let broker = Tansu::start();
    let m = mount(&broker, &["--sizing-budget", "1"]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    for i in 0..20 {
        sh(&format!("printf '{i}\\n' >> {mnt}/t/0/append"));
    }
    let all: String = (0..20).map(|i| format!("{i}\n")).collect();
    assert_eq!(sh(&format!("cat {mnt}/t/0/by-offset/0")), all);
    assert_eq!(sh(&format!("wc -l < {mnt}/t/0/by-offset/0")).trim(), "20");
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/0")), "18\n19\n");
    assert_eq!(sh(&format!("jq -c .offset {mnt}/t/0/by-offset/15.json | wc -l")).trim(), "5");
    m.unmount();
}
