//! Access control on a real mount, checked as a second, unprivileged user created for the test:
//! `uid=`, `gid=`, `umask=`, `file_mode=` and `dir_mode=` (as `-o` options and as flags) decide
//! who may list, read, append and mkdir, on every kind of file, and refusals are `EACCES`.
//!
//! Needs root (useradd, a mount with allow_other); prints `SKIPPED` otherwise. The user and its
//! group are removed by a guard, even when the test fails.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use common::{Dirs, MountGuard};

/// Directories of every kind, listed with `ls`.
const DIRS: &[&str] =
    &["", "t", "t/offsets", "t/by-time", "t/0", "t/0/by-offset", "t/0/by-time", "t/0/segments"];
/// Files of every kind that can be read, read with `cat`.
const FILES: &[&str] = &[
    "t/info",
    "t/offsets/0",
    "t/by-time/0",
    "t/0/info",
    "t/0/check",
    "t/0/by-offset/0",
    "t/0/by-offset/0.json",
    "t/0/by-time/0.raw",
    "t/0/segments/00000000000000000000.log",
    "t/0/segments/00000000000000000000.index",
    "t/0/segments/00000000000000000000.timeindex",
    "t/0/segments/00000000000000000000.log.dump",
    "t/0/segments/00000000000000000000.index.dump",
];
/// Append files and the line each is written.
const APPENDS: &[(&str, &str)] = &[
    ("t/0/append", "by-user"),
    ("t/0/append.json", r#"{"payload":"by-user-json"}"#),
    ("t/append", "by-user-topic"),
    ("t/append.json", r#"{"key":"k","payload":"by-user-topic-json"}"#),
];

/// A system user and its group, made with `useradd --user-group`; `userdel` on drop.
struct TestUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl TestUser {
    fn create() -> TestUser {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("tfs{}u{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        // useradd and userdel lock /etc/passwd: tests in other processes may hold it a moment.
        retry("useradd", || {
            Command::new("useradd")
                .args(["--system", "--user-group", "--no-create-home"])
                .args(["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", &name])
                .output()
                .unwrap()
        });
        // From here on the guard removes the user, whatever happens.
        let mut user = TestUser { name, uid: 0, gid: 0 };
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").arg(flag).arg(&user.name).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        (user.uid, user.gid) = (id("-u"), id("-g"));
        assert_ne!(user.uid, 0);
        user
    }

    /// Runs `sh -c script` as this user (its own group, no others).
    fn run(&self, script: &str) -> Output {
        Command::new("setpriv")
            .arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .args(["--clear-groups", "sh", "-c", script])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        retry("userdel", || Command::new("userdel").arg(&self.name).output().unwrap());
    }
}

fn retry(what: &str, mut run: impl FnMut() -> Output) {
    for _ in 0..50 {
        let out = run();
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        if !err.contains("lock") {
            panic!("{what} failed: {err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{what}: /etc/passwd stayed locked");
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What the user should be able to do.
#[derive(Copy, Clone, Debug)]
struct Allowed {
    list: bool,
    read: bool,
    append: bool,
    mkdir: bool,
}

/// A mount with `allow_other` and `args`, holding topic `t` (one partition with records in a
/// segment) on dirs any user may traverse.
fn mount(args: &[&str]) -> MountGuard {
    let dirs = Dirs::new();
    fs::set_permissions(dirs.root.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mut all = vec!["-o", "allow_other"];
    all.extend_from_slice(args);
    let m = MountGuard::foreground_on(dirs, &all);
    // Root may do anything (CAP_DAC_OVERRIDE): the owner's data is written as root.
    fs::create_dir(m.path("t")).unwrap();
    fs::write(m.path("t/0/append"), "by-root\n").unwrap();
    m
}

/// Checks each kind of access as `user`: what `allowed` says succeeds, everything else fails
/// with EACCES ("Permission denied") and changes nothing.
fn check(m: &MountGuard, user: &TestUser, allowed: Allowed) {
    let refused = |out: &Output, what: &str| {
        assert!(!out.status.success(), "{what} was allowed, expected EACCES");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{what}: expected EACCES, got {err}");
    };
    let succeeded = |out: &Output, what: &str| {
        assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    };
    let path = |rel: &str| m.path(rel).display().to_string();
    for dir in DIRS {
        let out = user.run(&format!("ls -a '{}'", path(dir)));
        let what = format!("ls MNT/{dir}");
        if allowed.list { succeeded(&out, &what) } else { refused(&out, &what) }
    }
    for file in FILES {
        let out = user.run(&format!("cat '{}' >/dev/null", path(file)));
        let what = format!("cat MNT/{file}");
        if allowed.read { succeeded(&out, &what) } else { refused(&out, &what) }
    }
    let records = || fs::read_to_string(m.path("t/0/by-offset/0")).unwrap();
    let before = records();
    for (file, line) in APPENDS {
        let out = user.run(&format!("printf '%s\\n' '{line}' >> '{}'", path(file)));
        let what = format!("append to MNT/{file}");
        if allowed.append { succeeded(&out, &what) } else { refused(&out, &what) }
    }
    let after = records();
    if allowed.append {
        // One partition: the topic-level appends land in partition 0 too.
        for value in ["by-user\n", "by-user-json\n", "by-user-topic\n", "by-user-topic-json\n"] {
            assert!(after.contains(value), "{value:?} missing from {after:?}");
        }
    } else {
        assert_eq!(after, before, "a refused append changed the log");
    }
    for (dir, what) in [("u", "mkdir of a topic"), ("t/1", "mkdir of a partition")] {
        let out = user.run(&format!("mkdir '{}'", path(dir)));
        if allowed.mkdir {
            succeeded(&out, what);
            assert!(m.path(dir).is_dir(), "{what}: no directory");
        } else {
            refused(&out, what);
            assert!(!m.path(dir).exists(), "{what}: refused, yet it exists");
        }
    }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("SKIPPED: needs root (useradd, allow_other)");
            return;
        }
    };
}

#[test]
fn the_owner_named_by_uid_and_gid_reads_appends_and_creates() {
    require_root!();
    let user = TestUser::create();
    let options = format!("uid={0},gid={0},file_mode=0600,dir_mode=0700", user.name);
    let m = mount(&["-o", &options]);
    let out = user.run(&format!(
        "stat -c '%a %u %g' '{}' '{}'",
        m.path("t/0/info").display(),
        m.path("t/0/append").display()
    ));
    let stat = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stat, format!("400 {0} {1}\n200 {0} {1}\n", user.uid, user.gid));
    check(&m, &user, Allowed { list: true, read: true, append: true, mkdir: true });
}

#[test]
fn a_group_member_reads_but_cannot_write_without_group_write_bits() {
    require_root!();
    let user = TestUser::create();
    // The flag spellings.
    let m = mount(&["--gid", &user.name, "--file-mode", "0640", "--dir-mode", "0750"]);
    check(&m, &user, Allowed { list: true, read: true, append: false, mkdir: false });
}

#[test]
fn a_group_member_appends_and_creates_with_umask_007() {
    require_root!();
    let user = TestUser::create();
    let options = format!("gid={},umask=007", user.gid);
    let m = mount(&["-o", &options]);
    check(&m, &user, Allowed { list: true, read: true, append: true, mkdir: true });
}

#[test]
fn others_list_directories_but_are_refused_every_file_without_other_bits() {
    require_root!();
    let user = TestUser::create();
    let m = mount(&["-o", "file_mode=0660,dir_mode=0755"]);
    check(&m, &user, Allowed { list: true, read: false, append: false, mkdir: false });
}

#[test]
fn umask_077_refuses_others_everything() {
    require_root!();
    let user = TestUser::create();
    let m = mount(&["-o", "umask=077"]);
    check(&m, &user, Allowed { list: false, read: false, append: false, mkdir: false });
}

#[test]
fn default_modes_let_others_read_but_not_write() {
    require_root!();
    let user = TestUser::create();
    let m = mount(&[]);
    check(&m, &user, Allowed { list: true, read: true, append: false, mkdir: false });
}
