//! One broker's several log dirs (`log.dirs=a,b,c`) mounted as one tree: the fixture in
//! `tests/fixtures/jbod-v1` (three dirs written by kafka-python's codec, see its README) through
//! real `topicfs mount a,b,c MNT` mounts: every partition once, record for record; topic views
//! and groups over all dirs; placement of new partitions by Kafka's rule; refusals of dirs of two
//! brokers; a partition in two dirs; a `-future` move; a dir whose disk fails under the mount.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::corpus::copy_tree;
use common::{Dirs, MountGuard, failed_mount, sh_output};
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jbod-v1")
}

fn manifest() -> Value {
    serde_json::from_slice(&fs::read(fixture().join("manifest.json")).unwrap()).unwrap()
}

/// A copy of the fixture's three dirs under `dirs`' root: `a`, `b`, `c`.
fn copy_fixture(dirs: &Dirs) -> Vec<PathBuf> {
    ["a", "b", "c"]
        .iter()
        .map(|d| {
            let to = dirs.root.path().join(d);
            copy_tree(&fixture().join(d), &to);
            to
        })
        .collect()
}

fn source(paths: &[PathBuf]) -> std::ffi::OsString {
    let joined: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    joined.join(",").into()
}

fn mount(dirs: Dirs, paths: &[PathBuf], args: &[&str]) -> MountGuard {
    MountGuard::foreground_source(dirs, &source(paths), args, Stdio::inherit())
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn b64(v: &Value) -> Option<Vec<u8>> {
    v.as_str().map(|s| STANDARD.decode(s).unwrap())
}

fn text_or_base64(line: &Value, field: &str) -> Option<Vec<u8>> {
    let v = line[field].as_str()?;
    if line[format!("{field}_encoding")] == "base64" {
        Some(STANDARD.decode(v).unwrap())
    } else {
        Some(v.as_bytes().to_vec())
    }
}

/// `@info` as key → value.
fn mount_info(mnt: &Path) -> BTreeMap<String, String> {
    read(&mnt.join("@info"))
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_brokers_three_log_dirs_read_as_one_tree_record_for_record() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    let before: Vec<String> = paths.iter().map(|p| tree(p)).collect();
    let m = mount(dirs, &paths, &["--read-only"]);
    let mnt = m.mnt();
    let want = manifest();
    assert_eq!(common::sh(&format!("ls {}", mnt.display())), "events\norders\nsolo\n");
    assert!(common::sh(&format!("ls {}/orders", mnt.display())).contains("0\n1\n2\n3\n"));
    let mut total = BTreeMap::new();
    for p in want["partitions"].as_array().unwrap() {
        let (topic, partition) = (p["topic"].as_str().unwrap(), p["partition"].as_u64().unwrap());
        if topic.starts_with("__") {
            continue;
        }
        let start = p["log_start_offset"].as_i64().unwrap();
        let stream = mnt.join(format!("{topic}/{partition}/by-offset/{start}.json"));
        let lines: Vec<Value> =
            read(&stream).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let records: Vec<&Value> = p["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["offset"].as_i64().unwrap() >= start)
            .collect();
        assert_eq!(lines.len(), records.len(), "{topic}-{partition} in {}", p["log_dir"]);
        for (line, r) in lines.iter().zip(&records) {
            assert_eq!(line["offset"], r["offset"], "{topic}-{partition}");
            assert_eq!(line["ts"], r["timestamp"], "{topic}-{partition}");
            assert_eq!(text_or_base64(line, "key"), b64(&r["key"]), "{topic}-{partition}");
            assert_eq!(text_or_base64(line, "payload"), b64(&r["value"]), "{topic}-{partition}");
        }
        let info = read(&mnt.join(format!("{topic}/{partition}/info")));
        assert!(info.contains(&format!("log_end_offset: {}\n", p["log_end_offset"])), "{info}");
        *total.entry(topic.to_string()).or_insert(0) += records.len();
    }
    // Topic views over every partition, whichever dir holds it.
    for topic in ["orders", "events", "solo"] {
        let latest = read(&mnt.join(format!("{topic}/offsets/-1")));
        let earliest = read(&mnt.join(format!("{topic}/offsets/-2")));
        for p in want["partitions"].as_array().unwrap().iter().filter(|p| p["topic"] == topic) {
            let n = p["partition"].as_u64().unwrap();
            let end = format!("{topic}:{n}:{}\n", p["log_end_offset"]);
            let start = format!("{topic}:{n}:{}\n", p["log_start_offset"]);
            assert!(latest.contains(&end), "{latest} lacks {end}");
            assert!(earliest.contains(&start), "{earliest} lacks {start}");
        }
        let merged: Vec<Value> = read(&mnt.join(format!("{topic}/by-time/0.json")))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(merged.len(), total[topic], "{topic}: every partition's records, merged");
        let times: Vec<i64> = merged.iter().map(|l| l["ts"].as_i64().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{topic}: by timestamp: {times:?}");
    }
    // Groups: `__consumer_offsets` partitions sit in a and b.
    for (group, topics) in want["groups"].as_object().unwrap() {
        for (topic, committed) in topics.as_object().unwrap() {
            let text = read(&mnt.join(format!("{topic}/groups/{group}/offsets")));
            for (p, offset) in committed.as_object().unwrap() {
                let line = text
                    .lines()
                    .find(|l| l.split(' ').next() == Some(p.as_str()))
                    .unwrap_or_else(|| panic!("{group}/{topic}: no partition {p} in {text}"));
                assert_eq!(line.split(' ').nth(1), Some(offset.to_string().as_str()), "{text}");
            }
        }
    }
    let info = mount_info(&mnt);
    assert_eq!(info["log_dirs"], "3");
    assert_eq!(info["log_dirs_offline"], "0");
    assert_eq!(info["log_dir.2.path"], paths[2].canonicalize().unwrap().display().to_string());
    assert_eq!(info["log_dir.0.partitions"], "4", "orders-0, orders-3, events-2, offsets-0");
    assert_eq!(info["log_dir.2.state"], "online");
    assert_eq!(info["duplicate_partitions"], "0");
    let dirs = m.unmount();
    let after: Vec<String> = paths.iter().map(|p| tree(p)).collect();
    assert_eq!(before, after, "a read-only mount changes nothing in any dir");
    drop(dirs);
}

/// Every name under `dir` with its size, mode and mtime, and a hash of its bytes.
fn tree(dir: &Path) -> String {
    common::sh(&format!(
        "cd {} && find . -printf '%p %s %m %T@\\n' | sort && find . -type f | sort | xargs md5sum",
        dir.display()
    ))
}

/// Where Kafka's `LogManager.nextLogDirs` puts the next partition: the dir holding the fewest,
/// ties in `log.dirs` order (three dirs: Scala's small maps keep insertion order).
fn kafka_next(counts: &[usize]) -> usize {
    (0..counts.len()).min_by_key(|&i| (counts[i], i)).unwrap()
}

fn partition_dirs(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name().to_string_lossy().into_owned();
            e.as_ref().unwrap().path().is_dir()
                && name.rsplit_once('-').is_some_and(|(_, p)| p.parse::<u32>().is_ok())
        })
        .count()
}

#[test]
fn mkdir_places_each_new_partition_where_kafkas_rule_puts_it() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    let m = mount(dirs, &paths, &["--partitions", "2"]);
    let mnt = m.mnt();
    let mut counts: Vec<usize> = paths.iter().map(|p| partition_dirs(p)).collect();
    assert_eq!(counts, [4, 3, 3]);
    let mut expected: Vec<(String, usize)> = Vec::new();
    for (n, topic) in ["new1", "new2", "new3", "new4"].iter().enumerate() {
        fs::create_dir(mnt.join(topic)).unwrap();
        for p in 0..2 {
            let at = kafka_next(&counts);
            counts[at] += 1;
            expected.push((format!("{topic}-{p}"), at));
        }
        if n == 1 {
            // A partition added to an existing topic follows the same rule.
            fs::create_dir(mnt.join("new1/2")).unwrap();
            let at = kafka_next(&counts);
            counts[at] += 1;
            expected.push(("new1-2".to_string(), at));
        }
    }
    for (name, at) in &expected {
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(p.join(name).is_dir(), i == *at, "{name} in {}", p.display());
        }
    }
    // Appends land in the dir that holds the partition, and read back through the mount.
    fs::write(mnt.join("new3/1/append"), "hello\n").unwrap();
    assert_eq!(read(&mnt.join("new3/1/by-offset/0")), "hello\n");
    // A group commit goes to its `__consumer_offsets` partition, whichever dir holds it.
    fs::create_dir_all(mnt.join("orders/groups/fresh")).unwrap();
    fs::write(mnt.join("orders/groups/fresh/offsets"), "1 4\n").unwrap();
    let offsets = read(&mnt.join("orders/groups/fresh/offsets"));
    assert!(offsets.lines().any(|l| l.starts_with("1 4 ")), "{offsets}");
    let dirs = m.unmount();
    // Each dir's recovery points name only its partitions.
    for (i, p) in paths.iter().enumerate() {
        let checkpoint = read(&p.join("recovery-point-offset-checkpoint"));
        for (name, at) in &expected {
            let (topic, n) = name.rsplit_once('-').unwrap();
            let listed = checkpoint.lines().any(|l| l.starts_with(&format!("{topic} {n} ")));
            assert_eq!(listed, i == *at, "{name} in {}: {checkpoint}", p.display());
        }
        assert!(p.join(".kafka_cleanshutdown").exists());
    }
    drop(dirs);
}

