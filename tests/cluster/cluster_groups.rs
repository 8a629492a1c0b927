//! Consumer groups on a cluster mount (`<topic>/groups/`, backend `cluster::ClusterGroups`:
//! FindCoordinator, OffsetFetch, OffsetCommit as a standalone committer, ListGroups) against a
//! real broker, tansu 0.6.0 with its SQLite engine (`common::tansu::Tansu`, one per test):
//!
//! - the filesystem logic (`TopicFs`, no kernel): mkdir, commit, read back, `next` from the
//!   committed offset, lag, bad commits refused whole;
//! - real mounts driven with shell tools: the same, and the README loop
//!   (`doc/examples/consume-group.sh`) with two groups at once;
//! - confluent-kafka (librdkafka, `tests/compat/confluent_groups.py`) as the independent
//!   client: what the mount commits is its `committed()`, what it commits shows in `offsets`;
//! - a commit through the mount while a confluent-kafka consumer is an active member: what
//!   tansu does (it accepts it; Kafka refuses it, which the mount reports as EBUSY naming the
//!   group's state: doc/cluster-brokers.md).
//!
//! Needs the venv (`TOPICFS_PYTHON`, with confluent-kafka), jq, /dev/fuse and the broker, all
//! made by `scripts/install-deps`.

use crate::common;

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

use common::tansu::Tansu;
use common::{Dirs, MountGuard, run_group_loop, sh, sh_output, spawn_group_loops};
use serde_json::{Value, json};
use topicfs::Error;
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterGroups, ClusterSource};
use topicfs::format::NewRecord;
use topicfs::fs::attr::{DirEntry, OpenRequest};
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{FsOptions, TopicFs};
use topicfs::source::{GroupStore, TopicSource};
use topicfs::view::groups::ResetPolicy;

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: true };

fn python() -> String {
    std::env::var("TOPICFS_PYTHON").unwrap_or_else(|_| "/opt/topicfs-venv/bin/python".into())
}

fn groups_script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compat/confluent_groups.py")
}

