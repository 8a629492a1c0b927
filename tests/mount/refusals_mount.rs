//! Refusals through a real mount (issue 31), with shell tools: `mkdir` of Kafka's internal
//! topics and of a partition of one is `EPERM`, so is `append`/`append.json` to one (a broker's
//! `__consumer_offsets`, whose records stay as they were); a topic name colliding with an
//! existing one after `.`→`_` is `EINVAL`; a `mkdir` past `--max-partitions` creates nothing.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::{Dirs, MountGuard};

fn errno(result: std::io::Result<()>) -> i32 {
    result.unwrap_err().raw_os_error().unwrap()
}

/// The bytes of every `.log` of `dir`'s `__consumer_offsets` partitions, by name.
fn offsets_logs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("__consumer_offsets-") {
            for file in fs::read_dir(&path).unwrap() {
                let file = file.unwrap().path();
                if file.extension().is_some_and(|e| e == "log") {
                    out.push((file.display().to_string(), fs::read(&file).unwrap()));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn internal_topics_cannot_be_made_grown_or_appended_to_through_a_mount() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/groups-v1/log-dir");
    let dirs = Dirs::new();
    fs::remove_dir_all(dirs.data()).unwrap();
    assert!(
        Command::new("cp").arg("-a").arg(&fixture).arg(dirs.data()).status().unwrap().success()
    );
    let before = offsets_logs(&dirs.data());
    assert_eq!(before.len(), 50);
    let m = MountGuard::foreground_on(dirs, &["-o", "show_internal"]);
    for topic in ["__consumer_offsets", "__transaction_state", "__cluster_metadata"] {
        let err = fs::create_dir(m.path(topic));
        assert_eq!(
            errno(err),
            if topic == "__consumer_offsets" { libc::EEXIST } else { libc::EPERM }
        );
    }
    assert_eq!(errno(fs::create_dir(m.path("__consumer_offsets/50"))), libc::EPERM);
    for file in ["__consumer_offsets/append", "__consumer_offsets/0/append"] {
        let opened = fs::OpenOptions::new().append(true).open(m.path(file)).map(drop);
        assert_eq!(errno(opened), libc::EPERM, "{file}");
    }
    let json = fs::OpenOptions::new().append(true).open(m.path("__consumer_offsets/append.json"));
    assert_eq!(errno(json.map(drop)), libc::EPERM);
    assert!(!m.data().join("__transaction_state-0").exists());
    let dirs = m.unmount();
    assert_eq!(offsets_logs(&dirs.data()), before, "no record appended to __consumer_offsets");
}

#[test]
fn a_colliding_topic_name_and_a_mkdir_past_the_maximum_are_refused_through_a_mount() {
    let m = MountGuard::foreground(&["--partitions", "2", "--max-partitions", "3"]);
    fs::create_dir(m.path("a.b")).unwrap();
    assert_eq!(errno(fs::create_dir(m.path("a_b"))), libc::EINVAL);
    fs::create_dir(m.path("a.b/2")).unwrap();
    assert_eq!(errno(fs::create_dir(m.path("a.b/3"))), libc::EINVAL);
    let mut names: Vec<String> = fs::read_dir(m.data())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| m.data().join(n).is_dir())
        .collect();
    names.sort();
    assert_eq!(names, ["a.b-0", "a.b-1", "a.b-2"]);
}