#[test]
fn dirs_of_two_brokers_are_refused_naming_the_files_and_nothing_is_written() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    let meta = paths[2].join("meta.properties");
    let text = read(&meta).replace("node.id=1", "node.id=2");
    fs::write(&meta, text).unwrap();
    let (code, stderr) = failed_mount(source(&paths), &dirs.mnt(), &["-f"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&format!("{} has node id 2", meta.display())), "{stderr}");
    assert!(stderr.contains("a/meta.properties has node id 1"), "{stderr}");
    for p in &paths {
        // A writable open would have removed the clean-shutdown marker first.
        assert!(p.join(".kafka_cleanshutdown").exists(), "{}", p.display());
    }
    // Another cluster.id is refused the same way.
    let text = read(&meta).replace("node.id=2", "node.id=1");
    let id = manifest()["cluster_id"].as_str().unwrap().to_string();
    fs::write(&meta, text.replace(&id, "AAAAAAAAAAAAAAAAAAAAAA")).unwrap();
    let (code, stderr) = failed_mount(source(&paths), &dirs.mnt(), &["-f", "--read-only"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cluster.id=AAAAAAAAAAAAAAAAAAAAAA"), "{stderr}");
}

#[test]
fn a_partition_in_two_dirs_is_shown_in_neither_and_a_future_move_shows_the_current_replica() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    // orders-0 (in a) copied into c: two current replicas.
    copy_tree(&paths[0].join("orders-0"), &paths[2].join("orders-0"));
    // events-0 (in b) being moved to c: a future replica there, half copied.
    let future = paths[2].join("events-0.0f1e2d3c4b5a69788796a5b4c3d2e1f0-future");
    fs::create_dir(&future).unwrap();
    fs::copy(
        paths[1].join("events-0/00000000000000000000.log"),
        future.join("00000000000000000000.log"),
    )
    .unwrap();
    let m = mount(dirs, &paths, &["--read-only"]);
    let mnt = m.mnt();
    let listing = common::sh(&format!("ls {}/orders", mnt.display()));
    assert!(listing.contains("1\n2\n3\n") && !listing.starts_with("0\n"), "{listing}");
    let err = sh_output(&format!("cat {}/orders/0/info", mnt.display()));
    assert!(!err.status.success(), "a duplicate is not served");
    let info = mount_info(&mnt);
    assert_eq!(info["duplicate_partitions"], "1", "{info:?}");
    let held = &info["duplicate.orders.0"];
    assert!(held.contains("/a") && held.contains("/c"), "{held}");
    // events-0 from b, all six records.
    let events = read(&mnt.join("events/0/by-offset/0"));
    assert_eq!(events.lines().count(), 6, "{events}");
    m.unmount();
}