/// Runs `confluent_groups.py ARGS...` to its end; its JSON answer.
fn confluent(args: &[&str]) -> Value {
    let out = Command::new(python()).arg(groups_script()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "confluent_groups {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn client(broker: &Tansu) -> Arc<Client> {
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=10000").unwrap();
    Arc::new(Client::connect(parse_bootstrap(&broker.bootstrap()).unwrap(), config).unwrap())
}

/// Topic `t` with `partitions` partitions holding `records` values `<p>-<i>` each.
fn seed(c: &Client, partitions: i32, records: usize) {
    c.create_topic("t", partitions, &[]).unwrap();
    for p in 0..partitions {
        produce(c, p, 0..records);
    }
}

fn produce(c: &Client, p: i32, range: std::ops::Range<usize>) {
    let records: Vec<NewRecord> = range
        .map(|i| NewRecord { value: Some(format!("{p}-{i}").into_bytes()), ..NewRecord::default() })
        .collect();
    c.produce("t", p, &records).unwrap();
}

// ---- the filesystem logic, no kernel --------------------------------------------------------

struct Fixture {
    fs: TopicFs,
    client: Arc<Client>,
    _broker: Tansu,
}

fn fixture(partitions: i32, records: usize) -> Fixture {
    let broker = Tansu::start();
    let client = client(&broker);
    seed(&client, partitions, records);
    let source = Arc::new(ClusterSource::new(Arc::clone(&client), false));
    let options = FsOptions {
        read_only: false,
        partitions_per_topic: 1,
        max_line_bytes: 1 << 20,
        uid: 0,
        gid: 0,
        file_mode: topicfs::fs::DEFAULT_FILE_MODE,
        dir_mode: topicfs::fs::DEFAULT_DIR_MODE,
    };
    let groups = Arc::new(ClusterGroups::new(Arc::clone(&client)));
    let fs = TopicFs::new(source as Arc<dyn TopicSource>, options)
        .with_groups(groups, ResetPolicy::Earliest);
    Fixture { fs, client, _broker: broker }
}

impl Fixture {
    fn ino(&self, path: &str) -> Result<u64, Error> {
        let mut ino = ROOT_INO;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            ino = self.fs.lookup(ino, OsStr::new(name))?.attr.ino;
        }
        Ok(ino)
    }

    fn read(&self, path: &str) -> String {
        let fh = self.fs.open(self.ino(path).unwrap(), READ).unwrap().fh;
        let mut out = Vec::new();
        loop {
            let chunk = self.fs.read(fh, out.len() as u64, 4096).unwrap();
            if chunk.is_empty() {
                break;
            }
            out.extend(chunk);
        }
        self.fs.release(fh).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// One `write()` of `data` to `path` (opened as `>` opens it).
    fn write(&self, path: &str, data: &str) -> Result<(), Error> {
        let fh = self.fs.open(self.ino(path)?, WRITE)?.fh;
        let written = self.fs.write(fh, data.as_bytes(), None);
        self.fs.flush(fh, None)?;
        self.fs.release(fh)?;
        written.map(drop)
    }

    fn names(&self, path: &str) -> Vec<String> {
        let ino = self.ino(path).unwrap();
        let fh = self.fs.opendir(ino).unwrap().fh;
        let mut names = Vec::new();
        self.fs
            .readdir(ino, fh, 0, &mut |e: &DirEntry| {
                names.push(e.name.clone());
                false
            })
            .unwrap();
        self.fs.releasedir(fh).unwrap();
        names.retain(|n| n != "." && n != "..");
        names
    }

    /// What the broker has committed for `group` on `t` (OffsetFetch), by partition.
    fn broker_committed(&self, group: &str) -> Vec<(u32, i64)> {
        let store = ClusterGroups::new(Arc::clone(&self.client));
        store.committed(group, "t").unwrap().into_iter().map(|(p, c)| (p, c.offset.0)).collect()
    }
}

#[test]
fn cluster_groups_fs_commit_read_back_next_and_lag() {
    let f = fixture(2, 5);
    assert!(f.names("t").contains(&"groups".to_string()));
    assert!(f.names("t/groups").is_empty());
    f.fs.mkdir(f.ino("t/groups").unwrap(), OsStr::new("etl")).unwrap();
    let err = f.fs.mkdir(f.ino("t/groups").unwrap(), OsStr::new("etl")).unwrap_err();
    assert_eq!(err.errno(), libc::EEXIST);
    assert_eq!(f.names("t/groups"), ["etl"]);
    let mut listing = f.names("t/groups/etl");
    listing.sort();
    assert_eq!(listing, ["0", "1", "auto.offset.reset", "offsets"]);
    // No commit yet: "-" for the committed offset and the lag; next starts at the log start.
    assert_eq!(f.read("t/groups/etl/offsets"), "0 - 5 -\n1 - 5 -\n");
    assert_eq!(f.read("t/groups/etl/0/next"), "0-0\n0-1\n0-2\n0-3\n0-4\n");
    assert!(f.broker_committed("etl").is_empty(), "mkdir commits nothing");

    // One write, two partitions, both forms of line.
    f.write("t/groups/etl/offsets", "0 2\nt:1:5\n").unwrap();
    assert_eq!(f.broker_committed("etl"), [(0, 2), (1, 5)], "OffsetCommit reached the broker");
    assert_eq!(f.read("t/groups/etl/offsets"), "0 2 5 3\n1 5 5 0\n");
    assert_eq!(f.read("t/groups/etl/0/next"), "0-2\n0-3\n0-4\n");
    assert_eq!(f.read("t/groups/etl/1/next"), "");
    let json = f.read("t/groups/etl/0/next.json");
    let offsets: Vec<i64> = json
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [2, 3, 4]);

    // More records: the lag grows, next reaches them; a rewind is a commit like any other.
    produce(&f.client, 0, 5..8);
    assert_eq!(f.read("t/groups/etl/offsets"), "0 2 8 6\n1 5 5 0\n");
    assert_eq!(f.read("t/groups/etl/0/next"), "0-2\n0-3\n0-4\n0-5\n0-6\n0-7\n");
    f.write("t/groups/etl/offsets", "0 0\n").unwrap();
    assert_eq!(f.broker_committed("etl"), [(0, 0), (1, 5)]);

    // A group committed by another client (here the client directly, as a standalone
    // committer) is listed, with its offsets, without mkdir.
    f.client.commit_offsets("other", "t", &[(1, 3, None)]).unwrap();
    assert_eq!(f.names("t/groups"), ["etl", "other"]);
    assert_eq!(f.read("t/groups/other/offsets"), "0 - 8 -\n1 3 5 2\n");
}