/// A loop-mounted ext4 image at `at`, unmounted on drop.
struct LoopFs {
    at: PathBuf,
}

impl LoopFs {
    /// `None` (after saying why) where this kernel or container has no loop devices.
    fn new(image: &Path, at: &Path) -> Option<LoopFs> {
        if !Path::new("/dev/loop-control").exists() {
            eprintln!("SKIPPED: no /dev/loop-control: the failing-disk case needs a loop device");
            return None;
        }
        let ok = |c: &mut Command| c.stdout(Stdio::null()).status().unwrap().success();
        assert!(ok(Command::new("truncate").arg("-s").arg("32M").arg(image)));
        assert!(ok(Command::new("mkfs.ext4").arg("-q").arg(image)), "mkfs.ext4");
        fs::create_dir_all(at).unwrap();
        let mounted =
            Command::new("mount").arg("-o").arg("loop").arg(image).arg(at).output().unwrap();
        if !mounted.status.success() {
            // A container with the device node but no loop device to give (or no right to
            // mount): said loudly; the offline rules are also checked without a kernel
            // (storage's log_dirs tests).
            eprintln!(
                "SKIPPED: mount -o loop failed here ({}): the failing-disk case needs a loop device",
                String::from_utf8_lossy(&mounted.stderr).trim()
            );
            return None;
        }
        Some(LoopFs { at: at.to_path_buf() })
    }