#[test]
fn cluster_groups_fs_bad_commits_are_einval_and_commit_nothing() {
    let f = fixture(2, 5);
    f.fs.mkdir(f.ino("t/groups").unwrap(), OsStr::new("etl")).unwrap();
    f.write("t/groups/etl/offsets", "0 1\n1 1\n").unwrap();
    // Each write has a good line first: nothing of it may be committed.
    for bad in [
        "0 3\nnonsense\n",  // malformed
        "0 3\n7 1\n",       // a partition that does not exist
        "0 3\n1 6\n",       // above the log end
        "0 3\n1 -1\n",      // below the log start
        "0 3\nother:1:2\n", // another topic
        "0 3\n1 2 3\n",     // too many fields
    ] {
        let err = f.write("t/groups/etl/offsets", bad).unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL, "{bad:?}: {err}");
        assert_eq!(f.broker_committed("etl"), [(0, 1), (1, 1)], "{bad:?} committed something");
    }
    assert_eq!(f.read("t/groups/etl/offsets"), "0 1 5 4\n1 1 5 4\n");
    // The log end itself is a valid commit (nothing left to process).
    f.write("t/groups/etl/offsets", "0 5\n").unwrap();
    assert_eq!(f.broker_committed("etl"), [(0, 5), (1, 1)]);
}

// ---- real mounts ----------------------------------------------------------------------------

fn mount(broker: &Tansu, args: &[&str]) -> MountGuard {
    let mut all = vec!["--config", "request.timeout.ms=10000"];
    all.extend_from_slice(args);
    let source = OsString::from(broker.bootstrap());
    MountGuard::foreground_source(Dirs::new(), &source, &all, Stdio::inherit())
}

fn read(m: &MountGuard, rel: &str) -> String {
    std::fs::read_to_string(m.path(rel)).unwrap()
}

/// `printf TEXT > MNT/REL` (one `write()`); the shell's status and stderr.
fn commit(m: &MountGuard, rel: &str, text: &str) -> (bool, String) {
    let out = sh_output(&format!("printf '{text}' > {}", m.path(rel).display()));
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// One `write()` of `text` to `rel` (opened with `O_TRUNC`, as `>` does); the errno on failure
/// (dash's `printf` reports every failed write as "I/O error").
fn write(m: &MountGuard, rel: &str, text: &str) -> Result<(), i32> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m.path(rel))
        .map_err(|e| e.raw_os_error().unwrap_or(0))?;
    let n = file.write(text.as_bytes()).map_err(|e| e.raw_os_error().unwrap_or(0))?;
    assert_eq!(n, text.len(), "one write");
    Ok(())
}