    /// `FS_IOC_SHUTDOWN` (no log flush): from now on every I/O in the file system fails with
    /// EIO, as on a disk that died.
    fn fail(&self) {
        let script = "import fcntl, os, struct, sys\n\
                      fd = os.open(sys.argv[1], os.O_RDONLY)\n\
                      fcntl.ioctl(fd, (2 << 30) | (4 << 16) | (ord('X') << 8) | 125, struct.pack('I', 2))\n";
        let status = Command::new("python3").arg("-c").arg(script).arg(&self.at).status().unwrap();
        assert!(status.success(), "FS_IOC_SHUTDOWN of {}", self.at.display());
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

#[test]
fn a_dir_whose_disk_fails_goes_offline_and_the_others_go_on() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    // c on a file system of its own, which the test makes fail.
    let c = dirs.root.path().join("c-disk");
    let Some(disk) = LoopFs::new(&dirs.root.path().join("c.img"), &c) else { return };
    copy_tree(&paths[2], &c);
    let paths = vec![paths[0].clone(), paths[1].clone(), c.clone()];
    let m = mount(dirs, &paths, &[]);
    let mnt = m.mnt();
    assert_eq!(read(&mnt.join("solo/0/by-offset/0")).lines().count(), 3);
    // df of the mount: both file systems (the loop-mounted one adds its ~32 MB once).
    let bytes = |path: &Path| -> u64 {
        let out = common::sh(&format!("stat -f -c '%b %S' {}", path.display()));
        let (blocks, size) = out.trim().split_once(' ').unwrap();
        blocks.parse::<u64>().unwrap() * size.parse::<u64>().unwrap()
    };
    let (whole, first, loop_fs) = (bytes(&mnt), bytes(&paths[0]), bytes(&c));
    assert!(whole >= first + loop_fs - (1 << 20), "{whole} < {first} + {loop_fs}");
    disk.fail();
    // The first read that meets the failure: EIO, and c is offline from then on.
    let out = sh_output(&format!("cat {}/orders/2/by-offset/21", mnt.display()));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Input/output error"), "{stderr}");
    let info = mount_info(&mnt);
    assert_eq!(info["log_dirs_offline"], "1", "{info:?}");
    assert_eq!(info["log_dir.2.state"], "offline");
    assert!(info["log_dir.2.error"].contains("Input/output error"), "{info:?}");
    // Every partition of c answers EIO without touching it; a and b go on, reads and appends.
    for file in
        ["solo/0/by-offset/0", "events/1/info", "orders/2/segments/00000000000000000020.log"]
    {
        let out = sh_output(&format!("cat {}/{file}", mnt.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Input/output error"), "{file}: {stderr}");
    }
    assert_eq!(read(&mnt.join("orders/0/by-offset/0")).lines().count(), 10);
    // The topics with a partition in c are still there, with their other partitions.
    let listing = common::sh(&format!("ls {}/events", mnt.display()));
    assert!(listing.contains("0\n1\n2\n"), "{listing}");
    assert_eq!(read(&mnt.join("events/0/by-offset/0")).lines().count(), 6);
    // A topic-level file needs every partition: EIO, naming nothing it cannot know.
    let out = sh_output(&format!("cat {}/events/offsets/-1", mnt.display()));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Input/output error"));
    fs::write(mnt.join("orders/1/append"), "after the failure\n").unwrap();
    assert!(read(&mnt.join("orders/1/by-offset/5")).contains("after the failure"));
    // A new topic lands on the dirs that are online.
    fs::create_dir(mnt.join("fresh")).unwrap();
    assert!(!c.join("fresh-0").exists());
    // The mount still ends cleanly; a and b are closed cleanly.
    let dirs = m.unmount();
    assert!(paths[0].join(".kafka_cleanshutdown").exists());
    assert!(paths[1].join(".kafka_cleanshutdown").exists());
    drop(disk);
    drop(dirs);
}

/// Group commits and reads go to `__consumer_offsets`, whichever dir holds it: when that dir's
/// disk fails under a commit, the commit fails with EIO and the dir goes offline (as for any
/// other partition); its groups then answer EIO, the groups of the other dirs go on.
#[test]
fn a_group_commit_that_meets_a_failed_disk_takes_its_dir_offline() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    // b (holding __consumer_offsets-1) on a file system of its own, which the test makes fail.
    let b = dirs.root.path().join("b-disk");
    let Some(disk) = LoopFs::new(&dirs.root.path().join("b.img"), &b) else { return };
    copy_tree(&paths[1], &b);
    let paths = vec![paths[0].clone(), b.clone(), paths[2].clone()];
    let m = mount(dirs, &paths, &[]);
    let mnt = m.mnt();
    // `audit` commits to __consumer_offsets-1; `solo` is all in c, so only the commit meets b.
    fs::create_dir_all(mnt.join("solo/groups/audit")).unwrap();
    let offsets = mnt.join("solo/groups/audit/offsets");
    common::sh(&format!("printf '0 1\\n' > {}", offsets.display()));
    assert!(read(&offsets).starts_with("0 1 "));
    // `fresh` commits to __consumer_offsets-0, in a.
    fs::create_dir_all(mnt.join("solo/groups/fresh")).unwrap();
    let in_a = mnt.join("solo/groups/fresh/offsets");
    common::sh(&format!("printf '0 2\\n' > {}", in_a.display()));
    disk.fail();
    let out = sh_output(&format!("printf '0 2\\n' > {}", offsets.display()));
    assert!(!out.status.success(), "the commit fails");
    let info = mount_info(&mnt);
    assert_eq!(info["log_dir.1.state"], "offline", "{info:?}");
    assert!(info["log_dir.1.error"].contains("Input/output error"), "{info:?}");
    let out = sh_output(&format!("cat {}", offsets.display()));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Input/output error"));
    assert!(read(&in_a).starts_with("0 2 "), "a group in a goes on");
    let dirs = m.unmount();
    drop(disk);
    drop(dirs);
}

/// fstab (`/data/a,/data/b  /mnt  fuse.topicfs  ro`): mount(8) runs the helper with the list as
/// its source; the mount's source in mountinfo is the list; `topicfs unmount` of a read-write
/// mount returns once every dir is closed cleanly.
#[test]
fn the_mount_helper_takes_the_list_of_dirs_as_fstab_gives_it() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    let link = dirs.root.path().join("mount.topicfs");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_topicfs"), &link).unwrap();
    let mut command = Command::new(&link);
    let log_file = dirs.root.path().join("topicfs.log");
    let options = format!("ro,defaults,log_file={}", log_file.display());
    command.arg(source(&paths)).arg(dirs.mnt()).args(["-n", "-o", &options]);
    let m = MountGuard::background_with(dirs, command);
    assert_eq!(read(&m.path("solo/0/by-offset/0")).lines().count(), 3);
    assert_eq!(read(&m.path("orders/1/by-offset/2")).lines().count(), 3);
    let line = common::sh(&format!("grep ' {} ' /proc/self/mountinfo", m.mnt().display()));
    let joined: Vec<String> =
        paths.iter().map(|p| p.canonicalize().unwrap().display().to_string()).collect();
    assert!(line.contains(&format!(" - fuse.topicfs {} ", joined.join(","))), "{line}");
    let dirs = m.unmount();
    // Read-write, ended by `topicfs unmount`, which waits for each dir's clean shutdown.
    for p in &paths {
        fs::remove_file(p.join(".kafka_cleanshutdown")).unwrap();
    }
    let mut command = common::topicfs();
    command.arg("mount").arg(source(&paths)).arg(dirs.mnt()).arg("--log-file").arg(&log_file);
    let m = MountGuard::background_with(dirs, command);
    fs::write(m.path("solo/0/append"), "x\n").unwrap();
    let status = common::topicfs().arg("unmount").arg(m.mnt()).status().unwrap();
    assert!(status.success());
    for p in &paths {
        assert!(p.join(".kafka_cleanshutdown").exists(), "{}", p.display());
    }
    drop(m.into_dirs());
}

/// The log cleaner runs in each dir with that dir's `cleaner-offset-checkpoint`: compacting
/// `__consumer_offsets` (a compacted topic) writes each dir's own partitions into its own file.
#[test]
fn the_cleaner_keeps_a_checkpoint_per_dir_for_the_partitions_it_holds() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    // Segments roll 100 ms after they start, so commits soon leave sealed segments to clean.
    let m = mount(dirs, &paths, &["--cleaner-backoff-ms", "50", "--config", "segment.ms=100"]);
    // `audit` commits to __consumer_offsets-1 (in b), `reporting` to -0 (in a).
    for round in 0..6 {
        fs::write(m.path("events/groups/audit/offsets"), format!("0 {}\n", round % 6)).unwrap();
        fs::write(m.path("orders/groups/reporting/offsets"), format!("0 {}\n", round % 6)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let has = |dir: &Path, entry: &str| {
        fs::read_to_string(dir.join("cleaner-offset-checkpoint"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with(entry))
    };
    common::wait_until("b's cleaner checkpoint to name __consumer_offsets 1", || {
        has(&paths[1], "__consumer_offsets 1 ")
    });
    let cleaned_to = |dir: &Path| -> i64 {
        fs::read_to_string(dir.join("cleaner-offset-checkpoint"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("__consumer_offsets 0 ").and_then(|o| o.parse().ok()))
            .unwrap_or(-1)
    };
    common::wait_until("a's cleaner checkpoint to pass offset 3", || cleaned_to(&paths[0]) > 3);
    let dirs = m.unmount();
    assert!(has(&paths[0], "__consumer_offsets 0 "), "a keeps its partition's entry");
    assert!(!has(&paths[0], "__consumer_offsets 1 "), "a holds no partition 1");
    assert!(!has(&paths[1], "__consumer_offsets 0 "), "b holds no partition 0");
    assert!(!has(&paths[2], "__consumer_offsets"), "c holds neither");
    drop(dirs);
}

/// The topics' settings do not depend on the order the dirs are given in (a broker's do not
/// depend on the order of `log.dirs`): an override written with the dirs given `a,b,c` is
/// kept in `a` and is in effect with them given `c,b,a` (shown in `config`, the topic's
/// settings known so retention deletes by time there, a topic without settings untouched);
/// a change made then goes to the same file.
#[test]
fn the_topics_settings_are_the_same_whatever_the_order_of_the_dirs() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    let settings = |p: &PathBuf| p.join("topicfs-topic-config");
    // a,b,c, retention off for the mount: nothing is deleted in this one.
    let m = mount(dirs, &paths, &["--config", "retention.ms=-1"]);
    let config = m.path("orders/config");
    // The override, and the policy line that makes orders' settings known.
    common::sh(&format!(
        "printf 'max.message.bytes=2000000\\ncleanup.policy=delete\\n' >> '{}'",
        config.display()
    ));
    assert!(read(&config).contains("max.message.bytes=2000000 # override\n"));
    let dirs = m.unmount();
    let held: Vec<bool> = paths.iter().map(|p| settings(p).exists()).collect();
    assert_eq!(held, [true, false, false]);
    // c,b,a, retention of 1 s: orders' settings are known (its override is there), so its
    // old segments go; events' are not (no entry, no broker metadata), so its stay.
    let reversed: Vec<PathBuf> = paths.iter().rev().cloned().collect();
    let args = ["--config", "retention.ms=1000", "--retention-check-interval-ms", "1000"];
    let m = mount(dirs, &reversed, &args);
    let config = m.path("orders/config");
    assert!(read(&config).contains("max.message.bytes=2000000 # override\n"));
    let first_segment = paths[0].join("orders-0/00000000000000000000.log");
    common::wait_until("retention to delete orders-0's first segment (in a)", || {
        !first_segment.exists()
    });
    assert!(paths[1].join("events-0/00000000000000000000.log").exists(), "events unknown");
    common::sh(&format!("echo retention.bytes=999999999 >> '{}'", config.display()));
    let shown = read(&config);
    assert!(shown.contains("retention.bytes=999999999 # override\n"), "{shown}");
    let dirs = m.unmount();
    let held: Vec<bool> = paths.iter().map(|p| settings(p).exists()).collect();
    assert_eq!(held, [true, false, false], "the change went to a's file");
    // a,b,c again, under the same defaults: the same config.
    let m = mount(dirs, &paths, &["--read-only", "--config", "retention.ms=1000"]);
    assert_eq!(read(&m.path("orders/config")), shown);
    m.unmount();
}

/// Two dirs each holding an overrides file that differ: taken as damage (no override read,
/// `config` writes fail with EIO), both files left as they are.
#[test]
fn two_differing_overrides_files_in_the_dirs_are_damage_and_kept() {
    let dirs = Dirs::new();
    let paths = copy_fixture(&dirs);
    let header = "# topicfs topic settings: <topic> [name=value ...]; a Kafka broker ignores this \
                  file\nversion 1\n";
    let a = format!("{header}orders retention.ms=111\n");
    let c = format!("{header}orders retention.ms=222\n");
    fs::write(paths[0].join("topicfs-topic-config"), &a).unwrap();
    fs::write(paths[2].join("topicfs-topic-config"), &c).unwrap();
    let m = mount(dirs, &paths, &["--config", "retention.ms=-1"]);
    let config = m.path("orders/config");
    let shown = read(&config);
    assert!(shown.contains("retention.ms=-1 # mount-default"), "{shown}");
    let written = fs::OpenOptions::new()
        .append(true)
        .open(&config)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"retention.ms=5\n"));
    assert_eq!(written.err().and_then(|e| e.raw_os_error()), Some(libc::EIO));
    let dirs = m.unmount();
    assert_eq!(read(&paths[0].join("topicfs-topic-config")), a);
    assert_eq!(read(&paths[2].join("topicfs-topic-config")), c);
    drop(dirs);
}