#[test]
fn cluster_groups_mount_shell_commit_resume_and_lag() {
    let broker = Tansu::start();
    seed(&client(&broker), 2, 4);
    let m = mount(&broker, &[]);
    let g = m.path("t/groups/etl");
    let g = g.display();
    sh(&format!("mkdir -p {g} && mkdir -p {g}"));
    assert_eq!(sh(&format!("ls {}", m.path("t/groups").display())), "etl\n");
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 - 4 -\n1 - 4 -\n");
    assert_eq!(sh(&format!("cat {g}/1/next")), "1-0\n1-1\n1-2\n1-3\n");
    assert!(commit(&m, "t/groups/etl/offsets", "0 3\\n1 1\\n").0);
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 3 4 1\n1 1 4 3\n");
    assert_eq!(sh(&format!("cat {g}/0/next")), "0-3\n");
    assert_eq!(sh(&format!("wc -l < {g}/1/next")).trim(), "3");
    assert_eq!(sh(&format!("jq -r .payload {g}/1/next.json | head -n 1")), "1-1\n");
    // Lag, as kafka-consumer-groups --describe computes it, with awk.
    assert_eq!(sh(&format!("awk '{{s += $4}} END {{print s}}' {g}/offsets")), "4\n");
    // Refused whole, with EINVAL.
    assert_eq!(write(&m, "t/groups/etl/offsets", "0 4\n1 9\n"), Err(libc::EINVAL));
    assert_eq!(write(&m, "t/groups/etl/offsets", "0 x\n"), Err(libc::EINVAL));
    assert_eq!(write(&m, "t/groups/etl/offsets", "2 1\n"), Err(libc::EINVAL));
    let (ok, _) = commit(&m, "t/groups/etl/offsets", "0 4\\n1 9\\n");
    assert!(!ok, "the shell sees the refusal");
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 3 4 1\n1 1 4 3\n");
    // A remount sees the broker's commits: nothing was held in the daemon.
    let dirs = m.unmount();
    let m = MountGuard::foreground_source(
        dirs,
        &OsString::from(broker.bootstrap()),
        &["--config", "request.timeout.ms=10000"],
        Stdio::inherit(),
    );
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 3 4 1\n1 1 4 3\n");
    assert_eq!(sh(&format!("cat {}", m.path("t/groups/etl/0/next").display())), "0-3\n");
    m.unmount();
}

#[test]
fn cluster_groups_commits_interoperate_with_confluent_kafka() {
    let broker = Tansu::start();
    seed(&client(&broker), 2, 6);
    let m = mount(&broker, &[]);
    let addr = broker.addr();
    // Through the mount, then confluent-kafka's committed().
    sh(&format!("mkdir {}", m.path("t/groups/etl").display()));
    assert!(commit(&m, "t/groups/etl/offsets", "0 4\\n1 2\\n").0);
    assert_eq!(confluent(&["committed", &addr, "etl", "t", "2"]), json!({"0": 4, "1": 2}));
    // A group that never committed: no offsets on either side.
    assert_eq!(confluent(&["committed", &addr, "none", "t", "2"]), json!({"0": null, "1": null}));
    // Committed by confluent-kafka (a standalone consumer with assign()), then the mount.
    assert_eq!(confluent(&["commit", &addr, "audit", "t", "0:5", "1:1"]), json!({"0": 5, "1": 1}));
    assert_eq!(sh(&format!("ls {}", m.path("t/groups").display())), "audit\netl\n");
    assert_eq!(read(&m, "t/groups/audit/offsets"), "0 5 6 1\n1 1 6 5\n");
    assert_eq!(sh(&format!("cat {}", m.path("t/groups/audit/0/next").display())), "0-5\n");
    // And back: the mount moves confluent-kafka's group.
    assert!(commit(&m, "t/groups/audit/offsets", "1 6\\n").0);
    assert_eq!(confluent(&["committed", &addr, "audit", "t", "2"]), json!({"0": 5, "1": 6}));
    m.unmount();
}

/// A confluent-kafka consumer that joined a group (`confluent_groups.py member`); closed (and
/// killed if it does not answer) on drop.
struct Member {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Member {
    fn join(bootstrap: &str, group: &str, topic: &str) -> (Member, Value) {
        let mut child = Command::new(python())
            .arg(groups_script())
            .args(["member", bootstrap, group, topic])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut member = Member { child, stdin, stdout };
        let joined = member.answer();
        (member, joined)
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the confluent-kafka member exited");
        serde_json::from_str(&line).unwrap()
    }

    fn ask(&mut self, command: &str) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.answer()
    }

    fn close(mut self) {
        assert_eq!(self.ask("close"), json!({"closed": true}));
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Kafka refuses a standalone commit (generation -1, no member id) while the group has active
/// members, and the mount turns that into EBUSY naming the group's state (unit-tested in
/// `cluster::source`). tansu 0.6 does not refuse it: this pins what it does instead
/// (doc/cluster-brokers.md), so a change in the broker shows here.
#[test]
fn cluster_groups_commit_while_a_confluent_consumer_is_a_member() {
    let broker = Tansu::start();
    let c = client(&broker);
    seed(&c, 1, 5);
    let m = mount(&broker, &[]);
    let (mut member, joined) = Member::join(&broker.addr(), "live", "t");
    assert_eq!(joined["assignment"], json!([["t", 0]]), "{joined}");
    // The member's group, as the broker reports it while the member is active: listed, and
    // (tansu) with the state "unknown" (Kafka: "Stable"); no commit yet, so the mount
    // does not list it under t/groups.
    let listing = c.list_groups().unwrap();
    let live = listing.iter().find(|g| g.group_id == "live").expect("ListGroups lists it");
    assert_eq!(
        (live.protocol_type.as_str(), live.state.as_str()),
        ("consumer", "unknown"),
        "{live:?}"
    );
    assert_eq!(sh(&format!("ls {}", m.path("t/groups").display())), "");
    // The member commits 2 with its generation.
    assert_eq!(member.ask("commit 0:2"), json!({"0": 2}));
    assert_eq!(read(&m, "t/groups/live/offsets"), "0 2 5 3\n");
    // The mount commits 4 as a standalone committer while the member is active: Kafka would
    // answer UNKNOWN_MEMBER_ID (EBUSY); tansu stores it, and the member sees it.
    let (ok, stderr) = commit(&m, "t/groups/live/offsets", "0 4\\n");
    assert!(ok, "tansu 0.6 accepts a standalone commit to a group with members: {stderr}");
    assert_eq!(member.ask("committed"), json!({"0": 4}));
    assert_eq!(read(&m, "t/groups/live/offsets"), "0 4 5 1\n");
    // The member's next commit wins again (latest commit per partition).
    assert_eq!(member.ask("commit 0:3"), json!({"0": 3}));
    assert_eq!(read(&m, "t/groups/live/offsets"), "0 3 5 2\n");
    member.close();
    m.unmount();
}

fn all_records(partitions: i32, records: usize) -> Vec<String> {
    let mut all: Vec<String> =
        (0..partitions).flat_map(|p| (0..records).map(move |i| format!("{p}-{i}"))).collect();
    all.sort();
    all
}

#[test]
fn cluster_groups_readme_loop_two_groups_at_once() {
    let broker = Tansu::start();
    let c = client(&broker);
    seed(&c, 3, 10);
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let root = m.dirs_root();
    // Each script runs the loop 4 times while records keep coming.
    let (children, outs) = spawn_group_loops(&mnt, &root, &["etl", "audit"], 4);
    for round in 0..4 {
        for p in 0..3 {
            // Through the mount's append, as a shell producer would.
            let lines: String =
                (10 + round * 3..13 + round * 3).map(|i| format!("{p}-{i}\n")).collect();
            std::fs::write(m.path(&format!("t/{p}/append")), lines).unwrap();
        }
    }
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for (group, out, command) in &outs {
        // A last run after the writes ended picks up the rest.
        assert!(run_group_loop(&m, group, command));
        let mut got: Vec<String> =
            std::fs::read_to_string(out).unwrap().lines().map(str::to_string).collect();
        got.sort();
        assert_eq!(got, all_records(3, 22), "{group}: every record exactly once");
        assert_eq!(
            read(&m, &format!("t/groups/{group}/offsets")),
            "0 22 22 0\n1 22 22 0\n2 22 22 0\n"
        );
        // What the loop committed is the group's position for any Kafka client.
        assert_eq!(
            confluent(&["committed", &broker.addr(), group, "t", "3"]),
            json!({"0": 22, "1": 22, "2": 22})
        );
    }
    assert_eq!(sh(&format!("ls {}", m.path("t/groups").display())), "audit\netl\n");
    // Nothing new: a run processes nothing and commits nothing.
    let (group, out, command) = &outs[0];
    assert!(run_group_loop(&m, group, command));
    assert_eq!(std::fs::read_to_string(out).unwrap().lines().count(), 66);
    m.unmount();
}
